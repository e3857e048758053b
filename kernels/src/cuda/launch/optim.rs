//! Fused optimizer updates. They take the CPU twins' hyper-parameters
//! (`AdamStep`, `SgdStep`, `RmspropStep`) and derive the same f32
//! constants from them; with a hyper table set on the device (a CUDA
//! graph's optimizer step, `cuda/hyper.rs`) the constants go through it.

use super::*;
use crate::optim::{AdamStep, OptimStep, RmspropStep, SgdStep};

/// Launches the fused update `<$name>_<dtype>` on `n` elements with its
/// device pointers `[$arg..]` and `$hyper` by value; with a hyper table set
/// on the device (a CUDA graph's optimizer step) the `_at` form reading a
/// table row instead, or, while a replay is prepared, nothing.
macro_rules! launch_update {
    ($dev:expr, $name:expr, $dtype:expr, $n:expr, [$($arg:expr),+], $hyper:expr) => {{
        let at_kernel = format!("{}_at_{}", $name, $dtype);
        match $dev.hyper_row(&at_kernel, $n, &[$($arg),+], &$hyper)? {
            None => launch!(&$dev, format!("{}_{}", $name, $dtype), elems($n), &$n, $(&$arg,)+ &$hyper),
            Some((at, true)) => launch!(&$dev, at_kernel, elems($n), &$n, $(&$arg,)+ &at),
            Some((_, false)) => Ok(()),
        }
    }};
}

/// `AdamHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct AdamHyper {
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    decay: f32,
    step_size: f32,
    bc2_sqrt: f32,
    decoupled: i32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for AdamHyper {}

/// `SgdHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SgdHyper {
    lr: f32,
    momentum: f32,
    damp: f32,
    weight_decay: f32,
    nesterov: i32,
    maximize: i32,
    first: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for SgdHyper {}

/// One fused Adam/AdamW step on `n` elements of parameter `p` with gradient
/// `g`, updating `state` in place: `[exp_avg, exp_avg_sq]`, plus
/// `max_exp_avg_sq` with amsgrad. Every buffer holds `dtype`.
pub fn adam(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    state: &mut [&mut CudaBuffer],
    n: usize,
    dtype: &str,
    h: &AdamStep,
) -> CudaResult<()> {
    assert!(
        state.len() == 2 + h.amsgrad as usize,
        "adam: expected {} state buffers (amsgrad {})",
        2 + h.amsgrad as usize,
        h.amsgrad
    );
    if n == 0 {
        return Ok(());
    }
    // As `cpu::adam_update`: constants from the step in f64, then rounded.
    let bc1 = 1.0 - h.beta1.powi(h.step as i32);
    let decoupled = h.decoupled && h.weight_decay != 0.0;
    let hyper = AdamHyper {
        beta1: h.beta1 as f32,
        beta2: h.beta2 as f32,
        eps: h.eps as f32,
        weight_decay: h.weight_decay as f32,
        decay: if decoupled {
            (1.0 - h.lr * h.weight_decay) as f32
        } else {
            1.0
        },
        step_size: (h.lr / bc1) as f32,
        bc2_sqrt: (1.0 - h.beta2.powi(h.step as i32)).sqrt() as f32,
        decoupled: h.decoupled as i32,
        maximize: h.maximize as i32,
    };
    let dev = p.device().clone();
    let (pp, pg) = (p.ptr(0), g.ptr(0));
    let (pm, pv) = (state[0].ptr(0), state[1].ptr(0));
    // Without amsgrad the kernel gets a null `vmax` and never reads it.
    let pmax = state.get(2).map_or(0, |b| b.ptr(0));
    launch_update!(dev, "adam", dtype, n, [pp, pg, pm, pv, pmax], hyper)
}

/// One fused SGD step on `n` elements; `buf` is the momentum buffer (of
/// `dtype`), absent when `momentum` is 0; `first` when it starts (PyTorch
/// then sets it to the gradient).
pub fn sgd(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    buf: Option<&mut CudaBuffer>,
    n: usize,
    dtype: &str,
    h: &SgdStep,
    first: bool,
) -> CudaResult<()> {
    assert!(
        buf.is_some() || h.momentum == 0.0,
        "sgd: momentum {} needs a buffer",
        h.momentum
    );
    if n == 0 {
        return Ok(());
    }
    let hyper = SgdHyper {
        lr: h.lr as f32,
        momentum: h.momentum as f32,
        damp: (1.0 - h.dampening) as f32,
        weight_decay: h.weight_decay as f32,
        nesterov: h.nesterov as i32,
        maximize: h.maximize as i32,
        first: first as i32,
    };
    let dev = p.device().clone();
    // Without momentum there is no buffer, and the kernel never reads it.
    let pb = buf.map_or(0, |b| b.ptr(0));
    let (pp, pg) = (p.ptr(0), g.ptr(0));
    launch_update!(dev, "sgd", dtype, n, [pp, pg, pb], hyper)
}

/// `RmspropHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RmspropHyper {
    lr: f32,
    alpha: f32,
    eps: f32,
    weight_decay: f32,
    momentum: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for RmspropHyper {}

/// One fused RMSprop step on `n` elements, updating `state` in place:
/// `[square_avg]`, then `momentum_buffer` when `momentum > 0`, then
/// `grad_avg` when centered (the optimizer's order). Every buffer holds `dtype`.
pub fn rmsprop(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    state: &mut [&mut CudaBuffer],
    n: usize,
    dtype: &str,
    h: &RmspropStep,
) -> CudaResult<()> {
    let has_mom = h.momentum > 0.0;
    assert!(
        state.len() == 1 + has_mom as usize + h.centered as usize,
        "rmsprop: state buffers for momentum {} and centered {}",
        h.momentum,
        h.centered
    );
    if n == 0 {
        return Ok(());
    }
    let hyper = RmspropHyper {
        lr: h.lr as f32,
        alpha: h.alpha as f32,
        eps: h.eps as f32,
        weight_decay: h.weight_decay as f32,
        momentum: h.momentum as f32,
        maximize: h.maximize as i32,
    };
    let dev = p.device().clone();
    let (pp, pg, psq) = (p.ptr(0), g.ptr(0), state[0].ptr(0));
    // Unused state is a null pointer, which the kernel never follows.
    let pbuf = if has_mom { state[1].ptr(0) } else { 0 };
    let pavg = if h.centered {
        state[1 + has_mom as usize].ptr(0)
    } else {
        0
    };
    launch_update!(dev, "rmsprop", dtype, n, [pp, pg, psq, pavg, pbuf], hyper)
}

/// One fused optimizer step of any kind on `n` elements of `dtype`: the
/// CUDA twin of [`OptimStep::apply`], with `state` in the step's order.
pub fn optim_step(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    state: &mut [&mut CudaBuffer],
    n: usize,
    dtype: &str,
    step: &OptimStep,
) -> CudaResult<()> {
    match step {
        OptimStep::Adam(h) => adam(p, g, state, n, dtype, h),
        OptimStep::Sgd { h, first } => {
            let buf = state.first_mut().map(|b| &mut **b);
            sgd(p, g, buf, n, dtype, h, *first)
        }
        OptimStep::Rmsprop(h) => rmsprop(p, g, state, n, dtype, h),
    }
}
