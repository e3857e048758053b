//! Reductions over any set of dims.

use super::strided::{coalesce, for_rows, row_count};
use crate::threads::{PARALLEL_GRAIN, num_threads, par_chunks_mut, parallel, simd};
use crate::{Layout, ReductionOrder};

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
    // A transposed or permuted view is walked in its memory's order, when
    // that keeps the reduced dims' own order (`fold`'s positions count in it).
    if let Some(walk) = l.reduction_order(dims)
        && walk.perm.iter().filter(|d| dims.contains(d)).is_sorted()
    {
        let out = reduce(src, &walk.layout, &walk.dims, init, fold);
        return in_callers_order(out, &walk);
    }
    let plan = Plan::new(l, dims);
    if let Some(c) = plan.columns {
        return c.per_batch(plan.inner, init, |b, out| {
            reduce_columns(
                c.batch(src, b, plan.inner),
                plan.inner,
                c.row_stride,
                &fold,
                out,
            );
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

/// A reduction's outputs, made row-major over the kept dims in `walk`'s
/// order, put row-major in the caller's order (a small gather: there is
/// one output per group).
pub(crate) fn in_callers_order<A: Copy>(out: Vec<A>, walk: &ReductionOrder) -> Vec<A> {
    let Some(output) = &walk.output else {
        return out;
    };
    let mut ordered = Vec::with_capacity(out.len());
    output.for_each_offset(|o| ordered.push(out[o]));
    ordered
}

/// How a reduction over some dims walks a view; shared by [`reduce`] and
/// `cpu::sum`.
pub(crate) struct Plan {
    /// Output elements (one per combination of kept dims).
    pub outer: usize,
    /// Elements folded into each.
    pub inner: usize,
    /// Set when the reduced dims are one run of dims followed by kept ones
    /// that are one dense row: each batch is then `inner` rows of `cols`
    /// folded column-wise, vectorised over the columns (a bias gradient;
    /// a sum over channels; a column sum of a slice).
    pub columns: Option<Columns>,
    /// Where each group starts (empty with `columns`).
    bases: Vec<usize>,
    ishape: Vec<usize>,
    istrides: Vec<usize>,
    irows: usize,
}

/// A [`Plan`]'s column-wise walk: `batches` blocks, `batch_stride` apart
/// from `offset`, each of `inner` rows of `cols` dense elements,
/// `row_stride` apart.
#[derive(Clone, Copy)]
pub(crate) struct Columns {
    pub offset: usize,
    pub batches: usize,
    pub batch_stride: usize,
    pub cols: usize,
    pub row_stride: usize,
}

impl Columns {
    /// The walk of `l` reduced over its dims `first..=last` when the dims
    /// after them are one dense row and the reduced and the leading dims
    /// each step by one stride (after merging); `None` otherwise.
    fn new(l: &Layout, first: usize, last: usize) -> Option<Columns> {
        let row = Layout {
            shape: l.shape[last + 1..].to_vec(),
            strides: l.strides[last + 1..].to_vec(),
            offset: 0,
        };
        row.contiguous_offset()?;
        let cols = row.numel();
        // One stride (or none, for size-1 dims) once merged.
        let single = |dims: std::ops::Range<usize>| -> Option<usize> {
            let (shape, strides) = coalesce(&l.shape[dims.clone()], &[&l.strides[dims]]);
            match shape.len() {
                0 => Some(0),
                1 => Some(strides[0][0]),
                _ => None,
            }
        };
        Some(Columns {
            offset: l.offset,
            batches: l.shape[..first].iter().product(),
            batch_stride: single(0..first)?,
            cols,
            row_stride: single(first..last + 1)?,
        })
    }

    /// Batch `b`'s elements: `rows` rows from its start.
    pub fn batch<'a, T>(&self, src: &'a [T], b: usize, rows: usize) -> &'a [T] {
        let start = self.offset + b * self.batch_stride;
        let span = match rows {
            0 => 0,
            r => (r - 1) * self.row_stride + self.cols,
        };
        &src[start..start + span]
    }

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
        let columns = match reduced.last() {
            Some(&last) if one_run && last + 1 < nd => Columns::new(l, reduced[0], last),
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

/// Folds each of `out.len()` columns over `rows` rows, `row_stride`
/// apart, into `out` (which holds the initial accumulators).
fn reduce_columns<T, A>(
    src: &[T],
    rows: usize,
    row_stride: usize,
    fold: &(impl Fn(A, T, usize) -> A + Sync),
    out: &mut [A],
) where
    T: Copy + Send + Sync,
    A: Copy + Send + Sync,
{
    let fill = |c0: usize, acc: &mut [A]| {
        simd(
            #[inline(always)]
            || {
                for r in 0..rows {
                    let row = &src[r * row_stride + c0..r * row_stride + c0 + acc.len()];
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
