//! Matrix multiply through the `gemm` crate (AVX-512 kernels with `x86-v4`);
//! bf16 through gemmkit in `matmul_bf16.rs`.

use crate::threads::{install, par_chunks_mut, simd};
use crate::{Float, Layout};
use gemm::Parallelism;
use std::mem::MaybeUninit;

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
    product(a, la, b, lb, None)
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
    product(a, la, b, lb, Some(bias))
}

/// `out += a @ b` for 2-D views `[m, k]` and `[k, n]` into a dense
/// row-major `[m, n]` `out` (PyTorch's `addmm_`): the GEMM adds to `out`
/// where it stands, so a gradient summed over many products (a chunked
/// loss's weight gradient) costs no temporary and no extra pass.
pub fn matmul_accumulate<T: Float>(a: &[T], la: &Layout, b: &[T], lb: &Layout, out: &mut [T]) {
    assert!(
        la.ndim() == 2 && lb.ndim() == 2 && la.shape[1] == lb.shape[0],
        "matmul_accumulate kernel: {:?} @ {:?}",
        la.shape,
        lb.shape
    );
    let (m, k, n) = (la.shape[0], la.shape[1], lb.shape[1]);
    assert!(
        out.len() == m * n,
        "matmul_accumulate kernel: output of {} for {m} x {n}",
        out.len()
    );
    if k == 0 || m * n == 0 {
        return;
    }
    crate::threads::warn_if_unoptimised();
    crate::stats::count_matmul(1);
    let (ars, acs, brs, bcs) = (la.strides[0], la.strides[1], lb.strides[0], lb.strides[1]);
    plan_products(
        out,
        (m, n, k),
        &[la.offset],
        &[lb.offset],
        ars,
        |d, ao, bo, m, p| {
            let (a, b) = (Operand::new(a, ao, ars, acs), Operand::new(b, bo, brs, bcs));
            T::product((m, n, k), Dst::Accumulate(d), None, a, b, p)
        },
    );
}

/// `a @ b`, plus `bias` along the columns when given (2-D only). The
/// output is written once: not zero-filled first, and the bias joins in the
/// GEMM's epilogue where the element type can (bf16), else as the starting
/// rows of each thread's piece, written just before its GEMM adds to them.
pub(super) fn product<T: GemmElement + Default>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    bias: Option<&[T]>,
) -> Vec<T> {
    let nd = la.ndim();
    assert!(
        nd >= 2 && lb.ndim() == nd,
        "matmul kernel: ranks {} and {}",
        la.ndim(),
        lb.ndim()
    );
    if let Some(bias) = bias {
        assert!(
            nd == 2 && bias.len() == lb.shape[1],
            "matmul_bias kernel: {:?} @ {:?} + [{}]",
            la.shape,
            lb.shape,
            bias.len()
        );
    }
    let (m, k) = (la.shape[nd - 2], la.shape[nd - 1]);
    assert!(k == lb.shape[nd - 2], "matmul kernel: inner dims");
    let n = lb.shape[nd - 1];
    let batch: usize = la.shape[..nd - 2].iter().product();
    let len = batch * m * n;
    let mut out: Vec<T> = crate::alloc::with_capacity(len);
    match bias {
        // An empty sum: zeros, or the bias rows.
        _ if k == 0 => match bias {
            None => out.resize(len, T::default()),
            Some(bias) => (0..m).for_each(|_| out.extend_from_slice(bias)),
        },
        _ => {
            matmul_into(a, la, b, lb, &mut out.spare_capacity_mut()[..len], bias);
            // SAFETY: `out` was empty with capacity `len`, and `matmul_into`
            // wrote all `len` outputs (`k > 0`, and every product of every
            // batch covers its `m x n` block of the destination).
            unsafe { out.set_len(len) };
        }
    }
    out
}

