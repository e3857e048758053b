//! Weight averaging (`torch.optim.swa_utils`): [`AveragedModel`] keeps a
//! running average of a model's weights, as stochastic weight averaging
//! (an equal-weight mean of the snapshots) or as an exponential moving
//! average (EMA), to evaluate with instead of the last weights; [`SWALR`]
//! anneals the lr to the constant one SWA trains with.

use super::{LrScheduler, Optimizer};
use crate::Tensor;
use crate::nn::Module;
use std::sync::Arc;

/// An averaging rule: the new average from the old one, the model's
/// current tensor and how many snapshots the old average holds.
pub type AvgFn = Arc<dyn Fn(&Tensor, &Tensor, u64) -> Tensor + Send + Sync>;

/// How [`AveragedModel`] averages (PyTorch's `avg_fn` / `multi_avg_fn`).
#[derive(Clone)]
pub enum Averaging {
    /// The mean of every snapshot (the default): `avg + (current - avg) /
    /// (n + 1)`, as PyTorch computes it on the CPU.
    Swa,
    /// An exponential moving average (`get_ema_multi_avg_fn(decay)`):
    /// `avg.lerp(current, 1 - decay)`.
    Ema {
        /// The weight of the old average, in [0, 1].
        decay: f64,
    },
    /// A rule of the caller's (`avg_fn`).
    Custom(AvgFn),
}

impl Averaging {
    /// An EMA with `decay`, checked as PyTorch's `get_ema_multi_avg_fn`.
    ///
    /// ```
    /// use tapir_runtime::optim::swa_utils::Averaging;
    /// assert!(matches!(Averaging::ema(0.99), Averaging::Ema { decay } if decay == 0.99));
    /// ```
    pub fn ema(decay: f64) -> Averaging {
        assert!(
            (0.0..=1.0).contains(&decay),
            "get_ema_multi_avg_fn: invalid decay value {decay} provided; please provide a value in [0,1] range"
        );
        Averaging::Ema { decay }
    }

    fn apply(&self, avg: &Tensor, current: &Tensor, n: u64) -> Tensor {
        // Integer buffers (a batch count) are averaged in f64 and truncated
        // when written back, as PyTorch's non-lerp forms do.
        let float = avg.dtype().is_float();
        let widen = |t: &Tensor| {
            if float {
                t.clone()
            } else {
                t.to_dtype(crate::DType::F64)
            }
        };
        let (a, c) = (widen(avg), widen(current));
        match self {
            // PyTorch's `get_swa_avg_fn`, which its CPU path takes.
            Averaging::Swa => &a + &(&(&c - &a) / (n + 1) as f64),
            Averaging::Ema { decay } if float => super::lerp(&a, &c, 1.0 - decay),
            Averaging::Ema { decay } => &(&a * *decay) + &(&c * (1.0 - decay)),
            Averaging::Custom(f) => f(avg, current, n),
        }
    }
}

/// A model whose weights are the average of another's snapshots
/// (`torch.optim.swa_utils.AveragedModel`). Rust modules are not copied
/// behind the caller's back, so it is built from a second instance of the
/// architecture, which takes the model's weights at once (PyTorch's
/// `deepcopy(model)`).
///
/// ```
/// use tapir_runtime::nn::{Linear, Module};
/// use tapir_runtime::optim::swa_utils::{AveragedModel, Averaging};
/// use tapir_runtime::Tensor;
/// let model = Linear::new(2, 1, false);
/// let mut ema = AveragedModel::new(&model, Linear::new(2, 1, false), Averaging::ema(0.5));
/// let w = model.parameters()[0].clone();
/// tapir_runtime::no_grad(|| w.copy_(&Tensor::from_vec(vec![2.0f32, 4.0], &[1, 2])));
/// ema.update_parameters(&model); // the first snapshot is copied
/// tapir_runtime::no_grad(|| w.copy_(&Tensor::from_vec(vec![0.0f32, 0.0], &[1, 2])));
/// ema.update_parameters(&model);
/// assert_eq!(ema.module().parameters()[0].to_vec::<f32>(), vec![1.0, 2.0]);
/// assert_eq!(ema.n_averaged(), 2);
/// ```
pub struct AveragedModel<M: Module> {
    module: M,
    averaging: Averaging,
    use_buffers: bool,
    n_averaged: u64,
}

impl<M: Module> AveragedModel<M> {
    /// An average of `model`'s weights kept in `copy`, a second instance of
    /// the same architecture; buffers (BatchNorm's running statistics) are
    /// copied from the model at each update.
    pub fn new(model: &dyn Module, copy: M, averaging: Averaging) -> AveragedModel<M> {
        let averaged = AveragedModel {
            module: copy,
            averaging,
            use_buffers: false,
            n_averaged: 0,
        };
        let pairs = averaged.pairs(model, true);
        crate::no_grad(|| {
            pairs.iter().for_each(|(ours, theirs)| {
                ours.copy_(theirs);
            })
        });
        averaged
    }

    /// Averages the buffers too, instead of copying them (PyTorch's
    /// `use_buffers=True`).
    pub fn use_buffers(mut self, on: bool) -> Self {
        self.use_buffers = on;
        self
    }

