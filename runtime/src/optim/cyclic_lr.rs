//! CyclicLR (`torch.optim.lr_scheduler.CyclicLR`): the learning rate
//! cycles between two bounds, stepped every batch, with the momentum
//! (SGD's, or Adam's beta1) cycling the other way.

use super::{LrScheduler, Optimizer};

/// How each cycle's amplitude is scaled (PyTorch's `mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CyclicMode {
    /// Every cycle reaches `max_lr` (`"triangular"`).
    Triangular,
    /// Each cycle's amplitude is half the last's (`"triangular2"`).
    Triangular2,
    /// The amplitude decays by `gamma` every iteration (`"exp_range"`).
    ExpRange {
        /// The decay per iteration.
        gamma: f64,
    },
}

impl CyclicMode {
    /// The amplitude's factor at `cycle` (1-based), or at iteration
    /// `iteration` for `ExpRange` (PyTorch's `scale_mode`).
    fn scale(self, cycle: f64, iteration: i64) -> f64 {
        match self {
            CyclicMode::Triangular => 1.0,
            CyclicMode::Triangular2 => 1.0 / 2f64.powf(cycle - 1.0),
            CyclicMode::ExpRange { gamma } => gamma.powf(iteration as f64),
        }
    }
}

/// Options of [`CyclicLR`]; `Default` gives PyTorch's (with bounds 1e-3
/// and 6e-3, the paper's, since PyTorch has no default for them): cycles
/// of 2000 iterations up and as many down, triangular, momentum cycled
/// between 0.8 and 0.9.
///
/// ```
/// use tapir_runtime::optim::{CyclicLrConfig, CyclicMode};
/// let c = CyclicLrConfig { base_lr: 0.01, max_lr: 0.1, step_size_up: 4, ..Default::default() };
/// assert_eq!((c.mode, c.base_momentum), (CyclicMode::Triangular, 0.8));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CyclicLrConfig {
    /// The lower bound of the lr.
    pub base_lr: f64,
    /// The upper bound of the lr (reached when the amplitude is not scaled).
    pub max_lr: f64,
    /// Iterations from `base_lr` up to `max_lr`.
    pub step_size_up: u64,
    /// Iterations back down; `None` means as many as up.
    pub step_size_down: Option<u64>,
    /// The amplitude's scaling.
    pub mode: CyclicMode,
    /// Cycle the optimizer's momentum inversely to the lr.
    pub cycle_momentum: bool,
    /// The momentum at the lr's peak.
    pub base_momentum: f64,
    /// The momentum at `base_lr`.
    pub max_momentum: f64,
}

impl Default for CyclicLrConfig {
    fn default() -> Self {
        CyclicLrConfig {
            base_lr: 1e-3,
            max_lr: 6e-3,
            step_size_up: 2000,
            step_size_down: None,
            mode: CyclicMode::Triangular,
            cycle_momentum: true,
            base_momentum: 0.8,
            max_momentum: 0.9,
        }
    }
}

/// Cyclical learning rates (`CyclicLR`): call `step` after every batch.
///
/// ```
/// use tapir_runtime::{optim::*, Tensor};
/// let w = Tensor::zeros(&[1]).requires_grad_(true);
/// let mut opt = SGD::new(vec![w], SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
/// let cfg = CyclicLrConfig { base_lr: 0.01, max_lr: 0.05, step_size_up: 2, ..Default::default() };
/// let mut s = CyclicLR::new(&mut opt, cfg);
/// let mut lrs = vec![opt.lr()];
/// for _ in 0..4 {
///     s.step(&mut opt);
///     lrs.push(opt.lr());
/// }
/// let want = [0.01, 0.03, 0.05, 0.03, 0.01];
/// assert!(lrs.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12));
/// ```
pub struct CyclicLR {
    cfg: CyclicLrConfig,
    /// Iterations per cycle, and the share of them going up.
    total_size: f64,
    step_ratio: f64,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl CyclicLR {
    /// Sets every group's lr to `base_lr` (and the momentum to
    /// `max_momentum` when it cycles), then applies iteration 0.
    pub fn new(opt: &mut dyn Optimizer, cfg: CyclicLrConfig) -> CyclicLR {
        assert!(
            cfg.step_size_up > 0 || cfg.step_size_down.is_some_and(|d| d > 0),
            "CyclicLR: a cycle needs at least one iteration (step_size_up and step_size_down are 0)"
        );
        if cfg.cycle_momentum {
            assert!(
                opt.momentum().is_some(),
                "CyclicLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
            );
            opt.set_momentum(cfg.max_momentum);
        }
        for g in opt.param_groups_mut() {
            g.lr = cfg.base_lr;
            g.initial_lr = cfg.base_lr;
        }
        let up = cfg.step_size_up as f64;
        let down = cfg.step_size_down.map_or(up, |d| d as f64);
        let mut s = CyclicLR {
            cfg,
            total_size: up + down,
            step_ratio: up / (up + down),
            last_epoch: -1,
            last_lr: vec![],
        };
        s.step(opt);
        s
    }
}

impl LrScheduler for CyclicLR {
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, iteration: i64) {
        let c = &self.cfg;
        self.last_epoch = iteration;
        let progress = iteration as f64 / self.total_size;
        let cycle = (1.0 + progress).floor();
        let x = 1.0 + progress - cycle;
        // Up from 0 to 1 over the first `step_ratio` of the cycle, then down.
        let rise = if x <= self.step_ratio {
            x / self.step_ratio
        } else {
            (x - 1.0) / (self.step_ratio - 1.0)
        };
        let scale = c.mode.scale(cycle, iteration);
        let lr = c.base_lr + (c.max_lr - c.base_lr) * rise * scale;
        for g in opt.param_groups_mut() {
            g.lr = lr;
        }
        if c.cycle_momentum {
            opt.set_momentum(c.max_momentum - (c.max_momentum - c.base_momentum) * rise * scale);
        }
        self.last_lr = vec![lr; opt.param_groups().len()];
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}
