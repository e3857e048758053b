//! `torch.nn`'s activation modules with parameters, each a call of the
//! tensor method of the same name (`runtime/src/ops/activation.rs`), with
//! PyTorch's field names, defaults and repr (the parameterless ones are
//! unit structs in `layers.rs`).
//!
//! ```
//! use tapir_runtime::nn::{ELU, Forward, Hardtanh, Module};
//! use tapir_runtime::Tensor;
//! let x = Tensor::from_vec(vec![-2.0f32, 0.5, 2.0], &[3]);
//! assert_eq!(Hardtanh::default().forward(&x).to_vec::<f32>(), vec![-1.0, 0.5, 1.0]);
//! assert_eq!(ELU::default().repr(), "ELU(alpha=1.0)");
//! ```

use super::module::{Forward, Module, TensorKind, TrainingFlag, py_float};
use crate::Tensor;

/// Declares an activation module: its fields with PyTorch's defaults, its
/// forward and its repr.
macro_rules! activation_module {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($field:ident: $ty:ty = $default:expr),* }
            => |$s:ident, $x:ident| $forward:expr, repr |$r:ident| $repr:expr;
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            $(#[doc = concat!("PyTorch's `", stringify!($field), "`.")] pub $field: $ty,)*
        }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default),* }
            }
        }
        impl Forward for $name {
            fn forward(&self, $x: &Tensor) -> Tensor {
                let $s = self;
                $forward
            }
        }
        impl Module for $name {
            fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
            fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
            fn repr(&self) -> String {
                let $r = self;
                $repr
            }
        }
        crate::display_as_repr!($name);
    )*};
}

activation_module! {
    /// `nn.ELU(alpha=1.0)`.
    ELU { alpha: f64 = 1.0 } => |s, x| x.elu(s.alpha), repr |s| format!("ELU(alpha={:?})", s.alpha);
    /// `nn.CELU(alpha=1.0)`.
    CELU { alpha: f64 = 1.0 } => |s, x| x.celu(s.alpha), repr |s| format!("CELU(alpha={:?})", s.alpha);
    /// `nn.Hardtanh(min_val=-1.0, max_val=1.0)`.
    Hardtanh { min_val: f64 = -1.0, max_val: f64 = 1.0 } => |s, x| x.hardtanh(s.min_val, s.max_val),
        repr |s| format!("Hardtanh(min_val={:?}, max_val={:?})", s.min_val, s.max_val);
    /// `nn.Hardshrink(lambd=0.5)`.
    Hardshrink { lambd: f64 = 0.5 } => |s, x| x.hardshrink(s.lambd), repr |s| format!("Hardshrink({:?})", s.lambd);
    /// `nn.Softshrink(lambd=0.5)`.
    Softshrink { lambd: f64 = 0.5 } => |s, x| x.softshrink(s.lambd), repr |s| format!("Softshrink({:?})", s.lambd);
    /// `nn.Threshold(threshold, value)` (PyTorch has no defaults; these are 0 and 0).
    Threshold { threshold: f64 = 0.0, value: f64 = 0.0 } => |s, x| x.threshold(s.threshold, s.value),
        repr |s| format!("Threshold(threshold={:?}, value={:?})", s.threshold, s.value);
    /// `nn.GLU(dim=-1)`.
    GLU { dim: isize = -1 } => |s, x| x.glu(s.dim), repr |s| format!("GLU(dim={})", s.dim);
    /// `nn.LogSoftmax(dim)` (PyTorch infers a dim when none is given and
    /// warns; here it is the last).
    LogSoftmax { dim: isize = -1 } => |s, x| x.log_softmax(s.dim), repr |s| format!("LogSoftmax(dim={})", s.dim);
    /// `nn.Softmin(dim)`: `softmax(-x)`.
    Softmin { dim: isize = -1 } => |s, x| x.neg().softmax(s.dim), repr |s| format!("Softmin(dim={})", s.dim);
}

/// `nn.Softmax2d`: softmax over the channels of `[N, C, H, W]` or `[C, H, W]`.
///
/// ```
/// use tapir_runtime::{nn::{Forward, Softmax2d}, Tensor};
/// let y = Softmax2d.forward(&Tensor::randn(&[2, 3, 4, 4]));
/// assert!((y.sum_dim(1, false).mean().item::<f32>() - 1.0).abs() < 1e-6);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Softmax2d;

impl Forward for Softmax2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        assert!(
            x.ndim() == 3 || x.ndim() == 4,
            "Softmax2d: expected a 3-D or 4-D input, got shape {:?}",
            x.shape()
        );
        x.softmax(-3)
    }
}

impl Module for Softmax2d {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        "Softmax2d()".into()
    }
}

/// `nn.PReLU(num_parameters=1, init=0.25)`: `x` where positive, `weight * x`
/// elsewhere, with one learnt slope or one per channel (dim 1; dim 0 of a
/// 1-D input).
///
/// ```
/// use tapir_runtime::{nn::{Forward, PReLU}, Tensor};
/// let act = PReLU::new(1, 0.25);
/// let y = act.forward(&Tensor::from_vec(vec![-2.0f32, 3.0], &[2]));
/// assert_eq!(y.to_vec::<f32>(), vec![-0.5, 3.0]);
/// ```
pub struct PReLU {
    /// The slopes, `[num_parameters]`.
    pub weight: Tensor,
}

