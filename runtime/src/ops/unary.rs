//! Elementwise unary ops and activations: forward kernels (the rows of
//! `tapir_kernels::elementwise`) and backward formulas side by side.
//! Composites (gelu-tanh, softplus) get their gradient from the primitives
//! they are built of.

use crate::Tensor;
use crate::trace::{self, Attr};
use tapir_kernels::elementwise::{
    Abs, Ceil, Clamp, ClampMask, Cos, Erf, Exp, Floor, Gelu, GeluBackward, Hardswish,
    HardswishGrad, LeakyRelu, LeakyStep, Log, Log1p, Neg, POW_SPECIAL_EXPONENTS, PowAny, PowScalar,
    Relu, ReluBackward, Round, Rsqrt, Sigmoid, Sign, Silu, SiluGrad, Sin, Sqrt, Tanh, Trunc,
    UnaryFn,
};

/// What a unary backward needs kept from forward.
#[derive(Clone, Copy)]
pub(crate) enum Save {
    Input,
    Output,
    Nothing,
}

/// Applies `op` elementwise (no recording).
pub(crate) fn map<F: UnaryFn>(x: &Tensor, op: &F) -> Tensor {
    super::elementwise([x.clone()], x.shape(), |[x], l| x.read().unary(&l[0], op))
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
    if !Tensor::any_needs_grad(&[x]) {
        return out;
    }
    // Saved while the node is made, so a saved output knows its node.
    let to_save = match save {
        Save::Input => Some(x.clone()),
        Save::Output => Some(out.view_with(out.layout().clone())),
        Save::Nothing => None,
    };
    let shape_src = x.detach();
    Tensor::record(out, name, &[x], move || {
        let saved = to_save.map(|t| t.saved());
        move |g: &Tensor, _: &[bool]| vec![Some(bw(saved.as_ref().unwrap_or(&shape_src), g))]
    })
}

/// A rounding op: piecewise constant, so its gradient is zero (PyTorch's
/// `zeros_like(grad)`); on integers it is the identity, as PyTorch's.
fn rounding<F: UnaryFn>(x: &Tensor, op: F, name: &'static str) -> Tensor {
    if !x.dtype().is_float() {
        return map(x, &op);
    }
    unary(x, op, name, Save::Nothing, |_, g| Tensor::zeros_like(g))
}

impl Tensor {
    /// `-x`.
    #[doc(alias = "negative")]
    pub fn neg(&self) -> Tensor {
        trace::op("neg", [self], Vec::new, || {
            unary(self, Neg, "NegBackward0", Save::Nothing, |_, g| g.neg())
        })
    }

