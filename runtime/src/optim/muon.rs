//! Muon (`torch.optim.Muon`): SGD with Nesterov momentum whose update for
//! a matrix is orthogonalised by a few Newton-Schulz iterations (in bf16,
//! as PyTorch's), so every direction of the update moves about equally.
//! Composed of tensor ops (matmuls), so it runs wherever the parameters do.

use super::{
    GroupSpec, Optimizer, ParamGroup, ParamState, empty_state, lerp, lerp_into, load_state,
    resolve_groups, save_state, step_each_composed,
};
use crate::nn::StateDict;
use crate::{DType, Result, Tensor};

/// How Muon scales the learning rate by the shape `[A, B]` of a matrix
/// (PyTorch's `adjust_lr_fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdjustLr {
    /// `sqrt(max(1, A / B))` (`None` or `"original"`).
    Original,
    /// `0.2 * sqrt(max(A, B))`, an update RMS like AdamW's (`"match_rms_adamw"`).
    MatchRmsAdamW,
    /// `sqrt(A / B)` (`"spectral_unclamped"`).
    SpectralUnclamped,
}

impl AdjustLr {
    /// The factor on the learning rate for a matrix of `rows x cols`.
    ///
    /// ```
    /// use tapir_runtime::optim::AdjustLr;
    /// assert_eq!(AdjustLr::Original.ratio(8, 2), 2.0);
    /// assert_eq!(AdjustLr::Original.ratio(2, 8), 1.0);
    /// assert_eq!(AdjustLr::SpectralUnclamped.ratio(2, 8), 0.5);
    /// ```
    pub fn ratio(self, rows: usize, cols: usize) -> f64 {
        let (a, b) = (rows as f64, cols as f64);
        match self {
            AdjustLr::Original => (a / b).max(1.0).sqrt(),
            AdjustLr::MatchRmsAdamW => 0.2 * a.max(b).sqrt(),
            AdjustLr::SpectralUnclamped => (a / b).sqrt(),
        }
    }
}

/// Hyper-parameters of Muon; `Default` gives `torch.optim.Muon`'s: lr 1e-3,
/// weight decay 0.1, momentum 0.95 with Nesterov, 5 Newton-Schulz steps
/// with coefficients (3.4445, -4.7750, 2.0315), eps 1e-7.
///
/// ```
/// use tapir_runtime::optim::{AdjustLr, MuonConfig};
/// let c = MuonConfig::default();
/// assert_eq!((c.ns_steps, c.adjust_lr_fn), (5, AdjustLr::Original));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MuonConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decoupled weight decay (the weights shrink by `1 - lr * weight_decay`).
    pub weight_decay: f64,
    /// Momentum factor.
    pub momentum: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// The quintic Newton-Schulz iteration's `(a, b, c)`.
    pub ns_coefficients: (f64, f64, f64),
    /// Floor of the norm the update is first divided by.
    pub eps: f64,
    /// Newton-Schulz iterations (below 100).
    pub ns_steps: usize,
    /// The learning rate's scaling by the matrix's shape.
    pub adjust_lr_fn: AdjustLr,
}

impl Default for MuonConfig {
    fn default() -> Self {
        MuonConfig {
            lr: 1e-3,
            weight_decay: 0.1,
            momentum: 0.95,
            nesterov: true,
            ns_coefficients: (3.4445, -4.7750, 2.0315),
            eps: 1e-7,
            ns_steps: 5,
            adjust_lr_fn: AdjustLr::Original,
        }
    }
}

/// Muon (`torch.optim.Muon`), for 2-D parameters only (hidden layers'
/// weights; give biases, norms and embeddings to AdamW, as PyTorch's
/// documentation advises).
///
/// ```
/// use tapir_runtime::{optim::{Muon, MuonConfig, Optimizer}, Tensor};
/// let w = Tensor::ones(&[4, 8]).requires_grad_(true);
/// let mut opt = Muon::new(vec![w.clone()], MuonConfig { lr: 0.02, ..Default::default() });
/// (&w * &w).sum().backward();
/// opt.step();
/// assert!(w.to_vec::<f32>().iter().all(|&x| x < 1.0));
/// ```
pub struct Muon {
    groups: Vec<ParamGroup>,
    state: Vec<Option<ParamState>>,
    cfg: MuonConfig,
}

