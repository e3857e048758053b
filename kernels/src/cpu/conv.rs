//! im2col / col2im: convolution and average pooling lowered to GEMM and
//! reductions.

use crate::Conv2dGeometry;
use crate::threads::{par_chunks_mut, parallel};
use std::mem::MaybeUninit;

/// For kernel column `kj`, the outputs `[lo, hi)` along the width whose tap
/// lands inside the input (`oj * stride + kj * dilation - padding` in
/// `[0, w)`), and the input column of output `lo`'s tap.
pub(super) fn valid_cols(g: &Conv2dGeometry, ow: usize, kj: usize) -> (usize, usize, usize) {
    let (s, p, d) = (g.stride.1, g.padding.1, g.dilation.1);
    let off = kj * d;
    let lo = p.saturating_sub(off).div_ceil(s).min(ow);
    let hi = if g.w + p > off {
        (g.w + p - off).div_ceil(s).min(ow)
    } else {
        0
    }
    .max(lo);
    (lo, hi, (lo * s + off).saturating_sub(p))
}

/// Unfolds a contiguous `[n, c, h, w]` input into `[n, c*kh*kw, oh*ow]`
/// columns; out-of-bounds taps read `pad` (0 for convolution, -inf for max
/// pooling). Row by row, each element written once, straight into the
/// buffer: the padding runs are filled, and the inside run is copied (filling
/// the whole buffer with `pad` first doubled the writes of the CNN's 29 MB
/// of columns).
pub fn im2col<T: Copy + Send + Sync + 'static>(x: &[T], g: &Conv2dGeometry, pad: T) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let cols: Vec<(usize, usize, usize)> =
        (0..g.kernel.1).map(|kj| valid_cols(g, ow, kj)).collect();
    let plane = g.kernel.0 * g.kernel.1 * g.plane_cols();
    let total = g.n * g.c * plane;
    let mut out: Vec<T> = crate::alloc::with_capacity(total);
    let fill = |nc: usize, dst: &mut [MaybeUninit<T>]| {
        unfold_rows(
            &x[nc * g.h * g.w..(nc + 1) * g.h * g.w],
            g,
            &cols,
            0..oh,
            pad,
            dst,
        )
    };
    run_planes(&mut out.spare_capacity_mut()[..total], plane, fill);
    // SAFETY: `out` was empty with capacity `total`; `run_planes` gives each
    // of the `n * c` planes to `fill` once (none when `plane` is 0, and then
    // `total` is 0), and `unfold_rows` writes every element of its plane.
    unsafe { out.set_len(total) };
    out
}

