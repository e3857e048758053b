//! Normalisation layers: LayerNorm, RMSNorm, BatchNorm1d/2d.

use super::module::{Forward, Module, TensorKind, TrainingFlag, py_float};
use crate::trace::Attr;
use crate::{DType, Tensor, no_grad};

/// `nn.LayerNorm` over the trailing `normalized_shape` (weight ones, bias zeros).
///
/// ```
/// use tapir_runtime::{nn::{Forward, LayerNorm}, Tensor};
/// let ln = LayerNorm::new(&[4], 1e-5, true);
/// let y = ln.forward(&Tensor::randn(&[2, 4]));
/// assert!(y.mean_dim(-1, false).abs().max().item::<f32>() < 1e-6);
/// ```
pub struct LayerNorm {
    /// Elementwise scale, if affine.
    pub weight: Option<Tensor>,
    /// Elementwise shift, if affine.
    pub bias: Option<Tensor>,
    /// The trailing dims normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance (PyTorch's default 1e-5).
    pub eps: f64,
}

impl LayerNorm {
    /// `nn.LayerNorm(normalized_shape, eps, elementwise_affine)`.
    pub fn new(normalized_shape: &[usize], eps: f64, elementwise_affine: bool) -> LayerNorm {
        let (weight, bias) = if elementwise_affine {
            (
                Some(Tensor::ones(normalized_shape).requires_grad_(true)),
                Some(Tensor::zeros(normalized_shape).requires_grad_(true)),
            )
        } else {
            (None, None)
        };
        LayerNorm {
            weight,
            bias,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        }
    }

