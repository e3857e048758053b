//! Bitwise ops: `bitwise_and`, `bitwise_or`, `bitwise_xor`, `bitwise_not`,
//! the shifts and `gcd` / `lcm`, with the operators `&`, `|`, `^`, `!`,
//! `<<` and `>>` (between tensors, or a tensor and an `i64`). Bool masks
//! take the logical ops; integer tensors the integer-only kernel rows,
//! promoted as PyTorch's (uint8 with int64 is int64, bool with an integer
//! is that integer); floats are refused, as PyTorch refuses them. Nothing
//! here has a gradient.

use super::binary::apply;
use crate::trace;
use crate::{DType, Tensor};
use tapir_kernels::elementwise::{
    BinaryFn, BitAnd, BitNot, BitOr, BitXor, Gcd, Lcm, ShiftLeft, ShiftRight,
};

impl Tensor {
    /// Elementwise and, broadcast (`torch.bitwise_and`, `a & b`): of bits
    /// for integers, logical for two bool masks.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], &[3]);
    /// let inside = &x.gt_scalar(0.0) & &x.lt_scalar(1.0);
    /// assert_eq!(inside.to_vec::<bool>(), vec![false, true, false]);
    /// let flags = Tensor::from_vec(vec![6i64, 5], &[2]);
    /// assert_eq!((&flags & 3).to_vec::<i64>(), vec![2, 1]);
    /// ```
    #[track_caller]
    pub fn bitwise_and(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, BitAnd, Some(Tensor::logical_and))
    }

    /// Elementwise or, broadcast (`torch.bitwise_or`, `a | b`); see
    /// [`Tensor::bitwise_and`].
    #[track_caller]
    pub fn bitwise_or(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, BitOr, Some(Tensor::logical_or))
    }

    /// Elementwise exclusive or, broadcast (`torch.bitwise_xor`, `a ^ b`);
    /// see [`Tensor::bitwise_and`].
    #[track_caller]
    pub fn bitwise_xor(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, BitXor, Some(Tensor::logical_xor))
    }

    /// Every bit flipped (`torch.bitwise_not`, `~x` in PyTorch, `!x`
    /// here): `!5` is -6 in int64 and 250 in uint8; a bool mask is
    /// negated.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let bytes = Tensor::from_vec(vec![5u8, 0], &[2]);
    /// assert_eq!((!&bytes).to_vec::<u8>(), vec![250, 255]);
    /// assert_eq!((!Tensor::from_vec(vec![true], &[1])).to_vec::<bool>(), vec![false]);
    /// ```
    #[track_caller]
    pub fn bitwise_not(&self) -> Tensor {
        assert!(
            !self.dtype().is_float(),
            "bitwise_not: takes an integer or bool tensor, got {} (bitwise ops are not defined on floats)",
            self.dtype()
        );
        if self.dtype() == DType::Bool {
            return self.logical_not();
        }
        trace::op("bitwise_not", [self], Vec::new, || {
            super::unary::map(&self.detach(), &BitNot)
        })
    }

    /// `self << other`, broadcast (`torch.bitwise_left_shift`): bits
    /// shifted out are dropped, a shift outside `0..64` gives 0, and a
    /// uint8 result keeps its low 8 bits, as PyTorch's. Integers only.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, -3], &[2]);
    /// assert_eq!((&x << 4).to_vec::<i64>(), vec![16, -48]);
    /// ```
    #[track_caller]
    pub fn bitwise_left_shift(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, ShiftLeft, None)
    }

    /// `self >> other`, broadcast (`torch.bitwise_right_shift`):
    /// arithmetic, so the sign fills in, and a shift outside `0..64` leaves
    /// only the sign (-1 or 0), as PyTorch's. Integers only.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![-7i64, 200], &[2]);
    /// assert_eq!((&x >> 1).to_vec::<i64>(), vec![-4, 100]);
    /// ```
    #[track_caller]
    pub fn bitwise_right_shift(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, ShiftRight, None)
    }

    /// The greatest common divisor, elementwise and broadcast
    /// (`torch.gcd`): non-negative, `gcd(0, 0) = 0`. Integers only.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![-12i64, 7, 0], &[3]);
    /// let b = Tensor::from_vec(vec![18i64, -21, 0], &[3]);
    /// assert_eq!(a.gcd(&b).to_vec::<i64>(), vec![6, 7, 0]);
    /// ```
    #[track_caller]
    pub fn gcd(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, Gcd, None)
    }

    /// The least common multiple, elementwise and broadcast (`torch.lcm`):
    /// non-negative, 0 when either is 0. Integers only.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![-4i64, 0], &[2]);
    /// assert_eq!(a.lcm(&Tensor::from_vec(vec![6i64, 3], &[2])).to_vec::<i64>(), vec![12, 0]);
    /// ```
    #[track_caller]
    pub fn lcm(&self, other: &Tensor) -> Tensor {
        self.bitwise(other, Lcm, None)
    }

    /// `op` over two integer tensors, or `masks` over two bool masks
    /// (`None`: bools refused, as PyTorch's shifts, gcd and lcm).
    #[track_caller]
    fn bitwise<F: BinaryFn>(
        &self,
        other: &Tensor,
        op: F,
        masks: Option<fn(&Tensor, &Tensor) -> Tensor>,
    ) -> Tensor {
        let name = F::NAME;
        no_floats(name, self, other);
        let bools = (self.dtype() == DType::Bool, other.dtype() == DType::Bool);
        match masks {
            Some(logical) if bools == (true, true) => return logical(self, other),
            None => assert!(
                !bools.0 && !bools.1,
                "{name}: takes integer tensors, got {} and {}",
                self.dtype(),
                other.dtype()
            ),
            _ => {}
        }
        trace::op(name, [self, other], Vec::new, || {
            apply(&self.detach(), &other.detach(), &op, name, false)
        })
    }

    /// `value` as a 0-d tensor for a bitwise op with `self`: of `self`'s
    /// integer dtype (as PyTorch, a Python int does not widen uint8, and
    /// wraps into it: `-1` is 255), int64 beside a bool mask.
    fn integer_scalar(&self, value: i64) -> Tensor {
        let (dtype, value) = match self.dtype() {
            DType::Bool => (DType::I64, value),
            DType::U8 => (DType::U8, value.rem_euclid(256)),
            d => (d, value),
        };
        super::creation::filled_on(&[], value as f64, dtype, self.device())
    }
}

