//! Element types.

use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor (PyTorch's `torch.dtype`).
///
/// ```
/// use tapir_runtime::DType;
/// assert_eq!(DType::promote(DType::I64, DType::F32), DType::F32);
/// assert_eq!(DType::F16.to_string(), "float16");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float (the default).
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit signed integer (indices, class labels).
    I64,
    /// 8-bit unsigned integer (images).
    U8,
    /// Boolean (masks).
    Bool,
}

impl DType {
    /// PyTorch's name for the dtype, without the `torch.` prefix.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Whether this is a floating-point dtype.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// The lowest and highest finite values (`torch.finfo(dtype).min` and
    /// `.max`; `i64`'s and `u8`'s bounds, 0 and 1 for bool), as f64.
    ///
    /// ```
    /// use tapir_runtime::DType;
    /// assert_eq!(DType::F16.finite_range(), (-65504.0, 65504.0));
    /// ```
    pub fn finite_range(self) -> (f64, f64) {
        match self {
            DType::F32 => (f32::MIN as f64, f32::MAX as f64),
            DType::F64 => (f64::MIN, f64::MAX),
            DType::F16 => (f16::MIN.to_f64(), f16::MAX.to_f64()),
            DType::BF16 => (bf16::MIN.to_f64(), bf16::MAX.to_f64()),
            DType::I64 => (i64::MIN as f64, i64::MAX as f64),
            DType::U8 => (0.0, 255.0),
            DType::Bool => (0.0, 1.0),
        }
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    fn rank(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::U8 => 1,
            DType::I64 => 2,
            DType::F16 | DType::BF16 => 3,
            DType::F32 => 4,
            DType::F64 => 5,
        }
    }

    /// The result dtype of a binary op between two tensors
    /// (`torch.promote_types`).
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        if matches!(
            (a, b),
            (DType::F16, DType::BF16) | (DType::BF16, DType::F16)
        ) {
            return DType::F32;
        }
        if a.rank() >= b.rank() { a } else { b }
    }

    /// The result dtype of an op between two tensors (`torch.result_type`):
    /// as [`DType::promote`], except that a 0-d tensor takes part only when
    /// its category (bool < integer < float) is above the other operand's,
    /// so a float32 tensor times a float64 scalar tensor stays float32, as
    /// in PyTorch.
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::ones(&[3]);
    /// assert_eq!(DType::result_type(&x, &Tensor::scalar(0.5f64)), DType::F32);
    /// assert_eq!(DType::result_type(&Tensor::arange(3), &Tensor::scalar(0.5f64)), DType::F64);
    /// assert_eq!(DType::result_type(&x, &x.to_dtype(DType::F64)), DType::F64);
    /// ```
    pub fn result_type(a: &crate::Tensor, b: &crate::Tensor) -> DType {
        DType::result_type_of((a.dtype(), a.ndim()), (b.dtype(), b.ndim()))
    }

    /// [`DType::result_type`] of operands given as (dtype, number of dims).
    pub(crate) fn result_type_of(a: (DType, usize), b: (DType, usize)) -> DType {
        let (dim, zero) = match (a.1 > 0, b.1 > 0) {
            (true, false) => (a.0, b.0),
            (false, true) => (b.0, a.0),
            _ => return DType::promote(a.0, b.0),
        };
        // PyTorch's combine_categories(dimensioned, zero-dim).
        if dim.is_float() {
            dim
        } else if dim == DType::Bool || zero.is_float() {
            DType::promote(dim, zero)
        } else {
            dim
        }
    }

    /// The dtype an op that needs floats (exp, div, mean, ...) computes in.
    pub fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be a tensor element.
pub trait Element: Copy + Send + Sync + Default + PartialOrd + fmt::Debug + 'static {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// The value as f64 (exact for all but large i64).
    fn to_f64(self) -> f64;
    /// The value from f64 (rounded, or truncated for integers).
    fn from_f64(v: f64) -> Self;
    /// The value as i64 (floats truncated).
    fn to_i64(self) -> i64;
    /// The value from i64.
    fn from_i64(v: i64) -> Self;
}

macro_rules! element {
    ($t:ty, $d:ident, $to:expr, $from:expr, $toi:expr, $fromi:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                $to(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                $toi(self)
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                $fromi(v)
            }
        }
    };
}

element!(
    f32,
    F32,
    |x: f32| x as f64,
    |v: f64| v as f32,
    |x: f32| x as i64,
    |v: i64| v as f32
);
element!(
    f64,
    F64,
    |x: f64| x,
    |v: f64| v,
    |x: f64| x as i64,
    |v: i64| v as f64
);
element!(
    f16,
    F16,
    |x: f16| x.to_f64(),
    f16::from_f64,
    |x: f16| x.to_f64() as i64,
    |v: i64| f16::from_f64(v as f64)
);
element!(
    bf16,
    BF16,
    |x: bf16| x.to_f64(),
    bf16::from_f64,
    |x: bf16| x.to_f64() as i64,
    |v: i64| bf16::from_f64(v as f64)
);
element!(
    i64,
    I64,
    |x: i64| x as f64,
    |v: f64| v as i64,
    |x: i64| x,
    |v: i64| v
);
element!(
    u8,
    U8,
    |x: u8| x as f64,
    |v: f64| v as u8,
    |x: u8| x as i64,
    |v: i64| v as u8
);
element!(
    bool,
    Bool,
    |x: bool| x as u8 as f64,
    |v: f64| v != 0.0,
    |x: bool| x as i64,
    |v: i64| v != 0
);
