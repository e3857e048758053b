//! Matrix decompositions and solves (`torch.linalg`) on faer: batches of
//! row-major matrices in, row-major factors out. A batch splits one matrix
//! per task across tapir's threads; a lone matrix is split by faer's own
//! blocked algorithms inside tapir's rayon pool (`faer::Par::rayon`).
//!
//! Failures that depend on the values (a matrix that is not positive
//! definite, an exactly singular one, an SVD or eigensolver that did not
//! converge) come back per matrix as an `info` code, LAPACK's: 0 is success,
//! `k > 0` names the failing leading minor or pivot (1-based). The runtime
//! turns them into PyTorch's errors, or returns them (`cholesky_ex`).
//!
//! ```
//! use tapir_kernels::cpu::linalg;
//! // [[4, 2], [2, 3]] = L Lᵀ with L = [[2, 0], [1, √2]]
//! let (l, info) = linalg::cholesky(&[4.0f64, 2.0, 2.0, 3.0], 1, 2, false);
//! assert_eq!(info, vec![0]);
//! assert!((l[3] - 2f64.sqrt()).abs() < 1e-15 && l[1] == 0.0);
//! ```

use batch::{
    concat, lu_in_place, matrix, matrix_transposed, per_matrix, per_matrix_in_place, push_rows,
    zero_pivot,
};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{MatMut, MatRef, Side};

#[path = "linalg_batch.rs"]
mod batch;

/// The element types the decompositions take (PyTorch's CPU linalg takes
/// f32, f64 and the complex types; tapir has no complex dtype).
pub trait LinalgFloat: faer::traits::RealField + num_traits::Float + Send + Sync + 'static {}
impl LinalgFloat for f32 {}
impl LinalgFloat for f64 {}

/// Which factorization or solve [`decompose`] runs, and what it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decomposition {
    /// `[L]` (or `[U]` when `upper`) and the info codes: [`cholesky`].
    Cholesky {
        /// Return `U = Lᵀ`.
        upper: bool,
    },
    /// `[sign, logabsdet]`: [`slogdet`].
    Slogdet,
    /// `[L, U, perm, pivots]`: [`lu`] (the integers as values of the
    /// element type, exact: row indices stay far below 2^24).
    Lu,
    /// `[X]` with `A X = B`, `B` the right-hand side: [`solve`].
    Solve,
    /// `[X]` with `op(A) X = B` (or `X op(A) = B`) for triangular `A`:
    /// [`solve_triangular`].
    SolveTriangular {
        /// What the solve reads (BLAS `trsm`'s flags).
        system: Triangular,
    },
    /// `[Q, R]`: [`qr`].
    Qr {
        /// `mode="complete"` (else `"reduced"`).
        complete: bool,
    },
    /// `[eigenvalues, eigenvectors]` (eigenvectors empty unless
    /// `vectors`): [`eigh`].
    Eigh {
        /// Read the upper triangle (`UPLO="U"`).
        upper: bool,
        /// Compute the eigenvectors.
        vectors: bool,
    },
    /// `[U, S, Vh]` (`U`, `Vh` empty unless `vectors`): [`svd`].
    Svd {
        /// `full_matrices=True`.
        full: bool,
        /// Compute the singular vectors.
        vectors: bool,
    },
}

