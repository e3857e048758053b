//! Max and min along one dim of a contiguous buffer: values with the index
//! of their first occurrence (`torch.max(x, dim)`), or values alone
//! (`torch.amax`), vectorised across a row's lanes or across columns.

use super::columns::{COLUMN_BLOCK, par_column_runs, plane_row_runs};
use crate::Float;
use crate::threads::{
    PARALLEL_GRAIN, SharedSlice, num_threads, outputs_per_task, par_chunks_mut, par_chunks_mut2,
    simd,
};

/// The max (or min) of each row of length `len` of a contiguous buffer and
/// the index of its first occurrence, as [`reduce`](super::reduce) with `torch.max(x,
/// -1)`'s fold would give them: a NaN wins (the first one), and of equal
/// values (`0.0` and `-0.0` too) the first. Sixteen lanes find the extreme
/// and where each found it in one pass (a second scan, to find a NaN, only
/// in rows that hold one), where the fold was one scalar pass (2 ns an
/// element in f32).
///
/// ```
/// let (v, i) = tapir_kernels::cpu::extreme_rows(&[1.0f32, 5.0, 5.0, f32::NAN, 0.0, 2.0], 3, true);
/// assert_eq!((v[0], i), (5.0, vec![1, 0]));
/// assert!(v[1].is_nan());
/// ```
pub fn extreme_rows<T: Float>(x: &[T], len: usize, max: bool) -> (Vec<T>, Vec<i64>) {
    assert!(
        len > 0 && x.len().is_multiple_of(len),
        "extreme_rows kernel: {} elements are not rows of {len}",
        x.len()
    );
    let rows = x.len() / len;
    let (mut vals, mut idx) = (vec![T::zero(); rows], vec![0i64; rows]);
    let per = if x.len() < PARALLEL_GRAIN {
        rows
    } else {
        rows.div_ceil(num_threads())
    };
    par_chunks_mut2((&mut vals, per), (&mut idx, per), |t, vals, idx| {
        simd(
            #[inline(always)]
            || {
                for (k, (v, i)) in vals.iter_mut().zip(idx.iter_mut()).enumerate() {
                    let r = t * per + k;
                    let row = &x[r * len..(r + 1) * len];
                    let at = if max {
                        row_extreme(row, |a, b| a > b)
                    } else {
                        row_extreme(row, |a, b| a < b)
                    };
                    (*v, *i) = (row[at], at as i64);
                }
            },
        )
    });
    (vals, idx)
}

/// The max (or min) over the middle dim of a contiguous `[outer, len,
/// inner]` buffer and the index of its first occurrence (`[outer, inner]`
/// each), as [`extreme_rows`] gives them for rows: a NaN wins (the first),
/// and of equal values the first. Rows of a block of columns are compared
/// with the block's running best, vectorised across the columns, where the
/// generic fold took 2 ns an element.
///
/// ```
/// // [2, 3] over dim 0: columns (1, 4), (7, 7), (NaN, 0).
/// let x = [1.0f32, 7.0, f32::NAN, 4.0, 7.0, 0.0];
/// let (v, i) = tapir_kernels::cpu::extreme_columns(&x, 2, 3, true);
/// assert_eq!((&v[..2], &i[..]), (&[4.0, 7.0][..], &[1, 0, 0][..]));
/// assert!(v[2].is_nan());
/// ```
pub fn extreme_columns<T: Float>(
    x: &[T],
    len: usize,
    inner: usize,
    max: bool,
) -> (Vec<T>, Vec<i64>) {
    assert!(
        len <= u32::MAX as usize,
        "extreme_columns kernel: rows of {len} (up to 2^32)"
    );
    if let Some(per) = plane_row_runs(x.len(), len, inner) {
        return columns_by_row_runs(x, len, inner, per, max);
    }
    let (mut vals, mut idx) = (
        vec![T::zero(); x.len() / len.max(1)],
        vec![0i64; x.len() / len.max(1)],
    );
    let (vals_out, idx_out) = (SharedSlice::new(&mut vals), SharedSlice::new(&mut idx));
    par_column_runs(x.len(), len, inner, |base, cols| {
        let plane = &x[base..base + len * inner];
        let (at, w) = (base / len + cols.start, cols.len());
        // SAFETY: these columns of this plane, hence these outputs, belong
        // to this run alone.
        let (v, i) = unsafe { (vals_out.piece(at, w), idx_out.piece(at, w)) };
        simd(
            #[inline(always)]
            || {
                if max {
                    extreme_column_block(plane, inner, cols.start, v, i, |a, b| a > b)
                } else {
                    extreme_column_block(plane, inner, cols.start, v, i, |a, b| a < b)
                }
            },
        )
    });
    (vals, idx)
}

