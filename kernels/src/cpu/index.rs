//! Indexing kernels: index_select, gather and the scatters (add, assign and
//! the reductions of `scatter_reduce`). Indices are checked by the runtime
//! (with a message naming the op) before they get here.

use crate::Layout;

/// An index entry the kernels take: `usize`, or `i64` already checked to
/// be in range (the runtime's int64 tensors, read without a copy).
pub trait IndexValue: Copy {
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

/// Rows `idx` of a contiguous buffer viewed as `[outer, size, inner]` along
/// the middle dim: output `[outer, idx.len(), inner]`.
///
/// ```
/// let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
/// assert_eq!(tapir_kernels::cpu::index_select(&x, 1, 3, 2, &[2usize, 0]), vec![4.0, 5.0, 0.0, 1.0]);
/// ```
pub fn index_select<T: Copy, I: IndexValue>(
    x: &[T],
    outer: usize,
    size: usize,
    inner: usize,
    idx: &[I],
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            let start = (o * size + i.at()) * inner;
            out.extend_from_slice(&x[start..start + inner]);
        }
    }
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
    let outer = dst.len() / (size * inner).max(1);
    for o in 0..outer {
        for (j, &i) in idx.iter().enumerate() {
            let d = (o * size + i.at()) * inner;
            let s = (o * idx.len() + j) * inner;
            for (a, &b) in dst[d..d + inner].iter_mut().zip(&src[s..s + inner]) {
                *a = *a + b;
            }
        }
    }
}

/// `out[p] = x[p with dim replaced by index[p]]` for every position `p` of the
/// row-major `index` of shape `index_shape`; `x` is any view.
pub fn gather<T: Copy, I: IndexValue>(
    x: &[T],
    lx: &Layout,
    dim: usize,
    index: &[I],
    index_shape: &[usize],
) -> Vec<T> {
    let mut out = Vec::with_capacity(index.len());
    let at = lx.strides[dim];
    walk(index_shape, dim, lx, lx, |flat, off, _| {
        out.push(x[off + index[flat].at() * at])
    });
    out
}

/// `dst[p with dim replaced by index[p]] += src[p]` for every position `p` of
/// `index` (row-major, shape `index_shape`); `ld` is `dst`'s strides and
/// offset (its shape is the index's: only positions the index reaches are
/// touched), `src` is any view of at least the index's extent.
pub fn scatter_add<T: crate::Float, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: &[I],
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
pub trait ScatterValue: Copy + PartialOrd {
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
/// use tapir_kernels::{Layout, cpu::{scatter_reduce, ScatterMode}};
/// let mut dst = [1.0f32, 1.0, 1.0];
/// let l = Layout::contiguous(&[3]);
/// scatter_reduce(&mut dst, &l, 0, &[0usize, 0, 2], &[4.0, 5.0, 2.0], &l, ScatterMode::Amax);
/// assert_eq!(dst, [5.0, 1.0, 2.0]);
/// ```
pub fn scatter_reduce<T: ScatterValue, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: &[I],
    src: &[T],
    ls: &Layout,
    mode: ScatterMode,
) {
    // The NaN tests come first so that a NaN on either side is kept.
    let larger = |a: T, b: T| {
        if a.is_nan() || !(b.is_nan() || b > a) {
            a
        } else {
            b
        }
    };
    let smaller = |a: T, b: T| {
        if a.is_nan() || !(b.is_nan() || b < a) {
            a
        } else {
            b
        }
    };
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
pub fn scatter_assign<T: Copy, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: &[I],
    src: &[T],
    ls: &Layout,
) {
    scatter_with(dst, ld, dim, index, src, ls, |_, b| b);
}

fn scatter_with<T: Copy, I: IndexValue>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: &[I],
    src: &[T],
    ls: &Layout,
    combine: impl Fn(T, T) -> T,
) {
    let at = ld.strides[dim];
    walk(&ld.shape, dim, ld, ls, |flat, d_off, s_off| {
        let d_off = d_off + index[flat].at() * at;
        dst[d_off] = combine(dst[d_off], src[s_off]);
    });
}

