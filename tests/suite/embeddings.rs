//! `EmbeddingBag`, `Embedding`'s `max_norm` and `from_pretrained`, and
//! `LPPool` beyond their PyTorch goldens (`nn_goldens`): gradients by
//! finite differences, the offsets' errors, reprs, and the infinities
//! that `amax` (max-mode bags) must carry without NaN.

use crate::common::panic_message;
use tapir::gradcheck;
use tapir::nn::{
    BagMode, BagOptions, Embedding, EmbeddingBag, Forward, LPPool1d, LPPool2d, Module,
    embedding_bag, lp_pool2d,
};
use tapir::prelude::*;

fn ids(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

fn table(rows: usize, cols: usize, seed: u64) -> Tensor {
    Tensor::randn_with(&[rows, cols], &Generator::new(seed)).to_dtype(DType::F64)
}

/// Weights that make every output element count differently.
fn mixed(y: &Tensor) -> Tensor {
    let w = Tensor::arange_f(0.0, y.numel() as f64, 1.0)
        .to_dtype(y.dtype())
        .reshape(&y.shape().iter().map(|&d| d as isize).collect::<Vec<_>>());
    (y * &(&w * 0.3).cos()).sum()
}

#[test]
fn bag_gradients_match_finite_differences_in_every_mode() {
    let w = table(7, 3, 1).requires_grad_(true);
    let psw = Tensor::randn_with(&[6], &Generator::new(2))
        .to_dtype(DType::F64)
        .requires_grad_(true);
    let (input, offsets) = (ids(&[1, 3, 3, 0, 6, 2]), ids(&[0, 2, 2, 5]));
    for mode in [BagMode::Sum, BagMode::Mean, BagMode::Max] {
        let f = |t: &[Tensor]| {
            let opts = BagOptions {
                offsets: Some(&offsets),
                mode,
                per_sample_weights: (mode == BagMode::Sum).then_some(&t[1]),
                padding_idx: Some(0),
                ..Default::default()
            };
            mixed(&embedding_bag(&input, &t[0], &opts))
        };
        gradcheck(f, &[w.clone(), psw.clone()], 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

#[test]
fn bags_leave_out_padding_and_give_empty_bags_zeros() {
    let w = Tensor::arange_f(1.0, 9.0, 1.0).reshape(&[4, 2]);
    let input = ids(&[0, 2, 0, 3, 1]);
    let run = |mode, offs: &[i64]| {
        let o = ids(offs);
        let opts = BagOptions {
            offsets: Some(&o),
            mode,
            padding_idx: Some(0),
            ..Default::default()
        };
        embedding_bag(&input, &w, &opts).to_vec::<f32>()
    };
    // Bags [0, 2], [], [0, 3, 1]: the padding id 0 counts for nothing.
    assert_eq!(
        run(BagMode::Sum, &[0, 2, 2]),
        [5.0, 6.0, 0.0, 0.0, 10.0, 12.0]
    );
    assert_eq!(
        run(BagMode::Mean, &[0, 2, 2]),
        [5.0, 6.0, 0.0, 0.0, 5.0, 6.0]
    );
    assert_eq!(
        run(BagMode::Max, &[0, 2, 2]),
        [5.0, 6.0, 0.0, 0.0, 7.0, 8.0]
    );
    // A bag of padding only is empty too.
    assert_eq!(run(BagMode::Max, &[0, 1]), [0.0, 0.0, 7.0, 8.0]);
    let none = Tensor::from_vec(Vec::<i64>::new(), &[0]);
    let o = ids(&[0, 0]);
    let opts = BagOptions {
        offsets: Some(&o),
        ..Default::default()
    };
    assert_eq!(embedding_bag(&none, &w, &opts).to_vec::<f32>(), [0.0; 4]);
}

#[test]
fn bad_offsets_and_options_name_the_op_and_the_values() {
    let w = Tensor::zeros(&[5, 2]);
    let input = ids(&[1, 2, 3]);
    let with = |offs: Vec<i64>, last| {
        let o = Tensor::from_vec(offs.clone(), &[offs.len()]);
        let (input, w) = (input.clone(), w.clone());
        panic_message(move || {
            let opts = BagOptions {
                offsets: Some(&o),
                include_last_offset: last,
                ..Default::default()
            };
            embedding_bag(&input, &w, &opts);
        })
    };
    assert_eq!(
        with(vec![1, 2], false),
        "embedding_bag: offsets[0] must be 0 (the first bag starts the input), got 1"
    );
    assert_eq!(
        with(vec![0, 2, 1], false),
        "embedding_bag: offsets must be non-decreasing, got 2 before 1"
    );
    assert_eq!(
        with(vec![0, 4], true),
        "embedding_bag: offsets[-1] = 4 is past the input's length 3"
    );
    let m = panic_message(|| {
        let psw = Tensor::ones(&[3]);
        let o = ids(&[0]);
        let opts = BagOptions {
            offsets: Some(&o),
            per_sample_weights: Some(&psw),
            ..Default::default()
        };
        embedding_bag(&input, &w, &opts);
    });
    assert_eq!(
        m,
        "embedding_bag: per_sample_weights is only supported for mode 'sum', got mode 'mean'"
    );
    let m = panic_message(|| {
        embedding_bag(&input, &w, &BagOptions::default());
    });
    assert_eq!(
        m,
        "embedding_bag: input must be 2-D, or 1-D with offsets, got [3] (offsets None)"
    );
    let m = panic_message(|| {
        EmbeddingBag::new(5, 2, BagMode::Sum, None)
            .forward(&input.to_dtype(DType::U8).reshape(&[1, 3]));
    });
    assert_eq!(m, "embedding_bag: ids must be int64, got uint8 [1, 3]");
}

#[test]
fn two_d_input_is_one_bag_per_row_and_matches_offsets() {
    let bag = EmbeddingBag::new(9, 4, BagMode::Max, None);
    let grid = Tensor::from_vec(vec![3i64, 1, 8, 0, 0, 5], &[2, 3]);
    let by_rows = bag.forward(&grid);
    let by_offsets = bag.forward_bags(&grid.flatten_all(), Some(&ids(&[0, 3])), None);
    assert_eq!(by_rows.shape(), &[2, 4]);
    assert_eq!(by_rows.to_vec::<f32>(), by_offsets.to_vec::<f32>());
    assert_eq!(
        bag.to_string(),
        "EmbeddingBag(9, 4, mode='max')",
        "as print(nn.EmbeddingBag(9, 4, mode='max'))"
    );
    let bag = EmbeddingBag::new(9, 4, BagMode::Mean, Some(1))
        .max_norm(2.0)
        .norm_type(1.0);
    assert_eq!(
        bag.repr(),
        "EmbeddingBag(9, 4, max_norm=2.0, norm_type=1.0, mode='mean', padding_idx=1)"
    );
    assert_eq!(bag.weight.select(0, 1).abs().sum().item::<f32>(), 0.0);
}

#[test]
fn max_norm_rescales_only_the_rows_looked_up() {
    let e = Embedding::from_pretrained(&(&table(4, 3, 3) * 10.0), false, None)
        .max_norm(1.5)
        .norm_type(3.0);
    let before = e.weight.detach().to_vec::<f64>();
    let y = e.forward(&ids(&[2, 0, 2]));
    let norms = e
        .weight
        .detach()
        .norm_dims(3.0, &[1], false)
        .to_vec::<f64>();
    let after = e.weight.detach().to_vec::<f64>();
    for (row, &n) in norms.iter().enumerate() {
        if row == 0 || row == 2 {
            assert!((n - 1.5).abs() < 1e-6, "row {row} has norm {n}");
        } else {
            assert_eq!(after[row * 3..][..3], before[row * 3..][..3], "row {row}");
        }
    }
    // The lookup reads the rescaled rows, and the gradient reaches them.
    assert_eq!(y.select(0, 0).to_vec::<f64>(), after[6..9]);
    y.sum().backward();
    assert_eq!(
        e.weight.grad().unwrap().select(0, 2).to_vec::<f64>(),
        [2.0; 3]
    );
    assert_eq!(
        e.to_string(),
        "Embedding(4, 3, max_norm=1.5, norm_type=3.0)"
    );
}

#[test]
fn from_pretrained_shares_the_table_and_freezes_by_choice() {
    let w = table(3, 2, 4);
    let frozen = EmbeddingBag::from_pretrained(&w, true, BagMode::Sum, None);
    assert!(!frozen.weight.requires_grad());
    assert_eq!(frozen.parameters().len(), 1);
    let e = Embedding::from_pretrained(&w, false, Some(1));
    assert!(e.weight.requires_grad());
    // PyTorch keeps a pretrained padding row as given.
    assert_ne!(e.weight.select(0, 1).abs().sum().item::<f64>(), 0.0);
    let m = panic_message(|| {
        Embedding::from_pretrained(&Tensor::zeros(&[3]), true, None);
    });
    assert_eq!(
        m,
        "Embedding.from_pretrained: the table must be a 2-D floating-point tensor, got float32 [3]"
    );
}

#[test]
fn amax_keeps_infinities_without_nan() {
    let x = Tensor::from_vec(
        vec![
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
            1.0,
            f64::INFINITY,
            2.0,
            2.0,
        ],
        &[3, 2],
    )
    .requires_grad_(true);
    let m = x.amax_dim(1, false);
    assert_eq!(m.to_vec::<f64>(), [f64::NEG_INFINITY, f64::INFINITY, 2.0]);
    (&m * &Tensor::from_vec(vec![1.0f64, 2.0, 4.0], &[3]))
        .sum()
        .backward();
    // Ties share the gradient evenly, as torch.amax.
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>(),
        [0.5, 0.5, 0.0, 2.0, 2.0, 2.0]
    );
    assert_eq!(
        Tensor::from_vec(vec![1.0f32, f32::INFINITY], &[2])
            .max()
            .item::<f32>(),
        f32::INFINITY
    );
}

#[test]
fn lp_pool_gradients_match_finite_differences_and_zero_windows_get_zero() {
    let x = (&Tensor::randn_with(&[2, 2, 5, 6], &Generator::new(5))
        .to_dtype(DType::F64)
        .abs()
        + 0.2)
        .requires_grad_(true);
    for (p, ceil) in [(2.0, false), (1.5, true), (3.0, true)] {
        let f = |t: &[Tensor]| mixed(&lp_pool2d(&t[0], p, (2, 3), Some((2, 2)), ceil));
        gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("p {p}: {e}"));
    }
    let zeros = Tensor::from_vec(vec![0.0f32, 0.0, 1.0, 2.0], &[1, 1, 4]).requires_grad_(true);
    LPPool1d::new(2.0, 2).forward(&zeros).sum().backward();
    let g = zeros.grad().unwrap().to_vec::<f32>();
    assert_eq!(
        g[..2],
        [0.0, 0.0],
        "PyTorch gives a zero window no NaN: {g:?}"
    );
    assert!((g[3] - 2.0 / 5f32.sqrt()).abs() < 1e-6, "{g:?}");
    let pool = LPPool2d {
        norm_type: 1.5,
        kernel: (2, 3),
        stride: Some((2, 2)),
        ceil_mode: true,
    };
    assert_eq!(
        pool.to_string(),
        "LPPool2d(norm_type=1.5, kernel_size=(2, 3), stride=2, ceil_mode=True)"
    );
    assert_eq!(
        LPPool1d::new(2.0, 3).to_string(),
        "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    );
}

#[test]
fn max_bags_refuse_frequency_scaling() {
    let m = panic_message(|| {
        EmbeddingBag::new(5, 2, BagMode::Max, None)
            .scale_grad_by_freq(true)
            .forward(&Tensor::from_vec(vec![1i64, 1, 2], &[1, 3]));
    });
    assert_eq!(
        m,
        "embedding_bag: mode 'max' does not support scale_grad_by_freq"
    );
    assert_eq!(
        EmbeddingBag::new(5, 2, BagMode::Mean, None)
            .scale_grad_by_freq(true)
            .to_string(),
        "EmbeddingBag(5, 2, scale_grad_by_freq=True, mode='mean')"
    );
}
