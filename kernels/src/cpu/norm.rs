//! Fused LayerNorm over contiguous rows: one pass for statistics, one for the
//! output; backward in two passes. (A composite of mean/var/sub/mul costs
//! ~8 passes and as many temporaries.)

use crate::Float;
use crate::threads::{
    PARALLEL_GRAIN, num_threads, par_chunks_mut2, par_chunks_mut4, parallel, simd,
};
use std::mem::MaybeUninit;

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
    let (n, rows) = (x.len(), x.len() / d.max(1));
    // Outputs are written once, by the thread that computes them: a zero
    // fill first cost a pass, and at 2 threads it left every line of the
    // second half in the first core's cache (256 x 256 ran slower on 2
    // threads than on 1).
    let mut y: Vec<T> = crate::alloc::with_capacity(n);
    let mut sum: Vec<T> = crate::alloc::with_capacity(if residual.is_some() { n } else { 0 });
    let mut mean = vec![T::zero(); rows];
    let mut rstd = vec![T::zero(); rows];
    let eps = T::from_f64(eps);
    let inv_d = T::one() / T::from_f64(d as f64);
    let row = |src: &[T], dst: &mut [MaybeUninit<T>], m: &mut T, r: &mut T| {
        simd(
            #[inline(always)]
            || {
                let mu = lane_sum(src, src, |x, _| x) * inv_d;
                let var = lane_sum(src, src, |x, _| (x - mu) * (x - mu)) * inv_d;
                let rs = (var + eps).sqrt().recip();
                *m = mu;
                *r = rs;
                let out = dst.iter_mut().zip(src);
                match (w, b) {
                    (Some(w), Some(b)) => out.zip(w).zip(b).for_each(|(((o, &v), &wi), &bi)| {
                        o.write((v - mu) * rs * wi + bi);
                    }),
                    (Some(w), None) => out.zip(w).for_each(|((o, &v), &wi)| {
                        o.write((v - mu) * rs * wi);
                    }),
                    (None, Some(b)) => out.zip(b).for_each(|((o, &v), &bi)| {
                        o.write((v - mu) * rs + bi);
                    }),
                    (None, None) => out.for_each(|(o, &v)| {
                        o.write((v - mu) * rs);
                    }),
                }
            },
        )
    };
    let rows_of = |first: usize,
                   y: &mut [MaybeUninit<T>],
                   mean: &mut [T],
                   rstd: &mut [T],
                   sum: &mut [MaybeUninit<T>]| {
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
                            s.iter_mut().zip(src).zip(res).for_each(|((s, &a), &b)| {
                                s.write(a + b);
                            })
                        },
                    );
                    // SAFETY: the loop just above wrote every slot of `s`.
                    row(unsafe { crate::alloc::written(s) }, y, m, r);
                }
                None => row(src, y, m, r),
            }
        }
    };
    if d > 0 {
        let y_slots = &mut y.spare_capacity_mut()[..n];
        let sum_slots = &mut sum.spare_capacity_mut()[..if residual.is_some() { n } else { 0 }];
        if !parallel(n) {
            rows_of(0, y_slots, &mut mean, &mut rstd, sum_slots);
        } else {
            let per = rows_per_task(rows, d);
            let sum_chunk = if residual.is_some() { per * d } else { 1 };
            par_chunks_mut4(
                (y_slots, per * d),
                (&mut mean, per),
                (&mut rstd, per),
                (sum_slots, sum_chunk),
                |i, y, m, r, s| rows_of(i * per, y, m, r, s),
            );
        }
        // SAFETY: both were empty with capacity `n` (or 0 for `sum` without
        // a residual), and `rows_of` wrote every element of every row it
        // was given; the rows cover all `n` (`n` is a multiple of `d`).
        unsafe {
            y.set_len(n);
            if residual.is_some() {
                sum.set_len(n);
            }
        }
    }
    (sum, LayerNormForward { y, mean, rstd })
}