/// Runs `d` over a batch of `m x n` row-major matrices `a` (with the
/// right-hand sides `rhs`, `n x k` each, for the solves): its outputs in
/// the order [`Decomposition`] lists, and one info code per matrix (all
/// zero for the decompositions that cannot fail).
///
/// ```
/// use tapir_kernels::cpu::linalg::{Decomposition, decompose};
/// let (out, info) = decompose(&[2.0f32, 0.0, 0.0, 4.0], Some(&[1.0, 1.0]), (1, 2, 2), Decomposition::Solve);
/// assert_eq!((out[0].clone(), info), (vec![0.5, 0.25], vec![0]));
/// ```
pub fn decompose<T: LinalgFloat>(
    a: &[T],
    rhs: Option<&[T]>,
    (batch, m, n): (usize, usize, usize),
    d: Decomposition,
) -> (Vec<Vec<T>>, Vec<i64>) {
    let ok = || vec![0; batch];
    let rhs = || {
        let b = rhs.expect("decompose: a solve takes a right-hand side");
        (b, b.len() / (batch * n).max(1))
    };
    match d {
        Decomposition::Cholesky { upper } => {
            let (l, info) = cholesky(a, batch, n, upper);
            (vec![l], info)
        }
        Decomposition::Slogdet => {
            let (sign, log) = slogdet(a, batch, n);
            (vec![sign, log], ok())
        }
        Decomposition::Lu => {
            let f = lu(a, batch, m, n);
            let as_t = |v: Vec<usize>| v.into_iter().map(|i| from_f64(i as f64)).collect();
            (vec![f.l, f.u, as_t(f.perm), as_t(f.pivots)], ok())
        }
        Decomposition::Solve => {
            let (b, k) = rhs();
            let (x, info) = solve(a, b, batch, n, k);
            (vec![x], info)
        }
        Decomposition::SolveTriangular { system } => {
            let (b, k) = rhs();
            (vec![solve_triangular(a, b, batch, (n, k), system)], ok())
        }
        Decomposition::Qr { complete } => {
            let (q, r) = qr(a, batch, m, n, complete);
            (vec![q, r], ok())
        }
        Decomposition::Eigh { upper, vectors } => {
            let (w, v, info) = eigh(a, batch, n, upper, vectors);
            (vec![w, v], info)
        }
        Decomposition::Svd { full, vectors } => {
            let (u, s, vh, info) = svd(a, batch, (m, n), full, vectors);
            (vec![u, s, vh], info)
        }
    }
}

/// Cholesky factors of a batch of `n x n` symmetric positive-definite
/// matrices, reading the lower triangle: `L` with `A = L Lᵀ` (or
/// `U = Lᵀ` with `A = Uᵀ U` when `upper`), the other triangle zero. `info[i]`
/// is the order of the first leading minor of matrix `i` that is not
/// positive definite (its factor is then all zeros), or 0.
pub fn cholesky<T: LinalgFloat>(
    a: &[T],
    batch: usize,
    n: usize,
    upper: bool,
) -> (Vec<T>, Vec<i64>) {
    use faer::linalg::cholesky::llt::factor::{self as llt, LltError};
    let parts = per_matrix(batch, |i| {
        // In place: faer's `Llt` copies the matrix into a zeroed one and `L`
        // out again (15.6 against 10.5 ms at 1024 x 1024). From 512 on, on
        // `A` row-major (`matrix_transposed` holds it, and its transposed
        // view is `A`): faster there (7.3 ms), slower on small matrices
        // (1.2 against 0.65 ms for 64 of 64 x 64).
        let row_major = n >= 512;
        let mut x = if row_major {
            matrix_transposed(a, i, n)
        } else {
            matrix(a, i, n, n)
        };
        let mut view = x.view_mut();
        if row_major {
            view = view.transpose_mut();
        }
        let par = faer::get_global_parallelism();
        let scratch = llt::cholesky_in_place_scratch::<T>(n, par, Default::default());
        let mut scratch = MemBuffer::new(scratch);
        let stack = MemStack::new(&mut scratch);
        let zero = <T as num_traits::Zero>::zero();
        let no_regularization = Default::default();
        let factored =
            llt::cholesky_in_place(view, no_regularization, par, stack, Default::default());
        if let Err(LltError::NonPositivePivot { index }) = factored {
            return (vec![zero; n * n], index as i64 + 1);
        }
        // `L` is the lower triangle; the upper one is left as it was.
        let mut l = x.view();
        if row_major {
            l = l.transpose();
        }
        let mut out = Vec::new();
        push_rows(&mut out, if upper { l.transpose() } else { l });
        for (r, row) in out.chunks_mut(n.max(1)).enumerate() {
            let other = if upper {
                &mut row[..r]
            } else {
                &mut row[r + 1..]
            };
            other.fill(zero);
        }
        (out, 0)
    });
    let info = parts.iter().map(|p| p.1).collect();
    (concat(parts.into_iter().map(|p| p.0)), info)
}

