//! Copies between views: a strided view into a fresh row-major buffer,
//! and one view into another in place; transposed views go through the
//! tiled transpose.

use super::elementwise::{map_dense, run_rows, zip_inplace};
use super::strided::{coalesce, for_rows, row_count};
use super::transpose::{copy_transposed, transposed_last_two};
use crate::Layout;
use crate::alloc;
use std::mem::MaybeUninit;

/// Copies a strided view into a fresh row-major buffer: unit-stride rows
/// as block copies, written once into the buffer (no zero-fill first). As
/// a generic map it ran a scalar loop per element: a head merge
/// (`[32, 4, 128, 64]` transposed to `[32, 128, 4, 64]`) took 0.41 ms.
pub fn copy_strided<T: Copy + Send + Sync + Default + 'static>(src: &[T], l: &Layout) -> Vec<T> {
    let n = l.numel();
    if let Some(off) = l.contiguous_offset() {
        return map_dense(&src[off..off + n], |x| x);
    }
    let (shape, strides) = coalesce(&l.shape, &[&l.strides]);
    let mut out = alloc::with_capacity(n);
    if transposed_last_two(&shape, &strides[0]) {
        copy_transposed(
            src,
            l.offset,
            &shape,
            &strides[0],
            &mut out.spare_capacity_mut()[..n],
        );
        // SAFETY: `out` was empty with capacity `n`, and `copy_transposed`
        // wrote each of its `n` slots.
        unsafe { out.set_len(n) };
        return out;
    }
    let rows = row_count(&shape);
    let len = n / rows.max(1);
    let fill = |start: usize, chunk: &mut [MaybeUninit<T>]| {
        let mut pos = 0;
        let end = start + chunk.len() / len.max(1);
        for_rows(
            &shape,
            [&strides[0]],
            [l.offset],
            start,
            end,
            |[b], len, [s]| {
                let dst = &mut chunk[pos..pos + len];
                if s == 1 {
                    for (d, &x) in dst.iter_mut().zip(&src[b..b + len]) {
                        d.write(x);
                    }
                } else {
                    for (i, d) in dst.iter_mut().enumerate() {
                        d.write(src[b + i * s]);
                    }
                }
                pos += len;
            },
        );
    };
    run_rows(&mut out.spare_capacity_mut()[..n], rows, len, fill);
    // SAFETY: `out` was empty with capacity `n`; `run_rows` hands `fill`
    // every row of the `n` slots once, and `fill` writes each element of
    // each row it is given.
    unsafe { out.set_len(n) };
    out
}

/// `dst[l] = src[ls]`: the elements of one view copied into another of the
/// same shape, bit for bit (a row copy where both rows are unit-stride).
///
/// ```
/// use tapir_kernels::{Layout, cpu};
/// let mut dst = vec![0u16; 6];
/// // The 2x2 transpose of [1, 2, 3, 4] into columns 1..3 of a 2x3 buffer.
/// let l = Layout { shape: vec![2, 2], strides: vec![3, 1], offset: 1 };
/// let ls = Layout { shape: vec![2, 2], strides: vec![1, 2], offset: 0 };
/// cpu::copy_into(&mut dst, &l, &[1, 2, 3, 4], &ls);
/// assert_eq!(dst, vec![0, 1, 3, 0, 2, 4]);
/// ```
pub fn copy_into<T: Copy + Send + Sync + 'static>(
    dst: &mut [T],
    l: &Layout,
    src: &[T],
    ls: &Layout,
) {
    // A transposed source into a row-major target (`y.copy_(x.t())`): the
    // tiled transpose, as `copy_strided` (element by element, 21 ms at
    // 2048 x 2048; through a transposed copy first, two passes).
    if let Some(od) = l.contiguous_offset() {
        let (shape, strides) = coalesce(&ls.shape, &[&ls.strides]);
        if transposed_last_two(&shape, &strides[0]) {
            let d = &mut dst[od..od + l.numel()];
            // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the slots are
            // only written, each with a value of `T`, so `d` stays
            // initialised.
            let d = unsafe { &mut *(d as *mut [T] as *mut [MaybeUninit<T>]) };
            copy_transposed(src, ls.offset, &shape, &strides[0], d);
            return;
        }
    }
    zip_inplace(
        dst,
        l,
        src,
        ls,
        #[inline(always)]
        |_, y| y,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `copy_strided` against a walk of the view, for transposed, sliced,
    /// broadcast, empty and 0-d views, on 1 and 2 threads.
    #[test]
    fn copy_strided_matches_a_walk_of_the_view() {
        let src: Vec<u16> = (0..200_000).map(|i| i as u16).collect();
        let mut sliced = Layout::contiguous(&[50, 40, 60]).transpose(0, 2);
        sliced.offset = 7;
        let views = [
            Layout::contiguous(&[32, 4, 128, 12]).transpose(1, 2),
            sliced,
            Layout::contiguous(&[1, 300]).broadcast_to(&[500, 300]),
            Layout::contiguous(&[0, 3]).transpose(0, 1),
            Layout::contiguous(&[]),
        ];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            for l in &views {
                let mut want = vec![];
                l.for_each_offset(|o| want.push(src[o]));
                assert_eq!(copy_strided(&src, l), want, "{l:?}");
            }
        }
    }

    #[test]
    fn transposed_views_copy_by_tiles_as_a_walk_of_the_view() {
        let src: Vec<u32> = (0..700_000).collect();
        let offset = |mut l: Layout, off: usize| {
            l.offset = off;
            l
        };
        let mut narrowed = Layout::contiguous(&[100, 64]);
        narrowed.shape[1] = 40; // columns 0..40 of each row of 64
        let views = [
            offset(Layout::contiguous(&[300, 257]).transpose(0, 1), 3),
            offset(Layout::contiguous(&[3, 37, 45]).transpose(1, 2), 5),
            Layout::contiguous(&[4, 20, 30, 9]).transpose(2, 3),
            narrowed.transpose(0, 1),
            Layout::contiguous(&[1024, 600]).transpose(0, 1),
            Layout::contiguous(&[9, 7]).transpose(0, 1),
        ];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            for (i, l) in views.iter().enumerate() {
                let (shape, strides) = coalesce(&l.shape, &[&l.strides]);
                assert!(
                    transposed_last_two(&shape, &strides[0]) == (i < 5),
                    "view {i}: {l:?}"
                );
                let mut want = vec![];
                l.for_each_offset(|o| want.push(src[o]));
                assert_eq!(copy_strided(&src, l), want, "view {i}: {l:?}");
                let half: Vec<u16> = src.iter().map(|&v| v as u16).collect();
                let want16: Vec<u16> = want.iter().map(|&v| v as u16).collect();
                assert_eq!(copy_strided(&half, l), want16, "view {i} in 2 bytes");
            }
        }
    }
}
