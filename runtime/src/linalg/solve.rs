//! Solves, inverses and determinants: `linalg.solve`,
//! `linalg.solve_triangular`, `linalg.inv`, `linalg.det`, `linalg.slogdet`
//! and `logdet`, each with PyTorch's gradient.

use super::{check_info, check_matrices, eye_like, mt, run, with_tail};
use crate::Tensor;
use crate::ops::broadcast_shapes;
use crate::trace::{self, Attr};
use tapir_kernels::Decomposition;
use tapir_kernels::Triangular;

/// `A` and `B` broadcast over their batch dims (`B` a batch of `n x k`
/// matrices), made dense for the kernel.
fn broadcast_pair(op: &str, a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    check_rhs(op, a, b, true);
    broadcast_batch(op, a, b)
}

/// Panics unless `B` is a batch of matrices with `A`'s order as its rows
/// (`left`, `A X = B`) or its columns (`X A = B`).
fn check_rhs(op: &str, a: &Tensor, b: &Tensor, left: bool) {
    let n = a.size(-1);
    let (b_dim, side) = if left { (-2, "rows") } else { (-1, "columns") };
    assert!(
        b.ndim() >= 2 && b.size(b_dim) == n,
        "{op}: A {:?} and B {:?} do not match (B needs {n} {side})",
        a.shape(),
        b.shape()
    );
}

/// `A` and `B` (on one device, of one dtype) broadcast over their batch
/// dims.
fn broadcast_batch(op: &str, a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    crate::ops::same_device(a, b, op);
    assert!(
        a.dtype() == b.dtype(),
        "{op}: A and B differ in dtype ({} and {})",
        a.dtype(),
        b.dtype()
    );
    let batch = broadcast_shapes(&a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2], op);
    let full = |t: &Tensor| {
        let mut s = batch.clone();
        s.extend_from_slice(&t.shape()[t.ndim() - 2..]);
        t.expand(&s)
    };
    (full(a), full(b))
}

/// Whether `b` is a (batch of) vector(s) for `A` in PyTorch's sense: 1-D,
/// or one dim fewer than `A` with `A`'s leading shape.
fn is_vector_rhs(a: &Tensor, b: &Tensor) -> bool {
    b.ndim() == 1 || (b.ndim() == a.ndim() - 1 && b.shape() == &a.shape()[..a.ndim() - 1])
}

/// The solution `X` of `A X = B` (`torch.linalg.solve`): `A` a batch of
/// invertible `n x n` matrices, `B` a batch of `n x k` matrices or of
/// `n`-vectors, batch dims broadcast. Panics naming the singular matrix
/// when a pivot is exactly zero, as PyTorch. The gradient is PyTorch's:
/// `gB = solve(Aᵀ, gX)`, `gA = -gB Xᵀ`.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![3.0f32, 1.0, 1.0, 2.0], &[2, 2]);
/// let b = Tensor::from_vec(vec![9.0f32, 8.0], &[2]);
/// assert_eq!(linalg::solve(&a, &b).to_vec::<f32>(), vec![2.0, 3.0]);
/// ```
pub fn solve(a: &Tensor, b: &Tensor) -> Tensor {
    trace::op("linalg_solve", [a, b], Vec::new, || {
        check_matrices("linalg.solve", a, true);
        if is_vector_rhs(a, b) {
            return solve(a, &b.unsqueeze(-1)).squeeze_dim(-1);
        }
        let (af, bf) = broadcast_pair("linalg.solve", a, b);
        let (outs, info) = run(&af, Some(&bf), Decomposition::Solve, &[bf.shape().to_vec()]);
        check_info("linalg.solve", &af, &info, |k| {
            format!(
                "the solver failed because the input matrix is singular (U[{}, {}] of its LU \
                 factorization is zero)",
                k - 1,
                k - 1
            )
        });
        let x = outs.into_iter().next().expect("solve returns X");
        let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
        Tensor::record(x.detach(), "LinalgSolveBackward0", &[a, b], || {
            let (a, x) = (a.saved(), x.saved());
            move |g: &Tensor, _: &[bool]| {
                let gb = solve(&mt(&a), g);
                let ga = -&gb.matmul(&mt(&x));
                vec![Some(ga.sum_to(&a_shape)), Some(gb.sum_to(&b_shape))]
            }
        })
    })
}

