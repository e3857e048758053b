//! `torch.autograd.functional`: vector-Jacobian and Jacobian-vector
//! products, whole Jacobians and Hessians of a function of tensors, built
//! on [`super::grad_with`].
//!
//! Each function takes `f` (tensors in, one tensor out) and the point to
//! differentiate at; the inputs are used as fresh leaves, so nothing the
//! caller holds is touched. Where the output does not depend on an input,
//! its part is zeros (PyTorch's `strict=False`).

use super::{GradOptions, grad_with};
use crate::Tensor;

/// `f` at fresh leaves copied from `inputs`, which it returns too.
fn at_leaves(f: &impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) -> (Tensor, Vec<Tensor>) {
    crate::enable_grad(|| {
        let leaves: Vec<Tensor> = (inputs.iter())
            .map(|x| x.detach().requires_grad_(true))
            .collect();
        (f(&leaves), leaves)
    })
}

/// `vᵀ ∂out/∂x` for every input, zeros where `out` does not depend on it.
fn pull_back(out: &Tensor, leaves: &[Tensor], v: Tensor, create_graph: bool) -> Vec<Tensor> {
    if !out.requires_grad() {
        return leaves.iter().map(Tensor::zeros_like).collect();
    }
    let refs: Vec<&Tensor> = leaves.iter().collect();
    let opts = GradOptions {
        grad_outputs: vec![v],
        retain_graph: Some(true),
        create_graph,
        materialize_grads: true,
        ..Default::default()
    };
    (grad_with(&[out], &refs, opts).into_iter())
        .map(|g| g.expect("materialized"))
        .collect()
}

/// Panics unless `v` holds one tensor of each input's shape, naming `op`.
fn check_one_per_input(op: &str, what: &str, inputs: &[Tensor], v: &[Tensor]) {
    let shapes = |ts: &[Tensor]| ts.iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>();
    assert!(
        v.len() == inputs.len() && v.iter().zip(inputs).all(|(v, x)| v.shape() == x.shape()),
        "autograd::functional::{op}: pass one {what} per input, each of its input's shape (inputs {:?}, {what}s \
         {:?})",
        shapes(inputs),
        shapes(v)
    );
}

/// `Σᵢ <aᵢ, bᵢ>` over the `aᵢ` that carry a graph; `None` when none does.
fn inner_with_graph(a: &[Tensor], b: &[Tensor]) -> Option<Tensor> {
    (a.iter().zip(b))
        .filter(|(a, _)| a.requires_grad())
        .map(|(a, b)| (a * &b.to_dtype(a.dtype())).sum())
        .reduce(|x, y| &x + &y)
}

/// The scalar `f` at fresh leaves, the leaves, and its gradients with
/// their graph (`hessian` and `vhp` differentiate them again).
fn scalar_and_gradients(
    f: &impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    op: &str,
) -> (Tensor, Vec<Tensor>, Vec<Tensor>) {
    let (out, leaves) = at_leaves(f, inputs);
    assert!(
        out.numel() == 1,
        "autograd::functional::{op}: f must return a single value, got shape {:?}",
        out.shape()
    );
    let grads = crate::enable_grad(|| pull_back(&out, &leaves, Tensor::ones_like(&out), true));
    (out, leaves, grads)
}

/// `f(inputs)` and the vector-Jacobian product `vᵀ J` for each input
/// (`torch.autograd.functional.vjp`); `v` has the output's shape.
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::vjp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (y, g) = vjp(|t| &t[0] * &t[0], &[x], &Tensor::from_vec(vec![1.0f64, 10.0], &[2]));
/// assert_eq!((y.to_vec::<f64>(), g[0].to_vec::<f64>()), (vec![1.0, 4.0], vec![2.0, 40.0]));
/// ```
pub fn vjp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &Tensor,
) -> (Tensor, Vec<Tensor>) {
    let (out, leaves) = at_leaves(&f, inputs);
    assert!(
        v.shape() == out.shape(),
        "autograd::functional::vjp: v has shape {:?} but the output has shape {:?}",
        v.shape(),
        out.shape()
    );
    let products = pull_back(&out, &leaves, v.to_dtype(out.dtype()), false);
    (out.detach(), products)
}

/// `f(inputs)` and the Jacobian-vector product `J v` (`v`: one tangent per
/// input, each of its input's shape), by PyTorch's double-backward trick:
/// the vector-Jacobian product is linear in its vector `u`, so
/// differentiating `uᵀ J` with respect to `u` along `v` gives `J v`
/// (`torch.autograd.functional.jvp`).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::jvp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (_, t) = jvp(|t| t[0].sum() * &t[0], &[x], &[Tensor::from_vec(vec![1.0f64, 0.0], &[2])]);
/// assert_eq!(t.to_vec::<f64>(), vec![4.0, 2.0]); // J = s I + x 1ᵀ, s = 3
/// ```
pub fn jvp(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor], v: &[Tensor]) -> (Tensor, Tensor) {
    check_one_per_input("jvp", "tangent", inputs, v);
    let (out, leaves) = at_leaves(&f, inputs);
    if !out.requires_grad() {
        let zeros = Tensor::zeros_like(&out);
        return (out, zeros);
    }
    let u = Tensor::zeros_like(&out).requires_grad_(true);
    let pulled = crate::enable_grad(|| pull_back(&out, &leaves, u.clone(), true));
    // <uᵀJ, v> summed over the inputs, differentiated with respect to u.
    let Some(dot) = inner_with_graph(&pulled, v) else {
        return (out.detach(), Tensor::zeros_like(&out));
    };
    let opts = GradOptions {
        materialize_grads: true,
        ..Default::default()
    };
    let jv = grad_with(&[&dot], &[&u], opts)
        .remove(0)
        .expect("materialized");
    (out.detach(), jv)
}

