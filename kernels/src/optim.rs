//! Optimizer steps described without reference to a device: the
//! hyper-parameters of one fused update, which the CPU kernels
//! (`cpu::adam_update`, ...) and the CUDA kernels both take.
//!
//! ```
//! use tapir_kernels::optim::{OptimStep, SgdStep};
//! let step = OptimStep::Sgd { h: SgdStep { lr: 0.5, ..SgdStep::default() }, first: false };
//! let (mut p, g) = (vec![1.0f32, 2.0], vec![2.0f32, 2.0]);
//! step.apply(&mut p, &g, &mut []);
//! assert_eq!(p, vec![0.0, 1.0]);
//! ```

use crate::Float;
use crate::cpu::{
    adadelta_update, adagrad_update, adam_update, adamax_update, asgd_update, nadam_update,
    radam_update, rmsprop_update, rprop_update, sgd_update,
};

/// Hyper-parameters of one Adam/AdamW step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first-moment average.
    pub beta1: f64,
    /// Decay of the second-moment average.
    pub beta2: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Weight decay (L2 for Adam, decoupled for AdamW).
    pub weight_decay: f64,
    /// AdamW: decay the weights directly instead of adding to the gradient.
    pub decoupled: bool,
    /// Keep the maximum of the second moments (AMSGrad).
    pub amsgrad: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// 1-based step count after this step.
    pub step: u64,
}

/// Hyper-parameters of SGD (for one step, or as an optimizer's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdStep {
    /// Learning rate.
    pub lr: f64,
    /// Momentum factor (0 disables the momentum buffer).
    pub momentum: f64,
    /// Dampening of the momentum.
    pub dampening: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for SgdStep {
    /// `torch.optim.SGD`'s defaults (lr 1e-3, no momentum, no decay).
    fn default() -> Self {
        SgdStep {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
        }
    }
}

