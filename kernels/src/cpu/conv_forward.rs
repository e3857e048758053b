//! A convolution's forward pass without im2col's full column matrix: the
//! output is cut into tiles of whole output rows per sample and channel
//! group, and each tile's inputs stay in the core's L2 cache while gemm
//! multiplies them by the weight.
//!
//! The im2col lowering writes the whole `[n, c*kh*kw, oh*ow]` matrix (113
//! MB for a batch of 64 48-channel 32 x 32 images) to memory and reads it
//! back for one batched GEMM. Here, with stride 1, a tile copies its input
//! rows once, zero-padded (`Shifted`): tap `(ki, kj)` of the window is then
//! the same padded rows read from an offset, so the convolution is `kh * kw`
//! GEMMs accumulating over the channels, with no unfolding at all; their
//! outputs run over the padded width, and the `kw - 1` columns past each
//! row's end are dropped when the tile is copied out. Other strides unfold
//! the tile's patches (`Unfolded`), channel-major so that the inside runs
//! are memcpys, and gemm reads them in place as a column-major operand
//! without packing them (transposed first to one patch per row, gemm
//! packed them again, and the two extra copies made it slower).

use super::conv::{unfold_rows, uninit, valid_cols};
use super::matmul::{Operand, gemm_strided};
use crate::{Conv2dGeometry, ConvSpec, Float};
use gemm::Parallelism;
use std::mem::MaybeUninit;
use std::ops::Range;

/// Bytes of one tile's inputs and outputs: with the weight, inside a 2 MiB
/// L2.
const TILE_BYTES: usize = 512 << 10;

/// `y = conv2d(x, w) + bias` for a contiguous `[n, c, h, w]` input `x` and
/// a contiguous `[oc, c / groups, kh, kw]` weight `w`: a contiguous
/// `[n, oc, oh, ow]` output (PyTorch's cross-correlation, zero padding).
///
/// ```
/// use tapir_kernels::{Conv2dGeometry, ConvSpec};
/// let geometry = Conv2dGeometry { n: 1, c: 1, h: 3, w: 3, kernel: (2, 2), stride: (1, 1), padding: (0, 0), dilation: (1, 1) };
/// let spec = ConvSpec { geometry, oc: 1, groups: 1 };
/// let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
/// let y = tapir_kernels::cpu::conv2d_forward(&x, &[1.0, 0.0, 0.0, 1.0], Some(&[0.5]), &spec);
/// assert_eq!(y, [6.5, 8.5, 12.5, 14.5]); // x[i][j] + x[i+1][j+1] + 0.5
/// ```
pub fn conv2d_forward<T: Float>(x: &[T], w: &[T], bias: Option<&[T]>, s: &ConvSpec) -> Vec<T> {
    let g = &s.geometry;
    let (oh, ow) = g.out_hw().expect("conv geometry checked by the caller");
    let (cg, ocg) = (g.c / s.groups, s.oc / s.groups);
    let taps = g.kernel.0 * g.kernel.1;
    assert!(
        s.groups > 0
            && g.c == cg * s.groups
            && s.oc == ocg * s.groups
            && x.len() == g.n * g.c * g.h * g.w
            && w.len() == s.oc * cg * taps
            && bias.is_none_or(|b| b.len() == s.oc),
        "conv2d_forward kernel: an input of {} and a weight of {} do not fit {s:?}",
        x.len(),
        w.len()
    );
    let total = g.n * s.oc * oh * ow;
    let mut out: Vec<T> = crate::alloc::with_capacity(total);
    let plan = Plan::new(s);
    let units = g.n * s.groups;
    // Tiles small enough that every thread gets a few (batch-1 inference),
    // but of at least 128 positions: each tile's GEMM packs the whole
    // weight again (2304 x 256 at ResNet's 14 x 14 x 256).
    let threads = crate::threads::num_threads();
    let rows = plan
        .rows_per_tile::<T>()
        .min(
            oh.div_ceil((4 * threads).div_ceil(units.max(1)))
                .max(128usize.div_ceil(ow)),
        )
        .max(1);
    let tiles = oh.div_ceil(rows);
    // Shifted GEMMs read the weight one tap at a time: `[groups, taps, cg,
    // ocg]`, so that each tap's `[cg, ocg]` is a dense row-major operand.
    let tap_major = plan.shifted.then(|| tap_major(w, s));
    let w = tap_major.as_deref().unwrap_or(w);
    let dst = OutPtr(out.spare_capacity_mut().as_mut_ptr());
    let task = |i: usize| {
        let (unit, tile) = (i / tiles, i % tiles);
        let (sample, group) = (unit / s.groups, unit % s.groups);
        let t = Tile {
            x: &x[(sample * g.c + group * cg) * g.h * g.w..][..cg * g.h * g.w],
            w: &w[group * ocg * cg * taps..][..ocg * cg * taps],
            bias: bias.map(|b| &b[group * ocg..(group + 1) * ocg]),
            oy: tile * rows..((tile + 1) * rows).min(oh),
            first: (sample * s.oc + group * ocg) * oh * ow,
        };
        // SAFETY: tasks write disjoint outputs: channels `group * ocg..` of
        // `sample`, at rows `oy` of each plane, each `(unit, tile)` once.
        unsafe { plan.run(&t, dst) };
    };
    if total > 0 {
        crate::threads::parallel_for(units * tiles, task);
    }
    if let Some(v) = tap_major {
        crate::alloc::recycle(v);
    }
    // SAFETY: the tasks wrote all `n * oc * oh * ow` outputs (every unit's
    // `ocg` channels over all of its tiles' rows).
    unsafe { out.set_len(total) };
    out
}

