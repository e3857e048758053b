//! Reductions over any set of dims.

use super::strided::{coalesce, for_rows, row_count};
use crate::Layout;
use crate::threads::{PARALLEL_GRAIN, num_threads, par_chunks_mut, parallel, simd};

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
