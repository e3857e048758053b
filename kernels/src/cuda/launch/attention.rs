//! Fused attention on the GPU (`cu/attention.cu`): blocks of rows of one
//! slice, a warp per row, chunks of 32 keys (or queries) staged in shared
//! memory, an online softmax, no `[l, s]` scores in memory. CPU twins:
//! `cpu::attention_forward` and `cpu::attention_backward`.

use super::*;
use crate::cpu::AttentionDims;

/// Rows (warps) per block, as `TAPIR_ATTN_WARPS` in the source.
const WARPS: usize = 8;

/// Keys (or queries) staged per step, as `TAPIR_ATTN_CHUNK`.
const CHUNK: usize = 32;

/// The widest `e` and `ev` the kernels take (`TAPIR_ATTN_MAX_WIDTH`: what
/// they hold in registers, and what keeps their staged rows within 48 KiB
/// of shared memory); wider heads run as separate ops.
pub const ATTENTION_MAX_WIDTH: usize = 128;

/// The most query or key rows per slice: blocks of rows are the grid's y
/// dimension, which CUDA bounds at 65,535.
pub const ATTENTION_MAX_ROWS: usize = 65_535 * WARPS;

/// A block per `WARPS` of a slice's `rows` (grid y), a slice per grid x, with
/// `row_floats` shared floats per warp's row and two staged chunks of
/// `CHUNK` padded rows of `e` and `ev` floats.
pub(in crate::cuda) fn blocks(d: AttentionDims, rows: usize, row_floats: usize) -> LaunchConfig {
    let staged = CHUNK * (d.e + 1) + CHUNK * (d.ev + 1);
    LaunchConfig {
        grid_dim: (d.batch as u32, rows.div_ceil(WARPS) as u32, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: ((WARPS * row_floats + staged) * 4) as u32,
    }
}

/// The kernels' size arguments, in their order.
fn sizes(d: AttentionDims) -> [usize; 4] {
    [d.l, d.s, d.e, d.ev]
}

fn check(d: AttentionDims, op: &str) {
    assert!(
        d.e.max(d.ev) <= ATTENTION_MAX_WIDTH && d.l.max(d.s) <= ATTENTION_MAX_ROWS,
        "{op}: the CUDA kernel takes head widths up to {ATTENTION_MAX_WIDTH} and up to \
         {ATTENTION_MAX_ROWS} rows, got e {}, ev {}, l {} and s {}",
        d.e,
        d.ev,
        d.l,
        d.s
    );
}

/// `softmax(q kᵀ · scale [+ causal mask]) v` for dense `q` `[batch, l, e]`,
/// `k` `[batch, s, e]`, `v` `[batch, s, ev]` of `dtype` (f32, f16, bf16):
/// the output `[batch, l, ev]` and each query row's f32 log-sum-exp.
pub fn attention_forward(
    (q, k, v): (&CudaBuffer, &CudaBuffer, &CudaBuffer),
    d: AttentionDims,
    scale: f32,
    causal: bool,
    dtype: &str,
) -> CudaResult<(CudaBuffer, CudaBuffer)> {
    check(d, "attention_forward");
    let dev = q.device();
    let out = dev.alloc(d.batch * d.l * d.ev * width(dtype))?;
    let lse = dev.alloc(d.batch * d.l * 4)?;
    if d.batch * d.l > 0 {
        let [l, s, e, ev] = sizes(d);
        let causal = causal as i32;
        let (pq, pk, pv, po, pm) = (q.ptr(0), k.ptr(0), v.ptr(0), out.ptr(0), lse.ptr(0));
        launch!(
            dev,
            format!("attention_forward_{dtype}"),
            blocks(d, l, e),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &pq,
            &pk,
            &pv,
            &po,
            &pm
        )?;
    }
    Ok((out, lse))
}

/// The gradients `(dq, dk, dv)` of [`attention_forward`] for the upstream
/// `g` `[batch, l, ev]`, from the same inputs and the forward's output and
/// log-sum-exp: one kernel per query row for `dq` (which also writes each
/// row's `g · out`), then one per key row for `dk` and `dv`.
pub fn attention_backward(
    (q, k, v): (&CudaBuffer, &CudaBuffer, &CudaBuffer),
    (out, lse, g): (&CudaBuffer, &CudaBuffer, &CudaBuffer),
    d: AttentionDims,
    scale: f32,
    causal: bool,
    dtype: &str,
) -> CudaResult<(CudaBuffer, CudaBuffer, CudaBuffer)> {
    check(d, "attention_backward");
    let dev = q.device();
    let w = width(dtype);
    let dq = dev.alloc(d.batch * d.l * d.e * w)?;
    let dk = dev.alloc(d.batch * d.s * d.e * w)?;
    let dv = dev.alloc(d.batch * d.s * d.ev * w)?;
    let delta = dev.alloc(d.batch * d.l * 4)?;
    let [l, s, e, ev] = sizes(d);
    let causal = causal as i32;
    let (pq, pk, pv) = (q.ptr(0), k.ptr(0), v.ptr(0));
    let (po, pm, pg, pd) = (out.ptr(0), lse.ptr(0), g.ptr(0), delta.ptr(0));
    let (pdq, pdk, pdv) = (dq.ptr(0), dk.ptr(0), dv.ptr(0));
    if d.batch * l > 0 {
        launch!(
            dev,
            format!("attention_backward_dq_{dtype}"),
            blocks(d, l, e + ev),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &pq,
            &pk,
            &pv,
            &po,
            &pm,
            &pg,
            &pd,
            &pdq
        )?;
    }
    if d.batch * s > 0 {
        launch!(
            dev,
            format!("attention_backward_dkv_{dtype}"),
            blocks(d, s, e + ev),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &pq,
            &pk,
            &pv,
            &pm,
            &pd,
            &pg,
            &pdk,
            &pdv
        )?;
    }
    Ok((dq, dk, dv))
}
