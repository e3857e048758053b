//! Special functions the elementwise rows need beyond libm: the digamma
//! function, the Hurwitz zeta function (through which polygamma is
//! defined) and the inverse error function, generic over the float type
//! they compute in. `CUDA_SPECIAL` computes them the same way
//! in f32 on the GPU (these are its twins' oracles). PyTorch's values at
//! the poles and outside the domains are kept: ψ(±0) = ∓∞, ψ at a
//! negative integer NaN, ζ(1, q) = ∞, erfinv(±1) = ±∞, NaN beyond.

use crate::Float;

mod bessel;
mod normal;

pub(crate) use bessel::CUDA_BESSEL;
pub use bessel::{bessel_i0, bessel_i0e, bessel_i1, bessel_i1e};
pub(crate) use normal::CUDA_NORMAL;
pub use normal::{erfcx, log_ndtr, ndtri};

fn c<T: Float>(v: f64) -> T {
    T::from_f64(v)
}

/// The inverse hyperbolic sine (`torch.asinh`): libm's below 2^28 in
/// magnitude, `±(ln|x| + ln 2)` from there, where `x² + 1` is `x²` in any
/// float and libm's form (Rust's `asinh`) overflows near the type's
/// largest values (its `asinh(3.4e38f32)` is `inf`, PyTorch's 89.415).
///
/// ```
/// use tapir_kernels::special::asinh;
/// assert_eq!(asinh(0.5f64), 0.5f64.asinh());
/// assert!((asinh(f32::MAX) - 89.415_985).abs() < 1e-4);
/// assert_eq!(asinh(-f32::INFINITY), -f32::INFINITY);
/// ```
pub fn asinh<T: Float>(x: T) -> T {
    let big = c::<T>(268_435_456.0); // 2^28
    if x.abs() < big || x.is_nan() {
        x.asinh()
    } else {
        (x.abs().ln() + c(std::f64::consts::LN_2)).copysign(x)
    }
}

/// The inverse hyperbolic cosine (`torch.acosh`; NaN below 1): libm's
/// below 2^28, `ln x + ln 2` from there (see [`asinh`]; Rust's `acosh`
/// overflows near the largest floats).
///
/// ```
/// use tapir_kernels::special::acosh;
/// assert_eq!(acosh(2.0f64), 2.0f64.acosh());
/// assert!((acosh(f32::MAX) - 89.415_985).abs() < 1e-4);
/// assert!(acosh(0.5f32).is_nan());
/// ```
pub fn acosh<T: Float>(x: T) -> T {
    let big = c::<T>(268_435_456.0);
    if x < big || x.is_nan() {
        x.acosh()
    } else {
        x.ln() + c(std::f64::consts::LN_2)
    }
}

/// The digamma function ψ(x) = Γ'(x) / Γ(x) (`torch.digamma`).
///
/// Negative arguments reflect (ψ(x) = ψ(1 - x) - π / tan(π x), with the
/// tangent taken of the fraction of `x`, which is exact); others step up
/// to at least 10 by ψ(x) = ψ(x + 1) - 1/x and finish with the asymptotic
/// series ln x - 1/(2x) - Σ B₂ₖ / (2k x²ᵏ), seven terms.
///
/// ```
/// use tapir_kernels::special::digamma;
/// let euler_gamma = 0.577_215_664_901_532_9;
/// assert!((digamma(1.0f64) + euler_gamma).abs() < 1e-15);
/// assert_eq!(digamma(0.0f64), f64::NEG_INFINITY);
/// assert!(digamma(-2.0f64).is_nan());
/// ```
pub fn digamma<T: Float>(x: T) -> T {
    if x == T::zero() {
        return if x.is_sign_negative() {
            T::infinity()
        } else {
            T::neg_infinity()
        };
    }
    if x < T::zero() {
        if x == x.trunc() {
            return T::nan();
        }
        let pi = c::<T>(std::f64::consts::PI);
        return digamma(T::one() - x) - pi / (pi * x.fract()).tan();
    }
    let (mut x, mut shift) = (x, T::zero());
    while x < c(10.0) {
        shift = shift - x.recip();
        x = x + T::one();
    }
    let z = (x * x).recip();
    let mut series = c::<T>(1.0 / 12.0);
    for k in [
        691.0 / 32760.0,
        1.0 / 132.0,
        1.0 / 240.0,
        1.0 / 252.0,
        1.0 / 120.0,
    ] {
        series = c::<T>(k) - z * series;
    }
    let series = z * (c::<T>(1.0 / 12.0) - z * series);
    shift + x.ln() - c::<T>(0.5) / x - series
}

