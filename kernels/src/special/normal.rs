//! The standard normal distribution's tails (`torch.special.erfcx`,
//! `log_ndtr`, `ndtri`), in f64 whatever the tensor's type, accurate far
//! into the tails where `erfc` underflows.

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, PI};

/// The scaled complementary error function `e^(x²) erfc(x)`: ∞ far left,
/// ~1/(x√π) far right.
///
/// Below 10 it is that product (erfc's relative accuracy holds down to its
/// underflow near 27). From 10 on, Laplace's continued fraction
/// erfc(x) e^(x²) √π = 1/(x + ½/(x + 1/(x + (3/2)/(x + …)))), 40 levels,
/// far past convergence there.
///
/// ```
/// use tapir_kernels::special::erfcx;
/// assert_eq!(erfcx(0.0), 1.0);
/// assert!((erfcx(30.0) - 0.018_795_888_861_416_75).abs() < 1e-17);
/// ```
pub fn erfcx(x: f64) -> f64 {
    if x < 10.0 || x.is_nan() {
        return (x * x).exp() * libm::erfc(x);
    }
    let mut denominator = x;
    for n in (1..=40).rev() {
        denominator = x + (n as f64 / 2.0) / denominator;
    }
    1.0 / (denominator * PI.sqrt())
}

/// `ln Φ(x)`, the log of the standard normal CDF: through `erfcx` below -1
/// (ln(erfcx(-x/√2) / 2) - x²/2, no underflow), `log1p` of the upper tail
/// above (PyTorch's split).
///
/// ```
/// use tapir_kernels::special::log_ndtr;
/// assert!((log_ndtr(0.0) + std::f64::consts::LN_2).abs() < 1e-16);
/// assert!((log_ndtr(-40.0) + 804.608_442_013_753_8).abs() < 1e-12);
/// ```
pub fn log_ndtr(x: f64) -> f64 {
    match x < -1.0 {
        true => (erfcx(-x * FRAC_1_SQRT_2) / 2.0).ln() - x * x / 2.0,
        false => (-libm::erfc(x * FRAC_1_SQRT_2) / 2.0).ln_1p(),
    }
}

/// `Φ⁻¹(p)`, the standard normal quantile: -∞ at 0, ∞ at 1, NaN outside.
///
/// Starts from Abramowitz and Stegun's 26.2.23 (error below 4.5e-4) on the
/// smaller tail, then takes Newton steps on ln Φ, which is concave and
/// nearly linear in the tail, so the steps converge from that start
/// without overshoot: five reach the last bit.
///
/// ```
/// use tapir_kernels::special::ndtri;
/// assert_eq!(ndtri(0.5), 0.0);
/// assert!((ndtri(0.975) - 1.959_963_984_540_054_2).abs() < 1e-14);
/// assert!((ndtri(1e-300) + 37.047_096_299_361_2).abs() < 1e-12);
/// ```
pub fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    // The smaller tail, exactly (Sterbenz), and the side it is on.
    let (q, upper) = match p > 0.5 {
        true => (1.0 - p, true),
        false => (p, false),
    };
    if q == 0.0 {
        return if upper {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
    }
    let t = (-2.0 * q.ln()).sqrt();
    let rational = (2.515_517 + t * (0.802_853 + t * 0.010_328))
        / (1.0 + t * (1.432_788 + t * (0.189_269 + t * 0.001_308)));
    let mut x = rational - t;
    let log_q = q.ln();
    for _ in 0..5 {
        // d ln Φ / dx = φ(x) / Φ(x) = √(2/π) / erfcx(-x/√2).
        let slope = FRAC_2_SQRT_PI * FRAC_1_SQRT_2 / erfcx(-x * FRAC_1_SQRT_2);
        let step = (log_ndtr(x) - log_q) / slope;
        x -= step;
        if step == 0.0 {
            break;
        }
    }
    if upper { -x } else { x }
}

