//! The integer-only elementwise primitives: bitwise ops, shifts, gcd and
//! lcm. They have no float meaning (PyTorch refuses float tensors), so
//! they have no float function, no CUDA row and no twin test: integer
//! tensors compute on the host on every device, as every integer
//! elementwise op. Re-exported from [`crate::elementwise`].
//!
//! ```
//! use tapir_kernels::elementwise::{BinaryFn, ShiftRight};
//! assert_eq!(ShiftRight.i(-8, 64), -1);
//! ```

use crate::Float;
use crate::elementwise::{BinaryFn, UnaryFn};

/// Declares integer-only binary primitives: `f` is unreachable, `i` is
/// the row's function.
macro_rules! integer_rows {
    ($( $(#[$doc:meta])* $name:ident = $k:literal, |$a:ident, $b:ident| $body:expr; )*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
        impl BinaryFn for $name {
            const NAME: &'static str = $k;
            const INT: bool = true;
            fn f<T: Float>(&self, _: T, _: T) -> T {
                unreachable!("{}: an integer-only op has no float path", $k)
            }
            #[inline(always)]
            fn i(&self, $a: i64, $b: i64) -> i64 {
                $body
            }
        }
    )*};
}

integer_rows! {
    /// `a & b`.
    BitAnd = "bitwise_and", |a, b| a & b;
    /// `a | b`.
    BitOr = "bitwise_or", |a, b| a | b;
    /// `a ^ b`.
    BitXor = "bitwise_xor", |a, b| a ^ b;
    /// `a << b`, bits shifted out dropped; 0 for a shift outside
    /// `0..64`, as PyTorch's (a narrower dtype truncates the result).
    ShiftLeft = "bitwise_left_shift", |a, b| if (0..64).contains(&b) { ((a as u64) << b) as i64 } else { 0 };
    /// `a >> b`, arithmetic (the sign fills in); a shift outside `0..64`
    /// leaves only the sign (-1 or 0), as PyTorch's.
    ShiftRight = "bitwise_right_shift", |a, b| if (0..64).contains(&b) { a >> b } else { a >> 63 };
    /// The greatest common divisor, non-negative; `gcd(0, 0) = 0`.
    Gcd = "gcd", |a, b| gcd(a, b);
    /// The least common multiple, non-negative (PyTorch's
    /// `|a / gcd * b|`); 0 when either is 0.
    Lcm = "lcm", |a, b| { let g = gcd(a, b); if g == 0 { 0 } else { (a / g).wrapping_mul(b).wrapping_abs() } };
}

/// Euclid's algorithm on the magnitudes.
fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// `!x`, every bit flipped (`torch.bitwise_not` on integers; integer
/// only, see [`BitAnd`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct BitNot;

impl UnaryFn for BitNot {
    const NAME: &'static str = "bitwise_not";
    const INT: bool = true;
    fn f<T: Float>(&self, _: T) -> T {
        unreachable!("bitwise_not: an integer-only op has no float path")
    }
    #[inline(always)]
    fn i(&self, x: i64) -> i64 {
        !x
    }
}
