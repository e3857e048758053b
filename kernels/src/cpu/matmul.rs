//! Matrix multiply through the `gemm` crate (AVX-512 kernels with `x86-v4`).

use crate::threads::{install, par_chunks_mut, simd};
use crate::{Float, Layout};
use gemm::Parallelism;

/// Batched `a @ b`: `la` is `[..batch, m, k]`, `lb` is `[..batch, k, n]` with
/// the same batch shape (broadcast batch dims have stride 0). Any strides
/// work: gemm reads transposed views directly. Output is row-major
/// `[..batch, m, n]`.
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let l = Layout::contiguous(&[2, 2]);
/// assert_eq!(cpu::matmul(&a, &l, &a, &l.transpose(0, 1)), vec![5.0, 11.0, 11.0, 25.0]);
/// ```
pub fn matmul<T: Float>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<T> {
    let nd = la.ndim();
    let rows: usize = la.shape[..nd.saturating_sub(1)].iter().product();
    let mut out = crate::alloc::filled(rows * lb.shape.last().copied().unwrap_or(0), T::zero());
    matmul_into(a, la, b, lb, &mut out, false);
    out
}

/// `a @ b + bias` for a 2-D `a` `[m, k]`, `b` `[k, n]` and a contiguous
/// `bias` of `n`: the bias is the GEMM's starting value, so it costs no
/// pass of its own (PyTorch's `addmm`).
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let l = Layout::contiguous(&[2, 2]);
/// assert_eq!(cpu::matmul_bias(&a, &l, &a, &l, &[10.0, 20.0]), vec![17.0, 30.0, 25.0, 42.0]);
/// ```
pub fn matmul_bias<T: Float>(a: &[T], la: &Layout, b: &[T], lb: &Layout, bias: &[T]) -> Vec<T> {
    assert!(
        la.ndim() == 2 && lb.ndim() == 2 && bias.len() == lb.shape[1],
        "matmul_bias kernel: {:?} @ {:?} + [{}]",
        la.shape,
        lb.shape,
        bias.len()
    );
    let mut out: Vec<T> = crate::alloc::with_capacity(la.shape[0] * bias.len());
    for _ in 0..la.shape[0] {
        out.extend_from_slice(bias);
    }
    matmul_into(a, la, b, lb, &mut out, true);
    out
}

/// The batched product into `out` (row-major `[..batch, m, n]`), added to
/// what `out` holds when `accumulate`, else overwriting it.
fn matmul_into<T: Float>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    out: &mut [T],
    accumulate: bool,
) {
    crate::threads::warn_if_unoptimised();
    let nd = la.ndim();
    assert!(
        nd >= 2 && lb.ndim() == nd,
        "matmul kernel: ranks {} and {}",
        la.ndim(),
        lb.ndim()
    );
    let (m, k, n) = (la.shape[nd - 2], la.shape[nd - 1], lb.shape[nd - 1]);
    assert!(k == lb.shape[nd - 2], "matmul kernel: inner dims");
    let (a_off, b_off) = (la.batch_offsets(), lb.batch_offsets());
    let batch = a_off.len();
    crate::stats::count_matmul(batch);
    assert!(
        out.len() == batch * m * n,
        "matmul kernel: output of {} for {batch} x {m} x {n}",
        out.len()
    );
    if m * n == 0 {
        return;
    }
    let (ars, acs) = (la.strides[nd - 2], la.strides[nd - 1]);
    let (brs, bcs) = (lb.strides[nd - 2], lb.strides[nd - 1]);
    let one = |dst: &mut [T], ao: usize, bo: usize, m: usize, par: Parallelism| {
        if k == 0 {
            return; // the sum over an empty inner dim is zero
        }
        if m == 1 && acs == 1 && (brs == 1 || bcs == 1) {
            // A row vector times a matrix (batch-1 layers): gemm's m = 1 path
            // runs at ~15% of peak, a vectorised GEMV near memory speed.
            return row_times_matrix(&a[ao..ao + k], b, bo, brs, bcs, k, dst, accumulate);
        }
        let (a, b) = (Operand::new(a, ao, ars, acs), Operand::new(b, bo, brs, bcs));
        gemm_tile((m, n, k), dst, accumulate, T::one(), a, b, par)
    };
    let flops = m * n * k;
    const BIG: usize = 128 * 128 * 128;
    let threads = crate::threads::num_threads();
    // Independent products (a convolution's per-sample GEMMs) go one per
    // thread whenever there are enough of them to share evenly: no GEMM is
    // split, so no thread waits on another. Splitting each mid-size product
    // instead left the second core idle (the CNN's conv2, 64 x 288 x 196,
    // ran at the same speed on 1 and 2 threads).
    let even = batch >= 4 * threads || batch % threads == 0;
    let batched = threads > 1 && batch >= threads && even && batch * flops >= BIG;
    // Below ~2 MFLOP (e.g. batch-1 layers) waking a second core costs more
    // than it saves: stay on the calling thread, without entering the pool.
    let split = threads > 1 && flops >= BIG;
    if batched {
        par_chunks_mut(out, m * n, |i, dst| {
            one(dst, a_off[i], b_off[i], m, Parallelism::None)
        });
    } else if split && m >= 64 * threads && flops <= 64 * BIG {
        // Mid-size products (a 256-row batch through a 256-wide layer):
        // each thread takes a block of rows as its own single-threaded
        // GEMM. gemm's own split of such sizes gave a second core nothing
        // (the seed MLP's b256 inference ran at the same speed on 1 and 2).
        let rows = m.div_ceil(threads).next_multiple_of(8).min(m);
        for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(&a_off).zip(&b_off) {
            par_chunks_mut(dst, rows * n, |i, d| {
                let a0 = ao + i * rows * ars;
                one(d, a0, bo, d.len() / n, Parallelism::None)
            });
        }
    } else if split {
        install(|threads| {
            for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(&a_off).zip(&b_off) {
                one(dst, ao, bo, m, Parallelism::Rayon(threads));
            }
        });
    } else {
        for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(&a_off).zip(&b_off) {
            one(dst, ao, bo, m, Parallelism::None);
        }
    }
}