    /// The averaged model, to evaluate with.
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The averaged model, to change (move it to a device, say).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// How many snapshots the average holds.
    pub fn n_averaged(&self) -> u64 {
        self.n_averaged
    }

    /// Our tensor and the model's, in visiting order: parameters, then
    /// buffers when `buffers`. Mismatched architectures are refused.
    fn pairs(&self, model: &dyn Module, buffers: bool) -> Vec<(Tensor, Tensor)> {
        let list = |m: &dyn Module| {
            let mut v = m.named_parameters();
            if buffers {
                v.extend(m.named_buffers());
            }
            v
        };
        let (ours, theirs) = (list(&self.module), list(model));
        let names = |v: &[(String, Tensor)]| {
            v.iter()
                .map(|(n, t)| (n.clone(), t.shape().to_vec()))
                .collect::<Vec<_>>()
        };
        assert!(
            names(&ours) == names(&theirs),
            "AveragedModel: the model's parameters and buffers ({:?}) are not the averaged copy's ({:?}); build the copy \
             with the model's architecture",
            names(&theirs),
            names(&ours)
        );
        ours.into_iter()
            .zip(theirs)
            .map(|((_, a), (_, b))| (a, b.detach()))
            .collect()
    }

    /// Adds `model`'s current weights to the average (the first call copies
    /// them); buffers are copied, or averaged with [`Self::use_buffers`].
    pub fn update_parameters(&mut self, model: &dyn Module) {
        let _g = crate::NoGradGuard::new();
        for (avg, current) in self.pairs(model, self.use_buffers) {
            let current = current
                .to(avg.device())
                .unwrap_or_else(|e| panic!("AveragedModel: {e}"));
            if self.n_averaged == 0 {
                avg.copy_(&current);
            } else {
                avg.copy_(&self.averaging.apply(&avg, &current, self.n_averaged));
            }
        }
        if !self.use_buffers {
            let (ours, theirs) = (self.module.named_buffers(), model.named_buffers());
            for ((_, b), (_, m)) in ours.iter().zip(&theirs) {
                b.copy_(m);
            }
        }
        self.n_averaged += 1;
    }
}

/// How [`SWALR`] moves the lr to the SWA lr (`anneal_strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AnnealStrategy {
    /// `(1 - cos(pi t)) / 2` of the way at fraction `t` (PyTorch's default).
    #[default]
    Cos,
    /// `t` of the way.
    Linear,
}

impl AnnealStrategy {
    fn alpha(self, t: f64) -> f64 {
        match self {
            AnnealStrategy::Cos => (1.0 - (std::f64::consts::PI * t).cos()) / 2.0,
            AnnealStrategy::Linear => t,
        }
    }
}

/// `torch.optim.swa_utils.SWALR`: anneals each group's lr to its SWA lr
/// over `anneal_epochs` steps, then holds it. Each step starts from the
/// group's *current* lr, as PyTorch's does, so it can take over from
/// another scheduler late in training. Constructing it applies step 0
/// (which leaves the lr unchanged unless `anneal_epochs` is 0).
///
/// ```
/// use tapir_runtime::{optim::{swa_utils::{AnnealStrategy, SWALR}, *}, Tensor};
/// let p = Tensor::zeros(&[1]).requires_grad_(true);
/// let mut opt = SGD::new(vec![p], SgdConfig { lr: 0.1, ..Default::default() });
/// let mut swa = SWALR::new(&mut opt, 0.05, 2, AnnealStrategy::Linear);
/// let lrs: Vec<f64> = (0..4).map(|_| { let lr = opt.lr(); swa.step(&mut opt); lr }).collect();
/// assert!((lrs[1] - 0.075).abs() < 1e-12 && lrs[2..] == [0.05, 0.05]);
/// ```
pub struct SWALR {
    swa_lrs: Vec<f64>,
    anneal_epochs: i64,
    strategy: AnnealStrategy,
    last_epoch: i64,
    step_count: i64,
    last_lr: Vec<f64>,
}

impl SWALR {
    /// `SWALR(optimizer, swa_lr, anneal_epochs, anneal_strategy)`, one SWA
    /// lr for every group (PyTorch's defaults: 10 epochs, cos).
    pub fn new(
        opt: &mut dyn Optimizer,
        swa_lr: f64,
        anneal_epochs: i64,
        strategy: AnnealStrategy,
    ) -> SWALR {
        let n = opt.param_groups().len();
        SWALR::per_group(opt, vec![swa_lr; n], anneal_epochs, strategy)
    }

    /// As [`SWALR::new`] with one SWA lr per parameter group.
    pub fn per_group(
        opt: &mut dyn Optimizer,
        swa_lrs: Vec<f64>,
        anneal_epochs: i64,
        strategy: AnnealStrategy,
    ) -> SWALR {
        let n = opt.param_groups().len();
        assert!(
            swa_lrs.len() == n,
            "SWALR: expected {n} values for swa_lr, got {}",
            swa_lrs.len()
        );
        assert!(
            anneal_epochs >= 0,
            "SWALR: anneal_epochs must be equal or greater than 0, got {anneal_epochs}"
        );
        let mut s = SWALR {
            swa_lrs,
            anneal_epochs,
            strategy,
            last_epoch: -1,
            step_count: 0,
            last_lr: vec![],
        };
        s.step(opt);
        s
    }

