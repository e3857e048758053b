//! The CPU caching allocator: freed tensor buffers go to per-type free lists
//! by size class and are handed out again, so a steady-state training step
//! takes nothing new from the system allocator — no page faults on fresh
//! `mmap`ed pages (15% of the small CNN's step before this), and no zeroing
//! beyond what a kernel asks for.
//!
//! Kernels take their outputs here ([`filled`], [`with_capacity`]); the
//! runtime gives a tensor's buffer back with [`recycle`] when its storage
//! dies. Buffers under [`MIN_CACHED_BYTES`] are left to the system
//! allocator, whose small bins are already fast and fault-free. The cache
//! holds at most [`cache_limit`] bytes (`TAPIR_CPU_CACHE_MB`, default 1024);
//! [`empty_cache`] frees all of it (PyTorch's `torch.cuda.empty_cache`).
//!
//! ```
//! use tapir_kernels::alloc;
//! let v: Vec<f32> = alloc::filled(1 << 20, 0.0);
//! let before = alloc::stats();
//! assert!(alloc::recycle(v)); // cached, not freed
//! let again: Vec<f32> = alloc::filled(1 << 20, 1.0); // the same buffer, refilled
//! assert_eq!(alloc::stats().system_allocs, before.system_allocs);
//! assert!(again.iter().all(|&x| x == 1.0));
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this many bytes are not cached.
pub const MIN_CACHED_BYTES: usize = 64 << 10;

/// Size classes per power of two: a request is rounded up to the next class
/// (at most 25% over), so buffers of nearby sizes are shared.
const CLASSES_PER_OCTAVE: usize = 8;

/// What the allocator has done since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Buffers of cacheable size taken from the system allocator: cache
    /// misses, and buffers some code made outside this allocator (counted
    /// when given back: their capacity is not a size class). PyTorch's
    /// `num_device_alloc`. Flat in a steady state.
    pub system_allocs: u64,
    /// Requests served from the cache.
    pub reuses: u64,
    /// Bytes held in the free lists now.
    pub cached_bytes: usize,
}

static SYSTEM_ALLOCS: AtomicU64 = AtomicU64::new(0);
static REUSES: AtomicU64 = AtomicU64::new(0);
static CACHED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The allocator's counters.
pub fn stats() -> AllocStats {
    AllocStats {
        system_allocs: SYSTEM_ALLOCS.load(Ordering::Relaxed),
        reuses: REUSES.load(Ordering::Relaxed),
        cached_bytes: CACHED_BYTES.load(Ordering::Relaxed),
    }
}

/// The most bytes the free lists hold (`TAPIR_CPU_CACHE_MB`, default 1024 MiB);
/// a buffer freed beyond it goes back to the system.
pub fn cache_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("TAPIR_CPU_CACHE_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1024)
            << 20
    })
}

/// One element type's free lists, keyed by size class in bytes, and how
/// often each class has been asked for.
struct Lists<T> {
    free: HashMap<usize, Vec<Vec<T>>>,
    demand: HashMap<usize, u64>,
}

type Cache = HashMap<TypeId, Box<dyn Any + Send>>;

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn with_lists<T: Send + 'static, R>(f: impl FnOnce(&mut Lists<T>) -> R) -> R {
    let mut cache = cache();
    let lists = cache.entry(TypeId::of::<T>()).or_insert_with(|| {
        Box::new(Lists::<T> {
            free: HashMap::new(),
            demand: HashMap::new(),
        })
    });
    f(lists
        .downcast_mut::<Lists<T>>()
        .expect("free lists are keyed by their element type"))
}

/// The class boundaries are `2^p * (1 + k / CLASSES_PER_OCTAVE)`.
fn class_step(bytes: usize) -> usize {
    let p = usize::BITS - 1 - bytes.leading_zeros();
    (1usize << p) / CLASSES_PER_OCTAVE
}

/// The smallest class of at least `bytes`.
fn class_up(bytes: usize) -> usize {
    let step = class_step(bytes);
    bytes.div_ceil(step) * step
}

/// The largest class of at most `bytes`.
fn class_down(bytes: usize) -> usize {
    let step = class_step(bytes);
    bytes / step * step
}

/// An empty `Vec` with room for `n` elements: a cached buffer of `n`'s size
/// class when there is one, else a fresh one of exactly that class.
pub fn with_capacity<T: Send + 'static>(n: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    let bytes = n.saturating_mul(size);
    if bytes < MIN_CACHED_BYTES {
        return Vec::with_capacity(n);
    }
    let class = class_up(bytes);
    let take = |l: &mut Lists<T>| {
        *l.demand.entry(class).or_default() += 1;
        l.free.get_mut(&class).and_then(Vec::pop)
    };
    if let Some(mut v) = with_lists::<T, _>(take) {
        CACHED_BYTES.fetch_sub(v.capacity() * size, Ordering::Relaxed);
        REUSES.fetch_add(1, Ordering::Relaxed);
        v.clear();
        return v;
    }
    SYSTEM_ALLOCS.fetch_add(1, Ordering::Relaxed);
    Vec::with_capacity(class / size)
}

