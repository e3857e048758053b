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
    /// Eigen's rational approximation (a few ulp), branch-free so loops
    /// vectorise; libm's `erff` is scalar and was 18% of a GELU MLP step.
    #[inline]
    fn erf(self) -> Self {
        let x = self.clamp(-4.0, 4.0);
        let x2 = x * x;
        let mut a = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
        a = a * x2 - 2.101_024e-6;
        a = a * x2 - 5.692_506_4e-5;
        a = a * x2 - 7.349_906_3e-4;
        a = a * x2 - 2.954_600_2e-3;
        a = a * x2 - 1.609_603_3e-2;
        let mut b = x2 * -1.456_607_2e-5 - 2.133_740_6e-4;
        b = b * x2 - 1.682_827e-3;
        b = b * x2 - 7.373_329_3e-3;
        b = b * x2 - 1.426_474e-2;
        if self.is_nan() { self } else { x * a / b }
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
