//! Compositions of the factorizations and products: `linalg.lstsq`,
//! `cholesky_solve`, `cholesky_inverse`, `linalg.matrix_power`,
//! `linalg.matrix_exp` and `linalg.multi_dot`; their gradients come from
//! the ops they are made of.

use super::{MatrixNorm, check_matrices, eye_like, matrix_norm, mt, pinv, solve, solve_triangular};
use crate::Tensor;
use crate::trace::{self, Attr};

/// The least-squares solution `X` minimising `‖A X - B‖` for each pair
/// (`torch.linalg.lstsq(A, B).solution`): `pinv(A) B`, the minimum-norm
/// solution when `A` is rank-deficient (the `gelsd` driver's answer;
/// PyTorch's default CPU driver `gelsy` agrees on full-rank inputs). `B`
/// is a batch of `m x k` matrices; batch dims broadcast.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// // Fit y = 2x + 1 through four points.
/// let a = Tensor::from_vec(vec![0.0f64, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0], &[4, 2]);
/// let y = Tensor::from_vec(vec![1.0f64, 3.0, 5.0, 7.0], &[4, 1]);
/// let x = linalg::lstsq(&a, &y);
/// assert!(x.allclose(&Tensor::from_vec(vec![2.0f64, 1.0], &[2, 1]), 1e-12, 1e-12));
/// ```
pub fn lstsq(a: &Tensor, b: &Tensor) -> Tensor {
    trace::op("linalg_lstsq", [a, b], Vec::new, || {
        check_matrices("linalg.lstsq", a, false);
        assert!(
            b.ndim() >= 2 && b.size(-2) == a.size(-2),
            "linalg.lstsq: A {:?} and B {:?} do not match (B needs {} rows)",
            a.shape(),
            b.shape(),
            a.size(-2)
        );
        pinv(a).matmul(b)
    })
}

/// Everything `torch.linalg.lstsq(A, B, driver="gelsd")` returns: the
/// minimum-norm solution, the squared residual norms, the rank and the
/// singular values of `A` (see [`lstsq_full`]).
#[derive(Clone, Debug)]
pub struct Lstsq {
    /// `X` minimising `‖A X - B‖`, minimum-norm when `A` is rank-deficient.
    pub solution: Tensor,
    /// `‖A X - B‖²` per column of `B` (`[*, k]`) when `A` is tall (`m > n`)
    /// and every matrix of the batch has full rank; otherwise empty (`[0]`),
    /// as PyTorch leaves it.
    pub residuals: Tensor,
    /// The rank of each matrix (int64, `[*]`): its singular values above
    /// `eps · max(m, n)` times the largest.
    pub rank: Tensor,
    /// The singular values of each matrix, descending (`[*, min(m, n)]`),
    /// without a gradient (as PyTorch's).
    pub singular_values: Tensor,
}

/// [`lstsq`] with the residuals, ranks and singular values of PyTorch's
/// `gelsd` driver. Telling whether to fill the residuals reads the ranks
/// (a host read, so `compile` runs it eagerly).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// // y = 2x + 1 fitted through four points, one of them off the line by 1.
/// let a = Tensor::from_vec(vec![0.0f64, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0], &[4, 2]);
/// let y = Tensor::from_vec(vec![1.0f64, 3.0, 6.0, 7.0], &[4, 1]);
/// let fit = linalg::lstsq_full(&a, &y);
/// assert_eq!(fit.rank.item::<i64>(), 2);
/// assert!((fit.residuals.item::<f64>() - 0.7).abs() < 1e-12); // slope 2.1, intercept 1.1
/// ```
pub fn lstsq_full(a: &Tensor, b: &Tensor) -> Lstsq {
    let solution = lstsq(a, b);
    // PyTorch's driver returns them without a gradient.
    let singular_values = super::svdvals(&a.detach());
    let rank = super::matrix_rank(a);
    let (m, n) = (a.size(-2), a.size(-1));
    let full_rank = rank.numel() == 0 || rank.eq_scalar(n as f64).all().item::<bool>();
    let residuals = match m > n && full_rank {
        true => (&a.matmul(&solution) - b).square().sum_dims(&[-2], false),
        false => Tensor::zeros_on(&[0], a.dtype(), a.device()),
    };
    Lstsq {
        solution,
        residuals,
        rank,
        singular_values,
    }
}

