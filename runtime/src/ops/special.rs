//! The special functions of `torch.special` that training code meets:
//! `lgamma` (`gammaln`), `digamma` (`psi`), `polygamma`, `mvlgamma`
//! (`multigammaln`), `erfc`, `erfcx`, `erfinv`, the normal distribution's
//! `ndtr`, `log_ndtr` and `ndtri`, and the modified Bessel functions `i0`,
//! `i0e`, `i1`, `i1e`: kernel rows of `tapir_kernels::elementwise`
//! (computed by `tapir_kernels::special` where libm has no such function)
//! or compositions of them, each with its backward here. Integer inputs
//! compute in the default float dtype, as PyTorch's.

use super::binary::binary;
use super::math::floating;
use super::unary::{Save, unary};
use crate::Tensor;
use crate::trace::{self, Attr};
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, PI};
use tapir_kernels::elementwise::{
    Digamma, Erfc, Erfcx, Erfinv, I0, I0e, I1, I1e, Lgamma, LogNdtr, Ndtri, Polygamma, Zeta,
};

impl Tensor {
    /// `ln |Γ(x)|` (`torch.lgamma`, `torch.special.gammaln`); ∞ at 0 and
    /// the negative integers. Its gradient is `digamma`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![4.0f32, 0.5], &[2]).lgamma().to_vec::<f32>();
    /// assert!((y[0] - 6.0f32.ln()).abs() < 1e-6);
    /// assert!((y[1] - std::f32::consts::PI.sqrt().ln()).abs() < 1e-6);
    /// ```
    pub fn lgamma(&self) -> Tensor {
        trace::op("lgamma", [self], Vec::new, || {
            unary(
                &floating(self),
                Lgamma,
                "LgammaBackward0",
                Save::Input,
                |x, g| g * &x.digamma(),
            )
        })
    }

    /// The digamma function ψ(x) = d/dx ln Γ(x) (`torch.digamma`,
    /// `torch.special.psi`): -∞ at +0, +∞ at -0, NaN at the negative
    /// integers. Its gradient is `polygamma(1)`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let psi1 = Tensor::from_vec(vec![1.0f64], &[1]).digamma().to_vec::<f64>()[0];
    /// assert!((psi1 + 0.5772156649015329).abs() < 1e-15); // -γ
    /// ```
    pub fn digamma(&self) -> Tensor {
        trace::op("digamma", [self], Vec::new, || {
            unary(
                &floating(self),
                Digamma,
                "DigammaBackward0",
                Save::Input,
                |x, g| g * &x.polygamma(1),
            )
        })
    }

    /// The `n`-th derivative of digamma, ψ⁽ⁿ⁾(x) (`torch.polygamma(n, x)`;
    /// `n = 0` is digamma, 1 the trigamma function). Its gradient is
    /// `polygamma(n + 1)`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f64], &[1]).polygamma(1).to_vec::<f64>()[0];
    /// assert!((t - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-15);
    /// ```
    pub fn polygamma(&self, n: u32) -> Tensor {
        trace::op(
            "polygamma",
            [self],
            || vec![("n", Attr::Int(n.into()))],
            || {
                let row = Polygamma { n: n.into() };
                unary(
                    &floating(self),
                    row,
                    "PolygammaBackward0",
                    Save::Input,
                    move |x, g| g * &x.polygamma(n + 1),
                )
            },
        )
    }

    /// The complementary error function `1 - erf(x)` (`torch.erfc`),
    /// without erf's cancellation where the result is small.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![6.0f64], &[1]).erfc().to_vec::<f64>()[0];
    /// assert!((y - 2.1519736712498913e-17).abs() < 1e-30);
    /// ```
    pub fn erfc(&self) -> Tensor {
        trace::op("erfc", [self], Vec::new, || {
            unary(
                &floating(self),
                Erfc,
                "ErfcBackward0",
                Save::Input,
                |x, g| g * &(&(&x.square() * -1.0).exp() * -FRAC_2_SQRT_PI),
            )
        })
    }

    /// The inverse error function (`torch.erfinv`): ±∞ at ±1, NaN outside
    /// `[-1, 1]`. `nn::init::trunc_normal_`'s way from uniform to normal.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.5f64], &[1]);
    /// assert!((&y.erfinv().erf() - &y).abs().item::<f64>() < 1e-16);
    /// ```
    pub fn erfinv(&self) -> Tensor {
        trace::op("erfinv", [self], Vec::new, || {
            unary(
                &floating(self),
                Erfinv,
                "ErfinvBackward0",
                Save::Output,
                |y, g| g * &(&y.square().exp() * (PI.sqrt() / 2.0)),
            )
        })
    }

