//! Adam and AdamW (decoupled weight decay), with amsgrad and maximize.

use super::{
    Optimizer, ParamGroup, ParamState, fused, load_state, resolve_groups, save_state, with_grads,
};
use crate::nn::StateDict;
use crate::storage::GpuStep;
use crate::{Result, Tensor};
use tapir_kernels::cpu::{AdamStep, adam_update};

/// Hyper-parameters of Adam/AdamW (PyTorch's defaults via `adam()` / `adamw()`).
#[derive(Clone, Copy, Debug)]
pub struct AdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
}

impl AdamConfig {
    /// `torch.optim.Adam` defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no decay.
    pub fn adam() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
        }
    }
    /// `torch.optim.AdamW` defaults: as Adam with weight_decay 1e-2.
    pub fn adamw() -> Self {
        AdamConfig {
            weight_decay: 1e-2,
            ..AdamConfig::adam()
        }
    }
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig::adam()
    }
}

/// Adam (`torch.optim.Adam`): L2 weight decay added to the gradient.
///
/// ```
/// use tapir_runtime::{optim::{Adam, AdamConfig, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).requires_grad_(true);
/// let mut opt = Adam::new(vec![w.clone()], AdamConfig { lr: 0.1, ..AdamConfig::adam() });
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

/// AdamW (`torch.optim.AdamW`): weights decay by `lr * weight_decay` directly.
pub type AdamW = Adam;

impl Adam {
    pub fn new(params: Vec<Tensor>, cfg: AdamConfig) -> Adam {
        Adam::build(vec![ParamGroup::new(params)], cfg, false)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, cfg: AdamConfig) -> Adam {
        Adam::build(groups, cfg, false)
    }

    /// AdamW over `params`.
    pub fn adamw(params: Vec<Tensor>, cfg: AdamConfig) -> Adam {
        Adam::build(vec![ParamGroup::new(params)], cfg, true)
    }

    /// AdamW with parameter groups.
    pub fn adamw_with_groups(groups: Vec<ParamGroup>, cfg: AdamConfig) -> Adam {
        Adam::build(groups, cfg, true)
    }

    fn build(groups: Vec<ParamGroup>, cfg: AdamConfig, decoupled: bool) -> Adam {
        let who = if decoupled { "AdamW" } else { "Adam" };
        assert!(
            (0.0..1.0).contains(&cfg.betas.0) && (0.0..1.0).contains(&cfg.betas.1),
            "{who}: invalid betas {:?}",
            cfg.betas
        );
        assert!(cfg.eps >= 0.0, "{who}: invalid epsilon {}", cfg.eps);
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, who);
        let n = groups.iter().map(|g| g.params.len()).sum();
        Adam {
            groups,
            state: vec![None; n],
            cfg,
            decoupled,
        }
    }
}

impl Optimizer for Adam {
    fn step(&mut self) {
        let _g = crate::NoGradGuard::new();
        for (i, p, g, lr, wd) in with_grads(&self.groups) {
            let st = self.state[i].get_or_insert_with(|| {
                let mut bufs = vec![
                    ("exp_avg", Tensor::zeros_like(&p)),
                    ("exp_avg_sq", Tensor::zeros_like(&p)),
                ];
                if self.cfg.amsgrad {
                    bufs.push(("max_exp_avg_sq", Tensor::zeros_like(&p)));
                }
                ParamState { step: 0, bufs }
            });
            st.step += 1;
            let h = AdamStep {
                lr,
                beta1: self.cfg.betas.0,
                beta2: self.cfg.betas.1,
                eps: self.cfg.eps,
                weight_decay: wd,
                decoupled: self.decoupled,
                amsgrad: self.cfg.amsgrad,
                maximize: self.cfg.maximize,
                step: st.step,
            };
            let bufs: Vec<&Tensor> = st.bufs.iter().map(|(_, t)| t).collect();
            let gpu = GpuStep::Adam(h);
            fused(
                &p,
                &g,
                &bufs,
                Some(gpu),
                |pv, gv, s| {
                    let (m, rest) = s.split_first_mut().unwrap();
                    let (v, rest) = rest.split_first_mut().unwrap();
                    adam_update(pv, gv, m, v, rest.first_mut().map(|x| &mut **x), &h)
                },
                |pv, gv, s| {
                    let (m, rest) = s.split_first_mut().unwrap();
                    let (v, rest) = rest.split_first_mut().unwrap();
                    adam_update(pv, gv, m, v, rest.first_mut().map(|x| &mut **x), &h)
                },
            );
        }
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
        if let Some((_, b1)) = dict.iter().find(|(n, _)| n == "param_groups.0.beta1") {
            self.cfg.betas.0 = b1.item::<f64>();
        }
        Ok(())
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.cfg.betas.0)
    }
    fn set_momentum(&mut self, m: f64) {
        self.cfg.betas.0 = m;
    }
}