/// `dst[j] (+)= sum_i x[i] * b[bo + i*brs + j*bcs]` where either the
/// columns (`brs == 1`) or the rows (`bcs == 1`) of `b` are contiguous.
#[allow(clippy::too_many_arguments)]
fn row_times_matrix<T: Float>(
    x: &[T],
    b: &[T],
    bo: usize,
    brs: usize,
    bcs: usize,
    k: usize,
    dst: &mut [T],
    accumulate: bool,
) {
    let n = dst.len();
    simd(
        #[inline(always)]
        || {
            if brs == 1 {
                for (j, d) in dst.iter_mut().enumerate() {
                    let v = dot(x, &b[bo + j * bcs..bo + j * bcs + k]);
                    *d = if accumulate { *d + v } else { v };
                }
            } else {
                if !accumulate {
                    dst.iter_mut().for_each(|d| *d = T::zero());
                }
                for (i, &xi) in x.iter().enumerate() {
                    let row = &b[bo + i * brs..bo + i * brs + n];
                    for (d, &v) in dst.iter_mut().zip(row) {
                        *d = *d + xi * v;
                    }
                }
            }
        },
    )
}

/// A dot product with 16 independent accumulators, so it vectorises.
#[inline(always)]
fn dot<T: Float>(x: &[T], y: &[T]) -> T {
    const L: usize = 16;
    let mut acc = [T::zero(); L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..L {
            acc[l] = acc[l] + a[l] * b[l];
        }
    }
    let mut tail = T::zero();
    for (&a, &b) in xr.iter().zip(yr) {
        tail = tail + a * b;
    }
    acc.iter().fold(tail, |s, &v| s + v)
}

/// A read-only matrix operand inside a slice: element `(i, p)` is
/// `data[offset + i * rs + p * cs]`, so a transpose is a swap of strides.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a, T> {
    data: &'a [T],
    offset: usize,
    rs: usize,
    cs: usize,
}

impl<'a, T> Operand<'a, T> {
    pub(crate) fn new(data: &'a [T], offset: usize, rs: usize, cs: usize) -> Self {
        Operand {
            data,
            offset,
            rs,
            cs,
        }
    }

    /// Whether an `rows x cols` matrix at these strides lies inside `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || self.offset + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// One product into a dense row-major `dst` `[m, n]`: `dst = alpha · a b`,
/// or `dst += alpha · a b` when `accumulate`, for `a` `[m, k]` and `b`
/// `[k, n]` — every GEMM the kernels run (matmul's products, the tiles of
/// fused attention) goes through here.
pub(crate) fn gemm_tile<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    accumulate: bool,
    alpha: T,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    par: Parallelism,
) {
    assert!(
        dst.len() == m * n && a.fits(m, k) && b.fits(k, n),
        "gemm_tile kernel: a {m} x {k} by {k} x {n} product does not fit its buffers"
    );
    if m * n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst.fill(T::zero());
        }
        return;
    }
    // SAFETY: `fits` checked that the highest element each operand reads,
    // `offset + (rows-1)*rs + (cols-1)*cs`, lies inside its slice, and `dst`
    // holds exactly the `m x n` row-major outputs gemm writes (and reads
    // first, with `read_dst`, when accumulating; it is initialised either way).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr().add(a.offset),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.offset),
            b.cs as isize,
            b.rs as isize,
            if accumulate { T::one() } else { T::zero() },
            alpha,
            false,
            false,
            false,
            par,
        );
    }
}
