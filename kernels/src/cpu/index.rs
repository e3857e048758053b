//! Indexing kernels: index_select, gather and the scatters (add, assign and
//! the reductions of `scatter_reduce`). Indices are checked by the runtime
//! (with a message naming the op) before they get here.

use crate::Layout;
use crate::threads::{SharedSlice, num_threads, par_chunks_mut, parallel, parallel_for};

/// An index entry the kernels take: `usize`, or `i64` already checked to
/// be in range (the runtime's int64 tensors, read without a copy).
pub trait IndexValue: Copy + Send + Sync {
    /// The position it names.
    fn at(self) -> usize;
}

impl IndexValue for usize {
    #[inline(always)]
    fn at(self) -> usize {
        self
    }
}

impl IndexValue for i64 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}

/// An index tensor as the per-element kernels read it: its elements and
/// its layout (any strides: an index expanded along a dim is read in
/// place, not copied out to its full size). Its shape is the positions
/// walked.
#[derive(Clone, Copy, Debug)]
pub struct Indices<'a, I> {
    /// The elements the layout reaches (checked to be in range).
    pub ids: &'a [I],
    /// Where each position's index is in `ids`.
    pub layout: &'a Layout,
}

impl<'a, I: IndexValue> Indices<'a, I> {
    /// The index of position offset `i` (through the layout).
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        self.ids[i].at()
    }
}

/// Whether every index is in `0..size` (as u64 a negative one is not):
/// one branch-free pass compiled for the CPU's widest vectors (SSE2 has no
/// 64-bit compare), split across threads when long; an expanded scatter
/// index is read whole here, so this pass is on the step's path.
///
/// ```
/// assert!(tapir_kernels::cpu::indices_below(&[0, 4, 2], 5));
/// assert!(!tapir_kernels::cpu::indices_below(&[0, -1], 5));
/// ```
pub fn indices_below(ids: &[i64], size: usize) -> bool {
    let below = |part: &[i64]| {
        crate::threads::simd(|| {
            part.iter()
                .fold(true, |ok, &i| ok & ((i as u64) < size as u64))
        })
    };
    if !parallel(ids.len()) {
        return below(ids);
    }
    let ok = std::sync::atomic::AtomicBool::new(true);
    let per = ids.len().div_ceil(num_threads());
    parallel_for(ids.len().div_ceil(per), |t| {
        if !below(&ids[t * per..((t + 1) * per).min(ids.len())]) {
            ok.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    });
    ok.into_inner()
}

/// Rows `idx` of a contiguous buffer viewed as `[outer, size, inner]` along
/// the middle dim: output `[outer, idx.len(), inner]`.
///
/// ```
/// let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
/// assert_eq!(tapir_kernels::cpu::index_select(&x, 1, 3, 2, &[2usize, 0]), vec![4.0, 5.0, 0.0, 1.0]);
/// ```
pub fn index_select<T: Copy + Send + Sync + 'static, I: IndexValue>(
    x: &[T],
    outer: usize,
    size: usize,
    inner: usize,
    idx: &[I],
) -> Vec<T> {
    let n = outer * idx.len() * inner;
    if !parallel(n) || inner == 0 {
        let mut out = crate::alloc::with_capacity(n);
        for o in 0..outer {
            for &i in idx {
                let start = (o * size + i.at()) * inner;
                out.extend_from_slice(&x[start..start + inner]);
            }
        }
        return out;
    }
    // Output rows are independent: each thread copies one block of them.
    let rows = outer * idx.len();
    let mut out = crate::alloc::filled(n, x[0]);
    let per = rows.div_ceil(num_threads());
    par_chunks_mut(&mut out, per * inner, |t, block| {
        for (k, row) in block.chunks_exact_mut(inner).enumerate() {
            let r = t * per + k;
            let start = ((r / idx.len()) * size + idx[r % idx.len()].at()) * inner;
            row.copy_from_slice(&x[start..start + inner]);
        }
    });
    out
}

