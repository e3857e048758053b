//! Elementary functions of f32 written so that a loop of them vectorises:
//! `ln`, `log2`, `log10`, `ln_1p`, `expm1`, `sinh`, `cosh`, `pow`, `sin`,
//! `cos`, `tan`, `atan`, `asin`, `acos` and `tanh`. libm's are scalar
//! calls (2.5 to 55 ns an element here, against 0.3 to 2.3 for PyTorch's
//! vectorised Sleef), and a call in a loop keeps the loop scalar.
//!
//! `expm1`, `sinh`, `cosh` and `pow` work in f64 internally (`wide.rs`):
//! the argument is reduced exactly and the f64 polynomials are good to
//! about 1e-15 relative, so the one rounding to f32 leaves the result
//! within 0.51 ulp of the exact value, within 1 ulp of the correctly
//! rounded f32 (PyTorch's bound for these, Sleef's `u10`). The others work
//! in f32 (16 lanes, not 8), with their large parts summed exactly so that
//! the result rounds about once: `tanh` needs no exact reduction, the
//! logarithms sum `e ln 2 + f` exactly (Fast2Sum), `sin`, `cos` and `tan`
//! carry the reduced argument and their results as unrounded pairs, and
//! `atan`, `asin` and `acos` add their polynomial to π/2 or π held as
//! pairs (`trig.rs`). Within 1 ulp too. The tests sweep every 61st f32
//! (`pow`: every 61st for eight exponents and 2M random pairs), every one
//! with `TAPIR_FULL_SWEEP=1`.
//! No branches or calls, but one: sin, cos and tan of |x| >= 2^22 call
//! libm's f64 functions ([`sin_fast`], [`cos_fast`], [`tan_fast`] are the
//! vectorising part, which the CPU kernels run over a whole slice first,
//! see `UnaryFn::fast`).
//!
//! ```
//! use tapir_kernels::Float;
//! assert_eq!(8.0f32.vec_log2(), 3.0);
//! assert_eq!(0.5f32.vec_sin(), 0.5f32.sin());
//! assert_eq!(1e30f32.vec_cos(), (1e30f32 as f64).cos() as f32);
//! assert_eq!(2.0f32.vec_powf(10.0), 1024.0);
//! ```

mod trig;
mod wide;
pub(crate) use trig::{
    TRIG_FAST_BELOW, acos, asin, atan, cos, cos_fast, sin, sin_fast, tan, tan_fast,
};
pub(crate) use wide::{cosh, expm1, pow_fast, pow_rare, powf, sinh};

/// The special values every logarithm shares: NaN below 0 and for NaN,
/// -∞ at ±0, +∞ at +∞; else `y`.
#[inline(always)]
fn log_specials(x: f32, y: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        y
    }
}

/// Which logarithm [`log_any`] and [`log_mid`] compute.
#[derive(Clone, Copy)]
pub(crate) enum Base {
    /// `ln`.
    E,
    /// `log2` (exact at powers of two).
    Two,
    /// `log10`.
    Ten,
}

/// The natural logarithm.
#[inline(always)]
pub(crate) fn ln(x: f32) -> f32 {
    log_any(x, Base::E)
}

/// The base-2 logarithm (exact at powers of two).
#[inline(always)]
pub(crate) fn log2(x: f32) -> f32 {
    log_any(x, Base::Two)
}

/// The base-10 logarithm.
#[inline(always)]
pub(crate) fn log10(x: f32) -> f32 {
    log_any(x, Base::Ten)
}

/// A logarithm of any f32, in f32 (16 lanes): a subnormal `x` is scaled
/// by 2^23 into the normal range first, then [`log_scaled`]; the specials.
#[inline(always)]
fn log_any(x: f32, base: Base) -> f32 {
    let subnormal = x < f32::MIN_POSITIVE;
    let (scaled, e_offset) = if subnormal {
        (x * 8_388_608.0, -23.0)
    } else {
        (x, 0.0)
    };
    log_specials(x, log_scaled(scaled, e_offset, base))
}

/// A logarithm of a normal positive finite `x`, as [`ln`], [`log2`] and
/// [`log10`] compute it there, without their tests.
#[inline(always)]
pub(crate) fn log_mid(x: f32, base: Base) -> f32 {
    log_scaled(x, 0.0, base)
}

