//! Elementwise unary ops and activations: forward kernels and backward
//! formulas side by side. Composites (silu, gelu-tanh, softplus) get their
//! gradient from the primitives they are built of.

use crate::Tensor;
use crate::storage::UnaryFn;
use tapir_kernels::Float;

/// Declares a parameterless scalar function generic over the float type.
macro_rules! scalar_fn {
    ($name:ident, $cuda:literal, |$x:ident| $body:expr) => {
        pub(crate) struct $name;
        impl UnaryFn for $name {
            #[inline]
            fn f<T: Float>(&self, $x: T) -> T {
                $body
            }
            fn cuda(&self) -> Option<(&'static str, f32, f32)> {
                Some(($cuda, 0.0, 0.0))
            }
        }
    };
    ($name:ident, $cuda:literal, |$x:ident| $body:expr, int |$xi:ident| $ibody:expr) => {
        pub(crate) struct $name;
        impl UnaryFn for $name {
            const INT: bool = true;
            #[inline]
            fn f<T: Float>(&self, $x: T) -> T {
                $body
            }
            #[inline]
            fn i(&self, $xi: i64) -> i64 {
                $ibody
            }
            fn cuda(&self) -> Option<(&'static str, f32, f32)> {
                Some(($cuda, 0.0, 0.0))
            }
        }
    };
}

fn c<T: Float>(v: f64) -> T {
    T::from_f64(v)
}

scalar_fn!(Neg, "neg", |x| -x, int | x | x.wrapping_neg());
scalar_fn!(Abs, "abs", |x| x.abs(), int | x | x.wrapping_abs());
scalar_fn!(
    Sign,
    "sign",
    |x| if x > T::zero() {
        T::one()
    } else if x < T::zero() {
        -T::one()
    } else {
        x
    },
    int | x | x.signum()
);
scalar_fn!(Exp, "exp", |x| x.exp());
scalar_fn!(Log, "log", |x| x.ln());
scalar_fn!(Log1p, "log1p", |x| x.ln_1p());
scalar_fn!(Sqrt, "sqrt", |x| x.sqrt());
scalar_fn!(Rsqrt, "rsqrt", |x| x.sqrt().recip());
scalar_fn!(Sin, "sin", |x| x.sin());
scalar_fn!(Cos, "cos", |x| x.cos());
scalar_fn!(Tanh, "tanh", |x| x.tanh());
scalar_fn!(Erf, "erf", |x| x.erf());
scalar_fn!(Sigmoid, "sigmoid", |x| T::one() / (T::one() + (-x).exp()));
scalar_fn!(
    Relu,
    "relu",
    |x| if x > T::zero() || x.is_nan() {
        x
    } else {
        T::zero()
    },
    int | x | x.max(0)
);
// 1 where x > 0 else 0: the derivative of relu.
scalar_fn!(Step, "step", |x| if x > T::zero() {
    T::one()
} else {
    T::zero()
});
// The exact GELU, `x * Φ(x)`.
scalar_fn!(Gelu, "gelu", |x| c::<T>(0.5)
    * x
    * (T::one() + (x * c::<T>(std::f64::consts::FRAC_1_SQRT_2)).erf()));
// d/dx of exact GELU: `Φ(x) + x φ(x)`.
scalar_fn!(GeluGrad, "gelu_grad", |x| {
    let cdf = c::<T>(0.5) * (T::one() + (x * c::<T>(std::f64::consts::FRAC_1_SQRT_2)).erf());
    let pdf = (c::<T>(-0.5) * x * x).exp() * c::<T>(0.398_942_280_401_432_7);
    cdf + x * pdf
});

pub(crate) struct PowScalar(pub f64);
impl UnaryFn for PowScalar {
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        Some(("pow_scalar", self.0 as f32, 0.0))
    }
    fn f<T: Float>(&self, x: T) -> T {
        let e = self.0;
        if e == 2.0 {
            x * x
        } else if e == 1.0 {
            x
        } else if e == 0.5 {
            x.sqrt()
        } else if e.fract() == 0.0 && e.abs() < 64.0 {
            x.powi(e as i32)
        } else {
            x.powf(c(e))
        }
    }
}

