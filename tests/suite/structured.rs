//! The composed structural and statistical ops beyond their PyTorch
//! goldens (`goldens`, with finite differences in `autograd`): long scans,
//! infinities, the matrix-product distance at zero, and the errors.

use crate::common::panic_message;
use tapir::prelude::*;

#[test]
fn scans_by_doubling_match_the_running_product_and_sum() {
    // 37 elements: six doubling steps, the last one partial.
    let v: Vec<f64> = (0..37)
        .map(|i| 1.0 + ((i * 7) % 5) as f64 * 0.01 - 0.02)
        .collect();
    let x = Tensor::from_vec(v.clone(), &[1, 37]);
    let mut running = 1.0;
    let want: Vec<f64> = v
        .iter()
        .map(|a| {
            running *= a;
            running
        })
        .collect();
    let got = x.cumprod(1).to_vec::<f64>();
    assert!(
        got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-12),
        "{got:?}"
    );
    let lse = x.logcumsumexp(1).to_vec::<f64>();
    let mut acc = f64::NEG_INFINITY;
    for (k, a) in v.iter().enumerate() {
        acc = acc.max(*a) + ((acc - acc.max(*a)).exp() + (a - acc.max(*a)).exp()).ln();
        assert!((lse[k] - acc).abs() < 1e-12, "logcumsumexp[{k}]");
    }
}

#[test]
fn infinities_keep_values_and_gradients_finite_where_pytorchs_are() {
    let x = Tensor::from_vec(vec![f64::NEG_INFINITY, f64::NEG_INFINITY, 0.0, 1.0], &[4])
        .requires_grad_(true);
    let y = x.logcumsumexp(0);
    assert_eq!(
        y.to_vec::<f64>()[..2],
        [f64::NEG_INFINITY, f64::NEG_INFINITY]
    );
    y.narrow(0, 2, 2).sum().backward();
    let g = x.grad().unwrap().to_vec::<f64>();
    assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
    // cdist by matrix product (more than 25 rows): a zero distance has a
    // finite gradient (the clamp at 1e-30 before the root, as PyTorch's).
    let a = Tensor::randn_with(&[30, 3], &Generator::new(1))
        .to_dtype(DType::F64)
        .requires_grad_(true);
    a.cdist(&a, 2.0).sum().backward();
    assert!(
        a.grad()
            .unwrap()
            .to_vec::<f64>()
            .iter()
            .all(|v| v.is_finite())
    );
}

#[test]
fn structural_op_errors_name_the_op_and_shapes() {
    let x = Tensor::zeros(&[2, 3]);
    assert_eq!(
        panic_message(|| {
            x.tensordot(&Tensor::zeros(&[4, 2]), &[1], &[0]);
        }),
        "tensordot: dims [1] of shape [2, 3] and [0] of shape [4, 2] must pair dims of equal sizes"
    );
    assert_eq!(
        panic_message(|| {
            x.kthvalue(4, 1, false);
        }),
        "kthvalue: k = 4 is out of range for dim 1 of shape [2, 3]"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::block_diag(&[&Tensor::zeros(&[1, 1, 1])]);
        }),
        "block_diag: expects one or more tensors of at most 2 dims, got shapes [[1, 1, 1]]"
    );
    assert_eq!(
        panic_message(|| {
            x.cdist(&Tensor::zeros(&[2, 4]), 2.0);
        }),
        "cdist: expects [.., P, M] and [.., R, M] with the same M and p >= 0, got [2, 3] and [2, 4] (p = 2)"
    );
    assert_eq!(
        panic_message(|| {
            x.rot90(1, [1, -1]);
        }),
        "rot90: dims [1, -1] must be two different dims of shape [2, 3]"
    );
    assert_eq!(
        panic_message(|| {
            x.quantile(1.5, None, false);
        }),
        "quantile: q = 1.5 must be in [0, 1] and the input a float tensor, got float32"
    );
}
