//! RMSprop, plain or centered, with optional momentum.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, step_each,
};
use crate::nn::StateDict;
use crate::{Result, Tensor};
use tapir_kernels::optim::{OptimStep, RmspropStep};

/// Hyper-parameters of RMSprop; `Default` gives PyTorch's (lr 1e-2, alpha 0.99, eps 1e-8).
pub type RMSpropConfig = RmspropStep;

/// `torch.optim.RMSprop`.
pub struct RMSprop {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: RMSpropConfig,
}

impl RMSprop {
    /// RMSprop over `params`.
    pub fn new(params: Vec<Tensor>, cfg: RMSpropConfig) -> RMSprop {
        RMSprop::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// RMSprop with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: RMSpropConfig) -> RMSprop {
        assert!(
            cfg.alpha >= 0.0 && cfg.momentum >= 0.0,
            "RMSprop: invalid alpha {} or momentum {}",
            cfg.alpha,
            cfg.momentum
        );
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "RMSprop");
        let state = empty_state(&groups);
        RMSprop { groups, state, cfg }
    }
}

impl Optimizer for RMSprop {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| {
            let mut bufs = vec![("square_avg", Tensor::zeros_like(p))];
            if c.momentum > 0.0 {
                bufs.push(("momentum_buffer", Tensor::zeros_like(p)));
            }
            if c.centered {
                bufs.push(("grad_avg", Tensor::zeros_like(p)));
            }
            bufs
        };
        step_each(
            "Optimizer.step#RMSprop.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Rmsprop(RmspropStep {
                    lr: due.lr,
                    weight_decay: due.weight_decay,
                    ..c
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        save_state(&self.groups, &self.state, &[("alpha", self.cfg.alpha)])
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["square_avg", "momentum_buffer", "grad_avg"],
        )
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.cfg.momentum)
    }
    fn set_momentum(&mut self, m: f64) {
        self.cfg.momentum = m;
    }
}