/// The solution of `A X = B` given `A`'s Cholesky factor `L` (`upper`: `U`)
/// (`torch.cholesky_solve(B, L, upper)`): two triangular solves.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![4.0f64, 2.0, 2.0, 3.0], &[2, 2]);
/// let b = Tensor::from_vec(vec![2.0f64, 1.0], &[2, 1]);
/// let x = linalg::cholesky_solve(&b, &linalg::cholesky(&a, false), false);
/// assert!(x.allclose(&linalg::solve(&a, &b), 1e-12, 1e-12));
/// ```
pub fn cholesky_solve(b: &Tensor, l: &Tensor, upper: bool) -> Tensor {
    let attrs = || vec![("upper", Attr::Int(upper as i64))];
    trace::op("cholesky_solve", [b, l], attrs, || {
        check_matrices("cholesky_solve", l, true);
        let l = if upper { mt(l) } else { l.clone() };
        let y = solve_triangular(&l, b, false, true, false);
        solve_triangular(&mt(&l), &y, true, true, false)
    })
}

/// `A⁻¹` from `A`'s Cholesky factor (`torch.cholesky_inverse(L, upper)`).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![4.0f64, 2.0, 2.0, 3.0], &[2, 2]);
/// let inv = linalg::cholesky_inverse(&linalg::cholesky(&a, false), false);
/// assert!(inv.allclose(&linalg::inv(&a), 1e-12, 1e-12));
/// ```
pub fn cholesky_inverse(l: &Tensor, upper: bool) -> Tensor {
    let attrs = || vec![("upper", Attr::Int(upper as i64))];
    trace::op("cholesky_inverse", [l], attrs, || {
        check_matrices("cholesky_inverse", l, true);
        let eye = eye_like(l.size(-1), l).expand(l.shape());
        cholesky_solve(&eye, l, upper)
    })
}

/// `A^n` for each square matrix (`torch.linalg.matrix_power`): repeated
/// squaring; `n = 0` gives the identity and a negative `n` the power of
/// the inverse.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![1.0f64, 1.0, 0.0, 1.0], &[2, 2]);
/// assert_eq!(linalg::matrix_power(&a, 3).to_vec::<f64>(), vec![1.0, 3.0, 0.0, 1.0]);
/// assert_eq!(linalg::matrix_power(&a, -1).to_vec::<f64>(), vec![1.0, -1.0, 0.0, 1.0]);
/// ```
pub fn matrix_power(a: &Tensor, n: i64) -> Tensor {
    let attrs = || vec![("n", Attr::Int(n))];
    trace::op("linalg_matrix_power", [a], attrs, || {
        assert!(
            a.ndim() >= 2 && a.size(-1) == a.size(-2),
            "linalg.matrix_power: expects square matrices, got shape {:?}",
            a.shape()
        );
        if n < 0 {
            return matrix_power(&super::inv(a), -n);
        }
        let mut result: Option<Tensor> = None;
        let (mut base, mut e) = (a.clone(), n as u64);
        while e > 0 {
            if e & 1 == 1 {
                result = Some(match result {
                    Some(r) => r.matmul(&base),
                    None => base.clone(),
                });
            }
            e >>= 1;
            if e > 0 {
                base = base.matmul(&base);
            }
        }
        result.unwrap_or_else(|| &eye_like(a.size(-1), a).expand(a.shape()) + &(a * 0.0))
    })
}

/// `θ₁₃` of Higham's scaling and squaring: the largest 1-norm for which the
/// degree-13 Padé approximant of `exp` is accurate to f64 rounding.
const THETA_13: f64 = 5.371920351148152;

/// The coefficients of the degree-13 Padé approximant of `exp`.
const PADE_13: [f64; 14] = [
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
];