impl PReLU {
    /// `nn.PReLU(num_parameters, init)`.
    pub fn new(num_parameters: usize, init: f64) -> PReLU {
        assert!(num_parameters > 0, "PReLU: num_parameters must be positive");
        PReLU {
            weight: Tensor::full(&[num_parameters], init).requires_grad_(true),
        }
    }
}

impl Forward for PReLU {
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = format!("PReLU(num_parameters={})", self.weight.numel());
        prelu_named(x, &self.weight, &layer)
    }
}

/// `F.prelu(x, weight)`: `x` where positive, `weight * x` elsewhere, with
/// one weight for all, or one per channel (dim 1; dim 0 of a vector), as
/// [`PReLU`] applies.
///
/// ```
/// use tapir_runtime::{nn::prelu, Tensor};
/// let x = Tensor::from_vec(vec![-2.0f32, 3.0], &[1, 2]);
/// let w = Tensor::from_vec(vec![0.5f32, 0.1], &[2]);
/// assert_eq!(prelu(&x, &w).to_vec::<f32>(), vec![-1.0, 3.0]);
/// ```
#[track_caller]
pub fn prelu(x: &Tensor, weight: &Tensor) -> Tensor {
    prelu_named(x, weight, "prelu")
}

/// `F.softmin(x, dim)`: `softmax(-x)` along `dim`, as [`Softmin`].
///
/// ```
/// use tapir_runtime::{nn::softmin, Tensor};
/// let p = softmin(&Tensor::from_vec(vec![0.0f32, 0.0], &[2]), -1);
/// assert_eq!(p.to_vec::<f32>(), vec![0.5, 0.5]);
/// ```
pub fn softmin(x: &Tensor, dim: isize) -> Tensor {
    x.neg().softmax(dim)
}

#[track_caller]
fn prelu_named(x: &Tensor, weight: &Tensor, layer: &str) -> Tensor {
    let c = weight.numel();
    let w = if c == 1 {
        weight.reshape(&[])
    } else {
        let dim = if x.ndim() >= 2 { 1 } else { 0 };
        assert!(
            x.ndim() >= 1 && x.shape()[dim] == c,
            "{layer}: expected {c} channels in dim {dim}, got input of shape {:?}",
            x.shape()
        );
        let mut shape = vec![1isize; x.ndim()];
        shape[dim] = c as isize;
        weight.reshape(&shape)
    };
    let w = w.to_dtype(x.dtype());
    Tensor::where_(&x.gt_scalar(0.0), x, &(x * &w))
}

impl Module for PReLU {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("weight", &self.weight, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("weight", &mut self.weight, TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        format!("PReLU(num_parameters={})", self.weight.numel())
    }
}

/// `F.rrelu(input, lower, upper, training)`: `x` where positive, `a * x`
/// elsewhere, with `a` drawn from U(lower, upper) per element in training
/// and `(lower + upper) / 2` in evaluation (the randomized leaky ReLU).
///
/// ```
/// use tapir_runtime::{nn::rrelu, Tensor};
/// let x = Tensor::from_vec(vec![-4.0f32, 2.0], &[2]);
/// assert_eq!(rrelu(&x, 0.25, 0.75, false).to_vec::<f32>(), [-2.0, 2.0]);
/// let y = rrelu(&x, 0.25, 0.75, true).to_vec::<f32>();
/// assert!((-3.0..=-1.0).contains(&y[0]) && y[1] == 2.0);
/// ```
#[track_caller]
pub fn rrelu(x: &Tensor, lower: f64, upper: f64, training: bool) -> Tensor {
    assert!(
        lower <= upper,
        "rrelu: lower ({lower}) must not exceed upper ({upper})"
    );
    if !training {
        return x.leaky_relu((lower + upper) / 2.0);
    }
    let slopes = &(&Tensor::rand_like(x) * (upper - lower)) + lower;
    Tensor::where_(&x.ge_scalar(0.0), x, &(x * &slopes))
}

/// `nn.RReLU(lower=1/8, upper=1/3)`: see [`rrelu`]; random slopes in train
/// mode, their mean in eval mode.
///
/// ```
/// use tapir_runtime::nn::{Module, RReLU};
/// assert_eq!(RReLU::default().repr(), "RReLU(lower=0.125, upper=0.3333333333333333)");
/// ```
#[derive(Debug)]
pub struct RReLU {
    /// Smallest slope.
    pub lower: f64,
    /// Largest slope.
    pub upper: f64,
    training: TrainingFlag,
}

impl RReLU {
    /// `nn.RReLU(lower, upper)`.
    pub fn new(lower: f64, upper: f64) -> RReLU {
        RReLU {
            lower,
            upper,
            training: TrainingFlag::default(),
        }
    }
}

impl Default for RReLU {
    fn default() -> Self {
        RReLU::new(1.0 / 8.0, 1.0 / 3.0)
    }
}

impl Forward for RReLU {
    fn forward(&self, x: &Tensor) -> Tensor {
        rrelu(x, self.lower, self.upper, self.training.get())
    }
}

impl Module for RReLU {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!(
            "RReLU(lower={}, upper={})",
            py_float(self.lower),
            py_float(self.upper)
        )
    }
    fn set_training(&self, on: bool) {
        self.training.set(on)
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

crate::display_as_repr!(Softmax2d, PReLU, RReLU);