/// The `[oc, cg, kh, kw]` weight as `[groups, kh * kw, cg, ocg]`.
fn tap_major<T: Float>(w: &[T], s: &ConvSpec) -> Vec<T> {
    let (cg, ocg) = (s.geometry.c / s.groups, s.oc / s.groups);
    let taps = s.geometry.kernel.0 * s.geometry.kernel.1;
    let mut out = crate::alloc::filled(w.len(), T::zero());
    let per_group = ocg * cg * taps;
    for (src, dst) in w.chunks(per_group).zip(out.chunks_mut(per_group)) {
        for (j, filter) in src.chunks(cg * taps).enumerate() {
            for (c, channel) in filter.chunks(taps).enumerate() {
                for (tap, &v) in channel.iter().enumerate() {
                    dst[(tap * cg + c) * ocg + j] = v;
                }
            }
        }
    }
    out
}

/// What one task convolves: one sample's channel group, output rows `oy`.
struct Tile<'a, T> {
    /// The group's `cg` input planes.
    x: &'a [T],
    /// The group's `[ocg, cg, kh, kw]` weight (`Unfolded`), or `[kh * kw,
    /// cg, ocg]` (`Shifted`).
    w: &'a [T],
    bias: Option<&'a [T]>,
    oy: Range<usize>,
    /// Index in the output of the group's first channel plane.
    first: usize,
}

/// How the tiles of one convolution run (see the module's doc).
struct Plan {
    g: Conv2dGeometry,
    out_hw: (usize, usize),
    /// Input channels and output channels per group.
    cg: usize,
    ocg: usize,
    shifted: bool,
    /// `valid_cols` of each kernel column (for `Unfolded`).
    cols: Vec<(usize, usize, usize)>,
}

impl Plan {
    fn new(s: &ConvSpec) -> Plan {
        let g = s.geometry;
        let out_hw = g.out_hw().expect("conv geometry checked by the caller");
        Plan {
            g,
            out_hw,
            cg: g.c / s.groups,
            ocg: s.oc / s.groups,
            // With few input channels each tap's GEMM is too thin; with
            // many output channels (ResNet's 14 x 14 x 256, 7 x 7 x 512)
            // the taps' repeated passes over the outputs cost more than
            // unfolding the small image (4.8 against 1.9 ms at batch 1).
            shifted: g.stride == (1, 1) && g.c / s.groups >= 8 && s.oc / s.groups <= 128,
            cols: (0..g.kernel.1)
                .map(|kj| valid_cols(&g, out_hw.1, kj))
                .collect(),
        }
    }

