//! Learning-rate schedulers (`torch.optim.lr_scheduler`). Each computes the lr
//! for an epoch in closed form from the groups' initial lrs (PyTorch's chained
//! updates give the same values up to rounding) and writes it into the
//! optimizer; like PyTorch's, constructing one applies epoch 0. Those with
//! a chainable form in PyTorch also carry it, for `ChainedScheduler`.

use super::Optimizer;
use std::f64::consts::PI;

/// A scheduler driven by epoch (or step) count.
pub trait LrScheduler {
    /// Sets the lr for `epoch` (PyTorch's `step(epoch)`).
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64);
    /// The epoch (or step) last set.
    fn last_epoch(&self) -> i64;
    /// The lrs it last set, one per group.
    fn get_last_lr(&self) -> Vec<f64>;

    /// Sets the lr for `epoch` from the lr the optimizer holds now, as
    /// PyTorch's chainable `get_lr` does (what [`super::ChainedScheduler`]
    /// calls, so several schedulers compose). A scheduler with no such
    /// form (`LambdaLR`, the cyclic ones) sets its closed form.
    fn chain_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        self.set_epoch(opt, epoch);
    }

    /// Advances one epoch (PyTorch's `step()`).
    fn step(&mut self, opt: &mut dyn Optimizer) {
        let e = self.last_epoch() + 1;
        self.set_epoch(opt, e);
    }

    /// The scheduler's state as named numbers (for checkpoints).
    fn state_dict(&self) -> Vec<(String, f64)> {
        vec![("last_epoch".into(), self.last_epoch() as f64)]
    }

    /// Restores [`LrScheduler::state_dict`] and re-applies that epoch's lr.
    fn load_state_dict(&mut self, opt: &mut dyn Optimizer, state: &[(String, f64)]) {
        let epoch = state
            .iter()
            .find(|(k, _)| k == "last_epoch")
            .map_or(self.last_epoch(), |(_, v)| *v as i64);
        self.set_epoch(opt, epoch);
    }
}

fn base_lrs(opt: &dyn Optimizer) -> Vec<f64> {
    opt.param_groups().iter().map(|g| g.initial_lr).collect()
}

/// A scheduler given by `lr(base_lr, epoch)`.
pub struct ClosedForm {
    base: Vec<f64>,
    last_epoch: i64,
    last_lr: Vec<f64>,
    f: Box<dyn Fn(f64, i64) -> f64 + Send + Sync>,
    /// PyTorch's chainable form: `(lr now, base lr, epoch) -> lr`.
    chain: Option<Box<LrRecurrence>>,
}

/// A chainable step: the lr for an epoch from the lr now and the base lr.
type LrRecurrence = dyn Fn(f64, f64, i64) -> f64 + Send + Sync;

impl ClosedForm {
    fn new(
        opt: &mut dyn Optimizer,
        f: impl Fn(f64, i64) -> f64 + Send + Sync + 'static,
    ) -> ClosedForm {
        let mut s = ClosedForm {
            base: base_lrs(opt),
            last_epoch: -1,
            last_lr: vec![],
            f: Box::new(f),
            chain: None,
        };
        s.step(opt);
        s
    }

    /// Gives the scheduler PyTorch's chainable form (see
    /// [`LrScheduler::chain_epoch`]).
    fn chainable(mut self, chain: impl Fn(f64, f64, i64) -> f64 + Send + Sync + 'static) -> Self {
        self.chain = Some(Box::new(chain));
        self
    }
}

impl LrScheduler for ClosedForm {
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        self.last_epoch = epoch;
        self.last_lr = self.base.iter().map(|&b| (self.f)(b, epoch)).collect();
        for (g, &lr) in opt.param_groups_mut().iter_mut().zip(&self.last_lr) {
            g.lr = lr;
        }
    }
    fn chain_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        let Some(chain) = &self.chain else {
            return self.set_epoch(opt, epoch);
        };
        self.last_epoch = epoch;
        self.last_lr.clear();
        for (g, &base) in opt.param_groups_mut().iter_mut().zip(&self.base) {
            g.lr = chain(g.lr, base, epoch);
            self.last_lr.push(g.lr);
        }
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}

