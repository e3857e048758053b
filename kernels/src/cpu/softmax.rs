//! Numerically stable softmax and log-softmax over contiguous rows.

use crate::Float;
use crate::threads::{par_chunks_mut, parallel, simd};
use half::bf16;
use std::mem::MaybeUninit;

/// Softmax of each row of length `len` of a contiguous buffer (max subtracted
/// first, so large logits do not overflow).
///
/// ```
/// let y = tapir_kernels::cpu::softmax_rows(&[1000.0f32, 1000.0], 2);
/// assert_eq!(y, vec![0.5, 0.5]);
/// ```
pub fn softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    let row = row_fn(
        #[inline(always)]
        |_, src: &[T], dst: &mut [MaybeUninit<T>]| {
            let max = softmax_shift(lanes_max(src));
            let (dst, sum) = exp_shifted_into(src, dst, max);
            let inv = T::one() / sum;
            dst.iter_mut().for_each(|d| *d = *d * inv);
        },
    );
    // SAFETY: `exp_shifted_into` writes every slot of the row.
    unsafe { rows(x, len, row) }
}

/// Log-softmax of each row: `(x - max) - log(sum(exp(x - max)))`, in
/// PyTorch's order: subtracting `max + log(sum)` at once lost the log
/// where it is below half an ulp of the max (log-softmax of `[1e30, 1e30]`
/// was 0, not `-ln 2`; of logits near 1e4, off by up to 5e-4).
///
/// ```
/// let y = tapir_kernels::cpu::log_softmax_rows(&[1e30f32, 1e30], 2);
/// assert_eq!(y, [-std::f32::consts::LN_2; 2]);
/// ```
pub fn log_softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    let row = row_fn(
        #[inline(always)]
        |_, src: &[T], dst: &mut [MaybeUninit<T>]| {
            let max = softmax_shift(lanes_max(src));
            let log_sum = exp_shifted_sum_of(src, max).ln();
            for (d, &v) in dst.iter_mut().zip(src) {
                d.write((v - max) - log_sum);
            }
        },
    );
    // SAFETY: the loop writes every slot of the row.
    unsafe { rows(x, len, row) }
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
    let row = row_fn(
        #[inline(always)]
        |r, src: &[T], dst: &mut [MaybeUninit<T>]| {
            let seen = if causal {
                (r % queries.max(1) + 1).min(len)
            } else {
                len
            };
            for (d, &v) in dst[..seen].iter_mut().zip(src) {
                d.write(v * scale);
            }
            dst[seen..].iter_mut().for_each(|d| {
                d.write(T::neg_infinity());
            });
            // SAFETY: the two loops above wrote `..seen` and `seen..`.
            let dst = unsafe { crate::alloc::written(dst) };
            let max = softmax_shift(lanes_max(dst));
            let sum = exp_shifted_sum(dst, max);
            let inv = T::one() / sum;
            dst.iter_mut().for_each(|d| *d = *d * inv);
        },
    );
    // SAFETY: `row` writes every slot of its row (the two loops).
    unsafe { rows(x, len, row) }
}

/// The gradient of [`scaled_softmax_rows`] from its output `y` and the
/// upstream `g`: `scale * y * (g - sum(g * y))` per row (masked positions
/// have `y = 0`).
pub fn scaled_softmax_backward_rows<T: Float>(y: &[T], g: &[T], len: usize, scale: T) -> Vec<T> {
    let row = row_fn(
        #[inline(always)]
        |r, yr: &[T], dst: &mut [MaybeUninit<T>]| {
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
                d.write(y * (g - dot) * scale);
            }
        },
    );
    // SAFETY: the last loop writes every slot of the row.
    unsafe { rows(y, len, row) }
}