/// Adds rows of `src` (`[outer, idx.len(), inner]`) into rows `idx` of `dst`
/// (`[outer, size, inner]`): the adjoint of [`index_select`].
pub fn index_add_rows<T: crate::Float, I: IndexValue>(
    dst: &mut [T],
    size: usize,
    inner: usize,
    src: &[T],
    idx: &[I],
) {
    let add = |a: &mut [T], b: &[T]| a.iter_mut().zip(b).for_each(|(a, &b)| *a = *a + b);
    // Rows of source block `o` added into `block`, dst's block `o`, over `cols`.
    let add_block = |block: &mut [T], o: usize| {
        for (j, &i) in idx.iter().enumerate() {
            let (d, s) = (i.at() * inner, (o * idx.len() + j) * inner);
            add(&mut block[d..d + inner], &src[s..s + inner]);
        }
    };
    let outer = dst.len() / (size * inner).max(1);
    // Split the work where writes cannot meet: across the outer blocks, or
    // (one block, as index_add along dim 0) across column strips of at
    // least 16 elements, so that no two threads write one cache line.
    let threads = num_threads();
    let strips = (inner / 16).min(threads);
    let block_len = size * inner;
    if !parallel(outer * idx.len() * inner) || (outer < threads && strips < 2) {
        let blocks = dst.chunks_exact_mut(block_len.max(1)).take(outer);
        return blocks.enumerate().for_each(|(o, b)| add_block(b, o));
    }
    if outer >= threads {
        let per = outer.div_ceil(threads);
        return par_chunks_mut(
            &mut dst[..outer * block_len],
            per * block_len,
            |t, blocks| {
                for (k, b) in blocks.chunks_exact_mut(block_len).enumerate() {
                    add_block(b, t * per + k)
                }
            },
        );
    }
    let width = inner.div_ceil(strips).next_multiple_of(16);
    let shared = SharedSlice::new(dst);
    parallel_for(inner.div_ceil(width), |t| {
        let (c0, c1) = (t * width, ((t + 1) * width).min(inner));
        for o in 0..outer {
            for (j, &i) in idx.iter().enumerate() {
                let (d, s) = ((o * size + i.at()) * inner, (o * idx.len() + j) * inner);
                // SAFETY: task `t` makes pieces of columns `c0..c1` alone,
                // strips of different tasks are disjoint, and one task's
                // pieces do not outlive this statement.
                add(
                    unsafe { shared.piece(d + c0, c1 - c0) },
                    &src[s + c0..s + c1],
                );
            }
        }
    });
}

/// `out[p] = x[p with dim replaced by index[p]]` for every position `p` of
/// the index, in row-major order; `x` is any view.
pub fn gather<T: Copy + Send + Sync + 'static, I: IndexValue>(
    x: &[T],
    lx: &Layout,
    dim: usize,
    index: Indices<'_, I>,
) -> Vec<T> {
    let (li, n) = (index.layout, index.layout.numel());
    if n == 0 {
        return Vec::new();
    }
    let rows = li.shape.first().copied().unwrap_or(1);
    let mut out = crate::alloc::filled(n, x[lx.offset]);
    if !parallel(n) || rows < 2 {
        gather_rows(x, lx, dim, index, li, &mut out);
        return out;
    }
    // Output positions are independent: each thread fills a block of rows.
    let (row, per) = (n / rows, rows.div_ceil(num_threads()));
    par_chunks_mut(&mut out, per * row, |t, block| {
        let (lx, _, li) = narrow(&li.shape, dim, lx, lx, li, 0, t * per, block.len() / row);
        gather_rows(x, &lx, dim, index, &li, block)
    });
    out
}

