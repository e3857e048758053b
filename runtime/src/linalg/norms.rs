//! What is built on the SVD: `linalg.pinv`, `linalg.matrix_norm` and
//! `linalg.matrix_rank`.

use super::{check_matrices, mt, svd, svdvals};
use crate::autograd::no_grad;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};

/// The Moore–Penrose pseudo-inverse of each matrix (`torch.linalg.pinv`
/// with its default tolerance: singular values at most
/// `max(m, n) · eps · σ_max` count as zero), through the SVD. The gradient
/// is PyTorch's `pinv_backward` (the Golub–Pereyra formula), so repeated
/// singular values (an identity) are fine.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]); // rank 1
/// let p = linalg::pinv(&a);
/// assert!(a.matmul(&p).matmul(&a).allclose(&a, 1e-12, 1e-12));
/// ```
pub fn pinv(a: &Tensor) -> Tensor {
    trace::op("linalg_pinv", [a], Vec::new, || {
        check_matrices("linalg.pinv", a, false);
        let p = no_grad(|| {
            let (u, s, vh) = svd(a, false);
            let keep = above_default_tolerance(&s, a);
            let sinv = Tensor::where_(&keep, &s.reciprocal(), &Tensor::zeros_like(&s));
            mt(&vh).matmul(&(&sinv.unsqueeze(-1) * &mt(&u)))
        });
        Tensor::record(p.detach(), "LinalgPinvBackward0", &[a], || {
            let (a, p) = (a.saved(), p.saved());
            move |g: &Tensor, _: &[bool]| vec![Some(pinv_backward(g, &p, &a))]
        })
    })
}

/// Which singular values `s` (descending) of `a` count as non-zero for
/// `pinv` and `matrix_rank`: those above PyTorch's default tolerance
/// `max(m, n) · eps · σ_max`, eps of `a`'s dtype.
fn above_default_tolerance(s: &Tensor, a: &Tensor) -> Tensor {
    let eps = if a.dtype() == DType::F64 {
        f64::EPSILON
    } else {
        f32::EPSILON as f64
    };
    let smax = s.narrow(-1, 0, 1.min(s.size(-1)));
    let tol = &smax * (a.size(-2).max(a.size(-1)) as f64 * eps);
    s.gt(&tol)
}

/// PyTorch's `pinv_backward` (real case), with the products arranged for
/// the smaller dimension.
fn pinv_backward(g: &Tensor, p: &Tensor, a: &Tensor) -> Tensor {
    let (m, n) = (a.size(-2), a.size(-1));
    let (pt, gt) = (mt(p), mt(g));
    if m <= n {
        let k = gt.matmul(p);
        let kpt = k.matmul(&pt);
        let t1 = &(&(-&mt(&p.matmul(&k))) + &kpt) - &a.matmul(p).matmul(&kpt);
        &t1 + &pt.matmul(p).matmul(&(&gt - &k.matmul(a)))
    } else {
        let k = p.matmul(&gt);
        let ptk = pt.matmul(&k);
        let t1 = &(-&mt(&k.matmul(p))) + &(&gt - &a.matmul(&k)).matmul(p).matmul(&pt);
        &(&t1 + &ptk) - &ptk.matmul(p).matmul(a)
    }
}

/// Which norm [`matrix_norm`] takes (`torch.linalg.matrix_norm`'s `ord`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MatrixNorm {
    /// `'fro'`: the square root of the sum of squares (the default).
    #[default]
    Frobenius,
    /// `'nuc'`: the sum of the singular values.
    Nuclear,
    /// `2`: the largest singular value.
    Spectral,
    /// `-2`: the smallest singular value.
    MinSingular,
    /// `1`: the largest column sum of absolute values.
    MaxColumnSum,
    /// `-1`: the smallest column sum of absolute values.
    MinColumnSum,
    /// `inf`: the largest row sum of absolute values.
    MaxRowSum,
    /// `-inf`: the smallest row sum of absolute values.
    MinRowSum,
}

impl MatrixNorm {
    /// The norm a recorded graph stored as its discriminant.
    pub(crate) fn from_code(code: i64) -> MatrixNorm {
        const ALL: [MatrixNorm; 8] = [
            MatrixNorm::Frobenius,
            MatrixNorm::Nuclear,
            MatrixNorm::Spectral,
            MatrixNorm::MinSingular,
            MatrixNorm::MaxColumnSum,
            MatrixNorm::MinColumnSum,
            MatrixNorm::MaxRowSum,
            MatrixNorm::MinRowSum,
        ];
        ALL.get(code as usize).copied().unwrap_or_default()
    }
}

/// A norm of each matrix (the last two dims; `torch.linalg.matrix_norm(A,
/// ord)` with `keepdim=False`), differentiable.
///
/// ```
/// use tapir_runtime::{Tensor, linalg, linalg::MatrixNorm};
/// let a = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 4.0], &[2, 2]);
/// assert_eq!(linalg::matrix_norm(&a, MatrixNorm::Frobenius).item::<f32>(), 30f32.sqrt());
/// assert_eq!(linalg::matrix_norm(&a, MatrixNorm::MaxColumnSum).item::<f32>(), 6.0);
/// assert_eq!(linalg::matrix_norm(&a, MatrixNorm::MaxRowSum).item::<f32>(), 7.0);
/// ```
pub fn matrix_norm(a: &Tensor, ord: MatrixNorm) -> Tensor {
    let attrs = || vec![("ord", Attr::Int(ord as i64))];
    trace::op("linalg_matrix_norm", [a], attrs, || {
        check_matrices("linalg.matrix_norm", a, false);
        let sums = |dim: isize| a.abs().sum_dim(dim, false);
        match ord {
            MatrixNorm::Frobenius => a.square().sum_dims(&[-2, -1], false).sqrt(),
            MatrixNorm::Nuclear => svdvals(a).sum_dim(-1, false),
            MatrixNorm::Spectral => svdvals(a).max_dim(-1, false).0,
            MatrixNorm::MinSingular => svdvals(a).min_dim(-1, false).0,
            MatrixNorm::MaxColumnSum => sums(-2).max_dim(-1, false).0,
            MatrixNorm::MinColumnSum => sums(-2).min_dim(-1, false).0,
            MatrixNorm::MaxRowSum => sums(-1).max_dim(-1, false).0,
            MatrixNorm::MinRowSum => sums(-1).min_dim(-1, false).0,
        }
    })
}

/// The numerical rank of each matrix (`torch.linalg.matrix_rank` with its
/// default tolerance: singular values above `max(m, n) · eps · σ_max`),
/// int64.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]);
/// assert_eq!(linalg::matrix_rank(&a).item::<i64>(), 1);
/// ```
pub fn matrix_rank(a: &Tensor) -> Tensor {
    trace::op("linalg_matrix_rank", [a], Vec::new, || {
        check_matrices("linalg.matrix_rank", a, false);
        no_grad(|| {
            let s = svdvals(a);
            above_default_tolerance(&s, a)
                .to_dtype(DType::I64)
                .sum_dim(-1, false)
        })
    })
}
