//! Numerically stable softmax and log-softmax over contiguous rows.

use crate::Float;
use crate::threads::{install, parallel, simd};
use rayon::prelude::*;

/// Softmax of each row of length `len` of a contiguous buffer (max subtracted
/// first, so large logits do not overflow).
///
/// ```
/// let y = tapir_kernels::cpu::softmax_rows(&[1000.0f32, 1000.0], 2);
/// assert_eq!(y, vec![0.5, 0.5]);
/// ```
pub fn softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    rows(x, len, |src, dst| {
        let max = src.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
        let max = if max.is_finite() { max } else { T::zero() };
        let mut sum = T::zero();
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = (v - max).exp();
            sum = sum + *d;
        }
        let inv = T::one() / sum;
        dst.iter_mut().for_each(|d| *d = *d * inv);
    })
}

/// Log-softmax of each row: `x - max - log(sum(exp(x - max)))`.
pub fn log_softmax_rows<T: Float>(x: &[T], len: usize) -> Vec<T> {
    rows(x, len, |src, dst| {
        let max = src.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
        let max = if max.is_finite() { max } else { T::zero() };
        let sum: T = src.iter().map(|&v| (v - max).exp()).sum();
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
        install(|_| {
            out.par_chunks_mut(len)
                .zip(x.par_chunks(len))
                .for_each(|(d, s)| f(s, d))
        });
    }
    out
}
