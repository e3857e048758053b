//! Dense conversions between f32 and the half types, written as plain
//! loops the compiler vectorises (bf16 is the top half of an f32; f16 goes
//! through `half`'s F16C path). The casts of mixed precision run here.

use half::slice::HalfFloatSliceExt;
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
pub fn f16_to_f32(v: &[f16]) -> Vec<f32> {
    let mut out = crate::alloc::filled(v.len(), 0.0);
    v.convert_to_f32_slice(&mut out);
    out
}

/// f32 to f16, rounding to nearest even.
pub fn f32_to_f16(v: &[f32]) -> Vec<f16> {
    let mut out = crate::alloc::filled(v.len(), f16::ZERO);
    out.convert_from_f32_slice(v);
    out
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
        for (x, h) in xs.iter().zip(f32_to_f16(&xs)) {
            let want = f16::from_f32(*x);
            assert!(want == h || want.is_nan() && h.is_nan());
        }
    }
}
