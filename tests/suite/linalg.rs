//! `tapir::linalg` beyond the PyTorch goldens (`linalg_*` cases in
//! `tests/goldens/core.json`, which the golden replay and the f64
//! gradchecks walk): errors in PyTorch's words, `cholesky_ex`'s info,
//! batches split across threads against one matrix at a time, the
//! defining identities at sizes the goldens do not reach, (replay under
//! `compile` is in `tests/compile/breaks.rs`).

use crate::common::panic_message;
use tapir::linalg::{self, MatrixNorm, QrMode};
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

fn mt(x: &Tensor) -> Tensor {
    x.transpose(-2, -1)
}

fn eye(n: usize) -> Tensor {
    Tensor::eye(n).to_dtype(DType::F64)
}

/// A batch of symmetric positive-definite matrices.
fn spd(batch: usize, n: usize, seed: u64) -> Tensor {
    let x = rnd(&[batch, n, n], seed);
    &x.matmul(&mt(&x)) + &(&eye(n) * n as f64)
}

#[test]
fn errors_name_the_op_the_matrix_and_the_reason() {
    let not_pd = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 1.0], &[2, 2]);
    assert_eq!(
        panic_message(|| {
            linalg::cholesky(&not_pd, false);
        }),
        "linalg.cholesky: the factorization could not be completed because the input is not \
         positive-definite (the leading minor of order 2 is not positive-definite) (input shape \
         [2, 2])"
    );
    let batch = Tensor::stack(&[&eye(2), &not_pd], 0);
    let m = panic_message(|| {
        linalg::cholesky(&batch, false);
    });
    assert!(m.starts_with("linalg.cholesky (batch element 1): "), "{m}");
    let singular = Tensor::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]);
    let m = panic_message(|| {
        linalg::inv(&singular);
    });
    assert!(
        m.starts_with("linalg.solve: the solver failed because the input matrix is singular"),
        "{m}"
    );
    let m = panic_message(|| {
        linalg::det(&Tensor::zeros(&[2, 3]).to_dtype(DType::F64));
    });
    assert_eq!(
        m,
        "linalg.slogdet: expects square matrices, got shape [2, 3] (2 x 3)"
    );
    let m = panic_message(|| {
        linalg::qr(&Tensor::zeros(&[4]), QrMode::Reduced);
    });
    assert!(
        m.contains("linalg.qr: expects a matrix") && m.contains("[4]"),
        "{m}"
    );
    let m = panic_message(|| {
        linalg::svd(&Tensor::zeros(&[2, 2]).to_dtype(DType::BF16), false);
    });
    assert!(
        m.starts_with("linalg.svd: expects a float32 or float64 tensor, got bfloat16"),
        "{m}"
    );
    let m = panic_message(|| {
        linalg::solve(&eye(3), &rnd(&[2, 4], 1));
    });
    assert!(
        m.contains("linalg.solve") && m.contains("[3, 3]") && m.contains("[2, 4]"),
        "{m}"
    );
}

#[test]
fn cholesky_ex_reports_instead_of_panicking() {
    let mut mats = vec![spd(1, 3, 1).squeeze_dim(0)];
    mats.push(&eye(3) * -1.0); // fails at the first minor
    mats.push(spd(1, 3, 2).squeeze_dim(0));
    let batch = Tensor::stack(&mats.iter().collect::<Vec<_>>(), 0);
    let (l, info) = linalg::cholesky_ex(&batch, false);
    assert_eq!(info.to_vec::<i64>(), vec![0, 1, 0]);
    assert_eq!(info.dtype(), DType::I64);
    let good = linalg::cholesky(&mats[2], false);
    assert!(l.select(0, 2).allclose(&good, 0.0, 0.0));
    assert!(l.select(0, 1).to_vec::<f64>().iter().all(|&x| x == 0.0));
}