/// The gradient of [`log_softmax_rows`] from its output `y` and the
/// upstream `g`: `g - exp(y) * sum(g)` per row, in one pass that reads
/// each row twice (PyTorch's `_log_softmax_backward_data`). Composed, the
/// `exp`, the product and the difference were three passes and three
/// buffers as large as the logits (an LM head's `[1024, 32000]`: 120 ms).
pub fn log_softmax_backward_rows<T: Float>(y: &[T], g: &[T], len: usize) -> Vec<T> {
    let row = row_fn(
        #[inline(always)]
        |r, yr: &[T], dst: &mut [MaybeUninit<T>]| {
            let gr = &g[r * len..(r + 1) * len];
            let sum = lanes_sum(gr);
            for ((d, &y), &g) in dst.iter_mut().zip(yr).zip(gr) {
                d.write(g - y.fast_exp() * sum);
            }
        },
    );
    // SAFETY: the loop writes every slot of the row.
    unsafe { rows(y, len, row) }
}

/// `ln(sum(exp(x)))` of each row of length `len` of a contiguous buffer, in
/// one read per row: `max + ln(sum(exp(x - max)))`, shifting by 0 where a
/// row has no finite max (so an all `-inf` row gives `-inf`, a row with
/// `+inf` gives `+inf`, and a NaN gives NaN). Composed, `logsumexp` was a
/// max, a difference, an `exp` and a sum, four passes and two buffers.
///
/// ```
/// let y = tapir_kernels::cpu::logsumexp_rows(&[1000.0f32, 1000.0, 0.0, f32::NEG_INFINITY], 2);
/// assert!((y[0] - (1000.0 + 2f32.ln())).abs() < 1e-3 && y[1] == 0.0);
/// ```
pub fn logsumexp_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    assert!(
        len > 0 && x.len().is_multiple_of(len),
        "logsumexp_rows kernel: {} elements are not rows of {len}",
        x.len()
    );
    let rows = x.len() / len;
    let mut out = vec![T::zero(); rows];
    let per = if x.len() < crate::threads::PARALLEL_GRAIN {
        rows
    } else {
        rows.div_ceil(crate::threads::num_threads())
    };
    par_chunks_mut(&mut out, per, |t, out| {
        simd(
            #[inline(always)]
            || {
                for (k, o) in out.iter_mut().enumerate() {
                    let row = &x[(t * per + k) * len..][..len];
                    let max = finite_or_zero(lanes_max(row));
                    *o = max + exp_shifted_sum_of(row, max).ln();
                }
            },
        )
    });
    out
}

/// Softmax (`log`: log-softmax) of each bf16 row of length `len`,
/// computed in f32 per row exactly as [`softmax_rows`] and
/// [`log_softmax_rows`] compute it, then rounded to bf16 once: the same
/// bits as converting the input to f32, running the f32 kernel and
/// rounding the result, without those two passes over the whole buffer
/// (attention's 2 M bf16 scores: 3.3 ms that way).
///
/// ```
/// use half::bf16;
/// let x = [1.0f32, 1.0].map(bf16::from_f32);
/// assert_eq!(tapir_kernels::cpu::softmax_rows_bf16(&x, 2, false), [bf16::from_f32(0.5); 2]);
/// ```
pub fn softmax_rows_bf16(x: &[bf16], len: usize, log: bool) -> Vec<bf16> {
    // Rows `first..` into `dst`, through one f32 row of scratch per task.
    let run = |first: usize, dst: &mut [MaybeUninit<bf16>]| {
        let mut row = vec![0f32; len];
        for (k, d) in dst.chunks_mut(len).enumerate() {
            let src = &x[(first + k) * len..(first + k + 1) * len];
            simd(
                #[inline(always)]
                || {
                    row.iter_mut()
                        .zip(src)
                        .for_each(|(r, &v)| *r = super::f32_from_bf16(v));
                    let max = softmax_shift(lanes_max(&row));
                    let sum = exp_shifted_sum(&mut row, max);
                    if log {
                        let log_sum = sum.ln();
                        for (d, &v) in d.iter_mut().zip(src) {
                            let shifted = super::f32_from_bf16(v) - max;
                            d.write(super::bf16_from_f32(shifted - log_sum));
                        }
                    } else {
                        let inv = 1.0 / sum;
                        for (d, &e) in d.iter_mut().zip(&row) {
                            d.write(super::bf16_from_f32(e * inv));
                        }
                    }
                },
            )
        }
    };
    // SAFETY: `run` writes every slot of every row it is given.
    unsafe { row_blocks(x.len(), len, run) }
}