/// gather's positions of `li` (a part of the index's layout) into `out`,
/// row by row. A row whose index is expanded along it (stride 0, as an
/// index `expand`ed to a feature dim) reads one index and copies a row.
fn gather_rows<T: Copy, I: IndexValue>(
    x: &[T],
    lx: &Layout,
    dim: usize,
    index: Indices<'_, I>,
    li: &Layout,
    out: &mut [T],
) {
    let at = lx.strides[dim];
    let (inner, ia, _, ii) = row_strides(dim, lx, lx, li);
    let mut rows = out.chunks_exact_mut(inner);
    walk_rows(&li.shape, dim, lx, lx, li, |i, a, _| {
        let Some(row) = rows.next() else { return };
        if ii == 0 {
            let start = a + index.at(i) * at;
            if ia == 1 {
                return row.copy_from_slice(&x[start..start + inner]);
            }
            return row
                .iter_mut()
                .enumerate()
                .for_each(|(j, o)| *o = x[start + j * ia]);
        }
        for (j, o) in row.iter_mut().enumerate() {
            *o = x[a + j * ia + index.at(i + j * ii) * at];
        }
    });
}

/// `dst[p with dim replaced by index[p]] += src[p]` for every position `p` of
/// the index; `ld` is `dst`'s view at the index's shape (only positions the
/// index reaches are touched), `src` is any view of at least the index's
/// extent.
pub fn scatter_add<T: crate::Float + Send + Sync, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: Indices<'_, I>,
    src: &[T],
    ls: &Layout,
) {
    scatter_with(dst, ld, dim, index, src, ls, |a, b| a + b);
}

/// How a scatter combines the value already at a destination with each
/// source value sent there (`torch.scatter_reduce`'s `reduce`; `mean` is a
/// sum divided by counts, built by the runtime from `Sum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterMode {
    /// The source value replaces it (`torch.scatter`; with repeated
    /// indices, one of the values lands).
    Assign,
    /// Added.
    Sum,
    /// Multiplied.
    Prod,
    /// The larger of the two; a NaN on either side wins, as in PyTorch.
    Amax,
    /// The smaller of the two; a NaN on either side wins.
    Amin,
}

impl ScatterMode {
    /// Its name in kernel names and messages: `assign`, `sum`, `prod`,
    /// `amax`, `amin`.
    pub fn name(self) -> &'static str {
        match self {
            ScatterMode::Assign => "assign",
            ScatterMode::Sum => "sum",
            ScatterMode::Prod => "prod",
            ScatterMode::Amax => "amax",
            ScatterMode::Amin => "amin",
        }
    }
}

/// An element type the reducing scatters work in: the float and integer
/// dtypes, with wrapping integer arithmetic (as PyTorch's C++ on the CPU).
pub trait ScatterValue: Copy + PartialOrd + Send + Sync {
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// `a * b`.
    fn mul(a: Self, b: Self) -> Self;
    /// Whether it is a NaN (never, for integers).
    fn is_nan(self) -> bool;
}

macro_rules! scatter_value {
    (float: $($t:ty),*; int: $($i:ty),*) => {
        $(impl ScatterValue for $t {
            fn add(a: Self, b: Self) -> Self { a + b }
            fn mul(a: Self, b: Self) -> Self { a * b }
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        })*
        $(impl ScatterValue for $i {
            fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
            fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
            fn is_nan(self) -> bool { false }
        })*
    };
}
scatter_value!(float: f32, f64; int: i64, u8);

