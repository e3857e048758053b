//! Factorizations: `linalg.cholesky`, `linalg.qr`, `linalg.eigh` and
//! `linalg.svd` (with `cholesky_ex`, `eigvalsh`, `svdvals`), each with
//! PyTorch's gradient written as tensor ops.

use super::{
    check_info, check_matrices, diag_embed, eye_like, mt, run, solve_triangular, with_tail,
};
use crate::Tensor;
use crate::trace::{self, Attr};
use tapir_kernels::Decomposition;

/// `L` with `A = L Lᵀ` for each symmetric positive-definite matrix, reading
/// its lower triangle (`torch.linalg.cholesky(A, upper=False)`); `U = Lᵀ`
/// with `A = Uᵀ U` when `upper`. Panics, as PyTorch, naming the first
/// leading minor that is not positive definite. Gradient: PyTorch's
/// `L⁻ᵀ Φ(Lᵀ gL) L⁻¹`, symmetric.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![4.0f32, 2.0, 2.0, 5.0], &[2, 2]);
/// assert_eq!(linalg::cholesky(&a, false).to_vec::<f32>(), vec![2.0, 0.0, 1.0, 2.0]);
/// ```
pub fn cholesky(a: &Tensor, upper: bool) -> Tensor {
    let attrs = || vec![("upper", Attr::Int(upper as i64))];
    trace::op("linalg_cholesky", [a], attrs, || {
        let (l, info) = cholesky_ex(a, upper);
        let info: Vec<i64> = info.to_vec();
        check_info("linalg.cholesky", a, &info, |k| {
            format!(
                "the factorization could not be completed because the input is not \
                 positive-definite (the leading minor of order {k} is not positive-definite)"
            )
        });
        l
    })
}

/// [`cholesky`] without the check (`torch.linalg.cholesky_ex`): the factor
/// and an int64 `info` per matrix, 0 where the factorization succeeded and
/// else the order of the first leading minor that is not positive definite
/// (that matrix's factor is then zeros).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 1.0], &[2, 2]);
/// let (_, info) = linalg::cholesky_ex(&a, false);
/// assert_eq!(info.to_vec::<i64>(), vec![2]);
/// ```
pub fn cholesky_ex(a: &Tensor, upper: bool) -> (Tensor, Tensor) {
    let attrs = || vec![("upper", Attr::Int(upper as i64))];
    trace::op("linalg_cholesky_ex", [a], attrs, || {
        check_matrices("linalg.cholesky", a, true);
        let (outs, info) = run(
            a,
            None,
            Decomposition::Cholesky { upper },
            &[a.shape().to_vec()],
        );
        let batch = with_tail(a, &[]);
        let info = Tensor::from_vec(info, &batch);
        let l = outs.into_iter().next().expect("cholesky returns L");
        let l = Tensor::record(l.detach(), "LinalgCholeskyExBackward0", &[a], || {
            let l = l.saved();
            move |g: &Tensor, _: &[bool]| vec![Some(cholesky_backward(g, &l, upper))]
        });
        (l, info)
    })
}

/// PyTorch's `cholesky_backward`: with `L` lower, `gA = L⁻ᵀ Φ(Lᵀ gL) L⁻¹`
/// where `Φ(X) = ½(X + Xᵀ - diag X)` of the lower triangle.
fn cholesky_backward(g: &Tensor, l: &Tensor, upper: bool) -> Tensor {
    let (l, g) = if upper {
        (mt(l), mt(g))
    } else {
        (l.clone(), g.clone())
    };
    let ga = mt(&l).matmul(&g).tril(0);
    let ga = &(&ga + &mt(&ga.tril(-1))) * 0.5;
    let ga = solve_triangular(&mt(&l), &ga, true, true, false);
    solve_triangular(&l, &ga, false, false, false)
}

/// What [`qr`] returns (`torch.linalg.qr`'s `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QrMode {
    /// `Q` `m x k`, `R` `k x n`, `k = min(m, n)` (the default).
    #[default]
    Reduced,
    /// `Q` `m x m`, `R` `m x n`.
    Complete,
    /// `R` only (`k x n`); `Q` is an empty tensor and there is no gradient.
    R,
}

impl QrMode {
    /// The mode a recorded graph stored as its discriminant.
    pub(crate) fn from_code(code: i64) -> QrMode {
        match code {
            1 => QrMode::Complete,
            2 => QrMode::R,
            _ => QrMode::Reduced,
        }
    }
}

