//! Work down the columns of a contiguous `[outer, len, inner]` buffer (a
//! reduction or scan over a dim that is not the last), split across
//! threads by columns.

use crate::threads::{PARALLEL_GRAIN, num_threads, parallel_for};
use std::ops::Range;

/// Widest run of columns a task works on at once: a per-column state of
/// this many values stays in L1 while rows up to this wide are read whole,
/// one stream (blocks of 256 of a 2048-wide row read 1 KB pieces 8 KB
/// apart and ran 2-3x slower).
pub(crate) const COLUMN_BLOCK: usize = 2048;

/// Calls `f(base, cols)` for runs of columns `cols` of the plane starting
/// at element `base`, each at most [`COLUMN_BLOCK`] wide, covering every
/// column of every plane once; threads take equal shares of the columns,
/// whatever planes they fall in (one plane's columns are split too).
pub(crate) fn par_column_runs(
    numel: usize,
    len: usize,
    inner: usize,
    f: impl Fn(usize, Range<usize>) + Sync,
) {
    assert!(
        len > 0 && inner > 0 && numel.is_multiple_of(len * inner),
        "column kernel: {numel} elements are not [outer, {len}, {inner}]"
    );
    let columns = numel / len;
    let per = if numel < PARALLEL_GRAIN {
        columns
    } else {
        columns.div_ceil(num_threads()).next_multiple_of(16)
    }
    .max(1);
    parallel_for(columns.div_ceil(per), |t| {
        let (mut at, end) = (t * per, ((t + 1) * per).min(columns));
        while at < end {
            let (o, c) = (at / inner, at % inner);
            let w = (inner - c).min(COLUMN_BLOCK).min(end - at);
            f(o * len * inner, c..c + w);
            at += w;
        }
    });
}

/// Rows per run when threads should take runs of whole rows of a single
/// `[len, inner]` plane rather than share out its columns (a reduction
/// over dim 0 of a matrix, its runs combined afterwards); `None` when the
/// columns' split is as good (several planes, or work too small to split).
/// Split by columns, the threads read alternate pieces of every row and
/// ran no faster than one thread, or slower: a max over dim 0 of
/// `[16384, 256]` f32 took 0.33-0.97 ms on two threads against 0.29-0.31
/// on one (0.14 by runs of rows).
pub(crate) fn plane_row_runs(numel: usize, len: usize, inner: usize) -> Option<usize> {
    let threads = num_threads();
    (numel == len * inner && inner > 1 && numel >= PARALLEL_GRAIN && threads > 1 && len >= 2)
        .then(|| len.div_ceil(threads))
}