/// The sign and the log of the absolute value of the determinant of each
/// `n x n` matrix (`torch.linalg.slogdet`), by LU with partial pivoting:
/// `(0, -inf)` for an exactly singular matrix.
pub fn slogdet<T: LinalgFloat>(a: &[T], batch: usize, n: usize) -> (Vec<T>, Vec<T>) {
    let parts = per_matrix(batch, |i| {
        if n == 0 {
            return (
                <T as num_traits::One>::one(),
                <T as num_traits::Zero>::zero(),
            );
        }
        // det Aᵀ = det A, and `Aᵀ` column-major is a copy (see `solve`).
        let mut lu = matrix_transposed(a, i, n);
        let (forward, _) = lu_in_place(&mut lu);
        let u = lu.view();
        let mut sign = permutation_sign(&forward);
        let mut log = 0.0f64;
        for d in 0..n {
            let x = u[(d, d)];
            let xf = to_f64(x);
            if xf == 0.0 {
                return (<T as num_traits::Zero>::zero(), from_f64(f64::NEG_INFINITY));
            }
            if xf < 0.0 {
                sign = -sign;
            }
            log += xf.abs().ln();
        }
        (from_f64(sign), from_f64(log))
    });
    parts.into_iter().unzip()
}

/// A batch of LU factorizations with partial pivoting, `A = P L U`.
#[derive(Clone, Debug, PartialEq)]
pub struct LuFactors<T> {
    /// Unit lower-trapezoidal `m x k` factors, `k = min(m, n)`.
    pub l: Vec<T>,
    /// Upper-trapezoidal `k x n` factors.
    pub u: Vec<T>,
    /// Per matrix, `m` entries: row `i` of `L U` is row `perm[i]` of `A`
    /// (so `P` has its ones at `(perm[i], i)`).
    pub perm: Vec<usize>,
    /// Per matrix, `k` entries: LAPACK's `ipiv`, 1-based: step `i`
    /// swapped rows `i` and `pivots[i] - 1`.
    pub pivots: Vec<usize>,
}

/// The LU factorization with partial (row) pivoting of each `m x n` matrix
/// (`torch.linalg.lu`, `torch.linalg.lu_factor`). An exactly singular
/// matrix factors too (`U` has a zero on its diagonal), as LAPACK's.
///
/// ```
/// use tapir_kernels::cpu::linalg::lu;
/// let f = lu(&[0.0f64, 1.0, 2.0, 3.0], 1, 2, 2);
/// assert_eq!((f.perm, f.pivots), (vec![1, 0], vec![2, 2]));
/// assert_eq!(f.u, vec![2.0, 3.0, 0.0, 1.0]);
/// ```
pub fn lu<T: LinalgFloat>(a: &[T], batch: usize, m: usize, n: usize) -> LuFactors<T> {
    let parts = per_matrix(batch, |i| {
        let mut f = matrix(a, i, m, n);
        let (perm, _) = lu_in_place(&mut f);
        let mut packed = Vec::new();
        push_rows(&mut packed, f.view());
        let k = m.min(n);
        let zero = <T as num_traits::Zero>::zero();
        let (mut l, mut u) = (vec![zero; m * k], vec![zero; k * n]);
        for (r, row) in packed.chunks(n.max(1)).take(m).enumerate() {
            let below = r.min(k);
            l[r * k..][..below].copy_from_slice(&row[..below]);
            if r < k {
                l[r * k + r] = <T as num_traits::One>::one();
                u[r * n + r..][..n - r].copy_from_slice(&row[r..]);
            }
        }
        let pivots = lapack_pivots(&perm, m.min(n));
        (l, u, perm, pivots)
    });
    let mut out = LuFactors {
        l: Vec::new(),
        u: Vec::new(),
        perm: Vec::new(),
        pivots: Vec::new(),
    };
    for (l, u, perm, pivots) in parts {
        out.l.extend(l);
        out.u.extend(u);
        out.perm.extend(perm);
        out.pivots.extend(pivots);
    }
    out
}