/// The QR decomposition `A = Q R` of each matrix by Householder
/// reflections (`torch.linalg.qr`), with `Q` orthonormal and `R` upper
/// triangular; the signs are LAPACK's (`R`'s diagonal may be negative).
/// Differentiable in `Reduced` mode, and in `Complete` when `m <= n`
/// (PyTorch's rule).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![3.0f64, 1.0, 4.0, 2.0, 0.0, 5.0], &[3, 2]);
/// let (q, r) = linalg::qr(&a, linalg::QrMode::Reduced);
/// assert_eq!((q.shape(), r.shape()), (&[3, 2][..], &[2, 2][..]));
/// assert!(q.matmul(&r).allclose(&a, 1e-12, 1e-12));
/// ```
pub fn qr(a: &Tensor, mode: QrMode) -> (Tensor, Tensor) {
    let attrs = || vec![("mode", Attr::Int(mode as i64))];
    trace::op("linalg_qr", [a], attrs, || {
        check_matrices("linalg.qr", a, false);
        let (m, n) = (a.size(-2), a.size(-1));
        let k = m.min(n);
        let complete = mode == QrMode::Complete;
        let (qc, rr) = if complete { (m, m) } else { (k, k) };
        let shapes = [with_tail(a, &[m, qc]), with_tail(a, &[rr, n])];
        let (outs, _) = run(a, None, Decomposition::Qr { complete }, &shapes);
        let (q, r) = (outs[0].clone(), outs[1].clone());
        if mode == QrMode::R {
            let empty = Tensor::zeros_on(&[0], a.dtype(), a.device());
            return (empty, r.detach());
        }
        let outs = vec![q.detach(), r.detach()];
        let differentiable = !complete || m <= n;
        let mut outs = Tensor::record_many(outs, "LinalgQrBackward0", &[a], || {
            let (q, r) = (q.saved(), r.saved());
            move |g: &[Option<Tensor>], _: &[bool]| {
                assert!(
                    differentiable,
                    "linalg.qr: the QR decomposition is not differentiable when \
                     mode='complete' and nrows > ncols"
                );
                vec![Some(qr_backward(g[0].as_ref(), g[1].as_ref(), &q, &r))]
            }
        });
        let r = outs.pop().expect("qr returns R");
        (outs.pop().expect("qr returns Q"), r)
    })
}

/// PyTorch's `linalg_qr_backward` (real case).
fn qr_backward(gq: Option<&Tensor>, gr: Option<&Tensor>, q: &Tensor, r: &Tensor) -> Tensor {
    let (m, n) = (q.size(-2), r.size(-1));
    let k = q.size(-1);
    // M = gR Rᵀ - Qᵀ gQ, k x k.
    let mut m_ = match gr {
        Some(gr) => gr.matmul(&mt(r)),
        None => Tensor::zeros_on(&with_tail(q, &[k, k]), q.dtype(), q.device()),
    };
    if let Some(gq) = gq {
        m_ = &m_ - &mt(q).matmul(gq);
    }
    if m >= n {
        // gA = (gQ + Q S) R⁻ᵀ with S = X + Xᵀ - diag(X), X = triu(M)
        // (PyTorch's `syminvadj`).
        let upper = m_.triu(0);
        let sym = &(&upper + &mt(&upper)) - &diag_embed(&upper.diagonal(0, -2, -1));
        let mut ga = q.matmul(&sym);
        if let Some(gq) = gq {
            ga = &ga + gq;
        }
        // X Rᵀ = gA, Rᵀ lower triangular.
        return solve_triangular(&mt(r), &ga, false, false, false);
    }
    // Wide: A = Q [R1 R2] with R1 m x m.
    let x = -&m_;
    let skew = (&x - &mt(&x)).tril(0);
    let ga = q.matmul(&skew);
    let r1 = r.narrow(-1, 0, m);
    let ga = solve_triangular(&mt(&r1), &ga, false, false, false);
    let mut pad_shape = ga.shape().to_vec();
    *pad_shape.last_mut().expect("a matrix") = n - m;
    let pad = Tensor::zeros_on(&pad_shape, ga.dtype(), ga.device());
    let mut ga = Tensor::cat(&[&ga, &pad], -1);
    if let Some(gr) = gr {
        ga = &ga + &q.matmul(gr);
    }
    ga
}

/// Eigenvalues (ascending) and orthonormal eigenvectors (the columns of
/// `V`) of each symmetric matrix, reading its lower triangle
/// (`torch.linalg.eigh(A, UPLO='L')`): `A = V diag(L) Vᵀ`. Eigenvectors
/// are unique only up to sign (and within repeated eigenvalues), so a loss
/// should not depend on their signs; the gradient is PyTorch's and is
/// infinite where eigenvalues repeat.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![2.0f64, 1.0, 1.0, 2.0], &[2, 2]);
/// let (l, v) = linalg::eigh(&a);
/// assert!(l.allclose(&Tensor::from_vec(vec![1.0f64, 3.0], &[2]), 1e-12, 1e-12));
/// assert!(v.matmul(&v.transpose(-2, -1)).allclose(&Tensor::eye(2).to_dtype(tapir_runtime::DType::F64), 1e-12, 1e-12));
/// ```
pub fn eigh(a: &Tensor) -> (Tensor, Tensor) {
    trace::op("linalg_eigh", [a], Vec::new, || eigh_impl("linalg.eigh", a))
}

