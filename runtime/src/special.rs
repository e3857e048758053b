//! `torch.special` by its names: each function is the tensor method of the
//! same meaning (`special::gammaln(&x)` is `x.lgamma()`), so code ported
//! from PyTorch reads as it did.
//!
//! ```
//! use tapir_runtime::{Tensor, special};
//! let x = Tensor::from_vec(vec![0.5f64, 2.0], &[2]);
//! assert_eq!(special::gammaln(&x).to_vec::<f64>(), x.lgamma().to_vec::<f64>());
//! let p = special::ndtr(&special::ndtri(&Tensor::from_vec(vec![0.3f64], &[1])));
//! assert!((p.item::<f64>() - 0.3).abs() < 1e-15);
//! ```

use crate::Tensor;

/// `torch.special.gammaln`: ln |Γ(x)| ([`Tensor::lgamma`]).
pub fn gammaln(x: &Tensor) -> Tensor {
    x.lgamma()
}

/// `torch.special.digamma` ([`Tensor::digamma`]).
pub fn digamma(x: &Tensor) -> Tensor {
    x.digamma()
}

/// `torch.special.psi`, digamma's other name ([`Tensor::digamma`]).
pub fn psi(x: &Tensor) -> Tensor {
    x.digamma()
}

/// `torch.special.polygamma(n, x)` ([`Tensor::polygamma`]).
pub fn polygamma(n: u32, x: &Tensor) -> Tensor {
    x.polygamma(n)
}

/// `torch.special.multigammaln(x, p)` ([`Tensor::mvlgamma`]).
pub fn multigammaln(x: &Tensor, p: usize) -> Tensor {
    x.mvlgamma(p)
}

/// `torch.special.erf` ([`Tensor::erf`]).
pub fn erf(x: &Tensor) -> Tensor {
    x.erf()
}

/// `torch.special.erfc` ([`Tensor::erfc`]).
pub fn erfc(x: &Tensor) -> Tensor {
    x.erfc()
}

/// `torch.special.erfcx` ([`Tensor::erfcx`]).
pub fn erfcx(x: &Tensor) -> Tensor {
    x.erfcx()
}

/// `torch.special.erfinv` ([`Tensor::erfinv`]).
pub fn erfinv(x: &Tensor) -> Tensor {
    x.erfinv()
}

/// `torch.special.expit`, the logistic sigmoid ([`Tensor::sigmoid`]).
pub fn expit(x: &Tensor) -> Tensor {
    x.sigmoid()
}

/// `torch.special.logit(x, eps)` ([`Tensor::logit`]).
pub fn logit(x: &Tensor, eps: Option<f64>) -> Tensor {
    x.logit(eps)
}

/// `torch.special.exp2` ([`Tensor::exp2`]).
pub fn exp2(x: &Tensor) -> Tensor {
    x.exp2()
}

/// `torch.special.expm1` ([`Tensor::expm1`]).
pub fn expm1(x: &Tensor) -> Tensor {
    x.expm1()
}

/// `torch.special.log1p` ([`Tensor::log1p`]).
pub fn log1p(x: &Tensor) -> Tensor {
    x.log1p()
}

/// `torch.special.sinc`, sin(πx)/(πx) ([`Tensor::sinc`]).
pub fn sinc(x: &Tensor) -> Tensor {
    x.sinc()
}

/// `torch.special.round`, halves to even ([`Tensor::round`]).
pub fn round(x: &Tensor) -> Tensor {
    x.round()
}

/// `torch.special.xlogy(x, y)` ([`Tensor::xlogy`]).
pub fn xlogy(x: &Tensor, y: &Tensor) -> Tensor {
    x.xlogy(y)
}

/// `torch.special.xlog1py(x, y)` ([`Tensor::xlog1py`]).
pub fn xlog1py(x: &Tensor, y: &Tensor) -> Tensor {
    x.xlog1py(y)
}

/// `torch.special.entr` ([`Tensor::entr`]).
pub fn entr(x: &Tensor) -> Tensor {
    x.entr()
}

/// `torch.special.ndtr`, the standard normal CDF ([`Tensor::ndtr`]).
pub fn ndtr(x: &Tensor) -> Tensor {
    x.ndtr()
}

/// `torch.special.ndtri`, its inverse ([`Tensor::ndtri`]).
pub fn ndtri(p: &Tensor) -> Tensor {
    p.ndtri()
}

/// `torch.special.log_ndtr` ([`Tensor::log_ndtr`]).
pub fn log_ndtr(x: &Tensor) -> Tensor {
    x.log_ndtr()
}

/// `torch.special.i0` ([`Tensor::i0`]).
pub fn i0(x: &Tensor) -> Tensor {
    x.i0()
}

/// `torch.special.i0e` ([`Tensor::i0e`]).
pub fn i0e(x: &Tensor) -> Tensor {
    x.i0e()
}

/// `torch.special.i1` ([`Tensor::i1`]).
pub fn i1(x: &Tensor) -> Tensor {
    x.i1()
}

/// `torch.special.i1e` ([`Tensor::i1e`]).
pub fn i1e(x: &Tensor) -> Tensor {
    x.i1e()
}

/// `torch.special.zeta(x, q)`, the Hurwitz zeta ([`Tensor::zeta`]).
pub fn zeta(x: &Tensor, q: &Tensor) -> Tensor {
    x.zeta(q)
}

/// `torch.special.logsumexp(x, dims, keepdim)` ([`Tensor::logsumexp`]).
pub fn logsumexp(x: &Tensor, dims: &[isize], keepdim: bool) -> Tensor {
    x.logsumexp(dims, keepdim)
}

/// `torch.special.softmax(x, dim)` ([`Tensor::softmax`]).
pub fn softmax(x: &Tensor, dim: isize) -> Tensor {
    x.softmax(dim)
}

/// `torch.special.log_softmax(x, dim)` ([`Tensor::log_softmax`]).
pub fn log_softmax(x: &Tensor, dim: isize) -> Tensor {
    x.log_softmax(dim)
}