/// The Jacobian of `f` at `inputs`, one tensor per input of shape
/// `out.shape ++ input.shape` (`torch.autograd.functional.jacobian`,
/// reverse mode: one backward per output element).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::jacobian};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let j = jacobian(|t| &t[0] * &t[0], &[x]);
/// assert_eq!((j[0].shape(), j[0].to_vec::<f64>()), (&[2, 2][..], vec![2.0, 0.0, 0.0, 4.0]));
/// ```
pub fn jacobian(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) -> Vec<Tensor> {
    let (out, leaves) = at_leaves(&f, inputs);
    rows_of(&out, &leaves, false)
}

/// The `k`-th unit tensor of `like`'s shape, dtype and device.
fn basis_vector(like: &Tensor, k: usize) -> Tensor {
    let basis = crate::ops::creation::filled_on(like.shape(), 0.0, like.dtype(), like.device());
    // Row-major, so the flat view shares its data.
    basis.reshape(&[-1]).narrow(0, k, 1).fill_(1.0);
    basis
}

/// For each input, the rows `∂out[k]/∂input` stacked, shaped
/// `out.shape ++ input.shape`.
fn rows_of(out: &Tensor, leaves: &[Tensor], create_graph: bool) -> Vec<Tensor> {
    let n = out.numel();
    let mut rows: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); leaves.len()];
    for k in 0..n {
        let one_hot = basis_vector(out, k);
        for (i, g) in pull_back(out, leaves, one_hot, create_graph)
            .into_iter()
            .enumerate()
        {
            rows[i].push(g);
        }
    }
    (rows.into_iter().zip(leaves))
        .map(|(r, x)| {
            let shape: Vec<isize> = (out.shape().iter().chain(x.shape()))
                .map(|&d| d as isize)
                .collect();
            if r.is_empty() {
                return Tensor::zeros(&[0]).to_dtype(x.dtype()).reshape(&shape);
            }
            Tensor::stack(&r.iter().collect::<Vec<_>>(), 0).reshape(&shape)
        })
        .collect()
}

/// The Hessian of the scalar `f` at `inputs`: `h[i][j]` of shape
/// `inputs[i].shape ++ inputs[j].shape` (`torch.autograd.functional.hessian`:
/// the Jacobian of the gradient, one second backward per input element).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::hessian};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// // f = (Σ x²)(Σ x): H = 2 (Σ x) I + 2 x 1ᵀ + 2 · 1 xᵀ
/// let h = hessian(|t| &(&t[0] * &t[0]).sum() * &t[0].sum(), &[x]);
/// assert_eq!(h[0][0].to_vec::<f64>(), vec![10.0, 6.0, 6.0, 14.0]);
/// ```
pub fn hessian(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) -> Vec<Vec<Tensor>> {
    let (_, leaves, grads) = scalar_and_gradients(&f, inputs, "hessian");
    (grads.iter()).map(|g| rows_of(g, &leaves, false)).collect()
}

/// `f(inputs)` and the vector-Hessian product `vᵀ H` for the scalar `f`
/// (`torch.autograd.functional.vhp`; for a twice continuously
/// differentiable `f`, H is symmetric and this is `hvp` too).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::vhp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (_, hv) = vhp(|t| t[0].powf(3.0).sum(), &[x], &[Tensor::ones(&[2]).to_dtype(tapir_runtime::DType::F64)]);
/// assert_eq!(hv[0].to_vec::<f64>(), vec![6.0, 12.0]); // 6x
/// ```
pub fn vhp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
) -> (Tensor, Vec<Tensor>) {
    check_one_per_input("vhp", "vector", inputs, v);
    let (out, leaves, grads) = scalar_and_gradients(&f, inputs, "vhp");
    let dot = inner_with_graph(&grads, v);
    let products = match dot {
        Some(dot) => pull_back(&dot, &leaves, Tensor::ones_like(&dot), false),
        None => leaves.iter().map(Tensor::zeros_like).collect(),
    };
    (out.detach(), products)
}

/// `f(inputs)` and the Hessian-vector product `H v` for the scalar `f`
/// (`torch.autograd.functional.hvp`): `vᵀ H` transposed, which for the
/// symmetric Hessian of a twice continuously differentiable `f` is the
/// same vector ([`vhp`]).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::hvp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let v = Tensor::from_vec(vec![1.0f64, 0.0], &[2]);
/// // f = x0² x1: H = [[2 x1, 2 x0], [2 x0, 0]], H v = [4, 2]
/// let (_, hv) = hvp(|t| &(&t[0].select(0, 0) * &t[0].select(0, 0)) * &t[0].select(0, 1), &[x], &[v]);
/// assert_eq!(hv[0].to_vec::<f64>(), vec![4.0, 2.0]);
/// ```
pub fn hvp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
) -> (Tensor, Vec<Tensor>) {
    vhp(f, inputs, v)
}
