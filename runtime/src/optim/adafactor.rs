//! Adafactor (`torch.optim.Adafactor`): Adam-like steps whose second
//! moment of a matrix is kept factored, as one running mean per row and
//! one per column, so its state is O(rows + columns) instead of
//! O(rows x columns). The row and column reductions make it a composition
//! of tensor ops rather than a fused kernel; it runs on any device.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, lerp_into, resolve_groups,
    save_state, step_each_composed,
};
use crate::nn::StateDict;
use crate::{DType, Error, Result, Tensor};

/// Hyper-parameters of Adafactor; `Default` gives `torch.optim.Adafactor`'s:
/// lr 1e-2, beta2_decay -0.8, eps (the dtype's machine epsilon, 1e-3),
/// d 1, no weight decay.
///
/// ```
/// use tapir_runtime::optim::AdafactorConfig;
/// assert_eq!(AdafactorConfig::default().eps, (None, 1e-3));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AdafactorConfig {
    /// Learning rate (the relative step is at most this).
    pub lr: f64,
    /// The second moment's decay: step `t` weighs the new gradient by `t^beta2_decay`.
    pub beta2_decay: f64,
    /// `(eps1, eps2)`: the floor of the variance estimate (`None`: the
    /// parameter dtype's machine epsilon) and of the parameter's RMS that
    /// scales the step.
    pub eps: (Option<f64>, f64),
    /// The update's RMS is clipped to this.
    pub d: f64,
    /// Decoupled weight decay (the weights shrink by `1 - lr * weight_decay`).
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdafactorConfig {
    fn default() -> Self {
        AdafactorConfig {
            lr: 1e-2,
            beta2_decay: -0.8,
            eps: (None, 1e-3),
            d: 1.0,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// Adafactor (`torch.optim.Adafactor`, Shazeer and Stern 2018, without
/// first moment): for a parameter of two or more dimensions the state is
/// `row_var` (shape `[.., rows, 1]`) and `col_var` (`[.., 1, cols]`); for
/// a vector or scalar, `variance` of its shape.
///
/// ```
/// use tapir_runtime::{optim::{Adafactor, AdafactorConfig, Optimizer}, Tensor};
/// let w = Tensor::ones(&[64, 32]).requires_grad_(true);
/// let mut opt = Adafactor::new(vec![w.clone()], AdafactorConfig::default());
/// (&w * &w).sum().backward();
/// opt.step();
/// let sd = opt.state_dict();
/// let shape = |k: &str| sd.iter().find(|(n, _)| n == k).unwrap().1.shape().to_vec();
/// assert_eq!(shape("state.0.row_var"), vec![64, 1]); // 96 numbers of state for 2048 weights
/// assert_eq!(shape("state.0.col_var"), vec![1, 32]);
/// assert!(w.to_vec::<f32>().iter().all(|&x| x < 1.0));
/// ```
pub struct Adafactor {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: AdafactorConfig,
}

impl Adafactor {
    /// Adafactor over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdafactorConfig) -> Adafactor {
        Adafactor::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Adafactor with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: AdafactorConfig) -> Adafactor {
        let checks = [
            (
                cfg.beta2_decay <= 0.0,
                "beta2_decay should be <= 0",
                cfg.beta2_decay,
            ),
            (
                cfg.eps.0.is_none_or(|e| e >= 0.0),
                "epsilon1 should be >= 0",
                cfg.eps.0.unwrap_or(0.0),
            ),
            (cfg.eps.1 >= 0.0, "epsilon2 should be >= 0", cfg.eps.1),
            (cfg.d >= 1.0, "Clipping threshold d should be >= 1", cfg.d),
        ];
        for (ok, what, v) in checks {
            assert!(ok, "Adafactor: {what} but is: {v}");
        }
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "Adafactor");
        let state = empty_state(&groups);
        Adafactor { groups, state, cfg }
    }
}

/// The shapes of a parameter's state: `[(name, shape)]`.
fn state_shapes(shape: &[usize]) -> Vec<(&'static str, Vec<usize>)> {
    let n = shape.len();
    if n < 2 {
        return vec![("variance", shape.to_vec())];
    }
    let (mut rows, mut cols) = (shape.to_vec(), shape.to_vec());
    rows[n - 1] = 1;
    cols[n - 2] = 1;
    vec![("row_var", rows), ("col_var", cols)]
}

/// `torch.finfo(dtype).eps`.
fn machine_epsilon(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => f32::EPSILON as f64,
    }
}