/// LAPACK's `ipiv` (1-based row swaps, one per step) that brings the rows
/// into the order `perm`.
fn lapack_pivots(perm: &[usize], steps: usize) -> Vec<usize> {
    // order[p] = the original row now at position p; at[r] = where row r is.
    let mut order: Vec<usize> = (0..perm.len()).collect();
    let mut at: Vec<usize> = (0..perm.len()).collect();
    (0..steps)
        .map(|i| {
            let j = at[perm[i]];
            order.swap(i, j);
            at[order[i]] = i;
            at[order[j]] = j;
            j + 1
        })
        .collect()
}

/// +1 or -1: the parity of the permutation `p` (by its cycles).
fn permutation_sign(p: &[usize]) -> f64 {
    let mut seen = vec![false; p.len()];
    let mut sign = 1.0;
    for start in 0..p.len() {
        let mut j = start;
        let mut len = 0;
        while !seen[j] {
            seen[j] = true;
            j = p[j];
            len += 1;
        }
        if len > 0 && len % 2 == 0 {
            sign = -sign;
        }
    }
    sign
}

fn to_f64<T: LinalgFloat>(x: T) -> f64 {
    num_traits::ToPrimitive::to_f64(&x).unwrap_or(f64::NAN)
}

fn from_f64<T: LinalgFloat>(x: f64) -> T {
    <T as num_traits::NumCast>::from(x).unwrap_or_else(T::nan)
}

/// `X` with `A X = B` for each of `batch` pairs of an `n x n` `A` and an
/// `n x k` `B` (`torch.linalg.solve`), by LU with partial pivoting.
/// `info[i]` is the first zero pivot of `U` (1-based; `X` is then NaN), or 0.
pub fn solve<T: LinalgFloat>(
    a: &[T],
    b: &[T],
    batch: usize,
    n: usize,
    k: usize,
) -> (Vec<T>, Vec<i64>) {
    let parts = per_matrix(batch, |i| {
        use faer::linalg::lu::partial_pivoting::solve as lu_solve;
        // PyTorch's own route for a row-major `A`: factor `Aᵀ`, whose
        // column-major layout is `A`'s (a copy, not a transpose: 1.5 ms of
        // a 1024 x 1024 solve), and solve with the factors' transpose. The
        // zero pivot reported is then `Aᵀ`'s, as PyTorch's.
        let mut lu = matrix_transposed(a, i, n);
        let (forward, inverse) = lu_in_place(&mut lu);
        if let Some(d) = zero_pivot(lu.view()) {
            return (vec![from_f64(f64::NAN); n * k], d as i64 + 1);
        }
        let mut x = matrix(b, i, n, k);
        let par = faer::get_global_parallelism();
        let scratch = lu_solve::solve_transpose_in_place_scratch::<usize, T>(n, k, par);
        lu_solve::solve_transpose_in_place(
            lu.view(),
            lu.view(),
            faer::perm::PermRef::new_checked(&forward, &inverse, n),
            x.view_mut(),
            par,
            MemStack::new(&mut MemBuffer::new(scratch)),
        );
        let mut out = Vec::new();
        push_rows(&mut out, x.view());
        (out, 0)
    });
    let info = parts.iter().map(|p| p.1).collect();
    (concat(parts.into_iter().map(|p| p.0)), info)
}

/// How [`solve_triangular`] reads its system, as BLAS `trsm`'s flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Triangular {
    /// Read the upper triangle of the stored `A` (else its lower one).
    pub upper: bool,
    /// Take `A`'s diagonal as ones.
    pub unit: bool,
    /// Solve `op(A) X = B` (else `X op(A) = B`).
    pub left: bool,
    /// `op(A) = Aᵀ` (else `A`): a transposed view's storage is solved as
    /// it lies, with no copy.
    pub transpose: bool,
}

