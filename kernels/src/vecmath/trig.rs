//! The trigonometric family in f32: `sin`, `cos` and `tan` (a three-part
//! Cody-Waite reduction by π/2 with the reduced argument and the results as
//! unrounded pairs, libm's f64 functions from 2^22 on) and `atan`, `asin`
//! and `acos` (polynomials added to π/2 or π held as pairs). See the
//! parent module for the accuracy contract and its sweeps.

/// π/2 and π as unevaluated f32 pairs (high part, then the rest rounded).
const HALF_PI_PAIR: (f32, f32) = (std::f32::consts::FRAC_PI_2, -4.371_139e-8);
const PI_PAIR: (f32, f32) = (std::f32::consts::PI, -8.742_278e-8);

/// `p` of `atan(u) = u + u³ p(u²)` on [0, 1], highest degree first
/// (`scripts/fit_atan_asin.py`: 6e-9 relative).
const ATAN_P: [f32; 9] = [
    -0.001_789_061_2,
    0.010_897_884,
    -0.031_155_033,
    0.057_945_047,
    -0.084_034_8,
    0.109_525_33,
    -0.142_643_93,
    0.199_985_74,
    -0.333_333_02,
];

/// `q` of `asin(x) = x + x³ q(x²)` on [0, 1/2], highest degree first
/// (`scripts/fit_atan_asin.py`: 7e-10 relative).
const ASIN_Q: [f32; 6] = [
    0.037_158_85,
    0.014_706_604,
    0.031_732_63,
    0.044_526_58,
    0.075_004_496,
    0.166_666_61,
];

/// `c[0] t^(n-1) + ... + c[n-1]` by Horner's rule with fused multiply-adds.
#[inline(always)]
fn horner<const N: usize>(c: [f32; N], t: f32) -> f32 {
    let mut p = c[0];
    for k in &c[1..] {
        p = p.mul_add(t, *k);
    }
    p
}

/// `offset + w + tail`, rounded about once: `offset` is an unevaluated
/// pair, `w` the large term, `tail` the small one; `offset.0 + w` is
/// summed exactly (Fast2Sum: |offset.0| >= |w| or offset.0 = 0).
#[inline(always)]
fn offset_sum(offset: (f32, f32), w: f32, tail: f32) -> f32 {
    let s = offset.0 + w;
    let err = (offset.0 - s) + w;
    s + ((err + offset.1) + tail)
}

/// The arctangent, in f32 (16 lanes): for |x| <= 1 `u + u³ p(u²)` with
/// `u = |x|`; beyond, `π/2 - atan(1/|x|)`, where `1/|x|` keeps its
/// rounding error (by a fused multiply-add) and π/2 is a pair, so that
/// only the last addition rounds much. Within 1 ulp without that error
/// term too, but with it 0.11% of results are not the correctly rounded
/// f32 instead of 0.18% (at no measurable cost).
#[inline(always)]
pub(crate) fn atan(x: f32) -> f32 {
    let a = x.abs();
    let big = a > 1.0;
    let a_finite = a.min(f32::MAX); // ∞ as f32::MAX: no ∞ * 0 below
    let inv = 1.0 / a_finite;
    let inv_err = (-inv).mul_add(a_finite, 1.0) * inv;
    let u = if big { inv } else { a };
    let t = u * u;
    let v = (u * t) * horner(ATAN_P, t);
    // atan(u + e) = atan(u) + e / (1 + u²); 1 - u²/2 is within 1/12 of
    // that factor on [0, 1], and |e| is below 2^-24 u.
    let corr = inv_err * (-0.5f32).mul_add(t, 1.0);
    let (offset, w, tail) = if big {
        (HALF_PI_PAIR, -u, -(corr + v))
    } else {
        ((0.0, 0.0), u, v)
    };
    let y = offset_sum(offset, w, tail);
    // π/4 lies within 1e-8 relative of the midpoint between two f32, so
    // the form's ulp-level error would round atan(1) the wrong way.
    let y = if a == 1.0 {
        std::f32::consts::FRAC_PI_4
    } else {
        y
    };
    let y = if x.is_nan() { x } else { y };
    f32::from_bits(y.to_bits() ^ (x.to_bits() & 0x8000_0000))
}

/// For |x| in (1/2, 1], `(s, s_err)` with `s + s_err = √((1 - |x|) / 2)`
/// to twice f32's precision (`(1 - |x|) / 2` is exact there; the square
/// root's error by a fused multiply-add; 0 at |x| = 1). Without `s_err`
/// asin and acos stay within 1 ulp, but 0.09% and 0.06% of f32 inputs
/// give a result other than the correctly rounded one, against 0.02% and
/// 0.008% with it; the division costs nothing measurable beside the root.
#[inline(always)]
fn half_versine_root(a: f32) -> (f32, f32) {
    let z = 0.5 * (1.0 - a);
    let s = z.sqrt();
    let s_err = (-s).mul_add(s, z) / (2.0 * s).max(f32::MIN_POSITIVE);
    (s, s_err)
}

