//! Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, Updates, load_state, resolve_groups, save_state,
    with_grads,
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
        let n = groups.iter().map(|g| g.params.len()).sum();
        SGD {
            groups,
            state: vec![None; n],
            cfg,
        }
    }
}

impl Optimizer for SGD {
    fn step(&mut self) {
        let _p = crate::profiler::scope("Optimizer.step#SGD.step", "optimizer");
        let _g = crate::NoGradGuard::new();
        let mut updates = Updates::default();
        for (i, p, g, lr, wd) in with_grads(&self.groups) {
            let h = SgdStep {
                lr,
                weight_decay: wd,
                ..self.cfg
            };
            let first = self.cfg.momentum != 0.0 && self.state[i].is_none();
            let st = self.state[i].get_or_insert_with(|| {
                let bufs = if h.momentum != 0.0 {
                    vec![("momentum_buffer", Tensor::zeros_like(&p))]
                } else {
                    vec![]
                };
                ParamState { step: 0, bufs }
            });
            st.step += 1;
            let bufs: Vec<&Tensor> = st.bufs.iter().map(|(_, t)| t).collect();
            updates.push(&p, &g, &bufs, OptimStep::Sgd { h, first });
        }
        updates.run();
    }
    fn param_groups(&self) -> &[ParamGroup] {
        &self.groups
    }
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        &mut self.groups
    }
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
