//! Elementary functions of f32 written so that a loop of them vectorises:
//! `ln`, `log2`, `log10`, `ln_1p`, `exp_m1`, `sinh`, `cosh`, `sin`, `cos`,
//! `tan`, `atan`, `asin`, `acos` and `tanh`. libm's are scalar calls
//! (2.5 to 10 ns an element here, against 0.3 to 0.8 for PyTorch's
//! vectorised Sleef), and a call in a loop keeps the loop scalar.
//!
//! `expm1`, `sinh` and `cosh` work in f64 internally: the argument is reduced exactly and
//! the f64 polynomial is good to 1e-10 relative, so the one rounding to
//! f32 leaves the result within 0.51 ulp of the exact value, within 1 ulp
//! of the correctly rounded f32 (PyTorch's bound for these, Sleef's
//! `u10`). The others work in f32 (16 lanes, not 8), with their large
//! parts summed exactly so that the result rounds about once: `tanh`
//! needs no exact reduction, the logarithms sum `e ln 2 + f` exactly
//! (Fast2Sum), `sin`, `cos` and `tan` carry the reduced argument and
//! their results as unrounded pairs, and `atan`, `asin` and `acos` add
//! their polynomial to π/2 or π held as pairs. Within 1 ulp too. The tests sweep every 61st f32, every one with
//! `TAPIR_FULL_SWEEP=1`.
//! No branches or calls, but one: sin, cos and tan of |x| >= 2^22 call
//! libm's f64 functions ([`sin_fast`], [`cos_fast`], [`tan_fast`] are the vectorising
//! part, which the CPU kernels run over a whole slice first, see
//! `UnaryFn::fast`).
//!
//! ```
//! use tapir_kernels::Float;
//! assert_eq!(8.0f32.vec_log2(), 3.0);
//! assert_eq!(0.5f32.vec_sin(), 0.5f32.sin());
//! assert_eq!(1e30f32.vec_cos(), (1e30f32 as f64).cos() as f32);
//! ```

mod trig;
pub(crate) use trig::{
    TRIG_FAST_BELOW, acos, asin, atan, cos, cos_fast, sin, sin_fast, tan, tan_fast,
};

/// 1.5 * 2^52: added to |v| < 2^51, it leaves `v` rounded to an integer
/// in the low bits.
const MAGIC: f64 = 6_755_399_441_055_744.0;

/// Rounds `v` to the nearest integer, ties to even, for |v| < 2^51, by
/// adding and subtracting 1.5 * 2^52 (`round` is a libm call before SSE4.1
/// and would stop the loop vectorising). Returns the integer and the sum,
/// whose low bits hold the integer (mod 2^32).
#[inline(always)]
fn round_magic(v: f64) -> (f64, u64) {
    let shifted = v + MAGIC;
    (shifted - MAGIC, shifted.to_bits())
}

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

/// `e^x - 1`, precise near 0, by [`expm1_wide`]: beyond [-110, 100]
/// the f32 result is -1 or +inf anyway.
#[inline(always)]
pub(crate) fn expm1(x: f32) -> f32 {
    let y = expm1_wide((x as f64).clamp(-110.0, 100.0));
    if x.is_nan() || x == 0.0 { x } else { y as f32 }
}

/// `sinh`: `(m + m / (m + 1)) / 2` with `m = e^|x| - 1` from
/// [`expm1_wide`] (`e^|x| - e^-|x|` without its cancellation near 0), in
/// f64 and rounded once, within 1 ulp as [`expm1`]. From |x| = 100 the
/// f32 result is ±∞ anyway.
#[inline(always)]
pub(crate) fn sinh(x: f32) -> f32 {
    let m = expm1_wide((x.abs() as f64).min(100.0));
    let y = 0.5 * (m + m / (m + 1.0));
    if x.is_nan() || x == 0.0 {
        x
    } else {
        (y as f32).copysign(x)
    }
}

/// `cosh`: `(e + 1 / e) / 2` with `e = e^|x|` from [`expm1_wide`], in f64
/// and rounded once, as [`sinh`].
#[inline(always)]
pub(crate) fn cosh(x: f32) -> f32 {
    let e = expm1_wide((x.abs() as f64).min(100.0)) + 1.0;
    let y = 0.5 * (e + 1.0 / e);
    if x.is_nan() { x } else { y as f32 }
}

/// `e^d - 1` in f64 for `d` in [-110, 100], to about 1e-15 relative, from
/// [`exp_parts`]: `2^k (e^r - 1) + (2^k - 1)`, which does not cancel. One
/// rounding to f32 then leaves a result within 1 ulp of the correctly
/// rounded one.
#[inline(always)]
fn expm1_wide(d: f64) -> f64 {
    let (two_k, em1_r) = exp_parts(d);
    two_k.mul_add(em1_r, two_k - 1.0)
}

/// `e^d` in f64 for `d` in [-200, 200], to about 1e-15 relative, from
/// [`exp_parts`]: `2^k (e^r - 1) + 2^k`.
#[inline(always)]
fn exp_wide(d: f64) -> f64 {
    let (two_k, em1_r) = exp_parts(d);
    two_k.mul_add(em1_r, two_k)
}