/// Where a GEMM writes: fresh memory it overwrites, or outputs it adds to.
pub(crate) enum Dst<'a, T> {
    /// Uninitialised slots, each written once.
    Overwrite(&'a mut [MaybeUninit<T>]),
    /// Initialised outputs, accumulated into.
    Accumulate(&'a mut [T]),
}

impl<T> Dst<'_, T> {
    pub(super) fn len(&self) -> usize {
        match self {
            Dst::Overwrite(d) => d.len(),
            Dst::Accumulate(d) => d.len(),
        }
    }

    /// Pointer to the first slot, for the GEMM crates' raw entries.
    pub(super) fn as_mut_ptr(&mut self) -> *mut T {
        match self {
            Dst::Overwrite(d) => d.as_mut_ptr().cast(),
            Dst::Accumulate(d) => d.as_mut_ptr(),
        }
    }

    pub(super) fn accumulate(&self) -> bool {
        matches!(self, Dst::Accumulate(_))
    }
}

impl<'a, T: Float> Dst<'a, T> {
    /// The outputs with `row` added to each of their rows (fresh slots
    /// start as copies of it).
    fn plus_rows(self, row: &[T]) -> &'a mut [T] {
        match self {
            Dst::Accumulate(d) => {
                for out in d.chunks_exact_mut(row.len()) {
                    out.iter_mut().zip(row).for_each(|(o, &r)| *o = *o + r);
                }
                d
            }
            Dst::Overwrite(d) => {
                // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the view
                // only reads `row`'s initialised elements.
                let row: &[MaybeUninit<T>] =
                    unsafe { std::slice::from_raw_parts(row.as_ptr().cast(), row.len()) };
                for out in d.chunks_exact_mut(row.len()) {
                    out.copy_from_slice(row);
                }
                // SAFETY: every slot was written just above (`d` holds
                // whole rows).
                unsafe { crate::alloc::written(d) }
            }
        }
    }

    /// The outputs to add to: fresh slots are zeroed first.
    fn zeroed(&mut self) -> &mut [T] {
        match self {
            Dst::Accumulate(d) => d,
            Dst::Overwrite(d) => {
                d.iter_mut().for_each(|x| {
                    x.write(T::zero());
                });
                // SAFETY: every slot was written just above.
                unsafe { crate::alloc::written(d) }
            }
        }
    }
}

/// The batched product into `out` (row-major `[..batch, m, n]`), `+ bias`
/// per column when given.
/// `k > 0`.
fn matmul_into<T: GemmElement>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    out: &mut [MaybeUninit<T>],
    bias: Option<&[T]>,
) {
    crate::threads::warn_if_unoptimised();
    let nd = la.ndim();
    let (m, k, n) = (la.shape[nd - 2], la.shape[nd - 1], lb.shape[nd - 1]);
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
    // A column-major `b` (the linear layer's `w.t()`) gets a row-major
    // copy first when the product is big enough (see `row_major_copies`).
    let column_major = brs == 1 && bcs >= k && bcs > 1;
    let worth = m >= TRANSPOSE_B_MIN_ROWS && k * n >= TRANSPOSE_B_MIN_ELEMENTS;
    let row_major_b = (T::TRANSPOSE_COLUMN_MAJOR_B && column_major && worth)
        .then(|| super::transpose::row_major_copies(b, &b_off, bcs, k, n));
    let (b, b_off, brs, bcs) = match &row_major_b {
        Some((copy, offsets)) => (&copy[..], offsets.clone(), n, 1),
        None => (b, b_off, brs, bcs),
    };
    let one = |dst: Dst<'_, T>, ao: usize, bo: usize, m: usize, par: Parallelism| {
        let (a, b) = (Operand::new(a, ao, ars, acs), Operand::new(b, bo, brs, bcs));
        T::product((m, n, k), dst, bias, a, b, par)
    };
    plan_products(out, (m, n, k), &a_off, &b_off, ars, |d, ao, bo, m, p| {
        one(Dst::Overwrite(d), ao, bo, m, p)
    });
    if let Some((copy, _)) = row_major_b {
        crate::alloc::recycle(copy);
    }
}

/// The fewest rows of `a` for which a column-major `b` is worth a
/// transposed copy: the copy costs about a tenth of what it saves at 256
/// rows (9 against ~15 µs at 256 x 256 x 256).
const TRANSPOSE_B_MIN_ROWS: usize = 64;

