//! Normalisation layers: LayerNorm, RMSNorm and LocalResponseNorm (batch
//! norm is in `batch_norm.rs`, group and instance norm in `group_norm.rs`).

use super::module::{Forward, Module, TensorKind, py_float};
use crate::{DType, Tensor};

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
        let w = self.weight.as_ref();
        rms_norm_named(x, &self.normalized_shape, w, self.eps, "RMSNorm")
    }
}

/// `F.rms_norm(x, normalized_shape, weight, eps)`: what [`RMSNorm`]
/// applies, `x / sqrt(mean(x²) + eps) * weight` over the trailing
/// `normalized_shape` dims; `eps` `None` is the dtype's machine epsilon,
/// as PyTorch's.
///
/// ```
/// use tapir_runtime::{nn::rms_norm, Tensor};
/// let x = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]);
/// let y = rms_norm(&x, &[2], None, Some(0.0));
/// let r = (12.5f32).sqrt();
/// assert_eq!(y.to_vec::<f32>(), vec![3.0 / r, 4.0 / r]);
/// ```
#[track_caller]
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Tensor {
    rms_norm_named(x, normalized_shape, weight, eps, "rms_norm")
}

#[track_caller]
fn rms_norm_named(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
    layer: &str,
) -> Tensor {
    let k = normalized_shape.len();
    assert!(
        x.ndim() >= k && x.shape()[x.ndim() - k..] == *normalized_shape,
        "{layer}: input of shape {:?} does not end with normalized shape {normalized_shape:?}",
        x.shape(),
    );
    let eps = eps.unwrap_or(match x.dtype() {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        _ => f32::EPSILON as f64,
    });
    let dims: Vec<isize> = (1..=k as isize).map(|d| -d).collect();
    let y = x * &(&(x * x).mean_dims(&dims, true) + eps).rsqrt();
    match weight {
        Some(w) => &y * w,
        None => y,
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

/// `F.local_response_norm(input, size, alpha, beta, k)`: each element of
/// `[N, C, *]` divided by (k + alpha · m)^beta, where m is the mean of the
/// squares over the `size` channels around it: the window zero-padded
/// (`size / 2` channels before, `(size - 1) / 2` after) and always divided
/// by `size`, as PyTorch's average pool over channels does.
///
/// ```
/// use tapir_runtime::{nn::local_response_norm, Tensor};
/// let x = Tensor::full(&[1, 1, 2], 2.0);
/// // One channel: (1 + 1e-4 * 4 / 3)^0.75 with size 3.
/// let y = local_response_norm(&x, 3, 1e-4, 0.75, 1.0);
/// assert!((y.to_vec::<f32>()[0] - 2.0 / (1.0f32 + 4e-4 / 3.0).powf(0.75)).abs() < 1e-6);
/// ```
#[track_caller]
pub fn local_response_norm(x: &Tensor, size: usize, alpha: f64, beta: f64, k: f64) -> Tensor {
    assert!(
        x.ndim() >= 3 && size > 0,
        "local_response_norm: expects [N, C, *] (3 or more dims) and a positive size, got {:?} and {size}",
        x.shape()
    );
    let c = x.size(1);
    let (before, after) = (size / 2, (size - 1) / 2);
    let zeros = |n: usize| {
        let mut shape = x.shape().to_vec();
        shape[1] = n;
        Tensor::zeros_on(&shape, x.dtype(), x.device())
    };
    let squares = x * x;
    let padded = Tensor::cat(&[&zeros(before), &squares, &zeros(after)], 1);
    let window = (1..size).fold(padded.narrow(1, 0, c), |sum, j| {
        &sum + &padded.narrow(1, j, c)
    });
    let div = (&(&window * (alpha / size as f64)) + k).powf(beta);
    x / &div
}

/// `nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)`: see
/// [`local_response_norm`].
///
/// ```
/// use tapir_runtime::{nn::{Forward, LocalResponseNorm}, Tensor};
/// let lrn = LocalResponseNorm::new(5);
/// assert_eq!(lrn.forward(&Tensor::randn(&[2, 8, 3, 3])).shape(), &[2, 8, 3, 3]);
/// assert_eq!(lrn.to_string(), "LocalResponseNorm(5, alpha=0.0001, beta=0.75, k=1.0)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalResponseNorm {
    /// Channels in each window.
    pub size: usize,
    /// Scale of the mean square.
    pub alpha: f64,
    /// Exponent of the divisor.
    pub beta: f64,
    /// Additive constant of the divisor.
    pub k: f64,
}

impl LocalResponseNorm {
    /// `nn.LocalResponseNorm(size)` with PyTorch's alpha, beta and k.
    pub fn new(size: usize) -> LocalResponseNorm {
        LocalResponseNorm {
            size,
            alpha: 1e-4,
            beta: 0.75,
            k: 1.0,
        }
    }
}

impl Forward for LocalResponseNorm {
    fn forward(&self, x: &Tensor) -> Tensor {
        local_response_norm(x, self.size, self.alpha, self.beta, self.k)
    }
}

impl Module for LocalResponseNorm {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!(
            "LocalResponseNorm({}, alpha={}, beta={}, k={})",
            self.size,
            py_float(self.alpha),
            py_float(self.beta),
            py_float(self.k)
        )
    }
}

crate::display_as_repr!(LayerNorm, RMSNorm, LocalResponseNorm);
