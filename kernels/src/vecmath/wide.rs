//! The functions computed in f64 and rounded once to f32: `expm1`,
//! `sinh`, `cosh` and `pow`. Each reduces its argument exactly (`pow`'s
//! product `e ln|x|` with one f64 rounding), keeps its f64 polynomials
//! within about 1e-14 relative, and rounds once to f32, so the
//! result is within 1 ulp of the correctly rounded f32 (8 lanes, not 16,
//! but no pairs). See the parent module for the sweeps.

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
    let p = horner(r, &EXP_TAYLOR);
    let em1_r = (r * r).mul_add(p, r);
    // 2^k from k's bits in the rounding sum (k in -289..=289).
    let k_int = k_bits.wrapping_sub(MAGIC.to_bits()) as i64;
    let two_k = f64::from_bits(((k_int + 1023) as u64) << 52);
    (two_k, em1_r)
}

/// `1/k!` for k = 11 down to 2: `e^r - 1 = r + r² p(r)`.
const EXP_TAYLOR: [f64; 10] = [
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `2/(2j + 1)` for j = 8 down to 1: `2 atanh s = 2s + s³ p(s²)`.
const ATANH_SERIES: [f64; 8] = [
    2.0 / 17.0,
    2.0 / 15.0,
    2.0 / 13.0,
    2.0 / 11.0,
    2.0 / 9.0,
    2.0 / 7.0,
    2.0 / 5.0,
    2.0 / 3.0,
];

/// `c[0] z^(n-1) + ... + c[n-1]` by Horner's rule with fused
/// multiply-adds.
#[inline(always)]
fn horner(z: f64, c: &[f64]) -> f64 {
    c[1..].iter().fold(c[0], |p, &k| p.mul_add(z, k))
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
    let p = horner(z, &ATANH_SERIES);
    let ln_m = (s * z).mul_add(p, 2.0 * s);
    k.mul_add(std::f64::consts::LN_2, ln_m)
}

/// `x^e` for any f32 `x` and `e`: `e^(e ln|x|)` in f64 from [`ln_wide`]
/// and [`exp_wide`], rounded once (the product's absolute error stays
/// near 1e-14 wherever the f32 result is finite and nonzero, so within 1
/// ulp of the correctly rounded result), then C99's special values: a
/// negative `x` keeps the sign for an odd integer `e` and is NaN for a
/// finite non-integer one (but -0 and -∞ are +0 and +∞ there); ±0, ±∞
/// and an infinite `e` go to 0 or ∞; `x^0` and `1^e` are 1, even for NaN.
#[inline(always)]
pub(crate) fn powf(x: f32, e: f32) -> f32 {
    let a = x.abs();
    let t = (e as f64 * ln_wide(a as f64)).clamp(-200.0, 200.0);
    let computed = exp_wide(t) as f32;
    let integer = e.fract() == 0.0; // false for ±∞ and NaN
    let odd = integer && (e * 0.5).fract() != 0.0;
    let magnitude = if a == 0.0 || a == f32::INFINITY {
        if (e > 0.0) == (a == 0.0) {
            0.0
        } else {
            f32::INFINITY
        }
    } else if e.is_infinite() {
        if a == 1.0 {
            1.0
        } else if (e > 0.0) == (a > 1.0) {
            f32::INFINITY
        } else {
            0.0
        }
    } else {
        computed
    };
    let not_real = x < 0.0 && !integer && a != f32::INFINITY && e.is_finite();
    if e == 0.0 || x == 1.0 {
        1.0
    } else if x.is_nan() || e.is_nan() || not_real {
        f32::NAN
    } else if odd {
        magnitude.copysign(x)
    } else {
        magnitude
    }
}

/// [`powf`] where [`pow_rare`] is false, with no special values but the
/// sign for an odd integer `e`: the loop the CPU kernel vectorises (the
/// special values' selects took it from 1.7 to 2.9 ns an element).
#[inline(always)]
pub(crate) fn pow_fast(x: f32, e: f32) -> f32 {
    let t = (e as f64 * ln_wide(x.abs() as f64)).clamp(-200.0, 200.0);
    let magnitude = exp_wide(t) as f32;
    let odd = e.fract() == 0.0 && (e * 0.5).fract() != 0.0;
    if odd {
        magnitude.copysign(x)
    } else {
        magnitude
    }
}

/// Whether [`pow_fast`] is not [`powf`] at `(x, e)`: `x` zero, infinite
/// or NaN, negative to a non-integer power, or `e` infinite or NaN.
#[inline(always)]
pub(crate) fn pow_rare(x: f32, e: f32) -> bool {
    let a = x.abs();
    !(a > 0.0 && a < f32::INFINITY) || (x < 0.0 && e.fract() != 0.0) || !e.is_finite()
}

#[cfg(test)]
mod tests {
    /// `pow_fast` is `powf`, bit for bit, wherever `pow_rare` is false.
    fn fast_agrees(x: f32, e: f32, exact: f32) {
        if !super::pow_rare(x, e) {
            let fast = super::pow_fast(x, e);
            assert_eq!(fast.to_bits(), exact.to_bits(), "pow_fast({x:e}, {e})");
        }
    }

    #[test]
    fn powers_are_within_one_ulp_and_keep_c99s_special_values() {
        let full = std::env::var("TAPIR_FULL_SWEEP").is_ok_and(|v| v == "1");
        let stride = if full { 1 } else { 61 };
        for e in [2.5f32, -1.5, 0.75, 1.0 / 3.0, 7.0, -3.0, 100.5, -1e-3] {
            let mut worst = (0, 0.0f32);
            for x in (0..=0xFFFF_FFFFu32).step_by(stride).map(f32::from_bits) {
                let want = (x as f64).powf(e as f64) as f32;
                let got = super::powf(x, e);
                let d = super::super::tests::ulps(got, want);
                fast_agrees(x, e, got);
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
        // Pairs: any f32 to exponents in (-40, 40), every tenth a whole one.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..2_000_000 {
            let x = f32::from_bits(next() as u32);
            let u = (next() >> 40) as f32 / (1u64 << 24) as f32;
            let e = if i % 10 == 0 {
                (u * 80.0 - 40.0).round()
            } else {
                u * 80.0 - 40.0
            };
            let want = (x as f64).powf(e as f64) as f32;
            let got = super::powf(x, e);
            let d = super::super::tests::ulps(got, want);
            fast_agrees(x, e, got);
            assert!(d <= 1, "pow({x:e}, {e}): {d} ulp");
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
            -f32::MAX,
            0.999_999_94,
            -1.000_000_1,
        ];
        let es = [
            2.5f32,
            -2.5,
            3.0,
            -3.0,
            4.0,
            -4.0,
            0.3,
            -0.3,
            1e10,
            5.0e-3,
            65.0,
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
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
}
