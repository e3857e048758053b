//! The special functions of `torch.special` that training code meets:
//! `lgamma` (`gammaln`), `digamma` (`psi`), `polygamma`, `erfc` and
//! `erfinv`, kernel rows of `tapir_kernels::elementwise` (computed by
//! `tapir_kernels::special` where libm has no such function), each with
//! its backward here. Integer inputs compute in the default float dtype,
//! as PyTorch's.

use super::math::floating;
use super::unary::{Save, unary};
use crate::Tensor;
use crate::trace::{self, Attr};
use std::f64::consts::{FRAC_2_SQRT_PI, PI};
use tapir_kernels::elementwise::{Digamma, Erfc, Erfinv, Lgamma, Polygamma};

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
}
