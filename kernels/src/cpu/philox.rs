//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
//! 3", SC'11), the counter-based generator of PyTorch's CUDA generator: the
//! device draws for element `e` of a stream are a pure function of (seed,
//! `e`), so a GPU kernel makes them with no state to carry between threads
//! and no host round trip. This is the CPU twin of `cu/random.cu`, its test
//! oracle, term for term.
//!
//! Element `e` (the stream position: the generator's offset plus the index
//! within the call) is lane `e % 4` of the block whose counter is `e / 4`
//! (low and high words; the upper two counter words are 0) under the key
//! `seed` (low and high words).

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Ten rounds of Philox4x32 on `ctr` under `key`.
///
/// ```
/// // The Random123 known-answer test for zero counter and key.
/// let x = tapir_kernels::cpu::philox4x32_10([0; 4], [0; 2]);
/// assert_eq!(x, [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
/// ```
#[inline]
pub fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key = [key[0].wrapping_add(W0), key[1].wrapping_add(W1)];
        }
        let p0 = (ctr[0] as u64) * (M0 as u64);
        let p1 = (ctr[2] as u64) * (M1 as u64);
        ctr = [
            ((p1 >> 32) as u32) ^ ctr[1] ^ key[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ ctr[3] ^ key[1],
            p0 as u32,
        ];
    }
    ctr
}

/// The 32 random bits at stream position `e` under `seed`.
#[inline]
fn bits(seed: u64, e: u64) -> u32 {
    let block = e / 4;
    let key = [seed as u32, (seed >> 32) as u32];
    philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], key)[(e % 4) as usize]
}

/// Uniform in `[0, 1)` from 32 bits: the top 24, so every value is exact in f32.
#[inline]
fn unit(x: u32) -> f32 {
    (x >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// `n` uniform draws in `[0, 1)` at stream positions `offset..offset + n`.
///
/// ```
/// let u = tapir_kernels::cpu::philox_uniform(7, 0, 1000);
/// assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
/// // A later call that starts where this one ended continues the stream.
/// assert_eq!(tapir_kernels::cpu::philox_uniform(7, 998, 2), u[998..]);
/// ```
pub fn philox_uniform(seed: u64, offset: u64, n: usize) -> Vec<f32> {
    (0..n as u64)
        .map(|i| unit(bits(seed, offset + i)))
        .collect()
}

/// `n` standard normal draws at stream positions `offset..offset + n`, by
/// Box-Muller over the lane pairs (0, 1) and (2, 3) of each block: an even
/// position takes the cosine, an odd one the sine of the same pair.
pub fn philox_normal(seed: u64, offset: u64, n: usize) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let e = offset + i;
            let first = e & !1;
            // (0, 1]: log never sees 0.
            let u1 = ((bits(seed, first) >> 8) + 1) as f32 * (1.0 / 16_777_216.0);
            let u2 = unit(bits(seed, first + 1));
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = 2.0 * std::f32::consts::PI * u2;
            if e.is_multiple_of(2) {
                r * theta.cos()
            } else {
                r * theta.sin()
            }
        })
        .collect()
}

/// Dropout's scaled keep mask for `n` elements from the Philox stream keyed
/// by `seed` (positions `0..n`): `1 / keep` where the draw `u < keep`, else
/// 0, so `x * mask` is dropout and `g * mask` its gradient. Whole Philox
/// blocks per step and split across threads: the mask costs a pass, not a
/// serial generator call per element.
///
/// ```
/// let m = tapir_kernels::cpu::philox_dropout_mask(1000, 0.75, 9);
/// assert!(m.iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
/// ```
pub fn philox_dropout_mask(n: usize, keep: f64, seed: u64) -> Vec<f32> {
    let mask = DropoutMask::new(keep, seed);
    let mut out = crate::alloc::filled(n, 0f32);
    let fill = |first: usize, chunk: &mut [f32]| {
        for (b, quad) in chunk.chunks_mut(4).enumerate() {
            let m = mask.block(((first + b * 4) / 4) as u64);
            quad.copy_from_slice(&m[..quad.len()]);
        }
    };
    // Chunks of whole blocks, so each task starts at a block boundary.
    const CHUNK: usize = 1 << 14;
    if crate::threads::parallel(n) {
        crate::threads::par_chunks_mut(&mut out, CHUNK, |i, c| fill(i * CHUNK, c));
    } else {
        fill(0, &mut out);
    }
    out
}

/// Dropout's scaled keep mask, four elements (one Philox block) at a time:
/// what [`philox_dropout_mask`] fills and what a fused program's dropout
/// recomputes, so the two agree bit for bit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropoutMask {
    key: [u32; 2],
    limit: u32,
    scale: f32,
}

impl DropoutMask {
    pub(crate) fn new(keep: f64, seed: u64) -> DropoutMask {
        DropoutMask {
            key: [seed as u32, (seed >> 32) as u32],
            // Compared in the 24-bit integer domain of `unit`: u < keep exactly.
            limit: (keep * 16_777_216.0).ceil() as u32,
            scale: (1.0 / keep) as f32,
        }
    }

    /// Elements `4 * block .. 4 * block + 4` of the mask.
    #[inline]
    pub(crate) fn block(&self, block: u64) -> [f32; 4] {
        let x = philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], self.key);
        x.map(|bits| {
            if bits >> 8 < self.limit {
                self.scale
            } else {
                0.0
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn draws_have_the_moments_of_their_distributions() {
        let n = 200_000;
        let u = philox_uniform(42, 3, n);
        let mean = u.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = u.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            (mean - 0.5).abs() < 0.005 && (var - 1.0 / 12.0).abs() < 0.002,
            "{mean} {var}"
        );
        let z = philox_normal(42, 1, n);
        let mean = z.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = z.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        // Another seed gives other numbers.
        assert_ne!(philox_uniform(43, 3, 8), u[..8]);
        // The dropout mask keeps exactly where the same stream's uniform
        // draw is below the keep probability.
        let m = philox_dropout_mask(n, 0.9, 42);
        let u = philox_uniform(42, 0, n);
        assert!(
            m.iter()
                .zip(&u)
                .all(|(&m, &u)| (m != 0.0) == ((u as f64) < 0.9))
        );
    }
}
