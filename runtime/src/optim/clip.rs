//! Gradient clipping (`torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`).

use crate::{Error, Result, Tensor, no_grad};

/// Scales all gradients so their joint 2-norm is at most `max_norm`;
/// returns the norm before clipping.
///
/// ```
/// use tapir_runtime::{optim::clip_grad_norm_, Tensor};
/// let w = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).requires_grad_(true);
/// (&w * &w).sum().backward(); // grad = [6, 8], norm 10
/// assert!((clip_grad_norm_(&[w.clone()], 1.0) - 10.0).abs() < 1e-4);
/// assert!((w.grad().unwrap().norm(2.0).item::<f32>() - 1.0).abs() < 1e-4);
/// ```
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64) -> f64 {
    clip_grad_norm_with(params, max_norm, 2.0, false).expect("error_if_nonfinite is off")
}

/// As [`clip_grad_norm_`] with a norm type (2.0, 1.0, f64::INFINITY, ...),
/// and an error instead of clipping when the norm is nan or inf and
/// `error_if_nonfinite` is set.
pub fn clip_grad_norm_with(
    params: &[Tensor],
    max_norm: f64,
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<f64> {
    let grads: Vec<Tensor> = params.iter().filter_map(|p| p.grad()).collect();
    if grads.is_empty() {
        return Ok(0.0);
    }
    let total = no_grad(|| {
        // Per-tensor norms in the grads' dtype, then the norm of those (as PyTorch).
        let norms: Vec<Tensor> = grads
            .iter()
            .map(|g| g.norm(norm_type).reshape(&[1]))
            .collect();
        Tensor::cat(&norms.iter().collect::<Vec<_>>(), 0)
            .norm(norm_type)
            .item::<f64>()
    });
    if error_if_nonfinite && !total.is_finite() {
        return Err(Error::Format(format!(
            "clip_grad_norm_: the total norm of order {norm_type} for gradients from `parameters` is non-finite ({total}), so it cannot be clipped"
        )));
    }
    let coef = (max_norm / (total + 1e-6)).min(1.0);
    no_grad(|| {
        for g in &grads {
            g.mul_scalar_(coef);
        }
    });
    Ok(total)
}

/// Clamps every gradient element to `[-clip, clip]`.
pub fn clip_grad_value_(params: &[Tensor], clip: f64) {
    no_grad(|| {
        for g in params.iter().filter_map(|p| p.grad()) {
            g.clamp_(-clip, clip);
        }
    });
}
