//! Dense conversions between f32 and the half types, written as plain
//! loops the compiler vectorises (bf16 is the top half of an f32; f16 is
//! rebiased in integer and float arithmetic). The casts of mixed precision
//! run here.

use half::{bf16, f16};

/// bf16 to f32, exactly (the bits move up 16 places).
///
/// ```
/// use half::bf16;
/// let v = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
/// assert_eq!(tapir_kernels::cpu::bf16_to_f32(&v), vec![1.5, -2.0]);
/// ```
pub fn bf16_to_f32(v: &[bf16]) -> Vec<f32> {
    // Vectorised and split across threads (`map_dense`): a serial
    // conversion was most of `to_dtype`'s 12 ms per char-transformer step,
    // the same on 2 threads as on 1.
    super::elementwise::map_dense(v, f32_from_bf16)
}

/// f32 to bf16, rounding to nearest even (NaN stays NaN), as `bf16::from_f32`.
///
/// ```
/// use half::bf16;
/// let v = [1.0f32 + 1.0 / 256.0, f32::NAN, 3.0e38];
/// let b = tapir_kernels::cpu::f32_to_bf16(&v);
/// assert_eq!(b[0], bf16::from_f32(v[0]));
/// assert!(b[1].is_nan());
/// assert_eq!(b[2], bf16::from_f32(3.0e38));
/// ```
pub fn f32_to_bf16(v: &[f32]) -> Vec<bf16> {
    super::elementwise::map_dense(v, bf16_from_f32)
}

/// One bf16 as f32: its bits moved up 16 places. `bf16::to_f32` also sets
/// a NaN's quiet bit, which LLVM vectorised with 16-bit compares and
/// shuffles; arithmetic quiets a NaN anyway, and [`bf16_from_f32`] quiets
/// what passes through unchanged. The bf16 GELU took 1.7 ms for 4 M
/// elements against 1.1 ms for f32.
///
/// ```
/// use half::bf16;
/// assert_eq!(tapir_kernels::cpu::f32_from_bf16(bf16::from_f32(-2.5)), -2.5);
/// ```
#[inline(always)]
pub fn f32_from_bf16(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

/// bf16 read as f32 by [`sum`](super::sum): converted inside the sum's
/// own loop, where the shift vectorises (widened to the stack first and
/// read back, the sum of 4 M bf16 ran 3x behind PyTorch's).
///
/// ```
/// use half::bf16;
/// use tapir_kernels::{cpu, Layout};
/// let x = vec![bf16::from_f32(0.5); 1000];
/// let s = cpu::sum(&x, &Layout::contiguous(&[1000]), &[0], cpu::Bf16ToF32);
/// assert_eq!(s, vec![500.0f32]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Bf16ToF32;

impl super::Widen<bf16, f32> for Bf16ToF32 {
    #[inline(always)]
    fn one(&self, x: bf16) -> f32 {
        f32_from_bf16(x)
    }

    #[inline(always)]
    fn block_lanes(&self, block: &[bf16]) -> Option<[f32; super::sum::LANES]> {
        Some(super::sum::lanes_of(block, &f32_from_bf16))
    }
}

/// One f32 to bf16 as `bf16::from_f32` rounds it, without a branch, so
/// loops of it (the bf16 arms of every elementwise kernel) vectorise.
#[inline(always)]
pub fn bf16_from_f32(x: f32) -> bf16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    let quiet_nan = (b >> 16) | 0x40;
    bf16::from_bits(if x.is_nan() { quiet_nan } else { rounded } as u16)
}

/// f16 to f32, exactly.
///
/// ```
/// use half::f16;
/// let v = [f16::from_f32(1.5), f16::from_f32(-65504.0)];
/// assert_eq!(tapir_kernels::cpu::f16_to_f32(&v), vec![1.5, -65504.0]);
/// ```
pub fn f16_to_f32(v: &[f16]) -> Vec<f32> {
    // In blocks through F16C where the CPU has it, split across threads
    // and written once: `half`'s slice conversion needed a zero-filled
    // output and ran on the calling thread, 1.25 ms for 4 M values on 1
    // and 2 threads.
    super::f16_blocks::widen_dense(v)
}

/// f32 to f16, rounding to nearest even (NaN stays NaN), as `f16::from_f32`.
///
/// ```
/// use half::f16;
/// let h = tapir_kernels::cpu::f32_to_f16(&[1.0 + 1.0 / 4096.0, 1.0e6, 1.0e-7]);
/// assert_eq!(h, vec![f16::ONE, f16::INFINITY, f16::from_f32(1.0e-7)]);
/// ```
pub fn f32_to_f16(v: &[f32]) -> Vec<f16> {
    super::f16_blocks::narrow_dense(v)
}

