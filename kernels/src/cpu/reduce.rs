//! Reductions over any set of dims.

use super::strided::{coalesce, for_rows, row_count};
use crate::Layout;
use crate::threads::{PARALLEL_GRAIN, install, parallel, simd};
use rayon::prelude::*;

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
    A: Copy + Send + Sync,
{
    let nd = l.ndim();
    let mut is_reduced = vec![false; nd];
    for &d in dims {
        is_reduced[d] = true;
    }
    let kept: Vec<usize> = (0..nd).filter(|&d| !is_reduced[d]).collect();
    let reduced: Vec<usize> = (0..nd).filter(|&d| is_reduced[d]).collect();
    let outer: usize = kept.iter().map(|&d| l.shape[d]).product();
    let inner: usize = reduced.iter().map(|&d| l.shape[d]).product();

    // Column reduction (e.g. a bias gradient: sum over the batch of [B, D]):
    // reduced dims lead and the buffer is contiguous, so fold whole rows.
    let leading = reduced.iter().enumerate().all(|(i, &d)| i == d);
    if let (true, Some(off)) = (leading && !kept.is_empty(), l.contiguous_offset()) {
        return reduce_columns(&src[off..off + outer * inner], outer, inner, init, &fold);
    }

    let kept_layout = Layout {
        shape: kept.iter().map(|&d| l.shape[d]).collect(),
        strides: kept.iter().map(|&d| l.strides[d]).collect(),
        offset: l.offset,
    };
    let inner_shape: Vec<usize> = reduced.iter().map(|&d| l.shape[d]).collect();
    let inner_strides: Vec<usize> = reduced.iter().map(|&d| l.strides[d]).collect();
    let (ishape, istrides) = coalesce(&inner_shape, &[&inner_strides]);
    let irows = row_count(&ishape);
    let fold_group = |base: usize| {
        simd(
            #[inline(always)]
            || {
                let mut acc = init;
                let mut pos = 0;
                for_rows(
                    &ishape,
                    [&istrides[0]],
                    [base],
                    0,
                    irows,
                    |[b], len, [s]| {
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
                    },
                );
                acc
            },
        )
    };
    let mut bases = Vec::with_capacity(outer);
    kept_layout.for_each_offset(|o| bases.push(o));
    if !parallel(outer * inner) || outer < 2 {
        return bases.iter().map(|&b| fold_group(b)).collect();
    }
    install(|_| {
        let mut out = Vec::with_capacity(outer);
        bases
            .par_iter()
            .with_min_len((PARALLEL_GRAIN / inner.max(1)).max(1))
            .map(|&b| fold_group(b))
            .collect_into_vec(&mut out);
        out
    })
}

fn reduce_columns<T, A>(
    src: &[T],
    cols: usize,
    rows: usize,
    init: A,
    fold: &(impl Fn(A, T, usize) -> A + Sync),
) -> Vec<A>
where
    T: Copy + Send + Sync,
    A: Copy + Send + Sync,
{
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
    let mut out = vec![init; cols];
    if !parallel(cols * rows) || cols < 64 {
        fill(0, &mut out);
    } else {
        install(|threads| {
            let per = cols.div_ceil(threads).max(16);
            out.par_chunks_mut(per)
                .enumerate()
                .for_each(|(i, chunk)| fill(i * per, chunk));
        });
    }
    out
}
