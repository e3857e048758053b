//! Batch normalisation: `nn.BatchNorm1d/2d/3d` with PyTorch's keyword
//! arguments (`eps`, `momentum` including `None`, `affine`,
//! `track_running_stats`), and `F.batch_norm`. One recorded op,
//! "batch_norm", does the statistics and the running update, so a compiled
//! graph replays the update and ONNX export sees one node.

use super::module::{Forward, TensorKind, TrainingFlag};
use crate::trace::Attr;
use crate::{Tensor, no_grad};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// `nn.BatchNorm1d` / `nn.BatchNorm2d` / `nn.BatchNorm3d`: batch statistics
/// in train mode (and running averages updated with `momentum`), running
/// statistics in eval mode. Built with PyTorch's defaults (eps 1e-5,
/// momentum 0.1, affine, tracking running statistics) and changed with the
/// keyword-named builders.
///
/// ```
/// use tapir_runtime::{nn::{BatchNorm, Forward}, Tensor};
/// // nn.BatchNorm2d(3, momentum=None): running statistics are the plain
/// // average of every batch seen.
/// let bn = BatchNorm::new_2d(3).momentum(None);
/// let y = bn.forward(&Tensor::randn(&[4, 3, 5, 5]));
/// assert!(y.mean_dims(&[0, 2, 3], false).abs().max().item::<f32>() < 1e-5);
/// assert_eq!(bn.num_batches_tracked.as_ref().unwrap().item::<i64>(), 1);
/// ```
pub struct BatchNorm {
    /// Per-channel scale, if affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift, if affine.
    pub bias: Option<Tensor>,
    /// Running mean used in eval mode, if tracked.
    pub running_mean: Option<Tensor>,
    /// Running (unbiased) variance used in eval mode, if tracked.
    pub running_var: Option<Tensor>,
    /// Batches seen in training, if tracked (int64 scalar).
    pub num_batches_tracked: Option<Tensor>,
    /// Channels (dim 1).
    pub num_features: usize,
    /// Added to the variance (1e-5).
    pub eps: f64,
    /// Weight of the current batch in the running statistics (0.1); `None`
    /// averages every batch equally (a cumulative moving average).
    pub momentum: Option<f64>,
    dims: usize,
    /// Whether training statistics come from every rank's batch.
    sync: bool,
    training: TrainingFlag,
    /// The [`cumulative_running_stats`] pass whose reset this module has
    /// done (0: none).
    reset_in_pass: AtomicU64,
}

impl BatchNorm {
    fn new(num_features: usize, dims: usize) -> BatchNorm {
        BatchNorm {
            weight: None,
            bias: None,
            running_mean: None,
            running_var: None,
            num_batches_tracked: None,
            num_features,
            eps: 1e-5,
            momentum: Some(0.1),
            dims,
            sync: false,
            training: TrainingFlag::default(),
            reset_in_pass: AtomicU64::new(0),
        }
        .affine(true)
        .track_running_stats(true)
    }

    /// `nn.BatchNorm1d(num_features)`, for `[N, C]` or `[N, C, L]` inputs.
    pub fn new_1d(num_features: usize) -> BatchNorm {
        BatchNorm::new(num_features, 1)
    }

    /// `nn.BatchNorm2d(num_features)`, for `[N, C, H, W]` inputs.
    pub fn new_2d(num_features: usize) -> BatchNorm {
        BatchNorm::new(num_features, 2)
    }

    /// `nn.BatchNorm3d(num_features)`, for `[N, C, D, H, W]` inputs.
    pub fn new_3d(num_features: usize) -> BatchNorm {
        BatchNorm::new(num_features, 3)
    }

    /// `eps=`: added to the variance.
    pub fn eps(mut self, eps: f64) -> BatchNorm {
        self.eps = eps;
        self
    }

    /// `momentum=`: a number, or `None` for the cumulative average.
    pub fn momentum(mut self, momentum: impl Into<Option<f64>>) -> BatchNorm {
        self.momentum = momentum.into();
        self
    }

    /// `affine=`: whether there are a learnable weight (ones) and bias (zeros).
    pub fn affine(mut self, on: bool) -> BatchNorm {
        let c = self.num_features;
        (self.weight, self.bias) = match on {
            true => (
                Some(Tensor::ones(&[c]).requires_grad_(true)),
                Some(Tensor::zeros(&[c]).requires_grad_(true)),
            ),
            false => (None, None),
        };
        self
    }

    /// `bias=` (keyword-only, PyTorch 2.x): with `affine`, whether there is
    /// a learnable bias besides the weight.
    pub fn bias(mut self, on: bool) -> BatchNorm {
        let affine = self.weight.is_some();
        self.bias =
            (on && affine).then(|| Tensor::zeros(&[self.num_features]).requires_grad_(true));
        self
    }

