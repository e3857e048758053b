//! Elementwise math beyond the activations: the trigonometric and
//! hyperbolic functions and their inverses, `expm1`, `log2`, `log10`,
//! `exp2`, `atan2`, `hypot`, `fmod` and `remainder` (kernel rows of
//! `tapir_kernels::elementwise`, each with its backward here), and the
//! compositions `logit`, `nan_to_num` and `frac`.

use super::binary::binary;
use super::unary::{Save, unary};
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use tapir_kernels::elementwise::{
    self as ew, Acos, Acosh, Asin, Asinh, Atan, Atanh, Cosh, Exp2, Expm1, Log2, Log10, Sinh, Tan,
};

/// `1 / sqrt(1 - x²)`, the slope of asin (and minus acos's).
fn arc_slope(x: &Tensor) -> Tensor {
    (&(&x.square() * -1.0) + 1.0).rsqrt()
}

/// Panics, naming `op`, where two integer tensors would divide by zero
/// (PyTorch's `ZeroDivisionError`); one read of `divisor` on the host.
#[track_caller]
pub(super) fn no_integer_zero(op: &str, x: &Tensor, divisor: &Tensor) {
    let integers = |t: &Tensor| !t.dtype().is_float();
    if integers(x) && integers(divisor) && divisor.eq_scalar(0.0).any().item::<bool>() {
        panic!(
            "{op}: integer division by zero (a {:?} divisor holds 0)",
            divisor.dtype()
        );
    }
}

/// Float dtypes only: these have no integer kernels (PyTorch promotes
/// integers to the default float; so does `to_float` here).
pub(super) fn floating(x: &Tensor) -> Tensor {
    if x.dtype().is_float() {
        x.clone()
    } else {
        x.to_dtype(x.dtype().to_float())
    }
}

impl Tensor {
    /// The tangent (`torch.tan`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f32, std::f32::consts::FRAC_PI_4], &[2]).tan();
    /// assert!((y.to_vec::<f32>()[1] - 1.0).abs() < 1e-6);
    /// ```
    pub fn tan(&self) -> Tensor {
        trace::op("tan", [self], Vec::new, || {
            unary(
                &floating(self),
                Tan,
                "TanBackward0",
                Save::Output,
                |y, g| g * &(&y.square() + 1.0),
            )
        })
    }

    /// The arcsine (`torch.asin`; NaN outside `[-1, 1]`).
    #[doc(alias = "arcsin")]
    pub fn asin(&self) -> Tensor {
        trace::op("asin", [self], Vec::new, || {
            unary(
                &floating(self),
                Asin,
                "AsinBackward0",
                Save::Input,
                |x, g| g * &arc_slope(x),
            )
        })
    }

    /// The arccosine (`torch.acos`; NaN outside `[-1, 1]`).
    #[doc(alias = "arccos")]
    pub fn acos(&self) -> Tensor {
        trace::op("acos", [self], Vec::new, || {
            unary(
                &floating(self),
                Acos,
                "AcosBackward0",
                Save::Input,
                |x, g| &(g * &arc_slope(x)) * -1.0,
            )
        })
    }

    /// The arctangent (`torch.atan`).
    #[doc(alias = "arctan")]
    pub fn atan(&self) -> Tensor {
        trace::op("atan", [self], Vec::new, || {
            unary(
                &floating(self),
                Atan,
                "AtanBackward0",
                Save::Input,
                |x, g| g / &(&x.square() + 1.0),
            )
        })
    }

    /// The hyperbolic sine (`torch.sinh`).
    pub fn sinh(&self) -> Tensor {
        trace::op("sinh", [self], Vec::new, || {
            unary(
                &floating(self),
                Sinh,
                "SinhBackward0",
                Save::Input,
                |x, g| g * &x.cosh(),
            )
        })
    }

    /// The hyperbolic cosine (`torch.cosh`).
    pub fn cosh(&self) -> Tensor {
        trace::op("cosh", [self], Vec::new, || {
            unary(
                &floating(self),
                Cosh,
                "CoshBackward0",
                Save::Input,
                |x, g| g * &x.sinh(),
            )
        })
    }