/// The smallest column-major `b` worth copying: below 16 K elements the
/// products are a few microseconds and the copy's fixed costs show.
const TRANSPOSE_B_MIN_ELEMENTS: usize = 1 << 14;

/// Runs the batch of products over the threads: `f(dst, a_offset,
/// b_offset, rows, parallelism)` for each piece of `out` a thread takes.
fn plan_products<U: Send>(
    out: &mut [U],
    (m, n, k): (usize, usize, usize),
    a_off: &[usize],
    b_off: &[usize],
    ars: usize,
    f: impl Fn(&mut [U], usize, usize, usize, Parallelism) + Sync,
) {
    let batch = a_off.len();
    let flops = m * n * k;
    const BIG: usize = 128 * 128 * 128;
    let threads = crate::threads::num_threads();
    // Independent products (a convolution's per-sample GEMMs) go one per
    // thread whenever there are enough of them to share evenly: no GEMM is
    // split, so no thread waits on another. Splitting each mid-size product
    // instead left the second core idle (the CNN's conv2, 64 x 288 x 196,
    // ran at the same speed on 1 and 2 threads).
    let even = batch >= 4 * threads || batch.is_multiple_of(threads);
    let batched = threads > 1 && batch >= threads && even && batch * flops >= BIG;
    // Below ~2 MFLOP (e.g. batch-1 layers) waking a second core costs more
    // than it saves: stay on the calling thread, without entering the pool.
    let split = threads > 1 && flops >= BIG;
    if batched {
        par_chunks_mut(out, m * n, |i, dst| {
            f(dst, a_off[i], b_off[i], m, Parallelism::None)
        });
    } else if split && m >= 64 * threads {
        // Products with rows to share (a 256-row batch through a 256-wide
        // layer, the char transformer's 4096 tokens): each thread takes a
        // block of rows as its own single-threaded GEMM. gemm's own split
        // gave a second core nothing at the smaller sizes (the seed MLP's
        // b256 inference ran at the same speed on 1 and 2) and ~85% of it
        // at 4096 x 256 x 768, where row blocks get ~90% on AVX2.
        let rows = m.div_ceil(threads).next_multiple_of(8).min(m);
        for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(a_off).zip(b_off) {
            par_chunks_mut(dst, rows * n, |i, d| {
                let a0 = ao + i * rows * ars;
                f(d, a0, bo, d.len() / n, Parallelism::None)
            });
        }
    } else if split {
        install(|threads| {
            for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(a_off).zip(b_off) {
                f(dst, ao, bo, m, Parallelism::Rayon(threads));
            }
        });
    } else {
        for ((dst, &ao), &bo) in out.chunks_mut(m * n).zip(a_off).zip(b_off) {
            f(dst, ao, bo, m, Parallelism::None);
        }
    }
}

/// An element type the batched matmul multiplies: f32 and f64 through
/// `gemm`, bf16 through gemmkit's AVX-512 BF16 kernel.
pub(crate) trait GemmElement: Copy + Send + Sync + 'static {
    /// Whether a large column-major `b` is copied row-major before the
    /// product: for 4-byte elements, which the transpose kernel moves in
    /// AVX registers. gemm packs such a `b` 10-20% slower than a row-major
    /// one (40% at `k = 1024` with few rows).
    const TRANSPOSE_COLUMN_MAJOR_B: bool;

    /// `dst = a b (+ bias)`, or `dst += a b` for an accumulating `dst`, for
    /// one `[m, k]` by `[k, n]` product into a dense row-major `dst`
    /// (`k > 0`).
    fn product(
        mnk: (usize, usize, usize),
        dst: Dst<'_, Self>,
        bias: Option<&[Self]>,
        a: Operand<'_, Self>,
        b: Operand<'_, Self>,
        par: Parallelism,
    );
}

impl<T: Float> GemmElement for T {
    const TRANSPOSE_COLUMN_MAJOR_B: bool = std::mem::size_of::<T>() == 4;

