//! im2col / col2im: convolution and average pooling lowered to GEMM and
//! reductions.

use crate::Conv2dGeometry;
use crate::threads::{par_chunks_mut, parallel};

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
/// pooling). Row by row: the padding runs are filled, and the inside run is
/// a slice copy at stride 1.
pub fn im2col<T: Copy + Send + Sync + 'static>(x: &[T], g: &Conv2dGeometry, pad: T) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let l = oh * ow;
    let plane = kh * kw * l;
    let mut out = crate::alloc::filled(g.n * g.c * plane, pad);
    let cols: Vec<(usize, usize, usize)> = (0..kw).map(|kj| valid_cols(g, ow, kj)).collect();
    let fill = |nc: usize, dst: &mut [T]| {
        let src = &x[nc * g.h * g.w..(nc + 1) * g.h * g.w];
        for ki in 0..kh {
            for (kj, &(lo, hi, iw0)) in cols.iter().enumerate() {
                let row = &mut dst[(ki * kw + kj) * l..(ki * kw + kj + 1) * l];
                for oi in 0..oh {
                    let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize - g.padding.0 as isize;
                    if ih < 0 || ih >= g.h as isize || lo == hi {
                        continue; // already `pad`
                    }
                    let srow = &src[ih as usize * g.w..(ih as usize + 1) * g.w];
                    let drow = &mut row[oi * ow + lo..oi * ow + hi];
                    if g.stride.1 == 1 {
                        drow.copy_from_slice(&srow[iw0..iw0 + (hi - lo)]);
                    } else {
                        for (t, d) in drow.iter_mut().enumerate() {
                            *d = srow[iw0 + t * g.stride.1];
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
