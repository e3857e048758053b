//! Fused attention on the GPU (`cu/attention.cu`): one warp per row, an
//! online softmax, no `[l, s]` scores in memory. CPU twins:
//! `cpu::attention_forward` and `cpu::attention_backward`.

use super::*;
use crate::cpu::AttentionDims;

/// Rows (warps) per block, as `TAPIR_ATTN_WARPS` in the source.
const WARPS: usize = 4;

/// The widest `e` and `ev` the kernels hold in registers
/// (`TAPIR_ATTN_MAX_WIDTH`); wider heads run as separate ops.
pub const ATTENTION_MAX_WIDTH: usize = 256;

/// One warp per row over `rows`, with `floats` shared floats per warp.
fn per_warp(rows: usize, floats: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(WARPS) as u32, 1, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: (WARPS * floats * 4) as u32,
    }
}

/// The kernels' scalar arguments, in their order.
fn sizes(d: AttentionDims) -> [usize; 5] {
    [d.batch, d.l, d.s, d.e, d.ev]
}

fn check(d: AttentionDims, op: &str) {
    assert!(
        d.e <= ATTENTION_MAX_WIDTH && d.ev <= ATTENTION_MAX_WIDTH,
        "{op}: the CUDA kernel takes head widths up to {ATTENTION_MAX_WIDTH}, got e {} and ev {}",
        d.e,
        d.ev
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
        let [b, l, s, e, ev] = sizes(d);
        let causal = causal as i32;
        let (pq, pk, pv, po, pm) = (q.ptr(0), k.ptr(0), v.ptr(0), out.ptr(0), lse.ptr(0));
        launch!(
            dev,
            format!("attention_forward_{dtype}"),
            per_warp(b * l, e),
            &b,
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
    let [b, l, s, e, ev] = sizes(d);
    let causal = causal as i32;
    let (pq, pk, pv) = (q.ptr(0), k.ptr(0), v.ptr(0));
    let (po, pm, pg, pd) = (out.ptr(0), lse.ptr(0), g.ptr(0), delta.ptr(0));
    let (pdq, pdk, pdv) = (dq.ptr(0), dk.ptr(0), dv.ptr(0));
    if b * l > 0 {
        launch!(
            dev,
            format!("attention_backward_dq_{dtype}"),
            per_warp(b * l, e + ev),
            &b,
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
    if b * s > 0 {
        launch!(
            dev,
            format!("attention_backward_dkv_{dtype}"),
            per_warp(b * s, e + ev),
            &b,
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