    /// `track_running_stats=`: without running statistics the layer
    /// normalises by the batch's statistics in eval mode too.
    pub fn track_running_stats(mut self, on: bool) -> BatchNorm {
        [
            self.running_mean,
            self.running_var,
            self.num_batches_tracked,
        ] = new_running_stats(self.num_features, on);
        self
    }

    /// Running mean zeros, variance ones and the batch count zero (PyTorch's
    /// `reset_running_stats`); nothing when statistics are not tracked.
    pub fn reset_running_stats(&self) {
        no_grad(|| {
            for (t, v) in [
                (&self.running_mean, 0.0),
                (&self.running_var, 1.0),
                (&self.num_batches_tracked, 0.0),
            ] {
                if let Some(t) = t {
                    t.fill_(v);
                }
            }
        });
    }

    fn name(&self) -> String {
        match self.sync {
            true => "SyncBatchNorm".to_string(),
            false => format!("BatchNorm{}d", self.dims),
        }
    }

    /// `nn.SyncBatchNorm` (on): in training, the statistics are those of the
    /// batch that every rank of the process group holds together (two
    /// all-reduces forward, two backward, through autograd), and the
    /// running statistics move by them on every rank alike. Outside a
    /// process group of two or more ranks it is a plain batch norm.
    /// [`convert_sync_batchnorm`] turns it on in a whole model.
    ///
    /// ```
    /// use tapir_runtime::nn::BatchNorm;
    /// let bn = BatchNorm::new_2d(3).sync(true);
    /// assert!(bn.is_sync());
    /// assert!(bn.to_string().starts_with("SyncBatchNorm(3, eps=1e-05"));
    /// ```
    pub fn sync(mut self, on: bool) -> BatchNorm {
        self.sync = on;
        self
    }

    /// Whether this is a `SyncBatchNorm`.
    pub fn is_sync(&self) -> bool {
        self.sync
    }

    fn state(&self) -> Option<BatchNormState<'_>> {
        Some(BatchNormState {
            running_mean: self.running_mean.as_ref()?,
            running_var: self.running_var.as_ref()?,
            num_batches_tracked: self.num_batches_tracked.as_ref(),
        })
    }
}

impl Forward for BatchNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        let name = self.name();
        let ok = match self.dims {
            1 => x.ndim() == 2 || x.ndim() == 3,
            d => x.ndim() == d + 2,
        };
        assert!(
            ok && x.shape()[1] == self.num_features,
            "{name}({}): unexpected input shape {:?}",
            self.num_features,
            x.shape()
        );
        let training = self.training.get();
        // PyTorch's check: one value has no variance to normalise by (the
        // output would be all zeros and the running variance NaN).
        assert!(
            !training || x.numel() / self.num_features.max(1) != 1,
            "{name}({}): expected more than 1 value per channel when training, got input of shape {:?}",
            self.num_features,
            x.shape()
        );
        let mut momentum = self.momentum;
        let pass = CUMULATIVE_PASS.with(Cell::get);
        if pass != 0 && training {
            if self.reset_in_pass.swap(pass, Ordering::Relaxed) != pass {
                self.reset_running_stats();
            }
            momentum = None;
        }
        let state = self.state();
        // Without running statistics the batch's are used in eval mode too.
        let use_batch_stats = training || state.is_none();
        batch_norm_op(
            x,
            state,
            self.weight.as_ref(),
            self.bias.as_ref(),
            use_batch_stats,
            momentum,
            self.eps,
            self.sync,
        )
    }
}

/// `nn.SyncBatchNorm.convert_sync_batchnorm(model)`: turns every
/// [`BatchNorm`] in `model` into a `SyncBatchNorm` ([`BatchNorm::sync`]),
/// in place, and says how many it found. Call it before wrapping the model
/// in `DistributedDataParallel`. Layers a hand-written module does not list
/// in `visit_children` are not reached.
///
/// ```
/// use tapir_runtime::nn::{BatchNorm, Conv2d, Module, ReLU, Sequential, convert_sync_batchnorm};
/// use tapir_runtime::Conv2dOptions;
/// let mut net = Sequential::new()
///     .add(Conv2d::new(3, 8, (3, 3), Conv2dOptions::default(), false))
///     .add(BatchNorm::new_2d(8))
///     .add(ReLU);
/// assert_eq!(convert_sync_batchnorm(&mut net), 1);
/// assert!(net.to_string().contains("(1): SyncBatchNorm(8"));
/// ```
pub fn convert_sync_batchnorm(model: &mut dyn super::Module) -> usize {
    let mut converted = 0;
    model.apply(&mut |m| {
        if let Some(bn) = m.downcast_mut::<BatchNorm>() {
            bn.sync = true;
            converted += 1;
        }
    });
    converted
}

