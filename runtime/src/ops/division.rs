//! Division rounded to an integer value (`torch.div(a, b, rounding_mode=)`
//! and `torch.floor_divide`), composed from `fmod` and `remainder`: the
//! quotient of `a - remainder` by `b` is exact, where `floor(a / b)` would
//! round `a / b` first and could land on the next integer.

use super::math::no_integer_zero;
use crate::{DType, Tensor};

/// How [`Tensor::div_rounding`] rounds the quotient (PyTorch's
/// `rounding_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// Toward zero, as C's integer division (`rounding_mode="trunc"`).
    Trunc,
    /// Toward -inf, as Python's `//` (`rounding_mode="floor"`).
    Floor,
}

impl Tensor {
    /// `self / other` rounded to an integer value by `mode`, broadcast
    /// (`torch.div(self, other, rounding_mode=...)`). Two integer tensors
    /// give integers (a zero divisor panics, PyTorch's `ZeroDivisionError`);
    /// otherwise floats, where a zero divisor gives the signed infinity or
    /// NaN of `/`. Rounded quotients are not differentiable: the result
    /// carries no gradient (PyTorch's is zero).
    ///
    /// ```
    /// use tapir_runtime::{RoundingMode, Tensor};
    /// let a = Tensor::from_vec(vec![7.0f32, -7.0], &[2]);
    /// let b = Tensor::scalar(2.0f32);
    /// assert_eq!(a.div_rounding(&b, RoundingMode::Trunc).to_vec::<f32>(), vec![3.0, -3.0]);
    /// assert_eq!(a.div_rounding(&b, RoundingMode::Floor).to_vec::<f32>(), vec![3.0, -4.0]);
    /// ```
    #[track_caller]
    pub fn div_rounding(&self, other: &Tensor, mode: RoundingMode) -> Tensor {
        let op = match mode {
            RoundingMode::Trunc => "div",
            RoundingMode::Floor => "floor_divide",
        };
        no_integer_zero(op, self, other);
        let (a, b) = (self.detach(), other.detach());
        if !a.dtype().is_float() && !b.dtype().is_float() {
            let rest = match mode {
                RoundingMode::Trunc => a.fmod(&b),
                RoundingMode::Floor => a.remainder(&b),
            };
            // `a - rest` is a multiple of `b`: the f64 quotient is exact
            // below 2^53.
            let q = &(&a - &rest).to_dtype(DType::F64) / &b.to_dtype(DType::F64);
            return q.to_dtype(DType::promote(a.dtype(), b.dtype()));
        }
        match mode {
            RoundingMode::Trunc => (&a / &b).trunc(),
            RoundingMode::Floor => floor_quotient(&a, &b),
        }
    }

    /// `self / other` rounded toward -inf (`torch.floor_divide`, Python's
    /// `//`): [`Tensor::div_rounding`] with [`RoundingMode::Floor`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![7i64, -7], &[2]);
    /// assert_eq!(i.floor_divide(&Tensor::scalar(2i64)).to_vec::<i64>(), vec![3, -4]);
    /// ```
    #[doc(alias = "div_floor")]
    #[track_caller]
    pub fn floor_divide(&self, other: &Tensor) -> Tensor {
        self.div_rounding(other, RoundingMode::Floor)
    }
}

/// The floor of `a / b` for floats, PyTorch's formula: `(a - fmod(a, b)) /
/// b` moved down by one where the remainder's sign is not `b`'s, then
/// rounded to the nearest integer (the quotient is an integer up to its
/// rounding); a zero quotient keeps the sign of `a / b`, and a zero `b`
/// gives `a / b`.
fn floor_quotient(a: &Tensor, b: &Tensor) -> Tensor {
    let rest = a.fmod(b);
    let q = &(a - &rest) / b;
    let wrong_side = rest
        .ne_scalar(0.0)
        .logical_and(&b.lt_scalar(0.0).logical_xor(&rest.lt_scalar(0.0)));
    let q = Tensor::where_(&wrong_side, &(&q - 1.0), &q);
    let down = q.floor();
    let nearest = Tensor::where_(&(&q - &down).gt_scalar(0.5), &(&down + 1.0), &down);
    let quotient = a / b;
    // `a / b` is finite where `q` is 0, so this is a zero of its sign.
    let signed_zero = &quotient * 0.0;
    let q = Tensor::where_(&q.ne_scalar(0.0), &nearest, &signed_zero);
    Tensor::where_(&b.eq_scalar(0.0), &quotient, &q)
}