    /// Width of a zero-padded input row.
    fn padded_w(&self) -> usize {
        self.g.w + 2 * self.g.padding.1
    }

    /// Output rows per tile: its inputs and outputs within `TILE_BYTES`.
    fn rows_per_tile<T>(&self) -> usize {
        let (taps, ow) = (self.g.kernel.0 * self.g.kernel.1, self.out_hw.1);
        let per_row = if self.shifted {
            (self.cg + self.ocg) * self.padded_w()
        } else {
            self.cg * taps * ow
        };
        TILE_BYTES / (per_row * size_of::<T>()).max(1)
    }

    /// Convolves tile `t` into the output at `dst`.
    ///
    /// # Safety
    /// `dst` is the whole output, and no one else writes `t`'s part of it
    /// during the call.
    unsafe fn run<T: Float>(&self, t: &Tile<'_, T>, dst: OutPtr<T>) {
        let (oh, ow) = self.out_hw;
        let r = t.oy.len();
        // The tile as `[positions, ocg]` at `buf + q * 1 + j * stride`, with
        // positions on a grid `row_w` wide.
        let (row_w, buf) = if self.shifted {
            (self.padded_w(), self.shifted_product(t))
        } else {
            (ow, self.unfolded_product(t))
        };
        let stride = r * row_w;
        for j in 0..self.ocg {
            for (rr, y) in t.oy.clone().enumerate() {
                let src = &buf[j * stride + rr * row_w..][..ow];
                // SAFETY: row `y` of channel `j` is this task's alone (the
                // caller's contract) and lies inside the output.
                let d = unsafe { dst.row(t.first + (j * oh + y) * ow, ow) };
                d.copy_from_slice(uninit(src));
            }
        }
        crate::alloc::recycle(buf);
    }

    /// `Shifted`: the zero-padded input rows, then one accumulating GEMM
    /// per tap; the `[ocg, r * padded_w]` products.
    fn shifted_product<T: Float>(&self, t: &Tile<'_, T>) -> Vec<T> {
        let g = &self.g;
        let (kh, kw) = g.kernel;
        let (wp, ow) = (self.padded_w(), self.out_hw.1);
        let r = t.oy.len();
        let rows_in = r + (kh - 1) * g.dilation.0;
        let plane_in = rows_in * wp;
        let mut padded = crate::alloc::filled(self.cg * plane_in, T::zero());
        for (c, plane) in padded.chunks_mut(plane_in).enumerate() {
            for (i, row) in plane.chunks_mut(wp).enumerate() {
                let ih = (t.oy.start + i) as isize - g.padding.0 as isize;
                if (0..g.h as isize).contains(&ih) {
                    let src = &t.x[(c * g.h + ih as usize) * g.w..][..g.w];
                    row[g.padding.1..g.padding.1 + g.w].copy_from_slice(src);
                }
            }
        }
        let mut prod = self.bias_rows(t.bias, r * wp);
        // Position q = row * wp + col of the grid; the last row's grid ends
        // at its last real output, so every tap reads inside `padded`.
        let m = (r - 1) * wp + ow;
        for ki in 0..kh {
            for kj in 0..kw {
                let shift = ki * g.dilation.0 * wp + kj * g.dilation.1;
                let tap = ki * kw + kj;
                // SAFETY: `prod` holds the `ocg` columns of `r * wp` rows,
                // initialised (the bias), and only this call writes it.
                unsafe {
                    gemm_strided(
                        (m, self.ocg, self.cg),
                        (prod.as_mut_ptr(), 1, r * wp),
                        true,
                        Operand::new(&padded, shift, 1, plane_in),
                        Operand::new(t.w, tap * self.cg * self.ocg, self.ocg, 1),
                        Parallelism::None,
                    )
                };
            }
        }
        crate::alloc::recycle(padded);
        prod
    }

