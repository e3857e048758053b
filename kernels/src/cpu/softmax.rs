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
    rows(x, len, |src, dst| {
        let max = lanes_max(src);
        let max = if max.is_finite() { max } else { T::zero() };
        dst.copy_from_slice(src);
        let sum = exp_shifted_sum(dst, max);
        let inv = T::one() / sum;
        dst.iter_mut().for_each(|d| *d = *d * inv);
    })
}

/// Log-softmax of each row: `x - max - log(sum(exp(x - max)))`.
pub fn log_softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    rows(x, len, |src, dst| {
        let max = lanes_max(src);
        let max = if max.is_finite() { max } else { T::zero() };
        dst.copy_from_slice(src);
        let sum = exp_shifted_sum(dst, max);
        let shift = max + sum.ln();
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = v - shift;
        }
    })
}

fn rows<T: Float>(x: &[T], len: usize, f: impl Fn(&[T], &mut [T]) + Sync) -> Vec<T> {
    let f = |s: &[T], d: &mut [T]| {
        simd(
            #[inline(always)]
            || f(s, d),
        )
    };
    let mut out = crate::alloc::filled(x.len(), T::zero());
    if len == 0 {
        return out;
    }
    if !parallel(x.len()) {
        out.chunks_mut(len)
            .zip(x.chunks(len))
            .for_each(|(d, s)| f(s, d));
    } else {
        // A few thousand elements per task, whole rows each.
        let rows = (crate::threads::PARALLEL_GRAIN / 4 / len).max(1);
        par_chunks_mut(&mut out, rows * len, |i, d| {
            let s = &x[i * rows * len..i * rows * len + d.len()];
            d.chunks_mut(len)
                .zip(s.chunks(len))
                .for_each(|(d, s)| f(s, d))
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