    /// `(s, self(s))` for `s = x + residual`, in one fused pass where it can
    /// be (see [`Tensor::add_layer_norm`]): a residual connection followed
    /// by this norm.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Forward, LayerNorm}, Tensor};
    /// let ln = LayerNorm::new(&[4], 1e-5, true);
    /// let (x, r) = (Tensor::randn(&[2, 4]), Tensor::randn(&[2, 4]));
    /// let (s, y) = ln.forward_add(&x, &r);
    /// assert!(y.allclose(&ln.forward(&(&x + &r)), 1e-6, 1e-6) && s.allclose(&(&x + &r), 0.0, 0.0));
    /// ```
    pub fn forward_add(&self, x: &Tensor, residual: &Tensor) -> (Tensor, Tensor) {
        x.add_layer_norm(
            residual,
            &self.normalized_shape,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.layer_norm(
            &self.normalized_shape,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
}

pub(super) fn visit_affine(
    w: &Option<Tensor>,
    b: &Option<Tensor>,
    f: &mut dyn FnMut(&str, &Tensor, TensorKind),
) {
    if let Some(w) = w {
        f("weight", w, TensorKind::Parameter);
    }
    if let Some(b) = b {
        f("bias", b, TensorKind::Parameter);
    }
}

pub(super) fn visit_affine_mut(
    w: &mut Option<Tensor>,
    b: &mut Option<Tensor>,
    f: &mut dyn FnMut(&str, &mut Tensor, TensorKind),
) {
    if let Some(w) = w {
        f("weight", w, TensorKind::Parameter);
    }
    if let Some(b) = b {
        f("bias", b, TensorKind::Parameter);
    }
}

fn shape_str(s: &[usize]) -> String {
    let inner: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    if s.len() == 1 {
        format!("({},)", inner[0])
    } else {
        format!("({})", inner.join(", "))
    }
}

impl Module for LayerNorm {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_affine(&self.weight, &self.bias, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_affine_mut(&mut self.weight, &mut self.bias, f);
    }
    fn repr(&self) -> String {
        let affine = if self.weight.is_some() {
            "True"
        } else {
            "False"
        };
        let bias = if self.bias.is_some() { "True" } else { "False" };
        format!(
            "LayerNorm({}, eps={}, elementwise_affine={affine}, bias={bias})",
            shape_str(&self.normalized_shape),
            py_float(self.eps)
        )
    }
}

/// `nn.RMSNorm`: `x / sqrt(mean(x²) + eps) * weight` over the trailing dims;
/// `eps = None` uses the dtype's machine epsilon, as PyTorch.
pub struct RMSNorm {
    /// Elementwise scale, if affine.
    pub weight: Option<Tensor>,
    /// The trailing dims normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the mean square (`None`: the dtype's machine epsilon, as PyTorch).
    pub eps: Option<f64>,
}

impl RMSNorm {
    /// `nn.RMSNorm(normalized_shape, eps, elementwise_affine)`.
    pub fn new(normalized_shape: &[usize], eps: Option<f64>, elementwise_affine: bool) -> RMSNorm {
        let weight =
            elementwise_affine.then(|| Tensor::ones(normalized_shape).requires_grad_(true));
        RMSNorm {
            weight,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        }
    }
}

impl Forward for RMSNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        let k = self.normalized_shape.len();
        assert!(
            x.ndim() >= k && x.shape()[x.ndim() - k..] == *self.normalized_shape,
            "RMSNorm: input of shape {:?} does not end with normalized shape {:?}",
            x.shape(),
            self.normalized_shape
        );
        let eps = self.eps.unwrap_or(match x.dtype() {
            DType::F64 => f64::EPSILON,
            DType::F16 => 0.000_976_562_5,
            DType::BF16 => 0.007_812_5,
            _ => f32::EPSILON as f64,
        });
        let dims: Vec<isize> = (1..=k as isize).map(|d| -d).collect();
        let y = x * &(&(x * x).mean_dims(&dims, true) + eps).rsqrt();
        match &self.weight {
            Some(w) => &y * w,
            None => y,
        }
    }
}

impl Module for RMSNorm {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_affine(&self.weight, &None, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_affine_mut(&mut self.weight, &mut None, f);
    }
    fn repr(&self) -> String {
        let eps = self.eps.map_or("None".to_string(), py_float);
        format!(
            "RMSNorm({}, eps={eps}, elementwise_affine={})",
            shape_str(&self.normalized_shape),
            if self.weight.is_some() {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// `nn.BatchNorm1d` / `nn.BatchNorm2d`: batch statistics in train mode (and
/// running averages updated with `momentum`), running statistics in eval mode.
pub struct BatchNorm {
    /// Per-channel scale.
    pub weight: Option<Tensor>,
    /// Per-channel shift.
    pub bias: Option<Tensor>,
    /// Running mean used in eval mode.
    pub running_mean: Tensor,
    /// Running (unbiased) variance used in eval mode.
    pub running_var: Tensor,
    /// Batches seen in training.
    pub num_batches_tracked: Tensor,
    /// Channels (dim 1).
    pub num_features: usize,
    /// Added to the variance (1e-5).
    pub eps: f64,
    /// Weight of the current batch in the running statistics (0.1).
    pub momentum: f64,
    dims: usize,
    training: TrainingFlag,
}

impl BatchNorm {
    fn new(num_features: usize, dims: usize) -> BatchNorm {
        BatchNorm {
            weight: Some(Tensor::ones(&[num_features]).requires_grad_(true)),
            bias: Some(Tensor::zeros(&[num_features]).requires_grad_(true)),
            running_mean: Tensor::zeros(&[num_features]),
            running_var: Tensor::ones(&[num_features]),
            num_batches_tracked: Tensor::scalar(0i64),
            num_features,
            eps: 1e-5,
            momentum: 0.1,
            dims,
            training: TrainingFlag::default(),
        }
    }

    /// For `[N, C]` or `[N, C, L]` inputs.
    pub fn new_1d(num_features: usize) -> BatchNorm {
        BatchNorm::new(num_features, 1)
    }

    /// For `[N, C, H, W]` inputs.
    pub fn new_2d(num_features: usize) -> BatchNorm {
        BatchNorm::new(num_features, 2)
    }
}

impl Forward for BatchNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        let name = if self.dims == 1 {
            "BatchNorm1d"
        } else {
            "BatchNorm2d"
        };
        let ok = if self.dims == 1 {
            x.ndim() == 2 || x.ndim() == 3
        } else {
            x.ndim() == 4
        };
        assert!(
            ok && x.shape()[1] == self.num_features,
            "{name}({}): unexpected input shape {:?}",
            self.num_features,
            x.shape()
        );
        // PyTorch's check: one value has no variance to normalise by (the
        // output would be all zeros and the running variance NaN).
        assert!(
            !self.training.get() || x.numel() / self.num_features.max(1) != 1,
            "{name}({}): expected more than 1 value per channel when training, got input of shape {:?}",
            self.num_features,
            x.shape()
        );
        batch_norm(
            x,
            BatchNormState {
                running_mean: &self.running_mean,
                running_var: &self.running_var,
                num_batches_tracked: &self.num_batches_tracked,
            },
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.training.get(),
            self.momentum,
            self.eps,
        )
    }
}

/// A batch norm's running statistics (updated in place in training).
pub(crate) struct BatchNormState<'a> {
    pub running_mean: &'a Tensor,
    pub running_var: &'a Tensor,
    pub num_batches_tracked: &'a Tensor,
}

/// `F.batch_norm` over dim 1 of `x`, updating `state` in training: what
/// [`BatchNorm`] applies, and what a compiled graph replays.
pub(crate) fn batch_norm(
    x: &Tensor,
    state: BatchNormState,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Tensor {
    let inputs = [
        Some(x),
        Some(state.running_mean),
        Some(state.running_var),
        weight,
        bias,
        Some(state.num_batches_tracked),
    ];
    let attrs = || {
        vec![
            ("eps", Attr::Float(eps)),
            ("training", Attr::Int(training as i64)),
            ("momentum", Attr::Float(momentum)),
        ]
    };
    crate::trace::op("batch_norm", inputs, attrs, || {
        let c = x.shape()[1];
        let mut bshape = vec![1isize; x.ndim()];
        bshape[1] = c as isize;
        let dims: Vec<isize> = (0..x.ndim() as isize).filter(|&d| d != 1).collect();
        let (mean, var) = if training {
            let n = (x.numel() / c) as f64;
            let mean = x.mean_dims(&dims, false);
            let var = x.var_dims(&dims, 0, false);
            no_grad(|| {
                let m = momentum;
                let unbiased = &var * (n / (n - 1.0).max(1.0));
                state
                    .running_mean
                    .mul_scalar_(1.0 - m)
                    .add_scaled_(&mean, m);
                state
                    .running_var
                    .mul_scalar_(1.0 - m)
                    .add_scaled_(&unbiased, m);
                state.num_batches_tracked.add_scalar_(1.0);
            });
            (mean, var)
        } else {
            (state.running_mean.clone(), state.running_var.clone())
        };
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

impl Module for BatchNorm {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_affine(&self.weight, &self.bias, f);
        f("running_mean", &self.running_mean, TensorKind::Buffer);
        f("running_var", &self.running_var, TensorKind::Buffer);
        f(
            "num_batches_tracked",
            &self.num_batches_tracked,
            TensorKind::Buffer,
        );
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_affine_mut(&mut self.weight, &mut self.bias, f);
        f("running_mean", &mut self.running_mean, TensorKind::Buffer);
        f("running_var", &mut self.running_var, TensorKind::Buffer);
        f(
            "num_batches_tracked",
            &mut self.num_batches_tracked,
            TensorKind::Buffer,
        );
    }
    fn repr(&self) -> String {
        let name = if self.dims == 1 {
            "BatchNorm1d"
        } else {
            "BatchNorm2d"
        };
        let flag = |t: &Option<Tensor>| if t.is_some() { "True" } else { "False" };
        format!(
            "{name}({}, eps={}, momentum={}, affine={}, bias={}, track_running_stats=True)",
            self.num_features,
            py_float(self.eps),
            py_float(self.momentum),
            flag(&self.weight),
            flag(&self.bias)
        )
    }
    fn set_training(&self, on: bool) {
        self.training.set(on);
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

crate::display_as_repr!(LayerNorm, RMSNorm, BatchNorm);
