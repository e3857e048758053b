//! Fused LayerNorm over contiguous rows: one pass for statistics, one for the
//! output; backward in two passes. (A composite of mean/var/sub/mul costs
//! ~8 passes and as many temporaries.)

use crate::Float;
use crate::threads::{
    PARALLEL_GRAIN, num_threads, par_chunks_mut, par_chunks_mut4, parallel, simd,
};

/// Independent partial sums per row reduction, so the loops vectorise (one
/// float accumulator is a serial chain: LayerNorm ran at ~1 ns per element).
const LANES: usize = 16;

/// `sum_k f(a[k], b[k])` in [`LANES`] interleaved partial sums.
#[inline(always)]
fn lane_sum<T: Float>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
    let mut acc = [T::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail =
        (ca.remainder().iter().zip(cb.remainder())).fold(T::zero(), |s, (&x, &y)| s + f(x, y));
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = acc[l] + f(x[l], y[l]);
        }
    }
    acc.iter().fold(tail, |s, &v| s + v)
}

/// Rows per task when `rows` rows of `d` are split across threads: about
/// four tasks per thread, each at least a few thousand elements.
fn rows_per_task(rows: usize, d: usize) -> usize {
    rows.div_ceil(4 * num_threads())
        .max(PARALLEL_GRAIN / 4 / d.max(1))
        .max(1)
}

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
    layer_norm_impl(x, None, d, w, b, eps).1
}

/// `s = x + residual`, then LayerNorm of `s`, in one pass over each row
/// (the sum is normalised while it is in cache): `(s, LayerNorm(s))`.
///
/// ```
/// let (s, f) = tapir_kernels::cpu::add_layer_norm_rows(&[1.0f64, 2.0], &[0.0, 1.0], 2, None, None, 0.0);
/// assert_eq!((s, f.y), (vec![1.0, 3.0], vec![-1.0, 1.0]));
/// ```
#[allow(clippy::type_complexity)]
pub fn add_layer_norm_rows<T: Float>(
    x: &[T],
    residual: &[T],
    d: usize,
    w: Option<&[T]>,
    b: Option<&[T]>,
    eps: f64,
) -> (Vec<T>, LayerNormForward<T>) {
    assert!(
        residual.len() == x.len(),
        "add_layer_norm kernel: input of {} and residual of {} elements",
        x.len(),
        residual.len()
    );
    layer_norm_impl(x, Some(residual), d, w, b, eps)
}

#[allow(clippy::type_complexity)]
fn layer_norm_impl<T: Float>(
    x: &[T],
    residual: Option<&[T]>,
    d: usize,
    w: Option<&[T]>,
    b: Option<&[T]>,
    eps: f64,
) -> (Vec<T>, LayerNormForward<T>) {
    let rows = x.len() / d.max(1);
    let mut y = crate::alloc::filled(x.len(), T::zero());
    let mut sum = match residual {
        Some(_) => crate::alloc::filled(x.len(), T::zero()),
        None => Vec::new(),
    };
    let mut mean = vec![T::zero(); rows];
    let mut rstd = vec![T::zero(); rows];
    let eps = T::from_f64(eps);
    let inv_d = T::one() / T::from_f64(d as f64);
    let row = |src: &[T], dst: &mut [T], m: &mut T, r: &mut T| {
        simd(
            #[inline(always)]
            || {
                let mu = lane_sum(src, src, |x, _| x) * inv_d;
                let var = lane_sum(src, src, |x, _| (x - mu) * (x - mu)) * inv_d;
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
        return (sum, LayerNormForward { y, mean, rstd });
    }
    let rows_of = |first: usize, y: &mut [T], mean: &mut [T], rstd: &mut [T], sum: &mut [T]| {
        for (i, ((y, m), r)) in y.chunks_mut(d).zip(mean).zip(rstd).enumerate() {
            let k = (first + i) * d;
            let src = &x[k..k + d];
            match residual {
                Some(res) => {
                    let s = &mut sum[i * d..(i + 1) * d];
                    simd(
                        #[inline(always)]
                        || {
                            let res = &res[k..k + d];
                            s.iter_mut()
                                .zip(src)
                                .zip(res)
                                .for_each(|((s, &a), &b)| *s = a + b)
                        },
                    );
                    row(s, y, m, r);
                }
                None => row(src, y, m, r),
            }
        }
    };
    let sum_chunk = if residual.is_some() { d } else { 0 };
    if !parallel(x.len()) {
        rows_of(0, &mut y, &mut mean, &mut rstd, &mut sum);
    } else {
        let per = rows_per_task(rows, d);
        par_chunks_mut4(
            (&mut y, per * d),
            (&mut mean, per),
            (&mut rstd, per),
            (&mut sum, per * sum_chunk),
            |i, y, m, r, s| rows_of(i * per, y, m, r, s),
        );
    }
    (sum, LayerNormForward { y, mean, rstd })
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
    // `out` first holds dxh = g * w, then the gradient itself.
    let row = |src: &[T], gr: &[T], out: &mut [T], mu: T, rs: T| {
        simd(
            #[inline(always)]
            || {
                match w {
                    Some(w) => out
                        .iter_mut()
                        .zip(gr)
                        .zip(w)
                        .for_each(|((o, &g), &w)| *o = g * w),
                    None => out.copy_from_slice(gr),
                }
                let sum_dxh = lane_sum(out, out, |h, _| h);
                let sum_dxh_xh = lane_sum(out, src, |h, v| h * (v - mu)) * rs;
                let (a, c) = (sum_dxh * inv_d, sum_dxh_xh * inv_d);
                for (o, &v) in out.iter_mut().zip(src) {
                    *o = rs * (*o - a - (v - mu) * rs * c);
                }
            },
        )
    };
    let rows_of = |first: usize, dx: &mut [T]| {
        for (i, out) in dx.chunks_mut(d).enumerate() {
            let (r, k) = (first + i, (first + i) * d);
            row(&x[k..k + d], &g[k..k + d], out, mean[r], rstd[r]);
        }
    };
    if !parallel(x.len()) {
        rows_of(0, &mut dx);
    } else {
        let per = rows_per_task(x.len() / d, d);
        par_chunks_mut(&mut dx, per * d, |i, dx| rows_of(i * per, dx));
    }
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
