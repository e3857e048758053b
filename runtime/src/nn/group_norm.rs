//! Group and instance normalisation (`F.group_norm`, `nn.GroupNorm`,
//! `F.instance_norm`, `nn.InstanceNorm1d/2d`), composed from a mean, a
//! variance and elementwise ops, so their gradients come from those ops.
//! Instance norm is group norm with one channel per group.

use super::batch_norm::new_running_stats;
use super::module::{Forward, Module, TensorKind, TrainingFlag, py_bool, py_float};
use super::norm::{visit_affine, visit_affine_mut};
use crate::amp::{self, Policy};
use crate::{DType, Tensor};

/// `F.group_norm`: normalises `x` (`[N, C, *]`) over each of `num_groups`
/// groups of `C / num_groups` channels (and all their positions), with the
/// biased variance, then scales and shifts per channel by `weight` and
/// `bias` (`[C]`). Half-precision inputs are normalised in f32 and the
/// result rounded once, as PyTorch's kernels do.
///
/// ```
/// use tapir_runtime::{nn::group_norm, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 30.0], &[1, 2, 2]);
/// let y = group_norm(&x, 2, None, None, 0.0);
/// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
pub fn group_norm(
    x: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    normalise_groups("group_norm", x, num_groups, weight, bias, eps)
}

/// `F.instance_norm` without running statistics: normalises each channel
/// of each sample of `x` (`[N, C, *]`) over its positions, then applies the
/// optional per-channel `weight` and `bias` (`[C]`).
///
/// ```
/// use tapir_runtime::{nn::instance_norm, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 30.0], &[1, 2, 2]);
/// let y = instance_norm(&x, None, None, 0.0);
/// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
pub fn instance_norm(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    let c = if x.ndim() >= 2 { x.shape()[1] } else { 0 };
    normalise_groups("instance_norm", x, c, weight, bias, eps)
}

fn normalise_groups(
    op: &str,
    x: &Tensor,
    groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    assert!(
        x.ndim() >= 2,
        "{op}: expects an input [N, C, *], got shape {:?}",
        x.shape()
    );
    let (n, c) = (x.shape()[0], x.shape()[1]);
    assert!(
        groups > 0 && c.is_multiple_of(groups),
        "{op}: input of shape {:?} has {c} channels, which do not divide into {groups} groups",
        x.shape()
    );
    assert!(
        x.dtype().is_float(),
        "{op}: expects a float input, got {}",
        x.dtype()
    );
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            crate::ops::same_device(x, t, op);
            assert!(
                t.shape() == [c],
                "{op}: {what} has shape {:?}, expected [{c}] for input of shape {:?}",
                t.shape(),
                x.shape()
            );
        }
    }
    // Autocast runs normalisation in f32 on CUDA (PyTorch's fp32 list).
    let mut all = vec![x];
    all.extend(weight);
    all.extend(bias);
    if let Some(v) = amp::cast(Policy::Fp32OnCuda, &all) {
        let (w, b) = (weight.map(|_| &v[1]), bias.map(|_| &v[v.len() - 1]));
        return normalise_groups(op, &v[0], groups, w, b, eps);
    }
    let out_dtype = x.dtype();
    let compute = match out_dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    // Statistics over each group, then spread to its channels: the result
    // keeps x's shape without a reshape back (which ONNX export could not
    // follow when more than the batch is dynamic).
    let x = as_dtype(x, compute);
    let per_group = (x.numel() / n.max(1) / c.max(1)) * (c / groups);
    let g = x.reshape(&[n as isize, groups as isize, per_group as isize]);
    let mut stat_shape = vec![n as isize, c as isize];
    stat_shape.resize(x.ndim(), 1);
    let per_channel = |stat: Tensor| stat.expand(&[n, groups, c / groups]).reshape(&stat_shape);
    let mean = per_channel(g.mean_dims(&[2], true));
    let rstd = per_channel((&g.var_dims(&[2], 0, true) + eps).rsqrt());
    let mut y = &(&x - &mean) * &rstd;
    let mut param_shape = vec![1isize; x.ndim()];
    param_shape[1] = c as isize;
    if let Some(w) = weight {
        y = &y * &as_dtype(w, compute).reshape(&param_shape);
    }
    if let Some(b) = bias {
        y = &y + &as_dtype(b, compute).reshape(&param_shape);
    }
    as_dtype(&y, out_dtype)
}