/// `e^d = 2^k e^r` for `d` in [-200, 200]: `(2^k, e^r - 1)`. `d = k ln 2 +
/// r` (k ln 2 subtracted by two fused multiply-adds, with ln 2 as a pair),
/// `e^r - 1` by Taylor to r¹¹ (|r| <= ln2 / 2: truncation below 1e-12
/// relative).
#[inline(always)]
fn exp_parts(d: f64) -> (f64, f64) {
    const LN2_HI: f64 = std::f64::consts::LN_2;
    const LN2_LO: f64 = 2.319_046_813_846_299_6e-17; // ln 2 - LN2_HI
    let (k, k_bits) = round_magic(d * std::f64::consts::LOG2_E);
    let r = (-k).mul_add(LN2_LO, (-k).mul_add(LN2_HI, d));
    let mut p: f64 = 1.0 / 39_916_800.0;
    for c in [
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ] {
        p = p.mul_add(r, c);
    }
    let em1_r = (r * r).mul_add(p, r);
    // 2^k from k's bits in the rounding sum (k in -289..=289).
    let k_int = k_bits.wrapping_sub(MAGIC.to_bits()) as i64;
    let two_k = f64::from_bits(((k_int + 1023) as u64) << 52);
    (two_k, em1_r)
}

/// `ln a` in f64 for a positive normal `a` with at most 24 significant
/// bits (any nonzero finite f32), to about 1e-15 relative: `a = 2^k m`
/// with `m` in [√½, √2) read from the bits, `f = m - 1` and `s = f / (2 +
/// f)` (both exact but the division's rounding), `ln m = 2 atanh s` by
/// its series to s¹⁷ (|s| <= 0.172: truncation below 1e-14 relative).
#[inline(always)]
fn ln_wide(a: f64) -> f64 {
    const SQRT_HALF_BITS: u64 = 0x3fe6_a09e_667f_3bcd;
    // Shifting the bits by 1 - √½ makes the exponent field read k for
    // m in [√½, √2) (musl's reduction).
    let shifted = a.to_bits().wrapping_add(1.0f64.to_bits() - SQRT_HALF_BITS);
    let k = ((shifted >> 52) as i64 - 1023) as f64;
    let m = f64::from_bits((shifted & ((1 << 52) - 1)) + SQRT_HALF_BITS);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p: f64 = 2.0 / 17.0;
    for c in [
        2.0 / 15.0,
        2.0 / 13.0,
        2.0 / 11.0,
        2.0 / 9.0,
        2.0 / 7.0,
        2.0 / 5.0,
        2.0 / 3.0,
    ] {
        p = p.mul_add(z, c);
    }
    let ln_m = (s * z).mul_add(p, 2.0 * s);
    k.mul_add(std::f64::consts::LN_2, ln_m)
}

/// `x^e` for any f32 `x` and a finite nonzero `e` (the CPU kernel takes
/// `e = 0`, infinite or NaN `e` and the exponents PyTorch computes by
/// multiplication to other forms first): `e^(e ln|x|)` in f64 from
/// [`ln_wide`] and [`exp_wide`], rounded once (the product's absolute
/// error stays near 1e-14 wherever the f32 result is finite and nonzero,
/// so within 1 ulp of the correctly rounded result), then C99's special
/// values: a negative `x` keeps the sign for an odd integer `e` and is
/// NaN for a non-integer one (but -0 and -∞ are +0 and +∞ there), ±0 and
/// ±∞ go to 0 or ∞ by the sign of `e`.
#[inline(always)]
pub(crate) fn powf(x: f32, e: f32) -> f32 {
    let a = x.abs();
    let e64 = e as f64;
    let t = (e64 * ln_wide(a as f64)).clamp(-200.0, 200.0);
    let magnitude = exp_wide(t) as f32;
    let integer = e.fract() == 0.0;
    let odd = integer && (e * 0.5).fract() != 0.0;
    let magnitude = if a == 0.0 || a == f32::INFINITY {
        if (e > 0.0) == (a == 0.0) {
            0.0
        } else {
            f32::INFINITY
        }
    } else {
        magnitude
    };
    if x.is_nan() || (x < 0.0 && !integer && a != f32::INFINITY) {
        f32::NAN
    } else if odd {
        magnitude.copysign(x)
    } else {
        magnitude
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
    fn ulps(a: f32, b: f32) -> u32 {
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
    fn powers_are_within_one_ulp_and_keep_c99s_special_values() {
        let full = std::env::var("TAPIR_FULL_SWEEP").is_ok_and(|v| v == "1");
        let stride = if full { 1 } else { 61 };
        for e in [2.5f32, -1.5, 0.75, 1.0 / 3.0, 7.0, -3.0, 100.5, -1e-3] {
            let mut worst = (0, 0.0f32);
            for x in (0..=0xFFFF_FFFFu32).step_by(stride).map(f32::from_bits) {
                let want = (x as f64).powf(e as f64) as f32;
                let d = ulps(super::powf(x, e), want);
                if d > worst.0 {
                    worst = (d, x);
                }
            }
            println!("pow(x, {e}): at worst {} ulp (x = {:e})", worst.0, worst.1);
            assert!(
                worst.0 <= 1,
                "pow(x, {e}): {} ulp at x = {:e}",
                worst.0,
                worst.1
            );
        }
        // Every special pair as libm's powf has it, bit for bit.
        let xs = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1.0,
            -1.0,
            -2.0,
            0.5,
            -0.5,
            f32::from_bits(1),
            f32::MAX,
        ];
        let es = [
            2.5f32, -2.5, 3.0, -3.0, 4.0, -4.0, 0.3, -0.3, 1e10, 5.0e-3, 65.0,
        ];
        for x in xs {
            for e in es {
                let (got, want) = (super::powf(x, e), x.powf(e));
                assert!(
                    got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                    "pow({x:e}, {e}) = {got:e}, libm {want:e}"
                );
            }
        }
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