    /// The scaled complementary error function `exp(x²) · erfc(x)`
    /// (`torch.special.erfcx`): finite where `erfc` underflows, ~1/(x√π)
    /// for large x, ∞ far left.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f64, 30.0], &[2]).erfcx().to_vec::<f64>();
    /// assert_eq!(y[0], 1.0);
    /// assert!((y[1] - 0.018_795_888_861_416_75).abs() < 1e-17);
    /// ```
    pub fn erfcx(&self) -> Tensor {
        trace::op("erfcx", [self], Vec::new, || {
            unary(
                &floating(self),
                Erfcx,
                "SpecialErfcxBackward0",
                Save::Input,
                |x, g| g * &(&(&(x * 2.0) * &x.erfcx()) - FRAC_2_SQRT_PI),
            )
        })
    }

    /// The standard normal CDF Φ(x) = ½ erfc(-x/√2) (`torch.special.ndtr`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let p = Tensor::from_vec(vec![0.0f64, 1.959_963_984_540_054], &[2]).ndtr().to_vec::<f64>();
    /// assert_eq!(p[0], 0.5);
    /// assert!((p[1] - 0.975).abs() < 1e-15);
    /// ```
    pub fn ndtr(&self) -> Tensor {
        trace::op("ndtr", [self], Vec::new, || {
            &(&floating(self) * -FRAC_1_SQRT_2).erfc() * 0.5
        })
    }

    /// ln Φ(x), the log of the standard normal CDF, accurate where Φ
    /// underflows (`torch.special.log_ndtr`). Its gradient φ(x)/Φ(x) is
    /// √(2/π) / erfcx(-x/√2).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-40.0f64], &[1]).log_ndtr().item::<f64>();
    /// assert!((y + 804.608_442_013_753_8).abs() < 1e-12);
    /// ```
    pub fn log_ndtr(&self) -> Tensor {
        trace::op("log_ndtr", [self], Vec::new, || {
            unary(
                &floating(self),
                LogNdtr,
                "SpecialLogNdtrBackward0",
                Save::Input,
                |x, g| g / &(&(x * -FRAC_1_SQRT_2).erfcx() * (PI / 2.0).sqrt()),
            )
        })
    }

    /// Φ⁻¹(p), the standard normal quantile (`torch.special.ndtri`): -∞ at
    /// 0, ∞ at 1, NaN outside `[0, 1]`. Its gradient is √(2π) e^(y²/2).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.5f64, 0.975], &[2]).ndtri().to_vec::<f64>();
    /// assert_eq!(x[0], 0.0);
    /// assert!((x[1] - 1.959_963_984_540_054).abs() < 1e-14);
    /// ```
    pub fn ndtri(&self) -> Tensor {
        trace::op("ndtri", [self], Vec::new, || {
            unary(
                &floating(self),
                Ndtri,
                "SpecialNdtriBackward0",
                Save::Output,
                |y, g| g * &(&(&y.square() * 0.5).exp() * (2.0 * PI).sqrt()),
            )
        })
    }

    /// The modified Bessel function of the first kind of order 0
    /// (`torch.i0`, `torch.special.i0`). Its gradient is `i1`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f64], &[1]).i0().item::<f64>();
    /// assert!((y - 1.266_065_877_752_008_4).abs() < 1e-15);
    /// ```
    pub fn i0(&self) -> Tensor {
        trace::op("i0", [self], Vec::new, || {
            unary(&floating(self), I0, "I0Backward0", Save::Input, |x, g| {
                g * &x.i1()
            })
        })
    }

    /// `exp(-|x|) · i0(x)`, without `i0`'s overflow (`torch.special.i0e`).
    /// Its gradient is `i1e(x) - sign(x) · i0e(x)`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1000.0f64], &[1]).i0e().item::<f64>();
    /// assert!((y - 0.012_617_240_455_891_257).abs() < 1e-17);
    /// ```
    pub fn i0e(&self) -> Tensor {
        trace::op("i0e", [self], Vec::new, || {
            unary(
                &floating(self),
                I0e,
                "SpecialI0EBackward0",
                Save::Input,
                |x, g| g * &(&x.i1e() - &(&x.sign() * &x.i0e())),
            )
        })
    }

    /// The modified Bessel function of the first kind of order 1
    /// (`torch.special.i1`). Its gradient is `i0(x) - i1(x) / x`, ½ at 0.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f64], &[1]).i1().item::<f64>();
    /// assert!((y + 0.565_159_103_992_485_1).abs() < 1e-15);
    /// ```
    pub fn i1(&self) -> Tensor {
        trace::op("i1", [self], Vec::new, || {
            unary(
                &floating(self),
                I1,
                "SpecialI1Backward0",
                Save::Input,
                |x, g| g * &at_zero_half(x, |safe| &safe.i0() - &(&safe.i1() / safe)),
            )
        })
    }

    /// `exp(-|x|) · i1(x)` (`torch.special.i1e`). Its gradient is
    /// `i0e(x) - i1e(x) · (sign(x) + 1/x)`, ½ at 0.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1000.0f64], &[1]).i1e().item::<f64>();
    /// assert!((y - 0.012_610_930_256_928_629).abs() < 1e-17);
    /// ```
    pub fn i1e(&self) -> Tensor {
        trace::op("i1e", [self], Vec::new, || {
            unary(
                &floating(self),
                I1e,
                "SpecialI1EBackward0",
                Save::Input,
                |x, g| {
                    g * &at_zero_half(x, |safe| {
                        &safe.i0e() - &(&safe.i1e() * &(&safe.sign() + &safe.reciprocal()))
                    })
                },
            )
        })
    }

