//! What `SyncBatchNorm` needs from the process group: a sum across the
//! ranks that autograd sees through, and the batch statistics of the whole
//! job's batch from it.

use super::{ReduceOp, all_reduce, get_world_size, is_initialized};
use crate::Tensor;

/// The elementwise sum of `t` over every rank, with a gradient
/// (`torch.distributed.nn.functional.all_reduce`): every rank's sum depends
/// on every rank's `t`, so the gradient of `t` is the sum over the ranks
/// of the sum's gradients, itself an all-reduce in backward. Every rank has
/// to run backward through it, as every rank ran forward.
///
/// Panics if the collective fails (a rank has gone): the job cannot go on.
pub fn all_reduce_with_grad(t: &Tensor) -> Tensor {
    let summed = summed_over_ranks(t, "all_reduce_with_grad");
    Tensor::record(summed, "AllReduceBackward0", &[t], || {
        |g: &Tensor, _: &[bool]| {
            vec![Some(summed_over_ranks(
                g,
                "all_reduce_with_grad (backward)",
            ))]
        }
    })
}

/// A fresh copy of `t` summed over the ranks.
fn summed_over_ranks(t: &Tensor, op: &str) -> Tensor {
    let out = t.detach().contiguous_copy();
    if let Err(e) = all_reduce(&out, ReduceOp::Sum) {
        panic!(
            "{op}: the all-reduce of a {:?} {} tensor failed: {e}",
            t.shape(),
            t.dtype()
        );
    }
    out
}

/// The per-channel mean and biased variance of the batch that all ranks
/// hold together, and its size per channel, when a process group of more
/// than one rank runs; `None` otherwise, where a batch norm uses its own
/// batch (as PyTorch's `SyncBatchNorm` does outside a group). Two passes,
/// the mean first, so the variance has no cancellation; ranks may hold
/// batches of different sizes. `dims` are the reduced dims of `x`
/// (`[N, C, *]`), `channel_shape` the mean's shape to broadcast against it.
pub(crate) fn synced_batch_stats(
    x: &Tensor,
    dims: &[isize],
    channel_shape: &[isize],
) -> Option<(Tensor, Tensor, f64)> {
    if !is_initialized() || get_world_size() < 2 {
        return None;
    }
    let local = x.numel() / x.shape()[1];
    // On the input's device: NCCL refuses a host tensor.
    let count = crate::ops::creation::filled_on(&[], local as f64, crate::DType::F64, x.device());
    if let Err(e) = all_reduce(&count, ReduceOp::Sum) {
        panic!("SyncBatchNorm: the all-reduce of the batch size failed: {e}");
    }
    let n = count.item::<f64>();
    let mean = &all_reduce_with_grad(&x.sum_dims(dims, false)) / n;
    let centered = x - &mean.reshape(channel_shape);
    let var = &all_reduce_with_grad(&centered.square().sum_dims(dims, false)) / n;
    Some((mean, var, n))
}