/// Decays by `gamma` every `step_size` epochs.
///
/// ```
/// use tapir_runtime::{optim::*, Tensor};
/// let mut opt = SGD::new(vec![Tensor::zeros(&[1]).requires_grad_(true)], SgdConfig { lr: 1.0, ..Default::default() });
/// let mut s = StepLR::new(&mut opt, 2, 0.5);
/// let lrs: Vec<f64> = (0..5).map(|_| { let lr = opt.lr(); s.step(&mut opt); lr }).collect();
/// assert_eq!(lrs, [1.0, 1.0, 0.5, 0.5, 0.25]);
/// ```
pub struct StepLR;
impl StepLR {
    /// Multiplies the lr by `gamma` every `step_size` epochs (`StepLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, step_size: i64, gamma: f64) -> ClosedForm {
        ClosedForm::new(opt, move |b, e| b * gamma.powi((e / step_size) as i32)).chainable(
            move |lr, _, e| {
                if e == 0 || e % step_size != 0 {
                    lr
                } else {
                    lr * gamma
                }
            },
        )
    }
}

/// Decays by `gamma` at each milestone.
pub struct MultiStepLR;
impl MultiStepLR {
    /// Multiplies the lr by `gamma` at each milestone (`MultiStepLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, milestones: Vec<i64>, gamma: f64) -> ClosedForm {
        let at = milestones.clone();
        ClosedForm::new(opt, move |b, e| {
            b * gamma.powi(milestones.iter().filter(|&&m| m <= e).count() as i32)
        })
        .chainable(move |lr, _, e| {
            // A milestone listed twice decays twice (PyTorch's Counter).
            match at.iter().filter(|&&m| m == e).count() {
                0 => lr,
                n => lr * gamma.powf(n as f64),
            }
        })
    }
}

/// Decays by `gamma` every epoch.
pub struct ExponentialLR;
impl ExponentialLR {
    /// Multiplies the lr by `gamma` every epoch (`ExponentialLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> ClosedForm {
        ClosedForm::new(opt, move |b, e| b * gamma.powi(e as i32))
            .chainable(move |lr, _, e| if e == 0 { lr } else { lr * gamma })
    }
}

/// Cosine from the base lr down to `eta_min` over `t_max` epochs.
///
/// ```
/// use tapir_runtime::{optim::*, Tensor};
/// let mut opt = SGD::new(vec![Tensor::zeros(&[1]).requires_grad_(true)], SgdConfig { lr: 1.0, ..Default::default() });
/// let mut s = CosineAnnealingLR::new(&mut opt, 4, 0.0);
/// s.step(&mut opt);
/// s.step(&mut opt);
/// assert!((opt.lr() - 0.5).abs() < 1e-12); // halfway down the cosine
/// ```
pub struct CosineAnnealingLR;
impl CosineAnnealingLR {
    /// Cosine from the initial lr down to `eta_min` over `t_max` epochs (`CosineAnnealingLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, t_max: i64, eta_min: f64) -> ClosedForm {
        let t = t_max as f64;
        ClosedForm::new(opt, move |b, e| {
            eta_min + (b - eta_min) * (1.0 + (PI * e as f64 / t).cos()) / 2.0
        })
        .chainable(move |lr, b, e| {
            if e == 0 {
                lr
            } else if (e - 1 - t_max).rem_euclid(2 * t_max) == 0 {
                // At a trough the ratio below is 0/0: step up by half the span.
                lr + (b - eta_min) * (1.0 - (PI / t).cos()) / 2.0
            } else {
                (1.0 + (PI * e as f64 / t).cos()) / (1.0 + (PI * (e - 1) as f64 / t).cos())
                    * (lr - eta_min)
                    + eta_min
            }
        })
    }
}

/// Linear ramp of the factor from `start_factor` to `end_factor` over
/// `total_iters` epochs (warmup; PyTorch defaults 1/3, 1.0, 5).
pub struct LinearLR;
impl LinearLR {
    /// Scales the lr linearly from `start_factor` to `end_factor` over `total_iters` epochs (`LinearLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        opt: &mut dyn Optimizer,
        start_factor: f64,
        end_factor: f64,
        total_iters: i64,
    ) -> ClosedForm {
        assert!(
            start_factor > 0.0 && start_factor <= 1.0,
            "LinearLR: start_factor must be in (0, 1], got {start_factor}"
        );
        ClosedForm::new(opt, move |b, e| {
            let t = e.min(total_iters) as f64 / total_iters as f64;
            b * (start_factor + (end_factor - start_factor) * t)
        })
        .chainable(move |lr, _, e| {
            let span = end_factor - start_factor;
            if e == 0 {
                lr * start_factor
            } else if e > total_iters {
                lr
            } else {
                lr * (1.0 + span / (total_iters as f64 * start_factor + (e - 1) as f64 * span))
            }
        })
    }
}