    fn product(
        (m, n, k): (usize, usize, usize),
        dst: Dst<'_, T>,
        bias: Option<&[T]>,
        a: Operand<'_, T>,
        b: Operand<'_, T>,
        par: Parallelism,
    ) {
        assert!(
            dst.len() == m * n && a.fits(m, k) && b.fits(k, n),
            "matmul kernel: a {m} x {k} by {k} x {n} product does not fit its buffers"
        );
        // The bias rows are the starting value the GEMM adds to, written by
        // the thread that runs this piece, just before its product.
        let mut dst = match bias {
            Some(bias) => Dst::Accumulate(dst.plus_rows(bias)),
            None => dst,
        };
        if m == 1 && a.cs == 1 && (b.rs == 1 || b.cs == 1) {
            // A row vector times a matrix (batch-1 layers): gemm's m = 1 path
            // runs at ~15% of peak, a vectorised GEMV near memory speed.
            let x = &a.data[a.offset..a.offset + k];
            return row_times_matrix(x, b.data, b.offset, b.rs, b.cs, k, dst.zeroed());
        }
        let accumulate = dst.accumulate();
        // SAFETY: `fits` was checked above and `dst` holds the `m x n`
        // outputs, initialised when it accumulates.
        unsafe { gemm_raw((m, n, k), dst.as_mut_ptr(), accumulate, T::one(), a, b, par) }
    }
}

