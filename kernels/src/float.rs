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
    /// The complementary error function `1 - erf(x)`, precise where it is
    /// small (libm's).
    fn erfc(self) -> Self;
    /// `ln |Γ(x)|` (libm's; ∞ at the poles, the non-positive integers).
    fn lgamma(self) -> Self;
    /// `exp`, written so that a loop of it vectorises (libm's is a scalar
    /// call): for f32 [`Float::exp_mid`] from `ln(f32::MIN_POSITIVE)`
    /// (about -87.34) to 88.37, 0 below, `inf` above (not from 88.72 on,
    /// where `exp` overflows: the few lanes between would cost every lane
    /// a second scaling), NaN for NaN; for f64 libm's `exp`.
    fn fast_exp(self) -> Self;
    /// [`Float::vec_exp`], bit for bit, where [`Float::beyond_exp_mid`] is
    /// false (for f32 from -87.6 to 88.37, beyond which `e^x` needs two
    /// scalings by powers of two): 16 vector instructions a lane for f32
    /// against `vec_exp`'s 26. What the `exp` op runs over a dense slice,
    /// with `vec_exp` on the rare elements beyond. For f64 libm's `exp`.
    fn exp_mid(self) -> Self;
    /// Whether [`Float::exp_mid`] is not `exp` at `self`: for f32 |x| >= 87
    /// and NaN; for f64 never.
    fn beyond_exp_mid(self) -> bool;
    /// `exp` as [`Float::fast_exp`] computes it, with subnormal results too
    /// (down to about -103.97 for f32, below which `exp` rounds to 0):
    /// within 1 ulp of the correctly rounded `exp` over every f32 (a full
    /// sweep: `TAPIR_FULL_SWEEP=1`), the bound of PyTorch's vectorised CPU `exp` (Sleef's
    /// `u10`). What the `exp` op runs: libm's `expf` took 2.7 ns an
    /// element here. Kernels whose results feed further arithmetic (the
    /// softmax rows) keep `fast_exp`, whose 0 below the normal range
    /// spares them subnormal operands. For f64 libm's `exp`.
    fn vec_exp(self) -> Self;
    /// `tanh`, written so that a loop of it vectorises (libm's `tanhf` is a
    /// scalar call, 13 ns an element here): for f32 within 1 ulp of the
    /// correctly rounded `tanh` (the `vecmath` module says how); for f64
    /// libm's `tanh`.
    fn fast_tanh(self) -> Self;
    /// The natural logarithm, written so that a loop of it vectorises: for
    /// f32 within 1 ulp of the correctly rounded `ln` (the `vecmath`
    /// module says how); for f64 libm's.
    fn vec_ln(self) -> Self;
    /// [`Float::vec_ln`], bit for bit, where [`Float::beyond_log_mid`] is
    /// false (for f32 a normal positive finite `x`), without the tests for
    /// the rest: what the `log` op runs over a dense slice, with `vec_ln`
    /// on the rare elements beyond. For f64 libm's `ln`.
    fn ln_mid(self) -> Self;
    /// [`Float::vec_log2`] as [`Float::ln_mid`] is `vec_ln`.
    fn log2_mid(self) -> Self;
    /// [`Float::vec_log10`] as [`Float::ln_mid`] is `vec_ln`.
    fn log10_mid(self) -> Self;
    /// Whether [`Float::ln_mid`], [`Float::log2_mid`] and
    /// [`Float::log10_mid`] are not their logarithms at `self`: for f32
    /// zero, subnormal, negative, infinite or NaN; for f64 never.
    fn beyond_log_mid(self) -> bool;
    /// The base-2 logarithm as [`Float::vec_ln`] computes it (exact at
    /// powers of two).
    fn vec_log2(self) -> Self;
    /// The base-10 logarithm as [`Float::vec_ln`] computes it.
    fn vec_log10(self) -> Self;
    /// `ln(1 + x)` as [`Float::vec_ln`] computes it, precise near 0.
    fn vec_ln_1p(self) -> Self;
    /// `e^x - 1` as [`Float::vec_ln`] computes the logarithm, precise
    /// near 0.
    fn vec_expm1(self) -> Self;
    /// The hyperbolic sine as [`Float::vec_ln`] computes the logarithm.
    fn vec_sinh(self) -> Self;
    /// The hyperbolic cosine as [`Float::vec_ln`] computes the logarithm.
    fn vec_cosh(self) -> Self;
    /// `self^e`, written so that a loop of it vectorises: for f32 within
    /// 1 ulp of the correctly rounded power (computed in f64, as
    /// `vec_expm1`), with C99's special values; for f64 libm's `powf`.
    fn vec_powf(self, e: Self) -> Self;
    /// [`Float::vec_powf`] where [`Float::beyond_fast_powf`] is false,
    /// with no branch or call, so a loop of it vectorises.
    fn fast_powf(self, e: Self) -> Self;
    /// Whether `fast_powf` is not `vec_powf` at `(self, e)`: for f32 a
    /// zero, infinite or NaN `self`, a negative one to a non-integer power,
    /// an infinite or NaN `e`; for f64 never (libm's `powf`).
    fn beyond_fast_powf(self, e: Self) -> bool;
    /// The arctangent as [`Float::vec_ln`] computes the logarithm.
    fn vec_atan(self) -> Self;
    /// The arcsine (NaN outside [-1, 1]) as [`Float::vec_ln`] computes
    /// the logarithm.
    fn vec_asin(self) -> Self;
    /// The arccosine (NaN outside [-1, 1]) as [`Float::vec_ln`] computes
    /// the logarithm.
    fn vec_acos(self) -> Self;
    /// The sine, written so that a loop of it vectorises: for f32 within
    /// 1 ulp of the correctly rounded `sin` for every f32 (an exact
    /// reduction at any magnitude); for f64 libm's.
    fn vec_sin(self) -> Self;
    /// The cosine as [`Float::vec_sin`] computes the sine.
    fn vec_cos(self) -> Self;
    /// [`Float::vec_sin`] where [`Float::beyond_fast_trig`] is false, with
    /// no branch or call, so a loop of it vectorises.
    fn fast_sin(self) -> Self;
    /// [`Float::vec_cos`] as [`Float::fast_sin`] computes the sine.
    fn fast_cos(self) -> Self;
    /// The tangent as [`Float::vec_sin`] computes the sine.
    fn vec_tan(self) -> Self;
    /// [`Float::vec_tan`] as [`Float::fast_sin`] computes the sine.
    fn fast_tan(self) -> Self;
    /// Whether `fast_sin`, `fast_cos` and `fast_tan` are not exact at `self`: for f32
    /// |x| >= 2^22, ±∞ and NaN; for f64 never (libm's functions).
    fn beyond_fast_trig(self) -> bool;
    /// Conversion from f64 (rounds for f32).
    fn from_f64(v: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
}