#[test]
fn batches_on_two_threads_equal_each_matrix_alone() {
    tapir::set_num_threads(2);
    let a = spd(12, 6, 3);
    let b = rnd(&[12, 6, 2], 4);
    let l = linalg::cholesky(&a, false);
    let x = linalg::solve(&a, &b);
    let (w, v) = linalg::eigh(&a);
    let (u, s, vh) = linalg::svd(&b, false);
    for i in [0, 5, 11] {
        let ai = a.select(0, i);
        assert!(l.select(0, i).equal(&linalg::cholesky(&ai, false)));
        assert!(x.select(0, i).equal(&linalg::solve(&ai, &b.select(0, i))));
        let (wi, vi) = linalg::eigh(&ai);
        assert!(w.select(0, i).equal(&wi) && v.select(0, i).equal(&vi));
        let (ui, si, vhi) = linalg::svd(&b.select(0, i), false);
        assert!(u.select(0, i).equal(&ui) && s.select(0, i).equal(&si));
        assert!(vh.select(0, i).equal(&vhi));
    }
}

#[test]
fn factors_rebuild_larger_matrices_in_f32_and_f64() {
    for dtype in [DType::F32, DType::F64] {
        let tol = if dtype == DType::F64 { 1e-10 } else { 2e-3 };
        let a = spd(2, 40, 5).to_dtype(dtype);
        let l = linalg::cholesky(&a, false);
        assert!(l.matmul(&mt(&l)).allclose(&a, tol, tol));
        let (w, v) = linalg::eigh(&a);
        let rebuilt = (&v * &w.unsqueeze(-2)).matmul(&mt(&v));
        assert!(rebuilt.allclose(&a, tol, tol), "{dtype}");
        let g = rnd(&[2, 50, 30], 6).to_dtype(dtype);
        let (q, r) = linalg::qr(&g, QrMode::Reduced);
        assert!(q.matmul(&r).allclose(&g, tol, tol));
        let eye30 = eye(30).to_dtype(dtype).expand(&[2, 30, 30]);
        assert!(mt(&q).matmul(&q).allclose(&eye30, tol, tol));
        let (_, r_only) = linalg::qr(&g, QrMode::R);
        assert!(r_only.allclose(&r, 0.0, 0.0));
        let (u, s, vh) = linalg::svd(&g, true);
        assert_eq!(
            (u.shape(), vh.shape()),
            (&[2, 50, 50][..], &[2, 30, 30][..])
        );
        let thin = u.narrow(-1, 0, 30).matmul(&(&s.unsqueeze(-1) * &vh));
        assert!(thin.allclose(&g, tol, tol));
        assert!(linalg::svdvals(&g).allclose(&s, tol, tol));
        let inv = linalg::inv(&a);
        let eye40 = eye(40).to_dtype(dtype).expand(&[2, 40, 40]);
        assert!(inv.matmul(&a).allclose(&eye40, tol, tol));
        let (sign, logabs) = linalg::slogdet(&a);
        assert!(sign.to_vec::<f64>().iter().all(|&s| s == 1.0));
        let from_l = l.diagonal(0, -2, -1).log().sum_dim(-1, false) * 2.0;
        assert!(logabs.allclose(&from_l, tol, tol));
    }
}

#[test]
fn rank_pinv_and_norms_follow_their_definitions() {
    let u = rnd(&[5, 2], 7);
    let low_rank = u.matmul(&mt(&rnd(&[4, 2], 8))); // 5 x 4, rank 2
    assert_eq!(linalg::matrix_rank(&low_rank).item::<i64>(), 2);
    assert_eq!(
        linalg::matrix_rank(&rnd(&[3, 5, 4], 9)).to_vec::<i64>(),
        vec![4; 3]
    );
    let p = linalg::pinv(&low_rank);
    assert!(
        low_rank
            .matmul(&p)
            .matmul(&low_rank)
            .allclose(&low_rank, 1e-10, 1e-10)
    );
    assert!(p.matmul(&low_rank).matmul(&p).allclose(&p, 1e-10, 1e-10));
    let a = rnd(&[3, 4], 10);
    let s = linalg::svdvals(&a).to_vec::<f64>();
    let norm = |o| linalg::matrix_norm(&a, o).item::<f64>();
    assert!((norm(MatrixNorm::Spectral) - s[0]).abs() < 1e-12);
    assert!((norm(MatrixNorm::MinSingular) - s[2]).abs() < 1e-12);
    assert!((norm(MatrixNorm::Nuclear) - s.iter().sum::<f64>()).abs() < 1e-12);
    let fro = s.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm(MatrixNorm::Frobenius) - fro).abs() < 1e-12);
}

