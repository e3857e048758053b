//! Uniform and standard normal f32 draws from a CPU generator's raw 64-bit
//! words, two draws a word: vectorised, and split across threads.
//!
//! Each draw uses 24 bits, every value an f32 holds exactly in `[0, 1)`
//! (PyTorch's float `uniform_` does the same). Rounding a 53-bit f64 draw
//! to f32 instead gave 1.0 about once in 2^25 draws.

use crate::Float;
use crate::threads::{par_chunks_mut, parallel, simd};

const SCALE: f32 = 1.0 / 16_777_216.0;

/// The two 24-bit halves of a word: bits 40..64 and 8..32.
#[inline(always)]
fn halves(w: u64) -> (u32, u32) {
    ((w >> 40) as u32, ((w >> 8) & 0xFF_FFFF) as u32)
}

/// `n` uniform draws in `[0, 1)`: draw `2i` from word `i`'s high half,
/// `2i + 1` from its low half. `bits` holds at least `n.div_ceil(2)` words.
///
/// ```
/// let u = tapir_kernels::cpu::uniform_from_bits(&[u64::MAX, 0], 3);
/// assert_eq!(u, [1.0 - 1.0 / 16_777_216.0, 1.0 - 1.0 / 16_777_216.0, 0.0]);
/// ```
pub fn uniform_from_bits(bits: &[u64], n: usize) -> Vec<f32> {
    assert!(
        bits.len() >= n.div_ceil(2),
        "uniform_from_bits kernel: {} words for {n} draws",
        bits.len()
    );
    let mut out = crate::alloc::filled(n, 0f32);
    for (pair, &w) in out.chunks_mut(2).zip(bits) {
        let (hi, lo) = halves(w);
        pair[0] = hi as f32 * SCALE;
        if let Some(second) = pair.get_mut(1) {
            *second = lo as f32 * SCALE;
        }
    }
    out
}

/// Words per block of [`normal_from_bits`]: 16 pairs, 32 draws.
pub const NORMAL_BLOCK_WORDS: usize = 16;

/// `n` standard normal draws by Box-Muller: word `i` of a block of 16 gives
/// `u1 = (high half + 1) / 2^24` in `(0, 1]` and `u2 = low half / 2^24`,
/// and the block's draws are `r cos(θ)` for its 16 words, then `r
/// sin(θ)`, with `r = sqrt(-2 ln u1)` and `θ = 2π u2`, in f32 through the
/// vectorising `ln`, `sin` and `cos` (each within 1 ulp). `bits` holds at
/// least `n.div_ceil(32) * 16` words; draws past `n` in the last block are
/// dropped.
///
/// ```
/// let z = tapir_kernels::cpu::normal_from_bits(&[0x8000_0000_0000_0000; 16], 32);
/// // u1 = 1/2 + 2^-24, u2 = 0: r cos(0) = sqrt(2 ln 2) - a little, r sin(0) = 0.
/// assert!((z[0] - 1.177_410_0).abs() < 1e-6 && z[16] == 0.0);
/// ```
pub fn normal_from_bits(bits: &[u64], n: usize) -> Vec<f32> {
    const DRAWS: usize = 2 * NORMAL_BLOCK_WORDS;
    let blocks = n.div_ceil(DRAWS);
    assert!(
        bits.len() >= blocks * NORMAL_BLOCK_WORDS,
        "normal_from_bits kernel: {} words for {n} draws",
        bits.len()
    );
    let mut out = crate::alloc::filled(n, 0f32);
    let fill = |first_block: usize, chunk: &mut [f32]| {
        simd(
            #[inline(always)]
            || {
                for (b, dst) in chunk.chunks_mut(DRAWS).enumerate() {
                    let w = &bits[(first_block + b) * NORMAL_BLOCK_WORDS..][..NORMAL_BLOCK_WORDS];
                    let mut block = [0f32; DRAWS];
                    for k in 0..NORMAL_BLOCK_WORDS {
                        let (hi, lo) = halves(w[k]);
                        let u1 = (hi + 1) as f32 * SCALE;
                        let theta = std::f32::consts::TAU * (lo as f32 * SCALE);
                        let r = (-2.0 * u1.vec_ln()).sqrt();
                        block[k] = r * theta.fast_cos();
                        block[NORMAL_BLOCK_WORDS + k] = r * theta.fast_sin();
                    }
                    dst.copy_from_slice(&block[..dst.len()]);
                }
            },
        )
    };
    // Chunks of whole blocks, so each task starts at a block boundary.
    const CHUNK: usize = 1 << 13;
    if parallel(n) {
        par_chunks_mut(&mut out, CHUNK, |i, c| fill(i * CHUNK / DRAWS, c));
    } else {
        fill(0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words from splitmix64, for tests.
    fn words(n: usize) -> Vec<u64> {
        let mut x = 12345u64;
        (0..n)
            .map(|_| {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            })
            .collect()
    }

    #[test]
    fn normal_draws_follow_box_muller_in_f64_and_the_standard_normal() {
        let n: usize = 200_003;
        let bits = words(n.div_ceil(32) * 16);
        let mut runs = vec![];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            runs.push(normal_from_bits(&bits, n));
        }
        let z = &runs[0];
        assert!(
            z.iter()
                .zip(&runs[1])
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        for (i, &v) in z.iter().enumerate() {
            let (block, k) = (i / 32, i % 32);
            let (hi, lo) = halves(bits[block * 16 + k % 16]);
            let u1 = (hi as f64 + 1.0) / 16_777_216.0;
            let theta = std::f64::consts::TAU * (lo as f64 / 16_777_216.0);
            let r = (-2.0 * u1.ln()).sqrt();
            let want = r * if k < 16 { theta.cos() } else { theta.sin() };
            // θ in f32 (2π rounded, then the product: up to 4e-7 off)
            // moves the draw by up to that times r.
            assert!(
                (v as f64 - want).abs() <= 5e-7 * r + 3e-7 * want.abs() + 1e-9,
                "draw {i}: {v} against {want}"
            );
        }
        let mean = z.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = z.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let beyond = z.iter().filter(|v| v.abs() > 1.959_964).count() as f64 / n as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.01,
            "mean {mean}, variance {var}"
        );
        assert!((beyond - 0.05).abs() < 0.003, "{beyond} beyond 1.96");
    }

    #[test]
    fn uniform_draws_stay_below_one_and_fill_the_interval() {
        let n: usize = 100_001;
        let u = uniform_from_bits(&words(n.div_ceil(2)), n);
        assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
        let mean = u.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let low = u.iter().filter(|&&v| v < 0.1).count() as f64 / n as f64;
        assert!((mean - 0.5).abs() < 0.005 && (low - 0.1).abs() < 0.005);
        assert_eq!(
            uniform_from_bits(&[u64::MAX], 1),
            [1.0 - 1.0 / 16_777_216.0]
        );
    }
}
