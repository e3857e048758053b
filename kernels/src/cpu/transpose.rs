//! Out-of-place matrix transpose in cache tiles, with an AVX 8 x 8 register
//! transpose for 4-byte elements.
//!
//! gemm reads a transposed operand directly, but packs a column-major
//! right-hand side (the linear layer's `x @ w.t()`) 10-20% slower than a
//! row-major one, and 40% slower at `k = 1024`; transposing `w` first costs
//! a few microseconds. A strided copy moved a transposed view one element
//! at a time, at ~0.7 ns per element.

use std::mem::MaybeUninit;

/// Tile edge: an 8 x 8 tile of f32 is eight AVX registers.
const TILE: usize = 8;

/// Edge of the squares the tiles are walked in (a multiple of `2 *
/// TILE`): 256 x 256 f32 is 256 KiB read and as much written, inside L2.
const SQUARE: usize = 256;

/// Writes the transpose of a `rows x cols` matrix into `dst`, row-major
/// `[cols, rows]`: `dst[c * rows + r] = src[off + r * rs + c]`. Every slot of
/// `dst` is written.
///
/// ```
/// use std::mem::MaybeUninit;
/// let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // [[1, 2, 3], [4, 5, 6]]
/// let mut dst = [MaybeUninit::uninit(); 6];
/// tapir_kernels::cpu::transpose_into(&src, 0, 3, (2, 3), &mut dst);
/// let t: Vec<f32> = dst.iter().map(|x| unsafe { x.assume_init() }).collect();
/// assert_eq!(t, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// ```
pub fn transpose_into<T: Copy + 'static>(
    src: &[T],
    off: usize,
    rs: usize,
    (rows, cols): (usize, usize),
    dst: &mut [MaybeUninit<T>],
) {
    assert!(
        dst.len() == rows * cols
            && (rows == 0 || cols == 0 || off + (rows - 1) * rs + cols <= src.len())
            && (rows < 2 || rs >= cols),
        "transpose kernel: a {rows} x {cols} matrix at offset {off}, row stride {rs}, \
         does not fit a source of {} or a destination of {}",
        src.len(),
        dst.len()
    );
    let (rt, ct) = (rows / TILE * TILE, cols / TILE * TILE);
    let fast = std::mem::size_of::<T>() == 4 && avx_available();
    // Tiles go in 16 x 16 blocks (a 64-byte cache line of f32 each way):
    // every source line a block touches is read whole, and every
    // destination line written whole, before the block moves on. Tile by
    // tile, a row stride of 4 KiB (k = 1024) sent all 8 rows of a tile to
    // one L1 set, and a 1024 x 256 transpose took 4x as long.
    let mut block = |r0: usize, c0: usize| {
        if fast {
            // SAFETY: AVX is present (checked above); `T` is 4 bytes, so
            // the tile is moved as f32 bit patterns without reading them as
            // numbers; the tile's 8 source rows of 8 elements start at
            // `off + (r0 + i) * rs + c0`, inside `src` (the assert, with
            // `r0 + 8 <= rows` and `c0 + 8 <= cols`), and its 8 destination
            // rows at `(c0 + j) * rows + r0`, inside `dst`.
            unsafe {
                tile_avx(
                    src.as_ptr().add(off + r0 * rs + c0).cast(),
                    rs,
                    dst.as_mut_ptr().add(c0 * rows + r0).cast(),
                    rows,
                )
            }
        } else {
            for c in c0..c0 + TILE {
                for r in r0..r0 + TILE {
                    dst[c * rows + r].write(src[off + r * rs + c]);
                }
            }
        }
    };
    // The blocks go in squares of `SQUARE` rows and columns, down each
    // 16-column band of a square before the next band. Down whole
    // columns, each band read a line from every source row, 8 KB apart
    // at 2048 columns: 4096 pages a band, too many for the TLB, and no
    // line stayed in cache until the next band read its neighbour (a
    // 2048 x 2048 f32 transpose, this function alone: 3.8-4.3 ms, now
    // 2.5-2.9).
    for rs0 in (0..rt).step_by(SQUARE) {
        for cs0 in (0..ct).step_by(SQUARE) {
            for c0 in (cs0..ct.min(cs0 + SQUARE)).step_by(2 * TILE) {
                for r0 in (rs0..rt.min(rs0 + SQUARE)).step_by(2 * TILE) {
                    for (dr, dc) in [(0, 0), (0, TILE), (TILE, 0), (TILE, TILE)] {
                        if r0 + dr < rt && c0 + dc < ct {
                            block(r0 + dr, c0 + dc);
                        }
                    }
                }
            }
        }
    }
    // The edges the tiles leave: the last `cols % 8` columns, then the last
    // `rows % 8` rows of the tiled columns.
    for c in ct..cols {
        for r in 0..rows {
            dst[c * rows + r].write(src[off + r * rs + c]);
        }
    }
    for c in 0..ct {
        for r in rt..rows {
            dst[c * rows + r].write(src[off + r * rs + c]);
        }
    }
}