/// [`scaled_softmax_backward_rows`] for bf16 `y` and `g`: each row's sum
/// and gradient are computed in f32 and each gradient is rounded to bf16
/// once (PyTorch's reduced-precision softmax backward accumulates in f32
/// too). Converting both operands to f32 buffers first and the result back
/// cost three extra passes: 3 ms for attention's 2 M scores.
///
/// ```
/// use half::bf16;
/// let y = [0.25f32, 0.75].map(bf16::from_f32);
/// let g = [1.0f32, 0.0].map(bf16::from_f32);
/// let dx = tapir_kernels::cpu::scaled_softmax_backward_rows_bf16(&y, &g, 2, 1.0);
/// assert_eq!(dx, [0.1875f32, -0.1875].map(bf16::from_f32));
/// ```
pub fn scaled_softmax_backward_rows_bf16(
    y: &[bf16],
    g: &[bf16],
    len: usize,
    scale: f32,
) -> Vec<bf16> {
    assert!(
        y.len() == g.len(),
        "softmax backward kernel: output of {} and gradient of {} elements",
        y.len(),
        g.len()
    );
    let row = |r: usize, dst: &mut [MaybeUninit<bf16>]| {
        simd(
            #[inline(always)]
            || {
                let (yr, gr) = (&y[r * len..(r + 1) * len], &g[r * len..(r + 1) * len]);
                let mut acc = [0f32; LANES];
                let (yc, gc) = (yr.chunks_exact(LANES), gr.chunks_exact(LANES));
                let tail = (yc.remainder().iter().zip(gc.remainder())).fold(0f32, |s, (a, b)| {
                    s + super::f32_from_bf16(*a) * super::f32_from_bf16(*b)
                });
                for (a, b) in yc.zip(gc) {
                    for l in 0..LANES {
                        acc[l] += super::f32_from_bf16(a[l]) * super::f32_from_bf16(b[l]);
                    }
                }
                let dot = acc.iter().fold(tail, |s, &v| s + v);
                for ((d, &yv), &gv) in dst.iter_mut().zip(yr).zip(gr) {
                    d.write(super::bf16_from_f32(
                        super::f32_from_bf16(yv) * (super::f32_from_bf16(gv) - dot) * scale,
                    ));
                }
            },
        )
    };
    let run = |first: usize, dst: &mut [MaybeUninit<bf16>]| {
        (dst.chunks_mut(len).enumerate()).for_each(|(k, d)| row(first + k, d))
    };
    // SAFETY: `row` writes every slot of its row.
    unsafe { row_blocks(y.len(), len, run) }
}

/// `f(row, src, dst)` for every row of `len` elements, across threads for
/// large inputs, into a fresh buffer: `f` writes row `dst` from `src`.
/// The first pass over a row reads it from memory and the first write
/// fetches the output's lines, so softmax reads its row once for the max
/// and writes `exp` straight into `dst`: a copy of the row into `dst`
/// before `f` (the zero fill's safe substitute) was a pass of its own, a
/// third of the row softmax's time over 2048 x 2048.
///
/// # Safety
/// `f` must write every slot of `dst`.
unsafe fn rows<T: Float>(
    x: &[T],
    len: usize,
    f: impl Fn(usize, &[T], &mut [MaybeUninit<T>]) + Sync,
) -> Vec<T> {
    let run = |first: usize, dst: &mut [MaybeUninit<T>]| {
        for (k, d) in dst.chunks_mut(len).enumerate() {
            let r = first + k;
            simd(
                #[inline(always)]
                || f(r, &x[r * len..(r + 1) * len], d),
            )
        }
    };
    // SAFETY: `f` writes every slot of each row (the caller's contract).
    unsafe { row_blocks(x.len(), len, run) }
}