/// The solution `X` of the triangular system `A X = B` (`left`) or
/// `X A = B` (`torch.linalg.solve_triangular(A, B, upper=, left=,
/// unitriangular=)`): only `A`'s `upper` (or lower) triangle is read, its
/// diagonal taken as ones when `unitriangular`; batch dims broadcast.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let l = Tensor::from_vec(vec![2.0f64, 0.0, 1.0, 4.0], &[2, 2]);
/// let b = Tensor::from_vec(vec![2.0f64, 9.0], &[2, 1]);
/// let x = linalg::solve_triangular(&l, &b, false, true, false);
/// assert_eq!(x.to_vec::<f64>(), vec![1.0, 2.0]);
/// ```
pub fn solve_triangular(
    a: &Tensor,
    b: &Tensor,
    upper: bool,
    left: bool,
    unitriangular: bool,
) -> Tensor {
    let attrs = || {
        vec![
            ("upper", Attr::Int(upper as i64)),
            ("left", Attr::Int(left as i64)),
            ("unitriangular", Attr::Int(unitriangular as i64)),
        ]
    };
    trace::op("linalg_solve_triangular", [a, b], attrs, || {
        let op = "linalg.solve_triangular";
        check_matrices(op, a, true);
        assert!(
            b.ndim() >= 2,
            "{op}: B must be a batch of matrices, got shape {:?}",
            b.shape()
        );
        check_rhs(op, a, b, left);
        let (af, bf) = broadcast_batch(op, a, b);
        // A transpose of a dense matrix (a backward's `Lᵀ`) goes to the
        // kernel as it is stored, with the transpose as a flag, not copied.
        let stored = mt(&af);
        let transpose = !af.is_contiguous() && stored.is_contiguous();
        let stored = if transpose { stored } else { af };
        let system = Triangular {
            upper: upper != transpose,
            unit: unitriangular,
            left,
            transpose,
        };
        let d = Decomposition::SolveTriangular { system };
        let (outs, _) = run(&stored, Some(&bf), d, &[bf.shape().to_vec()]);
        let x = outs.into_iter().next().expect("solve_triangular returns X");
        let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
        Tensor::record(
            x.detach(),
            "LinalgSolveTriangularBackward0",
            &[a, b],
            || {
                let (a, x) = (a.saved(), x.saved());
                move |g: &Tensor, _: &[bool]| {
                    // X = A⁻¹ B: gB = A⁻ᵀ g, gA = -gB Xᵀ; X = B A⁻¹:
                    // gB = g A⁻ᵀ, gA = -Xᵀ gB.
                    let gb = solve_triangular(&mt(&a), g, !upper, left, unitriangular);
                    let ga = if left {
                        -&gb.matmul(&mt(&x))
                    } else {
                        -&mt(&x).matmul(&gb)
                    };
                    // Only the triangle that was read has a gradient.
                    let k = if unitriangular { 1 } else { 0 };
                    let ga = if upper { ga.triu(k) } else { ga.tril(-k) };
                    vec![Some(ga.sum_to(&a_shape)), Some(gb.sum_to(&b_shape))]
                }
            },
        )
    })
}

/// The inverse of each square matrix (`torch.linalg.inv`): `solve(A, I)`,
/// so it panics on an exactly singular matrix and its gradient is
/// `-A⁻ᵀ g A⁻ᵀ`.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![2.0f32, 0.0, 0.0, 4.0], &[2, 2]);
/// assert_eq!(linalg::inv(&a).to_vec::<f32>(), vec![0.5, 0.0, 0.0, 0.25]);
/// ```
pub fn inv(a: &Tensor) -> Tensor {
    trace::op("linalg_inv", [a], Vec::new, || {
        check_matrices("linalg.inv", a, true);
        let eye = eye_like(a.size(-1), a).expand(a.shape());
        solve(a, &eye)
    })
}

/// `(sign, log|det A|)` of each square matrix (`torch.linalg.slogdet`),
/// by LU with partial pivoting: `(0, -inf)` for an exactly singular one.
/// `logabsdet`'s gradient is `g A⁻ᵀ` (`sign` has none).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![0.0f64, 2.0, 3.0, 1.0], &[2, 2]); // det -6
/// let (sign, logabs) = linalg::slogdet(&a);
/// assert_eq!(sign.item::<f64>(), -1.0);
/// assert!((logabs.item::<f64>() - 6f64.ln()).abs() < 1e-15);
/// ```
pub fn slogdet(a: &Tensor) -> (Tensor, Tensor) {
    trace::op("linalg_slogdet", [a], Vec::new, || {
        check_matrices("linalg.slogdet", a, true);
        let batch = with_tail(a, &[]);
        let (outs, _) = run(a, None, Decomposition::Slogdet, &[batch.clone(), batch]);
        let (sign, logabs) = (outs[0].clone(), outs[1].clone());
        let logabs = Tensor::record(logabs.detach(), "LinalgSlogdetBackward0", &[a], || {
            let a = a.saved();
            move |g: &Tensor, _: &[bool]| {
                let g = g.unsqueeze(-1).unsqueeze(-1);
                vec![Some(&g * &mt(&inv(&a)))]
            }
        });
        (sign, logabs)
    })
}