    /// The inverse hyperbolic sine (`torch.asinh`).
    #[doc(alias = "arcsinh")]
    pub fn asinh(&self) -> Tensor {
        trace::op("asinh", [self], Vec::new, || {
            unary(
                &floating(self),
                Asinh,
                "AsinhBackward0",
                Save::Input,
                |x, g| g * &(&x.square() + 1.0).rsqrt(),
            )
        })
    }

    /// The inverse hyperbolic cosine (`torch.acosh`; NaN below 1).
    #[doc(alias = "arccosh")]
    pub fn acosh(&self) -> Tensor {
        trace::op("acosh", [self], Vec::new, || {
            unary(
                &floating(self),
                Acosh,
                "AcoshBackward0",
                Save::Input,
                |x, g| g * &(&x.square() - 1.0).rsqrt(),
            )
        })
    }

    /// The inverse hyperbolic tangent (`torch.atanh`; NaN outside `[-1, 1]`).
    #[doc(alias = "arctanh")]
    pub fn atanh(&self) -> Tensor {
        trace::op("atanh", [self], Vec::new, || {
            unary(
                &floating(self),
                Atanh,
                "AtanhBackward0",
                Save::Input,
                |x, g| g / &(&(&x.square() * -1.0) + 1.0),
            )
        })
    }

    /// `e^x - 1`, exact for small `x` (`torch.expm1`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1e-7f32], &[1]).expm1();
    /// assert!((y.to_vec::<f32>()[0] - 1e-7).abs() < 1e-13);
    /// ```
    pub fn expm1(&self) -> Tensor {
        trace::op("expm1", [self], Vec::new, || {
            unary(
                &floating(self),
                Expm1,
                "Expm1Backward0",
                Save::Output,
                |y, g| g * &(y + 1.0),
            )
        })
    }

    /// The base-2 logarithm (`torch.log2`).
    pub fn log2(&self) -> Tensor {
        trace::op("log2", [self], Vec::new, || {
            unary(
                &floating(self),
                Log2,
                "Log2Backward0",
                Save::Input,
                |x, g| g / &(x * std::f64::consts::LN_2),
            )
        })
    }

    /// The base-10 logarithm (`torch.log10`).
    pub fn log10(&self) -> Tensor {
        trace::op("log10", [self], Vec::new, || {
            unary(
                &floating(self),
                Log10,
                "Log10Backward0",
                Save::Input,
                |x, g| g / &(x * std::f64::consts::LN_10),
            )
        })
    }

    /// `2^x` (`torch.exp2`).
    pub fn exp2(&self) -> Tensor {
        trace::op("exp2", [self], Vec::new, || {
            unary(
                &floating(self),
                Exp2,
                "Exp2Backward0",
                Save::Output,
                |y, g| &(g * y) * std::f64::consts::LN_2,
            )
        })
    }

