//! Fused optimizer updates.

use super::*;

/// The hyper-parameters of one fused Adam/AdamW step (PyTorch's names).
#[derive(Clone, Copy, Debug)]
pub struct AdamArgs {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub decoupled: bool,
    pub step: i32,
}

/// One fused Adam/AdamW step on `n` elements: `p` (dtype), `g` (dtype),
/// and f32 moments `m`, `v`, all updated in place.
pub fn adam(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    m: &mut CudaBuffer,
    v: &mut CudaBuffer,
    n: usize,
    dtype: &str,
    h: AdamArgs,
) -> CudaResult<()> {
    if n == 0 {
        return Ok(());
    }
    let dev = p.device().clone();
    let (pp, pg, pm, pv) = (p.ptr(0), g.ptr(0), m.ptr(0), v.ptr(0));
    let decoupled = h.decoupled as i32;
    launch!(
        &dev,
        format!("adam_{dtype}"),
        elems(n),
        &n,
        &pp,
        &pg,
        &pm,
        &pv,
        &h.lr,
        &h.beta1,
        &h.beta2,
        &h.eps,
        &h.weight_decay,
        &decoupled,
        &h.step
    )
}

/// The hyper-parameters of one fused SGD step (PyTorch's names).
#[derive(Clone, Copy, Debug)]
pub struct SgdArgs {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub weight_decay: f32,
    pub nesterov: bool,
    /// The first step with momentum: the buffer starts as the gradient.
    pub first: bool,
}

/// One fused SGD step on `n` elements; `buf` (f32) is the momentum buffer,
/// absent when `momentum` is 0.
pub fn sgd(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    buf: Option<&mut CudaBuffer>,
    n: usize,
    dtype: &str,
    h: SgdArgs,
) -> CudaResult<()> {
    if n == 0 {
        return Ok(());
    }
    let dev = p.device().clone();
    // Without momentum there is no buffer, and the kernel never reads it.
    let pb = buf.map_or(0, |b| b.ptr(0));
    let (pp, pg) = (p.ptr(0), g.ptr(0));
    let (nesterov, first) = (h.nesterov as i32, h.first as i32);
    launch!(
        &dev,
        format!("sgd_{dtype}"),
        elems(n),
        &n,
        &pp,
        &pg,
        &pb,
        &h.lr,
        &h.momentum,
        &h.dampening,
        &h.weight_decay,
        &nesterov,
        &first
    )
}