/// The logarithm of `x 2^e_offset` for a normal positive finite `x`: `x =
/// 2^e m` with `m` in [√½, √2) read from the bits, `f = m - 1` (exact),
/// `ln(1 + f) = f + f² q` with `q = -1/2 + f r(f)` (`r` from
/// `scripts/fit_ln.py`, 7e-9 relative). The two large terms (`e ln 2` and
/// `f`; `e` and `f log2 e`; `e log10 2` and `f log10 e`, each product
/// exact or with its error kept by a fused multiply-add) are summed
/// exactly (Fast2Sum: the first is the larger unless it is 0) before the
/// small ones join them, so the result rounds about once: within 1 ulp
/// of the correctly rounded logarithm over every f32.
#[inline(always)]
fn log_scaled(x: f32, e_offset: f32, base: Base) -> f32 {
    let (e, f) = log_reduce(x);
    log_combine(e + e_offset, f, 0.0, base)
}

/// `(e, f)` with `x = 2^e (1 + f)`, `1 + f` in [√½, √2), for a normal
/// positive finite `x`; `f` is exact.
#[inline(always)]
fn log_reduce(x: f32) -> (f32, f32) {
    // Bits relative to √½'s: the exponent of x / √½, so m = x / 2^e lands
    // in [√½, √2).
    let bits = x.to_bits() as i32;
    let e_int = bits.wrapping_sub(0x3F35_04F3) >> 23;
    let m = f32::from_bits(bits.wrapping_sub(e_int << 23) as u32);
    (e_int as f32, m - 1.0)
}

/// The logarithm of `2^e (1 + f)` for `f` in [√½ - 1, √2 - 1], plus `corr`
/// (a tiny correction to the natural logarithm, [`ln_1p`]'s; `Base::E`
/// only): see [`log_scaled`].
#[inline(always)]
fn log_combine(e: f32, f: f32, corr: f32, base: Base) -> f32 {
    use crate::float::{EXP_LN2_HI, EXP_LN2_LO_NEG};
    const R: [f32; 8] = [
        -0.073_628_68,
        0.126_203_27,
        -0.132_021_04,
        0.142_271_15,
        -0.166_213_7,
        0.199_998_26,
        -0.250_008_5,
        0.333_333_55,
    ];
    let mut r = R[0];
    for c in &R[1..] {
        r = r.mul_add(f, *c);
    }
    let q = r.mul_add(f, -0.5);
    let (big, other, small) = match base {
        // ln 2 = EXP_LN2_HI - EXP_LN2_LO_NEG; e * EXP_LN2_HI is exact.
        Base::E => (
            e * EXP_LN2_HI,
            f,
            (f * f).mul_add(q, corr - e * EXP_LN2_LO_NEG),
        ),
        // f log2 e rounded, its error (exact, by a fused multiply-add) and
        // f times the rest of log2 e join the small terms.
        Base::Two => {
            let p = f * LOG2_E_HI;
            let p_err = f.mul_add(LOG2_E_HI, -p);
            let tail = f.mul_add(LOG2_E_LO, p_err);
            (e, p, (f * f * q).mul_add(LOG2_E_HI, tail))
        }
        // As for log2; LOG10_2_HI = 1233 / 4096, so e * LOG10_2_HI is exact.
        Base::Ten => {
            let p = f * LOG10_E_HI;
            let p_err = f.mul_add(LOG10_E_HI, -p);
            let tail = f.mul_add(LOG10_E_LO, e.mul_add(LOG10_2_LO, p_err));
            (e * LOG10_2_HI, p, (f * f * q).mul_add(LOG10_E_HI, tail))
        }
    };
    let s = big + other;
    let s_err = (big - s) + other;
    s + (s_err + small)
}

/// `log2 e` and `log10 e` in two parts (the f32 and the rest), `log10 2`
/// in a 11-bit part and the rest.
const LOG2_E_HI: f32 = std::f32::consts::LOG2_E;
const LOG2_E_LO: f32 = 1.925_963e-8;
const LOG10_E_HI: f32 = std::f32::consts::LOG10_E;
const LOG10_E_LO: f32 = -1.010_305e-8;
const LOG10_2_HI: f32 = 0.301_025_4;
const LOG10_2_LO: f32 = 4.605_039e-6;

