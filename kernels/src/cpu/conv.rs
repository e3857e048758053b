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
    let flat = FlatTaps::new(g);
    let fill = |nc: usize, dst: &mut [MaybeUninit<T>]| {
        let src = &x[nc * g.h * g.w..(nc + 1) * g.h * g.w];
        match &flat {
            Some(taps) => taps.unfold_plane(src, pad, dst),
            None => unfold_rows(src, g, &cols, 0..oh, pad, dst),
        }
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
/// `[n, c, h, w]` image (taps that fell in the padding are dropped). Each
/// plane is zeroed where it is summed into, while it sits in L1.
pub fn col2im<T: crate::Float>(cols: &[T], g: &Conv2dGeometry) -> Vec<T> {
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (kh, kw) = g.kernel;
    let l = g.plane_cols();
    let total = g.n * g.c * g.h * g.w;
    let mut out = crate::alloc::with_capacity(total);
    let ranges: Vec<(usize, usize, usize)> = (0..kw).map(|kj| valid_cols(g, ow, kj)).collect();
    let flat = FlatTaps::new(g);
    let fill = |nc: usize, dst: &mut [MaybeUninit<T>]| {
        dst.fill(MaybeUninit::new(T::zero()));
        // SAFETY: every slot of `dst` was written just above.
        let dst = unsafe { dst.assume_init_mut() };
        let src = &cols[nc * kh * kw * l..(nc + 1) * kh * kw * l];
        if let Some(taps) = &flat {
            return taps.fold_plane(src, dst);
        }
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
    run_planes(&mut out.spare_capacity_mut()[..total], g.h * g.w, fill);
    // SAFETY: `out` was empty with capacity `total`; `run_planes` gives each
    // of the `n * c` planes of `h * w` slots to `fill` once (none when a
    // plane is empty, and then `total` is 0), which zeroes all of them first.
    unsafe { out.set_len(total) };
    out
}

/// The taps of a stride-1 window whose output rows are as wide as the
/// input's and short (a "same" convolution on a small image, `ow == w`):
/// tap (ki, kj) then reads, over every output row it reaches, one run of
/// the flat input plane at a constant offset, in which the outputs of each
/// row whose tap falls in the padding are masked. One long vectorised loop
/// per tap instead of one per output row: the CNN's rows of 14 ran in the
/// loops' scalar remainders (col2im of its conv2's columns: 3.3 -> 1.5 ms).
struct FlatTaps {
    /// Outputs per plane (`oh * ow`).
    plane_out: usize,
    /// Kernel width.
    kw: usize,
    /// Per kernel column, over a plane's outputs: whether the tap lands
    /// inside the input row.
    inside: Vec<Vec<bool>>,
    /// Per tap (`ki * kw + kj`): the flat outputs `[start, end)` from the
    /// first to the last whose tap lands inside the input, and the input
    /// index of `start`'s tap; `None` when no tap does.
    runs: Vec<Option<(usize, usize, usize)>>,
}

impl FlatTaps {
    /// Rows at least this long vectorise well one by one.
    const MAX_ROW: usize = 64;

    fn new(g: &Conv2dGeometry) -> Option<FlatTaps> {
        let (oh, ow) = g.out_hw()?;
        if g.stride != (1, 1) || ow != g.w || ow >= Self::MAX_ROW {
            return None;
        }
        let (kh, kw) = g.kernel;
        let cols: Vec<(usize, usize, usize)> = (0..kw).map(|kj| valid_cols(g, ow, kj)).collect();
        let inside = cols
            .iter()
            .map(|&(lo, hi, _)| (0..oh * ow).map(|f| (lo..hi).contains(&(f % ow))).collect())
            .collect();
        let mut runs = Vec::with_capacity(kh * kw);
        for ki in 0..kh {
            // Output rows oi whose input row oi + off - padding is in [0, h).
            let off = ki * g.dilation.0;
            let first = g.padding.0.saturating_sub(off);
            let last = (g.h + g.padding.0).saturating_sub(off).min(oh);
            for &(lo, hi, iw0) in &cols {
                runs.push((first < last && lo < hi).then(|| {
                    let ih = first + off - g.padding.0;
                    (first * ow + lo, (last - 1) * ow + hi, ih * g.w + iw0)
                }));
            }
        }
        Some(FlatTaps {
            plane_out: oh * ow,
            kw,
            inside,
            runs,
        })
    }

    /// One input plane's im2col rows (`[kh * kw, oh * ow]`), every element
    /// written: `pad` where the tap falls outside the input.
    fn unfold_plane<T: Copy>(&self, src: &[T], pad: T, dst: &mut [MaybeUninit<T>]) {
        let l = self.plane_out;
        crate::threads::simd(
            #[inline(always)]
            || {
                for (t, run) in self.runs.iter().enumerate() {
                    let row = &mut dst[t * l..(t + 1) * l];
                    let Some((start, end, at)) = *run else {
                        row.fill(MaybeUninit::new(pad));
                        continue;
                    };
                    row[..start].fill(MaybeUninit::new(pad));
                    row[end..].fill(MaybeUninit::new(pad));
                    let inside = &self.inside[t % self.kw][start..end];
                    let taps = src[at..at + (end - start)].iter().zip(inside);
                    for (d, (&x, &m)) in row[start..end].iter_mut().zip(taps) {
                        d.write(if m { x } else { pad });
                    }
                }
            },
        )
    }

    /// The adjoint of [`FlatTaps::unfold_plane`]: adds one plane's columns
    /// into its zeroed image `dst`, tap by tap in the order of the row
    /// loop (so the sums are the same), masked taps adding 0 (`dst` starts
    /// at +0 and a sum never becomes -0, so adding +0 changes nothing;
    /// a NaN or infinity in the padding is dropped as before).
    fn fold_plane<T: crate::Float>(&self, src: &[T], dst: &mut [T]) {
        let l = self.plane_out;
        crate::threads::simd(
            #[inline(always)]
            || {
                for (t, run) in self.runs.iter().enumerate() {
                    let Some((start, end, at)) = *run else {
                        continue;
                    };
                    let inside = &self.inside[t % self.kw][start..end];
                    let taps = src[t * l + start..t * l + end].iter().zip(inside);
                    for (d, (&v, &m)) in dst[at..at + (end - start)].iter_mut().zip(taps) {
                        *d = *d + if m { v } else { T::zero() };
                    }
                }
            },
        )
    }
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
        taps(g).iter().map(|t| t.map_or(pad, |i| x[i])).collect()
    }

    /// For each column entry in order (plane, ki, kj, oi, oj): the flat
    /// input index its tap reads, `None` where it falls in the padding.
    fn taps(g: &Conv2dGeometry) -> Vec<Option<usize>> {
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
                            out.push(
                                inside.then(|| nc * g.h * g.w + ih as usize * g.w + iw as usize),
                            );
                        }
                    }
                }
            }
        }
        out
    }

    /// Geometries for the im2col and col2im tests: the flat path (stride 1,
    /// `ow == w`, short rows; dilated, padding wider than the image) and
    /// the row path (strides, no padding, rows of 70).
    fn geometries() -> Vec<Conv2dGeometry> {
        let shapes = [
            // (n, c, h, w, kernel, stride, padding, dilation)
            (2, 3, 7, 6, (3, 3), (1, 1), (1, 1), (1, 1)),
            (1, 2, 9, 11, (3, 2), (2, 3), (2, 1), (2, 1)),
            (3, 1, 5, 5, (5, 5), (1, 1), (0, 0), (1, 1)),
            (1, 1, 4, 4, (2, 2), (2, 2), (3, 3), (1, 1)),
            (2, 2, 28, 28, (3, 3), (1, 1), (1, 1), (1, 1)),
            (2, 2, 14, 14, (3, 3), (1, 1), (1, 1), (1, 1)),
            (1, 2, 9, 9, (3, 3), (1, 1), (2, 2), (2, 2)),
            (2, 1, 3, 3, (5, 5), (1, 1), (2, 2), (1, 1)),
            (1, 1, 2, 2, (5, 5), (1, 1), (2, 2), (1, 1)),
            (1, 1, 6, 4, (3, 1), (1, 1), (0, 0), (1, 1)),
            (1, 1, 70, 70, (3, 3), (1, 1), (1, 1), (1, 1)),
        ];
        let geometry = |(n, c, h, w, kernel, stride, padding, dilation)| Conv2dGeometry {
            n,
            c,
            h,
            w,
            kernel,
            stride,
            padding,
            dilation,
        };
        shapes.into_iter().map(geometry).collect()
    }

    #[test]
    fn im2col_writes_every_tap_and_pad_by_definition() {
        for g in geometries() {
            let x: Vec<f64> = (0..g.n * g.c * g.h * g.w).map(|i| i as f64 + 1.0).collect();
            for pad in [0.0, f64::NEG_INFINITY] {
                assert_eq!(im2col(&x, &g, pad), naive(&x, &g, pad), "{g:?} pad {pad}");
            }
        }
    }

    /// col2im by its definition, the adjoint of `naive`: each column entry
    /// added at its tap's input, entries whose tap fell in the padding
    /// dropped, taps in (ki, kj, oi, oj) order.
    fn naive_fold(cols: &[f64], g: &Conv2dGeometry) -> Vec<f64> {
        let mut out = vec![0.0; g.n * g.c * g.h * g.w];
        for (&v, t) in cols.iter().zip(taps(g)) {
            if let Some(i) = t {
                out[i] += v;
            }
        }
        out
    }

    #[test]
    fn col2im_sums_every_inside_tap_and_drops_the_padding() {
        for g in geometries() {
            let (oh, ow) = g.out_hw().unwrap();
            let len = g.n * g.c * g.kernel.0 * g.kernel.1 * oh * ow;
            // Values whose sums round, so a change of order would show.
            let mut cols: Vec<f64> = (0..len)
                .map(|i| ((i * 7919) % 1013) as f64 / 7.0 - 60.0)
                .collect();
            let want = naive_fold(&cols, &g);
            assert_eq!(col2im(&cols, &g), want, "{g:?}");
            // A NaN in every entry whose tap fell in the padding is dropped.
            for (v, t) in cols.iter_mut().zip(taps(&g)) {
                if t.is_none() {
                    *v = f64::NAN;
                }
            }
            assert_eq!(col2im(&cols, &g), want, "{g:?} with NaN padding");
        }
    }
}
