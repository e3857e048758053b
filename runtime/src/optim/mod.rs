//! Optimizers (`torch.optim`), learning-rate schedulers and gradient clipping.
//! Updates run as fused kernels that follow PyTorch's single-tensor
//! implementations, record nothing, and skip parameters whose grad is None.

mod adam;
mod clip;
mod lr_scheduler;
mod rmsprop;
mod sgd;

pub use adam::{Adam, AdamConfig, AdamW};
pub use clip::{clip_grad_norm_, clip_grad_norm_with, clip_grad_value_};
pub use lr_scheduler::{
    ClosedForm, CosineAnnealingLR, CosineAnnealingWarmRestarts, ExponentialLR, LinearLR,
    LrScheduler, MultiStepLR, OneCycleLR, PlateauMode, ReduceLROnPlateau, SequentialLR, StepLR,
};
pub use rmsprop::{RMSprop, RMSpropConfig};
pub use sgd::{SGD, SgdConfig};

use crate::nn::StateDict;
use crate::storage::{CpuBuffer, GpuStep, HostMut, Storage};
use crate::{DType, Error, Result, Tensor};
use std::sync::RwLockWriteGuard;
use tapir_kernels::Layout;

/// A group of parameters sharing a learning rate and weight decay
/// (`None` takes the optimizer's default).
///
/// ```
/// use tapir_runtime::{optim::{AdamW, AdamConfig, Optimizer, ParamGroup}, Tensor};
/// let w = Tensor::ones(&[2, 2]).requires_grad_(true);
/// let b = Tensor::zeros(&[2]).requires_grad_(true);
/// let opt = AdamW::with_groups(
///     vec![ParamGroup::new(vec![w]), ParamGroup::new(vec![b]).weight_decay(0.0)],
///     AdamConfig { lr: 1e-3, weight_decay: 0.01, ..AdamConfig::adamw() },
/// );
/// assert_eq!(opt.param_groups()[1].weight_decay, Some(0.0));
/// ```
#[derive(Clone)]
pub struct ParamGroup {
    pub params: Vec<Tensor>,
    pub lr: Option<f64>,
    pub weight_decay: Option<f64>,
    /// The lr the group started with (schedulers compute from it).
    pub initial_lr: Option<f64>,
}

impl ParamGroup {
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup {
            params,
            lr: None,
            weight_decay: None,
            initial_lr: None,
        }
    }
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = Some(lr);
        self
    }
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = Some(wd);
        self
    }
    fn resolve(mut self, lr: f64, wd: f64) -> Self {
        self.lr = Some(self.lr.unwrap_or(lr));
        self.weight_decay = Some(self.weight_decay.unwrap_or(wd));
        self.initial_lr = self.lr;
        self
    }
    /// The group's learning rate.
    pub fn get_lr(&self) -> f64 {
        self.lr.expect("resolved at construction")
    }
    pub fn get_weight_decay(&self) -> f64 {
        self.weight_decay.expect("resolved at construction")
    }
}

/// What every optimizer offers (`torch.optim.Optimizer`).
pub trait Optimizer {
    /// One update of every parameter that has a gradient.
    fn step(&mut self);
    fn param_groups(&self) -> &[ParamGroup];
    fn param_groups_mut(&mut self) -> &mut [ParamGroup];
    /// Optimizer state (per-parameter buffers and step counts, group
    /// hyper-parameters) as named tensors, keyed like PyTorch's
    /// (`state.0.exp_avg`, `param_groups.0.lr`).
    fn state_dict(&self) -> StateDict;
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()>;
    /// The momentum-like coefficient OneCycleLR cycles (SGD momentum, Adam beta1).
    fn momentum(&self) -> Option<f64> {
        None
    }
    fn set_momentum(&mut self, _m: f64) {}

    /// Sets every gradient to None (PyTorch's default `set_to_none=True`).
    fn zero_grad(&mut self) {
        for g in self.param_groups() {
            for p in &g.params {
                p.set_grad(None);
            }
        }
    }

    /// The first group's learning rate.
    fn lr(&self) -> f64 {
        self.param_groups()[0].get_lr()
    }

    /// Sets every group's learning rate.
    fn set_lr(&mut self, lr: f64) {
        for g in self.param_groups_mut() {
            g.lr = Some(lr);
        }
    }
}

pub(crate) fn resolve_groups(
    groups: Vec<ParamGroup>,
    lr: f64,
    wd: f64,
    who: &str,
) -> Vec<ParamGroup> {
    assert!(lr >= 0.0, "{who}: invalid learning rate {lr}");
    assert!(wd >= 0.0, "{who}: invalid weight_decay {wd}");
    groups.into_iter().map(|g| g.resolve(lr, wd)).collect()
}

