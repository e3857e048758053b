//! The f16 block kernels against the scalar forms and the ops element by
//! element.

use super::*;
use crate::elementwise::{Exp, Sin, UnaryFn};
use crate::threads::PARALLEL_GRAIN;

/// f16 values of every kind: normal, subnormal, zeros, infinities, NaN,
/// and huge arguments that are rare for the sine.
fn halves(n: usize) -> Vec<f16> {
    (0..n)
        .map(|i| match i % 101 {
            0 => f16::NAN,
            1 => f16::INFINITY,
            2 => f16::NEG_ZERO,
            3 => f16::from_bits(i as u16 % 1024), // subnormal
            4 => f16::from_f32(60000.0),
            5 => f16::from_f32(11.5), // e^x beyond f16: infinity
            _ => f16::from_f32((i as f32 * 0.37).sin() * 8.0),
        })
        .collect()
}

fn same_bits(got: &[f16], want: &[f16], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
            "{what} at {i}: {g} against {w}"
        );
    }
}

/// Block widening and narrowing (F16C here, with scalar tails) equal
/// the scalar forms on every f16, on odd lengths, and on f32 values
/// halfway between neighbouring f16 and either side.
#[test]
fn block_conversions_equal_the_scalar_forms() {
    // Every path this CPU can run, the one `hardware` picks among them.
    let mut paths = vec![Hardware::None];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("f16c") && has!("avx") {
            paths.push(Hardware::F16c);
        }
        if has!("f16c") && has!("avx512f") {
            paths.push(Hardware::Avx512);
        }
    }
    assert!(paths.contains(&hardware()));
    for hw in paths {
        conversions_through(hw);
    }
}

fn conversions_through(hw: Hardware) {
    let every: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    for len in [every.len(), 13, 7, 1] {
        let mut wide = vec![MaybeUninit::uninit(); len];
        // SAFETY: the test passes only paths this CPU has.
        unsafe { widen_on(hw, &every[..len], &mut wide) };
        for (h, w) in every.iter().zip(&wide) {
            // SAFETY: `widen_f16` wrote every slot.
            let w = unsafe { w.assume_init() };
            let want = f32_from_f16(*h);
            let same = w.to_bits() == want.to_bits() || h.is_nan() && w.is_nan();
            assert!(same, "{hw:?}: {h} widened to {w}, not {want}");
        }
    }
    let xs: Vec<f32> = super::super::convert::rounding_cases()
        .into_iter()
        .chain((0..100_000u32).map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761))))
        .collect();
    for len in [xs.len(), 13, 7] {
        let mut narrow = vec![MaybeUninit::uninit(); len];
        // SAFETY: as above.
        unsafe { narrow_on(hw, &xs[..len], &mut narrow) };
        // SAFETY: `narrow_f16` wrote every slot.
        let got: Vec<f16> = narrow.iter().map(|h| unsafe { h.assume_init() }).collect();
        let want: Vec<f16> = xs[..len].iter().map(|&x| f16_from_f32(x)).collect();
        same_bits(&got, &want, &format!("{hw:?}: narrow"));
    }
}

/// Unary maps through blocks equal the op on each element widened and
/// rounded back, bit for bit: dense on one and two threads (long enough
/// to split), a strided view, and a transposed one whose rows blocks
/// straddle; the sine's rare huge arguments are fixed by its exact form.
#[test]
fn block_maps_equal_the_op_element_by_element() {
    fn check<R: UnaryFn>(x: &[f16], l: &Layout, row: R) {
        let got = map_f16_split_with(x, l, row, |x, r| r.fast(x), |x, r| r.rare(x), |x, r| r.f(x));
        let mut want = Vec::new();
        l.for_each_offset(|o| want.push(f16_from_f32(row.f(f32_from_f16(x[o])))));
        same_bits(&got, &want, R::NAME);
    }
    let n = PARALLEL_GRAIN + 3 * CHUNK + 17; // split across threads
    let x = halves(n);
    for threads in [1, 2] {
        crate::threads::set_num_threads(threads);
        for l in &super::super::map_split::test_views(n) {
            check(&x, l, Sin);
            check(&x, l, Exp);
        }
    }
}