/// [`extreme_columns`] of one `[len, inner]` plane with the threads taking
/// runs of `per` rows each, every run's result (its indices made the
/// plane's) then folded into the first in order: the first NaN, else the
/// first of the extremes, as the fold down the whole plane.
fn columns_by_row_runs<T: Float>(
    x: &[T],
    len: usize,
    inner: usize,
    per: usize,
    max: bool,
) -> (Vec<T>, Vec<i64>) {
    let runs = len.div_ceil(per);
    let (mut vals, mut idx) = (vec![T::zero(); runs * inner], vec![0i64; runs * inner]);
    par_chunks_mut2((&mut vals, inner), (&mut idx, inner), |i, v, at| {
        let rows = &x[i * per * inner..((i + 1) * per).min(len) * inner];
        simd(
            #[inline(always)]
            || {
                for c0 in (0..inner).step_by(COLUMN_BLOCK) {
                    let w = COLUMN_BLOCK.min(inner - c0);
                    let (v, at) = (&mut v[c0..c0 + w], &mut at[c0..c0 + w]);
                    if max {
                        extreme_column_block(rows, inner, c0, v, at, |a, b| a > b)
                    } else {
                        extreme_column_block(rows, inner, c0, v, at, |a, b| a < b)
                    }
                }
                at.iter_mut().for_each(|a| *a += (i * per) as i64);
            },
        )
    });
    let beats = |a: T, b: T| if max { a > b } else { a < b };
    let (best, later) = vals.split_at_mut(inner);
    let (best_at, later_at) = idx.split_at_mut(inner);
    for (v, at) in later.chunks_exact(inner).zip(later_at.chunks_exact(inner)) {
        for (((b, ba), &v), &a) in best.iter_mut().zip(best_at.iter_mut()).zip(v).zip(at) {
            if takes_over(v, *b, beats) {
                (*b, *ba) = (v, a);
            }
        }
    }
    vals.truncate(inner);
    idx.truncate(inner);
    (vals, idx)
}

/// One block of columns `c0..c0 + vals.len()` of a `[len, inner]` plane:
/// row 0 starts the best, each later row replaces it where it beats it or
/// is the first NaN.
#[inline(always)]
fn extreme_column_block<T: Float>(
    plane: &[T],
    inner: usize,
    c0: usize,
    vals: &mut [T],
    idx: &mut [i64],
    beats: impl Fn(T, T) -> bool,
) {
    let w = vals.len();
    let mut best = [T::zero(); COLUMN_BLOCK];
    let mut at = [0u32; COLUMN_BLOCK];
    let (best, at) = (&mut best[..w], &mut at[..w]);
    best.copy_from_slice(&plane[c0..c0 + w]);
    for (r, row) in plane.chunks_exact(inner).enumerate().skip(1) {
        for ((b, a), &v) in best.iter_mut().zip(at.iter_mut()).zip(&row[c0..c0 + w]) {
            let take = takes_over(v, *b, &beats);
            *b = if take { v } else { *b };
            *a = if take { r as u32 } else { *a };
        }
    }
    vals.copy_from_slice(best);
    for (i, &a) in idx.iter_mut().zip(at.iter()) {
        *i = a as i64;
    }
}

