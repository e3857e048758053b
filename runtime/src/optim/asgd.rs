//! ASGD: SGD with a decaying learning rate and a running average of the
//! parameters (Polyak-Ruppert averaging), which the optimizer keeps as
//! the state `ax` for the caller to evaluate with.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, step_each,
};
use crate::nn::StateDict;
use crate::{Error, Result, Tensor};
use tapir_kernels::optim::{AsgdStep, OptimStep};

/// Hyper-parameters of ASGD; `Default` gives `torch.optim.ASGD`'s: lr
/// 1e-2, lambd 1e-4, alpha 0.75, averaging from step 1e6, no weight decay.
///
/// ```
/// use tapir_runtime::optim::AsgdConfig;
/// assert_eq!(AsgdConfig::default().t0, 1e6);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AsgdConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decay term.
    pub lambd: f64,
    /// Power of the learning rate's decay, `lr / (1 + lambd lr t)^alpha`.
    pub alpha: f64,
    /// The step after which the average starts to lag the parameter.
    pub t0: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AsgdConfig {
    fn default() -> Self {
        AsgdConfig {
            lr: 1e-2,
            lambd: 1e-4,
            alpha: 0.75,
            t0: 1e6,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// ASGD (`torch.optim.ASGD`), averaged stochastic gradient descent. Each
/// parameter keeps `eta` and `mu` in f32, as PyTorch's scalar state
/// tensors are, so the steps match PyTorch's to the bit.
///
/// ```
/// use tapir_runtime::{optim::{ASGD, AsgdConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f64], &[1]).requires_grad_(true);
/// let mut opt = ASGD::new(vec![w.clone()], AsgdConfig { lr: 0.1, ..Default::default() });
/// (&w * &w).sum().backward(); // gradient 2
/// opt.step();
/// let eta = 0.1f32 as f64; // the first eta is lr, kept in f32
/// assert!((w.item::<f64>() - ((1.0 - 1e-4 * eta) - eta * 2.0)).abs() < 1e-12);
/// ```
pub struct ASGD {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    /// Per parameter, `(eta, mu)`: this step's learning rate and averaging
    /// weight, set by the step before (PyTorch's f32 scalar state).
    rates: Vec<(f32, f32)>,
    cfg: AsgdConfig,
}

impl ASGD {
    /// ASGD over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AsgdConfig) -> ASGD {
        ASGD::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// ASGD with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AsgdConfig) -> ASGD {
        for (what, v) in [("lambd", cfg.lambd), ("alpha", cfg.alpha)] {
            assert!(v >= 0.0, "ASGD: invalid {what} value: {v}");
        }
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "ASGD");
        let state = empty_state(&groups);
        let rates = vec![(0.0, 1.0); state.len()];
        ASGD {
            groups,
            state,
            rates,
            cfg,
        }
    }

    /// The running average of parameter `index` (counted over the groups),
    /// PyTorch's `state[p]["ax"]`; `None` before its first step.
    ///
    /// ```
    /// use tapir_runtime::{optim::{ASGD, AsgdConfig, Optimizer}, Tensor};
    /// let w = Tensor::ones(&[2]).requires_grad_(true);
    /// let mut opt = ASGD::new(vec![w.clone()], AsgdConfig::default());
    /// assert!(opt.average(0).is_none());
    /// w.sum().backward();
    /// opt.step();
    /// // Before t0 the average is the parameter itself.
    /// assert_eq!(opt.average(0).unwrap().to_vec::<f32>(), w.to_vec::<f32>());
    /// ```
    pub fn average(&self, index: usize) -> Option<Tensor> {
        let s = self.state.get(index)?.as_ref()?;
        Some(s.bufs[0].1.detach())
    }
}

impl Optimizer for ASGD {
    fn step(&mut self) {
        let c = self.cfg;
        let rates = &mut self.rates;
        let init = |p: &Tensor| vec![("ax", Tensor::zeros_like(p))];
        step_each(
            "Optimizer.step#ASGD.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                if due.first {
                    rates[due.index] = (due.lr as f32, 1.0);
                }
                let (eta, mu) = rates[due.index];
                let t = due.step as f64;
                // The next step's rates, stored as PyTorch's f32 tensors.
                let next_eta = due.lr / (1.0 + c.lambd * due.lr * t).powf(c.alpha);
                rates[due.index] = (next_eta as f32, (1.0 / (t - c.t0).max(1.0)) as f32);
                OptimStep::Asgd(AsgdStep {
                    lambd: c.lambd,
                    weight_decay: due.weight_decay,
                    maximize: c.maximize,
                    eta: eta as f64,
                    mu: mu as f64,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let c = &self.cfg;
        let extra = [("lambd", c.lambd), ("alpha", c.alpha), ("t0", c.t0)];
        let mut out = save_state(&self.groups, &self.state, &extra);
        for (i, s) in self.state.iter().enumerate() {
            if s.is_some() {
                let (eta, mu) = self.rates[i];
                out.push((format!("state.{i}.eta"), Tensor::scalar(eta)));
                out.push((format!("state.{i}.mu"), Tensor::scalar(mu)));
            }
        }
        out
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(&mut self.groups, &mut self.state, dict, &["ax"])?;
        let scalar = |key: String| {
            dict.iter()
                .find(|(n, _)| *n == key)
                .map(|(_, t)| t.item::<f32>())
                .ok_or_else(|| Error::Format(format!("optimizer state: missing {key}")))
        };
        for (i, s) in self.state.iter().enumerate() {
            if s.is_some() {
                self.rates[i] = (
                    scalar(format!("state.{i}.eta"))?,
                    scalar(format!("state.{i}.mu"))?,
                );
            }
        }
        Ok(())
    }
}
