//! The elementwise math without an ONNX operator of its own, as the
//! operators that compute it: `expm1`, `log1p`, `log2`, `log10`, `exp2`, `logit`,
//! `hypot` (the root of the squares: ONNX has no form that cannot
//! overflow), `sinc`, and `fmod` / `remainder` (ONNX's `Mod` with `fmod=1`, moved into the
//! divisor's sign for `remainder`).

use super::{Lowered, OpView};
use crate::onnx::builder::{Builder, int};

/// Writes `op` (one of the ops above) as ONNX nodes.
pub(super) fn lower(b: &mut Builder, op: &OpView) -> Lowered {
    let (x, out, t) = (op.x(0), op.out(), op.out_dtypes[0]);
    match op.name {
        "expm1" => {
            let e = b.tmp("Exp", &[x], vec![]);
            let one = b.scalar(1.0, t);
            b.node("Sub", &[&e, &one], &[out], vec![]);
        }
        "log1p" => {
            // ONNX has no log1p: `ln(1 + x)` loses the digits of a tiny x.
            let one = b.scalar(1.0, t);
            let sum = b.tmp("Add", &[x, &one], vec![]);
            b.node("Log", &[&sum], &[out], vec![]);
        }
        "log2" | "log10" => {
            let base: f64 = if op.name == "log2" { 2.0 } else { 10.0 };
            let ln = b.tmp("Log", &[x], vec![]);
            let k = b.scalar(base.ln(), t);
            b.node("Div", &[&ln, &k], &[out], vec![]);
        }
        "exp2" => {
            let two = b.scalar(2.0, t);
            b.node("Pow", &[&two, x], &[out], vec![]);
        }
        "logit" => {
            let eps = op.float("eps");
            let p = if eps >= 0.0 {
                let (lo, hi) = (b.scalar(eps, t), b.scalar(1.0 - eps, t));
                b.tmp("Clip", &[x, &lo, &hi], vec![])
            } else {
                x.to_string()
            };
            let one = b.scalar(1.0, t);
            let rest = b.tmp("Sub", &[&one, &p], vec![]);
            let odds = b.tmp("Div", &[&p, &rest], vec![]);
            b.node("Log", &[&odds], &[out], vec![]);
        }
        "hypot" => {
            let aa = b.tmp("Mul", &[x, x], vec![]);
            let bb = b.tmp("Mul", &[op.x(1), op.x(1)], vec![]);
            let sum = b.tmp("Add", &[&aa, &bb], vec![]);
            b.node("Sqrt", &[&sum], &[out], vec![]);
        }
        "sinc" => {
            // sin(πx) / (πx), 1 where x is 0.
            let (zero, one) = (b.scalar(0.0, t), b.scalar(1.0, t));
            let at_zero = b.tmp("Equal", &[x, &zero], vec![]);
            let safe = b.tmp("Where", &[&at_zero, &one, x], vec![]);
            let pi = b.scalar(std::f64::consts::PI, t);
            let px = b.tmp("Mul", &[&safe, &pi], vec![]);
            let sin = b.tmp("Sin", &[&px], vec![]);
            let ratio = b.tmp("Div", &[&sin, &px], vec![]);
            b.node("Where", &[&at_zero, &one, &ratio], &[out], vec![]);
        }
        "fmod" => b.node("Mod", &[x, op.x(1)], &[out], vec![int("fmod", 1)]),
        _ => {
            // remainder: fmod, plus the divisor where the signs differ.
            let d = op.x(1);
            let m = b.tmp("Mod", &[x, d], vec![int("fmod", 1)]);
            let zero = b.scalar(0.0, t);
            let nonzero = b.tmp("Equal", &[&m, &zero], vec![]);
            let nonzero = b.tmp("Not", &[&nonzero], vec![]);
            let (d_neg, m_neg) = (
                b.tmp("Less", &[d, &zero], vec![]),
                b.tmp("Less", &[&m, &zero], vec![]),
            );
            let differ = b.tmp("Xor", &[&d_neg, &m_neg], vec![]);
            let moved = b.tmp("And", &[&nonzero, &differ], vec![]);
            let shifted = b.tmp("Add", &[&m, d], vec![]);
            b.node("Where", &[&moved, &shifted, &m], &[out], vec![]);
        }
    }
    Ok(())
}