/// `X` with `op(A) X = B` (`left`) or `X op(A) = B` for each pair of a
/// triangular `n x n` `A` stored row-major (its `upper` or lower triangle
/// read; its diagonal taken as ones when `unit`) and a `B` of `n x k`
/// (`left`) or `k x n` (`torch.linalg.solve_triangular`). A zero on the
/// diagonal gives infinities, as LAPACK's `trsm`.
///
/// ```
/// use tapir_kernels::cpu::linalg::{Triangular, solve_triangular};
/// // A = [[2, 0], [1, 1]] (lower); Aᵀ X = [4, 1]ᵀ gives X = [1.5, 1]ᵀ.
/// let system = Triangular { upper: false, unit: false, left: true, transpose: true };
/// let x = solve_triangular(&[2.0f64, 0.0, 1.0, 1.0], &[4.0, 1.0], 1, (2, 1), system);
/// assert_eq!(x, [1.5, 1.0]);
/// ```
pub fn solve_triangular<T: LinalgFloat>(
    a: &[T],
    b: &[T],
    batch: usize,
    (n, k): (usize, usize),
    system: Triangular,
) -> Vec<T> {
    use faer::linalg::triangular_solve as ts;
    // From tapir's allocator cache: a fresh 2 MiB vector page-faulted in
    // on every call, and that was half of a batched solve's time.
    let mut x = crate::alloc::with_capacity(batch * n * k);
    x.extend_from_slice(&b[..batch * n * k]);
    per_matrix_in_place(&mut x, n * k, |i, out| {
        // Views of the row-major storage, solved in place with no
        // column-major copies: faer's solves take any strides, and the
        // copies cost more than they saved (a batch of 64 64 x 64 systems
        // of 64 columns: 0.45 ms against 0.89).
        let par = faer::get_global_parallelism();
        let stored = MatRef::from_row_major_slice(&a[i * n * n..][..n * n], n, n);
        // `X op(A) = B` is `op(A)ᵀ Xᵀ = Bᵀ`, Xᵀ a view of the same storage;
        // each transpose swaps which triangle holds the system.
        let (t, x, upper) = match (system.left, system.transpose) {
            (true, false) => (
                stored,
                MatMut::from_row_major_slice_mut(out, n, k),
                system.upper,
            ),
            (true, true) => (
                stored.transpose(),
                MatMut::from_row_major_slice_mut(out, n, k),
                !system.upper,
            ),
            (false, false) => (
                stored.transpose(),
                MatMut::from_row_major_slice_mut(out, k, n).transpose_mut(),
                !system.upper,
            ),
            (false, true) => (
                stored,
                MatMut::from_row_major_slice_mut(out, k, n).transpose_mut(),
                system.upper,
            ),
        };
        match (upper, system.unit) {
            (false, false) => ts::solve_lower_triangular_in_place(t, x, par),
            (false, true) => ts::solve_unit_lower_triangular_in_place(t, x, par),
            (true, false) => ts::solve_upper_triangular_in_place(t, x, par),
            (true, true) => ts::solve_unit_upper_triangular_in_place(t, x, par),
        }
    });
    x
}

/// Householder QR of each `m x n` matrix (`torch.linalg.qr`): `complete`
/// gives `Q` `m x m` and `R` `m x n`, otherwise (`"reduced"`) `Q` `m x k`
/// and `R` `k x n`, `k = min(m, n)`. Signs as LAPACK's `geqrf`
/// (`R`'s diagonal is not normalised).
pub fn qr<T: LinalgFloat>(
    a: &[T],
    batch: usize,
    m: usize,
    n: usize,
    complete: bool,
) -> (Vec<T>, Vec<T>) {
    let parts = per_matrix(batch, |i| {
        let qr = matrix(a, i, m, n).view().qr();
        let (mut q, mut r) = (Vec::new(), Vec::new());
        push_rows(&mut r, qr.thin_R());
        if complete {
            push_rows(&mut q, qr.compute_Q().as_ref());
            // R is m x n: zero rows under the k x n trapezoid.
            r.resize(m * n, <T as num_traits::Zero>::zero());
        } else {
            push_rows(&mut q, qr.compute_thin_Q().as_ref());
        }
        (q, r)
    });
    let (q, r): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    (concat(q), concat(r))
}

