//! `retain_grad`: a non-leaf's gradient kept in its `.grad`, as PyTorch
//! keeps it. Expected values are PyTorch 2.15's on this CPU.

use crate::common::panic_message;
use tapir::prelude::*;

fn x12() -> Tensor {
    Tensor::from_vec(vec![1.0f32, 2.0], &[2]).requires_grad_(true)
}

/// The retained gradient is the one after every hook (PyTorch runs its
/// retains-grad hooks last, whatever the order of registration), and it
/// sums over backwards.
#[test]
fn retained_gradients_come_after_hooks_and_sum_over_backwards() {
    let x = x12();
    let y = &x * 3.0;
    y.retain_grad();
    y.register_hook(|g| Some(g * 10.0));
    let loss = (&y * &y).sum();
    loss.backward_with(&Tensor::scalar(1.0f32), true);
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![60.0, 120.0]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![180.0, 360.0]);
    loss.backward();
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![120.0, 240.0]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![360.0, 720.0]);
}

/// The same gradient tensor flows on to the leaf: the retained one is a
/// copy, so writing into the leaf's `.grad` leaves it alone.
#[test]
fn a_retained_gradient_shares_nothing_with_the_leafs() {
    let x = x12();
    let y = &x + 0.0;
    y.retain_grad();
    y.sum().backward();
    x.grad().unwrap().mul_scalar_(0.0);
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![1.0, 1.0]);
    // Without retain_grad a non-leaf keeps nothing.
    let z = &x * 2.0;
    z.sum().backward();
    assert!(z.grad().is_none() && !z.retains_grad());
}

/// One output of a multi-output op (split's one node) keeps its own
/// gradient; the other outputs and the leaf do not "retain".
#[test]
fn one_piece_of_a_split_retains_its_gradient() {
    let x = x12();
    let parts = x.split(1, 0);
    parts[1].retain_grad();
    parts[1].retain_grad(); // twice is once
    (&parts[1] * 5.0).sum().backward();
    assert_eq!(parts[1].grad().unwrap().to_vec::<f32>(), vec![5.0]);
    assert!(parts[1].retains_grad() && !parts[0].retains_grad());
    assert!(parts[0].grad().is_none());
    // Leaves keep their gradient anyway: retain_grad is a no-op there.
    x.retain_grad();
    assert!(!x.retains_grad());
}

/// A tensor dropped before the backward is simply skipped, and one that
/// needs no gradient is an error naming the op.
#[test]
fn retain_grad_on_dropped_and_constant_tensors() {
    let x = x12();
    let y = &x * 3.0;
    y.retain_grad();
    let loss = y.sum();
    drop(y);
    loss.backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![3.0, 3.0]);
    let msg = panic_message(|| Tensor::zeros(&[2, 3]).retain_grad());
    assert_eq!(
        msg,
        "retain_grad: the tensor of shape [2, 3] does not require grad, so no gradient reaches it"
    );
}