/// `dst[j] += sum_i x[i] * b[bo + i*brs + j*bcs]` where either the
/// columns (`brs == 1`) or the rows (`bcs == 1`) of `b` are contiguous.
fn row_times_matrix<T: Float>(
    x: &[T],
    b: &[T],
    bo: usize,
    brs: usize,
    bcs: usize,
    k: usize,
    dst: &mut [T],
) {
    let n = dst.len();
    simd(
        #[inline(always)]
        || {
            if brs == 1 {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = *d + dot(x, &b[bo + j * bcs..bo + j * bcs + k]);
                }
            } else {
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
    pub(super) data: &'a [T],
    pub(super) offset: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
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
    pub(super) fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || self.offset + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// One product into a dense, initialised row-major `dst` `[m, n]`:
/// `dst = alpha · a b`, or `dst += alpha · a b` when `accumulate`, for `a`
/// `[m, k]` and `b` `[k, n]` (the tiles of fused attention). It and
/// matmul's f32/f64 products share `gemm_raw`.
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
    // SAFETY: `fits` checked that every element each operand reads lies
    // inside its slice, and `dst` holds exactly the `m x n` outputs,
    // initialised (so reading them when accumulating is sound).
    unsafe { gemm_raw((m, n, k), dst.as_mut_ptr(), accumulate, alpha, a, b, par) }
}

/// `gemm` over a raw row-major `[m, n]` destination.
///
/// # Safety
/// As [`gemm_strided`]'s, for a dense row-major `dst`.
unsafe fn gemm_raw<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    accumulate: bool,
    alpha: T,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    par: Parallelism,
) {
    // SAFETY: the caller's contract, with row stride `n` and column stride 1.
    unsafe { gemm_scaled((m, n, k), (dst, n, 1), accumulate, alpha, a, b, par) }
}

/// `dst = a b`, or `dst += a b` when `accumulate`, for a destination at
/// any strides: `dst.0 + i * dst.1 + j * dst.2` holds element `(i, j)` (a
/// convolution's tile writes its `[positions, channels]` product straight
/// into the channel planes of an NCHW output).
///
/// # Safety
/// `a` and `b` must `fit` their `m x k` and `k x n` matrices, and the `m x
/// n` destination elements must be distinct, valid for writes, not written
/// by anyone else during the call, and initialised when `accumulate`.
pub(crate) unsafe fn gemm_strided<T: Float>(
    mnk: (usize, usize, usize),
    dst: (*mut T, usize, usize),
    accumulate: bool,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    par: Parallelism,
) {
    let (m, n, k) = mnk;
    assert!(
        a.fits(m, k) && b.fits(k, n),
        "gemm kernel: a {m} x {k} by {k} x {n} product does not fit its operands"
    );
    // SAFETY: the caller's contract; the operands fit (checked above).
    unsafe { gemm_scaled(mnk, dst, accumulate, T::one(), a, b, par) }
}

/// # Safety
/// As [`gemm_strided`]'s.
unsafe fn gemm_scaled<T: Float>(
    (m, n, k): (usize, usize, usize),
    (dst, rs, cs): (*mut T, usize, usize),
    accumulate: bool,
    alpha: T,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    par: Parallelism,
) {
    // SAFETY: the caller's contract above; the operand pointers start at
    // offsets inside their slices (`fits`).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            cs as isize,
            rs as isize,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_major_right_operand_gives_the_row_major_products() {
        // Large enough for the row-major copy (m >= 64, k * n >= 16 K): the
        // products must be those of `b` made contiguous first, bit for bit,
        // and within f32 summation error of the exact sum.
        let f = |n: usize, seed: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + seed * 104_729) % 1013) as f32 / 337.0 - 1.5)
                .collect()
        };
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            // (batch, m, k, n, broadcast b): a linear layer's `w.t()` with
            // tile edges, batched weights, and one weight for every batch.
            for (bt, m, k, n, shared) in [
                (1, 96, 203, 150, false),
                (3, 64, 128, 136, false),
                (4, 70, 130, 130, true),
            ] {
                let a = f(bt * m * k, 1);
                let b = f(if shared { 1 } else { bt } * n * k, 2);
                let la = Layout::contiguous(&[bt, m, k]);
                let lb = match shared {
                    true => Layout::contiguous(&[1, n, k]).broadcast_to(&[bt, n, k]),
                    false => Layout::contiguous(&[bt, n, k]),
                }
                .transpose(1, 2);
                let got = matmul(&a, &la, &b, &lb);
                let dense = crate::cpu::copy_strided(&b, &lb);
                let want = matmul(&a, &la, &dense, &Layout::contiguous(&[bt, k, n]));
                assert!(
                    got == want,
                    "{bt} x {m}x{k}x{n} differs from the dense product"
                );
                for (t, (ao, bo)) in la
                    .batch_offsets()
                    .iter()
                    .zip(lb.batch_offsets())
                    .enumerate()
                {
                    for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3)] {
                        let (mut exact, mut size) = (0.0f64, 0.0f64);
                        for p in 0..k {
                            let x = a[ao + i * k + p] as f64 * b[bo + j * k + p] as f64;
                            exact += x;
                            size += x.abs();
                        }
                        let g = got[(t * m + i) * n + j] as f64;
                        assert!(
                            (g - exact).abs() <= 1e-5 * size,
                            "({i}, {j}): {g} vs {exact}"
                        );
                    }
                }
            }
        }
    }

    /// The bias rows are written by whichever thread runs a piece: every
    /// path (one row's GEMV, one thread, blocks of rows per thread, gemm's
    /// own split of a product with few rows) gives `a @ b` plus the bias
    /// in every row, as the exact sum does.
    #[test]
    fn the_bias_joins_every_row_on_every_path() {
        let f = |n: usize, seed: usize| -> Vec<f64> {
            (0..n)
                .map(|i| ((i * 7919 + seed * 104_729) % 1013) as f64 / 337.0 - 1.5)
                .collect()
        };
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            // (m, k, n): a GEMV, a small product, row blocks (m >= 128,
            // >= 2 MFLOP, also past the old 128 MFLOP bound), few rows.
            for (m, k, n) in [
                (1, 40, 24),
                (9, 17, 33),
                (200, 96, 136),
                (520, 512, 520),
                (72, 300, 200),
            ] {
                let (a, b, bias) = (f(m * k, 1), f(k * n, 2), f(n, 3));
                let (la, lb) = (Layout::contiguous(&[m, k]), Layout::contiguous(&[k, n]));
                let got = matmul_bias(&a, &la, &b, &lb, &bias);
                for i in 0..m {
                    for j in 0..n {
                        let exact: f64 =
                            bias[j] + (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f64>();
                        let g = got[i * n + j];
                        assert!(
                            (g - exact).abs() <= 1e-9 * (1.0 + exact.abs()),
                            "{threads} threads, {m}x{k}x{n} ({i}, {j}): {g} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
