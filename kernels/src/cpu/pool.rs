//! Max pooling with the argmax of each window (PyTorch's
//! `max_pool2d_with_indices`), read straight from the image: lowering it to
//! im2col plus a max over the window dim wrote and re-read every tap and was
//! 41% of the small CNN's train step.

use super::conv::valid_cols;
use crate::threads::{par_chunks_mut, par_chunks_mut2, parallel, simd};
use crate::{Conv2dGeometry, Float, alloc};
use std::mem::MaybeUninit;

/// Max pooling of a contiguous `[n, c, h, w]` input: the `[n, c, oh, ow]`
/// maxima and, for each, the flat index `ih * w + iw` of the winning tap
/// within its plane. A NaN in a window wins (the last one, as PyTorch's CPU
/// kernel: `val > max || isnan(val)`); ties keep the first tap.
///
/// ```
/// use tapir_kernels::{Conv2dGeometry, cpu::max_pool2d};
/// let g = Conv2dGeometry { n: 1, c: 1, h: 2, w: 2, kernel: (2, 2), stride: (2, 2), padding: (0, 0), dilation: (1, 1) };
/// let (v, i) = max_pool2d(&[1.0f32, 4.0, 3.0, 2.0], &g);
/// assert_eq!((v, i), (vec![4.0], vec![1]));
/// ```
pub fn max_pool2d<T: Float>(x: &[T], g: &Conv2dGeometry) -> (Vec<T>, Vec<i64>) {
    let (oh, ow) = g.out_hw().expect("pool geometry checked by the caller");
    let (plane_in, plane_out) = (g.h * g.w, oh * ow);
    assert!(
        plane_in <= i32::MAX as usize,
        "max_pool2d: an input plane of {}x{} is over 2^31 elements",
        g.h,
        g.w
    );
    // Written once, straight into the buffers' spare capacity (zero-filling
    // them first was a third of the memory traffic of the CNN's first pool).
    let total = g.n * g.c * plane_out;
    let mut vals: Vec<T> = alloc::with_capacity(total);
    let mut idx: Vec<i64> = alloc::with_capacity(total);
    if total == 0 {
        return (vals, idx);
    }
    // For each kernel column: the outputs [lo, hi) whose tap lands inside
    // the row, and the input column of output lo's tap.
    let cols: Vec<(usize, usize, usize)> =
        (0..g.kernel.1).map(|kj| valid_cols(g, ow, kj)).collect();
    // Tap by tap over a whole output row, in window order (row by row), so
    // ties keep the first tap and the last NaN wins, as PyTorch's CPU
    // kernel. Each tap's inputs are first copied to a unit-stride scratch
    // row (`tap`), and positions are kept as i32 beside the values (`at`):
    // the update is then a branch-free select over independent outputs that
    // vectorises (as compares on random data, half of them mispredicted).
    let scratch = || (vec![T::zero(); ow], vec![0i32; ow], vec![T::zero(); ow]);
    let two_by_two =
        g.kernel == (2, 2) && g.stride == (2, 2) && g.padding == (0, 0) && g.dilation == (1, 1);
    type Rows<'a, T> = (&'a mut [MaybeUninit<T>], &'a mut [MaybeUninit<i64>]);
    let fill =
        |(tap, at, best): &mut (Vec<T>, Vec<i32>, Vec<T>), p: usize, (vals, idx): Rows<T>| {
            let src = &x[p * plane_in..(p + 1) * plane_in];
            if two_by_two {
                return pool_2x2(src, g.w, oh, ow, vals, idx);
            }
            simd(
                #[inline(always)]
                || {
                    for oi in 0..oh {
                        best.fill(T::neg_infinity());
                        at.fill(-1);
                        for ki in 0..g.kernel.0 {
                            let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize
                                - g.padding.0 as isize;
                            if ih < 0 || ih >= g.h as isize {
                                continue;
                            }
                            let row_at = ih as usize * g.w;
                            let row = &src[row_at..row_at + g.w];
                            for &(lo, hi, iw0) in &cols {
                                let step = g.stride.1;
                                for (t, iw) in tap[lo..hi].iter_mut().zip((iw0..).step_by(step)) {
                                    *t = row[iw];
                                }
                                let lanes = best[lo..hi]
                                    .iter_mut()
                                    .zip(&mut at[lo..hi])
                                    .zip(&tap[lo..hi]);
                                let (base, step) = ((row_at + iw0) as i32, step as i32);
                                for (k, ((b, a), &v)) in (0..).zip(lanes) {
                                    let take = (*a < 0) | (v > *b) | v.is_nan();
                                    *b = if take { v } else { *b };
                                    *a = if take { base + k * step } else { *a };
                                }
                            }
                        }
                        let row = oi * ow..(oi + 1) * ow;
                        for (d, &b) in vals[row.clone()].iter_mut().zip(best.iter()) {
                            d.write(b);
                        }
                        for (d, &a) in idx[row].iter_mut().zip(at.iter()) {
                            d.write(a as i64);
                        }
                    }
                },
            )
        };
    let (vu, iu) = (
        &mut vals.spare_capacity_mut()[..total],
        &mut idx.spare_capacity_mut()[..total],
    );
    if parallel(x.len()) {
        par_chunks_mut2((vu, plane_out), (iu, plane_out), |p, v, i| {
            fill(&mut scratch(), p, (v, i))
        });
    } else {
        let mut s = scratch();
        vu.chunks_mut(plane_out)
            .zip(iu.chunks_mut(plane_out))
            .enumerate()
            .for_each(|(p, rows)| fill(&mut s, p, rows));
    }
    // SAFETY: both were empty with capacity `total`; every plane's chunk of
    // `plane_out` slots went to `fill` once, and `fill` writes all `oh` rows
    // of `ow` values and indices of its plane (pool_2x2 and the general
    // path alike).
    unsafe {
        vals.set_len(total);
        idx.set_len(total);
    }
    (vals, idx)
}