/// Panics, naming `op`, where either operand is a float tensor.
#[track_caller]
fn no_floats(op: &str, a: &Tensor, b: &Tensor) {
    assert!(
        !a.dtype().is_float() && !b.dtype().is_float(),
        "{op}: takes integer or bool tensors, got {} and {} (bitwise ops are not defined on floats)",
        a.dtype(),
        b.dtype()
    );
}

/// An operator between tensors (borrowed or owned) and with an `i64` on
/// the right. `i64`s beyond ±2^53 are not exact here: pass a tensor.
macro_rules! bitwise_operator {
    ($Trait:ident, $method:ident, $f:ident) => {
        impl std::ops::$Trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$f(self, rhs)
            }
        }
        impl std::ops::$Trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$f(&self, &rhs)
            }
        }
        impl std::ops::$Trait<i64> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: i64) -> Tensor {
                Tensor::$f(self, &self.integer_scalar(rhs))
            }
        }
        impl std::ops::$Trait<i64> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: i64) -> Tensor {
                Tensor::$f(&self, &self.integer_scalar(rhs))
            }
        }
    };
}

bitwise_operator!(BitAnd, bitand, bitwise_and);
bitwise_operator!(BitOr, bitor, bitwise_or);
bitwise_operator!(BitXor, bitxor, bitwise_xor);
bitwise_operator!(Shl, shl, bitwise_left_shift);
bitwise_operator!(Shr, shr, bitwise_right_shift);

impl std::ops::Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}

impl std::ops::Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