/// `ln(1 + x)`, precise near 0, in f32: where `1 + x` is in [√½, √2)
/// its `f` is `x` itself (exact); elsewhere the logarithm of `u = 1 + x`
/// rounded, plus the rounding's correction `(x - (u - 1)) / u`.
#[inline(always)]
pub(crate) fn ln_1p(x: f32) -> f32 {
    let u = 1.0 + x;
    let (e_u, f_u) = log_reduce(u);
    let inside = (-0.292_893_2..0.414_213_56).contains(&x);
    let (e, f, corr) = if inside {
        (0.0, x, 0.0)
    } else {
        (e_u, f_u, (x - (u - 1.0)) / u)
    };
    let y = log_combine(e, f, corr, Base::E);
    if x.is_nan() || x < -1.0 {
        f32::NAN
    } else if x == -1.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY || x == 0.0 {
        x // ±0 keeps its sign
    } else {
        y
    }
}

/// `tanh`, in f32 with fused multiply-adds (no f64: it needs no exact
/// reduction). Below |x| = 0.625 an odd polynomial `a + a³ p(a²)`, `p` of
/// degree 4 fitted by `scripts/fit_tanh.py` (1e-8 relative with its
/// coefficients rounded to f32; the `a³ p` term is at most 13% of the
/// result, so its rounding costs a fraction of an ulp, and no division).
/// From there `1 - 2 / (e^2|x| + 1)`, whose subtraction lands in [0.55, 1)
/// and cannot cancel; `e^2|x|` for |x| in [0.625, 10] is `exp_mid`, with
/// none of exp's range checks. ±1 from |x| = 10 on (tanh(9.01) already rounds to 1).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    const P: [f32; 5] = [
        -0.005_691_985_6,
        0.020_626_292,
        -0.053_735_32,
        0.133_313_82,
        -0.333_332_8,
    ];
    let a = x.abs().min(10.0); // min(NaN, 10) is 10: NaN is kept below
    let a2 = a * a;
    let mut p = P[0];
    for c in &P[1..] {
        p = p.mul_add(a2, *c);
    }
    let small = (a * a2).mul_add(p, a);
    let large = 1.0 - 2.0 / (crate::float::exp_mid(2.0 * a) + 1.0);
    let y = if a < 0.625 { small } else { large };
    if x.is_nan() { x } else { y.copysign(x) }
}

#[cfg(test)]
mod tests {
    /// Distance in units in the last place between two f32 (equal NaNs
    /// and equal infinities are 0 apart).
    pub(super) fn ulps(a: f32, b: f32) -> u32 {
        if a.is_nan() && b.is_nan() || a == b {
            return 0;
        }
        if a.is_nan() || b.is_nan() {
            return u32::MAX;
        }
        let key = |x: f32| {
            let b = x.to_bits() as i32;
            if b < 0 { i32::MIN - b } else { b }
        };
        key(a).abs_diff(key(b))
    }

