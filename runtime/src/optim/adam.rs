//! Adam and AdamW (decoupled weight decay), with amsgrad and maximize.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, saved_beta1, step_each,
};
use crate::nn::StateDict;
use crate::{Result, Tensor};
use tapir_kernels::optim::{AdamStep, OptimStep};

/// Hyper-parameters of Adam; `Default` gives `torch.optim.Adam`'s: lr 1e-3,
/// betas (0.9, 0.999), eps 1e-8, no weight decay.
///
/// ```
/// use tapir_runtime::optim::AdamConfig;
/// let c = AdamConfig { lr: 3e-4, ..Default::default() };
/// assert_eq!((c.betas, c.weight_decay), ((0.9, 0.999), 0.0));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decays of the first and second moment averages.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Keep the maximum of the second moments (AMSGrad).
    pub amsgrad: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
        }
    }
}

/// Hyper-parameters of AdamW; `Default` gives `torch.optim.AdamW`'s: lr
/// 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-2.
///
/// ```
/// use tapir_runtime::optim::AdamWConfig;
/// assert_eq!(AdamWConfig::default().weight_decay, 1e-2);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AdamWConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decays of the first and second moment averages.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Decoupled weight decay: weights shrink by `lr * weight_decay` each step.
    pub weight_decay: f64,
    /// Keep the maximum of the second moments (AMSGrad).
    pub amsgrad: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        let a = AdamConfig::default();
        AdamWConfig {
            lr: a.lr,
            betas: a.betas,
            eps: a.eps,
            weight_decay: 1e-2,
            amsgrad: a.amsgrad,
            maximize: a.maximize,
        }
    }
}

impl From<AdamWConfig> for AdamConfig {
    /// The same numbers (the decay's meaning is the optimizer's).
    fn from(c: AdamWConfig) -> AdamConfig {
        AdamConfig {
            lr: c.lr,
            betas: c.betas,
            eps: c.eps,
            weight_decay: c.weight_decay,
            amsgrad: c.amsgrad,
            maximize: c.maximize,
        }
    }
}

/// Adam (`torch.optim.Adam`): L2 weight decay added to the gradient.
///
/// ```
/// use tapir_runtime::{optim::{Adam, AdamConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = Adam::new(vec![w.clone()], AdamConfig { lr: 0.1, ..Default::default() });
/// (&w * &w).sum().backward();
/// opt.step();
/// assert!((w.item::<f32>() - 0.9).abs() < 1e-6); // the first step moves by lr
/// ```
pub struct Adam {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: AdamConfig,
    decoupled: bool,
}

/// AdamW (`torch.optim.AdamW`): Adam whose weights decay by
/// `lr * weight_decay` directly instead of through the gradient.
///
/// ```
/// use tapir_runtime::{optim::{AdamW, AdamWConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = AdamW::new(vec![w.clone()], AdamWConfig { lr: 0.1, ..Default::default() });
/// (&w * 0.0).sum().backward(); // a zero gradient: only the decay moves w
/// opt.step();
/// assert!((w.item::<f32>() - (1.0 - 0.1 * 0.01)).abs() < 1e-7);
/// ```
pub struct AdamW(Adam);

impl Adam {
    /// Adam over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdamConfig) -> Adam {
        Adam::build(vec![GroupSpec::new(params)], cfg, false)
    }

    /// Adam with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdamConfig) -> Adam {
        Adam::build(groups, cfg, false)
    }

    fn build(groups: Vec<GroupSpec>, cfg: AdamConfig, decoupled: bool) -> Adam {
        let who = if decoupled { "AdamW" } else { "Adam" };
        assert!(
            (0.0..1.0).contains(&cfg.betas.0) && (0.0..1.0).contains(&cfg.betas.1),
            "{who}: invalid betas {:?}",
            cfg.betas
        );
        assert!(cfg.eps >= 0.0, "{who}: invalid epsilon {}", cfg.eps);
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, who);
        let state = empty_state(&groups);
        Adam {
            groups,
            state,
            cfg,
            decoupled,
        }
    }
}

impl AdamW {
    /// AdamW over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdamWConfig) -> AdamW {
        AdamW(Adam::build(vec![GroupSpec::new(params)], cfg.into(), true))
    }

    /// AdamW with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdamWConfig) -> AdamW {
        AdamW(Adam::build(groups, cfg.into(), true))
    }
}

impl Optimizer for AdamW {
    fn step(&mut self) {
        self.0.step()
    }
    fn param_groups(&self) -> &[ParamGroup] {
        self.0.param_groups()
    }
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        self.0.param_groups_mut()
    }
    fn state_dict(&self) -> StateDict {
        self.0.state_dict()
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        self.0.load_state_dict(dict)
    }
    fn momentum(&self) -> Option<f64> {
        self.0.momentum()
    }
    fn set_momentum(&mut self, m: f64) {
        self.0.set_momentum(m)
    }
}

impl Optimizer for Adam {
    fn step(&mut self) {
        let (c, decoupled) = (self.cfg, self.decoupled);
        let label = match decoupled {
            true => "Optimizer.step#AdamW.step",
            false => "Optimizer.step#Adam.step",
        };
        let init = |p: &Tensor| {
            let mut bufs = vec![
                ("exp_avg", Tensor::zeros_like(p)),
                ("exp_avg_sq", Tensor::zeros_like(p)),
            ];
            if c.amsgrad {
                bufs.push(("max_exp_avg_sq", Tensor::zeros_like(p)));
            }
            bufs
        };
        step_each(label, &self.groups, &mut self.state, init, |due| {
            OptimStep::Adam(AdamStep {
                lr: due.lr,
                beta1: c.betas.0,
                beta2: c.betas.1,
                eps: c.eps,
                weight_decay: due.weight_decay,
                decoupled,
                amsgrad: c.amsgrad,
                maximize: c.maximize,
                step: due.step,
            })
        });
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        save_state(
            &self.groups,
            &self.state,
            &[
                ("beta1", self.cfg.betas.0),
                ("beta2", self.cfg.betas.1),
                ("eps", self.cfg.eps),
            ],
        )
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
        )?;
        self.cfg.betas.0 = saved_beta1(dict).unwrap_or(self.cfg.betas.0);
        Ok(())
    }
    beta1_is_momentum!();
}