impl Float for f32 {
    /// Eigen's rational approximation (a few ulp), branch-free so loops
    /// vectorise; libm's `erff` is scalar and was 18% of a GELU MLP step.
    /// Its polynomials step by fused multiply-adds, as Eigen's do on FMA
    /// hardware: `mul_add` rounds once on every path, so the bits do not
    /// depend on the CPU, and a GELU runs 18% faster than by separate
    /// products and sums (0.36 against 0.44 ns an element on one Zen 5
    /// core). Outside `threads::simd` on an x86 build without FMA each
    /// step is a libm call (31 against 4 ns a value); the maps call it
    /// inside.
    #[inline]
    fn erf(self) -> Self {
        let x = self;
        let x2 = x * x;
        let mut a = x2.mul_add(-2.726_142_3e-10, 2.770_681_4e-8);
        a = a.mul_add(x2, -2.101_024e-6);
        a = a.mul_add(x2, -5.692_506_4e-5);
        a = a.mul_add(x2, -7.349_906_3e-4);
        a = a.mul_add(x2, -2.954_600_2e-3);
        a = a.mul_add(x2, -1.609_603_3e-2);
        let mut b = x2.mul_add(-1.456_607_2e-5, -2.133_740_6e-4);
        b = b.mul_add(x2, -1.682_827e-3);
        b = b.mul_add(x2, -7.373_329_3e-3);
        b = b.mul_add(x2, -1.426_474e-2);
        let r = x * a / b;
        // From ERF_IS_ONE on, erf rounds to ±1 (the approximation stays 2
        // to 8 ulp short of it up to 4, drifts beyond, and its polynomials
        // overflow past ~1e4): as PyTorch's, `gelu(10.0)` is then 10 and
        // `gelu(-10.0)` -0.
        if self.is_nan() {
            self
        } else if self.abs() >= ERF_IS_ONE {
            1f32.copysign(self)
        } else {
            r
        }
    }
    #[inline(always)]
    fn fast_exp(self) -> Self {
        // Compared, not clamped: NaN fails both tests and stays NaN
        // through `exp_mid`.
        let y = exp_mid(self);
        if self < -87.336_55 {
            0.0 // below ln(f32::MIN_POSITIVE)
        } else if self > EXP_MID_MAX {
            f32::INFINITY
        } else {
            y
        }
    }
    #[inline(always)]
    fn exp_mid(self) -> Self {
        exp_mid(self)
    }
    #[inline(always)]
    fn beyond_exp_mid(self) -> bool {
        self.is_nan() || self.abs() >= 87.0
    }
    #[inline(always)]
    fn vec_exp(self) -> Self {
        exp_above(self, -103.972_08) // ln(2^-150): below, exp rounds to 0
    }
    #[inline(always)]
    fn fast_tanh(self) -> Self {
        crate::vecmath::tanh(self)
    }
    #[inline(always)]
    fn vec_ln(self) -> Self {
        crate::vecmath::ln(self)
    }
    #[inline(always)]
    fn ln_mid(self) -> Self {
        crate::vecmath::log_mid(self, crate::vecmath::Base::E)
    }
    #[inline(always)]
    fn log2_mid(self) -> Self {
        crate::vecmath::log_mid(self, crate::vecmath::Base::Two)
    }
    #[inline(always)]
    fn log10_mid(self) -> Self {
        crate::vecmath::log_mid(self, crate::vecmath::Base::Ten)
    }
    #[inline(always)]
    fn beyond_log_mid(self) -> bool {
        // One unsigned comparison: below MIN_POSITIVE's bits (zero,
        // subnormal) wraps to huge, as do negatives' sign bit and NaN.
        self.to_bits().wrapping_sub(0x0080_0000) >= 0x7F80_0000 - 0x0080_0000
    }
    #[inline(always)]
    fn vec_log2(self) -> Self {
        crate::vecmath::log2(self)
    }
    #[inline(always)]
    fn vec_log10(self) -> Self {
        crate::vecmath::log10(self)
    }
    #[inline(always)]
    fn vec_ln_1p(self) -> Self {
        crate::vecmath::ln_1p(self)
    }
    #[inline(always)]
    fn vec_expm1(self) -> Self {
        crate::vecmath::expm1(self)
    }
    #[inline(always)]
    fn vec_sinh(self) -> Self {
        crate::vecmath::sinh(self)
    }
    #[inline(always)]
    fn vec_cosh(self) -> Self {
        crate::vecmath::cosh(self)
    }
    #[inline(always)]
    fn vec_powf(self, e: Self) -> Self {
        crate::vecmath::powf(self, e)
    }
    #[inline(always)]
    fn fast_powf(self, e: Self) -> Self {
        crate::vecmath::pow_fast(self, e)
    }
    #[inline(always)]
    fn beyond_fast_powf(self, e: Self) -> bool {
        crate::vecmath::pow_rare(self, e)
    }
    #[inline(always)]
    fn vec_atan(self) -> Self {
        crate::vecmath::atan(self)
    }
    #[inline(always)]
    fn vec_asin(self) -> Self {
        crate::vecmath::asin(self)
    }
    #[inline(always)]
    fn vec_acos(self) -> Self {
        crate::vecmath::acos(self)
    }
    #[inline(always)]
    fn vec_sin(self) -> Self {
        crate::vecmath::sin(self)
    }
    #[inline(always)]
    fn vec_cos(self) -> Self {
        crate::vecmath::cos(self)
    }
    #[inline(always)]
    fn fast_sin(self) -> Self {
        crate::vecmath::sin_fast(self)
    }
    #[inline(always)]
    fn fast_cos(self) -> Self {
        crate::vecmath::cos_fast(self)
    }
    #[inline(always)]
    fn vec_tan(self) -> Self {
        crate::vecmath::tan(self)
    }
    #[inline(always)]
    fn fast_tan(self) -> Self {
        crate::vecmath::tan_fast(self)
    }
    #[inline(always)]
    fn beyond_fast_trig(self) -> bool {
        self.is_nan() || self.abs() >= crate::vecmath::TRIG_FAST_BELOW
    }
    #[inline]
    fn erfc(self) -> Self {
        libm::erfcf(self)
    }
    #[inline]
    fn lgamma(self) -> Self {
        libm::lgammaf(self)
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

/// The least f32 whose erf rounds to 1 (erf(3.919206) = 1 - 2.98e-8).
const ERF_IS_ONE: f32 = 3.919_206;
/// 1.5 * 2^23: added to |v| < 2^22 and subtracted, it rounds `v` to an
/// integer, which the sum's low bits hold.
pub(crate) const ROUND_SHIFT: f32 = 12_582_912.0;
/// ln 2 in two parts (Cody-Waite): `EXP_LN2_HI` has few enough bits that
/// `n * EXP_LN2_HI` is exact for the `n` of any f32 `exp`; the second is
/// `EXP_LN2_HI - ln 2`, so `x - n * HI + n * LO_NEG` is `x - n ln 2`.
pub(crate) const EXP_LN2_HI: f32 = 0.693_359_4;
/// See [`EXP_LN2_HI`].
pub(crate) const EXP_LN2_LO_NEG: f32 = 2.121_944_4e-4;
/// Cephes' polynomial `p` (highest degree first) of
/// `e^r = 1 + r + r² p(r)` for |r| <= ln2 / 2.
pub(crate) const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];

/// `(e^r, shifted)` for `x` in [-104, 89]: `e^x = e^r * 2^n`, with the
/// integer `n` in the low bits of `shifted` (1.5 * 2^23 + n). Fused
/// multiply-adds throughout: one rounding each, and one instruction each
/// inside [`crate::threads::simd`] (outside it, a libm call: every caller
/// runs its loop there).
#[inline(always)]
fn exp_reduced(x: f32) -> (f32, f32) {
    let shifted = x.mul_add(std::f32::consts::LOG2_E, ROUND_SHIFT);
    let n = shifted - ROUND_SHIFT;
    let r = n.mul_add(EXP_LN2_LO_NEG, n.mul_add(-EXP_LN2_HI, x));
    let mut p = EXP_P[0];
    for c in &EXP_P[1..] {
        p = p.mul_add(r, *c);
    }
    ((p * r).mul_add(r, r) + 1.0, shifted)
}

/// The largest f32 `x` whose `n = round(x / ln 2)` is at most 127, so that
/// `2^n` is a normal f32.
const EXP_MID_MAX: f32 = 88.376_27;

/// `e^x` for x in [-87.6, 88.37] (`n` in [-126, 127]), NaN for NaN: the
/// reduction and polynomial of [`exp_reduced`] and one product by `2^n`,
/// a normal f32 built from `n`'s bits. The product rounds once, also
/// where `e^x` is subnormal (n = -126), so this equals [`exp_above`] in
/// range, bit for bit.
#[inline(always)]
pub(crate) fn exp_mid(x: f32) -> f32 {
    let (y, shifted) = exp_reduced(x);
    // The low 9 bits of `shifted` (1.5 * 2^23 + n) are n mod 512; shifted
    // into the exponent field with the bias they are 2^n. A NaN `x` makes
    // `y` NaN, whatever this scale is.
    let scale = (shifted.to_bits() << 23).wrapping_add(127 << 23);
    y * f32::from_bits(scale)
}

/// `exp(x)` for `x >= min` (0 below), branch-free so loops vectorise: a
/// Cephes polynomial, within 1 ulp for normal results; `min` down to
/// -103.97 gives subnormal ones, rounded once.
#[inline(always)]
fn exp_above(this: f32, min: f32) -> f32 {
    // exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 with ln 2
    // split in two (Cody-Waite) so r is exact to f32. The rounding adds
    // and subtracts 1.5 * 2^23 instead of calling `round`, which before
    // SSE4.1 is a libm call and would stop the loop vectorising.
    const MAX: f32 = 88.722_83; // ln(f32::MAX)
    let x = this.clamp(min, MAX);
    let (y, shifted) = exp_reduced(x);
    // 2^n in two halves, so n = 128 (x near MAX) and n down to -150 (a
    // subnormal result) stay representable: 2^(n - h) * 2^h with h = n / 2,
    // the last product rounding once. The integer n is read from the low
    // bits of `shifted` (1.5 * 2^23 + n): `n as i32` saturates, which LLVM
    // does one lane at a time.
    let n = shifted.to_bits() as i32 - 0x4B40_0000;
    let h = n >> 1;
    let two_to = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    let y = y * two_to(n - h) * two_to(h);
    if this.is_nan() {
        this
    } else if this < min {
        0.0
    } else if this > MAX {
        f32::INFINITY
    } else {
        y
    }
}

impl Float for f64 {
    #[inline]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline(always)]
    fn fast_exp(self) -> Self {
        self.exp()
    }
    #[inline(always)]
    fn exp_mid(self) -> Self {
        self.exp()
    }
    #[inline(always)]
    fn beyond_exp_mid(self) -> bool {
        false
    }
    #[inline(always)]
    fn vec_exp(self) -> Self {
        self.exp()
    }
    #[inline(always)]
    fn fast_tanh(self) -> Self {
        self.tanh()
    }
    #[inline(always)]
    fn vec_ln(self) -> Self {
        self.ln()
    }
    #[inline(always)]
    fn ln_mid(self) -> Self {
        self.ln()
    }
    #[inline(always)]
    fn log2_mid(self) -> Self {
        self.log2()
    }
    #[inline(always)]
    fn log10_mid(self) -> Self {
        self.log10()
    }
    #[inline(always)]
    fn beyond_log_mid(self) -> bool {
        false
    }
    #[inline(always)]
    fn vec_log2(self) -> Self {
        self.log2()
    }
    #[inline(always)]
    fn vec_log10(self) -> Self {
        self.log10()
    }
    #[inline(always)]
    fn vec_ln_1p(self) -> Self {
        self.ln_1p()
    }
    #[inline(always)]
    fn vec_expm1(self) -> Self {
        self.exp_m1()
    }
    #[inline(always)]
    fn vec_sinh(self) -> Self {
        self.sinh()
    }
    #[inline(always)]
    fn vec_cosh(self) -> Self {
        self.cosh()
    }
    #[inline(always)]
    fn vec_powf(self, e: Self) -> Self {
        self.powf(e)
    }
    #[inline(always)]
    fn fast_powf(self, e: Self) -> Self {
        self.powf(e)
    }
    #[inline(always)]
    fn beyond_fast_powf(self, _e: Self) -> bool {
        false
    }
    #[inline(always)]
    fn vec_atan(self) -> Self {
        self.atan()
    }
    #[inline(always)]
    fn vec_asin(self) -> Self {
        self.asin()
    }
    #[inline(always)]
    fn vec_acos(self) -> Self {
        self.acos()
    }
    #[inline(always)]
    fn vec_sin(self) -> Self {
        self.sin()
    }
    #[inline(always)]
    fn vec_cos(self) -> Self {
        self.cos()
    }
    #[inline(always)]
    fn fast_sin(self) -> Self {
        self.sin()
    }
    #[inline(always)]
    fn fast_cos(self) -> Self {
        self.cos()
    }
    #[inline(always)]
    fn vec_tan(self) -> Self {
        self.tan()
    }
    #[inline(always)]
    fn fast_tan(self) -> Self {
        self.tan()
    }
    #[inline(always)]
    fn beyond_fast_trig(self) -> bool {
        false
    }
    #[inline]
    fn erfc(self) -> Self {
        libm::erfc(self)
    }
    #[inline]
    fn lgamma(self) -> Self {
        libm::lgamma(self)
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

#[cfg(test)]
mod tests {
    use super::{EXP_MID_MAX, Float};

    /// Distance in units in the last place between two finite f32.
    fn ulps(a: f32, b: f32) -> u32 {
        let key = |x: f32| {
            let b = x.to_bits() as i32;
            if b < 0 { i32::MIN - b } else { b }
        };
        key(a).abs_diff(key(b))
    }

    /// f32 `erf` within 8 ulp (and 5e-7) of f64 libm's over [-6, 6], odd,
    /// ±1 exactly where libm's rounds to ±1, NaN to NaN; and the same bits from a
    /// vectorised map as from scalar calls (`mul_add` fuses on both).
    #[test]
    fn erf_is_within_eight_ulp_of_libm_and_the_same_bits_vectorised() {
        let steps = 1_200_000;
        let xs: Vec<f32> = (0..=steps)
            .map(|i| (-6.0 + 12.0 * i as f64 / steps as f64) as f32)
            .collect();
        let (mut worst, mut worst_abs) = ((0, 0.0f32), 0.0f64);
        for &x in &xs {
            let want = Float::erf(x as f64);
            let got = Float::erf(x);
            let d = ulps(got, want as f32);
            if d > worst.0 {
                worst = (d, x);
            }
            worst_abs = worst_abs.max((got as f64 - want).abs());
            assert_eq!(Float::erf(-x).to_bits(), (-got).to_bits(), "erf(-{x})");
        }
        assert!(worst.0 <= 8, "{} ulp at x = {}", worst.0, worst.1);
        assert!(worst_abs <= 5e-7, "{worst_abs:e} absolute");
        // ±1 exactly from where the correctly rounded erf is, not before.
        let below = f32::from_bits(super::ERF_IS_ONE.to_bits() - 1);
        assert!(Float::erf(below) < 1.0 && Float::erf(below as f64) as f32 != 1.0);
        for x in [super::ERF_IS_ONE, 10.0, 1e30, f32::INFINITY] {
            assert_eq!(Float::erf(x), 1.0, "erf({x})");
            assert_eq!(Float::erf(-x), -1.0, "erf(-{x})");
            assert_eq!(Float::erf(x as f64) as f32, 1.0, "libm's erf({x})");
        }
        assert!(Float::erf(f32::NAN).is_nan());
        let layout = crate::Layout::contiguous(&[xs.len()]);
        let mapped = crate::cpu::map(&xs, &layout, |x: f32| Float::erf(x));
        for (&x, y) in xs.iter().zip(mapped) {
            let scalar = std::hint::black_box(x);
            assert_eq!(y.to_bits(), Float::erf(scalar).to_bits(), "erf({x})");
        }
    }

    #[test]
    fn fast_tanh_is_within_one_ulp_of_tanh() {
        let (mut worst, mut worst_abs) = ((0, 0.0f32), 0.0f64);
        let steps = 2_000_000;
        for i in 0..=steps {
            let x = -12.0 + 24.0 * i as f32 / steps as f32;
            let exact = (x as f64).tanh();
            let d = ulps(x.fast_tanh(), exact as f32);
            if d > worst.0 {
                worst = (d, x);
            }
            worst_abs = f64::max(worst_abs, (x.fast_tanh() as f64 - exact).abs());
        }
        println!(
            "fast_tanh: {} ulp at x = {}, {worst_abs:e} absolute",
            worst.0, worst.1
        );
        assert!(worst.0 <= 1, "{} ulp at x = {}", worst.0, worst.1);
        assert!(worst_abs <= 9e-8, "{worst_abs:e} absolute"); // 1.5 ulp of 1
        assert_eq!(0f32.fast_tanh(), 0.0);
        assert_eq!(f32::INFINITY.fast_tanh(), 1.0);
        assert_eq!(f32::NEG_INFINITY.fast_tanh(), -1.0);
        assert!(f32::NAN.fast_tanh().is_nan());
    }

    /// Every 61st f32 from -104 to 89 (every one with
    /// `TAPIR_FULL_SWEEP=1`: 2.2 G values, 2 min here), and the specials:
    /// `vec_exp` within 1 ulp of the correctly rounded `exp`, subnormal
    /// results included, and `exp_mid` the same bits wherever
    /// `beyond_exp_mid` is false (and just past that, up to where it
    /// holds: -87.6 and `EXP_MID_MAX`).
    #[test]
    fn vec_exp_is_within_one_ulp_of_exp_for_every_f32() {
        let full = std::env::var("TAPIR_FULL_SWEEP").is_ok_and(|v| v == "1");
        let stride = if full { 1 } else { 61 };
        let mut worst = (0, 0.0f32);
        let mut subnormal = 0;
        let check = |x: f32, worst: &mut (u32, f32)| {
            let want = (x as f64).exp() as f32;
            let got = x.vec_exp();
            if (-87.6..=EXP_MID_MAX).contains(&x) {
                let mid = x.exp_mid();
                assert_eq!(
                    mid.to_bits(),
                    got.to_bits(),
                    "exp_mid({x}) = {mid}, not {got}"
                );
            } else {
                assert!(x.beyond_exp_mid(), "{x} is beyond exp_mid");
            }
            let d = ulps(got, want);
            if d > worst.0 {
                *worst = (d, x);
            }
            want != 0.0 && !want.is_normal()
        };
        for bits in ((-0f32).to_bits()..=(-104f32).to_bits()).step_by(stride) {
            subnormal += check(f32::from_bits(bits), &mut worst) as usize;
        }
        for bits in (0..=89f32.to_bits()).step_by(stride) {
            check(f32::from_bits(bits), &mut worst);
        }
        assert!(worst.0 <= 1, "{} ulp at x = {}", worst.0, worst.1);
        assert!(subnormal > 0, "the sweep reached subnormal results");
        assert_eq!((-103.5f32).vec_exp(), f32::from_bits(1)); // the least subnormal
        assert_eq!((-105f32).vec_exp(), 0.0);
        assert_eq!(f32::NEG_INFINITY.vec_exp(), 0.0);
        assert_eq!(f32::INFINITY.vec_exp(), f32::INFINITY);
        assert_eq!(89f32.vec_exp(), f32::INFINITY);
        assert!(f32::NAN.vec_exp().is_nan());
        assert!(f32::NAN.beyond_exp_mid() && f32::NAN.exp_mid().is_nan());
        assert_eq!(EXP_MID_MAX.exp_mid(), EXP_MID_MAX.vec_exp());
        // The next f32 up rounds n to 128: past `exp_mid`'s range.
        let past = f32::from_bits(EXP_MID_MAX.to_bits() + 1);
        assert_eq!(past.exp_mid(), f32::INFINITY);
        assert!(past.vec_exp().is_finite());
    }

    #[test]
    fn fast_exp_is_within_one_ulp_of_exp_over_its_whole_range() {
        let mut worst = (0, 0.0f32);
        let steps = 2_000_000;
        for i in 0..=steps {
            let x = (-87.3 + (EXP_MID_MAX + 87.3) * i as f32 / steps as f32).min(EXP_MID_MAX);
            let want = (x as f64).exp() as f32;
            let d = ulps(x.fast_exp(), want);
            if d > worst.0 {
                worst = (d, x);
            }
        }
        assert!(worst.0 <= 1, "{} ulp at x = {}", worst.0, worst.1);
        assert_eq!(EXP_MID_MAX.fast_exp(), EXP_MID_MAX.vec_exp());
        assert_eq!((-87.336_55f32).fast_exp(), (-87.336_55f32).vec_exp());
        assert_eq!((-87.4f32).fast_exp(), 0.0);
        assert_eq!(88.4f32.fast_exp(), f32::INFINITY);
        assert_eq!(0f32.fast_exp(), 1.0);
        assert_eq!(f32::NEG_INFINITY.fast_exp(), 0.0);
        assert_eq!((-1000f32).fast_exp(), 0.0);
        assert_eq!(f32::INFINITY.fast_exp(), f32::INFINITY);
        assert_eq!(89f32.fast_exp(), f32::INFINITY);
        assert!(f32::NAN.fast_exp().is_nan());
    }
}