    /// `Unfolded`: the tile's patches, channel-major, times the weight; the
    /// `[ocg, r * ow]` products.
    fn unfolded_product<T: Float>(&self, t: &Tile<'_, T>) -> Vec<T> {
        let g = &self.g;
        let taps = g.kernel.0 * g.kernel.1;
        let k = self.cg * taps;
        let lt = t.oy.len() * self.out_hw.1;
        let mut patches: Vec<T> = crate::alloc::with_capacity(k * lt);
        let slots = &mut patches.spare_capacity_mut()[..k * lt];
        for (c, rows) in slots.chunks_mut(taps * lt).enumerate() {
            let src = &t.x[c * g.h * g.w..][..g.h * g.w];
            unfold_rows(src, g, &self.cols, t.oy.clone(), T::zero(), rows);
        }
        // SAFETY: `unfold_rows` wrote every element of each channel's
        // `taps * lt` rows, and the channels cover the `k * lt` elements.
        unsafe { patches.set_len(k * lt) };
        let mut prod = self.bias_rows(t.bias, lt);
        if k == 0 {
            // No input channels: the bias alone (gemm wants k > 0).
            return prod;
        }
        // SAFETY: `prod` holds the `ocg` columns of `lt` rows, initialised.
        unsafe {
            gemm_strided(
                (lt, self.ocg, k),
                (prod.as_mut_ptr(), 1, lt),
                true,
                Operand::new(&patches, 0, 1, lt),
                Operand::new(t.w, 0, 1, k),
                Parallelism::None,
            )
        };
        crate::alloc::recycle(patches);
        prod
    }

    /// `ocg` rows of `len`, each its channel's bias (or zero).
    fn bias_rows<T: Float>(&self, bias: Option<&[T]>, len: usize) -> Vec<T> {
        let mut rows = crate::alloc::filled(self.ocg * len, T::zero());
        if let Some(b) = bias {
            for (row, &v) in rows.chunks_mut(len).zip(b) {
                row.fill(v);
            }
        }
        rows
    }
}

/// The output's base pointer, shared by the tasks that write its disjoint
/// tiles.
#[derive(Clone, Copy)]
struct OutPtr<T>(*mut MaybeUninit<T>);

impl<T> OutPtr<T> {
    /// The `len` outputs from index `i` (a method, so that closures capture
    /// the whole `Sync` wrapper rather than its raw pointer).
    ///
    /// # Safety
    /// They lie inside the output, and no one else touches them while the
    /// slice lives.
    unsafe fn row<'a>(self, i: usize, len: usize) -> &'a mut [MaybeUninit<T>] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(i), len) }
    }
}

