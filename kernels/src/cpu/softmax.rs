//! Numerically stable softmax and log-softmax over contiguous rows.

use crate::Float;
use crate::threads::{par_chunks_mut, parallel, simd};

/// Softmax of each row of length `len` of a contiguous buffer (max subtracted
/// first, so large logits do not overflow).
///
/// ```
/// let y = tapir_kernels::cpu::softmax_rows(&[1000.0f32, 1000.0], 2);
/// assert_eq!(y, vec![0.5, 0.5]);
/// ```
pub fn softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    rows(
        x,
        len,
        #[inline(always)]
        |_, src, dst| {
            let (_, sum) = exp_row(src, dst);
            let inv = T::one() / sum;
            dst.iter_mut().for_each(|d| *d = *d * inv);
        },
    )
}

/// Writes `exp(x - max)` of the row `src` into `dst` and returns the max
/// (0 for a row without a finite one) and the sum: the first half of softmax
/// and log-softmax.
#[inline(always)]
fn exp_row<T: Float>(src: &[T], dst: &mut [T]) -> (T, T) {
    let max = lanes_max(src);
    let max = if max.is_finite() { max } else { T::zero() };
    dst.copy_from_slice(src);
    (max, exp_shifted_sum(dst, max))
}

/// Log-softmax of each row: `x - max - log(sum(exp(x - max)))`.
pub fn log_softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    rows(
        x,
        len,
        #[inline(always)]
        |_, src, dst| {
            let (max, sum) = exp_row(src, dst);
            let shift = max + sum.ln();
            for (d, &v) in dst.iter_mut().zip(src) {
                *d = v - shift;
            }
        },
    )
}

/// Softmax of each row of `scale * x` with, when `causal`, the positions
/// after each query masked (row `r` is query `r % queries`; it sees keys
/// `0..=r % queries`, PyTorch's top-left causal mask): the eager `x * scale`,
/// `masked_fill(-inf)`, `softmax(-1)` in one pass, bit for bit, as
/// `compile` rewrites that chain.
///
/// ```
/// let y = tapir_kernels::cpu::scaled_softmax_rows(&[1.0f32, 2.0, 3.0, 4.0], 2, 2, 0.5, true);
/// assert_eq!(y[..2], [1.0, 0.0]); // query 0 sees key 0 only
/// assert!((y[2] + y[3] - 1.0).abs() < 1e-6);
/// ```
pub fn scaled_softmax_rows<T: Float>(
    x: &[T],
    len: usize,
    queries: usize,
    scale: T,
    causal: bool,
) -> Vec<T> {
    rows(
        x,
        len,
        #[inline(always)]
        |r, src, dst| {
            let seen = if causal {
                (r % queries.max(1) + 1).min(len)
            } else {
                len
            };
            for (d, &v) in dst[..seen].iter_mut().zip(src) {
                *d = v * scale;
            }
            dst[seen..].fill(T::neg_infinity());
            let max = lanes_max(dst);
            let max = if max.is_finite() { max } else { T::zero() };
            let sum = exp_shifted_sum(dst, max);
            let inv = T::one() / sum;
            dst.iter_mut().for_each(|d| *d = *d * inv);
        },
    )
}

/// The gradient of [`scaled_softmax_rows`] from its output `y` and the
/// upstream `g`: `scale * y * (g - sum(g * y))` per row (masked positions
/// have `y = 0`).
pub fn scaled_softmax_backward_rows<T: Float>(y: &[T], g: &[T], len: usize, scale: T) -> Vec<T> {
    rows(
        y,
        len,
        #[inline(always)]
        |r, yr, dst| {
            let gr = &g[r * len..(r + 1) * len];
            let mut acc = [T::zero(); LANES];
            let mut chunks = yr.chunks_exact(LANES).zip(gr.chunks_exact(LANES));
            for (a, b) in &mut chunks {
                for l in 0..LANES {
                    acc[l] = acc[l] + a[l] * b[l];
                }
            }
            let tail_start = yr.len() / LANES * LANES;
            let tail = yr[tail_start..]
                .iter()
                .zip(&gr[tail_start..])
                .fold(T::zero(), |s, (&a, &b)| s + a * b);
            let dot = acc.iter().fold(tail, |s, &v| s + v);
            for ((d, &y), &g) in dst.iter_mut().zip(yr).zip(gr) {
                *d = y * (g - dot) * scale;
            }
        },
    )
}

/// `f(row, src, dst)` for every row of `len` elements, across threads for
/// large inputs, into a fresh buffer.
fn rows<T: Float>(x: &[T], len: usize, f: impl Fn(usize, &[T], &mut [T]) + Sync) -> Vec<T> {
    let f = |r: usize, s: &[T], d: &mut [T]| {
        simd(
            #[inline(always)]
            || f(r, s, d),
        )
    };
    let mut out = crate::alloc::filled(x.len(), T::zero());
    if len == 0 {
        return out;
    }
    if !parallel(x.len()) {
        out.chunks_mut(len)
            .zip(x.chunks(len))
            .enumerate()
            .for_each(|(r, (d, s))| f(r, s, d));
    } else {
        // A few thousand elements per task, whole rows each.
        let rows = (crate::threads::PARALLEL_GRAIN / 4 / len).max(1);
        par_chunks_mut(&mut out, rows * len, |i, d| {
            let s = &x[i * rows * len..i * rows * len + d.len()];
            d.chunks_mut(len)
                .zip(s.chunks(len))
                .enumerate()
                .for_each(|(k, (d, s))| f(i * rows + k, s, d))
        });
    }
    out
}

/// Lanes for the row reductions: 16 independent partial results, so the
/// loops vectorise (a single float accumulator is a serial chain).
const LANES: usize = 16;

/// The largest element (`-inf` for none).
#[inline(always)]
pub(crate) fn lanes_max<T: Float>(x: &[T]) -> T {
    let mut acc = [T::neg_infinity(); LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks
        .remainder()
        .iter()
        .fold(T::neg_infinity(), |m, &v| m.max(v));
    for c in chunks {
        for l in 0..LANES {
            acc[l] = acc[l].max(c[l]);
        }
    }
    acc.iter().fold(tail, |m, &v| m.max(v))
}

/// Replaces each `x` by `exp(x - shift)` and returns their sum.
#[inline(always)]
pub(crate) fn exp_shifted_sum<T: Float>(x: &mut [T], shift: T) -> T {
    let mut acc = [T::zero(); LANES];
    let mut chunks = x.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            c[l] = (c[l] - shift).fast_exp();
            acc[l] = acc[l] + c[l];
        }
    }
    let mut tail = T::zero();
    for v in chunks.into_remainder() {
        *v = (*v - shift).fast_exp();
        tail = tail + *v;
    }
    acc.iter().fold(tail, |s, &v| s + v)
}