/// The arcsine, in f32: for |x| <= 1/2 `x + x³ q(x²)`; beyond,
/// `π/2 - 2 asin(s)` with `s = √((1 - |x|) / 2)` <= 1/2 as a pair and π/2
/// as a pair (the subtraction cancels up to a bit, so the terms keep
/// twice f32's precision until the last addition). NaN beyond [-1, 1].
#[inline(always)]
pub(crate) fn asin(x: f32) -> f32 {
    let a = x.abs();
    let big = a > 0.5;
    let (s, s_err) = half_versine_root(a);
    let u = if big { s } else { a };
    let t = u * u;
    let v = (u * t) * horner(ASIN_Q, t);
    let (offset, w, tail) = if big {
        (HALF_PI_PAIR, -2.0 * u, -2.0 * (s_err + v))
    } else {
        ((0.0, 0.0), u, v)
    };
    let y = offset_sum(offset, w, tail);
    let y = if a > 1.0 || x.is_nan() { f32::NAN } else { y };
    f32::from_bits(y.to_bits() ^ (x.to_bits() & 0x8000_0000))
}

/// The arccosine, in f32, from the arcsine's pieces: `π/2 - asin(x)` for
/// |x| <= 1/2, `2 asin(s)` for x > 1/2 and `π - 2 asin(s)` for x < -1/2
/// (`s` as in [`asin`]). NaN beyond [-1, 1].
#[inline(always)]
pub(crate) fn acos(x: f32) -> f32 {
    let a = x.abs();
    let big = a > 0.5;
    let (s, s_err) = half_versine_root(a);
    let u = if big { s } else { x };
    let t = u * u;
    let v = (u * t) * horner(ASIN_Q, t);
    let (offset, w, tail) = if !big {
        (HALF_PI_PAIR, -u, -v)
    } else if x < 0.0 {
        (PI_PAIR, -2.0 * u, -2.0 * (s_err + v))
    } else {
        ((0.0, 0.0), 2.0 * u, 2.0 * (s_err + v))
    };
    let y = offset_sum(offset, w, tail);
    if a > 1.0 || x.is_nan() { f32::NAN } else { y }
}

/// Below this magnitude [`sin_fast`], [`cos_fast`] and [`tan_fast`] are
/// within 1 ulp (every such f32 swept); at and above it (and for ±∞, NaN)
/// [`sin`], [`cos`] and [`tan`] call libm's f64 functions, whose exact
/// reduction (Payne and Hanek's) vectorises only through table gathers.
pub(crate) const TRIG_FAST_BELOW: f32 = 4_194_304.0; // 2^22

/// π/2 in three f32 parts, each the f32 nearest what the earlier ones
/// leave (the first two are [`HALF_PI_PAIR`]): their sum is within
/// 1.1e-23 of π/2.
const HALF_PI_PARTS: [f32; 3] = [HALF_PI_PAIR.0, HALF_PI_PAIR.1, -1.715_124_5e-15];

/// `(r, r_lo, q)` with `a = q π/2 + r + r_lo` for `a` in [0,
/// [`TRIG_FAST_BELOW`]): `r` in about [-π/4, π/4], `r_lo` its tail (not
/// normalised: |r_lo| can reach |r| where `a` nearly is a multiple of
/// π/2, and then the polynomials' terms beyond `r` are negligible), and
/// `q`'s low bits (the quadrant mod 4). Cody and Waite in f32 with fused
/// multiply-adds: `a - q p1` is exact (both are multiples of 2^-24 when
/// q > 0 and the difference is below 1), `q p2` is split exactly into
/// `h + l`, the subtraction of `h` keeps its rounding error (Fast2Sum's
/// term), and only the tiny `q p3` and the tail's sum round. That this
/// keeps every result within 1 ulp rests on the sweep of every f32 below
/// the bound (`tests`), not on a proof.
#[inline(always)]
fn reduce_quadrant(a: f32) -> (f32, f32, u32) {
    let [p1, p2, p3] = HALF_PI_PARTS;
    let shifted = a.mul_add(std::f32::consts::FRAC_2_PI, crate::float::ROUND_SHIFT);
    let q = shifted - crate::float::ROUND_SHIFT;
    let r1 = (-q).mul_add(p1, a);
    let h = q * p2;
    let l = q.mul_add(p2, -h);
    let r = r1 - h;
    let r_err = (r1 - r) - h;
    let r_lo = (-q).mul_add(p3, r_err - l);
    (r, r_lo, shifted.to_bits())
}

