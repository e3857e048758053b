//! Signs: `copysign` (a kernel row, since only the sign bit tells -0.0
//! and a negative NaN apart), `signbit` (copysign of 1, compared) and
//! `heaviside` (a composition, without gradient as in PyTorch).

use super::binary::binary;
use super::math::floating;
use crate::trace;
use crate::{DType, Tensor};
use tapir_kernels::elementwise as ew;

impl Tensor {
    /// `self`'s magnitude with `other`'s sign, broadcast
    /// (`torch.copysign`); the sign is the sign bit, so -0.0 and a
    /// negative NaN count as negative. Integers are promoted to float.
    /// The gradient is PyTorch's: `result / self` for `self` (0 where
    /// `self` is 0), zeros for `other`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]);
    /// let s = Tensor::from_vec(vec![-1.0f32, 5.0, -0.0], &[3]);
    /// assert_eq!(x.copysign(&s).to_vec::<f32>(), vec![-1.0, 2.0, -3.0]);
    /// ```
    pub fn copysign(&self, other: &Tensor) -> Tensor {
        trace::op("copysign", [self, other], Vec::new, || {
            let (a, b) = (floating(self), floating(other));
            binary(
                &a,
                &b,
                ew::Copysign,
                "CopysignBackward0",
                true,
                true,
                |s, g, n| {
                    let (a, b) = s.expect("copysign saves its inputs");
                    let ratio = &a.copysign(b) / a;
                    let ratio = ratio.masked_fill(&a.eq_scalar(0.0), 0.0);
                    // PyTorch's gradient for `other` is zeros, not none.
                    let zeros =
                        || super::creation::filled_on(b.shape(), 0.0, g.dtype(), g.device());
                    [
                        n[0].then(|| (g * &ratio).to_dtype(g.dtype())),
                        n[1].then(zeros),
                    ]
                },
            )
        })
    }

    /// Whether the sign bit is set (`torch.signbit`): true for negative
    /// numbers, -0.0 and a negative NaN; for integers, `x < 0`. No
    /// gradient (a bool).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.0, -0.0, 2.0], &[4]);
    /// assert_eq!(x.signbit().to_vec::<bool>(), vec![true, false, true, false]);
    /// ```
    pub fn signbit(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.detach().lt_scalar(0.0);
        }
        let one = super::creation::filled_on(&[], 1.0, self.dtype(), self.device());
        one.copysign(&self.detach()).lt_scalar(0.0)
    }

    /// The Heaviside step (`torch.heaviside(input, values)`): 0 where
    /// `self < 0`, 1 where `self > 0`, `values` (broadcast) where `self`
    /// is zero of either sign; NaN gives 0, as PyTorch's. Both must have
    /// one dtype, as in PyTorch. No gradient (PyTorch has none).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 0.0, 2.0], &[3]);
    /// let h = x.heaviside(&Tensor::scalar(0.5f32));
    /// assert_eq!(h.to_vec::<f32>(), vec![0.0, 0.5, 1.0]);
    /// ```
    #[track_caller]
    pub fn heaviside(&self, values: &Tensor) -> Tensor {
        assert!(
            self.dtype() == values.dtype(),
            "heaviside: input and values must have one dtype, got {} and {}",
            self.dtype(),
            values.dtype()
        );
        let (x, values) = (self.detach(), values.detach());
        let dtype = self.dtype();
        let step = if dtype == DType::Bool {
            x.clone()
        } else {
            x.gt_scalar(0.0).to_dtype(dtype)
        };
        Tensor::where_(&x.eq_scalar(0.0), &values, &step)
    }
}
