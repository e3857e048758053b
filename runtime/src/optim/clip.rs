//! Gradient clipping (`torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`)
//! and the flat parameter vectors of `parameters_to_vector` /
//! `vector_to_parameters`.

use crate::{Error, Result, Tensor, no_grad};

/// Scales all gradients so their joint 2-norm is at most `max_norm`;
/// returns the norm before clipping as a 0-d tensor on the gradients'
/// device, as PyTorch does, so a GPU training step does not wait to read it
/// (call `.item()` when the number is needed).
///
/// ```
/// use tapir_runtime::{optim::clip_grad_norm_, Tensor};
/// let w = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).requires_grad_(true);
/// (&w * &w).sum().backward(); // grad = [6, 8], norm 10
/// assert!((clip_grad_norm_(&[w.clone()], 1.0).item::<f32>() - 10.0).abs() < 1e-4);
/// assert!((w.grad().unwrap().norm(2.0).item::<f32>() - 1.0).abs() < 1e-4);
/// ```
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64) -> Tensor {
    clip_grad_norm_with(params, max_norm, 2.0, false).expect("error_if_nonfinite is off")
}

/// As [`clip_grad_norm_`] with a norm type (2.0, 1.0, f64::INFINITY, ...),
/// and an error instead of clipping when the norm is nan or inf and
/// `error_if_nonfinite` is set (which reads the norm, as in PyTorch).
pub fn clip_grad_norm_with(
    params: &[Tensor],
    max_norm: f64,
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    let grads: Vec<Tensor> = params.iter().filter_map(|p| p.grad()).collect();
    if grads.is_empty() {
        return Ok(Tensor::scalar(0.0f32));
    }
    if norm_type == 2.0
        && let Some(total) = fused_clip(&grads, max_norm, error_if_nonfinite)
    {
        return total;
    }
    no_grad(|| {
        // Per-tensor norms in the grads' dtype, then the norm of those (as PyTorch).
        let norms: Vec<Tensor> = grads
            .iter()
            .map(|g| g.norm(norm_type).reshape(&[1]))
            .collect();
        let total = Tensor::cat(&norms.iter().collect::<Vec<_>>(), 0).norm(norm_type);
        if error_if_nonfinite {
            let t = total.item::<f64>();
            if !t.is_finite() {
                return Err(nonfinite(norm_type, t));
            }
        }
        // PyTorch's clip_coef_clamped, kept on the device (a nan norm makes
        // the gradients nan, as there).
        let coef = (max_norm / &(&total + 1e-6)).clamp_max(1.0);
        for g in &grads {
            g.mul_(&coef);
        }
        Ok(total)
    })
}

/// [`clip_grad_norm_with`] of order 2 as two jobs over every tensor
/// (PyTorch's `_foreach_norm` and `_foreach_mul_`), where the device has
/// them (dense f32 on the CPU); `None` elsewhere. The arithmetic is the
/// composition's: per-tensor norms in f32, their norm, then
/// `min(max_norm / (total + 1e-6), 1)` in f32 (NaN kept), and no pass at
/// all when that is 1 (multiplying by 1 changes nothing).
fn fused_clip(grads: &[Tensor], max_norm: f64, error_if_nonfinite: bool) -> Option<Result<Tensor>> {
    // Gradients that share a buffer (views of one bucket) cannot all be
    // locked for writing at once; the composition takes them one by one.
    let mut seen = std::collections::HashSet::new();
    if !grads.iter().all(|g| seen.insert(g.storage_id())) {
        return None;
    }
    let squares = {
        let guards: Vec<_> = grads.iter().map(|g| g.read()).collect();
        let items: Vec<_> = guards
            .iter()
            .zip(grads)
            .map(|(s, g)| (&**s, g.layout()))
            .collect();
        crate::storage::Storage::sum_squares_many(&items)?
    };
    let norms = squares.iter().map(|&s| s.sqrt() as f32);
    let total = norms.map(|n| (n as f64) * (n as f64)).sum::<f64>().sqrt() as f32;
    if error_if_nonfinite && !total.is_finite() {
        return Some(Err(nonfinite(2.0, total as f64)));
    }
    let coef = max_norm as f32 / (total + 1e-6f32);
    let coef = if coef.is_nan() { coef } else { coef.min(1.0) };
    if coef != 1.0 {
        let mut guards: Vec<_> = grads.iter().map(|g| g.write()).collect();
        let mut items: Vec<_> = guards
            .iter_mut()
            .zip(grads)
            .map(|(s, g)| (&mut **s, g.layout()))
            .collect();
        let done = crate::storage::Storage::scale_many(&mut items, coef);
        debug_assert!(done, "the views summed above scale alike");
    }
    Some(Ok(Tensor::scalar(total)))
}

fn nonfinite(norm_type: f64, t: f64) -> Error {
    Error::Format(format!(
        "clip_grad_norm_: the total norm of order {norm_type} for gradients from `parameters` is non-finite ({t}), so it cannot be clipped"
    ))
}

/// Clamps every gradient element to `[-clip, clip]`.
pub fn clip_grad_value_(params: &[Tensor], clip: f64) {
    no_grad(|| {
        for g in params.iter().filter_map(|p| p.grad()) {
            g.clamp_(-clip, clip);
        }
    });
}

/// `parameters_to_vector(parameters)`: every parameter flattened and
/// concatenated, in order, one 1-D tensor (on the autograd graph, as
/// PyTorch's).
///
/// ```
/// use tapir_runtime::{nn::{Linear, Module}, optim::{parameters_to_vector, vector_to_parameters}};
/// let l = Linear::new(3, 2, true);
/// let flat = parameters_to_vector(&l.parameters());
/// assert_eq!(flat.shape(), &[8]);
/// vector_to_parameters(&(&flat * 0.0), &l.parameters());
/// assert_eq!(l.weight.abs().sum().item::<f32>(), 0.0);
/// ```
#[track_caller]
pub fn parameters_to_vector(parameters: &[Tensor]) -> Tensor {
    assert!(
        !parameters.is_empty(),
        "parameters_to_vector: expects at least one parameter"
    );
    let flat: Vec<Tensor> = parameters.iter().map(Tensor::flatten_all).collect();
    Tensor::cat(&flat.iter().collect::<Vec<_>>(), 0)
}

/// `vector_to_parameters(vec, parameters)`: copies consecutive slices of
/// the 1-D `vec` into each parameter, in order (outside autograd).
#[track_caller]
pub fn vector_to_parameters(vec: &Tensor, parameters: &[Tensor]) {
    let total: usize = parameters.iter().map(Tensor::numel).sum();
    assert!(
        vec.ndim() == 1 && vec.numel() == total,
        "vector_to_parameters: expects a 1-D vector of the parameters' {total} elements, got {:?}",
        vec.shape()
    );
    no_grad(|| {
        let mut at = 0;
        for p in parameters {
            let shape: Vec<isize> = p.shape().iter().map(|&d| d as isize).collect();
            p.copy_(&vec.narrow(0, at, p.numel()).reshape(&shape));
            at += p.numel();
        }
    });
}