/// Per-parameter optimizer state: a step count and named buffers.
#[derive(Clone, Default)]
pub(crate) struct ParamState {
    pub step: u64,
    pub bufs: Vec<(&'static str, Tensor)>,
}

pub(crate) fn save_state(
    groups: &[ParamGroup],
    state: &[Option<ParamState>],
    extra: &[(&str, f64)],
) -> StateDict {
    let mut out = vec![];
    for (i, s) in state.iter().enumerate() {
        if let Some(s) = s {
            out.push((format!("state.{i}.step"), Tensor::scalar(s.step as f64)));
            for (n, t) in &s.bufs {
                out.push((format!("state.{i}.{n}"), t.detach().contiguous_copy()));
            }
        }
    }
    for (gi, g) in groups.iter().enumerate() {
        out.push((format!("param_groups.{gi}.lr"), Tensor::scalar(g.get_lr())));
        out.push((
            format!("param_groups.{gi}.weight_decay"),
            Tensor::scalar(g.get_weight_decay()),
        ));
        out.push((
            format!("param_groups.{gi}.initial_lr"),
            Tensor::scalar(g.initial_lr.unwrap_or(g.get_lr())),
        ));
        for (k, v) in extra {
            out.push((format!("param_groups.{gi}.{k}"), Tensor::scalar(*v)));
        }
    }
    out
}

pub(crate) fn load_state(
    groups: &mut [ParamGroup],
    state: &mut [Option<ParamState>],
    dict: &[(String, Tensor)],
    buf_names: &[&'static str],
) -> Result<()> {
    let get = |k: &str| dict.iter().find(|(n, _)| n == k).map(|(_, t)| t);
    let scalar = |k: &str| {
        get(k)
            .map(|t| t.item::<f64>())
            .ok_or_else(|| Error::Format(format!("optimizer state: missing {k}")))
    };
    for (gi, g) in groups.iter_mut().enumerate() {
        g.lr = Some(scalar(&format!("param_groups.{gi}.lr"))?);
        g.weight_decay = Some(scalar(&format!("param_groups.{gi}.weight_decay"))?);
        g.initial_lr = Some(scalar(&format!("param_groups.{gi}.initial_lr"))?);
    }
    let params: Vec<&Tensor> = groups.iter().flat_map(|g| g.params.iter()).collect();
    for (i, slot) in state.iter_mut().enumerate() {
        *slot = match get(&format!("state.{i}.step")) {
            None => None,
            Some(step) => {
                let mut bufs = vec![];
                for &n in buf_names {
                    if let Some(t) = get(&format!("state.{i}.{n}")) {
                        if t.shape() != params[i].shape() {
                            return Err(Error::Format(format!(
                                "optimizer state: state.{i}.{n} has shape {:?}, parameter {i} has {:?}",
                                t.shape(),
                                params[i].shape()
                            )));
                        }
                        // State lives with its parameter (a CPU checkpoint
                        // resumes a GPU run), as PyTorch's load_state_dict.
                        let t = t.to(params[i].device())?;
                        bufs.push((n, t.to_dtype(params[i].dtype()).contiguous_copy()));
                    }
                }
                Some(ParamState {
                    step: step.item::<f64>() as u64,
                    bufs,
                })
            }
        };
    }
    Ok(())
}

/// Runs a fused update over the contiguous buffers of a parameter, its
/// gradient and its state tensors, in f32 or f64 (f16 and bf16 compute in
/// f32). `gpu` describes the same update for the fused GPU kernels, used
/// when the tensors live on a GPU and the kernels take their dtype (f32,
/// f16, bf16); otherwise the update runs on the host.
pub(crate) fn fused<F32, F64>(
    p: &Tensor,
    g: &Tensor,
    states: &[&Tensor],
    gpu: Option<GpuStep>,
    f32: F32,
    f64: F64,
) where
    F32: Fn(&mut [f32], &[f32], &mut [&mut [f32]]) + Sync,
    F64: Fn(&mut [f64], &[f64], &mut [&mut [f64]]) + Sync,
{
    for t in std::iter::once(p).chain(states.iter().copied()) {
        assert!(
            t.is_contiguous() && t.layout().offset == 0 && t.read().len() == t.numel(),
            "optimizer: parameters and their state must be whole contiguous tensors (got shape {:?}, strides {:?})",
            t.shape(),
            t.strides()
        );
    }
    let g = crate::ops::dense0(&g.to_dtype(p.dtype()));
    let gs = g.read();
    let n = p.numel();
    let mut guards: Vec<RwLockWriteGuard<'_, Storage>> = std::iter::once(p)
        .chain(states.iter().copied())
        .map(|t| t.write())
        .collect();
    if let Some(step) = gpu {
        let (pg, rest) = guards.split_first_mut().unwrap();
        let mut rest: Vec<&mut Storage> = rest.iter_mut().map(|s| &mut **s).collect();
        if Storage::optim_step_gpu(pg, &gs, &mut rest, n, step) {
            return;
        }
    }
    // On a GPU these are host copies written back when dropped.
    let mut hosts: Vec<HostMut<'_>> = guards.iter_mut().map(|g| g.host_mut()).collect();
    let gh = gs.host();
    let (pg, rest) = hosts.split_first_mut().unwrap();
    match (&mut **pg, &*gh) {
        (CpuBuffer::F32(pv), CpuBuffer::F32(gv)) => {
            let st: Vec<&mut [f32]> = rest.iter_mut().map(|s| as_f32(s)).collect();
            chunked(pv, &gv[..n], st, &f32)
        }
        (CpuBuffer::F64(pv), CpuBuffer::F64(gv)) => {
            let st: Vec<&mut [f64]> = rest.iter_mut().map(|s| as_f64(s)).collect();
            chunked(pv, &gv[..n], st, &f64)
        }
        (pv, gv) if matches!(pv.dtype(), DType::F16 | DType::BF16) && gv.dtype() == pv.dtype() => {
            // PyTorch's fused kernels for reduced-precision parameters (and
            // ours on a GPU): the math in f32, the parameter and its state
            // rounded once when stored.
            let dtype = pv.dtype();
            let l = Layout::contiguous(&[n]);
            let mut p32 = pv.to_vec::<f32>(&l);
            let g32 = gv.to_vec::<f32>(&l);
            let mut s32: Vec<Vec<f32>> = rest
                .iter()
                .map(|s| {
                    assert_eq!(
                        s.dtype(),
                        dtype,
                        "optimizer: state buffer is {}, parameter is {dtype}",
                        s.dtype()
                    );
                    s.to_vec::<f32>(&l)
                })
                .collect();
            let st = s32.iter_mut().map(|s| s.as_mut_slice()).collect();
            chunked(&mut p32, &g32, st, &f32);
            **pg = CpuBuffer::F32(p32).cast(&l, dtype);
            for (s, v) in rest.iter_mut().zip(s32) {
                **s = CpuBuffer::F32(v).cast(&l, dtype);
            }
        }
        _ => panic!(
            "optimizer: parameters must be floating point, got {}",
            p.dtype()
        ),
    }
}

/// Applies an elementwise update to aligned chunks of the parameter, its
/// gradient and its state on all threads (updates are independent per element).
fn chunked<T: Send + Sync>(
    p: &mut [T],
    g: &[T],
    mut st: Vec<&mut [T]>,
    f: &(impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync),
) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 14;
    if !tapir_kernels::threads::parallel(p.len()) {
        return f(p, g, &mut st);
    }
    // Split every state buffer into the same chunks as the parameter.
    let mut state_chunks: Vec<std::slice::ChunksMut<'_, T>> =
        st.iter_mut().map(|s| s.chunks_mut(CHUNK)).collect();
    type Work<'a, T> = (&'a mut [T], &'a [T], Vec<&'a mut [T]>);
    let work: Vec<Work<'_, T>> = p
        .chunks_mut(CHUNK)
        .zip(g.chunks(CHUNK))
        .map(|(pc, gc)| {
            let sc = state_chunks
                .iter_mut()
                .map(|it| it.next().expect("state matches the parameter"))
                .collect();
            (pc, gc, sc)
        })
        .collect();
    tapir_kernels::threads::install(|_| {
        work.into_par_iter()
            .for_each(|(pc, gc, mut sc)| f(pc, gc, &mut sc))
    });
}

fn as_f32(b: &mut CpuBuffer) -> &mut [f32] {
    match b {
        CpuBuffer::F32(v) => v,
        other => panic!(
            "optimizer: state buffer is {}, parameter is float32",
            other.dtype()
        ),
    }
}

fn as_f64(b: &mut CpuBuffer) -> &mut [f64] {
    match b {
        CpuBuffer::F64(v) => v,
        other => panic!(
            "optimizer: state buffer is {}, parameter is float64",
            other.dtype()
        ),
    }
}

/// Every parameter that has a gradient, with its flat index, group lr and weight decay.
pub(crate) fn with_grads(groups: &[ParamGroup]) -> Vec<(usize, Tensor, Tensor, f64, f64)> {
    let mut out = vec![];
    let mut i = 0;
    for grp in groups {
        for p in &grp.params {
            if let Some(g) = p.grad() {
                out.push((i, p.clone(), g, grp.get_lr(), grp.get_weight_decay()));
            }
            i += 1;
        }
    }
    out
}
