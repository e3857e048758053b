//! Column sums (`x.sum(0)`, a bias gradient, the channels of a conv
//! output) for `cpu::sum`: blocks of rows added row by row, vectorising
//! over the columns, the block sums combined through the same binary
//! counter as the row sums' cascade.

use super::reduce::by_columns;
use super::sum::{BLOCK, Widen};
use crate::Float;
use crate::threads::{num_threads, par_chunks_mut, parallel, simd};

/// Sums each of `out.len()` columns over `rows` rows, `row_stride` apart,
/// into `out`: blocks of rows added row by row (vectorising over columns),
/// the block sums combined pairwise.
///
/// Threads take runs of whole rows when the rows are short (each reading
/// memory in order; split by columns, two threads reading alternate halves
/// of rows of 256 f32 ran slower than one), else runs of columns. Either
/// way the result is the serial cascade's, bit for bit.
pub(super) fn sum_columns<T, A>(
    src: &[T],
    rows: usize,
    row_stride: usize,
    to: &impl Widen<T, A>,
    out: &mut [A],
) where
    T: Copy + Send + Sync,
    A: Float,
{
    let cols = out.len();
    if cols <= ROW_SPLIT_COLS
        && parallel(cols * rows)
        && sum_columns_by_rows(src, rows, row_stride, to, out)
    {
        return;
    }
    let fill = |c0: usize, out: &mut [A]| {
        simd(
            #[inline(always)]
            || ColumnCascade::over(src, rows, row_stride, c0, out.len(), to).finish_into(out),
        )
    };
    by_columns(out, rows, fill);
}

/// Widest rows (in elements) that threads split by rows.
const ROW_SPLIT_COLS: usize = 4096;

/// [`sum_columns`] with the threads taking runs of 2^j blocks of rows;
/// false (doing nothing) when there are too few blocks for two runs.
///
/// Each full run's cascade ends as one tree of 2^j blocks, the very sum
/// the serial cascade holds at level `j` after those blocks; counting the
/// runs' trees in a second cascade rebuilds the serial levels from `j` up,
/// below which only the last, partial run has blocks. So the result is the
/// serial one on any number of threads.
fn sum_columns_by_rows<T, A>(
    src: &[T],
    rows: usize,
    row_stride: usize,
    to: &impl Widen<T, A>,
    out: &mut [A],
) -> bool
where
    T: Copy + Send + Sync,
    A: Float,
{
    let cols = out.len();
    let blocks = rows.div_ceil(BLOCK);
    let per = blocks.div_ceil(num_threads()).next_power_of_two();
    let runs = blocks.div_ceil(per);
    if runs < 2 {
        return false;
    }
    let level = per.trailing_zeros() as usize;
    let mut parts = crate::alloc::filled(runs * cols, A::zero());
    par_chunks_mut(&mut parts, cols, |i, part| {
        simd(
            #[inline(always)]
            || {
                let r0 = i * per * BLOCK;
                let n = (rows - r0).min(per * BLOCK);
                let run = ColumnCascade::over(&src[r0 * row_stride..], n, row_stride, 0, cols, to);
                if n == per * BLOCK {
                    part.copy_from_slice(&run.levels[level]);
                } else {
                    run.finish_into(part);
                }
            },
        )
    });
    let full = if rows.is_multiple_of(per * BLOCK) {
        runs
    } else {
        runs - 1
    };
    let mut trees = ColumnCascade::default();
    for tree in parts.chunks_exact(cols).take(full) {
        trees.push(&mut tree.to_vec());
    }
    match full < runs {
        true => out.copy_from_slice(&parts[full * cols..]),
        false => out.fill(A::zero()),
    }
    trees.add_levels_into(out);
    true
}

/// Column sums of blocks of rows, combined pairwise: `levels[k]` holds
/// 2^k blocks' sums while bit `k` of `blocks` is set.
struct ColumnCascade<A> {
    levels: Vec<Vec<A>>,
    blocks: u64,
}

impl<A> Default for ColumnCascade<A> {
    fn default() -> Self {
        ColumnCascade {
            levels: Vec::new(),
            blocks: 0,
        }
    }
}

impl<A: Float> ColumnCascade<A> {
    /// The cascade of columns `c0..c0 + w` over `rows` rows of `src`.
    #[inline(always)]
    fn over<T: Copy>(
        src: &[T],
        rows: usize,
        row_stride: usize,
        c0: usize,
        w: usize,
        to: &impl Widen<T, A>,
    ) -> Self {
        let mut cascade = ColumnCascade::default();
        let mut block = vec![A::zero(); w];
        for r0 in (0..rows).step_by(BLOCK) {
            block.fill(A::zero());
            for r in r0..(r0 + BLOCK).min(rows) {
                let row = &src[r * row_stride + c0..r * row_stride + c0 + w];
                for (b, &v) in block.iter_mut().zip(row) {
                    *b = *b + to.one(v);
                }
            }
            cascade.push(&mut block);
        }
        cascade
    }

    /// Adds a block's sums to the counter (equal-sized partial sums
    /// merge), leaving in `block` a spare buffer of the same length.
    #[inline(always)]
    fn push(&mut self, block: &mut Vec<A>) {
        let mut k = 0;
        while self.blocks & (1 << k) != 0 {
            for (b, &p) in block.iter_mut().zip(&self.levels[k]) {
                *b = p + *b;
            }
            k += 1;
        }
        if self.levels.len() <= k {
            self.levels.push(block.clone());
        } else {
            std::mem::swap(&mut self.levels[k], block);
        }
        self.blocks += 1;
    }

    /// `out` set to the sum of the partial sums, smallest first.
    #[inline(always)]
    fn finish_into(&self, out: &mut [A]) {
        out.fill(A::zero());
        self.add_levels_into(out);
    }

    /// The partial sums added to `out`, smallest first.
    #[inline(always)]
    fn add_levels_into(&self, out: &mut [A]) {
        for (k, level) in self.levels.iter().enumerate() {
            if self.blocks & (1 << k) != 0 {
                for (o, &p) in out.iter_mut().zip(level) {
                    *o = p + *o;
                }
            }
        }
    }
}