/// The identity's pseudo-inverse has repeated singular values, where a
/// gradient through the SVD would be infinite; `pinv`'s own backward is
/// finite there and matches central differences.
#[test]
fn pinv_gradient_is_finite_at_repeated_singular_values() {
    let x = (&eye(3) * 2.0).requires_grad_(true);
    let w = rnd(&[3, 3], 11);
    let r = tapir::gradcheck(
        |t| (&linalg::pinv(&t[0]) * &w).sum(),
        &[x],
        1e-6,
        1e-6,
        1e-5,
    );
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn powers_and_chains_follow_their_definitions() {
    let a = rnd(&[2, 3, 3], 13);
    let i3 = eye(3).expand(&[2, 3, 3]);
    assert!(linalg::matrix_power(&a, 0).allclose(&i3, 0.0, 0.0));
    assert!(linalg::matrix_power(&a, 1).allclose(&a, 0.0, 0.0));
    let a5 = a.matmul(&a).matmul(&a).matmul(&a).matmul(&a);
    assert!(linalg::matrix_power(&a, 5).allclose(&a5, 1e-12, 1e-12));
    let inv2 = linalg::matrix_power(&a, -2).matmul(&a.matmul(&a));
    assert!(inv2.allclose(&i3, 1e-9, 1e-9));
    let chain = [
        rnd(&[4, 30], 14),
        rnd(&[30, 2], 15),
        rnd(&[2, 20], 16),
        rnd(&[20, 3], 17),
    ];
    let refs: Vec<&Tensor> = chain.iter().collect();
    let left_to_right = chain[0]
        .matmul(&chain[1])
        .matmul(&chain[2])
        .matmul(&chain[3]);
    assert!(linalg::multi_dot(&refs).allclose(&left_to_right, 1e-12, 1e-12));
    let m = panic_message(|| {
        linalg::multi_dot(&[&chain[0], &chain[2]]);
    });
    assert_eq!(
        m,
        "linalg.multi_dot: tensors 0 and 1 do not chain ([4, 30] @ [2, 20])"
    );
    let (b, l) = (rnd(&[3, 2], 18), linalg::cholesky(&spd(1, 3, 19), false));
    let x = linalg::cholesky_solve(&b, &l, false);
    let a = l.matmul(&mt(&l));
    assert!(a.matmul(&x).allclose(&b.expand(&[1, 3, 2]), 1e-12, 1e-12));
}

#[test]
fn lu_factors_solve_and_refuse_what_they_cannot_do() {
    let a = rnd(&[3, 5, 5], 20);
    let b = rnd(&[3, 5, 2], 21);
    let (lu, pivots) = linalg::lu_factor(&a);
    assert_eq!((pivots.dtype(), pivots.shape()), (DType::I64, &[3, 5][..]));
    let x = linalg::lu_solve(&lu, &pivots, &b);
    assert!(x.allclose(&linalg::solve(&a, &b), 1e-10, 1e-10));
    let (p, l, u) = linalg::lu(&rnd(&[4, 6], 22));
    assert_eq!(
        (p.shape(), l.shape(), u.shape()),
        (&[4, 4][..], &[4, 4][..], &[4, 6][..])
    );
    let m = panic_message(|| {
        linalg::lu_solve(&lu, &pivots.narrow(-1, 0, 4), &b);
    });
    assert!(
        m.starts_with("linalg.lu_solve: pivots must be int64 of shape [3, 5]"),
        "{m}"
    );
}

/// Tall and wide LU factors' gradients (PyTorch's goldens check single
/// matrices): batches, each factor alone, against finite differences.
#[test]
fn non_square_lu_gradients_match_finite_differences() {
    for shape in [[2, 5, 3], [2, 3, 5]] {
        let a = rnd(&shape, 23);
        let only_l = |x: &[Tensor]| linalg::lu(&x[0]).1;
        let only_u = |x: &[Tensor]| linalg::lu(&x[0]).2;
        let both = |x: &[Tensor]| {
            let (_, l, u) = linalg::lu(&x[0]);
            &(&l * &l).sum_dim(-1, true) * &u.sum_dim(-2, true).sum()
        };
        let packed = |x: &[Tensor]| linalg::lu_factor(&x[0]).0;
        for (what, f) in [
            ("L", &only_l as &dyn Fn(&[Tensor]) -> Tensor),
            ("U", &only_u),
            ("L and U", &both),
            ("lu_factor", &packed),
        ] {
            if let Err(e) = tapir::gradcheck(f, std::slice::from_ref(&a), 1e-6, 1e-6, 1e-5) {
                panic!("{shape:?}, {what}: {e}");
            }
        }
    }
}

/// Empty batches and 0 x 0 matrices give empty results, as PyTorch's.
#[test]
fn empty_batches_and_empty_matrices_give_empty_results() {
    for shape in [&[0, 3, 3][..], &[2, 0, 0][..]] {
        let a = Tensor::zeros(shape).to_dtype(DType::F64);
        assert_eq!(linalg::cholesky(&a, false).shape(), shape);
        assert_eq!(linalg::inv(&a).shape(), shape);
        assert_eq!(linalg::solve(&a, &a).shape(), shape);
        assert_eq!(linalg::eigh(&a).1.shape(), shape);
        assert_eq!(linalg::svd(&a, false).0.shape(), shape);
        assert_eq!(linalg::qr(&a, QrMode::Reduced).1.shape(), shape);
        assert_eq!(linalg::lu(&a).2.shape(), shape);
        assert_eq!(linalg::matrix_exp(&a).shape(), shape);
        assert_eq!(linalg::slogdet(&a).1.shape(), &shape[..1]);
    }
    // det of a 0 x 0 matrix is 1, as the empty product.
    let empty = Tensor::zeros(&[2, 0, 0]).to_dtype(DType::F64);
    assert_eq!(linalg::det(&empty).to_vec::<f64>(), vec![1.0, 1.0]);
}

/// lstsq_full on a batch with a rank-deficient member: ranks per matrix,
/// no residuals (PyTorch leaves them empty unless every matrix is tall and
/// of full rank), the minimum-norm solution; with full ranks, residuals
/// that are the squared norms of `A X - B`'s columns.
#[test]
fn lstsq_full_reports_ranks_and_residuals_as_pytorch() {
    let full = rnd(&[5, 3], 31);
    // The second matrix repeats its first column: rank 2.
    let deficient = Tensor::cat(&[&full.narrow(1, 0, 1), &full.narrow(1, 0, 2)], 1);
    let a = Tensor::stack(&[&full, &deficient], 0);
    let b = rnd(&[2, 5, 2], 32);
    let fit = linalg::lstsq_full(&a, &b);
    assert_eq!(fit.rank.to_vec::<i64>(), vec![3, 2]);
    assert_eq!(fit.residuals.shape(), &[0]);
    assert_eq!(fit.singular_values.shape(), &[2, 3]);
    // The minimum-norm solution splits the repeated column's weight evenly.
    let x = fit.solution.select(0, 1).to_vec::<f64>();
    assert!(
        (x[0] - x[2]).abs() < 1e-10 && (x[1] - x[3]).abs() < 1e-10,
        "{x:?}"
    );
    let fit = linalg::lstsq_full(&full, &b.select(0, 0));
    let r = &full.matmul(&fit.solution) - &b.select(0, 0);
    let want = r.square().sum_dims(&[0], false);
    assert!(fit.residuals.allclose(&want, 1e-12, 1e-12));
    assert!(!fit.singular_values.requires_grad());
}
