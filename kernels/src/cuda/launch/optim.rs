//! Fused optimizer updates. They take the CPU twins' hyper-parameters
//! (`AdamStep`, `SgdStep`, `RmspropStep`) and derive the same f32
//! constants from them; with a hyper table set on the device (a CUDA
//! graph's optimizer step, `cuda/hyper.rs`) the constants go through it.

use super::optim_hypers::{
    AdadeltaHyper, AdagradHyper, AdamaxHyper, AsgdHyper, NadamHyper, RadamHyper, RpropHyper,
};
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
pub(in crate::cuda) struct AdamHyper {
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
pub(in crate::cuda) struct SgdHyper {
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

impl AdamHyper {
    /// As `cpu::adam_update`: constants from the step in f64, then rounded.
    fn new(h: &AdamStep) -> AdamHyper {
        let bc1 = 1.0 - h.beta1.powi(h.step as i32);
        let decoupled = h.decoupled && h.weight_decay != 0.0;
        AdamHyper {
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
        }
    }
}

impl SgdHyper {
    fn new(h: &SgdStep, first: bool) -> SgdHyper {
        SgdHyper {
            lr: h.lr as f32,
            momentum: h.momentum as f32,
            damp: (1.0 - h.dampening) as f32,
            weight_decay: h.weight_decay as f32,
            nesterov: h.nesterov as i32,
            maximize: h.maximize as i32,
            first: first as i32,
        }
    }
}

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
    optim_step(p, g, state, n, dtype, &OptimStep::Adam(*h))
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
    let mut state: Vec<&mut CudaBuffer> = buf.into_iter().collect();
    optim_step(p, g, &mut state, n, dtype, &OptimStep::Sgd { h: *h, first })
}

/// `RmspropHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct RmspropHyper {
    lr: f32,
    alpha: f32,
    eps: f32,
    weight_decay: f32,
    momentum: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for RmspropHyper {}

impl RmspropHyper {
    fn new(h: &RmspropStep) -> RmspropHyper {
        RmspropHyper {
            lr: h.lr as f32,
            alpha: h.alpha as f32,
            eps: h.eps as f32,
            weight_decay: h.weight_decay as f32,
            momentum: h.momentum as f32,
            maximize: h.maximize as i32,
        }
    }
}

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
    optim_step(p, g, state, n, dtype, &OptimStep::Rmsprop(*h))
}

/// A fused update's hyper-parameters, as its kernel takes them.
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) enum Hyper {
    Adam(AdamHyper),
    Sgd(SgdHyper),
    Rmsprop(RmspropHyper),
    Adagrad(AdagradHyper),
    Adadelta(AdadeltaHyper),
    Adamax(AdamaxHyper),
    Nadam(NadamHyper),
    Radam(RadamHyper),
    Rprop(RpropHyper),
    Asgd(AsgdHyper),
}

#[cfg(test)]
impl Hyper {
    /// The struct's bytes, as its kernel takes it by value and as a hyper
    /// table row holds it (for the emulator).
    pub(in crate::cuda) fn bytes(&self) -> Vec<u8> {
        use crate::cuda::hyper::row_bytes;
        match self {
            Hyper::Adam(h) => row_bytes(h).to_vec(),
            Hyper::Sgd(h) => row_bytes(h).to_vec(),
            Hyper::Rmsprop(h) => row_bytes(h).to_vec(),
            Hyper::Adagrad(h) => row_bytes(h).to_vec(),
            Hyper::Adadelta(h) => row_bytes(h).to_vec(),
            Hyper::Adamax(h) => row_bytes(h).to_vec(),
            Hyper::Nadam(h) => row_bytes(h).to_vec(),
            Hyper::Radam(h) => row_bytes(h).to_vec(),
            Hyper::Rprop(h) => row_bytes(h).to_vec(),
            Hyper::Asgd(h) => row_bytes(h).to_vec(),
        }
    }
}

/// What one fused update launches: the kernel's op (`adam`, `sgd`,
/// `rmsprop`), for each of its state pointers in the kernel's order the
/// index of the step's state buffer it is (`None`: a null pointer the
/// kernel never follows), and the hyper-parameters. The emulator's tests
/// run the kernels from this plan, so it is checked without a GPU.
pub(in crate::cuda) struct UpdatePlan {
    pub op: &'static str,
    pub state: Vec<Option<usize>>,
    pub hyper: Hyper,
}