/// (2j)! / B₂ⱼ for j = 1..12: the Euler–Maclaurin correction terms'
/// denominators (B the Bernoulli numbers).
const EULER_MACLAURIN: [f64; 12] = [
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1892437580.3183792,
    74724249600.0,
    -2950130727918.164,
    116467828143500.67,
    -4597978722407473.0,
    1.8152105401943546e17,
    -7.166165256175667e18,
];

/// The Hurwitz zeta function ζ(s, q) = Σₖ (q + k)⁻ˢ for s > 1
/// (`torch.special.zeta`): the first terms summed directly until
/// q + k > 9, the rest by the Euler–Maclaurin formula (its integral, half
/// its first term, and up to twelve Bernoulli corrections).
///
/// ```
/// use tapir_kernels::special::zeta;
/// let pi2_6 = std::f64::consts::PI.powi(2) / 6.0;
/// assert!((zeta(2.0f64, 1.0) - pi2_6).abs() < 1e-15);
/// ```
pub fn zeta<T: Float>(s: T, q: T) -> T {
    if s == T::one() {
        return T::infinity();
    }
    if s < T::one() || s.is_nan() || q.is_nan() {
        return T::nan();
    }
    if q <= T::zero() {
        if q == q.floor() {
            return T::infinity();
        }
        if s != s.floor() {
            return T::nan();
        }
    }
    let eps = T::epsilon();
    let mut sum = q.powf(-s);
    let (mut a, mut term, mut i) = (q, T::zero(), 0);
    while i < 9 || a <= c(9.0) {
        i += 1;
        a = a + T::one();
        term = a.powf(-s);
        sum = sum + term;
        if (term / sum).abs() < eps {
            return sum;
        }
    }
    let w = a;
    sum = sum + term * w / (s - T::one()) - c::<T>(0.5) * term;
    let (mut rising, mut k) = (T::one(), T::zero());
    for denominator in EULER_MACLAURIN {
        rising = rising * (s + k);
        term = term / w;
        let t = rising * term / c(denominator);
        sum = sum + t;
        if (t / sum).abs() < eps {
            break;
        }
        k = k + T::one();
        rising = rising * (s + k);
        term = term / w;
        k = k + T::one();
    }
    sum
}

/// The polygamma function ψ⁽ⁿ⁾(x), the n-th derivative of digamma
/// (`torch.polygamma`): digamma for n = 0, else (-1)ⁿ⁺¹ n! ζ(n + 1, x).
///
/// ```
/// use tapir_kernels::special::polygamma;
/// let trigamma_1 = std::f64::consts::PI.powi(2) / 6.0;
/// assert!((polygamma(1, 1.0f64) - trigamma_1).abs() < 1e-15);
/// ```
pub fn polygamma<T: Float>(n: u32, x: T) -> T {
    if n == 0 {
        return digamma(x);
    }
    let factorial: f64 = (1..=n).map(f64::from).product();
    let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
    c::<T>(sign * factorial) * zeta(c(f64::from(n) + 1.0), x)
}