/// `MaxPool2d(2)` of one plane (row length `w`), the CNN's pool: each
/// output reads its four taps directly, in window order with the same
/// rule as the general path (the first tap, then any larger or NaN one).
/// The general path's per-tap scratch rows cost more than the work on
/// rows of 14 outputs: 4.0 ms per call on the CNN's pools at 1 thread
/// (`bench_ref --workloads cnn --profile`), 1.5 ms this way.
fn pool_2x2<T: Float>(
    src: &[T],
    w: usize,
    oh: usize,
    ow: usize,
    vals: &mut [MaybeUninit<T>],
    idx: &mut [MaybeUninit<i64>],
) {
    simd(
        #[inline(always)]
        || {
            for oi in 0..oh {
                let (r0, r1) = (2 * oi * w, (2 * oi + 1) * w);
                let (top, bottom) = (&src[r0..r0 + 2 * ow], &src[r1..r1 + 2 * ow]);
                let best = &mut vals[oi * ow..(oi + 1) * ow];
                let at = &mut idx[oi * ow..(oi + 1) * ow];
                for (j, (b, a)) in best.iter_mut().zip(at.iter_mut()).enumerate() {
                    let (mut v, mut i) = (top[2 * j], r0 + 2 * j);
                    for (t, ti) in [
                        (top[2 * j + 1], r0 + 2 * j + 1),
                        (bottom[2 * j], r1 + 2 * j),
                        (bottom[2 * j + 1], r1 + 2 * j + 1),
                    ] {
                        let take = (t > v) | t.is_nan();
                        v = if take { t } else { v };
                        i = if take { ti } else { i };
                    }
                    b.write(v);
                    a.write(i as i64);
                }
            }
        },
    )
}

