//! Stateless layers: activations, Dropout, Flatten (pooling is `pool.rs`).

use super::module::{Forward, Module, TensorKind, TrainingFlag, py_float, stateless_module};
use crate::Tensor;

/// Declares a parameterless module whose forward is one tensor method.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $repr:literal, |$x:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $name;
        impl Forward for $name {
            fn forward(&self, $x: &Tensor) -> Tensor {
                $body
            }
        }
        impl Module for $name {
            fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
            fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
            fn repr(&self) -> String {
                $repr.to_string()
            }
        }
        crate::display_as_repr!($name);
    };
}

activation!(/// `nn.ReLU`.
    ReLU, "ReLU()", |x| x.relu());
activation!(/// `nn.SiLU` (swish).
    SiLU, "SiLU()", |x| x.silu());
activation!(/// `nn.Tanh`.
    Tanh, "Tanh()", |x| x.tanh());
activation!(/// `nn.Sigmoid`.
    Sigmoid, "Sigmoid()", |x| x.sigmoid());
activation!(/// `nn.Hardswish`: `x * relu6(x + 3) / 6`.
    Hardswish, "Hardswish()", |x| x.hardswish());
activation!(/// `nn.SELU`.
    SELU, "SELU()", |x| x.selu());
activation!(/// `nn.Mish`: `x * tanh(softplus(x))`.
    Mish, "Mish()", |x| x.mish());
activation!(/// `nn.ReLU6`: `min(max(0, x), 6)`.
    ReLU6, "ReLU6()", |x| x.relu6());
activation!(/// `nn.Hardsigmoid`: `relu6(x + 3) / 6`.
    Hardsigmoid, "Hardsigmoid()", |x| x.hardsigmoid());
activation!(/// `nn.LogSigmoid`.
    LogSigmoid, "LogSigmoid()", |x| x.logsigmoid());
activation!(/// `nn.Softsign`: `x / (1 + |x|)`.
    Softsign, "Softsign()", |x| x.softsign());
activation!(/// `nn.Softplus` (beta 1, threshold 20).
    Softplus, "Softplus(beta=1.0, threshold=20.0)", |x| x.softplus());
activation!(/// `nn.Tanhshrink`: `x - tanh(x)`.
    Tanhshrink, "Tanhshrink()", |x| x.tanhshrink());

/// `nn.GELU`; `tanh: true` is `approximate='tanh'`.
#[derive(Debug, Default, Clone, Copy)]
pub struct GELU {
    /// Use the tanh approximation (`approximate='tanh'`).
    pub tanh: bool,
}

impl Forward for GELU {
    fn forward(&self, x: &Tensor) -> Tensor {
        if self.tanh { x.gelu_tanh() } else { x.gelu() }
    }
}

/// `nn.LeakyReLU(negative_slope)`.
#[derive(Debug, Clone, Copy)]
pub struct LeakyReLU {
    /// Slope for negative inputs (PyTorch's default 0.01).
    pub negative_slope: f64,
}

impl Forward for LeakyReLU {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.leaky_relu(self.negative_slope)
    }
}

/// `nn.Softmax(dim)`.
#[derive(Debug, Clone, Copy)]
pub struct Softmax {
    /// The dim softmax normalises over.
    pub dim: isize,
}

impl Forward for Softmax {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.softmax(self.dim)
    }
}

/// `nn.Identity`: returns its input (a stand-in where a layer is optional).
///
/// ```
/// use tapir_runtime::{nn::{Forward, Identity}, Tensor};
/// let x = Tensor::ones(&[2, 3]);
/// assert_eq!(Identity.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl Forward for Identity {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.clone()
    }
}

/// `nn.Unflatten(dim, unflattened_size)`: dim `dim` split into
/// `unflattened_size` (one entry may be -1).
///
/// ```
/// use tapir_runtime::{nn::{Forward, Module, Unflatten}, Tensor};
/// let u = Unflatten { dim: 1, unflattened_size: vec![2, 5] };
/// assert_eq!(u.forward(&Tensor::zeros(&[3, 10])).shape(), &[3, 2, 5]);
/// assert_eq!(u.repr(), "Unflatten(dim=1, unflattened_size=(2, 5))");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unflatten {
    /// The dim to split.
    pub dim: isize,
    /// The sizes it is split into.
    pub unflattened_size: Vec<isize>,
}

impl Forward for Unflatten {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.unflatten(self.dim, &self.unflattened_size)
    }
}

/// `nn.Flatten(start_dim=1, end_dim=-1)`.
#[derive(Debug, Clone, Copy)]
pub struct Flatten {
    /// First dim flattened (PyTorch's default 1).
    pub start_dim: isize,
    /// Last dim flattened (PyTorch's default -1).
    pub end_dim: isize,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten {
            start_dim: 1,
            end_dim: -1,
        }
    }
}

impl Forward for Flatten {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.flatten(self.start_dim, self.end_dim)
    }
}

