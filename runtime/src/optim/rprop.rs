//! Rprop: each coordinate moves by its own step size, grown while its
//! gradient keeps its sign and shrunk when the sign flips; the gradient's
//! magnitude is not used.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, load_state, resolve_groups,
    save_state, step_each,
};
use crate::nn::StateDict;
use crate::{Result, Tensor};
use tapir_kernels::optim::{OptimStep, RpropStep};

/// Hyper-parameters of Rprop; `Default` gives `torch.optim.Rprop`'s: lr
/// 1e-2, etas (0.5, 1.2), step sizes between 1e-6 and 50.
///
/// ```
/// use tapir_runtime::optim::RpropConfig;
/// assert_eq!(RpropConfig::default().etas, (0.5, 1.2));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RpropConfig {
    /// The step size every coordinate starts from.
    pub lr: f64,
    /// `(etaminus, etaplus)`: the factors on a step size when the gradient
    /// flips sign and when it keeps it.
    pub etas: (f64, f64),
    /// `(min, max)`: the bounds of a step size.
    pub step_sizes: (f64, f64),
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for RpropConfig {
    fn default() -> Self {
        RpropConfig {
            lr: 1e-2,
            etas: (0.5, 1.2),
            step_sizes: (1e-6, 50.0),
            maximize: false,
        }
    }
}

/// Rprop (`torch.optim.Rprop`), resilient backpropagation: meant for full
/// batches, where the gradient's sign is reliable.
///
/// ```
/// use tapir_runtime::{optim::{Optimizer, Rprop, RpropConfig}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[2]).requires_grad_(true);
/// let mut opt = Rprop::new(vec![w.clone()], RpropConfig::default());
/// for _ in 0..2 {
///     opt.zero_grad();
///     (&w * &w).sum().backward();
///     opt.step();
/// }
/// // Steps of lr, then lr * 1.2, against the gradient's sign.
/// assert_eq!(w.to_vec::<f32>(), vec![1.0 - 0.01 - 0.012, -1.0 + 0.01 + 0.012]);
/// ```
pub struct Rprop {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: RpropConfig,
}

impl Rprop {
    /// Rprop over `params`.
    pub fn new(params: Vec<Tensor>, cfg: RpropConfig) -> Rprop {
        Rprop::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Rprop with parameter groups (each may set its own lr; Rprop has no
    /// weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: RpropConfig) -> Rprop {
        let (minus, plus) = cfg.etas;
        assert!(
            0.0 < minus && minus < 1.0 && 1.0 < plus,
            "Rprop: invalid eta values: {minus}, {plus}"
        );
        let groups = resolve_groups(groups, cfg.lr, 0.0, "Rprop");
        for (i, g) in groups.iter().enumerate() {
            assert!(
                g.weight_decay == 0.0,
                "Rprop: has no weight_decay, but group {i} sets {}",
                g.weight_decay
            );
        }
        let state = empty_state(&groups);
        Rprop { groups, state, cfg }
    }
}

impl Optimizer for Rprop {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| {
            let zeros = || Tensor::zeros_like(p);
            vec![("prev", zeros()), ("step_size", zeros())]
        };
        step_each(
            "Optimizer.step#Rprop.step",
            &self.groups,
            &mut self.state,
            init,
            |due| {
                OptimStep::Rprop(RpropStep {
                    lr: due.lr,
                    etaminus: c.etas.0,
                    etaplus: c.etas.1,
                    step_size_min: c.step_sizes.0,
                    step_size_max: c.step_sizes.1,
                    maximize: c.maximize,
                    first: due.first,
                })
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let c = &self.cfg;
        let extra = [
            ("etaminus", c.etas.0),
            ("etaplus", c.etas.1),
            ("step_size_min", c.step_sizes.0),
            ("step_size_max", c.step_sizes.1),
        ];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(
            &mut self.groups,
            &mut self.state,
            dict,
            &["prev", "step_size"],
        )
    }
}