fn eigh_impl(op: &str, a: &Tensor) -> (Tensor, Tensor) {
    check_matrices(op, a, true);
    let n = a.size(-1);
    let d = Decomposition::Eigh {
        upper: false,
        vectors: true,
    };
    let (outs, info) = run(a, None, d, &[with_tail(a, &[n]), a.shape().to_vec()]);
    check_info(op, a, &info, |_| {
        "the algorithm failed to converge".to_string()
    });
    let recorded = vec![outs[0].detach(), outs[1].detach()];
    let mut outs = Tensor::record_many(recorded, "LinalgEighBackward0", &[a], || {
        let (l, v) = (outs[0].saved(), outs[1].saved());
        move |g: &[Option<Tensor>], _: &[bool]| {
            vec![Some(eigh_backward(g[0].as_ref(), g[1].as_ref(), &l, &v))]
        }
    });
    let v = outs.pop().expect("eigh returns V");
    (outs.pop().expect("eigh returns L"), v)
}

/// PyTorch's `linalg_eig_backward` for a symmetric matrix.
fn eigh_backward(gl: Option<&Tensor>, gv: Option<&Tensor>, l: &Tensor, v: &Tensor) -> Tensor {
    let Some(gv) = gv else {
        let gl = gl.expect("eigh's backward runs with some gradient");
        return (v * &gl.unsqueeze(-2)).matmul(&mt(v));
    };
    let vtgv = mt(v).matmul(gv);
    let skew = &(&vtgv - &mt(&vtgv)) * 0.5;
    // E_ij = L_j - L_i, with ones on the diagonal.
    let e = &(&l.unsqueeze(-2) - &l.unsqueeze(-1)) + &eye_like(l.size(-1), l);
    let mut ga = &skew / &e;
    ga = &ga - &diag_embed(&ga.diagonal(0, -2, -1));
    if let Some(gl) = gl {
        ga = &ga + &diag_embed(gl);
    }
    v.matmul(&ga).matmul(&mt(v))
}

/// The eigenvalues of each symmetric matrix, ascending
/// (`torch.linalg.eigvalsh`); differentiable (the eigenvectors are then
/// computed too), gradient `V diag(g) Vᵀ`.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![2.0f32, 0.0, 0.0, -1.0], &[2, 2]);
/// assert_eq!(linalg::eigvalsh(&a).to_vec::<f32>(), vec![-1.0, 2.0]);
/// ```
pub fn eigvalsh(a: &Tensor) -> Tensor {
    trace::op("linalg_eigvalsh", [a], Vec::new, || {
        if Tensor::any_needs_grad(&[a]) {
            return eigh_impl("linalg.eigvalsh", a).0;
        }
        check_matrices("linalg.eigvalsh", a, true);
        let d = Decomposition::Eigh {
            upper: false,
            vectors: false,
        };
        let shapes = [with_tail(a, &[a.size(-1)]), vec![0]];
        let (outs, info) = run(a, None, d, &shapes);
        check_info("linalg.eigvalsh", a, &info, |_| {
            "the algorithm failed to converge".into()
        });
        outs[0].clone()
    })
}

/// The singular value decomposition `A = U diag(S) Vh` of each matrix
/// (`torch.linalg.svd(A, full_matrices)`): `S` descending and
/// non-negative; `U` `m x m` and `Vh` `n x n` when `full_matrices`, else
/// `m x k` and `k x n`. Singular vectors are unique only up to sign; the
/// gradient is PyTorch's (infinite where singular values repeat).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![3.0f64, 0.0, 0.0, -4.0, 0.0, 0.0], &[3, 2]);
/// let (u, s, vh) = linalg::svd(&a, false);
/// assert_eq!(s.to_vec::<f64>(), vec![4.0, 3.0]);
/// assert!(u.matmul(&(&s.unsqueeze(-1) * &vh)).allclose(&a, 1e-12, 1e-12));
/// ```
pub fn svd(a: &Tensor, full_matrices: bool) -> (Tensor, Tensor, Tensor) {
    let attrs = || vec![("full_matrices", Attr::Int(full_matrices as i64))];
    trace::op("linalg_svd", [a], attrs, || {
        svd_impl("linalg.svd", a, full_matrices)
    })
}