/// The base lr times `lr_lambda(epoch)` (`LambdaLR`), e.g. a warmup.
///
/// ```
/// use tapir_runtime::{optim::*, Tensor};
/// let mut opt = SGD::new(vec![Tensor::zeros(&[1]).requires_grad_(true)], SgdConfig { lr: 1.0, ..Default::default() });
/// let mut s = LambdaLR::new(&mut opt, |e| ((e + 1) as f64 / 4.0).min(1.0));
/// let lrs: Vec<f64> = (0..5).map(|_| { let lr = opt.lr(); s.step(&mut opt); lr }).collect();
/// assert_eq!(lrs, [0.25, 0.5, 0.75, 1.0, 1.0]);
/// ```
pub struct LambdaLR;
impl LambdaLR {
    /// Sets the lr to the initial lr times `lr_lambda(epoch)` (`LambdaLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        opt: &mut dyn Optimizer,
        lr_lambda: impl Fn(i64) -> f64 + Send + Sync + 'static,
    ) -> ClosedForm {
        ClosedForm::new(opt, move |b, e| b * lr_lambda(e))
    }
}

/// The lr multiplied by `lr_lambda(epoch)` at each step after the first
/// (`MultiplicativeLR`): the base lr times the product of the factors.
pub struct MultiplicativeLR;
impl MultiplicativeLR {
    /// Multiplies the lr by `lr_lambda(epoch)` each epoch (`MultiplicativeLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        opt: &mut dyn Optimizer,
        lr_lambda: impl Fn(i64) -> f64 + Send + Sync + 'static,
    ) -> ClosedForm {
        let lr_lambda = std::sync::Arc::new(lr_lambda);
        let factor = lr_lambda.clone();
        ClosedForm::new(opt, move |b, e| (1..=e).fold(b, |lr, k| lr * lr_lambda(k)))
            .chainable(move |lr, _, e| if e == 0 { lr } else { lr * factor(e) })
    }
}

/// The lr times `factor` until `total_iters` epochs, then the lr itself
/// (`ConstantLR`; PyTorch's defaults 1/3 and 5).
pub struct ConstantLR;
impl ConstantLR {
    /// Scales the lr by `factor` for the first `total_iters` epochs (`ConstantLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, factor: f64, total_iters: i64) -> ClosedForm {
        assert!(
            (0.0..=1.0).contains(&factor),
            "ConstantLR: factor must be in [0, 1], got {factor}"
        );
        ClosedForm::new(
            opt,
            move |b, e| if e < total_iters { b * factor } else { b },
        )
        .chainable(move |lr, _, e| {
            if e == 0 {
                lr * factor
            } else if e != total_iters {
                lr
            } else {
                lr * (1.0 / factor)
            }
        })
    }
}

/// The lr decayed by `(1 - epoch / total_iters)^power`, then 0
/// (`PolynomialLR`; PyTorch's defaults 5 and 1.0).
pub struct PolynomialLR;
impl PolynomialLR {
    /// Decays the lr polynomially to 0 over `total_iters` epochs (`PolynomialLR`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(opt: &mut dyn Optimizer, total_iters: i64, power: f64) -> ClosedForm {
        assert!(
            total_iters > 0,
            "PolynomialLR: total_iters must be positive, got {total_iters}"
        );
        let t = total_iters as f64;
        ClosedForm::new(opt, move |b, e| {
            b * (1.0 - e.min(total_iters) as f64 / t).powf(power)
        })
        .chainable(move |lr, _, e| {
            if e == 0 || e > total_iters {
                lr
            } else {
                lr * ((1.0 - e as f64 / t) / (1.0 - (e - 1) as f64 / t)).powf(power)
            }
        })
    }
}