/// Calls `f(flat, a, b)` for every row-major position of `shape`: `a` is
/// its offset through `la` with `dim`'s coordinate left out (an index
/// supplies it), `b` its offset through `lb`. Offsets advance by strides
/// along the last dim and carry across the others, never recomputed from
/// coordinates.
fn walk(
    shape: &[usize],
    dim: usize,
    la: &Layout,
    lb: &Layout,
    mut f: impl FnMut(usize, usize, usize),
) {
    let n: usize = shape.iter().product();
    let nd = shape.len();
    if n == 0 {
        return;
    }
    if nd == 0 {
        return f(0, la.offset, lb.offset);
    }
    let a_stride = |d: usize| if d == dim { 0 } else { la.strides[d] };
    let (inner, ia, ib) = (shape[nd - 1], a_stride(nd - 1), lb.strides[nd - 1]);
    let mut pos = vec![0usize; nd - 1];
    let (mut a, mut b, mut flat) = (la.offset, lb.offset, 0);
    loop {
        for j in 0..inner {
            f(flat + j, a + j * ia, b + j * ib);
        }
        flat += inner;
        if flat >= n {
            return;
        }
        // The next row: an odometer over the outer dims.
        for d in (0..nd - 1).rev() {
            pos[d] += 1;
            a += a_stride(d);
            b += lb.strides[d];
            if pos[d] < shape[d] {
                break;
            }
            a -= a_stride(d) * shape[d];
            b -= lb.strides[d] * shape[d];
            pos[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gather and scatter through a permuted 3-D view at an offset, along
    /// each dim, against coordinates computed the long way.
    #[test]
    fn gather_and_scatter_walk_views_as_their_coordinates_say() {
        let data: Vec<f64> = (0..200).map(|v| v as f64).collect();
        // A [3, 4, 5] buffer at offset 7, viewed as [5, 3, 2] by permuting
        // and cutting (strides 1, 20, 5).
        let view = Layout {
            shape: vec![5, 3, 2],
            strides: vec![1, 20, 5],
            offset: 7,
        };
        for dim in 0..3 {
            let size = [5, 3, 4][dim];
            let index: Vec<usize> = (0..30).map(|i| (i * 7 + dim) % size).collect();
            let coords = |flat: usize| [flat / 6, (flat / 2) % 3, flat % 2];
            let at = |flat: usize| {
                let mut c = coords(flat);
                c[dim] = index[flat];
                7 + c[0] + 20 * c[1] + 5 * c[2]
            };
            let got = gather(&data, &view, dim, &index, &[5, 3, 2]);
            let want: Vec<f64> = (0..30).map(|f| data[at(f)]).collect();
            assert_eq!(got, want, "gather along {dim}");
            let src: Vec<f64> = (0..30).map(|v| v as f64 + 0.5).collect();
            let ls = Layout::contiguous(&[5, 3, 2]);
            let mut dst = vec![0.0; 200];
            scatter_add(&mut dst, &view, dim, &index, &src, &ls);
            let mut want = vec![0.0; 200];
            (0..30).for_each(|f| want[at(f)] += src[f]);
            assert_eq!(dst, want, "scatter_add along {dim}");
        }
    }

    #[test]
    fn every_scatter_mode_combines_repeated_indices_and_keeps_nan() {
        let l = Layout::contiguous(&[4]);
        let index = [0usize, 0, 2, 2];
        let src = [3.0f64, -2.0, f64::NAN, 5.0];
        let run = |mode| {
            let mut dst = [1.0f64, 1.0, 1.0, 1.0];
            scatter_reduce(&mut dst, &l, 0, &index, &src, &l, mode);
            dst
        };
        assert_eq!(run(ScatterMode::Assign)[..2], [-2.0, 1.0]);
        assert_eq!(run(ScatterMode::Sum)[..2], [2.0, 1.0]);
        assert_eq!(run(ScatterMode::Prod)[..2], [-6.0, 1.0]);
        assert_eq!(run(ScatterMode::Amax)[..2], [3.0, 1.0]);
        assert_eq!(run(ScatterMode::Amin)[..2], [-2.0, 1.0]);
        for mode in [
            ScatterMode::Sum,
            ScatterMode::Prod,
            ScatterMode::Amax,
            ScatterMode::Amin,
        ] {
            assert!(
                run(mode)[2].is_nan(),
                "{mode:?} lost the NaN sent before a number"
            );
        }
        let mut ints = [7i64, 0];
        let l2 = Layout::contiguous(&[2]);
        scatter_reduce(
            &mut ints,
            &l2,
            0,
            &[0usize, 0],
            &[-9, 4],
            &l2,
            ScatterMode::Amin,
        );
        assert_eq!(ints, [-9, 0]);
    }
}