fn svd_impl(op: &str, a: &Tensor, full: bool) -> (Tensor, Tensor, Tensor) {
    check_matrices(op, a, false);
    let (m, n) = (a.size(-2), a.size(-1));
    let k = m.min(n);
    let (uc, vr) = if full { (m, n) } else { (k, k) };
    let shapes = [
        with_tail(a, &[m, uc]),
        with_tail(a, &[k]),
        with_tail(a, &[vr, n]),
    ];
    let d = Decomposition::Svd {
        full,
        vectors: true,
    };
    let (outs, info) = run(a, None, d, &shapes);
    check_info(op, a, &info, |_| {
        "the algorithm failed to converge".to_string()
    });
    let recorded: Vec<Tensor> = outs.iter().map(Tensor::detach).collect();
    let mut outs = Tensor::record_many(recorded, "LinalgSvdBackward0", &[a], || {
        let (u, s, vh) = (outs[0].saved(), outs[1].saved(), outs[2].saved());
        move |g: &[Option<Tensor>], _: &[bool]| {
            // A full factorization's extra columns carry no information.
            let narrow = |t: Option<&Tensor>, dim: isize| t.map(|t| t.narrow(dim, 0, k));
            let (u, vh) = (u.narrow(-1, 0, k), vh.narrow(-2, 0, k));
            let (gu, gvh) = (narrow(g[0].as_ref(), -1), narrow(g[2].as_ref(), -2));
            vec![Some(svd_backward(
                gu.as_ref(),
                g[1].as_ref(),
                gvh.as_ref(),
                (&u, &s, &vh),
            ))]
        }
    });
    let vh = outs.pop().expect("svd returns Vh");
    let s = outs.pop().expect("svd returns S");
    (outs.pop().expect("svd returns U"), s, vh)
}

/// PyTorch's `svd_backward` (real case), on the thin factors.
fn svd_backward(
    gu: Option<&Tensor>,
    gs: Option<&Tensor>,
    gvh: Option<&Tensor>,
    (u, s, vh): (&Tensor, &Tensor, &Tensor),
) -> Tensor {
    let (m, n) = (u.size(-2), vh.size(-1));
    if gu.is_none() && gvh.is_none() {
        let gs = gs.expect("svd's backward runs with some gradient");
        return u.matmul(&(&gs.unsqueeze(-1) * vh));
    }
    let skew = |x: Tensor| &x - &mt(&x);
    let utgu = gu.map(|gu| skew(mt(u).matmul(gu)));
    let vtgv = gvh.map(|gvh| skew(vh.matmul(&mt(gvh))));
    let s2 = s.square();
    // E_ij = S_j² - S_i², with ones on the diagonal.
    let e = &(&s2.unsqueeze(-2) - &s2.unsqueeze(-1)) + &eye_like(s.size(-1), s);
    let mut ga = match (&utgu, &vtgv) {
        (Some(a), Some(b)) => &(&(a * &s.unsqueeze(-2)) + &(&s.unsqueeze(-1) * b)) / &e,
        (Some(a), None) => &(a / &e) * &s.unsqueeze(-2),
        (None, Some(b)) => &s.unsqueeze(-1) * &(b / &e),
        (None, None) => unreachable!("handled above"),
    };
    if let Some(gs) = gs {
        ga = &ga + &diag_embed(gs);
    }
    if let (true, Some(gu)) = (m > n, gu) {
        let mut ga = u.matmul(&ga);
        let gu_sinv = gu / &s.unsqueeze(-2);
        ga = &(&ga + &gu_sinv) - &u.matmul(&mt(u).matmul(&gu_sinv));
        return ga.matmul(vh);
    }
    if let (true, Some(gvh)) = (m < n, gvh) {
        let mut ga = ga.matmul(vh);
        let sinv_gvh = gvh / &s.unsqueeze(-1);
        ga = &(&ga + &sinv_gvh) - &sinv_gvh.matmul(&mt(vh)).matmul(vh);
        return u.matmul(&ga);
    }
    u.matmul(&ga).matmul(vh)
}

/// The singular values of each matrix, descending (`torch.linalg.svdvals`);
/// differentiable (the singular vectors are then computed too), gradient
/// `U diag(g) Vh`.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![0.0f32, 2.0, -5.0, 0.0], &[2, 2]);
/// assert_eq!(linalg::svdvals(&a).to_vec::<f32>(), vec![5.0, 2.0]);
/// ```
pub fn svdvals(a: &Tensor) -> Tensor {
    trace::op("linalg_svdvals", [a], Vec::new, || {
        if Tensor::any_needs_grad(&[a]) {
            return svd_impl("linalg.svdvals", a, false).1;
        }
        check_matrices("linalg.svdvals", a, false);
        let k = a.size(-2).min(a.size(-1));
        let d = Decomposition::Svd {
            full: false,
            vectors: false,
        };
        let (outs, info) = run(a, None, d, &[vec![0], with_tail(a, &[k]), vec![0]]);
        check_info("linalg.svdvals", a, &info, |_| {
            "the algorithm failed to converge".into()
        });
        outs[1].clone()
    })
}