/// `nn.Dropout(p)`: zeroes elements with probability `p` and scales the rest
/// by `1 / (1 - p)` in train mode; the identity in eval mode.
#[derive(Debug)]
pub struct Dropout {
    /// Probability of zeroing an element in training.
    pub p: f64,
    training: TrainingFlag,
}

impl Dropout {
    /// `nn.Dropout(p)`.
    pub fn new(p: f64) -> Dropout {
        check_probability(p, "Dropout");
        Dropout {
            p,
            training: TrainingFlag::default(),
        }
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Tensor) -> Tensor {
        dropout(x, self.p, self.training.get())
    }
}

/// `F.dropout(x, p, training)`: what [`Dropout`] applies, for modules
/// that drop inside their forward (attention weights, recurrent and
/// transformer layers, hand-written blocks): in training, each element
/// zeroed with probability `p` and the rest scaled by `1 / (1 - p)`; the
/// identity otherwise. PyTorch's `training` defaults to true; pass the
/// module's [`Module::is_training`](super::Module::is_training).
///
/// ```
/// use tapir_runtime::{nn::dropout, Tensor};
/// let x = Tensor::ones(&[1000]);
/// assert_eq!(dropout(&x, 0.5, false).to_vec::<f32>(), x.to_vec::<f32>());
/// let y = dropout(&x, 0.5, true).to_vec::<f32>();
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// ```
#[track_caller]
pub fn dropout(x: &Tensor, p: f64, training: bool) -> Tensor {
    check_probability(p, "dropout");
    let attrs = || {
        vec![
            ("p", crate::trace::Attr::Float(p)),
            ("training", crate::trace::Attr::Int(training as i64)),
        ]
    };
    crate::trace::op("dropout", [x], attrs, || dropout_untraced(x, p, training))
}

fn dropout_untraced(x: &Tensor, p: f64, training: bool) -> Tensor {
    if !training || p == 0.0 {
        return x.clone();
    }
    if p == 1.0 {
        return x * 0.0;
    }
    // On the CPU the scaled mask comes from one parallel Philox pass (a
    // serial generator call per element was the cost of dropout there).
    if x.dtype().is_float()
        && let Some(m) = crate::storage::Storage::dropout_mask(x.device(), x.numel(), 1.0 - p)
    {
        let mask = Tensor::from_storage(m, x.shape()).to_dtype(x.dtype());
        return x * &mask;
    }
    let keep = Tensor::full_like(x, 1.0 - p).bernoulli();
    &(x * &keep) * (1.0 / (1.0 - p))
}