/// One Adafactor update of `p` (gradient `g`) with its state after
/// `state.step` steps.
fn update(
    p: &Tensor,
    g: &Tensor,
    state: &ParamState,
    lr: f64,
    weight_decay: f64,
    c: &AdafactorConfig,
) {
    let g = if c.maximize { g.neg() } else { g.clone() };
    let t = state.step as f64;
    let eps1 = c.eps.0.unwrap_or_else(|| machine_epsilon(p.dtype()));
    let w = t.powf(c.beta2_decay);
    let rho = lr.min(1.0 / t.sqrt());
    // The step is relative to the parameter's RMS (at least eps2).
    let alpha = c
        .eps
        .1
        .max(p.norm(2.0).item::<f64>() / (p.numel() as f64).sqrt())
        * rho;
    if weight_decay != 0.0 {
        p.mul_scalar_(1.0 - lr * weight_decay);
    }
    let var_estimate = match &state.bufs[..] {
        [(_, row_var), (_, col_var)] => {
            let n = g.ndim();
            let mean_square =
                |dim: isize, len: usize| &g.norm_dims(2.0, &[dim], true).square() / len as f64;
            lerp_into(row_var, &mean_square(-1, g.shape()[n - 1]), w);
            lerp_into(col_var, &mean_square(-2, g.shape()[n - 2]), w);
            &row_var.matmul(col_var) / &row_var.mean_dim(-2, true).clamp_min(eps1)
        }
        [(_, variance)] => {
            lerp_into(variance, &(&g * &g), w);
            // PyTorch clones here because its clamp is in place; ours is not.
            variance.clone()
        }
        _ => unreachable!("Adafactor state is row_var and col_var, or variance"),
    };
    let update = &var_estimate.clamp_min(eps1 * eps1).rsqrt() * &g;
    let rms = update.norm(2.0).item::<f64>() / ((update.numel() as f64).sqrt() * c.d);
    p.add_scaled_(&update, -alpha / rms.max(1.0));
}

impl Optimizer for Adafactor {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| {
            let zeros = |shape: &[usize]| Tensor::zeros_on(shape, p.dtype(), p.device());
            let shapes = state_shapes(p.shape()).into_iter();
            shapes.map(|(name, shape)| (name, zeros(&shape))).collect()
        };
        step_each_composed(
            "Optimizer.step#Adafactor.step",
            &self.groups,
            &mut self.state,
            init,
            |p, g, st, lr, weight_decay| update(p, g, st, lr, weight_decay, &c),
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let c = &self.cfg;
        let extra = [("beta2_decay", c.beta2_decay), ("d", c.d)];
        save_state(&self.groups, &self.state, &extra)
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        // The factored state is not shaped as its parameter, so it is
        // checked against the shapes Adafactor would make.
        super::load_state(&mut self.groups, &mut [], dict, &[])?;
        let get = |k: &str| dict.iter().find(|(n, _)| n == k).map(|(_, t)| t);
        let params: Vec<Tensor> = self.groups.iter().flat_map(|g| g.params.clone()).collect();
        for (i, p) in params.iter().enumerate() {
            let Some(step) = get(&format!("state.{i}.step")) else {
                self.state[i] = None;
                continue;
            };
            let mut bufs = vec![];
            for (name, shape) in state_shapes(p.shape()) {
                let key = format!("state.{i}.{name}");
                let t = get(&key)
                    .ok_or_else(|| Error::Format(format!("Adafactor state: missing {key}")))?;
                if t.shape() != shape {
                    return Err(Error::Format(format!(
                        "Adafactor state: {key} has shape {:?}, parameter {i} of shape {:?} needs {shape:?}",
                        t.shape(),
                        p.shape()
                    )));
                }
                bufs.push((
                    name,
                    t.to(p.device())?.to_dtype(p.dtype()).contiguous_copy(),
                ));
            }
            self.state[i] = Some(ParamState {
                step: step.item::<f64>() as u64,
                bufs,
            });
        }
        Ok(())
    }
}
