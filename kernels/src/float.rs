//! The floating-point element trait that generic kernels compute in.

/// A float type kernels compute in (f32 and f64; f16/bf16 are upcast to f32).
///
/// ```
/// use tapir_kernels::Float;
/// assert!((Float::erf(0.5f64) - 0.520_499_877_813_046_5).abs() < 1e-15);
/// ```
pub trait Float:
    num_traits::Float + Default + Send + Sync + std::fmt::Debug + std::iter::Sum + 'static
{
    /// The error function.
    fn erf(self) -> Self;
    /// Conversion from f64 (rounds for f32).
    fn from_f64(v: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
}

impl Float for f32 {
    #[inline]
    fn erf(self) -> Self {
        libm::erff(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    #[inline]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
}