    /// The log of the multivariate gamma function of dimension `p`,
    /// ln Γₚ(x) = p(p-1)/4 · ln π + Σⱼ₌₀..ₚ₋₁ lgamma(x - j/2)
    /// (`torch.mvlgamma`, `torch.special.multigammaln`). Every element has to
    /// be above (p - 1)/2, as PyTorch requires (checked by reading them).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// // Γ₂(x) = √π Γ(x) Γ(x - ½); at 2.5, ln(√π) + lgamma(2.5) + lgamma(2).
    /// let y = Tensor::from_vec(vec![2.5f64], &[1]).mvlgamma(2).item::<f64>();
    /// assert!((y - 0.857_047_813_397_619_3).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn mvlgamma(&self, p: usize) -> Tensor {
        assert!(p >= 1, "mvlgamma: p has to be at least 1, got {p}");
        let x = floating(self);
        let bound = (p as f64 - 1.0) / 2.0;
        let ok = crate::no_grad(|| x.gt_scalar(bound).all().item::<bool>());
        assert!(
            ok,
            "mvlgamma: all elements must be greater than (p-1)/2 = {bound} for p = {p} (input {:?}, {})",
            x.shape(),
            x.dtype()
        );
        trace::op(
            "mvlgamma",
            [self],
            || vec![("p", Attr::Int(p as i64))],
            || {
                let mut sum = x.lgamma();
                for j in 1..p {
                    sum = &sum + &(&x - j as f64 / 2.0).lgamma();
                }
                &sum + (p * (p - 1)) as f64 / 4.0 * PI.ln()
            },
        )
    }
}

impl Tensor {
    /// The elementwise entropy `-x · ln x` (`torch.special.entr`): 0 at 0,
    /// -∞ below. Its gradient is PyTorch's `-(1 + ln x)` (∞ at 0, NaN
    /// below).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let h = Tensor::from_vec(vec![0.0f64, 0.5, -1.0], &[3]).entr().to_vec::<f64>();
    /// assert_eq!(h[0], 0.0);
    /// assert!((h[1] - 0.5 * std::f64::consts::LN_2).abs() < 1e-16);
    /// assert_eq!(h[2], f64::NEG_INFINITY);
    /// ```
    pub fn entr(&self) -> Tensor {
        trace::op("entr", [self], Vec::new, || {
            let x = floating(self);
            let value = crate::no_grad(|| {
                let scalar = |v| crate::ops::binary::scalar_for(&x, v);
                let inner = Tensor::where_(&x.eq_scalar(0.0), &scalar(0.0), &(&x * &x.log()).neg());
                Tensor::where_(&x.lt_scalar(0.0), &scalar(f64::NEG_INFINITY), &inner)
            });
            Tensor::record(value, "SpecialEntrBackward0", &[&x], || {
                let x = x.saved();
                move |g: &Tensor, _: &[bool]| vec![Some(g * &(&x.log() + 1.0).neg())]
            })
        })
    }
}

impl Tensor {
    /// The Hurwitz zeta function ζ(x, q) = Σₖ₌₀ (k + q)^-x, broadcast
    /// (`torch.special.zeta`): ∞ at x = 1, NaN for x < 1. As in PyTorch,
    /// only `q` has a gradient, -x ζ(x + 1, q); asking for `x`'s panics.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![2.0f64], &[1]);
    /// let z = x.zeta(&Tensor::from_vec(vec![1.0f64], &[1])).item::<f64>();
    /// assert!((z - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-15); // ζ(2)
    /// ```
    pub fn zeta(&self, q: &Tensor) -> Tensor {
        trace::op("zeta", [self, q], Vec::new, || {
            binary(
                self,
                q,
                Zeta,
                "ZetaBackward0",
                true,
                true,
                |saved, g, needs| {
                    let (x, q) = saved.expect("zeta saves its inputs");
                    assert!(
                        !needs[0],
                        "zeta: the derivative for x (the exponent) is not implemented, as in PyTorch; detach it"
                    );
                    [
                        None,
                        needs[1].then(|| g * &(&(x * -1.0) * &(x + 1.0).zeta(q))),
                    ]
                },
            )
        })
    }
}

/// `f(x)` where x is not 0 and ½ where it is (the Bessel `i1` gradients'
/// limit), with `f` fed 1 at the zeros so its division stays finite.
fn at_zero_half(x: &Tensor, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let zero = x.eq_scalar(0.0);
    let one = crate::ops::binary::scalar_for(x, 1.0);
    let safe = Tensor::where_(&zero, &one, x);
    let half = crate::ops::binary::scalar_for(x, 0.5);
    Tensor::where_(&zero, &half, &f(&safe))
}
