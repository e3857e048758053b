//! `torch.linalg`: decompositions, solves, inverses and determinants of
//! batches of matrices (the last two dims), with PyTorch's names, defaults,
//! errors and gradients.
//!
//! | tapir | PyTorch |
//! |---|---|
//! | [`cholesky`], [`cholesky_ex`] | `linalg.cholesky`, `linalg.cholesky_ex` |
//! | [`solve`], [`solve_triangular`] | `linalg.solve`, `linalg.solve_triangular` |
//! | [`inv`], [`det`], [`slogdet`], [`logdet`] | `linalg.inv`, `linalg.det`, `linalg.slogdet`, `logdet` |
//! | [`lu`], [`lu_factor`], [`lu_solve`] | `linalg.lu`, `linalg.lu_factor`, `linalg.lu_solve` |
//! | [`qr`] | `linalg.qr` |
//! | [`eigh`], [`eigvalsh`] | `linalg.eigh`, `linalg.eigvalsh` (lower triangle read) |
//! | [`svd`], [`svdvals`] | `linalg.svd`, `linalg.svdvals` |
//! | [`pinv`], [`matrix_norm`], [`matrix_rank`] | `linalg.pinv`, `linalg.matrix_norm`, `linalg.matrix_rank` |
//! | [`lstsq`], [`cholesky_solve`], [`cholesky_inverse`] | `linalg.lstsq(..).solution`, `cholesky_solve`, `cholesky_inverse` |
//! | [`matrix_power`], [`matrix_exp`], [`multi_dot`] | `linalg.matrix_power`, `linalg.matrix_exp`, `linalg.multi_dot` |
//!
//! `Tensor` has PyTorch's methods for them too: `x.det()`, `logdet`,
//! `slogdet`, `inverse`, `pinverse`, `matrix_power(n)`, `matrix_exp`,
//! `cholesky(upper)`, `cholesky_inverse`, `cholesky_solve` and `qr`.
//!
//! The factorizations run on faer (`tapir_kernels::cpu::linalg`), one
//! matrix per task across tapir's threads; f32 and f64 (PyTorch's CPU
//! linalg takes no half types either). On a GPU they run on a host copy,
//! counted by `host_fallbacks` (cuSOLVER is not wired in). Every gradient
//! is PyTorch's formula written with tensor ops and these functions, so it
//! runs on either device and replays under `compile`.
//!
//! ```
//! use tapir_runtime::{Tensor, linalg};
//! let a = Tensor::from_vec(vec![4.0f64, 2.0, 2.0, 3.0], &[2, 2]);
//! let l = linalg::cholesky(&a, false);
//! assert!(l.matmul(&l.transpose(-2, -1)).allclose(&a, 1e-12, 1e-12));
//! let x = linalg::solve(&a, &Tensor::from_vec(vec![2.0f64, 1.0], &[2]));
//! assert!(x.allclose(&Tensor::from_vec(vec![0.5f64, 0.0], &[2]), 1e-12, 1e-12));
//! ```

mod compose;
mod factor;
mod lu;
mod methods;
mod norms;
mod solve;

pub use compose::{
    Lstsq, cholesky_inverse, cholesky_solve, lstsq, lstsq_full, matrix_exp, matrix_power, multi_dot,
};
pub use factor::{QrMode, cholesky, cholesky_ex, eigh, eigvalsh, qr, svd, svdvals};
pub use lu::{lu, lu_factor, lu_solve};
pub use norms::{MatrixNorm, matrix_norm, matrix_rank, pinv};
pub use solve::{det, inv, logdet, slogdet, solve, solve_triangular};

use crate::{DType, Tensor};
use tapir_kernels::Decomposition;

/// Panics unless `a` is a batch of f32/f64 matrices (square when `square`),
/// naming `op` and the shape or dtype.
fn check_matrices(op: &str, a: &Tensor, square: bool) {
    assert!(
        a.ndim() >= 2,
        "{op}: expects a matrix or a batch of matrices (at least 2 dims), got shape {:?}",
        a.shape()
    );
    assert!(
        matches!(a.dtype(), DType::F32 | DType::F64),
        "{op}: expects a float32 or float64 tensor, got {} (PyTorch's linalg takes no half \
         types either; call .to_dtype(DType::F32) first)",
        a.dtype()
    );
    let (m, n) = (a.size(-2), a.size(-1));
    assert!(
        !square || m == n,
        "{op}: expects square matrices, got shape {:?} ({m} x {n})",
        a.shape()
    );
}

/// Runs `d` on `a` (and the right-hand sides `b`), without autograd: the
/// outputs with the given shapes, and one info code per matrix.
fn run(
    a: &Tensor,
    b: Option<&Tensor>,
    d: Decomposition,
    shapes: &[Vec<usize>],
) -> (Vec<Tensor>, Vec<i64>) {
    let a_storage = a.read();
    let b_storage = b.map(|b| b.read());
    let rhs = b.zip(b_storage.as_ref()).map(|(b, s)| (&**s, b.layout()));
    let (outs, info) = a_storage.decompose(a.layout(), rhs, d);
    let outs = outs
        .into_iter()
        .zip(shapes)
        .map(|(s, shape)| Tensor::from_storage(s, shape))
        .collect();
    (outs, info)
}

/// Panics with `what` (PyTorch's wording) at the first matrix whose info
/// code is not 0, prefixed by its batch index when there is a batch.
fn check_info(op: &str, a: &Tensor, info: &[i64], what: impl Fn(i64) -> String) {
    if let Some((i, &code)) = info.iter().enumerate().find(|(_, c)| **c != 0) {
        let batch = if a.ndim() > 2 {
            format!(" (batch element {i})")
        } else {
            String::new()
        };
        panic!("{op}{batch}: {} (input shape {:?})", what(code), a.shape());
    }
}

/// The shape of `a` with its last two dims replaced by `tail`.
fn with_tail(a: &Tensor, tail: &[usize]) -> Vec<usize> {
    let mut s = a.shape()[..a.ndim() - 2].to_vec();
    s.extend_from_slice(tail);
    s
}

/// The transpose of the last two dims (`Tensor.mT`).
fn mt(x: &Tensor) -> Tensor {
    x.transpose(-2, -1)
}

/// The `n x n` identity in `like`'s dtype and on its device.
fn eye_like(n: usize, like: &Tensor) -> Tensor {
    let i = Tensor::eye(n).to_dtype(like.dtype());
    i.to(like.device())
        .unwrap_or_else(|e| panic!("linalg: the identity could not be placed: {e}"))
}

/// `[.., n]` → `[.., n, n]` with `v` on the diagonal (`torch.diag_embed`).
fn diag_embed(v: &Tensor) -> Tensor {
    &v.unsqueeze(-1) * &eye_like(v.size(-1), v)
}
