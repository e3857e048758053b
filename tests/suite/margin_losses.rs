//! The multi-class and multi-label margin losses beyond their PyTorch
//! goldens (`nn_goldens`): gradients by finite differences, unbatched
//! input, and the errors.

use crate::common::panic_message;
use tapir::gradcheck;
use tapir::nn::{
    Reduction, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss,
};
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

#[test]
fn margin_loss_gradients_match_finite_differences() {
    let x = rnd(&[4, 5], 1).requires_grad_(true);
    let y = Tensor::from_vec(vec![0i64, 4, 2, 2], &[4]);
    let w = &rnd(&[5], 2).abs() + 0.5;
    let f = |t: &[Tensor]| multi_margin_loss(&t[0], &y, 2, 0.8, Some(&w), Reduction::Sum);
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let listed = Tensor::from_vec(
        vec![
            1i64, 3, -1, 0, 0, 4, 4, 0, -1, 0, -1, 0, 0, 0, 0, 2, 1, 0, 3, 4,
        ],
        &[4, 5],
    );
    let f = |t: &[Tensor]| multilabel_margin_loss(&t[0], &listed, Reduction::Mean);
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let soft = rnd(&[4, 5], 3).gt_scalar(0.0).to_dtype(DType::F64);
    let f = |t: &[Tensor]| multilabel_soft_margin_loss(&t[0], &soft, Some(&w), Reduction::Mean);
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn unbatched_rows_give_the_batched_values() {
    let x = rnd(&[3, 4], 4);
    let y = Tensor::from_vec(vec![2i64, 0, 3], &[3]);
    let batched = multi_margin_loss(&x, &y, 1, 1.0, None, Reduction::None).to_vec::<f64>();
    let listed = Tensor::from_vec(vec![2i64, -1, 0, 0, 1, 3, 3, -1, 0, 1, 2, 3], &[3, 4]);
    let multi = multilabel_margin_loss(&x, &listed, Reduction::None).to_vec::<f64>();
    for row in 0..3 {
        let one = multi_margin_loss(
            &x.select(0, row),
            &y.select(0, row),
            1,
            1.0,
            None,
            Reduction::None,
        );
        assert_eq!(one.shape(), &[] as &[usize]);
        assert_eq!(one.item::<f64>(), batched[row as usize]);
        let one = multilabel_margin_loss(&x.select(0, row), &listed.select(0, row), Reduction::Sum);
        assert_eq!(one.item::<f64>(), multi[row as usize]);
    }
    // A class listed twice counts twice, as PyTorch's loop over the list.
    let loss_of = |ids: Vec<i64>| {
        multilabel_margin_loss(
            &x.select(0, 1),
            &Tensor::from_vec(ids, &[4]),
            Reduction::Sum,
        )
        .item::<f64>()
    };
    let (twice, once) = (loss_of(vec![3, 3, -1, 0]), loss_of(vec![3, -1, 0, 0]));
    assert!(
        once > 0.0 && (twice - 2.0 * once).abs() < 1e-12,
        "{twice} vs {once}"
    );
}

#[test]
fn bad_class_targets_name_the_loss_and_the_shapes() {
    let m = panic_message(|| {
        multi_margin_loss(
            &Tensor::zeros(&[3, 4]),
            &Tensor::zeros(&[3]),
            1,
            1.0,
            None,
            Reduction::Mean,
        );
    });
    assert_eq!(
        m,
        "multi_margin_loss: expected input [N, C] or [C] with int64 target [N] or a scalar, got input [3, 4] and target float32 [3]"
    );
    let m = panic_message(|| {
        multi_margin_loss(
            &Tensor::zeros(&[3, 4]),
            &Tensor::from_vec(vec![0i64, 1, 2], &[3]),
            3,
            1.0,
            None,
            Reduction::Mean,
        );
    });
    assert_eq!(m, "multi_margin_loss: p must be 1 or 2, got 3");
    let m = panic_message(|| {
        multilabel_margin_loss(
            &Tensor::zeros(&[4]),
            &Tensor::from_vec(vec![1i64, 7, -1, 0], &[4]),
            Reduction::Mean,
        );
    });
    assert_eq!(
        m,
        "multilabel_margin_loss: target class 7 in row 0 is not below 4"
    );
}
