//! Finite-difference gradient checking (PyTorch's `torch.autograd.gradcheck`).

use crate::{DType, Tensor};

/// Where analytic and numeric gradients disagree.
#[derive(Debug, thiserror::Error)]
#[error(
    "gradcheck: input {input}, element {index}: analytic {analytic:.8e} vs numeric {numeric:.8e}"
)]
pub struct GradcheckError {
    /// Which input.
    pub input: usize,
    /// Which element of it (row-major).
    pub index: usize,
    /// The gradient autograd computed.
    pub analytic: f64,
    /// The central finite difference.
    pub numeric: f64,
}

/// Compares the gradients autograd computes for `f` at `inputs` (f64 tensors)
/// with central finite differences (step `eps`). The output is projected
/// on a fixed pseudo-random direction `v`, so one backward checks `vᵀJ`
/// for every input element; passes when `|a - n| <= atol + rtol * |n|`.
///
/// ```
/// use tapir_runtime::{gradcheck, Tensor, DType};
/// let x = Tensor::from_vec(vec![0.3, -1.2, 2.0], &[3]).to_dtype(DType::F64);
/// gradcheck(|t| t[0].tanh() * &t[0], &[x], 1e-6, 1e-5, 1e-4).unwrap();
/// ```
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<(), GradcheckError> {
    for (i, x) in inputs.iter().enumerate() {
        assert!(
            x.dtype() == DType::F64,
            "gradcheck: input {i} must be float64, got {}",
            x.dtype()
        );
    }
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|x| x.detach().contiguous_copy().requires_grad_(true))
        .collect();
    let out = f(&leaves);
    let v = direction(out.shape());
    (&out * &v).sum().backward();
    let project = |ins: &[Tensor]| -> f64 { crate::no_grad(|| (&f(ins) * &v).sum().item::<f64>()) };
    for (i, leaf) in leaves.iter().enumerate() {
        let analytic: Vec<f64> = match leaf.grad() {
            Some(g) => g.to_vec(),
            None => vec![0.0; leaf.numel()],
        };
        let base: Vec<f64> = leaf.to_vec();
        for (k, &a) in analytic.iter().enumerate() {
            let eval = |delta: f64| {
                let mut d = base.clone();
                d[k] += delta;
                let mut ins: Vec<Tensor> = leaves.iter().map(|t| t.detach()).collect();
                ins[i] = Tensor::from_vec(d, leaf.shape());
                project(&ins)
            };
            let numeric = (eval(eps) - eval(-eps)) / (2.0 * eps);
            if (a - numeric).abs() > atol + rtol * numeric.abs() || a.is_nan() != numeric.is_nan() {
                return Err(GradcheckError {
                    input: i,
                    index: k,
                    analytic: a,
                    numeric,
                });
            }
        }
    }
    Ok(())
}

/// A fixed f64 direction of `shape` with distinct, non-trivial weights.
fn direction(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|j| 0.5 + ((j * 7919) % 13) as f64 / 13.0)
        .collect();
    Tensor::from_vec(v, shape)
}

/// Checks second derivatives (PyTorch's `torch.autograd.gradgradcheck`):
/// [`gradcheck`] of the first derivative `vᵀ ∂f/∂x` (every input's,
/// flattened and joined), which autograd computes with `create_graph`,
/// with respect to the inputs and to `v` (PyTorch's `grad_outputs`).
///
/// ```
/// use tapir_runtime::{autograd::gradgradcheck, Tensor, DType};
/// let x = Tensor::from_vec(vec![0.3, -1.2, 2.0], &[3]).to_dtype(DType::F64);
/// gradgradcheck(|t| t[0].tanh() * &t[0], &[x], 1e-6, 1e-5, 1e-4).unwrap();
/// ```
pub fn gradgradcheck(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<(), GradcheckError> {
    let out_shape = crate::no_grad(|| f(inputs)).shape().to_vec();
    let n = inputs.len();
    let first = |xs: &[Tensor]| -> Tensor {
        crate::enable_grad(|| {
            // The numeric pass hands in plain tensors: differentiate at them.
            let xs: Vec<Tensor> = (xs.iter())
                .map(|x| match x.requires_grad() {
                    true => x.clone(),
                    false => x.detach().requires_grad_(true),
                })
                .collect();
            let out = f(&xs[..n]);
            let refs: Vec<&Tensor> = xs[..n].iter().collect();
            let opts = super::GradOptions {
                grad_outputs: vec![xs[n].clone()],
                create_graph: true,
                materialize_grads: true,
                ..Default::default()
            };
            let firsts: Vec<Tensor> = (super::grad_with(&[&out], &refs, opts).into_iter())
                .map(|g| g.expect("materialized").reshape(&[-1]))
                .collect();
            Tensor::cat(&firsts.iter().collect::<Vec<_>>(), 0)
        })
    };
    let mut with_v = inputs.to_vec();
    with_v.push(direction(&out_shape));
    gradcheck(first, &with_v, eps, atol, rtol)
}