/// `sin(r + r_lo)` and `cos(r + r_lo)` for `r` in about [-π/4, π/4], each
/// as an unrounded pair `(hi, lo)`: the sine `r + (r_lo + r³ s(r²))`, the
/// cosine `w + (w_err + r⁴ c(r²) - r r_lo)` with `w = 1 - r²/2` and its
/// rounding error `w_err` (Fast2Sum). Taylor to r⁹ and r¹⁰ (truncation
/// below 4e-9 relative); the one rounding that matters is the caller's
/// `hi + lo`.
#[inline(always)]
fn sin_cos_pairs(r: f32, r_lo: f32) -> ((f32, f32), (f32, f32)) {
    const S: [f32; 4] = [1.0 / 362_880.0, -1.0 / 5_040.0, 1.0 / 120.0, -1.0 / 6.0];
    const C: [f32; 4] = [-1.0 / 3_628_800.0, 1.0 / 40_320.0, -1.0 / 720.0, 1.0 / 24.0];
    let r2 = r * r;
    let mut s = S[0];
    let mut c = C[0];
    for k in 1..4 {
        s = s.mul_add(r2, S[k]);
        c = c.mul_add(r2, C[k]);
    }
    let sin_lo = (r * r2).mul_add(s, r_lo);
    let half = 0.5 * r2;
    let w = 1.0 - half;
    let w_err = (1.0 - w) - half;
    let cos_lo = (r2 * r2).mul_add(c, (-r).mul_add(r_lo, w_err));
    ((r, sin_lo), (w, cos_lo))
}

/// Flips `y`'s sign where bit 31 of `flip` is set.
#[inline(always)]
fn flip_sign(y: f32, flip: u32) -> f32 {
    f32::from_bits(y.to_bits() ^ (flip & 0x8000_0000))
}

/// The sine for |x| < [`TRIG_FAST_BELOW`], in f32 (vectorises, 16 lanes):
/// `±sin r` or `±cos r` by the quadrant, odd in `x`.
#[inline(always)]
pub(crate) fn sin_fast(x: f32) -> f32 {
    let (r, r_lo, q) = reduce_quadrant(x.abs());
    let ((sh, sl), (ch, cl)) = sin_cos_pairs(r, r_lo);
    let y = if q & 1 == 0 { sh + sl } else { ch + cl };
    flip_sign(y, (q << 30) ^ x.to_bits())
}

/// The cosine for |x| < [`TRIG_FAST_BELOW`], as [`sin_fast`].
#[inline(always)]
pub(crate) fn cos_fast(x: f32) -> f32 {
    let (r, r_lo, q) = reduce_quadrant(x.abs());
    let ((sh, sl), (ch, cl)) = sin_cos_pairs(r, r_lo);
    let y = if q & 1 == 0 { ch + cl } else { sh + sl };
    flip_sign(y, (q ^ (q << 1)) << 30)
}

/// The tangent for |x| < [`TRIG_FAST_BELOW`], as [`sin_fast`]: `sin r /
/// cos r` in even quadrants, `-cos r / sin r` in odd ones, a pair over a
/// pair: the quotient `t0` of the rounded pairs, then one Newton
/// correction by the remainder `n - t0 d`, computed from the unrounded
/// pairs with fused multiply-adds (one division, for `1 / d`).
#[inline(always)]
pub(crate) fn tan_fast(x: f32) -> f32 {
    let (r, r_lo, q) = reduce_quadrant(x.abs());
    let (sin, cos) = sin_cos_pairs(r, r_lo);
    let odd = q & 1 != 0;
    let ((nh, nl), (dh, dl)) = if odd { (cos, sin) } else { (sin, cos) };
    let inv = 1.0 / (dh + dl);
    let t0 = (nh + nl) * inv;
    let rem = (-t0).mul_add(dh, nh) + (-t0).mul_add(dl, nl);
    let t = rem.mul_add(inv, t0);
    flip_sign(t, ((odd as u32) << 31) ^ x.to_bits())
}

/// `fast(x)` below [`TRIG_FAST_BELOW`], else libm's f64 `large`, rounded
/// once (glibc's reduction is exact at any magnitude).
#[inline(always)]
fn fast_or_libm(x: f32, fast: impl Fn(f32) -> f32, large: fn(f64) -> f64) -> f32 {
    if x.abs() < TRIG_FAST_BELOW {
        fast(x)
    } else {
        by_libm(x, large)
    }
}

#[cold]
#[inline(never)]
fn by_libm(x: f32, large: fn(f64) -> f64) -> f32 {
    large(x as f64) as f32
}

/// The tangent of any f32.
#[inline(always)]
pub(crate) fn tan(x: f32) -> f32 {
    fast_or_libm(x, tan_fast, f64::tan)
}

/// The sine of any f32.
#[inline(always)]
pub(crate) fn sin(x: f32) -> f32 {
    fast_or_libm(x, sin_fast, f64::sin)
}

/// The cosine of any f32.
#[inline(always)]
pub(crate) fn cos(x: f32) -> f32 {
    fast_or_libm(x, cos_fast, f64::cos)
}