// SAFETY: the tasks write disjoint elements through it (see the task).
unsafe impl<T: Send> Send for OutPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for OutPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Conv2dGeometry;

    /// The convolution by its definition, in f64.
    fn naive(x: &[f64], w: &[f64], bias: Option<&[f64]>, s: &ConvSpec) -> Vec<f64> {
        let g = &s.geometry;
        let (oh, ow) = g.out_hw().unwrap();
        let (cg, ocg) = (g.c / s.groups, s.oc / s.groups);
        let (kh, kw) = g.kernel;
        let mut out = vec![0.0; g.n * s.oc * oh * ow];
        for n in 0..g.n {
            for o in 0..s.oc {
                let grp = o / ocg;
                for oi in 0..oh {
                    for oj in 0..ow {
                        let mut acc = bias.map_or(0.0, |b| b[o]);
                        for c in 0..cg {
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let ih = (oi * g.stride.0 + ki * g.dilation.0) as isize
                                        - g.padding.0 as isize;
                                    let iw = (oj * g.stride.1 + kj * g.dilation.1) as isize
                                        - g.padding.1 as isize;
                                    if ih < 0 || iw < 0 || ih >= g.h as isize || iw >= g.w as isize
                                    {
                                        continue;
                                    }
                                    let xi = ((n * g.c + grp * cg + c) * g.h + ih as usize) * g.w
                                        + iw as usize;
                                    acc += x[xi] * w[((o * cg + c) * kh + ki) * kw + kj];
                                }
                            }
                        }
                        out[((n * s.oc + o) * oh + oi) * ow + oj] = acc;
                    }
                }
            }
        }
        out
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64 / 500.0) - 1.0)
            .collect()
    }

    #[test]
    fn tiles_equal_the_definition_over_strides_padding_dilation_and_groups() {
        // (n, c, h, w, oc, kernel, stride, padding, dilation, groups): rows
        // 4 and 5 are tall enough to be cut into several tiles; rows 4 and 6
        // take the shifted GEMMs (stride 1, 8+ input channels per group, at
        // most 128 output channels), the others unfold.
        let cases = [
            (2, 3, 7, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
            (1, 4, 9, 8, 6, (3, 2), (2, 1), (0, 2), (1, 2), 2),
            (3, 6, 5, 5, 6, (1, 1), (1, 1), (0, 0), (1, 1), 6),
            (2, 2, 4, 4, 2, (5, 5), (3, 3), (2, 2), (1, 1), 1),
            (1, 64, 70, 70, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1),
            (2, 48, 40, 33, 5, (3, 3), (2, 2), (1, 0), (2, 1), 1),
            (2, 16, 9, 7, 6, (3, 3), (1, 1), (1, 2), (2, 2), 2),
            (1, 8, 6, 6, 130, (3, 3), (1, 1), (1, 1), (1, 1), 1),
            (2, 0, 4, 4, 3, (3, 3), (1, 1), (1, 1), (1, 1), 1),
        ];
        for (i, &(n, c, h, w, oc, kernel, stride, padding, dilation, groups)) in
            cases.iter().enumerate()
        {
            let geometry = Conv2dGeometry {
                n,
                c,
                h,
                w,
                kernel,
                stride,
                padding,
                dilation,
            };
            let s = ConvSpec {
                geometry,
                oc,
                groups,
            };
            let (oh, _) = geometry.out_hw().unwrap();
            let k = c / groups * kernel.0 * kernel.1;
            let x = values(n * c * h * w, i as u64);
            let wt = values(oc * k, 7 + i as u64);
            let b = values(oc, 11);
            let want = naive(&x, &wt, Some(&b), &s);
            let got = conv2d_forward(&x, &wt, Some(&b), &s);
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() < 1e-12,
                    "case {i}, output {j}: got {g}, want {w}"
                );
            }
            let plan = Plan::new(&s);
            let shifted = i == 4 || i == 6;
            assert!(
                plan.shifted == shifted,
                "case {i} should be shifted: {shifted}"
            );
            if i == 4 || i == 5 {
                let rows = plan.rows_per_tile::<f64>();
                assert!(rows < oh, "case {i} should span several tiles");
            }
            let unbiased = conv2d_forward(&x, &wt, None, &s);
            let want_unbiased = naive(&x, &wt, None, &s);
            assert!(
                unbiased
                    .iter()
                    .zip(&want_unbiased)
                    .all(|(g, w)| (g - w).abs() < 1e-12)
            );
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let w32: Vec<f32> = wt.iter().map(|&v| v as f32).collect();
            let got = conv2d_forward(&x32, &w32, None, &s);
            let scale = (k as f64).sqrt() * 1e-6;
            for (j, (g, w)) in got.iter().zip(&want_unbiased).enumerate() {
                assert!(
                    (*g as f64 - w).abs() <= scale,
                    "case {i} in f32, output {j}: got {g}, want {w}"
                );
            }
        }
    }
}
