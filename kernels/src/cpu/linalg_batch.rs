//! Batches of row-major matrices to and from faer: the threading of a
//! batch, column-major copies in, row-major results out, and LU in place.
//! Each copy here replaced one of faer's own that cost more (the figures
//! are on the functions).

use super::{LinalgFloat, to_f64};
use crate::threads::{install, num_threads, parallel_for};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{MatMut, MatRef};
use std::sync::Mutex;

/// `f(i)` for every matrix `i` of a batch, in order. A batch splits one
/// matrix per task on tapir's fork-join pool, each factored by faer on one
/// thread; a lone matrix runs inside tapir's rayon pool, where faer splits
/// its blocked kernels across the threads. faer takes the split from a
/// process-wide setting, which every call sets (a call racing another on
/// a second user thread can only run slower, never wrong).
pub(super) fn per_matrix<R: Send>(batch: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if batch != 1 || num_threads() == 1 {
        faer::set_global_parallelism(faer::Par::Seq);
        let slots: Vec<Mutex<Option<R>>> = (0..batch).map(|_| Mutex::new(None)).collect();
        parallel_for(batch, |i| {
            let r = f(i);
            *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        });
        return slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("per_matrix: every task ran")
            })
            .collect();
    }
    install(|threads| {
        faer::set_global_parallelism(faer::Par::rayon(threads));
        vec![f(0)]
    })
}

/// Matrix `i` of a batch of `m x n` row-major matrices, copied into
/// faer's column-major layout by tapir's cache-tiled transpose. faer
/// copies a row-major view itself before factoring it, one strided element
/// at a time: 7 ms of a 1024 x 1024 f64 solve's 26 at one thread.
pub(super) fn matrix<T: LinalgFloat>(a: &[T], i: usize, m: usize, n: usize) -> ColMajor<T> {
    let mut data = crate::alloc::with_capacity(m * n);
    crate::cpu::transpose_into(&a[i * m * n..], 0, n, (m, n), data.spare_capacity_mut());
    // SAFETY: `transpose_into` wrote all `m * n` slots.
    unsafe { data.set_len(m * n) };
    ColMajor { data, m, n }
}

/// The transpose of matrix `i` of a batch of `n x n` row-major matrices,
/// column-major: a plain copy, as a row-major matrix is its transpose laid
/// out column-major.
pub(super) fn matrix_transposed<T: LinalgFloat>(a: &[T], i: usize, n: usize) -> ColMajor<T> {
    let mut data = crate::alloc::with_capacity(n * n);
    data.extend_from_slice(&a[i * n * n..][..n * n]);
    ColMajor { data, m: n, n }
}

/// An owned column-major matrix (see [`matrix`]), its buffer from and
/// back to tapir's allocator cache.
pub(super) struct ColMajor<T: Send + 'static> {
    data: Vec<T>,
    m: usize,
    n: usize,
}

impl<T: Send + 'static> Drop for ColMajor<T> {
    fn drop(&mut self) {
        crate::alloc::recycle(std::mem::take(&mut self.data));
    }
}

impl<T: LinalgFloat> ColMajor<T> {
    pub(super) fn view(&self) -> MatRef<'_, T> {
        MatRef::from_column_major_slice(&self.data, self.m, self.n)
    }

    pub(super) fn view_mut(&mut self) -> MatMut<'_, T> {
        MatMut::from_column_major_slice_mut(&mut self.data, self.m, self.n)
    }
}

/// LU with partial pivoting of `x` in place, LAPACK's packed form: `U` on
/// and above the diagonal, `L` below it (its unit diagonal implied); and
/// the row permutation, forward and inverse (`P` of `A = P L U` has its
/// ones at `(forward[i], i)`). faer's `PartialPivLu` copies `L` and `U`
/// out into two new matrices: 5 ms of a 1024 x 1024 f64 solve's 18.
pub(super) fn lu_in_place<T: LinalgFloat>(x: &mut ColMajor<T>) -> (Vec<usize>, Vec<usize>) {
    use faer::linalg::lu::partial_pivoting::factor;
    let par = faer::get_global_parallelism();
    let (mut forward, mut inverse) = (vec![0; x.m], vec![0; x.m]);
    let scratch = factor::lu_in_place_scratch::<usize, T>(x.m, x.n, par, Default::default());
    factor::lu_in_place(
        x.view_mut(),
        &mut forward,
        &mut inverse,
        par,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    );
    (forward, inverse)
}

/// The first zero on the diagonal of a packed LU's `U`, if any.
pub(super) fn zero_pivot<T: LinalgFloat>(lu: MatRef<'_, T>) -> Option<usize> {
    (0..lu.nrows().min(lu.ncols())).find(|&d| to_f64(lu[(d, d)]) == 0.0)
}

/// Appends `x` to `out` row-major: by cache tiles from faer's column-major
/// results (a strided read per element moved a 1024 x 1024 factor 4x
/// slower), a row at a time from a row-major view such as a transpose.
pub(super) fn push_rows<T: LinalgFloat>(out: &mut Vec<T>, x: MatRef<'_, T>) {
    let (rows, cols) = (x.nrows(), x.ncols());
    if out.capacity() == 0 {
        // A large fresh vector page-faults in on every call.
        *out = crate::alloc::with_capacity(rows * cols);
    }
    out.reserve(rows * cols);
    if let Some(x) = x.try_as_col_major() {
        /// 32 x 32 f64 tiles: 8 KiB each way, inside L1.
        const TILE: usize = 32;
        let columns: Vec<&[T]> = (0..cols)
            .map(|c| {
                x.col(c)
                    .try_as_col_major()
                    .expect("a column-major column")
                    .as_slice()
            })
            .collect();
        let start = out.len();
        out.resize(start + rows * cols, <T as num_traits::Zero>::zero());
        let dst = &mut out[start..];
        for r0 in (0..rows).step_by(TILE) {
            for c0 in (0..cols).step_by(TILE) {
                for r in r0..(r0 + TILE).min(rows) {
                    let row = &mut dst[r * cols..][c0..(c0 + TILE).min(cols)];
                    for (d, column) in row.iter_mut().zip(&columns[c0..]) {
                        *d = column[r];
                    }
                }
            }
        }
    } else if let Some(x) = x.try_as_row_major() {
        for r in 0..rows {
            out.extend_from_slice(
                x.row(r)
                    .try_as_row_major()
                    .expect("a row-major row")
                    .as_slice(),
            );
        }
    } else {
        for r in 0..rows {
            out.extend((0..cols).map(|c| x[(r, c)]));
        }
    }
}

/// Concatenates per-matrix pieces (each already row-major), a copy of a
/// slice each.
pub(super) fn concat<T: Copy + Send + 'static>(parts: impl IntoIterator<Item = Vec<T>>) -> Vec<T> {
    let mut parts: Vec<Vec<T>> = parts.into_iter().collect();
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    let mut out = crate::alloc::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        out.extend_from_slice(&part);
    }
    out
}

/// `f(i, matrix)` for every `size`-element matrix `i` of `out`, in place,
/// split across threads as [`per_matrix`] splits.
pub(super) fn per_matrix_in_place<T: Send>(
    out: &mut [T],
    size: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if out.is_empty() {
        return;
    }
    if out.len() != size || num_threads() == 1 {
        faer::set_global_parallelism(faer::Par::Seq);
        crate::threads::par_chunks_mut(out, size, f);
        return;
    }
    install(|threads| {
        faer::set_global_parallelism(faer::Par::rayon(threads));
        f(0, out)
    })
}