/// The same functions as CUDA device code, in double as above.
pub(crate) const CUDA_NORMAL: &str = r#"
__device__ double erfcx_d(double x) {
    if (x < 10.0 || x != x) return exp(x * x) * erfc(x);
    double d = x;
    for (int n = 40; n >= 1; n--) d = x + ((double)n / 2.0) / d;
    return 1.0 / (d * sqrt(3.14159265358979323846));
}
__device__ double log_ndtr_d(double x) {
    if (x < -1.0) return log(erfcx_d(-x * 0.70710678118654752440) / 2.0) - x * x / 2.0;
    return log1p(-erfc(x * 0.70710678118654752440) / 2.0);
}
__device__ double ndtri_d(double p) {
    if (p != p || p < 0.0 || p > 1.0) return (double)__int_as_float(0x7fc00000);
    if (p == 0.5) return 0.0;
    bool upper = p > 0.5;
    double q = upper ? 1.0 - p : p;
    if (q == 0.0) return upper ? (double)TAPIR_INF : -(double)TAPIR_INF;
    double t = sqrt(-2.0 * log(q));
    double x = (2.515517 + t * (0.802853 + t * 0.010328))
        / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))) - t;
    double log_q = log(q);
    for (int i = 0; i < 5; i++) {
        double slope = 0.79788456080286535588 / erfcx_d(-x * 0.70710678118654752440);
        double step = (log_ndtr_d(x) - log_q) / slope;
        x -= step;
        if (step == 0.0) break;
    }
    return upper ? -x : x;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// mpmath at 40 digits: erfcx from `exp(x²) erfc(x)`, ln Φ from
    /// `log(ncdf(x))`, Φ⁻¹ by its root.
    #[test]
    fn normal_tails_match_reference_values() {
        let close = |got: f64, want: f64, what: &str| {
            assert!(
                ((got - want) / want).abs() < 4e-15,
                "{what}: got {got}, want {want}"
            )
        };
        for (x, want) in [
            (-3.0, 16_205.988_853_999_587),
            (0.5, 0.615_690_344_192_925_9),
            (9.99, 0.056_196_640_706_858_82),
            (10.0, 0.056_140_992_743_822_59),
            (1e6, 5.641_895_835_474_742e-7),
        ] {
            close(erfcx(x), want, &format!("erfcx({x})"));
        }
        for (x, want) in [
            (-1.0001, -1.841_174_162_541_410_7),
            (-0.9999, -1.840_869_135_486_139_6),
            (3.0, -0.001_350_809_964_748_193_8),
            (-30.0, -454.321_243_956_343_2),
        ] {
            close(log_ndtr(x), want, &format!("log_ndtr({x})"));
        }
        for (p, want) in [
            (1e-10, -6.361_340_902_404_057),
            (0.3, -0.524_400_512_708_040_8),
            (0.999, 3.090_232_306_167_813_5),
        ] {
            close(ndtri(p), want, &format!("ndtri({p})"));
        }
        assert_eq!(ndtri(0.0), f64::NEG_INFINITY);
        assert_eq!(ndtri(1.0), f64::INFINITY);
        assert!(ndtri(1.5).is_nan() && ndtri(-0.1).is_nan());
        assert_eq!(erfcx(f64::INFINITY), 0.0);
        assert_eq!(erfcx(-30.0), f64::INFINITY);
    }

    #[test]
    fn ndtri_inverts_the_cdf_across_the_unit_interval() {
        for i in 1..2000 {
            let p = i as f64 / 2000.0;
            let x = ndtri(p);
            let back = libm::erfc(-x * FRAC_1_SQRT_2) / 2.0;
            assert!((back - p).abs() <= 4e-16, "ndtri({p}) = {x}: Φ = {back}");
        }
        for e in 1..300 {
            let p = 10f64.powi(-e);
            let back = log_ndtr(ndtri(p));
            assert!(
                (back - p.ln()).abs() <= 1e-13 * p.ln().abs(),
                "ndtri(1e-{e})"
            );
        }
    }
}