/// The scatter of `mode` (see [`scatter_add`] for the layouts): for every
/// position `p` of the index, in row-major order, `dst[at] = mode(dst[at],
/// src[p])` where `at` is `p` with `dim` replaced by `index[p]`.
///
/// ```
/// use tapir_kernels::{Layout, cpu::{scatter_reduce, Indices, ScatterMode}};
/// let mut dst = [1.0f32, 1.0, 1.0];
/// let l = Layout::contiguous(&[3]);
/// let index = Indices { ids: &[0usize, 0, 2], layout: &l };
/// scatter_reduce(&mut dst, &l, 0, index, &[4.0, 5.0, 2.0], &l, ScatterMode::Amax);
/// assert_eq!(dst, [5.0, 1.0, 2.0]);
/// ```
pub fn scatter_reduce<T: ScatterValue, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: Indices<'_, I>,
    src: &[T],
    ls: &Layout,
    mode: ScatterMode,
) {
    // A NaN on either side is kept: `b` wins when larger or NaN, and a NaN
    // `a` is never beaten (every comparison with it is false). One compare
    // and a select, no branch on the data.
    let larger = |a: T, b: T| if b > a || b.is_nan() { b } else { a };
    let smaller = |a: T, b: T| if b < a || b.is_nan() { b } else { a };
    match mode {
        ScatterMode::Assign => scatter_with(dst, ld, dim, index, src, ls, |_, b| b),
        ScatterMode::Sum => scatter_with(dst, ld, dim, index, src, ls, T::add),
        ScatterMode::Prod => scatter_with(dst, ld, dim, index, src, ls, T::mul),
        ScatterMode::Amax => scatter_with(dst, ld, dim, index, src, ls, larger),
        ScatterMode::Amin => scatter_with(dst, ld, dim, index, src, ls, smaller),
    }
}

/// `src` written at the index's positions along `dim` (`torch.scatter`) for
/// any element type (bool, half types), the assigning case of
/// [`scatter_reduce`].
pub fn scatter_assign<T: Copy + Send + Sync, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: Indices<'_, I>,
    src: &[T],
    ls: &Layout,
) {
    scatter_with(dst, ld, dim, index, src, ls, |_, b| b);
}

fn scatter_with<T: Copy + Send + Sync, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: Indices<'_, I>,
    src: &[T],
    ls: &Layout,
    combine: impl Fn(T, T) -> T + Sync,
) {
    let at = ld.strides[dim];
    let li = index.layout;
    let nd = ld.shape.len();
    // Positions that differ along a dim other than `dim` write different
    // elements (when the destination's view does not overlap itself), so
    // threads split such a dim: the rows, or for a scatter along dim 0 the
    // columns.
    let part = if dim == 0 { nd.wrapping_sub(1) } else { 0 };
    let threads = num_threads();
    let split = parallel(li.numel())
        && part < nd
        && part != dim
        && ld.shape[part] >= threads
        && disjoint(ld, dim, index.ids);
    if !split {
        let (inner, ia, ib, ii) = row_strides(dim, ld, ls, li);
        return walk_rows(&ld.shape, dim, ld, ls, li, |i, a, b| {
            // An index expanded along the row is read once for it.
            let start = (ii == 0).then(|| a + index.at(i) * at);
            for j in 0..inner {
                let d = start.unwrap_or_else(|| a + index.at(i + j * ii) * at) + j * ia;
                dst[d] = combine(dst[d], src[b + j * ib]);
            }
        });
    }
    let (len, per) = (ld.shape[part], ld.shape[part].div_ceil(threads));
    let shared = SharedSlice::new(dst);
    parallel_for(len.div_ceil(per), |t| {
        let (start, n) = (t * per, per.min(len - t * per));
        let (la, lb, li) = narrow(&ld.shape, dim, ld, ls, li, part, start, n);
        let (inner, ia, ib, ii) = row_strides(dim, &la, &lb, &li);
        walk_rows(&la.shape, dim, &la, &lb, &li, |i, a, b| {
            if ii == 0 && ia == 1 {
                let d = a + index.at(i) * at;
                // SAFETY: this task's positions have coordinates `start..
                // start + n` along `part`, other tasks' other ones, and
                // positions differing there reach different elements
                // (`disjoint`); the piece lives for this row alone.
                let row = unsafe { shared.piece(d, inner) };
                for (j, cell) in row.iter_mut().enumerate() {
                    *cell = combine(*cell, src[b + j * ib]);
                }
                return;
            }
            for j in 0..inner {
                let d = a + j * ia + index.at(i + j * ii) * at;
                // SAFETY: as above, for one element.
                let cell = unsafe { &mut shared.piece(d, 1)[0] };
                *cell = combine(*cell, src[b + j * ib]);
            }
        });
    });
}