/// The inverse error function (`torch.erfinv`): M. Giles's single-precision
/// polynomial in w = -ln(1 - y²) as the start, then three Newton steps on
/// erf(x) = y, on ln erfc(x) = ln(1 - |y|) beyond |y| = 0.5 (where 1 - |y|
/// is exact and erfc keeps its relative precision), which bring it to the
/// type's precision.
///
/// ```
/// use tapir_kernels::special::erfinv;
/// let x = erfinv(0.5f64);
/// assert!((libm::erf(x) - 0.5).abs() < 1e-16);
/// assert_eq!(erfinv(1.0f64), f64::INFINITY);
/// assert!(erfinv(1.5f64).is_nan());
/// ```
pub fn erfinv<T: Float>(y: T) -> T {
    let a = y.abs();
    if a.is_nan() || a > T::one() {
        return T::nan();
    }
    if a == T::one() {
        return y.signum() * T::infinity();
    }
    let w = -((T::one() - a) * (T::one() + a)).ln();
    let (w, coefficients): (T, [f64; 9]) = if w < c(5.0) {
        let poly = [
            2.810_226_36e-8,
            3.432_739_39e-7,
            -3.523_387_7e-6,
            -4.391_506_54e-6,
            2.185_808_7e-4,
            -1.253_725_03e-3,
            -4.177_681_64e-3,
            2.466_407_27e-1,
            1.501_409_41,
        ];
        (w - c(2.5), poly)
    } else {
        let poly = [
            -2.002_142_57e-4,
            1.009_505_58e-4,
            1.349_343_22e-3,
            -3.673_428_44e-3,
            5.739_507_73e-3,
            -7.622_461_3e-3,
            9.438_870_47e-3,
            1.001_674_06,
            2.832_976_82,
        ];
        (w.sqrt() - c(3.0), poly)
    };
    let mut p = T::zero();
    for k in coefficients {
        p = p * w + c(k);
    }
    let mut x = p * a;
    let slope = c::<T>(std::f64::consts::FRAC_2_SQRT_PI);
    for _ in 0..3 {
        let density = slope * (-x * x).exp();
        x = if a <= c(0.5) {
            x - (x.erf() - a) / density
        } else {
            // On ln erfc, nearly linear in the tail, so the steps hold
            // where the start is least accurate.
            let tail = x.erfc();
            x + (tail.ln() - (T::one() - a).ln()) * tail / density
        };
    }
    x * y.signum()
}