/// Hyper-parameters of RMSprop (for one step, or as an optimizer's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmspropStep {
    /// Learning rate.
    pub lr: f64,
    /// Smoothing constant of the square average.
    pub alpha: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Momentum factor (0 disables the momentum buffer).
    pub momentum: f64,
    /// Normalise by the estimated variance of the gradient.
    pub centered: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for RmspropStep {
    /// `torch.optim.RMSprop`'s defaults (lr 1e-2, alpha 0.99, eps 1e-8).
    fn default() -> Self {
        RmspropStep {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// Hyper-parameters of one Adagrad step (`torch.optim.Adagrad`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdagradStep {
    /// Learning rate.
    pub lr: f64,
    /// The learning rate's decay: step `t` uses `lr / (1 + (t - 1) * lr_decay)`.
    pub lr_decay: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// 1-based step count after this step.
    pub step: u64,
}

impl AdagradStep {
    /// This step's learning rate, `lr / (1 + (step - 1) * lr_decay)`.
    ///
    /// ```
    /// let h = tapir_kernels::optim::AdagradStep {
    ///     lr: 0.1, lr_decay: 0.5, weight_decay: 0.0, eps: 1e-10, maximize: false, step: 3,
    /// };
    /// assert_eq!(h.clr(), 0.05);
    /// ```
    pub fn clr(&self) -> f64 {
        self.lr / (1.0 + (self.step as f64 - 1.0) * self.lr_decay)
    }
}

/// Hyper-parameters of Adadelta (for one step, or as an optimizer's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdadeltaStep {
    /// Learning rate (a scale on the computed delta).
    pub lr: f64,
    /// Decay of the running averages of squared gradients and deltas.
    pub rho: f64,
    /// Added inside both square roots for stability.
    pub eps: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for AdadeltaStep {
    /// `torch.optim.Adadelta`'s defaults (lr 1.0, rho 0.9, eps 1e-6).
    fn default() -> Self {
        AdadeltaStep {
            lr: 1.0,
            rho: 0.9,
            eps: 1e-6,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// Hyper-parameters of one Adamax step (`torch.optim.Adamax`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamaxStep {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first-moment average.
    pub beta1: f64,
    /// Decay of the infinity norm.
    pub beta2: f64,
    /// Added to the gradient's magnitude before the maximum.
    pub eps: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// 1-based step count after this step.
    pub step: u64,
}

impl AdamaxStep {
    /// This step's learning rate, `lr / (1 - beta1^step)`.
    pub fn clr(&self) -> f64 {
        self.lr / (1.0 - self.beta1.powf(self.step as f64))
    }
}

/// Hyper-parameters of one NAdam step (`torch.optim.NAdam`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NadamStep {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first-moment average.
    pub beta1: f64,
    /// Decay of the second-moment average.
    pub beta2: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Weight decay (L2, or decoupled as AdamW's).
    pub weight_decay: f64,
    /// Decay of the momentum schedule `mu_t`.
    pub momentum_decay: f64,
    /// Decay the weights directly instead of adding to the gradient.
    pub decoupled: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// 1-based step count after this step.
    pub step: u64,
    /// The product of `mu_1 .. mu_step`, as the optimizer's state keeps it
    /// (PyTorch keeps it in an f32 tensor).
    pub mu_product: f64,
}

/// The per-step scalars of a NAdam update, computed in f64 as PyTorch does
/// in Python.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NadamScalars {
    /// Multiplies `grad / denom` in the update (`-lr (1 - mu) / (1 - mu_product)`).
    pub grad_coef: f64,
    /// Multiplies `exp_avg / denom` (`-lr mu_next / (1 - mu_product mu_next)`).
    pub avg_coef: f64,
    /// `1 - beta2^step`, which the second moment is divided by.
    pub bias_correction2: f64,
}

impl NadamStep {
    /// The momentum schedule `mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay))`.
    ///
    /// ```
    /// use tapir_kernels::optim::NadamStep;
    /// let mu1 = NadamStep::mu(0.9, 4e-3, 1);
    /// assert!((mu1 - 0.9 * (1.0 - 0.5 * 0.96f64.powf(4e-3))).abs() < 1e-15);
    /// ```
    pub fn mu(beta1: f64, momentum_decay: f64, step: u64) -> f64 {
        beta1 * (1.0 - 0.5 * 0.96f64.powf(step as f64 * momentum_decay))
    }

    /// The scalars of this step's update.
    pub fn scalars(&self) -> NadamScalars {
        let mu = NadamStep::mu(self.beta1, self.momentum_decay, self.step);
        let mu_next = NadamStep::mu(self.beta1, self.momentum_decay, self.step + 1);
        NadamScalars {
            grad_coef: -self.lr * (1.0 - mu) / (1.0 - self.mu_product),
            avg_coef: (-self.lr * mu_next) / (1.0 - self.mu_product * mu_next),
            bias_correction2: 1.0 - self.beta2.powf(self.step as f64),
        }
    }
}

/// The weight decay of an update that can decouple it (NAdam's and RAdam's
/// `decoupled_weight_decay`, as AdamW's): the L2 term added to the gradient
/// (0 when decoupled) and the factor the weights are first multiplied by
/// (`1 - lr * weight_decay` when decoupled, else exactly 1).
///
/// ```
/// use tapir_kernels::optim::split_weight_decay;
/// assert_eq!(split_weight_decay(0.1, 0.5, false), (0.5, 1.0));
/// assert_eq!(split_weight_decay(0.1, 0.5, true), (0.0, 0.95));
/// ```
pub fn split_weight_decay(lr: f64, weight_decay: f64, decoupled: bool) -> (f64, f64) {
    match decoupled {
        true => (0.0, 1.0 - lr * weight_decay),
        false => (weight_decay, 1.0),
    }
}

/// Hyper-parameters of one RAdam step (`torch.optim.RAdam`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RadamStep {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first-moment average.
    pub beta1: f64,
    /// Decay of the second-moment average.
    pub beta2: f64,
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Weight decay (L2, or decoupled as AdamW's).
    pub weight_decay: f64,
    /// Decay the weights directly instead of adding to the gradient.
    pub decoupled: bool,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// 1-based step count after this step.
    pub step: u64,
}

/// The per-step scalars of a RAdam update, computed in f64 as PyTorch does
/// in Python.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RadamScalars {
    /// `1 - beta1^step`, which the first moment is divided by.
    pub bias_correction1: f64,
    /// `sqrt(1 - beta2^step)`.
    pub bias_correction2_sqrt: f64,
    /// The variance rectification term once the approximated moving
    /// average is longer than 5 steps; `None` before, when the update is
    /// the bias-corrected momentum alone.
    pub rect: Option<f64>,
}

impl RadamStep {
    /// The scalars of this step's update.
    ///
    /// ```
    /// use tapir_kernels::optim::RadamStep;
    /// let h = |step| RadamStep {
    ///     lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0,
    ///     decoupled: false, maximize: false, step,
    /// };
    /// assert_eq!(h(5).scalars().rect, None); // too few steps to rectify
    /// assert!(h(6).scalars().rect.is_some());
    /// ```
    pub fn scalars(&self) -> RadamScalars {
        let t = self.step as f64;
        let bias_correction2 = 1.0 - self.beta2.powf(t);
        let rho_inf = 2.0 / (1.0 - self.beta2) - 1.0;
        let rho_t = rho_inf - 2.0 * t * self.beta2.powf(t) / bias_correction2;
        let rect = (rho_t > 5.0).then(|| {
            ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                .powf(0.5)
        });
        RadamScalars {
            bias_correction1: 1.0 - self.beta1.powf(t),
            bias_correction2_sqrt: bias_correction2.powf(0.5),
            rect,
        }
    }
}

/// Hyper-parameters of one Rprop step (`torch.optim.Rprop`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RpropStep {
    /// The step size every coordinate starts from.
    pub lr: f64,
    /// Factor on a coordinate's step size when its gradient changed sign.
    pub etaminus: f64,
    /// Factor when its gradient kept its sign.
    pub etaplus: f64,
    /// Smallest step size.
    pub step_size_min: f64,
    /// Largest step size.
    pub step_size_max: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// The state starts this step: step sizes are `lr` (PyTorch's
    /// `full_like(grad, lr)`), whatever the buffer holds.
    pub first: bool,
}

/// Hyper-parameters of one ASGD step (`torch.optim.ASGD`), with the
/// parameter's scalar state as the optimizer keeps it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AsgdStep {
    /// Decay term: the weights shrink by `1 - lambd * eta`.
    pub lambd: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
    /// This step's learning rate (the state's `eta`, set by the last step).
    pub eta: f64,
    /// This step's averaging weight (the state's `mu`); 1 copies the
    /// parameter into the average.
    pub mu: f64,
}

