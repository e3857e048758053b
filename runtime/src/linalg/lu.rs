//! LU with partial pivoting: `linalg.lu`, `linalg.lu_factor` and
//! `linalg.lu_solve`, with PyTorch's gradient for square, tall and wide
//! matrices.

use super::{check_matrices, eye_like, mt, run, solve_triangular, with_tail};
use crate::trace;
use crate::{DType, Tensor};
use tapir_kernels::Decomposition;

/// `A = P L U` for each `m x n` matrix (`torch.linalg.lu`): `P` a
/// permutation matrix (`m x m`, `A`'s dtype), `L` unit lower-trapezoidal
/// `m x k` and `U` upper-trapezoidal `k x n`, `k = min(m, n)`, the pivots
/// chosen as LAPACK's `getrf` chooses them. The gradient flows through `L`
/// and `U` for square, tall and wide matrices, as PyTorch's (it assumes
/// `A`'s leading `k x k` block, after pivoting, is invertible).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![0.0f64, 1.0, 2.0, 3.0], &[2, 2]);
/// let (p, l, u) = linalg::lu(&a);
/// assert_eq!(p.to_vec::<f64>(), vec![0.0, 1.0, 1.0, 0.0]);
/// assert!(p.matmul(&l).matmul(&u).allclose(&a, 0.0, 0.0));
/// ```
pub fn lu(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    trace::op("linalg_lu", [a], Vec::new, || {
        let (p, l, u, _) = lu_recorded("linalg.lu", a);
        (p, l, u)
    })
}

/// The packed factorization and LAPACK's pivots (`torch.linalg.lu_factor`):
/// `LU` holds `L` below the diagonal (its unit diagonal implied) and `U` on
/// and above it; `pivots` (int64 here, int32 in PyTorch) are 1-based: step
/// `i` swapped rows `i` and `pivots[i] - 1`.
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![0.0f64, 1.0, 2.0, 3.0], &[2, 2]);
/// let (lu, pivots) = linalg::lu_factor(&a);
/// assert_eq!((lu.to_vec::<f64>(), pivots.to_vec::<i64>()), (vec![2.0, 3.0, 0.0, 1.0], vec![2, 2]));
/// ```
pub fn lu_factor(a: &Tensor) -> (Tensor, Tensor) {
    trace::op("linalg_lu_factor", [a], Vec::new, || {
        let (_, l, u, pivots) = lu_recorded("linalg.lu_factor", a);
        let (m, n) = (a.size(-2), a.size(-1));
        let zeros =
            |rows, cols| Tensor::zeros_on(&with_tail(a, &[rows, cols]), a.dtype(), a.device());
        let packed = if m >= n {
            let u = if m > n {
                Tensor::cat(&[&u, &zeros(m - n, n)], -2)
            } else {
                u
            };
            &l.tril(-1) + &u
        } else {
            let l = Tensor::cat(&[&l, &zeros(m, n - m)], -1);
            &l.tril(-1) + &u
        };
        (packed, pivots)
    })
}

/// `P`, `L`, `U` and the pivots, with the node for `L` and `U`.
fn lu_recorded(op: &str, a: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    check_matrices(op, a, false);
    let (m, n) = (a.size(-2), a.size(-1));
    let k = m.min(n);
    let shapes = [
        with_tail(a, &[m, k]),
        with_tail(a, &[k, n]),
        with_tail(a, &[m]),
        with_tail(a, &[k]),
    ];
    let (outs, _) = run(a, None, Decomposition::Lu, &shapes);
    let perm = outs[2].to_dtype(DType::I64);
    let pivots = outs[3].to_dtype(DType::I64);
    // P[.., r, i] = 1 where r = perm[i]: the identity's columns in perm order.
    let square = with_tail(a, &[m, m]);
    let eye = eye_like(m, a).expand(&square);
    let p = eye.gather(-1, &perm.unsqueeze(-2).expand(&square));
    let recorded = vec![outs[0].detach(), outs[1].detach()];
    let mut lu = Tensor::record_many(recorded, "LinalgLuBackward0", &[a], || {
        let (p, l, u) = (p.saved(), outs[0].saved(), outs[1].saved());
        move |g: &[Option<Tensor>], _: &[bool]| {
            vec![Some(lu_backward(
                g[0].as_ref(),
                g[1].as_ref(),
                (&p, &l, &u),
            ))]
        }
    });
    let u = lu.pop().expect("lu returns U");
    (p, lu.pop().expect("lu returns L"), u, pivots)
}

