//! Adagrad and Adadelta: per-coordinate learning rates from running sums
//! or averages of squared gradients.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, step_each,
};
use crate::nn::StateDict;
use crate::{Result, Tensor};
use tapir_kernels::optim::{AdadeltaStep, AdagradStep, OptimStep};

/// Hyper-parameters of Adagrad; `Default` gives `torch.optim.Adagrad`'s:
/// lr 1e-2, no lr decay, no weight decay, accumulator from 0, eps 1e-10.
///
/// ```
/// use tapir_runtime::optim::AdagradConfig;
/// let c = AdagradConfig { lr: 0.1, ..Default::default() };
/// assert_eq!((c.eps, c.initial_accumulator_value), (1e-10, 0.0));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AdagradConfig {
    /// Learning rate.
    pub lr: f64,
    /// The learning rate's decay: step `t` uses `lr / (1 + (t - 1) * lr_decay)`.
    pub lr_decay: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// The value the sum of squared gradients starts from.
    pub initial_accumulator_value: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// Adagrad (`torch.optim.Adagrad`): each coordinate's step is divided by
/// the root of its summed squared gradients.
///
/// ```
/// use tapir_runtime::{optim::{Adagrad, AdagradConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = Adagrad::new(vec![w.clone()], AdagradConfig { lr: 0.1, ..Default::default() });
/// (&w * &w).sum().backward();
/// opt.step();
/// assert!((w.item::<f32>() - 0.9).abs() < 1e-6); // the first step moves by lr
/// ```
pub struct Adagrad {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: AdagradConfig,
}

impl Adagrad {
    /// Adagrad over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdagradConfig) -> Adagrad {
        Adagrad::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Adagrad with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdagradConfig) -> Adagrad {
        let checks = [
            ("lr_decay", cfg.lr_decay),
            ("initial_accumulator_value", cfg.initial_accumulator_value),
            ("epsilon", cfg.eps),
        ];
        for (what, v) in checks {
            assert!(v >= 0.0, "Adagrad: invalid {what} value: {v}");
        }
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "Adagrad");
        let state = empty_state(&groups);
        Adagrad { groups, state, cfg }
    }
}

impl Optimizer for Adagrad {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| vec![("sum", Tensor::full_like(p, c.initial_accumulator_value))];
        step_each(
            "Optimizer.step#Adagrad.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Adagrad(AdagradStep {
                    lr: due.lr,
                    lr_decay: c.lr_decay,
                    weight_decay: due.weight_decay,
                    eps: c.eps,
                    maximize: c.maximize,
                    step: due.step,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let extra = [("lr_decay", self.cfg.lr_decay), ("eps", self.cfg.eps)];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(&mut self.groups, &mut self.state, dict, &["sum"])
    }
}

/// Hyper-parameters of Adadelta; `Default` gives `torch.optim.Adadelta`'s
/// (lr 1.0, rho 0.9, eps 1e-6, no weight decay).
///
/// ```
/// use tapir_runtime::optim::AdadeltaConfig;
/// assert_eq!(AdadeltaConfig::default().rho, 0.9);
/// ```
pub type AdadeltaConfig = AdadeltaStep;

/// Adadelta (`torch.optim.Adadelta`): steps scaled by the ratio of the
/// running root-mean-square of past deltas to that of the gradients.
///
/// ```
/// use tapir_runtime::{optim::{Adadelta, AdadeltaConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f64], &[1]).requires_grad_(true);
/// let mut opt = Adadelta::new(vec![w.clone()], AdadeltaConfig::default());
/// (&w * &w).sum().backward(); // gradient 2
/// opt.step();
/// // delta = sqrt(eps) / sqrt(0.1 * 4 + eps) * 2
/// let delta = 1e-3 / (0.4f64 + 1e-6).sqrt() * 2.0;
/// assert!((w.item::<f64>() - (1.0 - delta)).abs() < 1e-12);
/// ```
pub struct Adadelta {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: AdadeltaConfig,
}

impl Adadelta {
    /// Adadelta over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdadeltaConfig) -> Adadelta {
        Adadelta::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Adadelta with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdadeltaConfig) -> Adadelta {
        assert!(
            (0.0..=1.0).contains(&cfg.rho),
            "Adadelta: invalid rho value: {}",
            cfg.rho
        );
        assert!(
            cfg.eps >= 0.0,
            "Adadelta: invalid epsilon value: {}",
            cfg.eps
        );
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "Adadelta");
        let state = empty_state(&groups);
        Adadelta { groups, state, cfg }
    }
}

impl Optimizer for Adadelta {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| {
            let zeros = || Tensor::zeros_like(p);
            vec![("square_avg", zeros()), ("acc_delta", zeros())]
        };
        step_each(
            "Optimizer.step#Adadelta.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Adadelta(AdadeltaStep {
                    lr: due.lr,
                    weight_decay: due.weight_decay,
                    ..c
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let extra = [("rho", self.cfg.rho), ("eps", self.cfg.eps)];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["square_avg", "acc_delta"],
        )
    }
}