/// `f` as it is: a closure bound to a name keeps its `#[inline(always)]`
/// (the attribute is allowed on an argument, not on a `let`'s value).
#[inline(always)]
fn row_fn<T, F: Fn(usize, &[T], &mut [MaybeUninit<T>]) + Sync>(f: F) -> F {
    f
}

/// A fresh buffer of `n` elements, rows of `len`, written by `run(first,
/// slots)` for blocks of whole rows starting at row `first` (a few thousand
/// elements each, across threads for large `n`).
///
/// # Safety
/// `run` must write every slot it is given.
unsafe fn row_blocks<D: Send + 'static>(
    n: usize,
    len: usize,
    run: impl Fn(usize, &mut [MaybeUninit<D>]) + Sync,
) -> Vec<D> {
    if len == 0 {
        return Vec::new();
    }
    let mut out = crate::alloc::with_capacity(n);
    let slots = &mut out.spare_capacity_mut()[..n];
    match parallel(n) {
        false => run(0, slots),
        true => {
            let rows = (crate::threads::PARALLEL_GRAIN / 4 / len).max(1);
            par_chunks_mut(slots, rows * len, |i, d| run(i * rows, d));
        }
    }
    // SAFETY: `out` was empty with capacity `n`, and `run` wrote every
    // slot of the blocks, which cover all `n` (the caller's contract).
    unsafe { out.set_len(n) };
    out
}

/// Lanes for the row reductions: 16 independent partial results, so the
/// loops vectorise (a single float accumulator is a serial chain).
const LANES: usize = 16;

/// The sum of `x` over `LANES` independent accumulators (so the loop
/// vectorises), then across them.
#[inline(always)]
fn lanes_sum<T: Float>(x: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder().iter().fold(T::zero(), |s, &v| s + v);
    for c in chunks {
        for l in 0..LANES {
            acc[l] = acc[l] + c[l];
        }
    }
    acc.iter().fold(tail, |s, &v| s + v)
}

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

/// `max`, or 0 where it is not finite (a row of `-inf` or with `+inf` or
/// NaN): the shift that keeps `exp` from overflowing, and what PyTorch's
/// `logsumexp` shifts by (so a row with `+inf` gives `+inf`).
#[inline(always)]
fn finite_or_zero<T: Float>(max: T) -> T {
    if max.is_finite() { max } else { T::zero() }
}

/// The shift of softmax and log-softmax: the row's max, or 0 for a row of
/// `-inf` (its softmax is then `0 / 0`, NaN, as PyTorch's). A row with
/// `+inf` is shifted by `+inf`, so `inf - inf` makes the whole row NaN, as
/// PyTorch's (and the CUDA kernel's); shifted by 0 it was NaN at the
/// infinity and 0 elsewhere.
#[inline(always)]
fn softmax_shift<T: Float>(max: T) -> T {
    if max == T::neg_infinity() {
        T::zero()
    } else {
        max
    }
}

/// The sum of `exp(x - shift)` over `x`, in [`exp_shifted_sum`]'s order.
#[inline(always)]
fn exp_shifted_sum_of<T: Float>(x: &[T], shift: T) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks
        .remainder()
        .iter()
        .fold(T::zero(), |s, &v| s + (v - shift).fast_exp());
    for c in chunks {
        for l in 0..LANES {
            acc[l] = acc[l] + (c[l] - shift).fast_exp();
        }
    }
    acc.iter().fold(tail, |s, &v| s + v)
}