/// The index of the first NaN of `row`, else of the first element that no
/// other beats (`beats(a, b)`: `a` is strictly more extreme than `b`).
/// Sixteen lanes each keep their best and the block it came from (the
/// first of equals, as `beats` is strict); of the lanes that hold the
/// extreme, the lowest position wins. A NaN, rare, takes a second scan.
#[inline(always)]
fn row_extreme<T: Float>(row: &[T], beats: impl Fn(T, T) -> bool) -> usize {
    const LANES: usize = 16;
    if row.len() < LANES {
        let mut at = 0;
        for (i, &v) in row.iter().enumerate() {
            if v.is_nan() {
                return i;
            }
            at = if beats(v, row[at]) { i } else { at };
        }
        return at;
    }
    let mut best: [T; LANES] = std::array::from_fn(|l| row[l]);
    let mut block = [0u32; LANES]; // rows up to 2^36 elements
    // A NaN flag per lane: one flag for all would be a horizontal
    // reduction in every step, which keeps the loop scalar.
    let mut nans = [false; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for (k, c) in chunks.enumerate() {
        for l in 0..LANES {
            let take = beats(c[l], best[l]);
            best[l] = if take { c[l] } else { best[l] };
            block[l] = if take { k as u32 } else { block[l] };
            #[allow(clippy::eq_op)]
            let is_nan = c[l] != c[l];
            nans[l] |= is_nan;
        }
    }
    if nans.iter().any(|&n| n) || tail.iter().any(|v| v.is_nan()) {
        return first_where(row, |v| v.is_nan());
    }
    let mut m = best[0];
    for &v in &best[1..] {
        m = if beats(v, m) { v } else { m };
    }
    let mut at = (0..LANES)
        .filter(|&l| best[l] == m)
        .map(|l| block[l] as usize * LANES + l)
        .min()
        .unwrap_or(0);
    let done = row.len() - tail.len();
    for (i, &v) in tail.iter().enumerate() {
        if beats(v, m) {
            (m, at) = (v, done + i);
        }
    }
    at
}

/// The index of the first element of `row` where `hit` holds (0 if none):
/// sixteen at a time, then the one within.
#[inline(always)]
fn first_where<T: Float>(row: &[T], hit: impl Fn(T) -> bool) -> usize {
    const LANES: usize = 16;
    let mut chunks = row.chunks_exact(LANES);
    for (k, c) in (&mut chunks).enumerate() {
        if c.iter().fold(false, |any, &v| any | hit(v)) {
            return k * LANES + c.iter().position(|&v| hit(v)).unwrap_or(0);
        }
    }
    let done = row.len() - chunks.remainder().len();
    chunks
        .remainder()
        .iter()
        .position(|&v| hit(v))
        .map_or(0, |i| done + i)
}

/// The max (or min) over the middle dim of a contiguous `[outer, len,
/// inner]` buffer, values alone (`torch.amax` / `torch.amin`; `[outer,
/// inner]`): a NaN wins; of `0.0` and `-0.0` either may come back. With no
/// index to keep, each step is a compare and a select: sixteen lanes a row
/// when `inner` is 1, else blocks of columns compared row by row.
///
/// ```
/// let x = [1.0f32, 7.0, f32::NAN, 4.0, 7.0, 0.0];
/// assert_eq!(tapir_kernels::cpu::extreme_values(&x, 3, 1, true)[1], 7.0);
/// let v = tapir_kernels::cpu::extreme_values(&x, 2, 3, false);
/// assert_eq!(&v[..2], &[1.0, 7.0]);
/// assert!(v[2].is_nan());
/// ```
pub fn extreme_values<T: Float>(x: &[T], len: usize, inner: usize, max: bool) -> Vec<T> {
    assert!(
        len > 0 && inner > 0 && x.len().is_multiple_of(len * inner),
        "extreme_values kernel: {} elements are not [outer, {len}, {inner}]",
        x.len()
    );
    if let Some(per) = plane_row_runs(x.len(), len, inner) {
        return values_by_row_runs(x, len, inner, per, max);
    }
    let mut vals = vec![T::zero(); x.len() / len];
    // Threads split the outputs evenly, whatever planes and blocks of
    // columns they fall in (a single plane's columns are split too).
    let per = outputs_per_task(x.len(), vals.len());
    par_chunks_mut(&mut vals, per, |t, out| {
        simd(
            #[inline(always)]
            || {
                // `max` is settled here, outside the loops, so they vectorise.
                if max {
                    values_from(x, len, inner, t * per, out, |a, b| a > b)
                } else {
                    values_from(x, len, inner, t * per, out, |a, b| a < b)
                }
            },
        )
    });
    vals
}

/// [`extreme_values`] of one `[len, inner]` plane with the threads taking
/// runs of `per` rows each, every run's values then folded into the first
/// in order (a NaN, once in, stays).
fn values_by_row_runs<T: Float>(
    x: &[T],
    len: usize,
    inner: usize,
    per: usize,
    max: bool,
) -> Vec<T> {
    let runs = len.div_ceil(per);
    let mut vals = vec![T::zero(); runs * inner];
    par_chunks_mut(&mut vals, inner, |i, out| {
        let rows = &x[i * per * inner..((i + 1) * per).min(len) * inner];
        let n = rows.len() / inner;
        simd(
            #[inline(always)]
            || {
                if max {
                    values_from(rows, n, inner, 0, out, |a, b| a > b)
                } else {
                    values_from(rows, n, inner, 0, out, |a, b| a < b)
                }
            },
        )
    });
    let beats = |a: T, b: T| if max { a > b } else { a < b };
    let (best, later) = vals.split_at_mut(inner);
    for run in later.chunks_exact(inner) {
        for (b, &v) in best.iter_mut().zip(run) {
            *b = keep_extreme(*b, v, beats);
        }
    }
    vals.truncate(inner);
    vals
}

/// [`extreme_values`]' outputs `at..at + out.len()`, in runs of one plane
/// and at most a block of columns.
#[inline(always)]
fn values_from<T: Float>(
    x: &[T],
    len: usize,
    inner: usize,
    mut at: usize,
    mut out: &mut [T],
    beats: impl Fn(T, T) -> bool + Copy,
) {
    while !out.is_empty() {
        let (o, c) = (at / inner, at % inner);
        let w = (inner - c).min(COLUMN_BLOCK).min(out.len());
        let (block, rest) = out.split_at_mut(w);
        let plane = &x[o * len * inner..(o + 1) * len * inner];
        if inner == 1 {
            block[0] = row_extreme_value(plane, beats);
        } else {
            column_block_values(plane, inner, c, block, beats);
        }
        (at, out) = (at + w, rest);
    }
}

/// Whether `v`, later in a fold with indices, replaces the best `b`: it
/// beats it, or it is the first NaN (a NaN in `b` stays, with its index).
#[inline(always)]
fn takes_over<T: Float>(v: T, b: T, beats: impl Fn(T, T) -> bool) -> bool {
    #[allow(clippy::eq_op)]
    let first_nan = (v != v) & (b == b);
    beats(v, b) | first_nan
}

/// `b` replaced by `v` where `v` beats it or is NaN: a NaN, once in, stays.
#[inline(always)]
fn keep_extreme<T: Float>(b: T, v: T, beats: impl Fn(T, T) -> bool) -> T {
    #[allow(clippy::eq_op)]
    let take = beats(v, b) | (v != v);
    if take { v } else { b }
}

/// The extreme value of a row: sixteen running values and NaN flags (a
/// NaN in the select would keep the loop scalar), then one of them.
#[inline(always)]
fn row_extreme_value<T: Float>(row: &[T], beats: impl Fn(T, T) -> bool + Copy) -> T {
    const LANES: usize = 16;
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    let mut best = row[0];
    if row.len() >= LANES {
        let mut lanes: [T; LANES] = std::array::from_fn(|l| row[l]);
        let mut nans = [false; LANES];
        for c in chunks {
            for l in 0..LANES {
                lanes[l] = if beats(c[l], lanes[l]) {
                    c[l]
                } else {
                    lanes[l]
                };
                #[allow(clippy::eq_op)]
                let is_nan = c[l] != c[l];
                nans[l] |= is_nan;
            }
        }
        if nans.iter().any(|&n| n) {
            return T::nan();
        }
        best = lanes
            .iter()
            .fold(lanes[0], |b, &v| keep_extreme(b, v, beats));
    }
    tail.iter().fold(best, |b, &v| keep_extreme(b, v, beats))
}

/// Columns `c0..c0 + out.len()` of a `[len, inner]` plane, values alone.
#[inline(always)]
fn column_block_values<T: Float>(
    plane: &[T],
    inner: usize,
    c0: usize,
    out: &mut [T],
    beats: impl Fn(T, T) -> bool + Copy,
) {
    let w = out.len();
    out.copy_from_slice(&plane[c0..c0 + w]);
    for row in plane.chunks_exact(inner).skip(1) {
        for (b, &v) in out.iter_mut().zip(&row[c0..c0 + w]) {
            *b = keep_extreme(*b, v, beats);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values, mostly ties of a few (signed zeros and infinities among
    /// them), varying with `i / group` too, and NaN at some `i` where
    /// `nan_at(i)`.
    fn tie_heavy(n: usize, group: usize, nan_at: impl Fn(usize) -> bool) -> Vec<f64> {
        let pool = [0.0, -0.0, 1.5, -1.5, 3.0, f64::INFINITY, f64::NEG_INFINITY];
        (0..n)
            .map(|i| {
                let k = (i * 7919 + i / group * 31) % 97;
                if k == 0 && nan_at(i) {
                    f64::NAN
                } else {
                    pool[k % 7]
                }
            })
            .collect()
    }

    /// `torch.max(x, -1)`'s fold, one element at a time.
    fn by_fold(row: &[f64], max: bool) -> (f64, usize) {
        let mut best = (row[0], 0);
        for (i, &v) in row.iter().enumerate().skip(1) {
            let beats = if max { v > best.0 } else { v < best.0 };
            if !best.0.is_nan() && (v.is_nan() || beats) {
                best = (v, i);
            }
        }
        best
    }

    #[test]
    fn extreme_rows_keep_the_folds_first_index_with_ties_zeros_and_nan() {
        for len in [1, 2, 15, 16, 17, 40] {
            let rows = 900;
            // A NaN in one row in 10.
            let x = tie_heavy(rows * len, len, |i| (i / len) % 10 == 0);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for max in [true, false] {
                for threads in [1, 2] {
                    crate::threads::set_num_threads(threads);
                    let (v, i) = extreme_rows(&x, len, max);
                    let (v32, i32) = extreme_rows(&x32, len, max);
                    for r in 0..rows {
                        let (want, at) = by_fold(&x[r * len..(r + 1) * len], max);
                        assert!(
                            i[r] == at as i64
                                && i32[r] == at as i64
                                && v[r].to_bits() == want.to_bits()
                                && v32[r].to_bits() == (want as f32).to_bits(),
                            "len {len}, max {max}, row {r}: ({}, {}) / ({}, {}) against ({want}, {at})",
                            v[r],
                            i[r],
                            v32[r],
                            i32[r]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_columns_match_the_fold_down_each_column() {
        // Blocks of columns whole, short, and split across threads.
        let shapes = [
            (1, 1, 5),
            (2, 17, 3),
            (3, 5, 256),
            (2, 9, 300),
            (2, 33, 768),
            (1, 40, 1000),
            (2, 5, 2048),
            (1, 3, 4500),
            (1, 201, 256),
            (1, 15, 4500),
        ];
        for (outer, len, inner) in shapes {
            let x = tie_heavy(outer * len * inner, inner, |i| (i % inner) % 10 == 0);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for max in [true, false] {
                for threads in [1, 3, 2] {
                    crate::threads::set_num_threads(threads);
                    let (v, i) = extreme_columns(&x, len, inner, max);
                    let (v32, i32) = extreme_columns(&x32, len, inner, max);
                    for o in 0..outer {
                        for c in 0..inner {
                            let col: Vec<f64> =
                                (0..len).map(|r| x[(o * len + r) * inner + c]).collect();
                            let (want, at) = by_fold(&col, max);
                            let k = o * inner + c;
                            assert!(
                                i[k] == at as i64
                                    && i32[k] == at as i64
                                    && v[k].to_bits() == want.to_bits()
                                    && v32[k].to_bits() == (want as f32).to_bits(),
                                "[{outer}, {len}, {inner}], max {max}, column {k}: ({}, {}) against ({want}, {at})",
                                v[k],
                                i[k]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_are_the_folds_values_along_rows_and_columns() {
        // Rows short and long; one plane of columns split across threads,
        // blocks whole and short; no outputs at all.
        let shapes = [
            (0, 3, 1),
            (7, 1, 1),
            (900, 15, 1),
            (300, 40, 1),
            (1, 40, 1000),
            (2, 9, 300),
            (3, 33, 256),
            (2, 17, 3),
            (2, 3, 4500),
            (1, 201, 256),
            (1, 15, 4500),
        ];
        for (outer, len, inner) in shapes {
            let x = tie_heavy(outer * len * inner, len * inner, |i| i % 3 == 0);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for max in [true, false] {
                for threads in [1, 3, 2] {
                    crate::threads::set_num_threads(threads);
                    let v = extreme_values(&x, len, inner, max);
                    let v32 = extreme_values(&x32, len, inner, max);
                    assert_eq!(v.len(), outer * inner);
                    for k in 0..outer * inner {
                        let (o, c) = (k / inner, k % inner);
                        let col: Vec<f64> =
                            (0..len).map(|r| x[(o * len + r) * inner + c]).collect();
                        let (want, _) = by_fold(&col, max);
                        let same = |got: f64| got == want || got.is_nan() && want.is_nan();
                        assert!(
                            same(v[k]) && same(v32[k] as f64),
                            "[{outer}, {len}, {inner}], max {max}, output {k}: {} / {} against {want}",
                            v[k],
                            v32[k]
                        );
                    }
                }
            }
        }
    }
}
