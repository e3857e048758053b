//! f16 conversions by the CPU's own instructions (F16C, and AVX-512F's
//! 16-wide forms of them); each leaves a tail shorter than its width to
//! the scalar forms.

use super::{f16, narrow_scalar, widen_scalar};
use std::arch::x86_64::*;
use std::mem::MaybeUninit;

/// Rounding to nearest even; the immediate holds the rounding mode
/// alone, and F16C raises no exception that Rust observes.
const NEAREST_EVEN: i32 = _MM_FROUND_TO_NEAREST_INT;

#[target_feature(enable = "avx512f,f16c")]
pub(super) fn widen_avx512(src: &[f16], dst: &mut [MaybeUninit<f32>]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n`, so sixteen f16 (32 bytes) are readable
        // from `src[i]` and sixteen f32 writable at `dst[i]`; the loads
        // and stores are unaligned ones, which take any address.
        unsafe {
            let h = _mm256_loadu_si256(src.as_ptr().add(i).cast::<__m256i>());
            _mm512_storeu_ps(dst.as_mut_ptr().add(i).cast::<f32>(), _mm512_cvtph_ps(h));
        }
        i += 16;
    }
    widen_scalar(&src[i..n], &mut dst[i..n]);
}

#[target_feature(enable = "avx,f16c")]
pub(super) fn widen_f16c(src: &[f16], dst: &mut [MaybeUninit<f32>]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: as in `widen_avx512`, for eight values.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i).cast::<f32>(), _mm256_cvtph_ps(h));
        }
        i += 8;
    }
    widen_scalar(&src[i..n], &mut dst[i..n]);
}

#[target_feature(enable = "avx512f,f16c")]
pub(super) fn narrow_avx512(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n`, so sixteen f32 are readable from
        // `src[i]` and sixteen f16 (32 bytes) writable at `dst[i]`;
        // unaligned loads and stores.
        unsafe {
            let x = _mm512_loadu_ps(src.as_ptr().add(i));
            let h = _mm512_cvtps_ph::<NEAREST_EVEN>(x);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast::<__m256i>(), h);
        }
        i += 16;
    }
    narrow_scalar(&src[i..n], &mut dst[i..n]);
}

/// A sum's lane sums of `block` (a multiple of 32 values), in the
/// order `sum`'s `add_lanes` adds them: four sets of eight lanes take
/// runs of eight values in turn; the sets are added pairwise.
#[target_feature(enable = "avx,f16c")]
pub(super) fn block_lanes_f16c(block: &[f16]) -> [f32; 8] {
    let mut sets = [_mm256_setzero_ps(); 4];
    for run in block.chunks_exact(32) {
        for (k, set) in sets.iter_mut().enumerate() {
            // SAFETY: `run` holds 32 f16, so the 16 bytes from
            // `run[8 * k]` (k < 4) are readable; an unaligned load.
            let h = unsafe { _mm_loadu_si128(run.as_ptr().add(8 * k).cast::<__m128i>()) };
            *set = _mm256_add_ps(*set, _mm256_cvtph_ps(h));
        }
    }
    let [a, b, c, d] = sets;
    let lanes = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
    let mut out = [0f32; 8];
    // SAFETY: `out` holds eight f32; an unaligned store.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), lanes) };
    out
}

#[target_feature(enable = "avx,f16c")]
pub(super) fn narrow_f16c(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: as in `narrow_avx512`, for eight values.
        unsafe {
            let x = _mm256_loadu_ps(src.as_ptr().add(i));
            let h = _mm256_cvtps_ph::<NEAREST_EVEN>(x);
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast::<__m128i>(), h);
        }
        i += 8;
    }
    narrow_scalar(&src[i..n], &mut dst[i..n]);
}
