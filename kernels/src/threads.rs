//! The CPU thread pool every kernel runs on, sized by [`set_num_threads`].
//!
//! rayon's global pool cannot be resized once built, and `torch.set_num_threads`
//! can be called at any time, so tapir keeps its own pool behind a lock and
//! swaps it when the count changes.

use std::sync::{Arc, OnceLock, RwLock};

struct Pool {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
}

fn cell() -> &'static RwLock<Option<Pool>> {
    static POOL: OnceLock<RwLock<Option<Pool>>> = OnceLock::new();
    POOL.get_or_init(|| RwLock::new(None))
}

fn build(threads: usize) -> Pool {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tapir-cpu-{i}"))
        .build()
        .expect("tapir: failed to start the CPU thread pool");
    Pool {
        threads,
        pool: Arc::new(pool),
    }
}

fn default_threads() -> usize {
    std::env::var("TAPIR_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Sets the number of CPU threads kernels use (as `torch.set_num_threads`).
///
/// ```
/// tapir_kernels::threads::set_num_threads(1);
/// assert_eq!(tapir_kernels::threads::num_threads(), 1);
/// ```
pub fn set_num_threads(threads: usize) {
    let threads = threads.max(1);
    let mut guard = cell().write().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_some_and(|p| p.threads == threads) {
        return;
    }
    *guard = Some(build(threads));
}

/// The number of CPU threads kernels use.
pub fn num_threads() -> usize {
    pool().0
}

fn pool() -> (usize, Arc<rayon::ThreadPool>) {
    if let Some(p) = cell().read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return (p.threads, p.pool.clone());
    }
    let mut guard = cell().write().unwrap_or_else(|e| e.into_inner());
    let p = guard.get_or_insert_with(|| build(default_threads()));
    (p.threads, p.pool.clone())
}

/// Runs `f` inside tapir's pool; rayon calls within it use that pool's threads.
/// Returns the thread count alongside so callers can size their chunks.
pub fn install<R: Send>(f: impl FnOnce(usize) -> R + Send) -> R {
    let (threads, pool) = pool();
    if threads == 1 || rayon::current_thread_index().is_some() {
        // Single-threaded, or already inside a pool worker: run inline.
        return f(threads);
    }
    pool.install(|| f(threads))
}

/// Whether work of `n` elements should be split across threads: it is big
/// enough and the pool has more than one thread (with one thread, rayon's
/// parallel iterators would otherwise run on rayon's global pool).
#[inline]
pub fn parallel(n: usize) -> bool {
    n >= PARALLEL_GRAIN && num_threads() > 1
}

/// Elements below which elementwise kernels stay on the calling thread: the
/// cost of waking a second core (~5-10 µs) outweighs the work.
pub const PARALLEL_GRAIN: usize = 1 << 15;

/// Runs `f` compiled for the best instruction set this CPU has (AVX-512,
/// AVX2+FMA, or baseline), chosen at run time: the default x86-64 target
/// only allows SSE2, which leaves elementwise loops 2-4x slower. `f` is
/// inlined into a `#[target_feature]` function, so its loops vectorise.
#[inline(always)]
pub fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports every feature `with_avx512` enables
            // (checked just above); `f` itself is safe code.
            return unsafe { with_avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above, for AVX2 and FMA.
            return unsafe { with_avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Says once, on stderr, when tapir's kernels were compiled without
/// optimisation: a plain debug build of an app that uses tapir trains ~40x
/// slower (gemm alone runs at 0.4 GFLOP/s there), and nothing else says why.
/// The fix is a profile override in the app's `Cargo.toml`:
/// `[profile.dev.package."*"] opt-level = 3`. `TAPIR_QUIET_DEBUG=1` silences it.
pub fn warn_if_unoptimised() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if cfg!(debug_assertions) {
        ONCE.call_once(|| {
            if std::env::var_os("TAPIR_QUIET_DEBUG").is_none() {
                eprintln!(
                    "tapir: the kernels were compiled without optimisation (a debug build), so training \
                     runs ~40x slower; add `[profile.dev.package.\"*\"] opt-level = 3` to your \
                     Cargo.toml, or build with --release (TAPIR_QUIET_DEBUG=1 hides this)"
                );
            }
        });
    }
}