/// The gradient of [`max_pool2d`]: each output's gradient added at its
/// argmax in a zeroed `[planes, plane_in]` image (`grad` and `idx` are
/// contiguous `[planes, plane_out]`). Indices come from [`max_pool2d`]; one
/// outside the plane panics.
///
/// ```
/// use tapir_kernels::cpu::max_pool2d_backward;
/// let gi = max_pool2d_backward(&[1.0f32, 2.0], &[3, 3], 1, 4);
/// assert_eq!(gi, vec![0.0, 0.0, 0.0, 3.0]);
/// ```
pub fn max_pool2d_backward<T: Float>(
    grad: &[T],
    idx: &[i64],
    planes: usize,
    plane_in: usize,
) -> Vec<T> {
    let total = planes * plane_in;
    let mut out = alloc::with_capacity(total);
    if total == 0 {
        return out;
    }
    let plane_out = grad.len() / planes;
    // Each plane is zeroed and then scattered into while it sits in L1:
    // zeroing the whole image first and scattering after was a second pass
    // over it from memory (the CNN's first pool, 12.8 MB, 2.6 ms a call).
    let fill = |p: usize, dst: &mut [MaybeUninit<T>]| {
        dst.fill(MaybeUninit::new(T::zero()));
        // SAFETY: every slot of `dst` was written just above.
        let dst = unsafe { dst.assume_init_mut() };
        let g = &grad[p * plane_out..(p + 1) * plane_out];
        let i = &idx[p * plane_out..(p + 1) * plane_out];
        for (&gv, &at) in g.iter().zip(i) {
            dst[at as usize] = dst[at as usize] + gv;
        }
    };
    let spare = &mut out.spare_capacity_mut()[..total];
    if parallel(total) {
        par_chunks_mut(spare, plane_in, fill);
    } else {
        spare
            .chunks_mut(plane_in)
            .enumerate()
            .for_each(|(p, d)| fill(p, d));
    }
    // SAFETY: `out` was empty with capacity `total`; its `planes` chunks of
    // `plane_in` slots each went to `fill` once, which writes all of them
    // (zeros) before scattering.
    unsafe { out.set_len(total) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(h: usize, w: usize, k: usize, s: usize, p: usize, d: usize) -> Conv2dGeometry {
        Conv2dGeometry {
            n: 1,
            c: 1,
            h,
            w,
            kernel: (k, k),
            stride: (s, s),
            padding: (p, p),
            dilation: (d, d),
        }
    }

    /// The window maximum by brute force over every tap, padding as -inf.
    fn naive(x: &[f64], g: &Conv2dGeometry) -> (Vec<f64>, Vec<i64>) {
        let (oh, ow) = g.out_hw().unwrap();
        let (mut v, mut ix) = (vec![], vec![]);
        for oi in 0..oh {
            for oj in 0..ow {
                let (mut best, mut at) = (f64::NEG_INFINITY, -1i64);
                for ki in 0..g.kernel.0 {
                    for kj in 0..g.kernel.1 {
                        let ih =
                            (oi * g.stride.0 + ki * g.dilation.0) as isize - g.padding.0 as isize;
                        let iw =
                            (oj * g.stride.1 + kj * g.dilation.1) as isize - g.padding.1 as isize;
                        if ih < 0 || iw < 0 || ih >= g.h as isize || iw >= g.w as isize {
                            continue;
                        }
                        let p = ih as usize * g.w + iw as usize;
                        if at < 0 || x[p] > best {
                            (best, at) = (x[p], p as i64);
                        }
                    }
                }
                v.push(best);
                ix.push(at);
            }
        }
        (v, ix)
    }

    #[test]
    fn matches_brute_force_over_strides_padding_and_dilation() {
        let x: Vec<f64> = (0..7 * 9).map(|i| ((i * 37) % 23) as f64 - 11.0).collect();
        for (k, s, p, d) in [
            (2, 2, 0, 1),
            (3, 2, 1, 1),
            (3, 1, 1, 2),
            (2, 1, 0, 3),
            (3, 3, 1, 1),
        ] {
            let g = geom(7, 9, k, s, p, d);
            assert_eq!(max_pool2d(&x, &g), naive(&x, &g), "k{k} s{s} p{p} d{d}");
        }
    }

    #[test]
    fn nan_wins_its_window() {
        let g = geom(2, 2, 2, 2, 0, 1);
        let (v, i) = max_pool2d(&[1.0f32, f32::NAN, 5.0, 2.0], &g);
        assert!(v[0].is_nan());
        assert_eq!(i, vec![1]);
    }

    #[test]
    fn backward_adds_overlapping_windows() {
        // Stride 1, kernel 2 on [0, 9, 1]: both windows pick position 1.
        let g = Conv2dGeometry {
            n: 1,
            c: 1,
            h: 1,
            w: 3,
            kernel: (1, 2),
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
        };
        let (_, i) = max_pool2d(&[0.0f64, 9.0, 1.0], &g);
        assert_eq!(
            max_pool2d_backward(&[1.5, 2.0], &i, 1, 3),
            vec![0.0, 3.5, 0.0]
        );
    }
}
