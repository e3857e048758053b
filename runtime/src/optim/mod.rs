//! Optimizers (`torch.optim`), learning-rate schedulers and gradient clipping.
//! Updates run as fused kernels that follow PyTorch's single-tensor
//! implementations, record nothing, and skip parameters whose grad is None;
//! on a GPU, consecutive parameters with the same step share a launch
//! (`fused.rs`).

/// The `param_groups` accessors of an optimizer that keeps its groups in
/// `self.groups`.
macro_rules! group_accessors {
    () => {
        fn param_groups(&self) -> &[ParamGroup] {
            &self.groups
        }
        fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
            &mut self.groups
        }
    };
}

/// `momentum` as beta1 (what OneCycleLR cycles) of an optimizer whose
/// config has `betas`.
macro_rules! beta1_is_momentum {
    () => {
        fn momentum(&self) -> Option<f64> {
            Some(self.cfg.betas.0)
        }
        fn set_momentum(&mut self, m: f64) {
            self.cfg.betas.0 = m;
        }
    };
}

mod adafactor;
mod adam;
mod adam_variants;
mod adaptive;
mod asgd;
mod clip;
mod combined_lr;
mod cyclic_lr;
mod fused;
mod lbfgs;
mod line_search;
mod lr_scheduler;
mod muon;
mod rmsprop;
mod rprop;
mod sgd;
pub mod swa_utils;

pub use adafactor::{Adafactor, AdafactorConfig};
pub use adam::{Adam, AdamConfig, AdamW, AdamWConfig};
pub use adam_variants::{Adamax, AdamaxConfig, NAdam, NAdamConfig, RAdam, RAdamConfig};
pub use adaptive::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig};
pub use asgd::{ASGD, AsgdConfig};
pub use clip::{
    clip_grad_norm_, clip_grad_norm_with, clip_grad_value_, parameters_to_vector,
    vector_to_parameters,
};
pub use combined_lr::{ChainedScheduler, SequentialLR};
pub use cyclic_lr::{CyclicLR, CyclicLrConfig, CyclicMode};
pub(crate) use fused::Updates;
pub use lbfgs::{LBFGS, LbfgsConfig, LineSearch};
pub use lr_scheduler::{
    ClosedForm, ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts, ExponentialLR,
    LambdaLR, LinearLR, LrScheduler, MultiStepLR, MultiplicativeLR, OneCycleLR, PlateauMode,
    PolynomialLR, ReduceLROnPlateau, StepLR,
};
pub use muon::{AdjustLr, Muon, MuonConfig};
pub use rmsprop::{RMSprop, RMSpropConfig};
pub use rprop::{Rprop, RpropConfig};
pub use sgd::{SGD, SgdConfig};

use crate::nn::StateDict;
use crate::{Error, Result, Tensor};
use tapir_kernels::optim::OptimStep;

/// Parameters that share a learning rate and weight decay, as given to an
/// optimizer's `with_groups`: each option left unset takes the optimizer's
/// default (PyTorch's per-group dicts).
///
/// ```
/// use tapir_runtime::{optim::{AdamW, AdamWConfig, GroupSpec, Optimizer}, Tensor};
/// let w = Tensor::ones(&[2, 2]).requires_grad_(true);
/// let b = Tensor::zeros(&[2]).requires_grad_(true);
/// let opt = AdamW::with_groups(
///     vec![GroupSpec::new(vec![w]), GroupSpec::new(vec![b]).weight_decay(0.0)],
///     AdamWConfig { lr: 1e-3, ..Default::default() },
/// );
/// assert_eq!(opt.param_groups()[0].weight_decay, 0.01);
/// assert_eq!(opt.param_groups()[1].weight_decay, 0.0);
/// ```
#[derive(Clone)]
pub struct GroupSpec {
    params: Vec<Tensor>,
    lr: Option<f64>,
    weight_decay: Option<f64>,
}

impl GroupSpec {
    /// A group of `params` with the optimizer's defaults.
    pub fn new(params: Vec<Tensor>) -> GroupSpec {
        GroupSpec {
            params,
            lr: None,
            weight_decay: None,
        }
    }
    /// This group's learning rate.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = Some(lr);
        self
    }
    /// This group's weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = Some(wd);
        self
    }
}