/// Binary maps equal `f` on each pair widened and rounded back: both
/// dense, one side a broadcast single value (either side), and a
/// broadcast row (element by element).
#[test]
fn block_zips_equal_the_op_element_by_element() {
    crate::threads::set_num_threads(2);
    let n = PARALLEL_GRAIN + 2 * CHUNK + 9;
    let (a, b) = (halves(n), halves(n + 5)[5..].to_vec());
    let f = |x: f32, y: f32| x * 1.5 - y;
    let check = |la: &Layout, lb: &Layout, what: &str| {
        let got = zip_map_f16(&a, la, &b, lb, f);
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        la.for_each_offset(|o| xs.push(a[o]));
        lb.for_each_offset(|o| ys.push(b[o]));
        let want: Vec<f16> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| f16_from_f32(f(f32_from_f16(x), f32_from_f16(y))))
            .collect();
        same_bits(&got, &want, what);
    };
    let dense = Layout::contiguous(&[n]);
    let one = Layout {
        offset: 7,
        ..Layout::contiguous(&[1])
    }
    .broadcast_to(&[n]);
    check(&dense, &dense, "dense");
    check(&dense, &one, "dense, single");
    check(&one, &dense, "single, dense");
    let rows = Layout::contiguous(&[n / 9, 9]);
    let row = Layout::contiguous(&[9]).broadcast_to(&[n / 9, 9]);
    check(&rows, &row, "rows, broadcast row");
    // Rows long enough for blocks: a bias row either side, a column
    // broadcast along rows (one value per row), a transposed operand
    // (value by value).
    let wide = Layout::contiguous(&[n / 100, 100]);
    let bias = Layout::contiguous(&[100]).broadcast_to(&[n / 100, 100]);
    let column = Layout::contiguous(&[n / 100, 1]).broadcast_to(&[n / 100, 100]);
    let transposed = Layout::contiguous(&[100, n / 100]).transpose(0, 1);
    check(&wide, &bias, "rows, bias row");
    check(&bias, &wide, "bias row, rows");
    check(&wide, &column, "rows, column");
    check(&transposed, &wide, "transposed, rows");
}

/// In-place maps and zips equal the op on each element widened and
/// rounded back: dense (on two threads, long enough to split), against
/// a dense operand, a single broadcast value and a broadcast row, and a
/// strided destination; elements outside the view stay as they were.
#[test]
fn in_place_blocks_equal_the_op_element_by_element() {
    crate::threads::set_num_threads(2);
    let n = PARALLEL_GRAIN + 2 * CHUNK + 9;
    let (a, b) = (halves(n), halves(n + 5)[5..].to_vec());
    let f = |x: f32, y: f32| x * 1.5 - y;
    let g = |x: f32, k: f32| x.exp() - k;
    let check = |l: &Layout, lb: Option<&Layout>, what: &str| {
        let mut want = a.clone();
        let (mut dst, mut offs, mut ys) = (a.clone(), Vec::new(), Vec::new());
        l.for_each_offset(|o| offs.push(o));
        match lb {
            Some(lb) => {
                lb.for_each_offset(|o| ys.push(b[o]));
                for (&o, &y) in offs.iter().zip(&ys) {
                    want[o] = f16_from_f32(f(f32_from_f16(a[o]), f32_from_f16(y)));
                }
                zip_inplace_f16(&mut dst, l, &b, lb, f);
            }
            None => {
                for &o in &offs {
                    want[o] = f16_from_f32(g(f32_from_f16(a[o]), 0.5));
                }
                map_inplace_f16_with(&mut dst, l, 0.5, g);
            }
        }
        same_bits(&dst, &want, what);
    };
    let dense = Layout::contiguous(&[n]);
    let one = Layout {
        offset: 3,
        ..Layout::contiguous(&[1])
    }
    .broadcast_to(&[n]);
    let strided = Layout {
        shape: vec![n / 2],
        strides: vec![2],
        offset: 1,
    };
    check(&dense, None, "map, dense");
    check(&strided, None, "map, strided");
    check(&dense, Some(&dense), "zip, dense");
    check(&dense, Some(&one), "zip, single");
    let rows = Layout::contiguous(&[n / 9, 9]);
    let row = Layout::contiguous(&[9]).broadcast_to(&[n / 9, 9]);
    check(&rows, Some(&row), "zip, broadcast row");
    let half = Layout::contiguous(&[n / 2]);
    check(&strided, Some(&half), "zip, strided");
}

/// Sums read through F16C add in the sum's own order: over f16 of
/// every magnitude (so f32 rounds the partial sums and another order
/// would change the bits) they equal the sums that widen value by
/// value, bit for bit, over one long row and over rows with a tail.
#[test]
fn f16c_sums_add_in_the_sums_own_order() {
    let x: Vec<f16> = (0..20_000u32)
        .map(|i| {
            let h = i.wrapping_mul(2_654_435_761) >> 8;
            f16::from_bits((h as u16 & 0x7bff) | (h >> 8) as u16 & 0x8000)
        })
        .collect();
    for (shape, dims) in [(vec![20_000], vec![0]), (vec![16, 1250], vec![1])] {
        let l = Layout::contiguous(&shape);
        let got = crate::cpu::sum(&x, &l, &dims, F16ToF32);
        let want = crate::cpu::sum(&x, &l, &dims, f32_from_f16);
        let bits = |v: &[f32]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{shape:?} over {dims:?}");
    }
}