/// The determinant of each square matrix (`torch.linalg.det`):
/// `sign · exp(logabsdet)` from [`slogdet`]. Its gradient is the cofactor
/// matrix, `g det(A) A⁻ᵀ` while every matrix of the batch is invertible;
/// when one is exactly singular, the batch's cofactors come from the SVD
/// `A = U S Vᴴ` as `det(U) det(Vᴴ) U diag(Πⱼ≠ᵢ sⱼ) Vᴴ`, finite everywhere
/// (PyTorch switches the same way).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]);
/// assert!((linalg::det(&a).item::<f64>() + 2.0).abs() < 1e-14);
/// // At a singular matrix the gradient is its cofactor matrix.
/// let s = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]).requires_grad_(true);
/// linalg::det(&s).backward();
/// let g = s.grad().unwrap().to_vec::<f64>();
/// assert!(g.iter().zip([4.0, -2.0, -2.0, 1.0]).all(|(x, y)| (x - y).abs() < 1e-12));
/// ```
pub fn det(a: &Tensor) -> Tensor {
    trace::op("linalg_det", [a], Vec::new, || {
        let value = crate::no_grad(|| {
            let (sign, logabs) = slogdet(a);
            &sign * &logabs.exp()
        });
        // Saved while the node is made, so under `create_graph` the
        // determinant in the gradient is this node's output.
        let det = value.view_with(value.layout().clone());
        Tensor::record(value, "LinalgDetBackward0", &[a], move || {
            let saved = (a.saved(), det.saved());
            move |g: &Tensor, _: &[bool]| {
                let (a, det) = &saved;
                let cofactors = match det.eq_scalar(0.0).any().item::<bool>() {
                    true => cofactors_by_svd(a),
                    false => &det.unsqueeze(-1).unsqueeze(-1) * &mt(&inv(a)),
                };
                vec![Some(&g.unsqueeze(-1).unsqueeze(-1) * &cofactors)]
            }
        })
    })
}

/// The cofactor matrix of each square matrix through its SVD, singular
/// ones included: `det(U) det(Vᴴ) U diag(Πⱼ≠ᵢ sⱼ) Vᴴ`, the products of
/// the other singular values taken as prefix times suffix products (no
/// division by a zero singular value).
fn cofactors_by_svd(a: &Tensor) -> Tensor {
    let n = a.size(-1);
    if n == 0 {
        return a.clone();
    }
    let (u, s, vh) = super::svd(a, false);
    let orientation = &slogdet(&u).0 * &slogdet(&vh).0;
    let one = Tensor::ones_like(&s.narrow(-1, 0, 1));
    let before = Tensor::cat(&[&one, &s.narrow(-1, 0, n - 1)], -1).cumprod(-1);
    let after = Tensor::cat(&[&s.narrow(-1, 1, n - 1), &one], -1)
        .flip(&[-1])
        .cumprod(-1)
        .flip(&[-1]);
    let others = &before * &after;
    let scaled = &(&u * &others.unsqueeze(-2)).matmul(&vh);
    scaled * &orientation.unsqueeze(-1).unsqueeze(-1)
}

/// `log det A` (`torch.logdet`): NaN where the determinant is negative,
/// `-inf` where it is zero.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![2.0f64, 0.0, 0.0, 3.0], &[2, 2]);
/// assert!((linalg::logdet(&a).item::<f64>() - 6f64.ln()).abs() < 1e-15);
/// ```
pub fn logdet(a: &Tensor) -> Tensor {
    trace::op("logdet", [a], Vec::new, || {
        let (sign, logabs) = slogdet(a);
        // sign < 0 → NaN; sign == 0 leaves logabs at -inf.
        let nan = sign.lt_scalar(0.0);
        Tensor::where_(&nan, &Tensor::full_like(&logabs, f64::NAN), &logabs)
    })
}