/// One f16 as f32, without a branch, so loops of it vectorise. Normal
/// values move their exponent from bias 15 to 127; subnormals come out of
/// one f32 subtraction, exactly; infinities and NaNs keep their payload.
///
/// ```
/// use half::f16;
/// assert_eq!(tapir_kernels::cpu::f32_from_f16(f16::from_f32(-2.5)), -2.5);
/// ```
#[inline(always)]
pub fn f32_from_f16(x: f16) -> f32 {
    let h = u32::from(x.to_bits());
    let moved = (h & 0x7fff) << 13;
    let exp = moved & (0x1f << 23);
    let normal = moved + ((127 - 15) << 23);
    // Exponent all ones: infinity or NaN, exponent 255.
    let special = normal + ((128 - 16) << 23);
    // Exponent zero: the mantissa as 2^-14 * m / 1024, via 2^-14 * (1 + m /
    // 1024) - 2^-14.
    let sub = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let magnitude = match exp {
        0 => sub,
        e if e == 0x1f << 23 => special,
        _ => normal,
    };
    f32::from_bits(magnitude | (h & 0x8000) << 16)
}

/// One f32 to f16 as `f16::from_f32` rounds it (to nearest even;
/// overflow to infinity; NaN to a quiet NaN), without a branch, so loops
/// of it vectorise.
///
/// ```
/// use half::f16;
/// assert_eq!(tapir_kernels::cpu::f16_from_f32(65520.0), f16::INFINITY);
/// ```
#[inline(always)]
pub fn f16_from_f32(x: f32) -> f16 {
    let bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    let f = bits ^ sign;
    // At or above 2^16: infinity, or NaN (from 65520 up the rounding of
    // a normal value carries into the exponent and gives infinity too).
    let big = if f > 0x7f80_0000 { 0x7e00 } else { 0x7c00 };
    // Below 2^-14: add 0.5 so the f32 addition rounds the mantissa to an
    // f16 subnormal's steps (nearest even), then take the low bits.
    let magic = ((127 - 15) + (23 - 10) + 1) << 23;
    let small = (f32::from_bits(f) + f32::from_bits(magic)).to_bits() - magic;
    // Normal: rebias, round the 13 dropped bits to nearest even.
    let odd = (f >> 13) & 1;
    let rebias = (15u32.wrapping_sub(127) << 23).wrapping_add(0xfff);
    let normal = f.wrapping_add(rebias).wrapping_add(odd) >> 13;
    let magnitude = if f >= (127 + 16) << 23 {
        big
    } else if f < 113 << 23 {
        small
    } else {
        normal
    };
    f16::from_bits((magnitude | sign >> 16) as u16)
}

/// f32 values that test a rounding to f16: halfway between each pair of
/// neighbouring finite f16 values and one f32 step either side, both
/// signs, and the edges (the largest finite, overflow, infinity, NaN, the
/// smallest subnormal's neighbourhood, far beyond the range).
#[cfg(test)]
pub(super) fn rounding_cases() -> Vec<f32> {
    (0..0x7bffu16)
        .flat_map(|b| {
            let (lo, hi) = (f16::from_bits(b).to_f32(), f16::from_bits(b + 1).to_f32());
            let mid = ((lo as f64 + hi as f64) / 2.0) as f32;
            [
                mid,
                f32::from_bits(mid.to_bits() - 1),
                f32::from_bits(mid.to_bits() + 1),
            ]
        })
        .flat_map(|v| [v, -v])
        .chain([
            65519.0,
            65520.0,
            f32::INFINITY,
            f32::NAN,
            5.0e-8,
            3.0e-8,
            2.9e-8,
            1e30,
        ])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_agree_with_half_on_every_bf16_and_many_f32() {
        let all: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
        for (b, f) in all.iter().zip(bf16_to_f32(&all)) {
            assert!(b.to_f32().to_bits() == f.to_bits() || b.is_nan() && f.is_nan());
        }
        let xs: Vec<f32> = (0..200_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .collect();
        for (x, b) in xs.iter().zip(f32_to_bf16(&xs)) {
            let want = bf16::from_f32(*x);
            assert!(
                want == b || want.is_nan() && b.is_nan(),
                "{x:e}: {b} vs {want}"
            );
        }
        // The slice conversion (F16C where the CPU has it) and the scalar
        // form (the fallback, and every f16 op's tail).
        let scalar = |xs: &[f32]| xs.iter().map(|&x| f16_from_f32(x)).collect::<Vec<_>>();
        for got in [f32_to_f16(&xs), scalar(&xs)] {
            for (x, h) in xs.iter().zip(got) {
                let want = f16::from_f32(*x);
                assert!(
                    want.to_bits() == h.to_bits() || want.is_nan() && h.is_nan(),
                    "{x:e}: {h} vs {want}"
                );
            }
        }
        // Every f16, and the f32 halfway between each pair of neighbours
        // (ties round to even) and just either side of it.
        let halves: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        let widened: Vec<f32> = halves.iter().map(|&h| f32_from_f16(h)).collect();
        for got in [f16_to_f32(&halves), widened] {
            for (h, f) in halves.iter().zip(got) {
                let want = h.to_f32();
                assert!(
                    want.to_bits() == f.to_bits() || h.is_nan() && f.is_nan(),
                    "{h}: {f} vs {want}"
                );
            }
        }
        let between = rounding_cases();
        for got in [f32_to_f16(&between), scalar(&between)] {
            for (x, h) in between.iter().zip(got) {
                let want = f16::from_f32(*x);
                assert!(
                    want.to_bits() == h.to_bits() || want.is_nan() && h.is_nan(),
                    "{x:e}: {h} vs {want}"
                );
            }
        }
    }
}