/// Row-major copies of the batch's column-major `[k, n]` right-hand sides
/// (the linear layer's `w.t()`, column stride `bcs`), and each product's
/// offset into them: one copy when every product shares one matrix (a
/// broadcast weight). gemm packs such a `b` 10-20% slower than a row-major
/// one (40% at `k = 1024`), and the copy is shared by every thread's rows.
pub(crate) fn row_major_copies<T: Copy + Send + Sync + 'static>(
    b: &[T],
    b_off: &[usize],
    bcs: usize,
    k: usize,
    n: usize,
) -> (Vec<T>, Vec<usize>) {
    let shared = b_off.windows(2).all(|w| w[0] == w[1]);
    let sources = if shared { &b_off[..1] } else { b_off };
    let mut copy: Vec<T> = crate::alloc::with_capacity(sources.len() * k * n);
    let slots = &mut copy.spare_capacity_mut()[..sources.len() * k * n];
    // Each thread copies a band of `b`'s rows (16 at a time, the transpose's
    // block): the copy is ~5% of the product, serial it left the other
    // cores waiting.
    let band = k
        .div_ceil(crate::threads::num_threads())
        .next_multiple_of(16);
    for (dst, &bo) in slots.chunks_mut(k * n).zip(sources) {
        crate::threads::par_chunks_mut(dst, band * n, |i, rows| {
            transpose_into(b, bo + i * band, bcs, (n, rows.len() / n), rows)
        });
    }
    // SAFETY: `copy` was empty with capacity for every source's `k * n`
    // elements, and `transpose_into` wrote each slot of each chunk.
    unsafe { copy.set_len(sources.len() * k * n) };
    let offsets = match shared {
        true => vec![0; b_off.len()],
        false => (0..b_off.len()).map(|i| i * k * n).collect(),
    };
    (copy, offsets)
}