/// The matrix exponential `Σ Aᵏ / k!` of each square matrix
/// (`torch.linalg.matrix_exp`), by Higham's scaling and squaring with the
/// degree-13 Padé approximant: `A` is scaled by `2⁻ˢ` until its 1-norm is
/// at most `θ₁₃` (one `s` for the whole batch: the largest norm's), the
/// approximant solved for, and squared `s` times. The gradient is the
/// exact derivative of those steps.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// // exp of [[0, -t], [t, 0]] is the rotation by t.
/// let t = 0.5f64;
/// let a = Tensor::from_vec(vec![0.0, -t, t, 0.0], &[2, 2]);
/// let r = Tensor::from_vec(vec![t.cos(), -t.sin(), t.sin(), t.cos()], &[2, 2]);
/// assert!(linalg::matrix_exp(&a).allclose(&r, 1e-14, 1e-14));
/// ```
pub fn matrix_exp(a: &Tensor) -> Tensor {
    trace::op("linalg_matrix_exp", [a], Vec::new, || {
        check_matrices("linalg.matrix_exp", a, true);
        if a.numel() == 0 {
            return a.clone();
        }
        let norm = crate::autograd::no_grad(|| {
            matrix_norm(a, MatrixNorm::MaxColumnSum)
                .max()
                .to_dtype(crate::DType::F64)
                .item::<f64>()
        });
        let s = if norm > THETA_13 {
            (norm / THETA_13).log2().ceil() as i32
        } else {
            0
        };
        let a = if s > 0 { a * 0.5f64.powi(s) } else { a.clone() };
        let b = PADE_13;
        let eye = eye_like(a.size(-1), &a).expand(a.shape());
        let a2 = a.matmul(&a);
        let a4 = a2.matmul(&a2);
        let a6 = a4.matmul(&a2);
        let poly =
            |c: [f64; 4]| &(&(&(&a6 * c[0]) + &(&a4 * c[1])) + &(&a2 * c[2])) + &(&eye * c[3]);
        let u_inner =
            &a6.matmul(&poly([b[13], b[11], b[9], 0.0])) + &poly([b[7], b[5], b[3], b[1]]);
        let u = a.matmul(&u_inner);
        let v = &a6.matmul(&poly([b[12], b[10], b[8], 0.0])) + &poly([b[6], b[4], b[2], b[0]]);
        let mut r = solve(&(&v - &u), &(&v + &u));
        for _ in 0..s {
            r = r.matmul(&r);
        }
        r
    })
}

/// The product of a chain of matrices (`torch.linalg.multi_dot`), in the
/// order that needs the fewest multiplications (the textbook dynamic
/// program over the chain's shapes). The first may be a 1-D row vector and
/// the last a 1-D column vector, as PyTorch's.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let (a, b, c) = (Tensor::ones(&[10, 100]), Tensor::ones(&[100, 5]), Tensor::ones(&[5, 50]));
/// let p = linalg::multi_dot(&[&a, &b, &c]); // (a b) c: 7,500 products, not 75,000
/// assert_eq!(p.shape(), &[10, 50]);
/// assert!(p.to_vec::<f32>().iter().all(|&x| x == 500.0));
/// ```
pub fn multi_dot(tensors: &[&Tensor]) -> Tensor {
    assert!(
        tensors.len() >= 2,
        "linalg.multi_dot: expects at least 2 tensors, got {}",
        tensors.len()
    );
    let last = tensors.len() - 1;
    let mats: Vec<Tensor> = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| match (t.ndim(), i) {
            (1, 0) => t.unsqueeze(0),
            (1, i) if i == last => t.unsqueeze(1),
            (2, _) => (*t).clone(),
            _ => panic!(
                "linalg.multi_dot: tensor {i} has shape {:?}; expected 2-D (1-D allowed first \
                 and last)",
                t.shape()
            ),
        })
        .collect();
    for (i, w) in mats.windows(2).enumerate() {
        assert!(
            w[0].size(-1) == w[1].size(-2),
            "linalg.multi_dot: tensors {i} and {} do not chain ({:?} @ {:?})",
            i + 1,
            tensors[i].shape(),
            tensors[i + 1].shape()
        );
    }
    let dims: Vec<usize> = std::iter::once(mats[0].size(-2))
        .chain(mats.iter().map(|m| m.size(-1)))
        .collect();
    let order = chain_order(&dims);
    let mut out = multiply(&mats, &order, 0, mats.len() - 1);
    if tensors[0].ndim() == 1 {
        out = out.squeeze_dim(0);
    }
    if tensors[last].ndim() == 1 {
        out = out.squeeze_dim(-1);
    }
    out
}

/// `split[i][j]`: where the cheapest product of matrices `i..=j` splits.
fn chain_order(dims: &[usize]) -> Vec<Vec<usize>> {
    let n = dims.len() - 1;
    let mut cost = vec![vec![0u128; n]; n];
    let mut split = vec![vec![0; n]; n];
    for len in 1..n {
        for i in 0..n - len {
            let j = i + len;
            cost[i][j] = u128::MAX;
            for k in i..j {
                let c = cost[i][k] + cost[k + 1][j] + (dims[i] * dims[k + 1] * dims[j + 1]) as u128;
                if c < cost[i][j] {
                    (cost[i][j], split[i][j]) = (c, k);
                }
            }
        }
    }
    split
}

fn multiply(mats: &[Tensor], split: &[Vec<usize>], i: usize, j: usize) -> Tensor {
    if i == j {
        return mats[i].clone();
    }
    let k = split[i][j];
    multiply(mats, split, i, k).matmul(&multiply(mats, split, k + 1, j))
}