/// Cosine annealing with warm restarts every `t_0 * t_mult^k` epochs (SGDR).
pub struct CosineAnnealingWarmRestarts {
    base: Vec<f64>,
    t_0: i64,
    t_mult: i64,
    eta_min: f64,
    t_i: i64,
    t_cur: i64,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl CosineAnnealingWarmRestarts {
    /// Cosine annealing restarting after `t_0` epochs, periods growing by `t_mult` (`CosineAnnealingWarmRestarts`).
    pub fn new(
        opt: &mut dyn Optimizer,
        t_0: i64,
        t_mult: i64,
        eta_min: f64,
    ) -> CosineAnnealingWarmRestarts {
        assert!(
            t_0 > 0 && t_mult >= 1,
            "CosineAnnealingWarmRestarts: expected t_0 > 0 and t_mult >= 1, got {t_0} and {t_mult}"
        );
        let mut s = CosineAnnealingWarmRestarts {
            base: base_lrs(opt),
            t_0,
            t_mult,
            eta_min,
            t_i: t_0,
            t_cur: 0,
            last_epoch: 0,
            last_lr: vec![],
        };
        s.apply(opt);
        s
    }

    fn apply(&mut self, opt: &mut dyn Optimizer) {
        let c = (1.0 + (PI * self.t_cur as f64 / self.t_i as f64).cos()) / 2.0;
        self.last_lr = self
            .base
            .iter()
            .map(|&b| self.eta_min + (b - self.eta_min) * c)
            .collect();
        for (g, &lr) in opt.param_groups_mut().iter_mut().zip(&self.last_lr) {
            g.lr = lr;
        }
    }
}

impl LrScheduler for CosineAnnealingWarmRestarts {
    fn state_dict(&self) -> Vec<(String, f64)> {
        vec![
            ("last_epoch".into(), self.last_epoch as f64),
            ("T_i".into(), self.t_i as f64),
            ("T_cur".into(), self.t_cur as f64),
        ]
    }

    fn load_state_dict(&mut self, opt: &mut dyn Optimizer, state: &[(String, f64)]) {
        let get = |k: &str, d: i64| {
            state
                .iter()
                .find(|(n, _)| n == k)
                .map_or(d, |(_, v)| *v as i64)
        };
        self.last_epoch = get("last_epoch", self.last_epoch);
        self.t_i = get("T_i", self.t_i);
        self.t_cur = get("T_cur", self.t_cur);
        self.apply(opt);
    }

    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        if epoch == self.last_epoch + 1 {
            self.t_cur += 1;
            if self.t_cur >= self.t_i {
                self.t_cur -= self.t_i;
                self.t_i *= self.t_mult;
            }
        } else if epoch >= self.t_0 {
            if self.t_mult == 1 {
                self.t_cur = epoch % self.t_0;
                self.t_i = self.t_0;
            } else {
                let m = self.t_mult as f64;
                let n = ((epoch as f64 / self.t_0 as f64 * (m - 1.0) + 1.0).ln() / m.ln()).floor()
                    as i32;
                self.t_cur = epoch - (self.t_0 as f64 * (m.powi(n) - 1.0) / (m - 1.0)) as i64;
                self.t_i = self.t_0 * self.t_mult.pow(n as u32);
            }
        } else {
            self.t_i = self.t_0;
            self.t_cur = epoch;
        }
        self.last_epoch = epoch;
        self.apply(opt);
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}

/// The 1cycle policy (`OneCycleLR`, cosine annealing, two phases): lr from
/// `max_lr / div_factor` up to `max_lr` over `pct_start` of the steps, then
/// down to `initial / final_div_factor`; momentum (SGD momentum or Adam
/// beta1) cycles inversely between 0.95 and 0.85.
pub struct OneCycleLR {
    max_lr: f64,
    total_steps: i64,
    pct_start: f64,
    div_factor: f64,
    final_div_factor: f64,
    base_momentum: f64,
    max_momentum: f64,
    cycle_momentum: bool,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl OneCycleLR {
    /// PyTorch's defaults: pct_start 0.3, div_factor 25, final_div_factor 1e4,
    /// momentum cycled between 0.85 and 0.95 when the optimizer has one.
    pub fn new(opt: &mut dyn Optimizer, max_lr: f64, total_steps: i64) -> OneCycleLR {
        OneCycleLR::with(opt, max_lr, total_steps, 0.3, 25.0, 1e4)
    }

    /// One cycle with PyTorch's options: warm-up share `pct_start`, `div_factor` (initial lr = max_lr / it) and `final_div_factor`.
    pub fn with(
        opt: &mut dyn Optimizer,
        max_lr: f64,
        total_steps: i64,
        pct_start: f64,
        div_factor: f64,
        final_div_factor: f64,
    ) -> OneCycleLR {
        assert!(
            total_steps > 0,
            "OneCycleLR: total_steps must be positive, got {total_steps}"
        );
        assert!(
            (0.0..=1.0).contains(&pct_start),
            "OneCycleLR: pct_start must be in [0, 1], got {pct_start}"
        );
        let initial = max_lr / div_factor;
        for g in opt.param_groups_mut() {
            g.initial_lr = initial;
            g.lr = initial;
        }
        let cycle_momentum = opt.momentum().is_some_and(|m| m > 0.0);
        if cycle_momentum {
            opt.set_momentum(0.95);
        }
        let mut s = OneCycleLR {
            max_lr,
            total_steps,
            pct_start,
            div_factor,
            final_div_factor,
            base_momentum: 0.85,
            max_momentum: 0.95,
            cycle_momentum,
            last_epoch: -1,
            last_lr: vec![],
        };
        s.step(opt);
        s
    }

    fn anneal(start: f64, end: f64, pct: f64) -> f64 {
        end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0)
    }
}

impl LrScheduler for OneCycleLR {
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, step: i64) {
        assert!(
            step <= self.total_steps,
            "OneCycleLR: tried to step {step} times, more than the total_steps {}",
            self.total_steps
        );
        self.last_epoch = step;
        let initial = self.max_lr / self.div_factor;
        let min_lr = initial / self.final_div_factor;
        let mid = self.pct_start * self.total_steps as f64 - 1.0;
        let end = (self.total_steps - 1) as f64;
        let s = step as f64;
        let (lr, mom) = if s <= mid {
            let pct = s / mid;
            (
                Self::anneal(initial, self.max_lr, pct),
                Self::anneal(self.max_momentum, self.base_momentum, pct),
            )
        } else {
            let pct = (s - mid) / (end - mid);
            (
                Self::anneal(self.max_lr, min_lr, pct),
                Self::anneal(self.base_momentum, self.max_momentum, pct),
            )
        };
        for g in opt.param_groups_mut() {
            g.lr = lr;
        }
        if self.cycle_momentum {
            opt.set_momentum(mom);
        }
        self.last_lr = vec![lr; opt.param_groups().len()];
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}

/// Whether a lower or a higher metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better (a loss).
    Min,
    /// Higher is better (an accuracy).
    Max,
}