/// `t` in `dtype`, recording no cast when it already is.
fn as_dtype(t: &Tensor, dtype: DType) -> Tensor {
    if t.dtype() == dtype {
        t.clone()
    } else {
        t.to_dtype(dtype)
    }
}

/// `nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)`: weight
/// ones and bias zeros of shape `[num_channels]` when affine (PyTorch's
/// keyword `bias=False` is `bias` set to `None`).
///
/// ```
/// use tapir_runtime::{nn::{Forward, GroupNorm}, Tensor};
/// let gn = GroupNorm::new(2, 4, 1e-5, true);
/// let y = gn.forward(&Tensor::randn(&[3, 4, 5, 5]));
/// assert!(y.reshape(&[3, 2, -1]).mean_dim(-1, false).abs().max().item::<f32>() < 1e-5);
/// ```
pub struct GroupNorm {
    /// Per-channel scale, if affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift, if affine.
    pub bias: Option<Tensor>,
    /// Groups the channels are split into.
    pub num_groups: usize,
    /// Channels (dim 1).
    pub num_channels: usize,
    /// Added to the variance (PyTorch's default 1e-5).
    pub eps: f64,
}

impl GroupNorm {
    /// `nn.GroupNorm(num_groups, num_channels, eps, affine)`.
    pub fn new(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> GroupNorm {
        assert!(
            num_groups > 0 && num_channels.is_multiple_of(num_groups),
            "GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
        );
        let (weight, bias) = affine_params(num_channels, affine);
        GroupNorm {
            weight,
            bias,
            num_groups,
            num_channels,
            eps,
        }
    }
}

impl GroupNorm {
    /// `bias=` (keyword-only, PyTorch 2.x): with `affine`, whether there is
    /// a learnable bias besides the weight.
    ///
    /// ```
    /// use tapir_runtime::nn::{GroupNorm, Module};
    /// let gn = GroupNorm::new(2, 4, 1e-5, true).bias(false);
    /// assert_eq!(gn.repr(), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=False)");
    /// ```
    pub fn bias(mut self, on: bool) -> GroupNorm {
        let affine = self.weight.is_some();
        self.bias =
            (on && affine).then(|| Tensor::zeros(&[self.num_channels]).requires_grad_(true));
        self
    }
}

fn affine_params(c: usize, affine: bool) -> (Option<Tensor>, Option<Tensor>) {
    if !affine {
        return (None, None);
    }
    (
        Some(Tensor::ones(&[c]).requires_grad_(true)),
        Some(Tensor::zeros(&[c]).requires_grad_(true)),
    )
}

impl Forward for GroupNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        assert!(
            x.ndim() >= 2 && x.shape()[1] == self.num_channels,
            "GroupNorm({}, {}): expected input [N, {}, *], got shape {:?}",
            self.num_groups,
            self.num_channels,
            self.num_channels,
            x.shape()
        );
        group_norm(
            x,
            self.num_groups,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
}

impl Module for GroupNorm {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_affine(&self.weight, &self.bias, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_affine_mut(&mut self.weight, &mut self.bias, f);
    }
    fn repr(&self) -> String {
        format!(
            "GroupNorm({}, {}, eps={}, affine={}, bias={})",
            self.num_groups,
            self.num_channels,
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}

/// `nn.InstanceNorm1d` / `2d` / `3d`: every sample's channels
/// normalised over their own positions; weight ones and bias zeros of
/// shape `[num_features]` when `affine` (PyTorch's default is not affine).
/// By default (`track_running_stats=False`) train and eval mode alike use
/// the sample's statistics; with [`InstanceNorm::track_running_stats`],
/// training also moves running averages of them (by `momentum`, 0.1) that
/// eval mode normalises by. Takes batched (`[N, C, L]` / `[N, C, H, W]`) or
/// unbatched input.
///
/// ```
/// use tapir_runtime::{nn::{Forward, InstanceNorm}, Tensor};
/// let norm = InstanceNorm::new_2d(3, 1e-5, false);
/// let y = norm.forward(&Tensor::randn(&[2, 3, 4, 4]));
/// assert!(y.mean_dims(&[2, 3], false).abs().max().item::<f32>() < 1e-5);
/// ```
pub struct InstanceNorm {
    /// Per-channel scale, if affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift, if affine.
    pub bias: Option<Tensor>,
    /// Running mean of the samples' channel means, if tracked.
    pub running_mean: Option<Tensor>,
    /// Running mean of the samples' unbiased channel variances, if tracked.
    pub running_var: Option<Tensor>,
    /// Kept at 0 (PyTorch registers it and never counts), if tracked.
    pub num_batches_tracked: Option<Tensor>,
    /// Channels (dim 1 of a batched input).
    pub num_features: usize,
    /// Added to the variance (PyTorch's default 1e-5).
    pub eps: f64,
    /// Weight of the current batch in the running statistics (0.1); `None`
    /// is 0 here, as in PyTorch: the statistics stay where they are.
    pub momentum: Option<f64>,
    /// Spatial dims: 1, 2 or 3.
    dims: usize,
    training: TrainingFlag,
}

impl InstanceNorm {
    /// `nn.InstanceNorm1d(num_features, eps, affine=affine)`, for `[N, C, L]` or `[C, L]`.
    pub fn new_1d(num_features: usize, eps: f64, affine: bool) -> InstanceNorm {
        InstanceNorm::new(num_features, eps, affine, 1)
    }

    /// `nn.InstanceNorm2d(num_features, eps, affine=affine)`, for `[N, C, H, W]` or `[C, H, W]`.
    pub fn new_2d(num_features: usize, eps: f64, affine: bool) -> InstanceNorm {
        InstanceNorm::new(num_features, eps, affine, 2)
    }

    /// `nn.InstanceNorm3d(num_features, eps, affine=affine)`, for
    /// `[N, C, D, H, W]` or `[C, D, H, W]`.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Forward, InstanceNorm, Module}, Tensor};
    /// let norm = InstanceNorm::new_3d(2, 1e-5, true);
    /// assert_eq!(norm.forward(&Tensor::randn(&[2, 3, 4, 5])).shape(), &[2, 3, 4, 5]);
    /// assert!(norm.repr().starts_with("InstanceNorm3d(2, eps=1e-05"));
    /// ```
    pub fn new_3d(num_features: usize, eps: f64, affine: bool) -> InstanceNorm {
        InstanceNorm::new(num_features, eps, affine, 3)
    }

    fn new(num_features: usize, eps: f64, affine: bool, dims: usize) -> InstanceNorm {
        let (weight, bias) = affine_params(num_features, affine);
        InstanceNorm {
            weight,
            bias,
            running_mean: None,
            running_var: None,
            num_batches_tracked: None,
            num_features,
            eps,
            momentum: Some(0.1),
            dims,
            training: TrainingFlag::default(),
        }
    }

    /// `track_running_stats=`: running statistics, zeros and ones, moved in
    /// training and used in eval mode.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Forward, InstanceNorm, Module}, Tensor};
    /// let norm = InstanceNorm::new_1d(1, 0.0, false).track_running_stats(true);
    /// norm.forward(&Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[2, 1, 2]));
    /// // 0.9 * 0 + 0.1 * mean(2, 6); 0.9 * 1 + 0.1 * mean(2, 2).
    /// assert!((norm.running_mean.as_ref().unwrap().item::<f32>() - 0.4).abs() < 1e-6);
    /// assert!((norm.running_var.as_ref().unwrap().item::<f32>() - 1.1).abs() < 1e-6);
    /// ```
    pub fn track_running_stats(mut self, on: bool) -> InstanceNorm {
        [
            self.running_mean,
            self.running_var,
            self.num_batches_tracked,
        ] = new_running_stats(self.num_features, on);
        self
    }

    /// `momentum=`: a number, or `None` (which leaves the statistics alone).
    pub fn momentum(mut self, momentum: impl Into<Option<f64>>) -> InstanceNorm {
        self.momentum = momentum.into();
        self
    }

    fn name(&self) -> String {
        format!("InstanceNorm{}d", self.dims)
    }

    /// Moves the running statistics toward the mean over the batch of each
    /// sample's channel mean and unbiased variance (PyTorch's batch norm of
    /// the input viewed as `[1, N * C, *]`, averaged back over `N`).
    fn update_running_stats(&self, x: &Tensor) {
        let (Some(mean), Some(var)) = (&self.running_mean, &self.running_var) else {
            return;
        };
        let m = self.momentum.unwrap_or(0.0);
        crate::no_grad(|| {
            let positions: Vec<isize> = (2..x.ndim() as isize).collect();
            let x = as_dtype(x, mean.dtype());
            let sample_mean = x.mean_dims(&positions, false).mean_dim(0, false);
            let sample_var = x.var_dims(&positions, 1, false).mean_dim(0, false);
            mean.mul_scalar_(1.0 - m).add_scaled_(&sample_mean, m);
            var.mul_scalar_(1.0 - m).add_scaled_(&sample_var, m);
        });
    }
}

impl Forward for InstanceNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        let batched = x.ndim() == self.dims + 2;
        assert!(
            batched || x.ndim() == self.dims + 1,
            "{}: expected a {}-D or {}-D input, got shape {:?}",
            self.name(),
            self.dims + 1,
            self.dims + 2,
            x.shape()
        );
        let channels = x.shape()[x.ndim() - self.dims - 1];
        // As PyTorch: a channel count other than num_features is an error
        // only when there are per-channel parameters or statistics.
        assert!(
            (self.weight.is_none() && self.running_mean.is_none()) || channels == self.num_features,
            "{}({}): expected input with {} channels, got shape {:?}",
            self.name(),
            self.num_features,
            self.num_features,
            x.shape()
        );
        let x = if batched { x.clone() } else { x.unsqueeze(0) };
        let training = self.training.get();
        let (w, b) = (self.weight.as_ref(), self.bias.as_ref());
        let y = match (&self.running_mean, &self.running_var) {
            (Some(mean), Some(var)) if !training => {
                let mut shape = vec![1isize; x.ndim()];
                shape[1] = channels as isize;
                let stat = |t: &Tensor| as_dtype(t, x.dtype()).reshape(&shape);
                let y = &(&x - &stat(mean)) * &(&stat(var) + self.eps).rsqrt();
                let y = w.map_or(y.clone(), |w| &y * &as_dtype(w, x.dtype()).reshape(&shape));
                b.map_or(y.clone(), |b| &y + &as_dtype(b, x.dtype()).reshape(&shape))
            }
            _ => {
                let positions = x.numel() / (x.shape()[0] * channels).max(1);
                assert!(
                    positions > 1,
                    "{}({}): expected more than 1 spatial element when training, got input of shape {:?}",
                    self.name(),
                    self.num_features,
                    x.shape()
                );
                if training {
                    self.update_running_stats(&x);
                }
                instance_norm(&x, w, b, self.eps)
            }
        };
        if batched { y } else { y.squeeze_dim(0) }
    }
}

super::batch_norm::running_norm_module!(InstanceNorm);

crate::display_as_repr!(GroupNorm, InstanceNorm);
