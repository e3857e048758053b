//! Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, step_each,
};
use crate::nn::StateDict;
use crate::{Result, Tensor};
use tapir_kernels::optim::{OptimStep, SgdStep};

/// Hyper-parameters of SGD; `Default` gives PyTorch's (lr 1e-3).
pub type SgdConfig = SgdStep;

/// `torch.optim.SGD`.
///
/// ```
/// use tapir_runtime::{optim::{Optimizer, SgdConfig, SGD}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = SGD::new(vec![w.clone()], SgdConfig { lr: 0.1, ..Default::default() });
/// (&w * 3.0).sum().backward();
/// opt.step();
/// assert!((w.item::<f32>() - 0.7).abs() < 1e-6);
/// ```
pub struct SGD {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: SgdConfig,
}

impl SGD {
    /// SGD over `params`.
    pub fn new(params: Vec<Tensor>, cfg: SgdConfig) -> SGD {
        SGD::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// SGD with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: SgdConfig) -> SGD {
        assert!(
            cfg.momentum >= 0.0,
            "SGD: invalid momentum {}",
            cfg.momentum
        );
        assert!(
            !cfg.nesterov || (cfg.momentum > 0.0 && cfg.dampening == 0.0),
            "SGD: Nesterov momentum requires a momentum and zero dampening"
        );
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "SGD");
        let state = empty_state(&groups);
        SGD { groups, state, cfg }
    }
}

impl Optimizer for SGD {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| match c.momentum != 0.0 {
            true => vec![("momentum_buffer", Tensor::zeros_like(p))],
            false => vec![],
        };
        step_each(
            "Optimizer.step#SGD.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                let h = SgdStep {
                    lr: due.lr,
                    weight_decay: due.weight_decay,
                    ..c
                };
                // PyTorch starts the momentum buffer as the gradient itself.
                let first = c.momentum != 0.0 && due.first;
                OptimStep::Sgd { h, first }
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        save_state(
            &self.groups,
            &self.state,
            &[("momentum", self.cfg.momentum)],
        )
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["momentum_buffer"],
        )
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.cfg.momentum)
    }
    fn set_momentum(&mut self, m: f64) {
        self.cfg.momentum = m;
    }
}