/// The same functions as CUDA device code in f32 (`digamma_f`, `zeta_f`,
/// `polygamma_f`, `erfinv_f`), which the elementwise rows call; appended
/// to the elementwise module's source by `elementwise::cuda_source`.
pub(crate) const CUDA_SPECIAL: &str = r#"
// The special functions as kernels/src/special.rs computes them (there in
// the tensor's type, here in f32): reflection, recurrence to x >= 10 and
// the asymptotic series for digamma; direct sums then Euler-Maclaurin for
// the Hurwitz zeta; Giles's polynomial and Newton steps for erfinv.
__device__ float digamma_f(float x) {
    const float pi = 3.14159265358979323846f;
    if (x == 0.0f) return signbit(x) ? TAPIR_INF : -TAPIR_INF;
    float reflected = 0.0f;
    if (x < 0.0f) {
        if (x == truncf(x)) return __int_as_float(0x7fc00000);
        reflected = -pi / tanf(pi * (x - truncf(x)));
        x = 1.0f - x;
    }
    float shift = 0.0f;
    while (x < 10.0f) { shift -= 1.0f / x; x += 1.0f; }
    float z = 1.0f / (x * x);
    float series = 1.0f / 12.0f;
    series = 691.0f / 32760.0f - z * series;
    series = 1.0f / 132.0f - z * series;
    series = 1.0f / 240.0f - z * series;
    series = 1.0f / 252.0f - z * series;
    series = 1.0f / 120.0f - z * series;
    series = z * (1.0f / 12.0f - z * series);
    return reflected + shift + logf(x) - 0.5f / x - series;
}
__device__ float zeta_f(float s, float q) {
    const float em[12] = {12.0f, -720.0f, 30240.0f, -1209600.0f, 47900160.0f,
        -1892437580.3183792f, 74724249600.0f, -2950130727918.164f, 116467828143500.67f,
        -4597978722407473.0f, 1.8152105401943546e17f, -7.166165256175667e18f};
    const float eps = 1.1920929e-7f;
    if (s == 1.0f) return TAPIR_INF;
    if (s < 1.0f || s != s || q != q) return __int_as_float(0x7fc00000);
    if (q <= 0.0f) {
        if (q == floorf(q)) return TAPIR_INF;
        if (s != floorf(s)) return __int_as_float(0x7fc00000);
    }
    float sum = powf(q, -s), a = q, term = 0.0f;
    int i = 0;
    while (i < 9 || a <= 9.0f) {
        i += 1;
        a += 1.0f;
        term = powf(a, -s);
        sum += term;
        if (fabsf(term / sum) < eps) return sum;
    }
    float w = a;
    sum += term * w / (s - 1.0f) - 0.5f * term;
    float rising = 1.0f, k = 0.0f;
    for (int j = 0; j < 12; j++) {
        rising *= s + k;
        term /= w;
        float t = rising * term / em[j];
        sum += t;
        if (fabsf(t / sum) < eps) break;
        k += 1.0f;
        rising *= s + k;
        term /= w;
        k += 1.0f;
    }
    return sum;
}
__device__ float polygamma_f(float n, float x) {
    if (n == 0.0f) return digamma_f(x);
    float factorial = 1.0f;
    for (int k = 2; k <= (int)n; k++) factorial *= (float)k;
    float sign = ((int)n % 2 == 1) ? 1.0f : -1.0f;
    return sign * factorial * zeta_f(n + 1.0f, x);
}
__device__ float erfinv_f(float y) {
    float a = fabsf(y);
    if (a != a || a > 1.0f) return __int_as_float(0x7fc00000);
    if (a == 1.0f) return copysignf(TAPIR_INF, y);
    float w = -logf((1.0f - a) * (1.0f + a)), p;
    if (w < 5.0f) {
        w -= 2.5f;
        p = 2.81022636e-08f;
        p = 3.43273939e-07f + p * w;
        p = -3.5233877e-06f + p * w;
        p = -4.39150654e-06f + p * w;
        p = 0.00021858087f + p * w;
        p = -0.00125372503f + p * w;
        p = -0.00417768164f + p * w;
        p = 0.246640727f + p * w;
        p = 1.50140941f + p * w;
    } else {
        w = sqrtf(w) - 3.0f;
        p = -0.000200214257f;
        p = 0.000100950558f + p * w;
        p = 0.00134934322f + p * w;
        p = -0.00367342844f + p * w;
        p = 0.00573950773f + p * w;
        p = -0.0076224613f + p * w;
        p = 0.00943887047f + p * w;
        p = 1.00167406f + p * w;
        p = 2.83297682f + p * w;
    }
    float x = p * a;
    for (int step = 0; step < 3; step++) {
        float density = 1.1283791670955126f * expf(-x * x);
        if (a <= 0.5f) {
            x -= (erff(x) - a) / density;
        } else {
            float tail = erfcf(x);
            x += (logf(tail) - logf(1.0f - a)) * tail / density;
        }
    }
    return copysignf(x, y);
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digamma_and_polygamma_satisfy_their_recurrences() {
        for x in [0.3f64, 1.7, 4.2, 11.5, -0.6, -3.25] {
            // ψ⁽ⁿ⁾(x + 1) = ψ⁽ⁿ⁾(x) + (-1)ⁿ n! / xⁿ⁺¹
            let d = digamma(x + 1.0) - digamma(x) - 1.0 / x;
            assert!(
                d.abs() < 1e-13 * (1.0 + digamma(x).abs()),
                "digamma at {x}: {d}"
            );
            if x > 0.0 {
                let t = polygamma(1, x + 1.0) - polygamma(1, x) + 1.0 / (x * x);
                assert!(t.abs() < 1e-12 * polygamma(1, x), "trigamma at {x}: {t}");
                let t = polygamma(2, x + 1.0) - polygamma(2, x) - 2.0 / x.powi(3);
                assert!(
                    t.abs() < 1e-12 * polygamma(2, x).abs(),
                    "polygamma(2) at {x}: {t}"
                );
            }
        }
        // ψ(1/2) = -γ - 2 ln 2.
        let want = -0.577_215_664_901_532_9 - 2.0 * std::f64::consts::LN_2;
        assert!((digamma(0.5f64) - want).abs() < 1e-15);
        assert!((digamma(0.5f32) - want as f32).abs() < 1e-6);
    }

    #[test]
    fn erfinv_inverts_erf_to_the_types_precision() {
        for i in -999..=999 {
            let y = i as f64 / 1000.0;
            let x = erfinv(y);
            assert!((libm::erf(x) - y).abs() <= 2e-16, "erfinv({y}) = {x}");
            let (yf, xf) = (y as f32, erfinv(y as f32));
            let x = erfinv(yf as f64);
            assert!(
                ((xf as f64) - x).abs() <= 4e-7 * (1.0 + x.abs()),
                "f32 erfinv({yf}) = {xf} vs {x}"
            );
        }
        // Deep in the tail, through erfc.
        let y = 1.0 - 1e-12f64;
        let x = erfinv(y);
        let tail = 1.0 - y; // exact (Sterbenz)
        assert!((libm::erfc(x) - tail).abs() < 1e-14 * tail, "{x}");
    }
}
