//! The hyper-parameter structs of the adaptive-rate updates (Adagrad,
//! Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD) as their kernels in `cu/optim.cu` take
//! them. The per-step scalars come from the same methods the CPU twins use
//! (`AdagradStep::clr`, `NadamStep::scalars`, ...), computed in f64 and
//! rounded once, so both devices start from the same f32 constants.

use crate::optim::{
    AdadeltaStep, AdagradStep, AdamaxStep, AsgdStep, NadamStep, RadamStep, RpropStep,
    split_weight_decay,
};
use cudarc::driver::DeviceRepr;

/// `AdagradHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct AdagradHyper {
    clr: f32,
    eps: f32,
    weight_decay: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for AdagradHyper {}

impl AdagradHyper {
    pub(in crate::cuda) fn new(h: &AdagradStep) -> AdagradHyper {
        AdagradHyper {
            clr: h.clr() as f32,
            eps: h.eps as f32,
            weight_decay: h.weight_decay as f32,
            maximize: h.maximize as i32,
        }
    }
}

/// `AdadeltaHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct AdadeltaHyper {
    lr: f32,
    rho: f32,
    w: f32,
    eps: f32,
    weight_decay: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for AdadeltaHyper {}

impl AdadeltaHyper {
    pub(in crate::cuda) fn new(h: &AdadeltaStep) -> AdadeltaHyper {
        AdadeltaHyper {
            lr: h.lr as f32,
            rho: h.rho as f32,
            w: (1.0 - h.rho) as f32,
            eps: h.eps as f32,
            weight_decay: h.weight_decay as f32,
            maximize: h.maximize as i32,
        }
    }
}

/// `AdamaxHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct AdamaxHyper {
    w1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    clr: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for AdamaxHyper {}

impl AdamaxHyper {
    pub(in crate::cuda) fn new(h: &AdamaxStep) -> AdamaxHyper {
        AdamaxHyper {
            w1: (1.0 - h.beta1) as f32,
            beta2: h.beta2 as f32,
            eps: h.eps as f32,
            weight_decay: h.weight_decay as f32,
            clr: h.clr() as f32,
            maximize: h.maximize as i32,
        }
    }
}

/// [`split_weight_decay`] rounded to the kernels' f32.
fn decays(lr: f64, weight_decay: f64, decoupled: bool) -> (f32, f32) {
    let (l2, decay) = split_weight_decay(lr, weight_decay, decoupled);
    (l2 as f32, decay as f32)
}

/// `NadamHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct NadamHyper {
    w1: f32,
    beta2: f32,
    w2: f32,
    eps: f32,
    weight_decay: f32,
    decay: f32,
    grad_coef: f32,
    avg_coef: f32,
    bc2: f32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for NadamHyper {}

impl NadamHyper {
    pub(in crate::cuda) fn new(h: &NadamStep) -> NadamHyper {
        let s = h.scalars();
        let (weight_decay, decay) = decays(h.lr, h.weight_decay, h.decoupled);
        NadamHyper {
            w1: (1.0 - h.beta1) as f32,
            beta2: h.beta2 as f32,
            w2: (1.0 - h.beta2) as f32,
            eps: h.eps as f32,
            weight_decay,
            decay,
            grad_coef: s.grad_coef as f32,
            avg_coef: s.avg_coef as f32,
            bc2: s.bias_correction2 as f32,
            maximize: h.maximize as i32,
        }
    }
}

/// `RadamHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct RadamHyper {
    w1: f32,
    beta2: f32,
    w2: f32,
    eps: f32,
    weight_decay: f32,
    decay: f32,
    lr: f32,
    bc1: f32,
    bc2_sqrt: f32,
    rect: f32,
    rectified: i32,
    maximize: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for RadamHyper {}

impl RadamHyper {
    pub(in crate::cuda) fn new(h: &RadamStep) -> RadamHyper {
        let s = h.scalars();
        let (weight_decay, decay) = decays(h.lr, h.weight_decay, h.decoupled);
        RadamHyper {
            w1: (1.0 - h.beta1) as f32,
            beta2: h.beta2 as f32,
            w2: (1.0 - h.beta2) as f32,
            eps: h.eps as f32,
            weight_decay,
            decay,
            lr: h.lr as f32,
            bc1: s.bias_correction1 as f32,
            bc2_sqrt: s.bias_correction2_sqrt as f32,
            rect: s.rect.unwrap_or(1.0) as f32,
            rectified: s.rect.is_some() as i32,
            maximize: h.maximize as i32,
        }
    }
}

/// `RpropHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct RpropHyper {
    lr: f32,
    etaminus: f32,
    etaplus: f32,
    step_size_min: f32,
    step_size_max: f32,
    maximize: i32,
    first: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for RpropHyper {}

impl RpropHyper {
    pub(in crate::cuda) fn new(h: &RpropStep) -> RpropHyper {
        RpropHyper {
            lr: h.lr as f32,
            etaminus: h.etaminus as f32,
            etaplus: h.etaplus as f32,
            step_size_min: h.step_size_min as f32,
            step_size_max: h.step_size_max as f32,
            maximize: h.maximize as i32,
            first: h.first as i32,
        }
    }
}

/// `AsgdHyper` in `cu/optim.cu`, same field order and C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct AsgdHyper {
    weight_decay: f32,
    decay: f32,
    eta: f32,
    mu: f32,
    maximize: i32,
    copy: i32,
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for AsgdHyper {}

impl AsgdHyper {
    pub(in crate::cuda) fn new(h: &AsgdStep) -> AsgdHyper {
        AsgdHyper {
            weight_decay: h.weight_decay as f32,
            decay: (1.0 - h.lambd * h.eta) as f32,
            eta: h.eta as f32,
            mu: h.mu as f32,
            maximize: h.maximize as i32,
            copy: (h.mu == 1.0) as i32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mirror has its C struct's size, the one the kernels' PTX
    /// declares (`kernel_parameters_are_read_from_the_ptx`), which the
    /// launcher checks its argument against on a GPU.
    #[test]
    fn hyper_mirrors_have_their_c_sizes() {
        use std::mem::size_of;
        assert_eq!(size_of::<AdagradHyper>(), 16);
        assert_eq!(size_of::<AdadeltaHyper>(), 24);
        assert_eq!(size_of::<AdamaxHyper>(), 24);
        assert_eq!(size_of::<NadamHyper>(), 40);
        assert_eq!(size_of::<RadamHyper>(), 48);
        assert_eq!(size_of::<RpropHyper>(), 28);
        assert_eq!(size_of::<AsgdHyper>(), 24);
    }
}