/// Cuts the lr by `factor` when a metric has not improved (relative
/// threshold) for `patience` epochs (PyTorch's defaults via `new`).
pub struct ReduceLROnPlateau {
    /// Whether lower or higher is better.
    pub mode: PlateauMode,
    /// Multiplies the lr when it is cut (0.1).
    pub factor: f64,
    /// Epochs without improvement tolerated (10).
    pub patience: usize,
    /// Relative improvement that counts (1e-4).
    pub threshold: f64,
    /// Epochs to wait after a cut (0).
    pub cooldown: usize,
    /// The lr never goes below this (0).
    pub min_lr: f64,
    /// Smaller changes of the lr are skipped (1e-8).
    pub eps: f64,
    best: f64,
    num_bad: usize,
    cooldown_counter: usize,
    last_epoch: i64,
}

impl ReduceLROnPlateau {
    /// factor 0.1, patience 10, threshold 1e-4 (relative), cooldown 0, min_lr 0.
    pub fn new(mode: PlateauMode) -> ReduceLROnPlateau {
        ReduceLROnPlateau {
            mode,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
            best: if mode == PlateauMode::Min {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            },
            num_bad: 0,
            cooldown_counter: 0,
            last_epoch: 0,
        }
    }

    fn is_better(&self, a: f64) -> bool {
        match self.mode {
            PlateauMode::Min => a < self.best * (1.0 - self.threshold),
            PlateauMode::Max => a > self.best * (1.0 + self.threshold),
        }
    }

    /// The plateau tracker's state (for checkpoints).
    pub fn state_dict(&self) -> Vec<(String, f64)> {
        vec![
            ("best".into(), self.best),
            ("num_bad_epochs".into(), self.num_bad as f64),
            ("cooldown_counter".into(), self.cooldown_counter as f64),
            ("last_epoch".into(), self.last_epoch as f64),
        ]
    }

    /// Restores [`ReduceLROnPlateau::state_dict`] (the lr itself lives in the optimizer's state).
    pub fn load_state_dict(&mut self, state: &[(String, f64)]) {
        for (k, v) in state {
            match k.as_str() {
                "best" => self.best = *v,
                "num_bad_epochs" => self.num_bad = *v as usize,
                "cooldown_counter" => self.cooldown_counter = *v as usize,
                "last_epoch" => self.last_epoch = *v as i64,
                _ => {}
            }
        }
    }

    /// Records this epoch's `metric` and reduces the lr if it plateaued.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) {
        self.last_epoch += 1;
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad = 0;
        } else {
            self.num_bad += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad = 0;
        }
        if self.num_bad > self.patience {
            for g in opt.param_groups_mut() {
                let old = g.lr;
                let new = (old * self.factor).max(self.min_lr);
                if old - new > self.eps {
                    g.lr = new;
                }
            }
            self.cooldown_counter = self.cooldown;
            self.num_bad = 0;
        }
    }
}
