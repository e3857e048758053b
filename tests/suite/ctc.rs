//! `ctc_loss` beyond its PyTorch goldens (`nn_goldens`, which go through a
//! log_softmax as PyTorch's backward assumes): the true derivative by
//! finite differences, impossible alignments, the unbatched form, errors.

use crate::common::panic_message;
use tapir::gradcheck;
use tapir::nn::{CtcOptions, Reduction, ctc_loss};
use tapir::prelude::*;

fn log_probs(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed))
        .to_dtype(DType::F64)
        .log_softmax(-1)
        .detach()
}

fn ids(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

#[test]
fn ctc_gradient_matches_finite_differences() {
    let lp = log_probs(&[5, 2, 4], 1).requires_grad_(true);
    let targets = ids(&[1, 1, 3, 2, 0, 0], &[2, 3]);
    for reduction in [Reduction::Sum, Reduction::Mean] {
        let o = CtcOptions {
            reduction,
            ..Default::default()
        };
        let f = |t: &[Tensor]| ctc_loss(&t[0], &targets, &[5, 4], &[3, 1], &o);
        gradcheck(f, std::slice::from_ref(&lp), 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("{reduction:?}: {e}"));
    }
}

#[test]
fn ctc_sums_every_alignment() {
    // Two steps, target "1": alignments "1 1", "1 _", "_ 1".
    let p = [[0.2f64, 0.8], [0.6, 0.4]]; // [step][class], blank 0
    let lp = Tensor::from_vec(p.concat(), &[2, 2]).log();
    let loss = ctc_loss(
        &lp,
        &ids(&[1], &[1]),
        &[2],
        &[1],
        &CtcOptions {
            reduction: Reduction::None,
            ..Default::default()
        },
    );
    assert_eq!(
        loss.shape(),
        &[] as &[usize],
        "unbatched 'none' is a scalar"
    );
    let want = p[0][1] * p[1][1] + p[0][1] * p[1][0] + p[0][0] * p[1][1];
    assert!((loss.item::<f64>() + want.ln()).abs() < 1e-12);
}

#[test]
fn impossible_alignments_are_infinite_without_nan_gradients() {
    let lp = log_probs(&[3, 2, 3], 2).requires_grad_(true);
    // "1 1" needs three steps (a blank between); sequence 0 has two.
    let targets = ids(&[1, 1, 2, 0], &[2, 2]);
    let o = CtcOptions {
        reduction: Reduction::None,
        ..Default::default()
    };
    let loss = ctc_loss(&lp, &targets, &[2, 3], &[2, 1], &o);
    let v = loss.to_vec::<f64>();
    assert!(
        v[0].is_infinite() && v[0] > 0.0 && v[1].is_finite(),
        "{v:?}"
    );
    loss.select(0, 1).backward();
    assert!(lp.grad().unwrap().all_finite());
    let zeroed = CtcOptions {
        zero_infinity: true,
        ..o
    };
    assert_eq!(
        ctc_loss(&lp, &targets, &[2, 3], &[2, 1], &zeroed).to_vec::<f64>()[0],
        0.0
    );
}

#[test]
fn bad_ctc_inputs_name_the_loss_and_the_values() {
    let lp = Tensor::zeros(&[4, 2, 3]);
    let run = |targets: Tensor, il: Vec<usize>, tl: Vec<usize>, blank: usize| {
        let lp = lp.clone();
        panic_message(move || {
            let o = CtcOptions {
                blank,
                ..Default::default()
            };
            ctc_loss(&lp, &targets, &il, &tl, &o);
        })
    };
    assert_eq!(
        run(ids(&[1, 2], &[2]), vec![4, 5], vec![1, 1], 0),
        "ctc_loss: input length 5 is not in 1..=4 (the steps of log_probs)"
    );
    assert_eq!(
        run(ids(&[1, 0], &[2]), vec![4, 4], vec![1, 1], 0),
        "ctc_loss: target label 0 of sequence 1 is not a class in 0..3 other than the blank 0"
    );
    assert_eq!(
        run(ids(&[1, 2, 1], &[3]), vec![4, 4], vec![1, 1], 0),
        "ctc_loss: concatenated targets hold 3 labels, the target lengths sum to 2"
    );
    assert_eq!(
        run(ids(&[1, 2], &[2]), vec![4, 4], vec![1, 1], 3),
        "ctc_loss: blank 3 is not a class of log_probs [4, 2, 3]"
    );
    assert_eq!(
        run(ids(&[1, 2], &[2]), vec![4], vec![1], 0),
        "ctc_loss: 2 sequences in log_probs [4, 2, 3] but 1 input lengths and 1 target lengths"
    );
}