/// A group of parameters inside an optimizer, with its learning rate and
/// weight decay (`optimizer.param_groups` in PyTorch); schedulers change `lr`.
#[derive(Clone)]
pub struct ParamGroup {
    /// The parameters.
    pub params: Vec<Tensor>,
    /// The current learning rate.
    pub lr: f64,
    /// The weight decay.
    pub weight_decay: f64,
    /// The learning rate the group started with (schedulers compute from it).
    pub initial_lr: f64,
}

/// What every optimizer offers (`torch.optim.Optimizer`).
pub trait Optimizer {
    /// One update of every parameter that has a gradient.
    fn step(&mut self);
    /// The parameter groups with their lr and weight decay.
    fn param_groups(&self) -> &[ParamGroup];
    /// The same, to change (schedulers set `lr`).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup];
    /// Optimizer state (per-parameter buffers and step counts, group
    /// hyper-parameters) as named tensors, keyed like PyTorch's
    /// (`state.0.exp_avg`, `param_groups.0.lr`).
    fn state_dict(&self) -> StateDict;
    /// Restores the state `state_dict` saved (moved to each parameter's device).
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()>;
    /// The momentum-like coefficient OneCycleLR cycles (SGD momentum, Adam beta1).
    fn momentum(&self) -> Option<f64> {
        None
    }
    /// Sets the momentum-like coefficient OneCycleLR cycles.
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
        self.param_groups()[0].lr
    }

    /// Sets every group's learning rate.
    fn set_lr(&mut self, lr: f64) {
        for g in self.param_groups_mut() {
            g.lr = lr;
        }
    }
}

pub(crate) fn resolve_groups(
    groups: Vec<GroupSpec>,
    lr: f64,
    wd: f64,
    who: &str,
) -> Vec<ParamGroup> {
    check_params(&groups, who);
    groups
        .into_iter()
        .map(|g| {
            let (lr, wd) = (g.lr.unwrap_or(lr), g.weight_decay.unwrap_or(wd));
            assert!(lr >= 0.0, "{who}: invalid learning rate {lr}");
            assert!(wd >= 0.0, "{who}: invalid weight_decay {wd}");
            ParamGroup {
                params: g.params,
                lr,
                weight_decay: wd,
                initial_lr: lr,
            }
        })
        .collect()
}