    /// Fraction `t` of the annealing, as PyTorch's `max(0, min(1, t))`.
    fn fraction(&self, step: i64) -> f64 {
        (step as f64 / self.anneal_epochs.max(1) as f64).clamp(0.0, 1.0)
    }
}

impl LrScheduler for SWALR {
    /// Advances one step (PyTorch's `SWALR` has no closed form: the epoch
    /// given only sets `last_epoch`).
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        self.step_count += 1;
        self.last_epoch = epoch;
        let mut step = self.step_count - 1;
        if self.anneal_epochs == 0 {
            step = step.max(1);
        }
        let prev_alpha = self.strategy.alpha(self.fraction(step - 1));
        let alpha = self.strategy.alpha(self.fraction(step));
        let groups = opt.param_groups_mut();
        self.last_lr = groups
            .iter_mut()
            .zip(&self.swa_lrs)
            .map(|(g, &swa_lr)| {
                // The lr this step would have started from, then moved on.
                let prev = if prev_alpha == 1.0 {
                    swa_lr
                } else {
                    (g.lr - prev_alpha * swa_lr) / (1.0 - prev_alpha)
                };
                g.lr = swa_lr * alpha + prev * (1.0 - alpha);
                g.lr
            })
            .collect();
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
    fn state_dict(&self) -> Vec<(String, f64)> {
        let mut s = vec![
            ("last_epoch".into(), self.last_epoch as f64),
            ("_step_count".into(), self.step_count as f64),
        ];
        for (i, lr) in self.last_lr.iter().enumerate() {
            s.push((format!("_last_lr.{i}"), *lr));
        }
        s
    }
    /// Restores the step count and the lrs last set (PyTorch's restores
    /// its attributes; the lrs come back with the optimizer's state).
    fn load_state_dict(&mut self, opt: &mut dyn Optimizer, state: &[(String, f64)]) {
        let get = |k: &str| state.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        self.last_epoch = get("last_epoch").map_or(self.last_epoch, |v| v as i64);
        self.step_count = get("_step_count").map_or(self.step_count, |v| v as i64);
        for (i, g) in opt.param_groups_mut().iter_mut().enumerate() {
            if let Some(lr) = get(&format!("_last_lr.{i}")) {
                g.lr = lr;
                if let Some(l) = self.last_lr.get_mut(i) {
                    *l = lr;
                }
            }
        }
    }
}

/// What [`update_bn`] takes from each batch a loader yields: the model's
/// input (the batch itself, or the first of its tensors, as PyTorch takes
/// `input[0]` from a list or tuple).
pub trait BatchInput {
    /// The tensor to run the model on.
    fn input(&self) -> &Tensor;
}

impl BatchInput for Tensor {
    fn input(&self) -> &Tensor {
        self
    }
}

impl BatchInput for Vec<Tensor> {
    fn input(&self) -> &Tensor {
        self.first().expect(
            "update_bn: a batch is an empty list of tensors, with no input to run the model on",
        )
    }
}

impl<T> BatchInput for (Tensor, T) {
    fn input(&self) -> &Tensor {
        &self.0
    }
}

impl<B: BatchInput> BatchInput for &B {
    fn input(&self) -> &Tensor {
        (*self).input()
    }
}

/// `torch.optim.swa_utils.update_bn`: recomputes every BatchNorm's running
/// statistics for the model's current (averaged) weights with one pass
/// over `loader` in train mode, each BatchNorm reset first and averaging
/// every batch equally (`momentum=None`); its momentum and the model's
/// train/eval mode are as before afterwards. Gradients are not recorded.
/// A BatchNorm the model does not run keeps its statistics (PyTorch would
/// reset it to zeros and ones).
///
/// ```
/// use tapir_runtime::{nn::{BatchNorm, Module}, optim::swa_utils::update_bn, Tensor};
/// let bn = BatchNorm::new_1d(1);
/// bn.eval();
/// let batches = [[1.0f32, 3.0], [5.0, 7.0]].map(|v| Tensor::from_vec(v.to_vec(), &[2, 1]));
/// update_bn(&batches, &bn);
/// // The mean of the two batch means, and of the two unbiased variances.
/// assert_eq!(bn.running_mean.as_ref().unwrap().item::<f32>(), 4.0);
/// assert_eq!(bn.running_var.as_ref().unwrap().item::<f32>(), 2.0);
/// assert!(!bn.is_training());
/// ```
pub fn update_bn<B: BatchInput>(
    loader: impl IntoIterator<Item = B>,
    model: &(impl crate::nn::Forward + ?Sized),
) {
    let was_training = model.is_training();
    model.train();
    crate::no_grad(|| {
        crate::nn::cumulative_running_stats(|| {
            for batch in loader {
                model.forward(batch.input());
            }
        })
    });
    model.set_training(was_training);
}
