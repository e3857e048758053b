//! Softmax and log-softmax over a dim that is not the last, down the
//! columns of a contiguous `[outer, len, inner]` buffer.

use super::columns::{COLUMN_BLOCK, par_column_runs};
use crate::Float;
use crate::threads::{SharedSlice, simd};
use std::mem::MaybeUninit;

/// Softmax (`log`: log-softmax) over the middle dim of a contiguous
/// `[outer, len, inner]` buffer, the formulas of [`softmax_rows`](super::softmax_rows) and
/// [`log_softmax_rows`](super::log_softmax_rows) per column (sums in row order): a max pass, an
/// `exp` and sum pass, a scaling pass, each reading rows whole. A dim that
/// is not the last was two transposed copies around the rows kernel.
///
/// ```
/// let y = tapir_kernels::cpu::softmax_columns(&[1.0f32, 5.0, 1.0, 5.0], 2, 2, false);
/// assert_eq!(y, vec![0.5; 4]);
/// ```
pub fn softmax_columns<T: Float>(x: &[T], len: usize, inner: usize, log: bool) -> Vec<T> {
    let mut out = crate::alloc::with_capacity(x.len());
    let shared = SharedSlice::new(&mut out.spare_capacity_mut()[..x.len()]);
    par_column_runs(x.len(), len, inner, |base, cols| {
        let plane = &x[base..base + len * inner];
        let w = cols.len();
        simd(
            #[inline(always)]
            || {
                softmax_column_block(plane, inner, cols.clone(), log, |r| {
                    // SAFETY: these columns of this plane belong to this
                    // run alone, and one row's piece lives at a time.
                    unsafe { shared.piece(base + r * inner + cols.start, w) }
                })
            },
        );
    });
    // SAFETY: the tasks covered every column of every plane, and
    // `softmax_column_block` writes each row of its columns.
    unsafe { out.set_len(x.len()) };
    out
}

/// Softmax (or log-softmax) down `cols` of a `[len, inner]` plane, row `r`
/// of the result written to the fresh slots `row_out(r)` (every one of
/// them; softmax rereads what it wrote).
#[inline(always)]
fn softmax_column_block<'a, T: Float>(
    plane: &[T],
    inner: usize,
    cols: std::ops::Range<usize>,
    log: bool,
    row_out: impl Fn(usize) -> &'a mut [MaybeUninit<T>],
) {
    let w = cols.len();
    let (mut max, mut sum) = ([T::neg_infinity(); COLUMN_BLOCK], [T::zero(); COLUMN_BLOCK]);
    let (max, sum) = (&mut max[..w], &mut sum[..w]);
    let rows = || plane.chunks_exact(inner).map(|row| &row[cols.clone()]);
    for row in rows() {
        max.iter_mut().zip(row).for_each(|(m, &v)| *m = m.max(v));
    }
    for m in max.iter_mut() {
        // The rows kernel's `softmax_shift` (`f32::max` skips a NaN, whose
        // `exp` still makes its column's sum NaN).
        *m = if *m == T::neg_infinity() {
            T::zero()
        } else {
            *m
        };
    }
    if log {
        for row in rows() {
            for ((s, &v), &m) in sum.iter_mut().zip(row).zip(max.iter()) {
                *s = *s + (v - m).fast_exp();
            }
        }
        // `(v - max) - ln(sum)`, as the rows kernel; `ln(sum)` kept in `sum`.
        for s in sum.iter_mut() {
            *s = s.ln();
        }
        for (r, row) in rows().enumerate() {
            for (((o, &v), &m), &log_sum) in row_out(r)
                .iter_mut()
                .zip(row)
                .zip(max.iter())
                .zip(sum.iter())
            {
                o.write((v - m) - log_sum);
            }
        }
        return;
    }
    for (r, row) in rows().enumerate() {
        for (((o, s), &v), &m) in row_out(r)
            .iter_mut()
            .zip(sum.iter_mut())
            .zip(row)
            .zip(max.iter())
        {
            let e = (v - m).fast_exp();
            o.write(e);
            *s = *s + e;
        }
    }
    for s in sum.iter_mut() {
        *s = T::one() / *s;
    }
    for r in 0..plane.len() / inner {
        // SAFETY: the loop above wrote every slot of each row.
        let out = unsafe { crate::alloc::written(row_out(r)) };
        for (o, &inv) in out.iter_mut().zip(sum.iter()) {
            *o = *o * inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{log_softmax_rows, softmax_rows};

    #[test]
    fn softmax_columns_are_the_rows_kernel_down_each_column() {
        // Blocks whole, short, split across threads and across planes; a
        // column of -inf, one with +inf, one with NaN.
        let shapes = [
            (4, 7, 1),
            (5, 6, 3),
            (3, 5, 17),
            (2, 40, 1000),
            (2, 3, 2048),
            (1, 3, 4500),
        ];
        for (outer, len, inner) in shapes {
            let mut x: Vec<f32> = (0..outer * len * inner)
                .map(|i| ((i * 7919) % 2003) as f32 / 40.0 - 25.0)
                .collect();
            for r in 0..len {
                x[r * inner] = f32::NEG_INFINITY;
            }
            if inner > 2 {
                x[(len - 1) * inner + 1] = f32::INFINITY;
                x[inner + 2] = f32::NAN;
            }
            let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            // Each column as a row, for the rows kernel.
            let mut t = vec![0.0f32; x.len()];
            for o in 0..outer {
                for r in 0..len {
                    for c in 0..inner {
                        t[(o * inner + c) * len + r] = x[(o * len + r) * inner + c];
                    }
                }
            }
            for log in [false, true] {
                let want = if log {
                    log_softmax_rows(&t, len)
                } else {
                    softmax_rows(&t, len)
                };
                for threads in [1, 2] {
                    crate::threads::set_num_threads(threads);
                    let y = softmax_columns(&x, len, inner, log);
                    let y64 = softmax_columns(&x64, len, inner, log);
                    for o in 0..outer {
                        for r in 0..len {
                            for c in 0..inner {
                                let (got, got64) =
                                    (y[(o * len + r) * inner + c], y64[(o * len + r) * inner + c]);
                                let w = want[(o * inner + c) * len + r];
                                let close = |g: f64| {
                                    g == w as f64
                                        || (g - w as f64).abs() <= 1e-6 * (w as f64).abs().max(1.0)
                                        || g.is_nan() && w.is_nan()
                                };
                                assert!(
                                    close(got as f64) && close(got64),
                                    "[{outer}, {len}, {inner}], log {log}, ({o}, {r}, {c}): {got} / {got64} against {w}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