impl UpdatePlan {
    pub(in crate::cuda) fn new(step: &OptimStep) -> UpdatePlan {
        match step {
            // adam_<T>(n, p, g, m, v, vmax, h)
            OptimStep::Adam(h) => UpdatePlan {
                op: "adam",
                state: vec![Some(0), Some(1), h.amsgrad.then_some(2)],
                hyper: Hyper::Adam(AdamHyper::new(h)),
            },
            // sgd_<T>(n, p, g, buf, h)
            OptimStep::Sgd { h, first } => UpdatePlan {
                op: "sgd",
                state: vec![(h.momentum != 0.0).then_some(0)],
                hyper: Hyper::Sgd(SgdHyper::new(h, *first)),
            },
            // rmsprop_<T>(n, p, g, sq, gavg, buf, h); the state is
            // [square_avg, momentum_buffer?, grad_avg?].
            OptimStep::Rmsprop(h) => {
                let mom = h.momentum > 0.0;
                UpdatePlan {
                    op: "rmsprop",
                    state: vec![
                        Some(0),
                        h.centered.then_some(1 + mom as usize),
                        mom.then_some(1),
                    ],
                    hyper: Hyper::Rmsprop(RmspropHyper::new(h)),
                }
            }
            // <op>_<T>(n, p, g, s0[, s1], h), state in the step's order.
            OptimStep::Adagrad(h) => {
                UpdatePlan::in_order("adagrad", 1, Hyper::Adagrad(AdagradHyper::new(h)))
            }
            OptimStep::Adadelta(h) => {
                UpdatePlan::in_order("adadelta", 2, Hyper::Adadelta(AdadeltaHyper::new(h)))
            }
            OptimStep::Adamax(h) => {
                UpdatePlan::in_order("adamax", 2, Hyper::Adamax(AdamaxHyper::new(h)))
            }
            OptimStep::Nadam(h) => {
                UpdatePlan::in_order("nadam", 2, Hyper::Nadam(NadamHyper::new(h)))
            }
            OptimStep::Radam(h) => {
                UpdatePlan::in_order("radam", 2, Hyper::Radam(RadamHyper::new(h)))
            }
            OptimStep::Rprop(h) => {
                UpdatePlan::in_order("rprop", 2, Hyper::Rprop(RpropHyper::new(h)))
            }
            OptimStep::Asgd(h) => UpdatePlan::in_order("asgd", 1, Hyper::Asgd(AsgdHyper::new(h))),
        }
    }

    /// A plan whose kernel takes the step's `states` state buffers in the
    /// step's own order.
    fn in_order(op: &'static str, states: usize, hyper: Hyper) -> UpdatePlan {
        UpdatePlan {
            op,
            state: (0..states).map(Some).collect(),
            hyper,
        }
    }
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
    assert!(
        state.len() == step.state_len(),
        "optimizer step on the GPU: {} state buffers for {step:?}",
        state.len()
    );
    if n == 0 {
        return Ok(());
    }
    let plan = UpdatePlan::new(step);
    let dev = p.device().clone();
    let (pp, pg) = (p.ptr(0), g.ptr(0));
    let ptr = |k: Option<usize>| k.map_or(0, |i| state[i].ptr(0));
    let s: Vec<u64> = plan.state.iter().map(|&k| ptr(k)).collect();
    match plan.hyper {
        Hyper::Adam(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1], s[2]], h),
        Hyper::Sgd(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0]], h),
        Hyper::Rmsprop(h) => {
            launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1], s[2]], h)
        }
        Hyper::Adagrad(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0]], h),
        Hyper::Adadelta(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1]], h),
        Hyper::Adamax(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1]], h),
        Hyper::Nadam(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1]], h),
        Hyper::Radam(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1]], h),
        Hyper::Rprop(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0], s[1]], h),
        Hyper::Asgd(h) => launch_update!(dev, plan.op, dtype, n, [pp, pg, s[0]], h),
    }
}

/// Tensors per multi-tensor launch (`TAPIR_MULTI` in `cu/optim.cu`).
pub const MULTI: usize = 16;

/// `MultiTensors` in `cu/optim.cu`: lengths and addresses of up to
/// [`MULTI`] tensors, state pointers in the kernel's order (0 where unused).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::cuda) struct MultiTensors {
    pub n: [u64; MULTI],
    pub p: [u64; MULTI],
    pub g: [u64; MULTI],
    pub s: [[u64; MULTI]; 3],
}

// SAFETY: plain `#[repr(C)]` u64 arrays matching the C struct, by value.
unsafe impl DeviceRepr for MultiTensors {}

