//! Packed sequences beyond their PyTorch goldens (`nn_goldens`): each
//! sequence of a packed batch runs as if alone, gradients by finite
//! differences, round trips, and the errors.

use crate::common::panic_message;
use tapir::gradcheck;
use tapir::nn::{
    GRU, LSTM, RnnOptions, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence,
};
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

#[test]
fn each_packed_sequence_runs_as_if_alone() {
    let opts = RnnOptions {
        num_layers: 2,
        bidirectional: true,
        ..Default::default()
    };
    let mut lstm = LSTM::new(3, 4, opts);
    lstm.to_dtype(DType::F64);
    let seqs: Vec<Tensor> = [3, 5, 1, 5]
        .iter()
        .map(|&l| rnd(&[l, 3], l as u64 + 7))
        .collect();
    let (out, (h, c)) = lstm.forward_packed(&pack_sequence(&seqs, false), None);
    let (padded, lengths) = pad_packed_sequence(&out, true, 0.0, None);
    assert_eq!(lengths.to_vec::<i64>(), [3, 5, 1, 5]);
    for (b, s) in seqs.iter().enumerate() {
        let (alone, (h1, c1)) = lstm.forward(&s.unsqueeze(1), None);
        let l = s.size(0);
        let got = padded.select(0, b as isize).narrow(0, 0, l);
        assert!(
            got.allclose(&alone.squeeze_dim(1), 1e-12, 1e-12),
            "sequence {b}"
        );
        assert!(h.narrow(1, b, 1).allclose(&h1, 1e-12, 1e-12), "h_n of {b}");
        assert!(c.narrow(1, b, 1).allclose(&c1, 1e-12, 1e-12), "c_n of {b}");
        // Past its end, the padding value.
        let rest = padded.select(0, b as isize).narrow(0, l, 5 - l);
        assert_eq!(rest.abs().sum().item::<f64>(), 0.0);
    }
}

#[test]
fn packed_gru_gradients_match_finite_differences() {
    let mut gru = GRU::new(2, 3, RnnOptions::default());
    gru.to_dtype(DType::F64);
    let x = rnd(&[4, 3, 2], 1).requires_grad_(true);
    let h0 = rnd(&[1, 3, 3], 2).requires_grad_(true);
    let f = |t: &[Tensor]| {
        let packed = pack_padded_sequence(&t[0], &[3, 4, 1], false, false);
        let (out, h) = gru.forward_packed(&packed, Some(&t[1]));
        let w = Tensor::arange_f(0.0, out.data.numel() as f64, 1.0)
            .to_dtype(DType::F64)
            .reshape(&[-1, 3]);
        &(&out.data * &(&w * 0.7).sin()).sum() + &h.sum()
    };
    gradcheck(f, &[x.clone(), h0], 1e-6, 1e-6, 1e-5).unwrap();
    // Steps past a sequence's end are padding: no gradient reaches them.
    f(&[x.clone(), rnd(&[1, 3, 3], 2)]).backward();
    let g = x.grad().unwrap();
    assert_eq!(
        g.narrow(0, 1, 3).select(1, 2).abs().sum().item::<f64>(),
        0.0
    );
    assert_ne!(g.select(0, 3).select(0, 1).abs().sum().item::<f64>(), 0.0);
}

#[test]
fn pack_and_pad_round_trip_in_either_layout() {
    let x = rnd(&[3, 4, 2], 3); // [B, T, *]
    let lengths = [2, 4, 3];
    let packed = pack_padded_sequence(&x, &lengths, true, false);
    assert_eq!(packed.batch_sizes, [3, 3, 2, 1]);
    assert_eq!(packed.sorted_indices.as_deref(), Some(&[1, 2, 0][..]));
    assert_eq!(packed.unsorted_indices.as_deref(), Some(&[2, 0, 1][..]));
    let (back, got_lengths) = pad_packed_sequence(&packed, true, 0.0, Some(6));
    assert_eq!(back.shape(), &[3, 6, 2]);
    assert_eq!(got_lengths.to_vec::<i64>(), [2, 4, 3]);
    for (b, &l) in lengths.iter().enumerate() {
        let row = back.select(0, b as isize);
        assert!(
            row.narrow(0, 0, l)
                .equal(&x.select(0, b as isize).narrow(0, 0, l))
        );
        assert_eq!(row.narrow(0, l, 6 - l).abs().sum().item::<f64>(), 0.0);
    }
    let seqs = [rnd(&[2, 2], 4), rnd(&[3, 2], 5)];
    let padded = pad_sequence(&seqs, false, -1.0);
    assert_eq!(padded.shape(), &[3, 2, 2]);
    assert_eq!(
        padded.select(0, 2).select(0, 0).to_vec::<f64>(),
        [-1.0, -1.0]
    );
}

#[test]
fn bad_lengths_name_the_function_and_the_lengths() {
    let x = Tensor::zeros(&[4, 3, 2]);
    let m = panic_message(|| {
        pack_padded_sequence(&x, &[2, 4, 1], false, true);
    });
    assert_eq!(
        m,
        "pack_padded_sequence: lengths [2, 4, 1] must be non-increasing when enforce_sorted is true (pass false to sort them)"
    );
    let m = panic_message(|| {
        pack_padded_sequence(&x, &[4, 0, 1], false, false);
    });
    assert_eq!(
        m,
        "pack_padded_sequence: every length must be in 1..=4 (the padded length), got [4, 0, 1]"
    );
    let m = panic_message(|| {
        pack_padded_sequence(&x, &[4, 2], false, false);
    });
    assert_eq!(
        m,
        "pack_padded_sequence: input [4, 3, 2] ([T, B, *]) has no batch of 2 lengths"
    );
    let m = panic_message(|| {
        let p = pack_padded_sequence(&x, &[4, 2, 1], false, true);
        pad_packed_sequence(&p, false, 0.0, Some(3));
    });
    assert_eq!(
        m,
        "pad_packed_sequence: total_length 3 is shorter than the longest sequence (4)"
    );
    let m = panic_message(|| {
        let p = pack_padded_sequence(&x, &[4, 2, 1], false, true);
        GRU::new(3, 5, RnnOptions::default()).forward_packed(&p, None);
    });
    assert_eq!(
        m,
        "GRU: expected packed data [sum of lengths, 3], got [7, 2]"
    );
}

#[test]
fn unpacking_and_unpadding_give_back_the_sequences() {
    use tapir::nn::{unpack_sequence, unpad_sequence};
    let seqs: Vec<Tensor> = [2, 5, 3].iter().map(|&l| rnd(&[l, 2], l as u64)).collect();
    for (got, want) in unpack_sequence(&pack_sequence(&seqs, false))
        .iter()
        .zip(&seqs)
    {
        assert!(got.equal(want));
    }
    let padded = pad_sequence(&seqs, false, 7.0);
    for (got, want) in unpad_sequence(&padded, &[2, 5, 3], false).iter().zip(&seqs) {
        assert!(got.equal(want));
    }
    let m = panic_message(|| {
        unpad_sequence(&padded, &[2, 6, 3], false);
    });
    assert_eq!(
        m,
        "unpad_sequence: padded [5, 3, 2] ([T, B, *]) does not hold sequences of lengths [2, 6, 3]"
    );
}
