//! Adam's variants: Adamax (infinity norm), NAdam (Nesterov momentum) and
//! RAdam (rectified variance), each with `torch.optim`'s options.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, saved_beta1, step_each,
};
use crate::nn::StateDict;
use crate::{Error, Result, Tensor};
use tapir_kernels::optim::{AdamaxStep, NadamStep, OptimStep, RadamStep};

/// PyTorch's checks on Adam-like betas and eps.
fn check_betas(who: &str, betas: (f64, f64), eps: f64) {
    for (k, b) in [betas.0, betas.1].into_iter().enumerate() {
        assert!(
            (0.0..1.0).contains(&b),
            "{who}: invalid beta parameter at index {k}: {b}"
        );
    }
    assert!(eps >= 0.0, "{who}: invalid epsilon value: {eps}");
}

/// A new parameter's first- and second-moment buffers, the second named
/// `second`.
fn two_moments(p: &Tensor, second: &'static str) -> Vec<(&'static str, Tensor)> {
    vec![
        ("exp_avg", Tensor::zeros_like(p)),
        (second, Tensor::zeros_like(p)),
    ]
}

/// Hyper-parameters of Adamax; `Default` gives `torch.optim.Adamax`'s: lr
/// 2e-3, betas (0.9, 0.999), eps 1e-8, no weight decay.
///
/// ```
/// use tapir_runtime::optim::AdamaxConfig;
/// assert_eq!(AdamaxConfig::default().lr, 2e-3);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AdamaxConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decays of the first moment and of the infinity norm.
    pub betas: (f64, f64),
    /// Added to the gradient's magnitude before the maximum.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdamaxConfig {
    fn default() -> Self {
        AdamaxConfig {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// Adamax (`torch.optim.Adamax`): Adam with the second moment replaced by
/// an exponentially weighted infinity norm.
///
/// ```
/// use tapir_runtime::{optim::{Adamax, AdamaxConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = Adamax::new(vec![w.clone()], AdamaxConfig { lr: 0.1, ..Default::default() });
/// (&w * &w).sum().backward();
/// opt.step();
/// assert!((w.item::<f32>() - 0.9).abs() < 1e-6); // the first step moves by lr
/// ```
pub struct Adamax {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: AdamaxConfig,
}

impl Adamax {
    /// Adamax over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdamaxConfig) -> Adamax {
        Adamax::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Adamax with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdamaxConfig) -> Adamax {
        check_betas("Adamax", cfg.betas, cfg.eps);
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "Adamax");
        let state = empty_state(&groups);
        Adamax { groups, state, cfg }
    }
}

impl Optimizer for Adamax {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| two_moments(p, "exp_inf");
        step_each(
            "Optimizer.step#Adamax.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Adamax(AdamaxStep {
                    lr: due.lr,
                    beta1: c.betas.0,
                    beta2: c.betas.1,
                    eps: c.eps,
                    weight_decay: due.weight_decay,
                    maximize: c.maximize,
                    step: due.step,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let (b1, b2) = self.cfg.betas;
        let extra = [("beta1", b1), ("beta2", b2), ("eps", self.cfg.eps)];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["exp_avg", "exp_inf"],
        )?;
        self.cfg.betas.0 = saved_beta1(dict).unwrap_or(self.cfg.betas.0);
        Ok(())
    }
    beta1_is_momentum!();
}

