//! Seedable random number generators (PyTorch's `torch.Generator`).

use std::sync::{Mutex, OnceLock};

/// A seedable generator (xoshiro256++ seeded through splitmix64). Streams
/// are reproducible for a seed; they do not reproduce PyTorch's mt19937.
///
/// ```
/// use tapir_runtime::{Generator, Tensor};
/// let g = Generator::new(7);
/// let a = Tensor::rand_with(&[3], &g);
/// g.manual_seed(7);
/// assert_eq!(a.to_vec::<f32>(), Tensor::rand_with(&[3], &g).to_vec::<f32>());
/// ```
pub struct Generator {
    state: Mutex<[u64; 4]>,
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn seeded(seed: u64) -> [u64; 4] {
    let mut x = seed;
    [
        splitmix(&mut x),
        splitmix(&mut x),
        splitmix(&mut x),
        splitmix(&mut x),
    ]
}

/// One step of xoshiro256++: the next word, the state advanced.
#[inline(always)]
fn xoshiro_next(s: &mut [u64; 4]) -> u64 {
    let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
    let t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3].rotate_left(45);
    r
}

impl Generator {
    /// A generator seeded with `seed` (the same seed gives the same draws).
    pub fn new(seed: u64) -> Generator {
        Generator {
            state: Mutex::new(seeded(seed)),
        }
    }

    /// Re-seeds the generator.
    pub fn manual_seed(&self, seed: u64) {
        *self.state.lock().unwrap() = seeded(seed);
    }

    /// The raw state (for checkpoints), and its restoration.
    pub fn get_state(&self) -> [u64; 4] {
        *self.state.lock().unwrap()
    }

    /// Restores a state `get_state` returned.
    pub fn set_state(&self, s: [u64; 4]) {
        *self.state.lock().unwrap() = s;
    }

    /// Fills `n` values from `f`, holding the lock once.
    pub(crate) fn fill<T>(
        &self,
        n: usize,
        mut f: impl FnMut(&mut dyn FnMut() -> u64) -> T,
    ) -> Vec<T> {
        let mut s = self.state.lock().unwrap();
        let mut next = || xoshiro_next(&mut s);
        (0..n).map(|_| f(&mut next)).collect()
    }

    /// `n` raw words of the stream (the same words `fill` hands out), in
    /// one inlined loop: through `fill`'s `dyn` callback each cost ~4 ns.
    fn words(&self, n: usize) -> Vec<u64> {
        let mut s = self.state.lock().unwrap();
        let mut st = *s; // a local copy stays in registers
        let out = (0..n).map(|_| xoshiro_next(&mut st)).collect();
        *s = st;
        out
    }

    /// `n` uniform doubles in [0, 1).
    pub(crate) fn uniform(&self, n: usize) -> Vec<f64> {
        self.fill(n, |next| {
            (next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
        })
    }

    /// `n` uniform f32 draws in `[0, 1)`, two from each word (24 bits
    /// each, `tapir_kernels::cpu::uniform_from_bits`).
    pub(crate) fn uniform_f32(&self, n: usize) -> Vec<f32> {
        let bits = self.words(n.div_ceil(2));
        tapir_kernels::cpu::uniform_from_bits(&bits, n)
    }

    /// `n` standard normal f32 draws, Box-Muller over both halves of each
    /// word, vectorised (`tapir_kernels::cpu::normal_from_bits`): 26 ns a
    /// draw through f64 libm calls before, PyTorch's float path's speed now.
    pub(crate) fn normal_f32(&self, n: usize) -> Vec<f32> {
        let per_block = 2 * tapir_kernels::cpu::NORMAL_BLOCK_WORDS;
        let words = n.div_ceil(per_block) * tapir_kernels::cpu::NORMAL_BLOCK_WORDS;
        let bits = self.words(words);
        tapir_kernels::cpu::normal_from_bits(&bits, n)
    }

    /// `n` standard normal doubles (Box-Muller).
    pub(crate) fn normal(&self, n: usize) -> Vec<f64> {
        self.fill(n, |next| {
            let u1 = ((next() >> 11) as f64 + 1.0) * (1.0 / ((1u64 << 53) as f64 + 1.0));
            let u2 = (next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
    }
}

/// The global generator used when none is passed.
pub fn default_generator() -> &'static Generator {
    static G: OnceLock<Generator> = OnceLock::new();
    G.get_or_init(|| Generator::new(0))
}

/// Seeds the global generator and the device generator (`torch.manual_seed`
/// seeds every device).
pub fn manual_seed(seed: u64) {
    default_generator().manual_seed(seed);
    device_generator().manual_seed(seed);
}

/// The generator of draws made on a GPU, as PyTorch's CUDA generator: a
/// seed and an offset into the Philox4x32-10 stream it keys
/// (`tapir_kernels::cpu::philox_uniform` is the CPU twin of the kernel).
/// Each call reserves the stream positions it uses, so draws on the GPU
/// need no state on the device and no host round trip. One generator
/// serves every GPU.
///
/// ```
/// use tapir_runtime::device_generator;
/// device_generator().set_state([7, 0]);
/// assert_eq!(device_generator().get_state(), [7, 0]);
/// ```
pub struct DeviceGenerator {
    /// (seed, offset)
    state: Mutex<[u64; 2]>,
}

impl DeviceGenerator {
    /// Starts the stream of `seed` from its beginning.
    pub fn manual_seed(&self, seed: u64) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = [seed, 0];
    }

    /// `[seed, offset]` (for checkpoints).
    pub fn get_state(&self) -> [u64; 2] {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Restores a state `get_state` returned.
    pub fn set_state(&self, s: [u64; 2]) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// Reserves `n` stream positions: the seed and the offset they start at.
    /// The offset advances to the next multiple of 4 (a Philox block), as
    /// PyTorch's does, so calls never share a block.
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    pub(crate) fn reserve(&self, n: usize) -> (u64, u64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let start = s[1];
        s[1] = start.wrapping_add((n as u64).next_multiple_of(4));
        (s[0], start)
    }
}

/// The device generator (see [`DeviceGenerator`]).
pub fn device_generator() -> &'static DeviceGenerator {
    static G: OnceLock<DeviceGenerator> = OnceLock::new();
    G.get_or_init(|| DeviceGenerator {
        state: Mutex::new([0, 0]),
    })
}
