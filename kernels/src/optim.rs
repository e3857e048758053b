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
use crate::cpu::{adam_update, rmsprop_update, sgd_update};

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
}

impl OptimStep {
    /// How many state buffers the step reads and writes.
    pub fn state_len(&self) -> usize {
        match self {
            OptimStep::Adam(h) => 2 + h.amsgrad as usize,
            OptimStep::Sgd { h, .. } => (h.momentum != 0.0) as usize,
            OptimStep::Rmsprop(h) => 1 + (h.momentum > 0.0) as usize + h.centered as usize,
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
        }
    }
}
