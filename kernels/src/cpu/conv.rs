//! im2col / col2im: convolution and pooling lowered to GEMM and reductions.

use crate::Conv2dGeometry;
use crate::threads::{install, parallel};
use rayon::prelude::*;

/// Unfolds a contiguous `[n, c, h, w]` input into `[n, c*kh*kw, oh*ow]`
/// columns; out-of-bounds taps read `pad` (0 for convolution, -inf for max
/// pooling).
pub fn im2col<T: Copy + Send + Sync + 'static>(x: &[T], g: &Conv2dGeometry, pad: T) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let l = oh * ow;
    let plane = kh * kw * l;
    let mut out = crate::alloc::filled(g.n * g.c * plane, pad);
    let fill = |nc: usize, dst: &mut [T]| {
        let src = &x[nc * g.h * g.w..(nc + 1) * g.h * g.w];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &mut dst[(ki * kw + kj) * l..(ki * kw + kj + 1) * l];
                for oi in 0..oh {
                    let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize - g.padding.0 as isize;
                    if ih < 0 || ih >= g.h as isize {
                        continue;
                    }
                    let srow = &src[ih as usize * g.w..(ih as usize + 1) * g.w];
                    let drow = &mut row[oi * ow..(oi + 1) * ow];
                    for (oj, d) in drow.iter_mut().enumerate() {
                        let iw =
                            (oj * g.stride.1 + kj * g.dilation.1) as isize - g.padding.1 as isize;
                        if iw >= 0 && iw < g.w as isize {
                            *d = srow[iw as usize];
                        }
                    }
                }
            }
        }
    };
    run_planes(&mut out, plane, fill);
    out
}

/// The adjoint of [`im2col`]: sums `[n, c*kh*kw, oh*ow]` columns back into a
/// `[n, c, h, w]` image (taps that fell in the padding are dropped).
pub fn col2im<T: crate::Float>(cols: &[T], g: &Conv2dGeometry) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let l = g.plane_cols();
    let mut out = crate::alloc::filled(g.n * g.c * g.h * g.w, T::zero());
    let fill = |nc: usize, dst: &mut [T]| {
        let src = &cols[nc * kh * kw * l..(nc + 1) * kh * kw * l];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &src[(ki * kw + kj) * l..(ki * kw + kj + 1) * l];
                for oi in 0..oh {
                    let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize - g.padding.0 as isize;
                    if ih < 0 || ih >= g.h as isize {
                        continue;
                    }
                    let drow = &mut dst[ih as usize * g.w..(ih as usize + 1) * g.w];
                    for oj in 0..ow {
                        let iw =
                            (oj * g.stride.1 + kj * g.dilation.1) as isize - g.padding.1 as isize;
                        if iw >= 0 && iw < g.w as isize {
                            drow[iw as usize] = drow[iw as usize] + row[oi * ow + oj];
                        }
                    }
                }
            }
        }
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
        install(|_| {
            out.par_chunks_mut(plane)
                .enumerate()
                .for_each(|(i, c)| fill(i, c))
        });
    }
}