pub(crate) struct LeakyRelu(pub f64);
impl UnaryFn for LeakyRelu {
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        Some(("leaky_relu", self.0 as f32, 0.0))
    }
    fn f<T: Float>(&self, x: T) -> T {
        if x > T::zero() { x } else { x * c(self.0) }
    }
}

pub(crate) struct LeakyStep(pub f64);
impl UnaryFn for LeakyStep {
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        Some(("leaky_step", self.0 as f32, 0.0))
    }
    fn f<T: Float>(&self, x: T) -> T {
        if x > T::zero() { T::one() } else { c(self.0) }
    }
}

pub(crate) struct Clamp(pub f64, pub f64);
impl UnaryFn for Clamp {
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        Some(("clamp", self.0 as f32, self.1 as f32))
    }
    const INT: bool = true;
    fn f<T: Float>(&self, x: T) -> T {
        if x.is_nan() {
            return x;
        }
        x.max(c(self.0)).min(c(self.1))
    }
    fn i(&self, x: i64) -> i64 {
        let lo = if self.0.is_finite() {
            self.0.ceil() as i64
        } else {
            i64::MIN
        };
        let hi = if self.1.is_finite() {
            self.1.floor() as i64
        } else {
            i64::MAX
        };
        x.max(lo).min(hi)
    }
}

/// 1 inside `[lo, hi]` else 0: the derivative of clamp.
pub(crate) struct ClampMask(pub f64, pub f64);
impl UnaryFn for ClampMask {
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        Some(("clamp_mask", self.0 as f32, self.1 as f32))
    }
    fn f<T: Float>(&self, x: T) -> T {
        if x >= c(self.0) && x <= c(self.1) {
            T::one()
        } else {
            T::zero()
        }
    }
}

/// What a unary backward needs kept from forward.
#[derive(Clone, Copy)]
pub(crate) enum Save {
    Input,
    Output,
    Nothing,
}

/// Applies `op` elementwise (no recording).
pub(crate) fn map<F: UnaryFn>(x: &Tensor, op: &F) -> Tensor {
    let storage = x.read().unary(x.layout(), op);
    Tensor::from_storage(storage, x.shape())
}

/// A recorded unary op: `bw(saved, g)` is the input gradient, where `saved`
/// is the input or the output as `save` says.
pub(crate) fn unary<F: UnaryFn>(
    x: &Tensor,
    op: F,
    name: &'static str,
    save: Save,
    bw: impl Fn(&Tensor, &Tensor) -> Tensor + Send + 'static,
) -> Tensor {
    let out = map(x, &op);
    let saved = match save {
        Save::Input => Some(x),
        Save::Output => Some(&out),
        Save::Nothing => None,
    }
    .map(|t| t.detach());
    let shape_src = x.detach();
    Tensor::record(out, name, &[x], move || {
        move |g: &Tensor, _: &[bool]| vec![Some(bw(saved.as_ref().unwrap_or(&shape_src), g))]
    })
}

impl Tensor {
    pub fn neg(&self) -> Tensor {
        unary(self, Neg, "NegBackward0", Save::Nothing, |_, g| g.neg())
    }

