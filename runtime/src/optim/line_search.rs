//! The strong-Wolfe line search L-BFGS takes with
//! `line_search_fn: Some(LineSearch::StrongWolfe)`: PyTorch's
//! `_strong_wolfe` (after minFunc), a bracketing phase then a zoom by
//! cubic interpolation, with the same constants and the same order of
//! evaluations, so a run takes the steps PyTorch's does.

use crate::Tensor;

/// A point on the search line: step `t`, loss `f`, flat gradient `g` and
/// directional derivative `gtd = g · d`.
#[derive(Clone)]
pub(super) struct LinePoint {
    pub t: f64,
    pub f: f64,
    pub g: Tensor,
    pub gtd: f64,
}

/// The minimiser of the cubic through two points with their slopes,
/// clamped to `bounds` (by default the interval between them); the
/// interval's middle when the cubic has no minimum.
fn cubic_interpolate(
    (x1, f1, g1): (f64, f64, f64),
    (x2, f2, g2): (f64, f64, f64),
    bounds: Option<(f64, f64)>,
) -> f64 {
    let (lo, hi) = bounds.unwrap_or(if x1 <= x2 { (x1, x2) } else { (x2, x1) });
    let d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    let d2_square = d1 * d1 - g1 * g2;
    if d2_square < 0.0 {
        return (lo + hi) / 2.0;
    }
    let d2 = d2_square.sqrt();
    let min_pos = if x1 <= x2 {
        x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
    } else {
        x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
    };
    min_pos.max(lo).min(hi)
}

fn as_cubic_point(p: &LinePoint) -> (f64, f64, f64) {
    (p.t, p.f, p.gtd)
}

/// The settings of one search.
pub(super) struct Wolfe {
    /// Sufficient decrease (Armijo) constant.
    pub c1: f64,
    /// Curvature constant.
    pub c2: f64,
    /// The bracket is given up when narrower than this along `d`.
    pub tolerance_change: f64,
    /// Evaluations allowed after the first.
    pub max_ls: usize,
}

/// Searches along `d` from `start` (t = 0) beginning with step `t`;
/// `evaluate(t)` gives the loss and flat gradient at `x + t d` (and puts
/// the parameters back). Returns the point found and the evaluations made.
pub(super) fn strong_wolfe(
    mut evaluate: impl FnMut(f64) -> (f64, Tensor),
    d: &Tensor,
    start: LinePoint,
    t: f64,
    w: &Wolfe,
) -> (LinePoint, usize) {
    let d_norm = d.abs().max().item::<f64>();
    let (f0, gtd0) = (start.f, start.gtd);
    let mut probe = |t: f64| {
        let (f, g) = evaluate(t);
        let gtd = g.dot(d).item::<f64>();
        LinePoint { t, f, g, gtd }
    };
    let mut evals = 1;
    let mut new = probe(t);
    let mut prev = start.clone();
    let mut ls_iter = 0;
    let mut done = false;
    let mut bracket: Vec<LinePoint> = vec![];
    // Bracketing: step further until the loss rises, the slope turns, or
    // the curvature condition holds.
    while ls_iter < w.max_ls {
        let armijo_fails = new.f > f0 + w.c1 * new.t * gtd0;
        if armijo_fails || (ls_iter > 1 && new.f >= prev.f) {
            bracket = vec![prev, new.clone()];
            break;
        }
        if new.gtd.abs() <= -w.c2 * gtd0 {
            bracket = vec![new.clone()];
            done = true;
            break;
        }
        if new.gtd >= 0.0 {
            bracket = vec![prev, new.clone()];
            break;
        }
        let bounds = (new.t + 0.01 * (new.t - prev.t), new.t * 10.0);
        let t_next = cubic_interpolate(as_cubic_point(&prev), as_cubic_point(&new), Some(bounds));
        prev = new;
        new = probe(t_next);
        evals += 1;
        ls_iter += 1;
    }
    if ls_iter == w.max_ls {
        bracket = vec![start, new];
    }
    let order = |b: &[LinePoint]| {
        if b[0].f <= b[b.len() - 1].f {
            (0, 1)
        } else {
            (1, 0)
        }
    };
    let (mut low, mut high) = order(&bracket);
    let mut insufficient_progress = false;
    // Zoom: shrink the bracket by cubic interpolation until a point meets
    // both conditions or the bracket is too narrow to matter.
    while !done && ls_iter < w.max_ls {
        let (b0, b1) = (bracket[0].t, bracket[1].t);
        if (b1 - b0).abs() * d_norm < w.tolerance_change {
            break;
        }
        let mut t = cubic_interpolate(
            as_cubic_point(&bracket[0]),
            as_cubic_point(&bracket[1]),
            None,
        );
        let (lo, hi) = (b0.min(b1), b0.max(b1));
        let eps = 0.1 * (hi - lo);
        // Too close to an end: move away from it once progress stalls.
        if (hi - t).min(t - lo) < eps {
            if insufficient_progress || t >= hi || t <= lo {
                t = if (t - hi).abs() < (t - lo).abs() {
                    hi - eps
                } else {
                    lo + eps
                };
                insufficient_progress = false;
            } else {
                insufficient_progress = true;
            }
        } else {
            insufficient_progress = false;
        }
        let new = probe(t);
        evals += 1;
        ls_iter += 1;
        if new.f > f0 + w.c1 * t * gtd0 || new.f >= bracket[low].f {
            bracket[high] = new;
            (low, high) = order(&bracket);
        } else {
            if new.gtd.abs() <= -w.c2 * gtd0 {
                done = true;
            } else if new.gtd * (bracket[high].t - bracket[low].t) >= 0.0 {
                bracket[high] = bracket[low].clone();
            }
            bracket[low] = new;
        }
    }
    (bracket.swap_remove(low), evals)
}

#[cfg(test)]
mod tests {
    use super::cubic_interpolate;

    #[test]
    fn cubic_interpolation_finds_a_cubics_minimum() {
        // f(x) = (x - 1)^2 sampled at 0 and 3 with its slopes: minimum at 1.
        let f = |x: f64| (x - 1.0) * (x - 1.0);
        let g = |x: f64| 2.0 * (x - 1.0);
        let m = cubic_interpolate((0.0, f(0.0), g(0.0)), (3.0, f(3.0), g(3.0)), None);
        assert!((m - 1.0).abs() < 1e-12, "{m}");
        // Clamped to the bounds given.
        let m = cubic_interpolate(
            (0.0, f(0.0), g(0.0)),
            (3.0, f(3.0), g(3.0)),
            Some((2.0, 5.0)),
        );
        assert_eq!(m, 2.0);
        // No minimum (d2^2 < 0): the middle of the interval.
        let m = cubic_interpolate((0.0, 0.0, 1.0), (1.0, 2.0 / 3.0, 1.0), None);
        assert_eq!(m, 0.5);
    }
}