thread_local! {
    /// The [`cumulative_running_stats`] pass running on this thread (0: none).
    static CUMULATIVE_PASS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` with every [`BatchNorm`] that trains in it on this thread
/// first resetting its running statistics, then averaging every batch
/// equally (`momentum=None`): how `swa_utils::update_bn` recomputes the
/// statistics for averaged weights.
pub(crate) fn cumulative_running_stats<R>(f: impl FnOnce() -> R) -> R {
    static PASSES: AtomicU64 = AtomicU64::new(1);
    let pass = PASSES.fetch_add(1, Ordering::Relaxed);
    let outer = CUMULATIVE_PASS.with(|p| p.replace(pass));
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            CUMULATIVE_PASS.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(outer);
    f()
}

/// `F.batch_norm`: normalises `x` (`[N, C, *]`) per channel by the batch's
/// statistics when `training` (updating `running_mean` and `running_var`,
/// if given, by `momentum` with the unbiased variance), else by the running
/// statistics; then the optional per-channel `weight` and `bias`.
///
/// ```
/// use tapir_runtime::{nn::batch_norm, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], &[2, 1]);
/// let (mean, var) = (Tensor::zeros(&[1]), Tensor::ones(&[1]));
/// let y = batch_norm(&x, Some(&mean), Some(&var), None, None, true, 0.5, 0.0);
/// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0]);
/// // 0.5 * 0 + 0.5 * 2, and 0.5 * 1 + 0.5 * 2 (the unbiased variance).
/// assert_eq!((mean.item::<f32>(), var.item::<f32>()), (1.0, 1.5));
/// ```
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Tensor {
    let state = match (running_mean, running_var) {
        (Some(running_mean), Some(running_var)) => Some(BatchNormState {
            running_mean,
            running_var,
            num_batches_tracked: None,
        }),
        (None, None) => None,
        _ => panic!("batch_norm: running_mean and running_var are given together or not at all"),
    };
    assert!(
        training || state.is_some(),
        "batch_norm: running_mean and running_var are needed when training is false"
    );
    assert!(
        x.ndim() >= 2,
        "batch_norm: expects an input [N, C, *], got shape {:?}",
        x.shape()
    );
    batch_norm_op(x, state, weight, bias, training, Some(momentum), eps, false)
}

/// A batch norm's running statistics (updated in place in training).
pub(crate) struct BatchNormState<'a> {
    pub running_mean: &'a Tensor,
    pub running_var: &'a Tensor,
    pub num_batches_tracked: Option<&'a Tensor>,
}

/// The recorded "batch_norm" op: what [`BatchNorm`] and [`batch_norm`]
/// apply, and what a compiled graph replays. In training with `state`, the
/// batch count goes up by one and the statistics move by `momentum`, or by
/// 1 / count when it is `None` (read when the op runs, so a replay of a
/// compiled graph averages as eager does). With `sync`, the training
/// statistics are the whole process group's (a replay all-reduces again).
#[allow(clippy::too_many_arguments)] // F.batch_norm's own arguments, and sync
pub(crate) fn batch_norm_op(
    x: &Tensor,
    state: Option<BatchNormState>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: Option<f64>,
    eps: f64,
    sync: bool,
) -> Tensor {
    let inputs = [
        Some(x),
        state.as_ref().map(|s| s.running_mean),
        state.as_ref().map(|s| s.running_var),
        weight,
        bias,
        state.as_ref().and_then(|s| s.num_batches_tracked),
    ];
    let attrs = || {
        vec![
            ("eps", Attr::Float(eps)),
            ("training", Attr::Int(training as i64)),
            ("momentum", Attr::Float(momentum.unwrap_or(0.0))),
            ("cumulative", Attr::Int(momentum.is_none() as i64)),
            ("sync", Attr::Int(sync as i64)),
        ]
    };
    crate::trace::op("batch_norm", inputs, attrs, || {
        let c = x.shape()[1];
        let mut bshape = vec![1isize; x.ndim()];
        bshape[1] = c as isize;
        let dims: Vec<isize> = (0..x.ndim() as isize).filter(|&d| d != 1).collect();
        let synced = match sync && training {
            true => crate::distributed::synced_batch_stats(x, &dims, &bshape),
            false => None,
        };
        let local = (x.numel() / c) as f64;
        let (mean, var, n) = match (&state, training, synced) {
            (Some(s), false, _) => (s.running_mean.clone(), s.running_var.clone(), local),
            (_, _, Some(stats)) => stats,
            _ => (
                x.mean_dims(&dims, false),
                x.var_dims(&dims, 0, false),
                local,
            ),
        };
        if let (Some(s), true) = (&state, training) {
            update_running_stats(s, &mean, &var, n, momentum);
        }
        let mut y = &(x - &mean.reshape(&bshape)) * &(&var.reshape(&bshape) + eps).rsqrt();
        if let Some(w) = weight {
            y = &y * &w.reshape(&bshape);
        }
        if let Some(b) = bias {
            y = &y + &b.reshape(&bshape);
        }
        y
    })
}