/// Eigenvalues (ascending) and, when `vectors`, eigenvectors (columns of
/// an `n x n` matrix) of each symmetric `n x n` matrix, reading its lower
/// triangle, or its upper one when `upper` (`torch.linalg.eigh`). `info[i]`
/// is 1 when the solver did not converge (outputs NaN).
pub fn eigh<T: LinalgFloat>(
    a: &[T],
    batch: usize,
    n: usize,
    upper: bool,
    vectors: bool,
) -> (Vec<T>, Vec<T>, Vec<i64>) {
    let side = if upper { Side::Upper } else { Side::Lower };
    let nan = from_f64::<T>(f64::NAN);
    let parts = per_matrix(batch, |i| {
        let m = matrix(a, i, n, n);
        let m = m.view();
        if !vectors {
            return match m.self_adjoint_eigenvalues(side) {
                Ok(w) => (w, Vec::new(), 0),
                Err(_) => (vec![nan; n], Vec::new(), 1),
            };
        }
        match m.self_adjoint_eigen(side) {
            Ok(e) => {
                let w = (0..n).map(|d| e.S()[d]).collect();
                let mut v = Vec::new();
                push_rows(&mut v, e.U());
                (w, v, 0)
            }
            Err(_) => (vec![nan; n], vec![nan; n * n], 1),
        }
    });
    let info = parts.iter().map(|p| p.2).collect();
    let (w, v): (Vec<_>, Vec<_>) = parts.into_iter().map(|p| (p.0, p.1)).unzip();
    (concat(w), concat(v), info)
}

/// The singular value decomposition `A = U diag(S) Vᴴ` of each `m x n`
/// matrix (`torch.linalg.svd`): `S` descending; when `vectors`, `U`
/// (`m x m` when `full`, else `m x k`) and `Vh` (`n x n`, else `k x n`),
/// `k = min(m, n)`. `info[i]` is 1 when the solver did not converge.
pub fn svd<T: LinalgFloat>(
    a: &[T],
    batch: usize,
    (m, n): (usize, usize),
    full: bool,
    vectors: bool,
) -> (Vec<T>, Vec<T>, Vec<T>, Vec<i64>) {
    let k = m.min(n);
    let nan = from_f64::<T>(f64::NAN);
    let (um, vn) = if full { (m, n) } else { (k, k) };
    let parts = per_matrix(batch, |i| {
        let x = matrix(a, i, m, n);
        let x = x.view();
        if !vectors {
            return match x.singular_values() {
                Ok(s) => (Vec::new(), s, Vec::new(), 0),
                Err(_) => (Vec::new(), vec![nan; k], Vec::new(), 1),
            };
        }
        let svd = if full { x.svd() } else { x.thin_svd() };
        match svd {
            Ok(d) => {
                let (mut u, mut vh) = (Vec::new(), Vec::new());
                push_rows(&mut u, d.U());
                push_rows(&mut vh, d.V().transpose());
                (u, (0..k).map(|j| d.S()[j]).collect(), vh, 0)
            }
            Err(_) => (vec![nan; m * um], vec![nan; k], vec![nan; vn * n], 1),
        }
    });
    let info = parts.iter().map(|p| p.3).collect();
    let (mut u, mut s, mut vh) = (Vec::new(), Vec::new(), Vec::new());
    for p in parts {
        u.extend(p.0);
        s.extend(p.1);
        vh.extend(p.2);
    }
    (u, s, vh, info)
}

#[cfg(test)]
#[path = "linalg_tests.rs"]
mod tests;