    /// `e^x`. Its derivative is itself.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f32], &[1]).exp();
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0]);
    /// ```
    pub fn exp(&self) -> Tensor {
        unary(self, Exp, "ExpBackward0", Save::Output, |y, g| g * y)
    }

    pub fn log(&self) -> Tensor {
        unary(self, Log, "LogBackward0", Save::Input, |x, g| g / x)
    }

    pub fn log1p(&self) -> Tensor {
        unary(self, Log1p, "Log1PBackward0", Save::Input, |x, g| {
            g / &(x + 1.0)
        })
    }

    pub fn sqrt(&self) -> Tensor {
        unary(self, Sqrt, "SqrtBackward0", Save::Output, |y, g| {
            g / &(y * 2.0)
        })
    }

    pub fn rsqrt(&self) -> Tensor {
        unary(self, Rsqrt, "RsqrtBackward0", Save::Output, |y, g| {
            &(g * &y.powf(3.0)) * -0.5
        })
    }

    pub fn abs(&self) -> Tensor {
        unary(self, Abs, "AbsBackward0", Save::Input, |x, g| {
            g * &map(x, &Sign)
        })
    }

    /// -1, 0 or 1 (gradient zero everywhere).
    pub fn sign(&self) -> Tensor {
        unary(self, Sign, "SignBackward0", Save::Nothing, |_, g| {
            Tensor::zeros_like(g)
        })
    }

    pub fn sin(&self) -> Tensor {
        unary(self, Sin, "SinBackward0", Save::Input, |x, g| {
            g * &map(x, &Cos)
        })
    }

    pub fn cos(&self) -> Tensor {
        unary(self, Cos, "CosBackward0", Save::Input, |x, g| {
            &(g * &map(x, &Sin)) * -1.0
        })
    }

    pub fn tanh(&self) -> Tensor {
        unary(self, Tanh, "TanhBackward0", Save::Output, |y, g| {
            g * &(&(y * y) * -1.0 + 1.0)
        })
    }

    pub fn sigmoid(&self) -> Tensor {
        unary(self, Sigmoid, "SigmoidBackward0", Save::Output, |y, g| {
            g * &(y * &(&(y * -1.0) + 1.0))
        })
    }

    pub fn erf(&self) -> Tensor {
        unary(self, Erf, "ErfBackward0", Save::Input, |x, g| {
            g * &(&(&(x * x) * -1.0).exp() * std::f64::consts::FRAC_2_SQRT_PI)
        })
    }

    pub fn relu(&self) -> Tensor {
        unary(self, Relu, "ReluBackward0", Save::Output, |y, g| {
            g * &map(y, &Step)
        })
    }

    /// `x` for positive inputs, `slope * x` otherwise (PyTorch's default slope is 0.01).
    pub fn leaky_relu(&self, slope: f64) -> Tensor {
        unary(
            self,
            LeakyRelu(slope),
            "LeakyReluBackward0",
            Save::Input,
            move |x, g| g * &map(x, &LeakyStep(slope)),
        )
    }

    /// Exact GELU, `x * Φ(x)` (PyTorch's `approximate='none'`).
    pub fn gelu(&self) -> Tensor {
        unary(self, Gelu, "GeluBackward0", Save::Input, |x, g| {
            g * &map(x, &GeluGrad)
        })
    }

    /// GELU with the tanh approximation (`approximate='tanh'`), a composite.
    pub fn gelu_tanh(&self) -> Tensor {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let inner = &(self + &(&self.powf(3.0) * 0.044715)) * k;
        &(self * 0.5) * &(inner.tanh() + 1.0)
    }

    /// `x * sigmoid(x)`, a composite.
    pub fn silu(&self) -> Tensor {
        self * &self.sigmoid()
    }

    /// `log(1 + e^x)`, linear above `threshold` (PyTorch: beta 1, threshold 20).
    pub fn softplus(&self) -> Tensor {
        let big = self.gt_scalar(20.0);
        Tensor::where_(&big, self, &self.exp().log1p())
    }

    /// `x ^ e` for a scalar exponent.
    pub fn powf(&self, e: f64) -> Tensor {
        unary(
            self,
            PowScalar(e),
            "PowBackward0",
            Save::Input,
            move |x, g| {
                if e == 0.0 {
                    Tensor::zeros_like(g)
                } else {
                    g * &(&x.powf(e - 1.0) * e)
                }
            },
        )
    }

    /// Limits values to `[min, max]` (either may be infinite).
    pub fn clamp(&self, min: f64, max: f64) -> Tensor {
        assert!(min <= max, "clamp: min ({min}) must not exceed max ({max})");
        unary(
            self,
            Clamp(min, max),
            "ClampBackward1",
            Save::Input,
            move |x, g| g * &map(x, &ClampMask(min, max)),
        )
    }

    pub fn clamp_min(&self, min: f64) -> Tensor {
        self.clamp(min, f64::INFINITY)
    }

    pub fn clamp_max(&self, max: f64) -> Tensor {
        self.clamp(f64::NEG_INFINITY, max)
    }

    pub fn square(&self) -> Tensor {
        self.powf(2.0)
    }

    pub fn reciprocal(&self) -> Tensor {
        self.powf(-1.0)
    }
}
