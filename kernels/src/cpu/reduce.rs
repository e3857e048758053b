//! Reductions over any set of dims.

use super::strided::{coalesce, for_rows, row_count};
use crate::threads::{
    PARALLEL_GRAIN, num_threads, par_chunks_mut, par_chunks_mut2, parallel, simd,
};
use crate::{Float, Layout};

/// Folds `src` (view `l`) over `dims`. The output holds one accumulator per
/// combination of kept dims, row-major. `fold(acc, x, i)` gets the element's
/// row-major position `i` within its reduced group (for argmax/argmin).
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let l = Layout::contiguous(&[2, 3]);
/// assert_eq!(cpu::reduce(&x, &l, &[0], 0.0, |a, v, _| a + v), vec![5.0, 7.0, 9.0]);
/// assert_eq!(cpu::reduce(&x, &l, &[1], 0.0, |a, v, _| a + v), vec![6.0, 15.0]);
/// ```
pub fn reduce<T, A>(
    src: &[T],
    l: &Layout,
    dims: &[usize],
    init: A,
    fold: impl Fn(A, T, usize) -> A + Sync,
) -> Vec<A>
where
    T: Copy + Send + Sync,
    A: Copy + Send + Sync + 'static,
{
    let plan = Plan::new(l, dims);
    if let Some(c) = plan.columns {
        return c.per_batch(plan.inner, init, |b, out| {
            let block = c.cols * plan.inner;
            let src = &src[c.offset + b * block..c.offset + (b + 1) * block];
            reduce_columns(src, plan.inner, &fold, out);
        });
    }
    plan.map_groups(|base| {
        simd(
            #[inline(always)]
            || {
                let mut acc = init;
                let mut pos = 0;
                plan.runs(base, |b, len, s| {
                    if s == 1 {
                        for (i, &v) in src[b..b + len].iter().enumerate() {
                            acc = fold(acc, v, pos + i);
                        }
                    } else {
                        for i in 0..len {
                            acc = fold(acc, src[b + i * s], pos + i);
                        }
                    }
                    pos += len;
                });
                acc
            },
        )
    })
}

/// The max (or min) of each row of length `len` of a contiguous buffer and
/// the index of its first occurrence, as [`reduce`] with `torch.max(x,
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

