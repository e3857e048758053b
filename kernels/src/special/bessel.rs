//! The modified Bessel functions of the first kind of orders 0 and 1, and
//! their exponentially scaled forms (`torch.special.i0`, `i0e`, `i1`,
//! `i1e`), computed in f64 whatever the tensor's type.
//!
//! Up to |x| = 30 each is its power series, whose terms are all positive
//! (no cancellation): I₀(x) = Σ (x²/4)ᵏ / (k!)², I₁(x) = (x/2) Σ (x²/4)ᵏ /
//! (k! (k+1)!). Beyond, Hankel's asymptotic expansion of e⁻ˣ Iᵥ(x) =
//! (2πx)^-½ Σ cₖ, with c₀ = 1 and cₖ = cₖ₋₁ ((2k-1)² - 4ν²) / (8kx); its
//! terms shrink until k ≈ 2x, so at x > 30 they pass 1e-17 of the sum long
//! before they would grow again.

/// Where the power series hands over to the asymptotic expansion.
const SERIES_LIMIT: f64 = 30.0;

/// The power series' sum, `Σ tₖ` with `t₀ = first` and `tₖ = tₖ₋₁ · (x²/4)
/// / (k (k + order))`.
fn power_series(x: f64, first: f64, order: f64) -> f64 {
    let quarter_square = x * x / 4.0;
    let (mut term, mut sum, mut k) = (first, first, 1.0);
    while term > sum * 1e-17 {
        term *= quarter_square / (k * (k + order));
        sum += term;
        k += 1.0;
    }
    sum
}

/// `e⁻ˣ Iᵥ(x)` for x > [`SERIES_LIMIT`] (or ∞) by Hankel's expansion.
fn scaled_asymptotic(x: f64, order: f64) -> f64 {
    let four_nu_sq = 4.0 * order * order;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in 1..=60 {
        let k = k as f64;
        let odd = 2.0 * k - 1.0;
        term *= (odd * odd - four_nu_sq) / (8.0 * k * x);
        sum += term;
        if term.abs() <= sum.abs() * 1e-17 {
            break;
        }
    }
    sum / (2.0 * std::f64::consts::PI * x).sqrt()
}

/// `I₀(x)`, even, e^|x|-sized (∞ past |x| ≈ 713).
///
/// ```
/// use tapir_kernels::special::bessel_i0;
/// assert_eq!(bessel_i0(0.0), 1.0);
/// assert!((bessel_i0(1.0) - 1.266_065_877_752_008_4).abs() < 1e-15);
/// ```
pub fn bessel_i0(x: f64) -> f64 {
    let a = x.abs();
    if a.is_infinite() {
        return a;
    }
    match a <= SERIES_LIMIT {
        true => power_series(a, 1.0, 0.0),
        false => scaled_asymptotic(a, 0.0) * a.exp(),
    }
}

/// `e^-|x| I₀(x)` (`i0e`), without I₀'s overflow.
pub fn bessel_i0e(x: f64) -> f64 {
    let a = x.abs();
    match a <= SERIES_LIMIT {
        true => power_series(a, 1.0, 0.0) * (-a).exp(),
        false => scaled_asymptotic(a, 0.0),
    }
}

/// `I₁(x)`, odd.
///
/// ```
/// use tapir_kernels::special::bessel_i1;
/// assert!((bessel_i1(1.0) - 0.565_159_103_992_485_1).abs() < 1e-15);
/// assert_eq!(bessel_i1(-1.0), -bessel_i1(1.0));
/// ```
pub fn bessel_i1(x: f64) -> f64 {
    let a = x.abs();
    if a.is_infinite() {
        return x;
    }
    let magnitude = match a <= SERIES_LIMIT {
        true => power_series(a, a / 2.0, 1.0),
        false => scaled_asymptotic(a, 1.0) * a.exp(),
    };
    magnitude.copysign(x)
}

/// `e^-|x| I₁(x)` (`i1e`).
pub fn bessel_i1e(x: f64) -> f64 {
    let a = x.abs();
    let magnitude = match a <= SERIES_LIMIT {
        true => power_series(a, a / 2.0, 1.0) * (-a).exp(),
        false => scaled_asymptotic(a, 1.0),
    };
    magnitude.copysign(x)
}

/// The same functions as CUDA device code, in double as above (each is a
/// loop of a few dozen terms; the twins then agree to f32 rounding).
pub(crate) const CUDA_BESSEL: &str = r#"
__device__ double bessel_series_d(double x, double first, double order) {
    double q = x * x / 4.0, term = first, sum = first, k = 1.0;
    while (term > sum * 1e-17) { term *= q / (k * (k + order)); sum += term; k += 1.0; }
    return sum;
}
__device__ double bessel_scaled_asymptotic_d(double x, double order) {
    double nu4 = 4.0 * order * order, term = 1.0, sum = 1.0;
    for (int i = 1; i <= 60; i++) {
        double k = (double)i, odd = 2.0 * k - 1.0;
        term *= (odd * odd - nu4) / (8.0 * k * x);
        sum += term;
        if (fabs(term) <= fabs(sum) * 1e-17) break;
    }
    return sum / sqrt(2.0 * 3.14159265358979323846 * x);
}
__device__ float bessel_f(float v, double order, bool scaled) {
    double a = fabs((double)v);
    if (isinf(a)) return scaled ? 0.0f : (order != 0.0 ? v : (float)a);
    double m;
    if (a <= 30.0) {
        m = bessel_series_d(a, order == 0.0 ? 1.0 : a / 2.0, order);
        if (scaled) m *= exp(-a);
    } else {
        m = bessel_scaled_asymptotic_d(a, order);
        if (!scaled) m *= exp(a);
    }
    if (order != 0.0 && v < 0.0f) m = -m;
    return (float)m;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// mpmath's `besseli` at 40 digits, at points on both sides of the
    /// hand-over.
    #[test]
    fn bessel_functions_match_reference_values() {
        let cases = [
            (0.5, 1.063_483_370_741_323_5, 0.257_894_305_390_896_3),
            (5.0, 27.239_871_823_604_447, 24.335_642_142_450_527),
            (29.5, 478_144_163_888.039_8, 469_968_885_416.277_3),
            (31.0, 2_089_962_966_491.903_8, 2_055_972_795_294.564_7),
            (
                100.0,
                1.073_751_707_131_073_8e42,
                1.068_369_390_338_162_5e42,
            ),
        ];
        for (x, i0, i1) in cases {
            let close = |got: f64, want: f64| ((got - want) / want).abs() < 1e-14;
            assert!(close(bessel_i0(x), i0), "i0({x}) = {}", bessel_i0(x));
            assert!(close(bessel_i1(x), i1), "i1({x}) = {}", bessel_i1(x));
            assert!(close(bessel_i0e(-x), i0 * (-x).exp()), "i0e(-{x})");
            assert!(close(-bessel_i1e(-x), i1 * (-x).exp()), "i1e(-{x})");
        }
        assert_eq!(bessel_i0e(f64::INFINITY), 0.0);
        assert_eq!(bessel_i0(f64::INFINITY), f64::INFINITY);
        assert_eq!(bessel_i1(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert!(bessel_i0(f64::NAN).is_nan() && bessel_i1e(f64::NAN).is_nan());
    }
}
