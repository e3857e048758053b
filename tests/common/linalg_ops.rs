//! The `torch.linalg` goldens' ops, as `linalg_run` in scripts/gen_goldens.py
//! computes them: symmetric inputs built inside the op (`x xᵀ + n I`,
//! `x + xᵀ`) so that finite differences perturb them symmetrically, and
//! sign-ambiguous factors normalised by the sign of their first row (QR by
//! `R`'s diagonal).

use serde_json::Value;
use tapir::linalg::{self, MatrixNorm, QrMode};
use tapir::prelude::*;

fn flag(a: &Value, k: &str) -> bool {
    a[k].as_bool().unwrap_or_else(|| panic!("arg {k}"))
}

fn mt(x: &Tensor) -> Tensor {
    x.transpose(-2, -1)
}

/// Each column's sign, from its first row.
fn sign_cols(m: &Tensor) -> Tensor {
    m.narrow(-2, 0, 1).sign()
}

fn identity(n: usize, like: &Tensor) -> Tensor {
    Tensor::eye(n)
        .to_dtype(like.dtype())
        .to(like.device())
        .unwrap()
}

/// The op table's linalg rows; `None` for an op it lacks.
pub fn run(op: &str, a: &Value, x: &[Tensor]) -> Option<Vec<Tensor>> {
    Some(match op {
        "linalg_cholesky" => {
            let n = x[0].size(-1);
            let spd = &x[0].matmul(&mt(&x[0])) + &(&identity(n, &x[0]) * n as f64);
            vec![linalg::cholesky(&spd, flag(a, "upper"))]
        }
        "linalg_solve" => vec![linalg::solve(&x[0], &x[1])],
        "linalg_solve_triangular" => vec![linalg::solve_triangular(
            &x[0],
            &x[1],
            flag(a, "upper"),
            flag(a, "left"),
            flag(a, "unit"),
        )],
        "linalg_inv" => vec![linalg::inv(&x[0])],
        "linalg_det" => vec![linalg::det(&x[0])],
        "linalg_slogdet" => {
            let (sign, logabs) = linalg::slogdet(&x[0]);
            vec![sign, logabs]
        }
        "logdet" => vec![linalg::logdet(&x[0])],
        "linalg_qr" => {
            let mode = match a["mode"].as_str()? {
                "reduced" => QrMode::Reduced,
                "complete" => QrMode::Complete,
                _ => QrMode::R,
            };
            let (q, r) = linalg::qr(&x[0], mode);
            let d = r.diagonal(0, -2, -1).sign();
            vec![&q * &d.unsqueeze(-2), &r * &d.unsqueeze(-1)]
        }
        "linalg_eigh" => {
            let (w, v) = linalg::eigh(&(&x[0] + &mt(&x[0])));
            let s = sign_cols(&v);
            vec![w, &v * &s]
        }
        "linalg_eigvalsh" => vec![linalg::eigvalsh(&(&x[0] + &mt(&x[0])))],
        "linalg_svd" => {
            let (u, s, vh) = linalg::svd(&x[0], flag(a, "full"));
            let k = s.size(-1);
            let (u, vh) = (u.narrow(-1, 0, k), vh.narrow(-2, 0, k));
            let sg = sign_cols(&u);
            vec![&u * &sg, s, &vh * &mt(&sg)]
        }
        "linalg_svdvals" => vec![linalg::svdvals(&x[0])],
        "linalg_pinv" => vec![linalg::pinv(&x[0])],
        "cholesky_solve" | "cholesky_inverse" => {
            let n = x[0].size(-1);
            let spd = &x[0].matmul(&mt(&x[0])) + &(&identity(n, &x[0]) * n as f64);
            let upper = flag(a, "upper");
            let factor = linalg::cholesky(&spd, upper);
            if op == "cholesky_inverse" {
                vec![linalg::cholesky_inverse(&factor, upper)]
            } else {
                vec![linalg::cholesky_solve(&x[1], &factor, upper)]
            }
        }
        "linalg_lstsq" => vec![linalg::lstsq(&x[0], &x[1])],
        "linalg_lstsq_full" => {
            let r = linalg::lstsq_full(&x[0], &x[1]);
            vec![
                r.solution,
                r.residuals,
                r.rank.to_dtype(DType::F64),
                r.singular_values,
            ]
        }
        "linalg_matrix_exp" => vec![linalg::matrix_exp(&x[0])],
        "linalg_lu" => {
            let (p, l, u) = linalg::lu(&x[0]);
            vec![p, l, u]
        }
        "linalg_lu_factor" => {
            let (lu, pivots) = linalg::lu_factor(&x[0]);
            vec![lu, pivots.to_dtype(x[0].dtype())]
        }
        "linalg_lu_solve" => {
            let (lu, pivots) = linalg::lu_factor(&x[0]);
            vec![linalg::lu_solve(&lu, &pivots, &x[1])]
        }
        "linalg_matrix_power" => vec![linalg::matrix_power(&x[0], a["n"].as_i64()?)],
        "linalg_multi_dot" => vec![linalg::multi_dot(&x.iter().collect::<Vec<_>>())],
        "linalg_matrix_norm" => {
            let ord = match a["ord"].as_str()? {
                "fro" => MatrixNorm::Frobenius,
                "nuc" => MatrixNorm::Nuclear,
                "2" => MatrixNorm::Spectral,
                "m2" => MatrixNorm::MinSingular,
                "1" => MatrixNorm::MaxColumnSum,
                "m1" => MatrixNorm::MinColumnSum,
                "inf" => MatrixNorm::MaxRowSum,
                "minf" => MatrixNorm::MinRowSum,
                _ => return None,
            };
            vec![linalg::matrix_norm(&x[0], ord)]
        }
        _ => return None,
    })
}