/// One fused optimizer update, whatever the device: the parameter, its
/// gradient and its state buffers in the optimizer's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimStep {
    /// Adam/AdamW; state `[exp_avg, exp_avg_sq]`, plus `max_exp_avg_sq` with amsgrad.
    Adam(AdamStep),
    /// SGD; state `[momentum_buffer]` when momentum is not 0. `first`: the
    /// buffer starts this step (PyTorch then sets it to the gradient).
    Sgd {
        /// The hyper-parameters.
        h: SgdStep,
        /// Whether the momentum buffer is created this step.
        first: bool,
    },
    /// RMSprop; state `[square_avg]`, then `momentum_buffer` when momentum
    /// is above 0, then `grad_avg` when centered.
    Rmsprop(RmspropStep),
    /// Adagrad; state `[sum]`.
    Adagrad(AdagradStep),
    /// Adadelta; state `[square_avg, acc_delta]`.
    Adadelta(AdadeltaStep),
    /// Adamax; state `[exp_avg, exp_inf]`.
    Adamax(AdamaxStep),
    /// NAdam; state `[exp_avg, exp_avg_sq]`.
    Nadam(NadamStep),
    /// RAdam; state `[exp_avg, exp_avg_sq]`.
    Radam(RadamStep),
    /// Rprop; state `[prev, step_size]`.
    Rprop(RpropStep),
    /// ASGD; state `[ax]` (the averaged parameter).
    Asgd(AsgdStep),
}

impl OptimStep {
    /// How many state buffers the step reads and writes.
    pub fn state_len(&self) -> usize {
        match self {
            OptimStep::Adam(h) => 2 + h.amsgrad as usize,
            OptimStep::Sgd { h, .. } => (h.momentum != 0.0) as usize,
            OptimStep::Rmsprop(h) => 1 + (h.momentum > 0.0) as usize + h.centered as usize,
            OptimStep::Adagrad(_) | OptimStep::Asgd(_) => 1,
            OptimStep::Adadelta(_)
            | OptimStep::Adamax(_)
            | OptimStep::Nadam(_)
            | OptimStep::Radam(_)
            | OptimStep::Rprop(_) => 2,
        }
    }

    /// The update in place on the CPU, over aligned slices of the parameter,
    /// the gradient and each state buffer.
    pub fn apply<T: Float>(&self, p: &mut [T], g: &[T], state: &mut [&mut [T]]) {
        assert!(
            state.len() == self.state_len(),
            "optimizer step: {} state buffers for {self:?}",
            state.len()
        );
        match self {
            OptimStep::Adam(h) => {
                let (m, rest) = state.split_first_mut().expect("adam state");
                let (v, rest) = rest.split_first_mut().expect("adam state");
                adam_update(p, g, m, v, rest.first_mut().map(|x| &mut **x), h)
            }
            OptimStep::Sgd { h, first } => {
                sgd_update(p, g, state.first_mut().map(|x| &mut **x), *first, h)
            }
            OptimStep::Rmsprop(h) => {
                let (sq, rest) = state.split_first_mut().expect("rmsprop state");
                let mut rest = rest.iter_mut();
                let buf = if h.momentum > 0.0 {
                    rest.next().map(|x| &mut **x)
                } else {
                    None
                };
                let gavg = if h.centered {
                    rest.next().map(|x| &mut **x)
                } else {
                    None
                };
                rmsprop_update(p, g, sq, gavg, buf, h)
            }
            OptimStep::Adagrad(h) => adagrad_update(p, g, state[0], h),
            OptimStep::Adadelta(h) => {
                let [sq, acc] = state else {
                    unreachable!("checked above")
                };
                adadelta_update(p, g, sq, acc, h)
            }
            OptimStep::Adamax(h) => {
                let [m, u] = state else {
                    unreachable!("checked above")
                };
                adamax_update(p, g, m, u, h)
            }
            OptimStep::Nadam(h) => {
                let [m, v] = state else {
                    unreachable!("checked above")
                };
                nadam_update(p, g, m, v, h)
            }
            OptimStep::Radam(h) => {
                let [m, v] = state else {
                    unreachable!("checked above")
                };
                radam_update(p, g, m, v, h)
            }
            OptimStep::Rprop(h) => {
                let [prev, step_size] = state else {
                    unreachable!("checked above")
                };
                rprop_update(p, g, prev, step_size, h)
            }
            OptimStep::Asgd(h) => asgd_update(p, g, state[0], h),
        }
    }
}