/// One input plane's `kh * kw` im2col rows, restricted to output rows `oy`:
/// `dst` is `[kh * kw, oy.len() * ow]`, and every element of it is written
/// (the padding runs filled with `pad`, the inside run copied). `cols` are
/// [`valid_cols`] of each kernel column.
pub(super) fn unfold_rows<T: Copy>(
    src: &[T],
    g: &Conv2dGeometry,
    cols: &[(usize, usize, usize)],
    oy: std::ops::Range<usize>,
    pad: T,
    dst: &mut [MaybeUninit<T>],
) {
    let (_, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let lt = oy.len() * ow;
    assert!(
        src.len() == g.h * g.w && dst.len() == kh * kw * lt && cols.len() == kw,
        "im2col kernel: a plane of {} into rows of {} do not fit {g:?}",
        src.len(),
        dst.len()
    );
    let pad = MaybeUninit::new(pad);
    for ki in 0..kh {
        for (kj, &(lo, hi, iw0)) in cols.iter().enumerate() {
            let row = &mut dst[(ki * kw + kj) * lt..(ki * kw + kj + 1) * lt];
            for (drow, oi) in row.chunks_mut(ow).zip(oy.clone()) {
                let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize - g.padding.0 as isize;
                if ih < 0 || ih >= g.h as isize || lo == hi {
                    drow.fill(pad);
                    continue;
                }
                drow[..lo].fill(pad);
                drow[hi..].fill(pad);
                let srow = &src[ih as usize * g.w..(ih as usize + 1) * g.w];
                let inside = &mut drow[lo..hi];
                if g.stride.1 == 1 {
                    inside.copy_from_slice(uninit(&srow[iw0..iw0 + (hi - lo)]));
                } else {
                    for (t, d) in inside.iter_mut().enumerate() {
                        d.write(srow[iw0 + t * g.stride.1]);
                    }
                }
            }
        }
    }
}

/// `s` viewed as possibly-uninitialised values, for a `copy_from_slice`
/// (a memcpy) into spare capacity.
pub(super) fn uninit<T>(s: &[T]) -> &[MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has `T`'s size and alignment, and every `T`
    // is a valid `MaybeUninit<T>`; the view is read-only.
    unsafe { &*(s as *const [T] as *const [MaybeUninit<T>]) }
}

/// The adjoint of [`im2col`]: sums `[n, c*kh*kw, oh*ow]` columns back into a
/// `[n, c, h, w]` image (taps that fell in the padding are dropped).
pub fn col2im<T: crate::Float>(cols: &[T], g: &Conv2dGeometry) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let l = g.plane_cols();
    let mut out = crate::alloc::filled(g.n * g.c * g.h * g.w, T::zero());
    let ranges: Vec<(usize, usize, usize)> = (0..kw).map(|kj| valid_cols(g, ow, kj)).collect();
    let fill = |nc: usize, dst: &mut [T]| {
        let src = &cols[nc * kh * kw * l..(nc + 1) * kh * kw * l];
        crate::threads::simd(
            #[inline(always)]
            || {
                for ki in 0..kh {
                    for (kj, &(lo, hi, iw0)) in ranges.iter().enumerate() {
                        let row = &src[(ki * kw + kj) * l..(ki * kw + kj + 1) * l];
                        for oi in 0..oh {
                            let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize
                                - g.padding.0 as isize;
                            if ih < 0 || ih >= g.h as isize || lo == hi {
                                continue;
                            }
                            let drow = &mut dst[ih as usize * g.w..(ih as usize + 1) * g.w];
                            let srow = &row[oi * ow + lo..oi * ow + hi];
                            if g.stride.1 == 1 {
                                let d = &mut drow[iw0..iw0 + (hi - lo)];
                                for (d, &v) in d.iter_mut().zip(srow) {
                                    *d = *d + v;
                                }
                            } else {
                                for (t, &v) in srow.iter().enumerate() {
                                    let d = &mut drow[iw0 + t * g.stride.1];
                                    *d = *d + v;
                                }
                            }
                        }
                    }
                }
            },
        )
    };
    run_planes(&mut out, g.h * g.w, fill);
    out
}

fn run_planes<T: Send>(out: &mut [T], plane: usize, fill: impl Fn(usize, &mut [T]) + Sync) {
    if plane == 0 {
        return;
    }
    if !parallel(out.len()) {
        out.chunks_mut(plane)
            .enumerate()
            .for_each(|(i, c)| fill(i, c));
    } else {
        par_chunks_mut(out, plane, fill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// im2col by its definition: tap (ki, kj) of output (oi, oj) reads input
    /// (oi * s + ki * d - p, oj * s + kj * d - p), or `pad` outside.
    fn naive(x: &[f64], g: &Conv2dGeometry, pad: f64) -> Vec<f64> {
        let (oh, ow) = g.out_hw().unwrap();
        let mut out = vec![];
        for nc in 0..g.n * g.c {
            for ki in 0..g.kernel.0 {
                for kj in 0..g.kernel.1 {
                    for oi in 0..oh {
                        for oj in 0..ow {
                            let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize
                                - g.padding.0 as isize;
                            let iw = (oj * g.stride.1 + kj * g.dilation.1) as isize
                                - g.padding.1 as isize;
                            let inside =
                                (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw);
                            out.push(match inside {
                                true => x[nc * g.h * g.w + ih as usize * g.w + iw as usize],
                                false => pad,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn im2col_writes_every_tap_and_pad_by_definition() {
        let shapes = [
            // (n, c, h, w, kernel, stride, padding, dilation)
            (2, 3, 7, 6, (3, 3), (1, 1), (1, 1), (1, 1)),
            (1, 2, 9, 11, (3, 2), (2, 3), (2, 1), (2, 1)),
            (3, 1, 5, 5, (5, 5), (1, 1), (0, 0), (1, 1)),
            (1, 1, 4, 4, (2, 2), (2, 2), (3, 3), (1, 1)),
            (2, 2, 28, 28, (3, 3), (1, 1), (1, 1), (1, 1)),
        ];
        for (n, c, h, w, kernel, stride, padding, dilation) in shapes {
            let g = Conv2dGeometry {
                n,
                c,
                h,
                w,
                kernel,
                stride,
                padding,
                dilation,
            };
            let x: Vec<f64> = (0..n * c * h * w).map(|i| i as f64 + 1.0).collect();
            for pad in [0.0, f64::NEG_INFINITY] {
                assert_eq!(im2col(&x, &g, pad), naive(&x, &g, pad), "{g:?} pad {pad}");
            }
        }
    }
}