fn update_running_stats(
    s: &BatchNormState,
    mean: &Tensor,
    var: &Tensor,
    n: f64,
    momentum: Option<f64>,
) {
    no_grad(|| {
        if let Some(count) = s.num_batches_tracked {
            count.add_scalar_(1.0);
        }
        let m = match (momentum, s.num_batches_tracked) {
            (Some(m), _) => m,
            (None, Some(count)) => 1.0 / count.item::<i64>() as f64,
            (None, None) => 0.0,
        };
        let unbiased = var * (n / (n - 1.0).max(1.0));
        s.running_mean.mul_scalar_(1.0 - m).add_scaled_(mean, m);
        s.running_var.mul_scalar_(1.0 - m).add_scaled_(&unbiased, m);
    });
}

/// A norm's running statistics when tracked: mean zeros, variance ones,
/// the int64 batch count zero.
pub(super) fn new_running_stats(c: usize, tracked: bool) -> [Option<Tensor>; 3] {
    match tracked {
        true => [
            Some(Tensor::zeros(&[c])),
            Some(Tensor::ones(&[c])),
            Some(Tensor::scalar(0i64)),
        ],
        false => [None, None, None],
    }
}

/// Visits a norm's running statistics, those it tracks, as buffers.
pub(super) fn visit_running_stats(
    stats: [&Option<Tensor>; 3],
    f: &mut dyn FnMut(&str, &Tensor, TensorKind),
) {
    for (name, t) in RUNNING_STATS.iter().zip(stats) {
        if let Some(t) = t {
            f(name, t, TensorKind::Buffer);
        }
    }
}

/// [`visit_running_stats`], mutably.
pub(super) fn visit_running_stats_mut(
    stats: [&mut Option<Tensor>; 3],
    f: &mut dyn FnMut(&str, &mut Tensor, TensorKind),
) {
    for (name, t) in RUNNING_STATS.iter().zip(stats) {
        if let Some(t) = t {
            f(name, t, TensorKind::Buffer);
        }
    }
}

const RUNNING_STATS: [&str; 3] = ["running_mean", "running_var", "num_batches_tracked"];

/// Implements `Module` for a norm with optional affine parameters and
/// running statistics (BatchNorm and InstanceNorm share PyTorch's
/// `_NormBase` fields and repr).
macro_rules! running_norm_module {
    ($t:ty) => {
        impl $crate::nn::Module for $t {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, $crate::nn::TensorKind)) {
                use $crate::nn::batch_norm::visit_running_stats;
                $crate::nn::norm::visit_affine(&self.weight, &self.bias, f);
                let stats = [
                    &self.running_mean,
                    &self.running_var,
                    &self.num_batches_tracked,
                ];
                visit_running_stats(stats, f);
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, $crate::nn::TensorKind)) {
                use $crate::nn::batch_norm::visit_running_stats_mut;
                $crate::nn::norm::visit_affine_mut(&mut self.weight, &mut self.bias, f);
                let stats = [
                    &mut self.running_mean,
                    &mut self.running_var,
                    &mut self.num_batches_tracked,
                ];
                visit_running_stats_mut(stats, f);
            }
            fn repr(&self) -> String {
                use $crate::nn::module::{py_bool, py_float};
                format!(
                    "{}({}, eps={}, momentum={}, affine={}, bias={}, track_running_stats={})",
                    self.name(),
                    self.num_features,
                    py_float(self.eps),
                    self.momentum.map_or("None".to_string(), py_float),
                    py_bool(self.weight.is_some()),
                    py_bool(self.bias.is_some()),
                    py_bool(self.running_mean.is_some())
                )
            }
            fn set_training(&self, on: bool) {
                self.training.set(on);
            }
            fn is_training(&self) -> bool {
                self.training.get()
            }
        }
    };
}
pub(super) use running_norm_module;

running_norm_module!(BatchNorm);

crate::display_as_repr!(BatchNorm);