/// Writes `exp(s - shift)` of each `s` of `src` into `dst` (as long) and
/// returns `dst`, now written, and the sum, in [`exp_shifted_sum`]'s order.
#[inline(always)]
fn exp_shifted_into<'a, T: Float>(
    src: &[T],
    dst: &'a mut [MaybeUninit<T>],
    shift: T,
) -> (&'a mut [T], T) {
    assert!(
        src.len() == dst.len(),
        "exp_shifted_into: rows of unequal length"
    );
    let mut acc = [T::zero(); LANES];
    let mut pairs = dst.chunks_exact_mut(LANES).zip(src.chunks_exact(LANES));
    for (d, s) in &mut pairs {
        for l in 0..LANES {
            let e = (s[l] - shift).fast_exp();
            d[l].write(e);
            acc[l] = acc[l] + e;
        }
    }
    let body = src.len() / LANES * LANES;
    let mut tail = T::zero();
    for (d, &s) in dst[body..].iter_mut().zip(&src[body..]) {
        let e = (s - shift).fast_exp();
        d.write(e);
        tail = tail + e;
    }
    // SAFETY: the two loops wrote `..body` and `body..` (the lengths are
    // equal).
    let dst = unsafe { crate::alloc::written(dst) };
    (dst, acc.iter().fold(tail, |s, &v| s + v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logsumexp_rows_match_f64_with_infinities_and_nan() {
        for len in [1, 15, 16, 17, 100] {
            let rows = 700;
            let mut x: Vec<f32> = (0..rows * len)
                .map(|i| ((i * 7919) % 2003) as f32 / 20.0 - 50.0)
                .collect();
            // Rows 0..5: all -inf, one +inf, one NaN, +inf with -inf, huge.
            x[..len].fill(f32::NEG_INFINITY);
            x[len] = f32::INFINITY;
            x[2 * len + len / 2] = f32::NAN;
            x[3 * len..4 * len].fill(f32::NEG_INFINITY);
            x[3 * len] = f32::INFINITY;
            x[4 * len..5 * len].iter_mut().for_each(|v| *v *= 1e36);
            let mut runs = vec![];
            for threads in [1, 2] {
                crate::threads::set_num_threads(threads);
                runs.push(logsumexp_rows(&x, len));
            }
            let y = &runs[0];
            assert!(
                y.iter()
                    .zip(&runs[1])
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
            assert!(y[0] == f32::NEG_INFINITY && y[1] == f32::INFINITY && y[2].is_nan());
            assert!(
                y[3] == f32::INFINITY,
                "len {len}: [inf, -inf..] gave {}",
                y[3]
            );
            for r in 4..rows {
                let row = &x[r * len..(r + 1) * len];
                let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
                let want = max + sum.ln();
                assert!(
                    (y[r] as f64 - want).abs() <= 2e-7 * want.abs().max(1.0),
                    "len {len}, row {r}: {} against {want}",
                    y[r]
                );
            }
        }
        let y = logsumexp_rows(&[0.5f64, -2.0, 3.0], 3);
        let want = (0.5f64.exp() + (-2f64).exp() + 3f64.exp()).ln();
        assert!((y[0] - want).abs() < 1e-15);
    }

    #[test]
    fn every_row_kernel_matches_the_definition_at_any_thread_count() {
        // 600 rows of 100 (past the parallel grain), one with -inf entries.
        let (rows, len) = (600, 100);
        let mut x: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 7919) % 1013) as f32 / 50.0 - 10.0)
            .collect();
        x[len + 5..len + 15].fill(f32::NEG_INFINITY);
        let g: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 31) % 17) as f32 - 8.0)
            .collect();
        let mut runs = vec![];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            let y = softmax_rows(&x, len);
            let ls = log_softmax_rows(&x, len);
            let sc = scaled_softmax_rows(&x, len, 50, 0.5, true);
            let dy = scaled_softmax_backward_rows(&sc, &g, len, 0.5);
            let dl = log_softmax_backward_rows(&ls, &g, len);
            runs.push([y, ls, sc, dy, dl]);
        }
        for (k, (a, b)) in runs[0].iter().zip(&runs[1]).enumerate() {
            let first = a
                .iter()
                .zip(b)
                .position(|(p, q)| p.to_bits() != q.to_bits());
            assert!(
                first.is_none(),
                "output {k} differs at 1 and 2 threads from {first:?}: {:?}",
                first.map(|i| (a[i], b[i]))
            );
        }
        let [y, ls, sc, dy, dl] = &runs[0];
        for r in 0..rows {
            let row = &x[r * len..(r + 1) * len];
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            let seen = r % 50 + 1;
            let smax = row[..seen]
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(0.5 * v as f64));
            let ssum: f64 = row[..seen]
                .iter()
                .map(|&v| (0.5 * v as f64 - smax).exp())
                .sum();
            let (gr, sr) = (&g[r * len..(r + 1) * len], &sc[r * len..(r + 1) * len]);
            let dot: f64 = gr.iter().zip(sr).map(|(&a, &b)| a as f64 * b as f64).sum();
            let gsum: f64 = gr.iter().map(|&a| a as f64).sum();
            for j in 0..len {
                let i = r * len + j;
                let p = (x[i] as f64 - max).exp() / sum;
                assert!((y[i] as f64 - p).abs() <= 1e-6, "softmax ({r}, {j})");
                let lp = x[i] as f64 - max - sum.ln();
                assert!(
                    ls[i] as f64 == lp || (ls[i] as f64 - lp).abs() <= 1e-5,
                    "log_softmax ({r}, {j})"
                );
                let sp = if j < seen {
                    (0.5 * x[i] as f64 - smax).exp() / ssum
                } else {
                    0.0
                };
                assert!((sc[i] as f64 - sp).abs() <= 1e-6, "scaled ({r}, {j})");
                let d = 0.5 * sr[j] as f64 * (gr[j] as f64 - dot);
                assert!((dy[i] as f64 - d).abs() <= 1e-4, "backward ({r}, {j})");
                let dlp = gr[j] as f64 - (x[i] as f64 - max).exp() / sum * gsum;
                assert!(
                    (dl[i] as f64 - dlp).abs() <= 1e-4,
                    "log backward ({r}, {j})"
                );
            }
        }
    }

    #[test]
    fn the_bf16_backward_rounds_the_f32_result_once() {
        // 400 rows of 100 (past the parallel grain; 100 leaves a tail past
        // the 16 lanes).
        let (rows, len) = (400, 100);
        let y: Vec<bf16> = (0..rows * len)
            .map(|i| bf16::from_f32(((i * 7919) % 1013) as f32 / 1013.0 / 50.0))
            .collect();
        let g: Vec<bf16> = (0..rows * len)
            .map(|i| bf16::from_f32(((i * 31) % 17) as f32 - 8.0))
            .collect();
        let mut runs = vec![];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            runs.push(scaled_softmax_backward_rows_bf16(&y, &g, len, 0.5));
        }
        assert!(runs[0] == runs[1], "1 and 2 threads differ");
        for r in 0..rows {
            let (yr, gr) = (&y[r * len..(r + 1) * len], &g[r * len..(r + 1) * len]);
            let dot: f64 = yr
                .iter()
                .zip(gr)
                .map(|(a, b)| a.to_f64() * b.to_f64())
                .sum();
            for j in 0..len {
                let want = 0.5 * yr[j].to_f64() * (gr[j].to_f64() - dot);
                let got = runs[0][r * len + j].to_f64();
                assert!(
                    (got - want).abs() <= want.abs() / 256.0 + 1e-6,
                    "({r}, {j}): {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn bf16_rows_are_the_f32_kernels_rounded_once() {
        let (rows, len) = (500, 100);
        let mut x: Vec<bf16> = (0..rows * len)
            .map(|i| bf16::from_f32(((i * 7919) % 1013) as f32 / 50.0 - 10.0))
            .collect();
        x[len + 3..len + 20].fill(bf16::NEG_INFINITY);
        let wide = crate::cpu::bf16_to_f32(&x);
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            for log in [false, true] {
                let want = match log {
                    true => log_softmax_rows(&wide, len),
                    false => softmax_rows(&wide, len),
                };
                let want = crate::cpu::f32_to_bf16(&want);
                let got = softmax_rows_bf16(&x, len, log);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same && got.len() == want.len(),
                    "log {log}, {threads} threads"
                );
            }
        }
    }
}