    /// The angle of the point `(other, self)` in `(-π, π]`, broadcast
    /// (`torch.atan2(input, other)`); integers are promoted to float.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    /// let a = y.atan2(&Tensor::from_vec(vec![-1.0f32], &[1]));
    /// let pi = std::f32::consts::PI;
    /// assert_eq!(a.to_vec::<f32>(), vec![0.75 * pi, -0.75 * pi]);
    /// ```
    #[doc(alias = "arctan2")]
    pub fn atan2(&self, other: &Tensor) -> Tensor {
        trace::op("atan2", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Atan2,
                "Atan2Backward0",
                true,
                true,
                |s, g, n| {
                    let (a, b) = s.expect("atan2 saves its inputs");
                    let scale = &(g / &(&a.square() + &b.square())).to_dtype(g.dtype());
                    [n[0].then(|| scale * b), n[1].then(|| &(scale * a) * -1.0)]
                },
            )
        })
    }

    /// C's `fmod`: the remainder of `self / other` rounded toward zero,
    /// with `self`'s sign (`torch.fmod`); broadcast. Two integer tensors
    /// give integers, as PyTorch's (a zero divisor panics, PyTorch's
    /// `ZeroDivisionError`). The gradient is 1 for `self` and
    /// `-trunc(self / other)` for `other`, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-3.0f32, 3.0], &[2]);
    /// assert_eq!(x.fmod(&Tensor::from_vec(vec![2.0f32], &[1])).to_vec::<f32>(), vec![-1.0, 1.0]);
    /// let i = Tensor::from_vec(vec![-7i64, 7], &[2]);
    /// assert_eq!(i.fmod(&Tensor::scalar(2i64)).to_vec::<i64>(), vec![-1, 1]);
    /// ```
    #[track_caller]
    pub fn fmod(&self, other: &Tensor) -> Tensor {
        no_integer_zero("fmod", self, other);
        trace::op("fmod", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Fmod,
                "FmodBackward0",
                false,
                true,
                |s, g, n| {
                    let (a, b) = s.expect("fmod saves its inputs");
                    [
                        n[0].then(|| g.clone()),
                        n[1].then(|| &(g * &(a / b).trunc()) * -1.0),
                    ]
                },
            )
        })
    }

    /// Python's modulus: the remainder with `other`'s sign
    /// (`torch.remainder`, `%` on tensors in PyTorch); broadcast. Two
    /// integer tensors give integers, as PyTorch's, so wrapped positions
    /// index directly (a zero divisor panics, PyTorch's
    /// `ZeroDivisionError`). The gradient is 1 for `self` and
    /// `-floor(self / other)` for `other`, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-3.0f32, 3.0], &[2]);
    /// assert_eq!(x.remainder(&Tensor::from_vec(vec![2.0f32], &[1])).to_vec::<f32>(), vec![1.0, 1.0]);
    /// let at = Tensor::from_vec(vec![-1i64, 5], &[2]).remainder(&Tensor::scalar(4i64));
    /// assert_eq!(at.to_vec::<i64>(), vec![3, 1]);
    /// ```
    #[track_caller]
    pub fn remainder(&self, other: &Tensor) -> Tensor {
        no_integer_zero("remainder", self, other);
        trace::op("remainder", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Remainder,
                "RemainderBackward0",
                false,
                true,
                |s, g, n| {
                    let (a, b) = s.expect("remainder saves its inputs");
                    [
                        n[0].then(|| g.clone()),
                        n[1].then(|| &(g * &(a / b).floor()) * -1.0),
                    ]
                },
            )
        })
    }

    /// `sqrt(self² + other²)` without overflow or underflow on the way,
    /// broadcast, integers promoted to float (`torch.hypot`); the gradient
    /// is `self / hypot` and `other / hypot`, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![3.0f32, 1e30, 1e-30], &[3]);
    /// let b = Tensor::from_vec(vec![4.0f32, 1e30, 0.0], &[3]);
    /// // The sum of squares would overflow (1e60) and underflow (1e-60) in f32.
    /// assert_eq!(a.hypot(&b).to_vec::<f32>(), vec![5.0, 1.4142135e30, 1e-30]);
    /// ```
    pub fn hypot(&self, other: &Tensor) -> Tensor {
        trace::op("hypot", [self, other], Vec::new, || {
            binary(
                &floating(self),
                &floating(other),
                ew::Hypot,
                "HypotBackward0",
                true,
                true,
                |s, g, n| {
                    let (a, b) = s.expect("hypot saves its inputs");
                    // PyTorch's order, `grad * a / result`: `grad / result`
                    // first overflowed where the result is tiny.
                    let r = &a.hypot(b);
                    let part = |x: &Tensor| (&(g * x) / r).to_dtype(g.dtype());
                    [n[0].then(|| part(a)), n[1].then(|| part(b))]
                },
            )
        })
    }

    /// The fractional part, `x - trunc(x)`, with `x`'s sign (`torch.frac`);
    /// its gradient is 1.
    pub fn frac(&self) -> Tensor {
        self - &self.trunc()
    }

    /// The log-odds `ln(p / (1 - p))` (`torch.logit`), with `p` first
    /// clamped to `[eps, 1 - eps]` when `eps` is given. The gradient is
    /// PyTorch's `g / (p (1 - p))`: ∞ at 0 and 1 and NaN outside `[0, 1]`
    /// without `eps`; with it, zero outside `[eps, 1 - eps]` (the bounds
    /// included in the inside). The quotient's own derivative gave NaN at
    /// 0 and 1.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let p = Tensor::from_vec(vec![0.5f32, 1.0], &[2]);
    /// assert_eq!(p.logit(None).to_vec::<f32>(), vec![0.0, f32::INFINITY]);
    /// assert!(p.logit(Some(1e-6)).to_vec::<f32>()[1] < 14.0);
    /// ```
    pub fn logit(&self, eps: Option<f64>) -> Tensor {
        let attrs = || vec![("eps", Attr::Float(eps.unwrap_or(-1.0)))];
        trace::op("logit", [self], attrs, || {
            let x = floating(&self.detach());
            let p = match eps {
                Some(e) => x.clamp(e, 1.0 - e),
                None => x,
            };
            let out = (&p / &(&(&p * -1.0) + 1.0)).log();
            Tensor::record(out, "LogitBackward0", &[self], || {
                let x = floating(&self.saved());
                move |g: &Tensor, _: &[bool]| {
                    let slope = g / &(&x * &(1.0 - &x));
                    let (lo, hi, outside) = match eps {
                        Some(e) => (e, 1.0 - e, 0.0),
                        None => (0.0, 1.0, f64::NAN),
                    };
                    let out = &x.lt_scalar(lo).logical_or(&x.gt_scalar(hi));
                    let outside = super::binary::scalar_for(&slope, outside);
                    vec![Some(
                        Tensor::where_(out, &outside, &slope).to_dtype(g.dtype()),
                    )]
                }
            })
        })
    }

    /// NaN replaced by `nan` (0), +∞ by `posinf` and -∞ by `neginf` (the
    /// dtype's largest and lowest finite values by default), as
    /// `torch.nan_to_num`; the gradient passes where the value was finite.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NAN, f32::INFINITY, -f32::INFINITY, 2.0], &[4]);
    /// assert_eq!(x.nan_to_num(0.0, None, None).to_vec::<f32>(), vec![0.0, f32::MAX, f32::MIN, 2.0]);
    /// ```
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let (lowest, highest) = self.dtype().finite_range();
        let fill = |v: f64| super::binary::scalar_for(self, v);
        let y = Tensor::where_(&self.isnan(), &fill(nan), self);
        let is_pos = &self.isinf().logical_and(&self.gt_scalar(0.0));
        let y = Tensor::where_(is_pos, &fill(posinf.unwrap_or(highest)), &y);
        let is_neg = &self.isinf().logical_and(&self.lt_scalar(0.0));
        Tensor::where_(is_neg, &fill(neginf.unwrap_or(lowest)), &y)
    }

    /// `self ^ exponent` in double precision (`torch.float_power`): both
    /// are converted to f64 first, and so is the result, whatever their
    /// dtypes; broadcast. Gradients are pow's, back in each input's dtype.
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![2i64, 3], &[2]);
    /// let y = x.float_power(&Tensor::scalar(0.5f32));
    /// assert_eq!(y.dtype(), DType::F64);
    /// assert_eq!(y.to_vec::<f64>(), vec![2f64.sqrt(), 3f64.sqrt()]);
    /// ```
    pub fn float_power(&self, exponent: &Tensor) -> Tensor {
        self.to_dtype(DType::F64)
            .pow(&exponent.to_dtype(DType::F64))
    }

    /// `self * 2^other`, broadcast (`torch.ldexp`, PyTorch's own
    /// composition); integers are promoted to float, and the gradients are
    /// those of the product and the power.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.75f32, -1.0], &[2]);
    /// let e = Tensor::from_vec(vec![3i64, -2], &[2]);
    /// assert_eq!(x.ldexp(&e).to_vec::<f32>(), vec![6.0, -0.25]);
    /// ```
    pub fn ldexp(&self, other: &Tensor) -> Tensor {
        let scale = floating(other).exp2();
        &floating(self) * &scale
    }

    /// [`Tensor::float_power`] with a scalar exponent.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 4.0], &[2]);
    /// assert_eq!(x.float_power_scalar(-0.5).to_vec::<f64>(), vec![1.0, 0.5]);
    /// ```
    pub fn float_power_scalar(&self, exponent: f64) -> Tensor {
        self.to_dtype(DType::F64).powf(exponent)
    }
}