fn avx_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// One 8 x 8 tile of 4-byte elements: source rows at `src + i * rs`,
/// destination rows at `dst + j * ds`. Unpack pairs of rows, shuffle
/// pairs of pairs, then swap 128-bit halves: 24 shuffles per tile.
///
/// # Safety
/// AVX must be available, and the 8 rows of 8 elements at both pointers
/// readable (source) and writable (destination).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn tile_avx(src: *const f32, rs: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract: each load and store is one of the
    // tile's 8-element rows (unaligned accesses).
    unsafe {
        let mut r = [_mm256_setzero_ps(); 8];
        for (i, row) in r.iter_mut().enumerate() {
            *row = _mm256_loadu_ps(src.add(i * rs));
        }
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let s = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for j in 0..4 {
            _mm256_storeu_ps(
                dst.add(j * ds),
                _mm256_permute2f128_ps::<0x20>(s[j], s[j + 4]),
            );
            _mm256_storeu_ps(
                dst.add((j + 4) * ds),
                _mm256_permute2f128_ps::<0x31>(s[j], s[j + 4]),
            );
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile_avx(_: *const f32, _: usize, _: *mut f32, _: usize) {
    unreachable!("avx_available is false off x86_64")
}

/// Whether a coalesced view's last two dims are a transposed matrix: the
/// second-to-last unit-stride and the last striding over whole columns
/// (`x.t()`, `x.transpose(-2, -1)` of a contiguous `x`), with at least 8 x
/// 8 elements. Element by element, each read of such a view touched a new
/// cache line (a 2048 x 2048 `x.t().contiguous()` took 29 ms).
pub(super) fn transposed_last_two(shape: &[usize], strides: &[usize]) -> bool {
    let nd = shape.len();
    nd >= 2
        && strides[nd - 2] == 1
        && strides[nd - 1] >= shape[nd - 2]
        && shape[nd - 2] >= 8
        && shape[nd - 1] >= 8
}

/// [`copy_strided`](super::copy_strided) of a view that [`transposed_last_two`] accepts: each
/// `[a, b]` matrix of the batch (strides `1, rs`) through the tiled
/// [`transpose_into`], the output's rows split
/// across threads in blocks of whole rows.
pub(super) fn copy_transposed<T: Copy + Send + Sync + 'static>(
    src: &[T],
    offset: usize,
    shape: &[usize],
    strides: &[usize],
    out: &mut [MaybeUninit<T>],
) {
    let nd = shape.len();
    let (a, b, rs) = (shape[nd - 2], shape[nd - 1], strides[nd - 1]);
    let batch_offset = |batch: usize| {
        let mut rest = batch;
        let mut off = offset;
        for (&d, &st) in shape[..nd - 2].iter().zip(&strides[..nd - 2]).rev() {
            off += rest % d * st;
            rest /= d;
        }
        off
    };
    let rows = out.len() / b;
    let fill = |start: usize, chunk: &mut [MaybeUninit<T>]| {
        let (mut row, mut done) = (start, 0);
        while done < chunk.len() {
            let (batch, a0) = (row / a, row % a);
            let take = (a - a0).min((chunk.len() - done) / b);
            transpose_into(
                src,
                batch_offset(batch) + a0,
                rs,
                (b, take),
                &mut chunk[done..done + take * b],
            );
            (row, done) = (row + take, done + take * b);
        }
    };
    super::elementwise::run_rows(out, rows, b, fill);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transposed<T: Copy + 'static>(
        src: &[T],
        off: usize,
        rs: usize,
        rc: (usize, usize),
    ) -> Vec<T> {
        let mut dst = vec![MaybeUninit::uninit(); rc.0 * rc.1];
        transpose_into(src, off, rs, rc, &mut dst);
        // SAFETY: `transpose_into` writes every slot.
        dst.iter().map(|x| unsafe { x.assume_init() }).collect()
    }

    #[test]
    fn every_shape_and_stride_matches_the_definition() {
        // Tiled and edge parts, a padded row stride and an offset, in f32
        // (the AVX path), f64 and u16 (the scalar tiles).
        // The last two span several squares (`SQUARE`), with partial ones.
        let shapes = [
            (1, 1),
            (3, 5),
            (8, 8),
            (9, 17),
            (16, 8),
            (23, 40),
            (64, 33),
            (300, 517),
            (520, 270),
        ];
        for (rows, cols) in shapes {
            for (off, pad) in [(0, 0), (5, 3)] {
                let rs = cols + pad;
                let len = off + rows * rs;
                let f: Vec<f32> = (0..len).map(|i| i as f32).collect();
                let d: Vec<f64> = (0..len).map(|i| -(i as f64)).collect();
                let h: Vec<u16> = (0..len).map(|i| i as u16).collect();
                let (tf, td, th) = (
                    transposed(&f, off, rs, (rows, cols)),
                    transposed(&d, off, rs, (rows, cols)),
                    transposed(&h, off, rs, (rows, cols)),
                );
                for r in 0..rows {
                    for c in 0..cols {
                        let at = off + r * rs + c;
                        assert_eq!(tf[c * rows + r], f[at], "{rows}x{cols} ({r}, {c})");
                        assert_eq!(td[c * rows + r], d[at], "{rows}x{cols} ({r}, {c})");
                        assert_eq!(th[c * rows + r], h[at], "{rows}x{cols} ({r}, {c})");
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "transpose kernel: a 4 x 4 matrix at offset 1")]
    fn a_matrix_past_its_source_is_refused() {
        transposed(&[0.0f32; 16], 1, 4, (4, 4));
    }
}