/// One tensor of a multi-tensor update: the parameter, its gradient, its
/// state buffers in the step's order, and its length.
pub type UpdateItem<'a> = (
    &'a mut CudaBuffer,
    &'a CudaBuffer,
    Vec<&'a mut CudaBuffer>,
    usize,
);

impl MultiTensors {
    /// The table of `items` (at most [`MULTI`]) for `plan`: each kernel
    /// state pointer is the plan's state buffer, or 0.
    pub(in crate::cuda) fn new(plan: &UpdatePlan, items: &[(u64, u64, Vec<u64>, usize)]) -> Self {
        assert!(items.len() <= MULTI, "at most {MULTI} tensors per launch");
        let mut t = MultiTensors::default();
        for (k, (p, g, state, n)) in items.iter().enumerate() {
            t.n[k] = *n as u64;
            t.p[k] = *p;
            t.g[k] = *g;
            for (j, which) in plan.state.iter().enumerate() {
                t.s[j][k] = which.map_or(0, |i| state[i]);
            }
        }
        t
    }
}

#[cfg(test)]
impl MultiTensors {
    /// The struct's bytes as its kernel takes it (for the emulator).
    pub(in crate::cuda) fn bytes(&self) -> Vec<u8> {
        let arrays = [
            &self.n, &self.p, &self.g, &self.s[0], &self.s[1], &self.s[2],
        ];
        arrays
            .iter()
            .flat_map(|a| a.iter().flat_map(|x| x.to_le_bytes()))
            .collect()
    }
}

/// The launch shape of a multi-tensor update: a row of blocks (grid y) per
/// tensor, enough blocks across (grid x, at most 1024) for the longest.
pub(in crate::cuda) fn multi_blocks(longest: usize, tensors: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            longest.div_ceil(256).clamp(1, 1024) as u32,
            tensors as u32,
            1,
        ),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One fused optimizer step of `step` on many tensors of `dtype` at once,
/// [`MULTI`] per launch (PyTorch's default multi-tensor `foreach` path on
/// CUDA): the same update as [`optim_step`] on each, in fewer launches.
pub fn optim_step_many(
    items: &mut [UpdateItem<'_>],
    dtype: &str,
    step: &OptimStep,
) -> CudaResult<()> {
    for (_, _, state, _) in items.iter() {
        assert!(
            state.len() == step.state_len(),
            "optimizer step on the GPU: {} state buffers for {step:?}",
            state.len()
        );
    }
    let plan = UpdatePlan::new(step);
    for chunk in items.chunks(MULTI) {
        let addresses: Vec<(u64, u64, Vec<u64>, usize)> = chunk
            .iter()
            .map(|(p, g, state, n)| {
                (
                    p.ptr(0),
                    g.ptr(0),
                    state.iter().map(|s| s.ptr(0)).collect(),
                    *n,
                )
            })
            .collect();
        let longest = chunk.iter().map(|c| c.3).max().unwrap_or(0);
        if longest == 0 {
            continue;
        }
        let dev = chunk[0].0.device().clone();
        let table = MultiTensors::new(&plan, &addresses);
        let cfg = multi_blocks(longest, chunk.len());
        let total: usize = chunk.iter().map(|c| c.3).sum();
        let flat: Vec<u64> = addresses
            .iter()
            .flat_map(|(p, g, s, _)| [*p, *g].into_iter().chain(s.iter().copied()))
            .collect();
        let at_kernel = format!("{}_multi_at_{dtype}", plan.op);
        let name = format!("{}_multi_{dtype}", plan.op);
        macro_rules! go {
            ($h:expr) => {
                match dev.hyper_row(&at_kernel, total, &flat, &$h)? {
                    None => launch!(&dev, name, cfg, &table, &$h),
                    Some((at, true)) => launch!(&dev, at_kernel, cfg, &table, &at),
                    Some((_, false)) => Ok(()),
                }
            };
        }
        match plan.hyper {
            Hyper::Adam(h) => go!(h),
            Hyper::Sgd(h) => go!(h),
            Hyper::Rmsprop(h) => go!(h),
            Hyper::Adagrad(h) => go!(h),
            Hyper::Adadelta(h) => go!(h),
            Hyper::Adamax(h) => go!(h),
            Hyper::Nadam(h) => go!(h),
            Hyper::Radam(h) => go!(h),
            Hyper::Rprop(h) => go!(h),
            Hyper::Asgd(h) => go!(h),
        }?;
    }
    Ok(())
}