/// `A`'s gradient from `L`'s and `U`'s, with `Ā = Pᵀ A = L U`. Square:
/// `gĀ = L⁻ᵀ [tril₋₁(Lᵀ gL) + triu(gU Uᵀ)] U⁻ᵀ` (PyTorch's
/// `linalg_lu_backward`). Tall (`L = [L₁; L₂]`): the square formula on
/// `L₁, U`, where `L₂ = Ā₂ U⁻¹` adds `-L₂ᵀ gL₂` to `gU Uᵀ`, and
/// `gĀ₂ = gL₂ U⁻ᵀ`. Wide (`U = [U₁ U₂]`): the square formula on `L, U₁`,
/// where `U₂ = L⁻¹ Ā₂` adds `-gU₂ U₂ᵀ` to `Lᵀ gL`, and `gĀ₂ = L⁻ᵀ gU₂`.
/// Built from recorded ops, so it is differentiable again.
fn lu_backward(
    gl: Option<&Tensor>,
    gu: Option<&Tensor>,
    (p, l, u): (&Tensor, &Tensor, &Tensor),
) -> Tensor {
    let (m, n) = (l.size(-2), u.size(-1));
    let k = m.min(n);
    let sum = |a: Option<Tensor>, b: Option<Tensor>| match (a, b) {
        (Some(a), Some(b)) => Some(&a + &b),
        (a, b) => a.or(b),
    };
    // The square blocks the formula runs on, and the extra rows / columns.
    let (l1, u1) = (l.narrow(-2, 0, k), u.narrow(-1, 0, k));
    let (gl1, gl2) = (
        gl.map(|g| g.narrow(-2, 0, k)),
        gl.filter(|_| m > k).map(|g| g.narrow(-2, k, m - k)),
    );
    let (gu1, gu2) = (
        gu.map(|g| g.narrow(-1, 0, k)),
        gu.filter(|_| n > k).map(|g| g.narrow(-1, k, n - k)),
    );
    // Lᵀ gL's strictly lower part and gU Uᵀ's upper part, each with the
    // extra block's term.
    let from_l = sum(
        gl1.map(|g| mt(&l1).matmul(&g)),
        gu2.as_ref()
            .map(|g| -&g.matmul(&mt(&u.narrow(-1, k, n - k)))),
    );
    let from_u = sum(
        gu1.map(|g| g.matmul(&mt(&u1))),
        gl2.as_ref()
            .map(|g| -&mt(&l.narrow(-2, k, m - k)).matmul(g)),
    );
    let inner = sum(from_l.map(|t| t.tril(-1)), from_u.map(|t| t.triu(0)))
        .unwrap_or_else(|| Tensor::zeros_on(&with_tail(l, &[k, k]), l.dtype(), l.device()));
    // L₁⁻ᵀ · inner · U₁⁻ᵀ.
    let x = solve_triangular(&mt(&l1), &inner, true, true, true);
    let mut ga = solve_triangular(&mt(&u1), &x, false, false, false);
    let zeros = |rows, cols| Tensor::zeros_on(&with_tail(l, &[rows, cols]), l.dtype(), l.device());
    if m > k {
        let below = match &gl2 {
            Some(g) => solve_triangular(&mt(&u1), g, false, false, false),
            None => zeros(m - k, n),
        };
        ga = Tensor::cat(&[&ga, &below], -2);
    }
    if n > k {
        let right = match &gu2 {
            Some(g) => solve_triangular(&mt(&l1), g, true, true, true),
            None => zeros(m, n - k),
        };
        ga = Tensor::cat(&[&ga, &right], -1);
    }
    p.matmul(&ga)
}

/// The solution of `A X = B` from `A`'s [`lu_factor`]
/// (`torch.linalg.lu_solve(LU, pivots, B)`): the pivots' row swaps applied
/// to `B`, then two triangular solves, so the gradient reaches `LU`'s two
/// triangles and `B`. The pivots are read on the host (a GPU waits).
///
/// ```
/// use tapir_runtime::{Tensor, linalg};
/// let a = Tensor::from_vec(vec![0.0f64, 1.0, 2.0, 3.0], &[2, 2]);
/// let (lu, pivots) = linalg::lu_factor(&a);
/// let b = Tensor::from_vec(vec![1.0f64, 8.0], &[2, 1]);
/// assert_eq!(linalg::lu_solve(&lu, &pivots, &b).to_vec::<f64>(), vec![2.5, 1.0]);
/// ```
pub fn lu_solve(lu: &Tensor, pivots: &Tensor, b: &Tensor) -> Tensor {
    trace::op("linalg_lu_solve", [lu, pivots, b], Vec::new, || {
        let op = "linalg.lu_solve";
        check_matrices(op, lu, true);
        let n = lu.size(-1);
        let mut want = lu.shape()[..lu.ndim() - 2].to_vec();
        want.push(n);
        assert!(
            pivots.dtype() == DType::I64 && pivots.shape() == want.as_slice(),
            "{op}: pivots must be int64 of shape {want:?} for LU {:?}, got {} {:?}",
            lu.shape(),
            pivots.dtype(),
            pivots.shape()
        );
        assert!(
            b.ndim() >= 2 && b.size(-2) == n,
            "{op}: B {:?} does not match LU {:?} (B needs {n} rows)",
            b.shape(),
            lu.shape()
        );
        let batch = &lu.shape()[..lu.ndim() - 2];
        let mut b_shape = batch.to_vec();
        b_shape.extend_from_slice(&b.shape()[b.ndim() - 2..]);
        let b = b.expand(&b_shape);
        // The row order the swaps make, per matrix.
        let swaps = pivots.to_vec::<i64>();
        let mut perm = Vec::with_capacity(swaps.len());
        for piv in swaps.chunks(n.max(1)) {
            let mut order: Vec<i64> = (0..n as i64).collect();
            for (i, &s) in piv.iter().enumerate() {
                assert!(
                    (1..=n as i64).contains(&s),
                    "{op}: pivot {s} at step {i} is outside 1..={n}"
                );
                order.swap(i, (s - 1) as usize);
            }
            perm.extend(order);
        }
        let perm = Tensor::from_vec(perm, pivots.shape())
            .to(lu.device())
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        let rows = perm.unsqueeze(-1).expand(&b_shape);
        let permuted = b.gather(-2, &rows);
        let y = solve_triangular(lu, &permuted, false, true, true);
        solve_triangular(lu, &y, true, true, false)
    })
}