/// PyTorch's checks on an optimizer's parameters: some, all leaves, none in
/// two groups (errors); one listed twice in a group is stepped twice, with
/// PyTorch's warning.
fn check_params(groups: &[GroupSpec], who: &str) {
    assert!(
        groups.iter().any(|g| !g.params.is_empty()),
        "{who}: optimizer got an empty parameter list"
    );
    let mut group_of = std::collections::HashMap::new();
    let mut duplicate = false;
    for (gi, g) in groups.iter().enumerate() {
        for (i, p) in g.params.iter().enumerate() {
            assert!(
                p.is_leaf(),
                "{who}: can't optimize a non-leaf tensor (parameter {i} of group {gi}, {:?}, comes from {}); pass \
                 the leaf it was computed from",
                p.shape(),
                p.grad_fn_name().unwrap_or("an op")
            );
            match group_of.insert(std::sync::Arc::as_ptr(&p.0), gi) {
                Some(other) if other != gi => panic!(
                    "{who}: some parameters appear in more than one parameter group (parameter {i} of group {gi}, \
                     {:?}, is in group {other} too)",
                    p.shape()
                ),
                Some(_) => duplicate = true,
                None => {}
            }
        }
    }
    if duplicate {
        eprintln!(
            "warning: {who}: optimizer contains a parameter group with duplicate parameters; each copy is stepped \
             (as in PyTorch, which will make this an error)"
        );
    }
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
        out.push((format!("param_groups.{gi}.lr"), Tensor::scalar(g.lr)));
        out.push((
            format!("param_groups.{gi}.weight_decay"),
            Tensor::scalar(g.weight_decay),
        ));
        out.push((
            format!("param_groups.{gi}.initial_lr"),
            Tensor::scalar(g.initial_lr),
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
        g.lr = scalar(&format!("param_groups.{gi}.lr"))?;
        g.weight_decay = scalar(&format!("param_groups.{gi}.weight_decay"))?;
        g.initial_lr = scalar(&format!("param_groups.{gi}.initial_lr"))?;
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

/// No state yet for any parameter of `groups`.
pub(crate) fn empty_state(groups: &[ParamGroup]) -> Vec<Option<ParamState>> {
    vec![None; groups.iter().map(|g| g.params.len()).sum()]
}

/// A parameter due for an update in [`step_each`].
pub(crate) struct Due {
    /// The parameter's flat index over the groups.
    pub index: usize,
    /// Its step count, this step included.
    pub step: u64,
    /// Its group's learning rate.
    pub lr: f64,
    /// Its group's weight decay.
    pub weight_decay: f64,
    /// Whether its state was created this step.
    pub first: bool,
}

/// One optimizer step: under the profiler's `label` and without recording,
/// every parameter that has a gradient advances its step count and is
/// updated by the fused update `update` makes for it; `init` makes the
/// state buffers of a parameter met for the first time.
pub(crate) fn step_each(
    label: &'static str,
    groups: &[ParamGroup],
    state: &mut [Option<ParamState>],
    init: impl Fn(&Tensor) -> Vec<(&'static str, Tensor)>,
    mut update: impl FnMut(Due) -> OptimStep,
) {
    let _p = crate::profiler::scope(label, "optimizer");
    let _g = crate::NoGradGuard::new();
    let mut updates = Updates::default();
    for (index, p, g, lr, weight_decay) in with_grads(groups) {
        let first = state[index].is_none();
        let st = state[index].get_or_insert_with(|| ParamState {
            step: 0,
            bufs: init(&p),
        });
        st.step += 1;
        let due = Due {
            index,
            step: st.step,
            lr,
            weight_decay,
            first,
        };
        let bufs: Vec<&Tensor> = st.bufs.iter().map(|(_, t)| t).collect();
        updates.push(&p, &g, &bufs, update(due));
    }
    updates.run();
}

/// One step of an optimizer composed of tensor ops (its update needs
/// reductions or matmuls, not one fused kernel): under the profiler's
/// `label` and without recording, every parameter that has a gradient
/// advances its step count and `update(param, grad, state, lr,
/// weight_decay)` runs; `init` makes a parameter's state the first time.
pub(crate) fn step_each_composed(
    label: &'static str,
    groups: &[ParamGroup],
    state: &mut [Option<ParamState>],
    init: impl Fn(&Tensor) -> Vec<(&'static str, Tensor)>,
    mut update: impl FnMut(&Tensor, &Tensor, &ParamState, f64, f64),
) {
    let _p = crate::profiler::scope(label, "optimizer");
    let _g = crate::NoGradGuard::new();
    for (index, p, g, lr, weight_decay) in with_grads(groups) {
        let st = state[index].get_or_insert_with(|| ParamState {
            step: 0,
            bufs: init(&p),
        });
        st.step += 1;
        update(&p, &g, st, lr, weight_decay);
    }
}

/// Every parameter that has a gradient, with its flat index, group lr and weight decay.
pub(crate) fn with_grads(groups: &[ParamGroup]) -> Vec<(usize, Tensor, Tensor, f64, f64)> {
    let mut out = vec![];
    let mut i = 0;
    for grp in groups {
        for p in &grp.params {
            if let Some(g) = p.grad() {
                out.push((i, p.clone(), g, grp.lr, grp.weight_decay));
            }
            i += 1;
        }
    }
    out
}

/// The first group's beta1 in a saved state (OneCycleLR may have moved it).
pub(crate) fn saved_beta1(dict: &[(String, Tensor)]) -> Option<f64> {
    let (_, b1) = dict.iter().find(|(n, _)| n == "param_groups.0.beta1")?;
    Some(b1.item::<f64>())
}

/// `torch.lerp(start, end, w)` with PyTorch's two-sided formula: from
/// `start` when `w < 0.5`, else back from `end` (so w = 1 gives `end`
/// exactly), for the optimizers composed of tensor ops.
pub(crate) fn lerp(start: &Tensor, end: &Tensor, w: f64) -> Tensor {
    let diff = end - start;
    if w < 0.5 {
        start + &(&diff * w)
    } else {
        end - &(&diff * (1.0 - w))
    }
}

/// `state.lerp_(end, w)`: [`lerp`] written back into `state`.
pub(crate) fn lerp_into(state: &Tensor, end: &Tensor, w: f64) {
    state.copy_(&lerp(state, end, w));
}