/// `n` copies of `value` in a (possibly cached) buffer: `vec![value; n]`.
/// Large fills are split across the threads: on the calling thread alone
/// they were 8% of a 2-thread CNN step, with the other core idle.
pub fn filled<T: Copy + Send + Sync + 'static>(n: usize, value: T) -> Vec<T> {
    let mut v = with_capacity(n);
    // Fills of at least four parallel grains: smaller ones are cheaper alone.
    if crate::threads::parallel(n / 4) {
        let spare = &mut v.spare_capacity_mut()[..n];
        let chunk = crate::threads::PARALLEL_GRAIN;
        crate::threads::par_chunks_mut(spare, chunk, |_, c| {
            c.iter_mut().for_each(|x| {
                x.write(value);
            })
        });
        // SAFETY: the first `n` slots of the spare capacity (`v` was empty,
        // with capacity >= n) were all written just above.
        unsafe { v.set_len(n) };
    } else {
        v.resize(n, value);
    }
    v
}

/// `iter`'s items, of which there are `n`, in a (possibly cached) buffer.
pub fn collect<T: Send + 'static>(n: usize, iter: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = with_capacity(n);
    v.extend(iter);
    v
}

/// Gives a buffer back: cached by the size class its capacity covers when
/// kernels have asked for that class and type before, else freed (so
/// one-off buffers, such as the f64 draws behind a model's initial
/// weights, do not sit in the cache), as are small ones and any beyond the
/// cache limit. Returns whether it was kept.
pub fn recycle<T: Send + 'static>(v: Vec<T>) -> bool {
    let size = std::mem::size_of::<T>().max(1);
    let bytes = v.capacity() * size;
    if bytes < MIN_CACHED_BYTES {
        return false;
    }
    let class = class_down(bytes);
    if class != bytes {
        // Made outside `with_capacity` (whose buffers are a class exactly):
        // fresh pages from the system on every call of whatever made it.
        SYSTEM_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
    if CACHED_BYTES.load(Ordering::Relaxed) + bytes > cache_limit() {
        return false;
    }
    let kept = with_lists::<T, _>(|l| {
        if l.demand.get(&class).copied().unwrap_or(0) == 0 {
            return Err(v);
        }
        l.free.entry(class).or_default().push(v);
        Ok(())
    });
    match kept {
        Ok(()) => {
            CACHED_BYTES.fetch_add(bytes, Ordering::Relaxed);
            true
        }
        Err(v) => {
            drop(v); // outside the lock
            false
        }
    }
}

/// Frees every cached buffer (`torch.cuda.empty_cache` for the CPU).
pub fn empty_cache() {
    let drained: Vec<Box<dyn Any + Send>> = cache().drain().map(|(_, v)| v).collect();
    CACHED_BYTES.store(0, Ordering::Relaxed);
    drop(drained); // outside the lock
}

/// Slots every one of which a kernel has written, as values: for kernels
/// that write a fresh buffer's spare capacity (no zero fill first) and then
/// read what they wrote.
///
/// # Safety
/// Every slot of `s` must have been written.
#[inline(always)]
pub(crate) unsafe fn written<T>(s: &mut [std::mem::MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: every slot is initialised (the caller's contract), and
    // `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(s as *mut [std::mem::MaybeUninit<T>] as *mut [T]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_and_down_within_a_quarter() {
        for bytes in [
            MIN_CACHED_BYTES,
            100_000,
            1 << 20,
            (1 << 20) + 1,
            3_000_000,
            1 << 30,
        ] {
            let (up, down) = (class_up(bytes), class_down(bytes));
            assert!(down <= bytes && bytes <= up, "{bytes}: {down} {up}");
            assert!(up - bytes <= bytes / 4 && bytes - down <= bytes / 4);
            assert_eq!(class_up(up), up);
            assert_eq!(class_down(up), up);
        }
    }

    #[test]
    fn a_recycled_buffer_serves_a_request_of_its_class_and_type() {
        // 300_000 u16 elements: a size no other test in this crate uses.
        let v: Vec<u16> = filled(300_000, 7);
        let p = v.as_ptr();
        assert!(recycle(v));
        let w: Vec<u16> = filled(299_000, 3);
        assert_eq!(w.as_ptr(), p, "the cached buffer is handed out again");
        assert!(w.len() == 299_000 && w.iter().all(|&x| x == 3));
        // Another element type never gets it.
        assert!(recycle(w));
        let other: Vec<i16> = with_capacity(299_000);
        assert_ne!(other.as_ptr() as *const u16, p);
    }

    #[test]
    fn only_buffers_of_a_size_kernels_ask_for_are_cached() {
        assert!(!recycle(vec![0u8; 1000]), "small");
        assert!(!recycle(vec![0u8; MIN_CACHED_BYTES]), "never asked for");
        drop(with_capacity::<u8>(MIN_CACHED_BYTES));
        assert!(recycle(vec![0u8; MIN_CACHED_BYTES]), "asked for once");
    }
}
