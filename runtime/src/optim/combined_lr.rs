//! Schedulers made of schedulers: `SequentialLR` (one after another, each
//! from its own epoch 0) and `ChainedScheduler` (all of them every epoch,
//! each scaling the lr the previous left, PyTorch's chainable forms).

use super::{LrScheduler, Optimizer};

/// Runs `schedulers` one after another, switching at `milestones` (each
/// restarts from its epoch 0), e.g. warmup then cosine.
pub struct SequentialLR {
    schedulers: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<i64>,
    last_epoch: i64,
}

impl SequentialLR {
    /// Runs `schedulers` in turn, switching at each of `milestones` (`SequentialLR`).
    pub fn new(
        opt: &mut dyn Optimizer,
        mut schedulers: Vec<Box<dyn LrScheduler>>,
        milestones: Vec<i64>,
    ) -> SequentialLR {
        assert!(
            schedulers.len() == milestones.len() + 1,
            "SequentialLR: expects one more scheduler than milestones, got {} schedulers and {} milestones",
            schedulers.len(),
            milestones.len()
        );
        // As PyTorch: reset to the initial lrs, then epoch 0 of the first scheduler.
        for g in opt.param_groups_mut() {
            g.lr = g.initial_lr;
        }
        schedulers[0].set_epoch(opt, 0);
        SequentialLR {
            schedulers,
            milestones,
            last_epoch: 0,
        }
    }
}

impl LrScheduler for SequentialLR {
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        self.last_epoch = epoch;
        let idx = self.milestones.iter().filter(|&&m| m <= epoch).count();
        let s = &mut self.schedulers[idx];
        if idx > 0 && self.milestones[idx - 1] == epoch {
            s.set_epoch(opt, 0);
        } else {
            s.step(opt);
        }
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        let idx = self
            .milestones
            .iter()
            .filter(|&&m| m <= self.last_epoch)
            .count();
        self.schedulers[idx].get_last_lr()
    }

    fn load_state_dict(&mut self, opt: &mut dyn Optimizer, state: &[(String, f64)]) {
        let epoch = state
            .iter()
            .find(|(k, _)| k == "last_epoch")
            .map_or(self.last_epoch, |(_, v)| *v as i64);
        // The active scheduler's epoch counts from its milestone.
        let idx = self.milestones.iter().filter(|&&m| m <= epoch).count();
        let start = if idx == 0 {
            0
        } else {
            self.milestones[idx - 1]
        };
        self.last_epoch = epoch;
        self.schedulers[idx].set_epoch(opt, epoch - start);
    }
}

/// Steps every scheduler each epoch, each from the lr the one before it
/// left (`ChainedScheduler`), e.g. a warmup times a decay. Each scheduler
/// uses PyTorch's chainable form ([`LrScheduler::chain_epoch`]); building
/// the chain starts from the initial lrs and applies each one's epoch 0 in
/// order, as constructing them in that order on one optimizer does in
/// PyTorch.
///
/// ```
/// use tapir_runtime::{optim::*, Tensor};
/// let mut opt = SGD::new(vec![Tensor::zeros(&[1]).requires_grad_(true)], SgdConfig { lr: 1.0, ..Default::default() });
/// let warm: Box<dyn LrScheduler> = Box::new(LinearLR::new(&mut opt, 0.5, 1.0, 2));
/// let decay: Box<dyn LrScheduler> = Box::new(ExponentialLR::new(&mut opt, 0.5));
/// let mut s = ChainedScheduler::new(&mut opt, vec![warm, decay]);
/// let lrs: Vec<f64> = (0..4).map(|_| { let lr = opt.lr(); s.step(&mut opt); lr }).collect();
/// assert_eq!(lrs, [0.5, 0.375, 0.25, 0.125]);
/// ```
pub struct ChainedScheduler {
    schedulers: Vec<Box<dyn LrScheduler>>,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl ChainedScheduler {
    /// Chains `schedulers` (all built on `opt`) (`ChainedScheduler`).
    pub fn new(opt: &mut dyn Optimizer, schedulers: Vec<Box<dyn LrScheduler>>) -> ChainedScheduler {
        assert!(
            !schedulers.is_empty(),
            "ChainedScheduler: expects at least one scheduler"
        );
        let mut chain = ChainedScheduler {
            schedulers,
            last_epoch: 0,
            last_lr: vec![],
        };
        chain.replay(opt, 0);
        chain
    }

    /// From the initial lrs, every scheduler's epochs `0..=epoch` in order.
    fn replay(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        for g in opt.param_groups_mut() {
            g.lr = g.initial_lr;
        }
        for e in 0..=epoch {
            self.advance(opt, e);
        }
    }

    fn advance(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        for s in &mut self.schedulers {
            s.chain_epoch(opt, epoch);
        }
        self.last_epoch = epoch;
        self.last_lr = opt.param_groups().iter().map(|g| g.lr).collect();
    }
}

impl LrScheduler for ChainedScheduler {
    /// The next epoch chains on; any other replays from epoch 0 (the lr
    /// of a chain depends on its whole history).
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        if epoch == self.last_epoch + 1 {
            self.advance(opt, epoch);
        } else {
            self.replay(opt, epoch.max(0));
        }
    }
    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}