    /// `e^x`. Its derivative is itself.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f32], &[1]).exp();
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0]);
    /// ```
    pub fn exp(&self) -> Tensor {
        trace::op("exp", [self], Vec::new, || {
            if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                return x.exp();
            }
            unary(self, Exp, "ExpBackward0", Save::Output, |y, g| g * y)
        })
    }

    /// The natural logarithm.
    pub fn log(&self) -> Tensor {
        trace::op("log", [self], Vec::new, || {
            if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                return x.log();
            }
            unary(self, Log, "LogBackward0", Save::Input, |x, g| g / x)
        })
    }

    /// `ln(1 + x)`, accurate near 0.
    pub fn log1p(&self) -> Tensor {
        trace::op("log1p", [self], Vec::new, || {
            if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                return x.log1p();
            }
            unary(self, Log1p, "Log1PBackward0", Save::Input, |x, g| {
                g / &(x + 1.0)
            })
        })
    }

    /// The square root.
    pub fn sqrt(&self) -> Tensor {
        trace::op("sqrt", [self], Vec::new, || {
            unary(self, Sqrt, "SqrtBackward0", Save::Output, |y, g| {
                g / &(y * 2.0)
            })
        })
    }

    /// `1 / sqrt(x)`.
    pub fn rsqrt(&self) -> Tensor {
        trace::op("rsqrt", [self], Vec::new, || {
            if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                return x.rsqrt();
            }
            unary(self, Rsqrt, "RsqrtBackward0", Save::Output, |y, g| {
                &(g * &y.powf(3.0)) * -0.5
            })
        })
    }

    /// `|x|` (gradient `sign(x)`).
    #[doc(alias = "absolute")]
    pub fn abs(&self) -> Tensor {
        trace::op("abs", [self], Vec::new, || {
            unary(self, Abs, "AbsBackward0", Save::Input, |x, g| {
                g * &map(x, &Sign)
            })
        })
    }

    /// -1, 0 or 1 (gradient zero everywhere).
    #[doc(alias = "sgn")]
    pub fn sign(&self) -> Tensor {
        trace::op("sign", [self], Vec::new, || {
            unary(self, Sign, "SignBackward0", Save::Nothing, |_, g| {
                Tensor::zeros_like(g)
            })
        })
    }

    /// The largest integer not above each element (`torch.floor`); its
    /// gradient is zero everywhere, and integer tensors come back unchanged.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 0.5, 2.0], &[3]);
    /// assert_eq!(x.floor().to_vec::<f32>(), vec![-2.0, 0.0, 2.0]);
    /// ```
    pub fn floor(&self) -> Tensor {
        trace::op("floor", [self], Vec::new, || {
            rounding(self, Floor, "FloorBackward0")
        })
    }

    /// The smallest integer not below each element (`torch.ceil`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 0.5, 2.0], &[3]);
    /// assert_eq!(x.ceil().to_vec::<f32>(), vec![-1.0, 1.0, 2.0]);
    /// ```
    pub fn ceil(&self) -> Tensor {
        trace::op("ceil", [self], Vec::new, || {
            rounding(self, Ceil, "CeilBackward0")
        })
    }

    /// The nearest integer, halves to the even one (`torch.round`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -2.7], &[4]);
    /// assert_eq!(x.round().to_vec::<f32>(), vec![0.0, 2.0, 2.0, -3.0]);
    /// ```
    pub fn round(&self) -> Tensor {
        trace::op("round", [self], Vec::new, || {
            rounding(self, Round, "RoundBackward0")
        })
    }

    /// Each element with its fraction dropped, toward zero (`torch.trunc`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 0.5, 2.7], &[3]);
    /// assert_eq!(x.trunc().to_vec::<f32>(), vec![-1.0, 0.0, 2.0]);
    /// ```
    #[doc(alias = "fix")]
    pub fn trunc(&self) -> Tensor {
        trace::op("trunc", [self], Vec::new, || {
            rounding(self, Trunc, "TruncBackward0")
        })
    }

    /// The sine.
    pub fn sin(&self) -> Tensor {
        trace::op("sin", [self], Vec::new, || {
            unary(self, Sin, "SinBackward0", Save::Input, |x, g| g * &x.cos())
        })
    }

    /// The cosine.
    pub fn cos(&self) -> Tensor {
        trace::op("cos", [self], Vec::new, || {
            unary(self, Cos, "CosBackward0", Save::Input, |x, g| {
                &(g * &x.sin()) * -1.0
            })
        })
    }

    /// The hyperbolic tangent.
    pub fn tanh(&self) -> Tensor {
        trace::op("tanh", [self], Vec::new, || {
            unary(self, Tanh, "TanhBackward0", Save::Output, |y, g| {
                g * &(&(y * y) * -1.0 + 1.0)
            })
        })
    }

    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(&self) -> Tensor {
        trace::op("sigmoid", [self], Vec::new, || {
            unary(self, Sigmoid, "SigmoidBackward0", Save::Output, |y, g| {
                g * &(y * &(&(y * -1.0) + 1.0))
            })
        })
    }

    /// The error function.
    pub fn erf(&self) -> Tensor {
        trace::op("erf", [self], Vec::new, || {
            unary(self, Erf, "ErfBackward0", Save::Input, |x, g| {
                g * &(&(&(x * x) * -1.0).exp() * std::f64::consts::FRAC_2_SQRT_PI)
            })
        })
    }

    /// `max(x, 0)` (NaN kept).
    pub fn relu(&self) -> Tensor {
        trace::op("relu", [self], Vec::new, || {
            unary(self, Relu, "ReluBackward0", Save::Output, |y, g| {
                if crate::autograd::differentiating() {
                    // Recorded, so `create_graph` can differentiate it.
                    return g * &y.gt_scalar(0.0).to_dtype(g.dtype());
                }
                super::binary::apply(g, y, &ReluBackward, "relu_backward", true)
            })
        })
    }

    /// `x` for positive inputs, `slope * x` otherwise (PyTorch's default slope is 0.01).
    pub fn leaky_relu(&self, slope: f64) -> Tensor {
        trace::op(
            "leaky_relu",
            [self],
            || vec![("slope", Attr::Float(slope))],
            || {
                unary(
                    self,
                    LeakyRelu { slope },
                    "LeakyReluBackward0",
                    Save::Input,
                    move |x, g| g * &map(x, &LeakyStep { slope }),
                )
            },
        )
    }

    /// Exact GELU, `x * Φ(x)` (PyTorch's `approximate='none'`).
    pub fn gelu(&self) -> Tensor {
        trace::op("gelu", [self], Vec::new, || {
            unary(self, Gelu, "GeluBackward0", Save::Input, |x, g| {
                if crate::autograd::differentiating() {
                    // Φ(x) + x φ(x), recorded for `create_graph`.
                    let cdf = &(&(x * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0) * 0.5;
                    let pdf = &(&(x * x) * -0.5).exp()
                        * (0.5
                            * std::f64::consts::FRAC_2_SQRT_PI
                            * std::f64::consts::FRAC_1_SQRT_2);
                    return g * &(&cdf + &(x * &pdf));
                }
                super::binary::apply(g, x, &GeluBackward, "gelu_backward", true)
            })
        })
    }

    /// GELU with the tanh approximation (`approximate='tanh'`), a composite.
    pub fn gelu_tanh(&self) -> Tensor {
        trace::op("gelu_tanh", [self], Vec::new, || {
            // x³ as `x * x * x`, as PyTorch's kernel computes it (and as a
            // fused program can: it has no `powf`).
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let cube = &(self * self) * self;
            let inner = &(self + &(&cube * 0.044715)) * k;
            &(self * 0.5) * &(inner.tanh() + 1.0)
        })
    }

    /// `x * sigmoid(x)` (SiLU, swish).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f32, 1.0], &[2]).silu();
    /// assert!((y.to_vec::<f32>()[1] - 0.731_058_6).abs() < 1e-6);
    /// ```
    pub fn silu(&self) -> Tensor {
        trace::op("silu", [self], Vec::new, || {
            unary(self, Silu, "SiluBackward0", Save::Input, |x, g| {
                if crate::autograd::differentiating() {
                    // σ(x) (1 + x (1 - σ(x))), recorded for `create_graph`.
                    let s = x.sigmoid();
                    return g * &(&s * &(&(x * &(&s * -1.0 + 1.0)) + 1.0));
                }
                g * &map(x, &SiluGrad)
            })
        })
    }

    /// `x * relu6(x + 3) / 6` (`F.hardswish`); its gradient is PyTorch's:
    /// 0 below -3, `x / 3 + 0.5` on `[-3, 3]`, 1 above.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-4.0f32, 0.0, 1.5, 4.0], &[4]).hardswish();
    /// assert_eq!(y.to_vec::<f32>(), vec![0.0, 0.0, 1.125, 4.0]);
    /// ```
    pub fn hardswish(&self) -> Tensor {
        trace::op("hardswish", [self], Vec::new, || {
            unary(
                self,
                Hardswish,
                "HardswishBackward0",
                Save::Input,
                |x, g| {
                    let slope = map(x, &HardswishGrad);
                    if crate::autograd::differentiating() {
                        // The slope's own slope is 1/3 inside (-3, 3)
                        // (PyTorch's), 0 elsewhere: recorded there only.
                        let inside = x.gt_scalar(-3.0).logical_and(&x.lt_scalar(3.0));
                        let line = &(x / 3.0) + 0.5;
                        return g * &Tensor::where_(&inside, &line, &slope);
                    }
                    g * &slope
                },
            )
        })
    }

    /// `log(1 + e^x)`, linear above `threshold` (PyTorch: beta 1, threshold 20).
    pub fn softplus(&self) -> Tensor {
        trace::op("softplus", [self], Vec::new, || {
            if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                return x.softplus();
            }
            // The exp sees 0 where the linear branch is taken: exp(x) of a
            // large x is inf, and the unused branch's zero gradient times
            // inf would be NaN.
            let big = self.gt_scalar(20.0);
            let small = self.masked_fill(&big, 0.0);
            Tensor::where_(&big, self, &small.exp().log1p())
        })
    }

    /// `x ^ e` for a scalar exponent (`torch.pow(x, e)`): `x * x` for 2,
    /// `x * x * x` for 3, `sqrt`, `rsqrt` and reciprocals for 0.5, -0.5, -1
    /// and -2 (PyTorch's forms), `e^(e ln x)` for the others.
    pub fn powf(&self, e: f64) -> Tensor {
        trace::op(
            "powf",
            [self],
            || vec![("exponent", Attr::Float(e))],
            || {
                if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                    return x.powf(e);
                }
                let backward = move |x: &Tensor, g: &Tensor| {
                    if e == 0.0 {
                        Tensor::zeros_like(g)
                    } else {
                        g * &(&x.powf(e - 1.0) * e)
                    }
                };
                if POW_SPECIAL_EXPONENTS.contains(&e) {
                    unary(self, PowScalar { e }, "PowBackward0", Save::Input, backward)
                } else {
                    unary(self, PowAny { e }, "PowBackward0", Save::Input, backward)
                }
            },
        )
    }

    /// Limits values to `[min, max]` (either may be infinite). An integer
    /// tensor with a bound that has a fraction is first promoted to f32, as
    /// PyTorch promotes it for a float bound (the bound was truncated, and
    /// `clamp(-1.5, 5.5)` of 7 gave 5); whole bounds keep its dtype, the
    /// rule of scalar operands everywhere here.
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let i = Tensor::from_vec(vec![7i64, -7, 3], &[3]);
    /// assert_eq!(i.clamp(-1.0, 5.0).to_vec::<i64>(), vec![5, -1, 3]);
    /// let f = i.clamp(-1.5, 5.5);
    /// assert_eq!((f.dtype(), f.to_vec::<f32>()), (DType::F32, vec![5.5, -1.5, 3.0]));
    /// ```
    #[doc(alias = "clip")]
    pub fn clamp(&self, min: f64, max: f64) -> Tensor {
        trace::op(
            "clamp",
            [self],
            || vec![("min", Attr::Float(min)), ("max", Attr::Float(max))],
            || {
                assert!(min <= max, "clamp: min ({min}) must not exceed max ({max})");
                let fraction = |b: f64| b.is_finite() && b.fract() != 0.0;
                if !self.dtype().is_float() && (fraction(min) || fraction(max)) {
                    return self.to_dtype(crate::DType::F32).clamp(min, max);
                }
                unary(
                    self,
                    Clamp { lo: min, hi: max },
                    "ClampBackward1",
                    Save::Input,
                    move |x, g| g * &map(x, &ClampMask { lo: min, hi: max }),
                )
            },
        )
    }

    /// Limits values from below.
    pub fn clamp_min(&self, min: f64) -> Tensor {
        trace::op(
            "clamp_min",
            [self],
            || vec![("min", Attr::Float(min))],
            || self.clamp(min, f64::INFINITY),
        )
    }

    /// Limits values from above.
    pub fn clamp_max(&self, max: f64) -> Tensor {
        trace::op(
            "clamp_max",
            [self],
            || vec![("max", Attr::Float(max))],
            || self.clamp(f64::NEG_INFINITY, max),
        )
    }

    /// `x * x`; integers stay integers (wrapping), as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::from_vec(vec![-7i64, 3], &[2]).square().to_vec::<i64>(), vec![49, 9]);
    /// ```
    pub fn square(&self) -> Tensor {
        trace::op("square", [self], Vec::new, || {
            if self.dtype().is_float() || self.dtype() == crate::DType::Bool {
                self.powf(2.0)
            } else {
                self * self
            }
        })
    }

    /// `1 / x`.
    pub fn reciprocal(&self) -> Tensor {
        trace::op("reciprocal", [self], Vec::new, || self.powf(-1.0))
    }
}