macro_rules! channel_dropout {
    ($($(#[$doc:meta])* $name:ident, $spatial:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            /// Probability of zeroing a channel in training.
            pub p: f64,
            training: TrainingFlag,
        }

        impl $name {
            #[doc = concat!("`nn.", stringify!($name), "(p)`.")]
            pub fn new(p: f64) -> $name {
                check_probability(p, stringify!($name));
                $name { p, training: TrainingFlag::default() }
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Tensor {
                let training = self.training.get();
                channel_dropout(x, self.p, training, $spatial, stringify!($name))
            }
        }

        impl Module for $name {
            fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
            fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
            fn repr(&self) -> String {
                format!("{}(p={}, inplace=False)", stringify!($name), py_float(self.p))
            }
            fn set_training(&self, on: bool) {
                self.training.set(on);
            }
            fn is_training(&self) -> bool {
                self.training.get()
            }
        }
        crate::display_as_repr!($name);
    )*};
}

channel_dropout! {
    /// `nn.Dropout1d(p)`: in training, zeroes whole channels of `[N, C, L]`
    /// (or `[C, L]`) with probability `p` and scales the rest by
    /// `1 / (1 - p)`; the identity in eval mode.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Dropout1d, Forward}, Tensor};
    /// let y = Dropout1d::new(0.5).forward(&Tensor::ones(&[8, 4, 16]));
    /// // Each channel is all zeros or all twos.
    /// let (lo, hi) = (y.neg().amax_dim(2, false).neg(), y.amax_dim(2, false));
    /// assert_eq!(lo.to_vec::<f32>(), hi.to_vec::<f32>());
    /// ```
    Dropout1d, 1;
    /// `nn.Dropout2d(p)`: in training, zeroes whole channels of
    /// `[N, C, H, W]` with probability `p` and scales the rest by
    /// `1 / (1 - p)`; the identity in eval mode.
    Dropout2d, 2;
}

/// `F.dropout1d(x, p, training)`: whole channels of `[N, C, L]` (or
/// `[C, L]`) zeroed, as [`Dropout1d`].
///
/// ```
/// use tapir_runtime::{nn::dropout1d, Tensor};
/// let y = dropout1d(&Tensor::ones(&[2, 3, 5]), 0.5, true);
/// let per_channel = y.amax_dim(2, false).to_vec::<f32>();
/// assert!(per_channel.iter().all(|&v| v == 0.0 || v == 2.0));
/// ```
#[track_caller]
pub fn dropout1d(x: &Tensor, p: f64, training: bool) -> Tensor {
    checked_channel_dropout(x, p, training, 1, "dropout1d")
}

/// `F.dropout2d(x, p, training)`: whole channels of `[N, C, H, W]`
/// zeroed, as [`Dropout2d`].
#[track_caller]
pub fn dropout2d(x: &Tensor, p: f64, training: bool) -> Tensor {
    checked_channel_dropout(x, p, training, 2, "dropout2d")
}

#[track_caller]
fn checked_channel_dropout(x: &Tensor, p: f64, training: bool, spatial: usize, op: &str) -> Tensor {
    check_probability(p, op);
    channel_dropout(x, p, training, spatial, op)
}

/// Panics, naming `op`, unless `p` is a probability (PyTorch's message).
#[track_caller]
fn check_probability(p: f64, op: &str) {
    assert!(
        (0.0..=1.0).contains(&p),
        "{op}: probability has to be between 0 and 1, but got {p}"
    );
}

/// Dropout of whole channels: one draw per `(sample, channel)` of an input
/// with `spatial` trailing dims (PyTorch's feature dropout).
fn channel_dropout(x: &Tensor, p: f64, training: bool, spatial: usize, layer: &str) -> Tensor {
    let ok = match spatial {
        1 => x.ndim() == 2 || x.ndim() == 3,
        _ => x.ndim() == spatial + 2,
    };
    assert!(
        ok,
        "{layer}: expected a {} input, got shape {:?}",
        if spatial == 1 {
            "2-D or 3-D"
        } else {
            "4-D [N, C, H, W]"
        },
        x.shape()
    );
    if !training || p == 0.0 {
        return x.clone();
    }
    if p == 1.0 {
        return x * 0.0;
    }
    let mut mask_shape = x.shape().to_vec();
    let n = mask_shape.len();
    mask_shape[n - spatial..].fill(1);
    let keep = Tensor::full_on(&mask_shape, 1.0 - p, x.dtype(), x.device()).bernoulli();
    &(x * &keep) * (1.0 / (1.0 - p))
}

/// `nn.AlphaDropout(p)`: dropout that keeps SELU's zero mean and unit
/// variance in training (dropped values go to SELU's negative saturation,
/// then an affine correction); the identity in eval mode.
///
/// ```
/// use tapir_runtime::{nn::{AlphaDropout, Forward}, Tensor};
/// let y = AlphaDropout::new(0.2).forward(&Tensor::randn(&[200_000]));
/// assert!(y.mean().item::<f32>().abs() < 0.02);
/// assert!((y.var().item::<f32>() - 1.0).abs() < 0.02);
/// ```
#[derive(Debug)]
pub struct AlphaDropout {
    /// Probability of dropping an element in training.
    pub p: f64,
    training: TrainingFlag,
}

impl AlphaDropout {
    /// `nn.AlphaDropout(p)`.
    pub fn new(p: f64) -> AlphaDropout {
        check_probability(p, "AlphaDropout");
        AlphaDropout {
            p,
            training: TrainingFlag::default(),
        }
    }
}

impl Forward for AlphaDropout {
    fn forward(&self, x: &Tensor) -> Tensor {
        let p = self.p;
        if !self.training.get() || p == 0.0 {
            return x.clone();
        }
        if p == 1.0 {
            return x * 0.0;
        }
        // PyTorch's alpha_dropout: -SELU's saturation, and the a, b that
        // restore mean 0 and variance 1.
        let alpha = 1.758_099_340_847_376_6;
        let a = 1.0 / ((alpha * alpha * p + 1.0) * (1.0 - p)).sqrt();
        let keep = Tensor::full_like(x, 1.0 - p).bernoulli();
        let b = &(&keep - 1.0) * (alpha * a) + alpha * a * p;
        &(x * &(&keep * a)) + &b
    }
}

impl Module for AlphaDropout {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!("AlphaDropout(p={}, inplace=False)", py_float(self.p))
    }
    fn set_training(&self, on: bool) {
        self.training.set(on);
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

crate::display_as_repr!(AlphaDropout);

stateless_module! {
    Identity => |_s| "Identity()".into();
    Unflatten => |s| {
        let sizes: Vec<String> = s.unflattened_size.iter().map(|d| d.to_string()).collect();
        let tuple = match sizes.len() {
            1 => format!("({},)", sizes[0]),
            _ => format!("({})", sizes.join(", ")),
        };
        format!("Unflatten(dim={}, unflattened_size={tuple})", s.dim)
    };
    GELU => |s| if s.tanh { "GELU(approximate='tanh')".into() } else { "GELU(approximate='none')".into() };
    LeakyReLU => |s| format!("LeakyReLU(negative_slope={})", s.negative_slope);
    Softmax => |s| format!("Softmax(dim={})", s.dim);
    Flatten => |s| format!("Flatten(start_dim={}, end_dim={})", s.start_dim, s.end_dim);
}

impl Module for Dropout {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!("Dropout(p={}, inplace=False)", py_float(self.p))
    }
    fn set_training(&self, on: bool) {
        self.training.set(on);
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}