    /// Every `stride`th f32 of both signs (specials included) through `f`
    /// against `exact` (f64 libm, rounded once to f32): the worst ulp, an
    /// input where it happens, and the fraction of inputs whose result is
    /// not `exact`'s.
    fn sweep(f: fn(f32) -> f32, exact: fn(f64) -> f64) -> (u32, f32, f64) {
        let full = std::env::var("TAPIR_FULL_SWEEP").is_ok_and(|v| v == "1");
        let stride = if full { 1 } else { 61 };
        let mut worst = (0, 0.0f32);
        let specials = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
        ];
        let all = (0..=0xFFFF_FFFFu32).step_by(stride).map(f32::from_bits);
        let (mut count, mut off) = (0u64, 0u64);
        for x in all.chain(specials) {
            let want = exact(x as f64) as f32;
            let d = ulps(f(x), want);
            if d > worst.0 {
                worst = (d, x);
            }
            count += 1;
            off += u64::from(d > 0);
        }
        (worst.0, worst.1, off as f64 / count as f64)
    }

    #[test]
    fn logarithms_exponentials_and_hyperbolics_are_within_one_ulp_for_every_f32() {
        for (name, f, exact) in [
            ("ln", super::ln as fn(f32) -> f32, f64::ln as fn(f64) -> f64),
            ("log2", super::log2, f64::log2),
            ("log10", super::log10, f64::log10),
            ("ln_1p", super::ln_1p, f64::ln_1p),
            ("expm1", super::expm1, f64::exp_m1),
            ("sinh", super::sinh, f64::sinh),
            ("cosh", super::cosh, f64::cosh),
            ("tanh", super::tanh, f64::tanh),
        ] {
            let (d, x, _) = sweep(f, exact);
            println!("{name}: at worst {d} ulp (x = {x:e})");
            assert!(d <= 1, "{name}: {d} ulp at x = {x:e}");
        }
        assert_eq!(super::log2(1024.0), 10.0);
        assert_eq!(super::log10(1e10), 10.0);
        assert_eq!(super::ln(1.0), 0.0);
        assert_eq!(super::ln_1p(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::ln_1p(1e-30), 1e-30);
        assert_eq!(super::expm1(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::expm1(1e-30), 1e-30);
        assert_eq!(super::expm1(-200.0), -1.0);
        assert_eq!(super::expm1(89.0), f32::INFINITY);
        assert_eq!(super::expm1(f32::NEG_INFINITY), -1.0);
        assert_eq!(super::sinh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::sinh(-1e-30), -1e-30);
        assert_eq!(super::sinh(-89.5), f32::NEG_INFINITY);
        assert_eq!(super::sinh(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(super::cosh(-0.0), 1.0);
        assert_eq!(super::cosh(f32::NEG_INFINITY), f32::INFINITY);
        assert_eq!(super::cosh(89.5), f32::INFINITY);
        assert!(super::sinh(f32::NAN).is_nan() && super::cosh(f32::NAN).is_nan());
        assert_eq!(super::tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(super::tanh(9.1), 1.0);
        assert_eq!(
            super::ln(f32::from_bits(1)),
            (f32::from_bits(1) as f64).ln() as f32
        );
    }

    #[test]
    fn inverse_trigonometric_functions_are_within_one_ulp_for_every_f32() {
        // The largest fraction of inputs (of all f32) allowed a result
        // other than the correctly rounded one: the full sweeps measured
        // 0.11%, 0.02% and 0.008%, and 0.18%, 0.09% and 0.06% with the
        // rounding errors of `1/|x|` and of the square root dropped.
        type Row = (&'static str, fn(f32) -> f32, fn(f64) -> f64, f64);
        let rows: [Row; 3] = [
            ("atan", super::atan, f64::atan, 0.0014),
            ("asin", super::asin, f64::asin, 0.0004),
            ("acos", super::acos, f64::acos, 0.0003),
        ];
        for (name, f, exact, most_off) in rows {
            let (d, x, off) = sweep(f, exact);
            println!("{name}: at worst {d} ulp (x = {x:e}), {off:.2e} of results off");
            assert!(d <= 1, "{name}: {d} ulp at x = {x:e}");
            assert!(off <= most_off, "{name}: {off:.2e} of results off");
        }
        use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
        assert_eq!(super::atan(f32::INFINITY), FRAC_PI_2);
        assert_eq!(super::atan(f32::NEG_INFINITY), -FRAC_PI_2);
        assert_eq!(super::atan(f32::MAX), FRAC_PI_2);
        assert_eq!(super::atan(-1.0), -FRAC_PI_4);
        assert_eq!(super::atan(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::asin(1.0), FRAC_PI_2);
        assert_eq!(super::asin(-1.0), -FRAC_PI_2);
        assert_eq!(super::asin(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(super::acos(-1.0), PI);
        assert_eq!(super::acos(1.0), 0.0);
        assert_eq!(super::acos(0.0), FRAC_PI_2);
        assert!(super::asin(1.0000001).is_nan() && super::acos(-2.0).is_nan());
        assert!(super::atan(f32::NAN).is_nan() && super::acos(f32::NAN).is_nan());
    }

    #[test]
    fn sine_cosine_and_tangent_are_within_one_ulp_for_every_f32() {
        for (name, f, exact) in [
            (
                "sin",
                super::sin as fn(f32) -> f32,
                f64::sin as fn(f64) -> f64,
            ),
            ("cos", super::cos, f64::cos),
            ("tan", super::tan, f64::tan),
        ] {
            let (d, x, _) = sweep(f, exact);
            println!("{name}: at worst {d} ulp (x = {x:e})");
            assert!(d <= 1, "{name}: {d} ulp at x = {x:e}");
        }
        // Both sides of the fast path's bound, and far out.
        for x in [
            4_194_303.5f32,
            4_194_304.0,
            4_194_305.0,
            1e10,
            3e38,
            -2.5e22,
        ] {
            assert_eq!(super::sin(x), (x as f64).sin() as f32, "sin({x:e})");
            assert_eq!(super::cos(x), (x as f64).cos() as f32, "cos({x:e})");
        }
        assert_eq!(super::sin(-0.0).to_bits(), (-0.0f32).to_bits());
    }
}