/// Whether `ld`, with `dim`'s extent set to the largest index + 1, reaches
/// every position at its own element: its dims sorted by stride each step
/// past the whole extent of the ones inside them.
fn disjoint<I: IndexValue>(ld: &Layout, dim: usize, index: &[I]) -> bool {
    let reach = index.iter().fold(0, |m, i| m.max(i.at())) + 1;
    let mut dims: Vec<(usize, usize)> = (0..ld.shape.len())
        .map(|d| (ld.strides[d], if d == dim { reach } else { ld.shape[d] }))
        .filter(|&(_, extent)| extent > 1)
        .collect();
    dims.sort_unstable();
    let mut span = 1; // elements the dims so far cover, from a stride of 1
    dims.iter().all(|&(stride, extent)| {
        let ok = stride >= span;
        span = stride * extent;
        ok
    })
}

/// The layouts `la`, `lb` and `li` (shape `shape`) cut to `n` positions from
/// `start` along `part`: the same walk, restricted. `la`'s coordinate along
/// `dim` is left out by the walk, so cutting `dim` does not move it.
#[allow(clippy::too_many_arguments)]
fn narrow(
    shape: &[usize],
    dim: usize,
    la: &Layout,
    lb: &Layout,
    li: &Layout,
    part: usize,
    start: usize,
    n: usize,
) -> (Layout, Layout, Layout) {
    let cut = |l: &Layout, moves: bool| {
        let mut c = Layout {
            shape: shape.to_vec(),
            strides: l.strides.clone(),
            offset: l.offset,
        };
        c.shape[part] = n;
        if moves {
            c.offset += start * l.strides[part];
        }
        c
    };
    (cut(la, part != dim), cut(lb, true), cut(li, true))
}

/// The length of the walk's rows and the strides along them: through `la`
/// (0 when the rows run along `dim`, which an index supplies), `lb` and
/// `li`. A 0-d walk is one row of one position.
fn row_strides(dim: usize, la: &Layout, lb: &Layout, li: &Layout) -> (usize, usize, usize, usize) {
    let Some(last) = li.shape.len().checked_sub(1) else {
        return (1, 0, 0, 0);
    };
    let ia = if last == dim { 0 } else { la.strides[last] };
    (li.shape[last], ia, lb.strides[last], li.strides[last])
}

/// Calls `f(i, a, b)` at the start of every row (the last dim) of the
/// row-major positions of `shape`: `i` is its offset through `li` (the
/// index's layout), `a` through `la` with `dim`'s coordinate left out (an
/// index supplies it), `b` through `lb`; [`row_strides`] gives the strides
/// along the row. Offsets carry across rows, never recomputed from
/// coordinates.
fn walk_rows(
    shape: &[usize],
    dim: usize,
    la: &Layout,
    lb: &Layout,
    li: &Layout,
    mut f: impl FnMut(usize, usize, usize),
) {
    let n: usize = shape.iter().product();
    if n == 0 {
        return;
    }
    let Some(last) = shape.len().checked_sub(1) else {
        return f(li.offset, la.offset, lb.offset);
    };
    let a_stride = |d: usize| if d == dim { 0 } else { la.strides[d] };
    let mut pos = vec![0usize; last];
    let (mut a, mut b, mut i) = (la.offset, lb.offset, li.offset);
    for _ in 0..n / shape[last] {
        f(i, a, b);
        // The next row: an odometer over the outer dims.
        for d in (0..last).rev() {
            pos[d] += 1;
            a += a_stride(d);
            b += lb.strides[d];
            i += li.strides[d];
            if pos[d] < shape[d] {
                break;
            }
            a -= a_stride(d) * shape[d];
            b -= lb.strides[d] * shape[d];
            i -= li.strides[d] * shape[d];
            pos[d] = 0;
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