/// Columns [`extreme_columns`] keeps in registers and cache at once.
const EXTREME_COLUMN_BLOCK: usize = 256;

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
        len > 0 && len <= u32::MAX as usize && inner > 0 && x.len().is_multiple_of(len * inner),
        "extreme_columns kernel: {} elements are not [outer, {len}, {inner}] (len up to 2^32)",
        x.len()
    );
    let outer = x.len() / (len * inner);
    let (mut vals, mut idx) = (vec![T::zero(); outer * inner], vec![0i64; outer * inner]);
    let blocks_per_row = inner.div_ceil(EXTREME_COLUMN_BLOCK);
    let tasks = outer * blocks_per_row;
    let fill = |t: usize, vals: &mut [T], idx: &mut [i64]| {
        let (o, c0) = (
            t / blocks_per_row,
            t % blocks_per_row * EXTREME_COLUMN_BLOCK,
        );
        let plane = &x[o * len * inner..(o + 1) * len * inner];
        simd(
            #[inline(always)]
            || {
                if max {
                    extreme_column_block(plane, inner, c0, vals, idx, |a, b| a > b)
                } else {
                    extreme_column_block(plane, inner, c0, vals, idx, |a, b| a < b)
                }
            },
        )
    };
    if inner.is_multiple_of(EXTREME_COLUMN_BLOCK) || blocks_per_row == 1 {
        // Each task's output is one contiguous block.
        let w = inner.min(EXTREME_COLUMN_BLOCK);
        let run = |vals: &mut [T], idx: &mut [i64], t0: usize| {
            for (k, (v, i)) in vals.chunks_mut(w).zip(idx.chunks_mut(w)).enumerate() {
                fill(t0 + k, v, i);
            }
        };
        if parallel(x.len()) {
            let per = tasks.div_ceil(num_threads()) * w;
            par_chunks_mut2((&mut vals, per), (&mut idx, per), |c, v, i| {
                run(v, i, c * per / w)
            });
        } else {
            run(&mut vals, &mut idx, 0);
        }
    } else {
        // A short last block in each row: a task a plane.
        par_chunks_mut2((&mut vals, inner), (&mut idx, inner), |o, v, i| {
            let blocks = v
                .chunks_mut(EXTREME_COLUMN_BLOCK)
                .zip(i.chunks_mut(EXTREME_COLUMN_BLOCK));
            for (b, (v, i)) in blocks.enumerate() {
                fill(o * blocks_per_row + b, v, i);
            }
        });
    }
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
    let mut best = [T::zero(); EXTREME_COLUMN_BLOCK];
    let mut at = [0u32; EXTREME_COLUMN_BLOCK];
    let (best, at) = (&mut best[..w], &mut at[..w]);
    best.copy_from_slice(&plane[c0..c0 + w]);
    for (r, row) in plane.chunks_exact(inner).enumerate().skip(1) {
        for ((b, a), &v) in best.iter_mut().zip(at.iter_mut()).zip(&row[c0..c0 + w]) {
            #[allow(clippy::eq_op)]
            let take = beats(v, *b) | ((v != v) & (*b == *b));
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

/// How a reduction over some dims walks a view; shared by [`reduce`] and
/// `cpu::sum`.
pub(crate) struct Plan {
    /// Output elements (one per combination of kept dims).
    pub outer: usize,
    /// Elements folded into each.
    pub inner: usize,
    /// Set when the view is contiguous and the reduced dims are one run of
    /// dims followed by kept ones: each batch is then `[inner, cols]` rows
    /// folded column-wise, vectorised over the columns (a bias gradient;
    /// a sum over channels).
    pub columns: Option<Columns>,
    /// Where each group starts (empty with `columns`).
    bases: Vec<usize>,
    ishape: Vec<usize>,
    istrides: Vec<usize>,
    irows: usize,
}

/// A [`Plan`]'s column-wise walk: `batches` blocks of `[inner, cols]`
/// from `offset`, one after another.
#[derive(Clone, Copy)]
pub(crate) struct Columns {
    pub offset: usize,
    pub batches: usize,
    pub cols: usize,
}

impl Columns {
    /// One `cols`-wide result per batch, `fill(batch, out)` writing each
    /// into `out` (which starts as `init`):
    /// batches split across the threads when each is too narrow for
    /// [`by_columns`] to split (under 64 columns: the windows of a
    /// pooling), else one after another.
    pub fn per_batch<A: Copy + Send + Sync + 'static>(
        &self,
        rows: usize,
        init: A,
        fill: impl Fn(usize, &mut [A]) + Sync,
    ) -> Vec<A> {
        let mut out = crate::alloc::filled(self.batches * self.cols, init);
        let work = self.batches * self.cols * rows;
        if self.cols < 64 && self.batches > 1 && parallel(work) && self.cols > 0 {
            let per = (PARALLEL_GRAIN / (self.cols * rows).max(1)).max(1);
            par_chunks_mut(&mut out, per * self.cols, |i, o| {
                for (k, ob) in o.chunks_mut(self.cols).enumerate() {
                    fill(i * per + k, ob);
                }
            });
        } else {
            for (b, ob) in out.chunks_mut(self.cols.max(1)).enumerate() {
                fill(b, ob);
            }
        }
        out
    }
}

impl Plan {
    pub fn new(l: &Layout, dims: &[usize]) -> Plan {
        let nd = l.ndim();
        let kept: Vec<usize> = (0..nd).filter(|d| !dims.contains(d)).collect();
        let reduced: Vec<usize> = (0..nd).filter(|d| dims.contains(d)).collect();
        let outer: usize = kept.iter().map(|&d| l.shape[d]).product();
        let inner: usize = reduced.iter().map(|&d| l.shape[d]).product();
        // Reduced dims first..last with no kept dim between them, and a
        // kept dim after them.
        let one_run = reduced
            .first()
            .is_some_and(|&first| reduced.iter().enumerate().all(|(i, &d)| d == first + i));
        let columns = match (l.contiguous_offset(), reduced.last()) {
            (Some(offset), Some(&last)) if one_run && last + 1 < nd => Some(Columns {
                offset,
                batches: l.shape[..reduced[0]].iter().product(),
                cols: l.shape[last + 1..].iter().product(),
            }),
            _ => None,
        };
        let mut plan = Plan {
            outer,
            inner,
            columns,
            bases: vec![],
            ishape: vec![],
            istrides: vec![],
            irows: 0,
        };
        if columns.is_none() {
            let kept_layout = Layout {
                shape: kept.iter().map(|&d| l.shape[d]).collect(),
                strides: kept.iter().map(|&d| l.strides[d]).collect(),
                offset: l.offset,
            };
            let inner_shape: Vec<usize> = reduced.iter().map(|&d| l.shape[d]).collect();
            let inner_strides: Vec<usize> = reduced.iter().map(|&d| l.strides[d]).collect();
            let (ishape, mut istrides) = coalesce(&inner_shape, &[&inner_strides]);
            plan.irows = row_count(&ishape);
            plan.ishape = ishape;
            plan.istrides = istrides.swap_remove(0);
            plan.bases.reserve(outer);
            kept_layout.for_each_offset(|o| plan.bases.push(o));
        }
        plan
    }

    /// Whether each group is one unit-stride run of `inner` elements.
    pub fn contiguous_groups(&self) -> bool {
        self.irows == 1 && self.istrides.first().is_none_or(|&s| s == 1)
    }

    /// Calls `f(start, len, stride)` for each run of the group at `base`, in order.
    #[inline(always)]
    pub fn runs(&self, base: usize, mut f: impl FnMut(usize, usize, usize)) {
        for_rows(
            &self.ishape,
            [&self.istrides],
            [base],
            0,
            self.irows,
            |[b], len, [s]| f(b, len, s),
        );
    }

    /// `group(base)` for every group, in output order, on all threads when it pays.
    pub fn map_groups<A: Send>(&self, group: impl Fn(usize) -> A + Sync) -> Vec<A> {
        let (outer, inner) = (self.outer, self.inner);
        if !parallel(outer * inner) || outer < 2 {
            return self.bases.iter().map(|&b| group(b)).collect();
        }
        let per = (PARALLEL_GRAIN / inner.max(1)).max(1);
        let mut out: Vec<Option<A>> = (0..outer).map(|_| None).collect();
        par_chunks_mut(&mut out, per, |i, o| {
            for (o, &b) in o.iter_mut().zip(&self.bases[i * per..]) {
                *o = Some(group(b));
            }
        });
        out.into_iter()
            .map(|a| a.expect("every group was reduced"))
            .collect()
    }
}

/// Folds each of `out.len()` columns over `rows` rows of a contiguous
/// buffer into `out` (which holds the initial accumulators).
fn reduce_columns<T, A>(
    src: &[T],
    rows: usize,
    fold: &(impl Fn(A, T, usize) -> A + Sync),
    out: &mut [A],
) where
    T: Copy + Send + Sync,
    A: Copy + Send + Sync,
{
    let cols = out.len();
    let fill = |c0: usize, acc: &mut [A]| {
        simd(
            #[inline(always)]
            || {
                for r in 0..rows {
                    let row = &src[r * cols + c0..r * cols + c0 + acc.len()];
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a = fold(*a, v, r);
                    }
                }
            },
        )
    };
    by_columns(out, rows, fill);
}

/// Runs `fill(first_column, columns)` over `out` (one entry per column of
/// a `[rows, out.len()]` buffer) in column chunks, on all threads when it pays.
pub(crate) fn by_columns<A: Send>(
    out: &mut [A],
    rows: usize,
    fill: impl Fn(usize, &mut [A]) + Sync,
) {
    let cols = out.len();
    if !parallel(cols * rows) || cols < 64 {
        fill(0, out);
    } else {
        let per = cols.div_ceil(num_threads()).max(16);
        par_chunks_mut(out, per, |i, chunk| fill(i * per, chunk));
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
        // Blocks of 256 columns whole, short, and split across threads.
        let shapes = [
            (1, 1, 5),
            (2, 17, 3),
            (3, 5, 256),
            (2, 9, 300),
            (2, 33, 768),
            (1, 40, 1000),
        ];
        for (outer, len, inner) in shapes {
            let x = tie_heavy(outer * len * inner, inner, |i| (i % inner) % 10 == 0);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for max in [true, false] {
                for threads in [1, 2] {
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
}