impl Muon {
    /// Muon over `params`, each a matrix.
    pub fn new(params: Vec<Tensor>, cfg: MuonConfig) -> Muon {
        Muon::with_groups(vec![GroupSpec::new(params)], cfg)
    }

    /// Muon with parameter groups (each may set its own lr and weight decay).
    pub fn with_groups(groups: Vec<GroupSpec>, cfg: MuonConfig) -> Muon {
        assert!(
            cfg.momentum >= 0.0,
            "Muon: momentum should be >= 0 but is: {}",
            cfg.momentum
        );
        assert!(
            cfg.ns_steps < 100,
            "Muon: the number of Newton-Schulz steps must be less than 100, got {}",
            cfg.ns_steps
        );
        let groups = resolve_groups(groups, cfg.lr, cfg.weight_decay, "Muon");
        for (gi, g) in groups.iter().enumerate() {
            for (i, p) in g.params.iter().enumerate() {
                assert!(
                    p.ndim() == 2,
                    "Muon: only supports 2D parameters, but parameter {i} of group {gi} has shape {:?}; optimize \
                     it with AdamW",
                    p.shape()
                );
            }
        }
        let state = empty_state(&groups);
        Muon { groups, state, cfg }
    }
}

/// `beta * input + alpha * (m1 @ m2)` of bf16 matrices, accumulated in
/// f32 and rounded to bf16 once, as PyTorch's bf16 `addmm`.
fn addmm_bf16(input: &Tensor, m1: &Tensor, m2: &Tensor, beta: f64, alpha: f64) -> Tensor {
    let f = |t: &Tensor| t.to_dtype(DType::F32);
    let product = &f(m1).matmul(&f(m2)) * alpha;
    (&(&f(input) * beta) + &product).to_dtype(DType::BF16)
}

/// The quintic Newton-Schulz iteration that takes `g` towards the nearest
/// semi-orthogonal matrix (PyTorch's `_zeropower_via_newtonschulz`), in
/// bf16 on the wide orientation.
fn orthogonalize(g: &Tensor, c: &MuonConfig) -> Tensor {
    let (a, b, cc) = c.ns_coefficients;
    let tall = g.shape()[0] > g.shape()[1];
    let x = g.to_dtype(DType::BF16);
    let x = if tall { x.t() } else { x };
    let mut x = &x / &x.norm(2.0).clamp_min(c.eps);
    for _ in 0..c.ns_steps {
        let gram = x.matmul(&x.t());
        let gram_update = addmm_bf16(&gram, &gram, &gram, b, cc);
        x = addmm_bf16(&x, &gram_update, &x, a, 1.0);
    }
    if tall { x.t() } else { x }
}

impl Optimizer for Muon {
    fn step(&mut self) {
        let c = self.cfg;
        let init = |p: &Tensor| vec![("momentum_buffer", Tensor::zeros_like(p))];
        step_each_composed(
            "Optimizer.step#Muon.step",
            &self.groups,
            &mut self.state,
            init,
            |p, g, st, lr, weight_decay| {
                let buf = &st.bufs[0].1;
                lerp_into(buf, g, 1.0 - c.momentum);
                let update = if c.nesterov {
                    lerp(g, buf, c.momentum)
                } else {
                    buf.clone()
                };
                let ortho = orthogonalize(&update, &c).to_dtype(p.dtype());
                let ratio = c.adjust_lr_fn.ratio(p.shape()[0], p.shape()[1]);
                p.mul_scalar_(1.0 - lr * weight_decay);
                p.add_scaled_(&ortho, -lr * ratio);
            },
        );
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let extra = [("momentum", self.cfg.momentum)];
        save_state(&self.groups, &self.state, &extra)
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