/// Gradients of LayerNorm: `(dx, dw, db)` given the upstream `g`, the input
/// and the saved statistics (`dw`/`db` are summed over rows).
///
/// `dw` and `db` are summed per block of rows in the same pass as `dx`,
/// then the blocks in order: the blocks depend only on the row count, so
/// the sums are the same at any thread count. (A serial pass over all rows
/// after `dx` kept the second core idle for a third of the op.)
#[allow(clippy::type_complexity)]
pub fn layer_norm_backward_rows<T: Float>(
    x: &[T],
    g: &[T],
    d: usize,
    mean: &[T],
    rstd: &[T],
    w: Option<&[T]>,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let n = x.len();
    if d == 0 {
        return (vec![T::zero(); n], vec![], vec![]);
    }
    let rows = n / d;
    let block = rows.div_ceil(32).max(16);
    let mut dx: Vec<T> = crate::alloc::with_capacity(n);
    let mut partial = vec![T::zero(); rows.div_ceil(block) * 2 * d];
    let inv_d = T::one() / T::from_f64(d as f64);
    // One row: `out` first holds dxh = g * w, then the gradient itself;
    // the row's `g * xhat` and `g` join the block's `dw`, `db`.
    let row =
        |src: &[T], gr: &[T], out: &mut [MaybeUninit<T>], (mu, rs): (T, T), part: &mut [T]| {
            simd(
                #[inline(always)]
                || {
                    match w {
                        Some(w) => out.iter_mut().zip(gr).zip(w).for_each(|((o, &g), &w)| {
                            o.write(g * w);
                        }),
                        None => out.iter_mut().zip(gr).for_each(|(o, &g)| {
                            o.write(g);
                        }),
                    }
                    // SAFETY: the match just above wrote every slot of `out`.
                    let out = unsafe { crate::alloc::written(out) };
                    let sum_dxh = lane_sum(out, out, |h, _| h);
                    let sum_dxh_xh = lane_sum(out, src, |h, v| h * (v - mu)) * rs;
                    let (a, c) = (sum_dxh * inv_d, sum_dxh_xh * inv_d);
                    for (o, &v) in out.iter_mut().zip(src) {
                        *o = rs * (*o - a - (v - mu) * rs * c);
                    }
                    let (dw, db) = part.split_at_mut(d);
                    for (((w, b), &s), &gv) in dw.iter_mut().zip(db.iter_mut()).zip(src).zip(gr) {
                        *w = *w + gv * (s - mu) * rs;
                        *b = *b + gv;
                    }
                },
            )
        };
    let block_of = |blk: usize, dx: &mut [MaybeUninit<T>], part: &mut [T]| {
        for (i, out) in dx.chunks_mut(d).enumerate() {
            let (r, k) = (blk * block + i, (blk * block + i) * d);
            row(&x[k..k + d], &g[k..k + d], out, (mean[r], rstd[r]), part);
        }
    };
    let slots = &mut dx.spare_capacity_mut()[..n];
    if !parallel(n) {
        let pieces = slots.chunks_mut(block * d).zip(partial.chunks_mut(2 * d));
        pieces
            .enumerate()
            .for_each(|(blk, (dx, part))| block_of(blk, dx, part));
    } else {
        par_chunks_mut2((slots, block * d), (&mut partial, 2 * d), block_of);
    }
    // SAFETY: `dx` was empty with capacity `n`, and the blocks cover all
    // `n` slots, each written by `row`.
    unsafe { dx.set_len(n) };
    let mut dw = vec![T::zero(); d];
    let mut db = vec![T::zero(); d];
    simd(
        #[inline(always)]
        || {
            for part in partial.chunks(2 * d) {
                dw.iter_mut()
                    .zip(&part[..d])
                    .for_each(|(s, &p)| *s = *s + p);
                db.iter_mut()
                    .zip(&part[d..])
                    .for_each(|(s, &p)| *s = *s + p);
            }
        },
    );
    (dx, dw, db)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LayerNorm of each row and its gradients, in f64 from the definition:
    /// `(y, dx, dw, db)` for upstream `g`.
    #[allow(clippy::type_complexity)]
    fn reference(x: &[f64], g: &[f64], d: usize, w: &[f64], b: &[f64]) -> [Vec<f64>; 4] {
        let (mut y, mut dx, mut dw, mut db) = (vec![], vec![], vec![0.0; d], vec![0.0; d]);
        for (xr, gr) in x.chunks(d).zip(g.chunks(d)) {
            let mu = xr.iter().sum::<f64>() / d as f64;
            let var = xr.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d as f64;
            let rs = 1.0 / (var + 1e-5).sqrt();
            let xh: Vec<f64> = xr.iter().map(|v| (v - mu) * rs).collect();
            let dxh: Vec<f64> = gr.iter().zip(w).map(|(g, w)| g * w).collect();
            let (s1, s2) = (
                dxh.iter().sum::<f64>() / d as f64,
                dxh.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / d as f64,
            );
            for j in 0..d {
                y.push(xh[j] * w[j] + b[j]);
                dx.push(rs * (dxh[j] - s1 - xh[j] * s2));
                dw[j] += gr[j] * xh[j];
                db[j] += gr[j];
            }
        }
        [y, dx, dw, db]
    }

    #[test]
    fn forward_and_gradients_match_the_definition_at_any_thread_count() {
        // 300 rows of 128: past the parallel grain, rows not a multiple of
        // the gradient's row blocks.
        let (rows, d) = (300, 128);
        let v = |n: usize, s: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + s * 104_729) % 1013) as f32 / 337.0 - 1.5)
                .collect()
        };
        let (x, g, w, b) = (v(rows * d, 1), v(rows * d, 2), v(d, 3), v(d, 4));
        let f64s = |s: &[f32]| s.iter().map(|&v| v as f64).collect::<Vec<_>>();
        let want = reference(&f64s(&x), &f64s(&g), d, &f64s(&w), &f64s(&b));
        let mut runs = vec![];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            let f = layer_norm_rows(&x, d, Some(&w), Some(&b), 1e-5);
            let (dx, dw, db) = layer_norm_backward_rows(&x, &g, d, &f.mean, &f.rstd, Some(&w));
            runs.push([f.y, dx, dw, db]);
        }
        assert!(runs[0] == runs[1], "1 and 2 threads differ");
        for (name, (got, want)) in ["y", "dx", "dw", "db"]
            .iter()
            .zip(runs[0].iter().zip(&want))
        {
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for (i, (&g, &e)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g as f64 - e).abs() <= 1e-5 * scale,
                    "{name}[{i}]: {g} vs {e}"
                );
            }
        }
        // With a residual: the sum, and LayerNorm of the sum.
        let (s, f) = add_layer_norm_rows(&x, &g, d, Some(&w), Some(&b), 1e-5);
        let sum: Vec<f32> = x.iter().zip(&g).map(|(a, b)| a + b).collect();
        assert_eq!(s, sum);
        assert_eq!(f.y, layer_norm_rows(&sum, d, Some(&w), Some(&b), 1e-5).y);
    }
}
