//! Gradient checkpointing (PyTorch's `torch.utils.checkpoint`): a region's
//! forward runs without recording and keeps only its inputs; backward runs
//! it again with recording on and backpropagates through that.

use crate::amp::{AutocastGuard, DeviceType, get_autocast_dtype, is_autocast_enabled};
use crate::nn::Sequential;
use crate::{Tensor, default_generator, enable_grad, no_grad};
use std::sync::Arc;

/// A region to recompute: the inputs in, one tensor out. It owns what it
/// needs (tensors are cheap handles; share a module through an `Arc`).
pub type Region = dyn Fn(&[Tensor]) -> Tensor + Send + Sync;

/// `torch.utils.checkpoint.checkpoint(f, *inputs)`: `f(inputs)` whose
/// activations are not kept; backward recomputes them, with the default
/// generator put back where it was so dropout draws the same mask, and
/// the autocast state of the forward. Nests.
///
/// ```
/// use tapir_runtime::{checkpoint, nn::{Forward, Linear}, Tensor};
/// use std::sync::Arc;
/// let layer = Arc::new(Linear::new(4, 4, true));
/// let x = Tensor::randn(&[2, 4]).requires_grad_(true);
/// let l = layer.clone();
/// let y = checkpoint(move |xs| l.forward(&xs[0]).relu(), &[x.clone()]);
/// y.sum().backward();
/// assert_eq!(x.grad().unwrap().shape(), &[2, 4]);
/// assert!(layer.weight.grad().is_some());
/// ```
pub fn checkpoint(
    f: impl Fn(&[Tensor]) -> Tensor + Send + Sync + 'static,
    inputs: &[Tensor],
) -> Tensor {
    checkpoint_with(Arc::new(f), inputs, true)
}

/// [`checkpoint`] with PyTorch's `preserve_rng_state` choice.
pub fn checkpoint_with(f: Arc<Region>, inputs: &[Tensor], preserve_rng_state: bool) -> Tensor {
    let rng = preserve_rng_state.then(|| default_generator().get_state());
    let autocast = [DeviceType::Cpu, DeviceType::Cuda]
        .map(|d| (d, is_autocast_enabled(d), get_autocast_dtype(d)));
    let detached: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
    let out = no_grad(|| f(&detached)).detach();
    // The recompute reads the inputs again: checked, as saved tensors.
    let detached: Vec<Tensor> = detached.iter().map(Tensor::saved).collect();
    // An anchor that requires grad, so the region is recorded even when no
    // input needs a gradient but the parameters inside it do (PyTorch's
    // non-reentrant behaviour); its own gradient is never produced.
    let anchor = Tensor::zeros(&[]).requires_grad_(true);
    let mut refs: Vec<&Tensor> = inputs.iter().collect();
    refs.push(&anchor);
    Tensor::record(out, "CheckpointFunctionBackward", &refs, move || {
        move |g: &Tensor, needs: &[bool]| {
            let needs = &needs[..needs.len() - 1];
            let xs: Vec<Tensor> = detached
                .iter()
                .zip(needs)
                .map(|(x, &need)| x.detach().requires_grad_(need && x.dtype().is_float()))
                .collect();
            let resume = rng.map(|state| {
                let now = default_generator().get_state();
                default_generator().set_state(state);
                now
            });
            let y = {
                let _regions =
                    autocast.map(|(d, on, dtype)| AutocastGuard::new(d, Some(dtype), on));
                enable_grad(|| f(&xs))
            };
            if let Some(now) = resume {
                default_generator().set_state(now);
            }
            if y.requires_grad() {
                y.backward_with(g, false);
            }
            let mut grads: Vec<Option<Tensor>> = xs
                .iter()
                .zip(needs)
                .map(|(x, &need)| need.then(|| x.grad()).flatten())
                .collect();
            grads.push(None);
            grads
        }
    })
}

/// `torch.utils.checkpoint.checkpoint_sequential(seq, segments, x)`: the
/// layers split into `segments` runs of (nearly) equal length, each
/// checkpointed but the last, which runs normally (as PyTorch does).
///
/// ```
/// use tapir_runtime::{checkpoint_sequential, nn::{Linear, ReLU, Sequential}, Tensor};
/// use std::sync::Arc;
/// let seq = Arc::new(Sequential::new().add(Linear::new(4, 8, true)).add(ReLU).add(Linear::new(8, 2, true)));
/// let y = checkpoint_sequential(&seq, 2, &Tensor::randn(&[3, 4]));
/// assert_eq!(y.shape(), &[3, 2]);
/// ```
pub fn checkpoint_sequential(seq: &Arc<Sequential>, segments: usize, x: &Tensor) -> Tensor {
    let n = seq.len();
    assert!(
        segments > 0 && segments <= n.max(1),
        "checkpoint_sequential: segments must be between 1 and the {n} layers, got {segments}"
    );
    let per = n.div_ceil(segments);
    let mut h = x.clone();
    let mut start = 0;
    while start < n {
        let end = (start + per).min(n);
        if end == n {
            for l in &seq.layers[start..end] {
                h = l.forward(&h);
            }
            break;
        }
        let s = seq.clone();
        h = checkpoint(
            move |xs| {
                let mut h = xs[0].clone();
                for l in &s.layers[start..end] {
                    h = l.forward(&h);
                }
                h
            },
            &[h],
        );
        start = end;
    }
    h
}