/// Hyper-parameters of NAdam; `Default` gives `torch.optim.NAdam`'s: lr
/// 2e-3, betas (0.9, 0.999), eps 1e-8, no weight decay, momentum decay 4e-3.
///
/// ```
/// use tapir_runtime::optim::NAdamConfig;
/// assert_eq!(NAdamConfig::default().momentum_decay, 4e-3);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct NAdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decays of the first and second moment averages.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Weight decay: L2 added to the gradient, or decoupled (as AdamW's).
    pub weight_decay: f64,
    /// Decay of the momentum schedule `mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay))`.
    pub momentum_decay: f64,
    /// Decay the weights by `lr * weight_decay` directly (NAdamW).
    pub decoupled_weight_decay: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for NAdamConfig {
    fn default() -> Self {
        NAdamConfig {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            momentum_decay: 4e-3,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// NAdam (`torch.optim.NAdam`): Adam with Nesterov momentum on a decaying
/// momentum schedule. Each parameter's running product of the schedule is
/// kept in f32, as PyTorch keeps it in an f32 tensor, so results match
/// PyTorch's.
///
/// ```
/// use tapir_runtime::{optim::{NAdam, NAdamConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = NAdam::new(vec![w.clone()], NAdamConfig::default());
/// (&w * &w).sum().backward();
/// opt.step();
/// assert!(w.item::<f32>() < 1.0);
/// ```
pub struct NAdam {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    /// Per parameter, the product of `mu_1 .. mu_step` (1 before a step).
    mu_products: Vec<f32>,
    cfg: NAdamConfig,
}

impl NAdam {
    /// NAdam over `params`.
    pub fn new(params: Vec<Tensor>, cfg: NAdamConfig) -> NAdam {
        NAdam::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// NAdam with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: NAdamConfig) -> NAdam {
        check_betas("NAdam", cfg.betas, cfg.eps);
        assert!(
            cfg.momentum_decay >= 0.0,
            "NAdam: invalid momentum_decay value: {}",
            cfg.momentum_decay
        );
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "NAdam");
        let state = empty_state(&groups);
        let mu_products = vec![1.0; state.len()];
        NAdam {
            groups,
            state,
            mu_products,
            cfg,
        }
    }
}

impl Optimizer for NAdam {
    fn step(&mut self) {
        let c = self.cfg;
        let mu_products = &mut self.mu_products;
        let init = |p: &Tensor| two_moments(p, "exp_avg_sq");
        step_each(
            "Optimizer.step#NAdam.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                let mu = NadamStep::mu(c.betas.0, c.momentum_decay, due.step);
                // PyTorch's `mu_product *= mu` on an f32 tensor.
                mu_products[due.index] *= mu as f32;
                OptimStep::Nadam(NadamStep {
                    lr: due.lr,
                    beta1: c.betas.0,
                    beta2: c.betas.1,
                    eps: c.eps,
                    weight_decay: due.weight_decay,
                    momentum_decay: c.momentum_decay,
                    decoupled: c.decoupled_weight_decay,
                    maximize: c.maximize,
                    step: due.step,
                    mu_product: mu_products[due.index] as f64,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let (b1, b2) = self.cfg.betas;
        let extra = [
            ("beta1", b1),
            ("beta2", b2),
            ("eps", self.cfg.eps),
            ("momentum_decay", self.cfg.momentum_decay),
        ];
        let mut out = save_state(&self.groups, &self.state, &extra);
        for (i, s) in self.state.iter().enumerate() {
            if s.is_some() {
                let mu = Tensor::scalar(self.mu_products[i]);
                out.push((format!("state.{i}.mu_product"), mu));
            }
        }
        out
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        let buf_names = ["exp_avg", "exp_avg_sq"];
        load_state(&mut self.groups, &mut self.state, dict, &buf_names)?;
        for (i, s) in self.state.iter().enumerate() {
            self.mu_products[i] = match s {
                None => 1.0,
                Some(_) => {
                    let key = format!("state.{i}.mu_product");
                    let (_, t) = dict
                        .iter()
                        .find(|(n, _)| *n == key)
                        .ok_or_else(|| Error::Format(format!("optimizer state: missing {key}")))?;
                    t.item::<f32>()
                }
            };
        }
        self.cfg.betas.0 = saved_beta1(dict).unwrap_or(self.cfg.betas.0);
        Ok(())
    }
    beta1_is_momentum!();
}

/// Hyper-parameters of RAdam; `Default` gives `torch.optim.RAdam`'s: lr
/// 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay.
///
/// ```
/// use tapir_runtime::optim::RAdamConfig;
/// assert!(!RAdamConfig::default().decoupled_weight_decay);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RAdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decays of the first and second moment averages.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Weight decay: L2 added to the gradient, or decoupled (as AdamW's).
    pub weight_decay: f64,
    /// Decay the weights by `lr * weight_decay` directly (RAdamW).
    pub decoupled_weight_decay: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for RAdamConfig {
    fn default() -> Self {
        RAdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// RAdam (`torch.optim.RAdam`): Adam whose adaptive rate is switched on,
/// with a rectification term, once the second moment's approximated
/// moving average is long enough (after about 5 steps); before that the
/// step is the bias-corrected momentum times lr.
///
/// ```
/// use tapir_runtime::{optim::{Optimizer, RAdam, RAdamConfig}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = RAdam::new(vec![w.clone()], RAdamConfig { lr: 0.1, ..Default::default() });
/// (&w * &w).sum().backward(); // gradient 2
/// opt.step();
/// assert!((w.item::<f32>() - 0.8).abs() < 1e-6); // lr times the corrected momentum
/// ```
pub struct RAdam {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: RAdamConfig,
}

impl RAdam {
    /// RAdam over `params`.
    pub fn new(params: Vec<Tensor>, cfg: RAdamConfig) -> RAdam {
        RAdam::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// RAdam with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: RAdamConfig) -> RAdam {
        check_betas("RAdam", cfg.betas, cfg.eps);
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "RAdam");
        let state = empty_state(&groups);
        RAdam { groups, state, cfg }
    }
}

impl Optimizer for RAdam {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| two_moments(p, "exp_avg_sq");
        step_each(
            "Optimizer.step#RAdam.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Radam(RadamStep {
                    lr: due.lr,
                    beta1: c.betas.0,
                    beta2: c.betas.1,
                    eps: c.eps,
                    weight_decay: due.weight_decay,
                    decoupled: c.decoupled_weight_decay,
                    maximize: c.maximize,
                    step: due.step,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let (b1, b2) = self.cfg.betas;
        let extra = [("beta1", b1), ("beta2", b2), ("eps", self.cfg.eps)];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        let buf_names = ["exp_avg", "exp_avg_sq"];
        load_state(&mut self.groups, &mut self.state, dict, &buf_names)?;
        self.cfg.betas.0 = saved_beta1(dict).unwrap_or(self.cfg.betas.0);
        Ok(())
    }
    beta1_is_momentum!();
}
