//! Fused LayerNorm over contiguous rows: one pass for statistics, one for the
//! output; backward in two passes. (A composite of mean/var/sub/mul costs
//! ~8 passes and as many temporaries.)

use crate::Float;
use crate::threads::{install, parallel, simd};
use rayon::prelude::*;

/// Output, per-row mean and per-row 1/sqrt(var + eps) (biased variance, as PyTorch).
pub struct LayerNormForward<T> {
    /// The normalised (and affine) output.
    pub y: Vec<T>,
    /// Each row's mean.
    pub mean: Vec<T>,
    /// Each row's `1 / sqrt(var + eps)` (biased variance).
    pub rstd: Vec<T>,
}

/// `y = (x - mean) * rstd * w + b` for each row of length `d`.
///
/// ```
/// let f = tapir_kernels::cpu::layer_norm_rows(&[1.0f64, 3.0], 2, None, None, 0.0);
/// assert_eq!(f.y, vec![-1.0, 1.0]);
/// ```
#[allow(clippy::type_complexity)]
pub fn layer_norm_rows<T: Float>(
    x: &[T],
    d: usize,
    w: Option<&[T]>,
    b: Option<&[T]>,
    eps: f64,
) -> LayerNormForward<T> {
    let rows = x.len() / d.max(1);
    let mut y = crate::alloc::filled(x.len(), T::zero());
    let mut mean = vec![T::zero(); rows];
    let mut rstd = vec![T::zero(); rows];
    let eps = T::from_f64(eps);
    let inv_d = T::one() / T::from_f64(d as f64);
    let row = |(((src, dst), m), r): (((&[T], &mut [T]), &mut T), &mut T)| {
        simd(
            #[inline(always)]
            || {
                let mu = src.iter().copied().sum::<T>() * inv_d;
                let var = src.iter().map(|&v| (v - mu) * (v - mu)).sum::<T>() * inv_d;
                let rs = (var + eps).sqrt().recip();
                *m = mu;
                *r = rs;
                match (w, b) {
                    (Some(w), Some(b)) => {
                        for (((o, &v), &wi), &bi) in dst.iter_mut().zip(src).zip(w).zip(b) {
                            *o = (v - mu) * rs * wi + bi;
                        }
                    }
                    (Some(w), None) => {
                        for ((o, &v), &wi) in dst.iter_mut().zip(src).zip(w) {
                            *o = (v - mu) * rs * wi;
                        }
                    }
                    _ => {
                        for (o, &v) in dst.iter_mut().zip(src) {
                            *o = (v - mu) * rs;
                        }
                        if let Some(b) = b {
                            dst.iter_mut().zip(b).for_each(|(o, &bi)| *o = *o + bi);
                        }
                    }
                }
            },
        )
    };
    if d == 0 {
        return LayerNormForward { y, mean, rstd };
    }
    if !parallel(x.len()) {
        x.chunks(d)
            .zip(y.chunks_mut(d))
            .zip(mean.iter_mut())
            .zip(rstd.iter_mut())
            .for_each(row);
    } else {
        install(|_| {
            x.par_chunks(d)
                .zip(y.par_chunks_mut(d))
                .zip(mean.par_iter_mut())
                .zip(rstd.par_iter_mut())
                .for_each(row)
        });
    }
    LayerNormForward { y, mean, rstd }
}

/// Gradients of LayerNorm: `(dx, dw, db)` given the upstream `g`, the input
/// and the saved statistics (`dw`/`db` are summed over rows).
#[allow(clippy::type_complexity)]
pub fn layer_norm_backward_rows<T: Float>(
    x: &[T],
    g: &[T],
    d: usize,
    mean: &[T],
    rstd: &[T],
    w: Option<&[T]>,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut dx = crate::alloc::filled(x.len(), T::zero());
    if d == 0 {
        return (dx, vec![], vec![]);
    }
    let inv_d = T::one() / T::from_f64(d as f64);
    // dx row by row (independent), in parallel for large inputs.
    let row = |((((src, gr), out), &mu), &rs): ((((&[T], &[T]), &mut [T]), &T), &T)| {
        simd(
            #[inline(always)]
            || {
                let mut sum_dxh = T::zero();
                let mut sum_dxh_xh = T::zero();
                for (k, (&v, &gv)) in src.iter().zip(gr).enumerate() {
                    let dxh = gv * w.map_or(T::one(), |w| w[k]);
                    sum_dxh = sum_dxh + dxh;
                    sum_dxh_xh = sum_dxh_xh + dxh * (v - mu) * rs;
                }
                let (a, c) = (sum_dxh * inv_d, sum_dxh_xh * inv_d);
                for (k, ((o, &v), &gv)) in out.iter_mut().zip(src).zip(gr).enumerate() {
                    let dxh = gv * w.map_or(T::one(), |w| w[k]);
                    *o = rs * (dxh - a - (v - mu) * rs * c);
                }
            },
        )
    };
    let zipped = |dx: &mut Vec<T>| {
        if !parallel(x.len()) {
            x.chunks(d)
                .zip(g.chunks(d))
                .zip(dx.chunks_mut(d))
                .zip(mean)
                .zip(rstd)
                .for_each(row);
        } else {
            install(|_| {
                x.par_chunks(d)
                    .zip(g.par_chunks(d))
                    .zip(dx.par_chunks_mut(d))
                    .zip(mean)
                    .zip(rstd)
                    .for_each(row)
            });
        }
    };
    zipped(&mut dx);
    // dw, db: column sums; accumulate rows sequentially (vectorises over d).
    let mut dw = vec![T::zero(); d];
    let mut db = vec![T::zero(); d];
    simd(
        #[inline(always)]
        || {
            for (((src, gr), &mu), &rs) in x.chunks(d).zip(g.chunks(d)).zip(mean).zip(rstd) {
                for (((w, b), &s), &gv) in dw.iter_mut().zip(db.iter_mut()).zip(src).zip(gr) {
                    *w = *w + gv * (s - mu) * rs;
                    *b = *b + gv;
                }
            }
        },
    );
    (dx, dw, db)
}
