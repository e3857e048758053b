//! Products over one dim of a contiguous `[outer, len, inner]` tensor
//! (`torch.prod`'s forward without autograd; with it, the runtime
//! multiplies halves so that the gradient of a zero factor is exact).

use crate::float::Float;
use crate::threads::{PARALLEL_GRAIN, num_threads, outputs_per_task, par_chunks_mut, simd};

/// Columns multiplied together in one pass over a plane's rows: each row's
/// stretch is read whole and in order, and the running products (8 KiB of
/// f64 at most) stay in L1. With blocks of 64 a 2048 x 2048 f32 product
/// over dim 0 (rows 8 KiB apart) took 1.28 ms on one core, with 1024 0.68.
const COLUMN_BLOCK: usize = 1024;

/// Sixteen running products along a row, so the multiplications do not
/// wait on each other and vectorise.
const LANES: usize = 16;

/// The product over the middle dim of `x` viewed as `[outer, len, inner]`:
/// `outer * inner` values, row-major. A row (`inner` = 1) is multiplied in
/// sixteen interleaved lanes, a plane's columns a block at a time down its
/// rows; threads split the outputs.
///
/// ```
/// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// assert_eq!(tapir_kernels::cpu::product(&x, 3, 1), vec![6.0, 120.0]);
/// assert_eq!(tapir_kernels::cpu::product(&x, 2, 3), vec![4.0, 10.0, 18.0]);
/// ```
pub fn product<T: Float>(x: &[T], len: usize, inner: usize) -> Vec<T> {
    assert!(
        len > 0 && inner > 0 && x.len().is_multiple_of(len * inner),
        "product kernel: {} elements are not [outer, {len}, {inner}]",
        x.len()
    );
    if x.len() == len && x.len() >= PARALLEL_GRAIN && num_threads() > 1 {
        return vec![split_row_product(x)];
    }
    let mut out = vec![T::one(); x.len() / len];
    let per = outputs_per_task(x.len(), out.len());
    par_chunks_mut(&mut out, per, |t, chunk| {
        simd(
            #[inline(always)]
            || products_from(x, len, inner, t * per, chunk),
        )
    });
    out
}

/// [`product`]'s outputs `at..at + out.len()`, in runs of one plane and at
/// most a block of columns.
#[inline(always)]
fn products_from<T: Float>(x: &[T], len: usize, inner: usize, mut at: usize, mut out: &mut [T]) {
    while !out.is_empty() {
        let (o, c) = (at / inner, at % inner);
        let w = (inner - c).min(COLUMN_BLOCK).min(out.len());
        let (block, rest) = out.split_at_mut(w);
        let plane = &x[o * len * inner..(o + 1) * len * inner];
        if inner == 1 {
            block[0] = row_product(plane);
        } else {
            for row in plane.chunks_exact(inner) {
                for (p, &v) in block.iter_mut().zip(&row[c..c + w]) {
                    *p = *p * v;
                }
            }
        }
        (at, out) = (at + w, rest);
    }
}

/// One long row's product (`prod()` of a whole tensor) with the threads
/// taking a stretch each, then the stretches' products multiplied.
fn split_row_product<T: Float>(x: &[T]) -> T {
    let per = x.len().div_ceil(num_threads());
    let mut parts = vec![T::one(); x.len().div_ceil(per)];
    par_chunks_mut(&mut parts, 1, |i, p| {
        let stretch = &x[i * per..((i + 1) * per).min(x.len())];
        p[0] = simd(
            #[inline(always)]
            || row_product(stretch),
        );
    });
    parts.iter().fold(T::one(), |a, &b| a * b)
}

/// The product of a row: four vectors of sixteen running products, so four
/// multiplications are in flight at once rather than one chain waiting
/// out each multiply's latency, then the lanes and the tail.
#[inline(always)]
fn row_product<T: Float>(row: &[T]) -> T {
    let mut lanes = [[T::one(); LANES]; 4];
    let blocks = row.chunks_exact(4 * LANES);
    let tail = blocks.remainder();
    for block in blocks {
        for (acc, part) in lanes.iter_mut().zip(block.chunks_exact(LANES)) {
            for (p, &v) in acc.iter_mut().zip(part) {
                *p = *p * v;
            }
        }
    }
    let mut p = lanes.iter().flatten().fold(T::one(), |a, &b| a * b);
    for &v in tail {
        p = p * v;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape and thread split against a plain loop (products of
    /// values near 1, so the orders of multiplication agree closely).
    #[test]
    fn products_match_a_plain_loop_along_rows_and_columns() {
        for &(outer, len, inner) in &[
            (1, 1, 1),
            (3, 37, 1),
            (2, 5, 70),
            (1, 300, 130),
            (40, 33, 17),
            (1, 70_001, 1),
        ] {
            let x: Vec<f64> = (0..outer * len * inner)
                .map(|i| 1.0 + ((i * 7919) % 101) as f64 / 1000.0 - 0.05)
                .collect();
            let got = product(&x, len, inner);
            for o in 0..outer {
                for c in 0..inner {
                    let want: f64 = (0..len).map(|r| x[(o * len + r) * inner + c]).product();
                    let g = got[o * inner + c];
                    assert!(
                        (g - want).abs() <= 1e-12 * want.abs(),
                        "[{outer}, {len}, {inner}] at ({o}, {c}): {g} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn zeros_infinities_and_nan_propagate() {
        let x = [
            2.0f32,
            0.0,
            3.0,
            f32::INFINITY,
            0.0,
            1.0,
            f32::NAN,
            1.0,
            1.0,
        ];
        let p = product(&x, 3, 1);
        assert_eq!(p[0], 0.0);
        assert!(p[1].is_nan(), "inf * 0 is NaN");
        assert!(p[2].is_nan());
    }
}
