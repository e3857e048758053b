//! The CPU threads kernels run on, sized by [`set_num_threads`]: a
//! fork-join pool whose helpers spin between jobs ([`parallel_for`],
//! [`par_chunks_mut`]) for the mid-size kernels of a step, and a rayon pool
//! ([`install`]) for gemm's own splitting of large products with few rows.
//!
//! rayon's global pool cannot be resized once built, and `torch.set_num_threads`
//! can be called at any time, so tapir keeps its own pools behind a lock and
//! swaps them when the count changes.

use crate::spin::SpinPool;
use std::sync::{Arc, OnceLock, RwLock};

struct Pool {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
    spin: Arc<SpinPool>,
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
        spin: Arc::new(SpinPool::new(threads)),
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
    with_pool(|p| p.threads)
}

fn with_pool<R>(f: impl FnOnce(&Pool) -> R) -> R {
    if let Some(p) = cell().read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return f(p);
    }
    let mut guard = cell().write().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(|| build(default_threads())))
}

/// Runs `f` inside tapir's rayon pool; rayon calls within it use that pool's
/// threads. Returns the thread count alongside so callers can size their
/// chunks. For gemm's own splitting of large products; kernels split their
/// work with [`parallel_for`].
pub fn install<R: Send>(f: impl FnOnce(usize) -> R + Send) -> R {
    let (threads, pool, spin) = with_pool(|p| (p.threads, p.pool.clone(), p.spin.clone()));
    if threads == 1 || rayon::current_thread_index().is_some() {
        // Single-threaded, or already inside a pool worker: run inline.
        return f(threads);
    }
    spin.quiet(); // rayon's workers take every core now
    pool.install(|| f(threads))
}

/// Runs `f(i)` for each `i` in `0..tasks` across tapir's threads: the
/// calling thread takes tasks too, and the other threads spin between jobs,
/// so a 20 µs kernel can be split without paying a wake-up. Tasks are
/// claimed one at a time, so uneven ones balance. A call from inside a task,
/// or while another thread's job runs, runs its tasks on its own thread.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let sum = AtomicUsize::new(0);
/// tapir_kernels::threads::parallel_for(100, |i| {
///     sum.fetch_add(i, Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 4950);
/// ```
pub fn parallel_for(tasks: usize, f: impl Fn(usize) + Sync) {
    let spin = with_pool(|p| (p.threads > 1).then(|| p.spin.clone()));
    match spin {
        Some(spin) => spin.run(tasks, &f),
        None => (0..tasks).for_each(f),
    }
}

/// A raw pointer that tasks may share: each task derives a disjoint slice.
struct SharedPtr<T>(*mut T);

// SAFETY: tasks only ever build disjoint slices from the pointer (see
// `par_chunks_mut`), and those hold `T: Send` values.
unsafe impl<T: Send> Sync for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

/// A mutable slice that parallel tasks share, each carving out pieces that
/// no other task touches at the same time (a scatter split by columns,
/// whose writes interleave in memory but never meet).
///
/// ```
/// let mut v = vec![0; 8];
/// let shared = tapir_kernels::threads::SharedSlice::new(&mut v);
/// tapir_kernels::threads::parallel_for(2, |t| {
///     for row in 0..4 {
///         // SAFETY: task t writes column t of each row of two alone.
///         unsafe { shared.piece(row * 2 + t, 1)[0] = t + 1 };
///     }
/// });
/// assert_eq!(v, [1, 2, 1, 2, 1, 2, 1, 2]);
/// ```
pub struct SharedSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: tasks reach the elements only through `piece`, whose contract
// keeps live pieces disjoint, and the elements are `Send`.
unsafe impl<T: Send> Sync for SharedSlice<'_, T> {}

impl<'a, T> SharedSlice<'a, T> {
    /// Shares `data` for as long as it is borrowed.
    pub fn new(data: &'a mut [T]) -> Self {
        SharedSlice {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Elements `start..start + len` (panics when they run past the end).
    ///
    /// # Safety
    /// No other piece overlapping this one is alive while it is.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn piece(&self, start: usize, len: usize) -> &mut [T] {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "SharedSlice::piece: {start}..{start}+{len} runs past {} elements",
            self.len
        );
        // SAFETY: in bounds (checked above), borrowed mutably for 'a, and
        // disjoint from every other live piece (the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Task `i`'s piece `i * chunk..` (at most `chunk` long) of a slice behind `ptr`.
///
/// # Safety
/// `ptr` points to `len` elements borrowed mutably for the whole job, task
/// `i` runs once, and `i * chunk < len` or the piece is empty.
unsafe fn piece<'a, T>(ptr: &SharedPtr<T>, len: usize, chunk: usize, i: usize) -> &'a mut [T] {
    let start = (i * chunk).min(len);
    let n = chunk.min(len - start);
    // SAFETY: `start + n <= len`, and pieces of different tasks are disjoint
    // (the caller's contract).
    unsafe { std::slice::from_raw_parts_mut(ptr.get().add(start), n) }
}

/// [`par_chunks_mut`] over two slices at once: task `i` gets piece `i` of
/// each (`a` in pieces of `ca`, `b` of `cb`); as many tasks as `a` has pieces.
///
/// ```
/// let (mut rows, mut sums) = (vec![1, 2, 3, 4], vec![0; 2]);
/// tapir_kernels::threads::par_chunks_mut2((&mut rows, 2), (&mut sums, 1), |_, r, s| {
///     s[0] = r.iter().sum();
/// });
/// assert_eq!(sums, [3, 7]);
/// ```
pub fn par_chunks_mut2<A: Send, B: Send>(
    (a, ca): (&mut [A], usize),
    (b, cb): (&mut [B], usize),
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let (na, nb, ca, cb) = (a.len(), b.len(), ca.max(1), cb.max(1));
    let (pa, pb) = (SharedPtr(a.as_mut_ptr()), SharedPtr(b.as_mut_ptr()));
    grouped(na.div_ceil(ca), |i| {
        // SAFETY: both slices are borrowed mutably for this call, which
        // returns after every task; each chunk index runs once.
        let (x, y) = unsafe { (piece(&pa, na, ca, i), piece(&pb, nb, cb, i)) };
        f(i, x, y)
    })
}

/// Runs `f` on chunk indices `0..chunks` across threads, in one block of
/// adjacent chunks per thread (OpenMP's static schedule). The calling
/// thread claims the first block, so a kernel after a row-split GEMM reads
/// the half that its own core wrote; a block a late helper has not claimed
/// yet is taken by whoever finishes first. Handing out a quarter block at a
/// time moved data between the cores' caches and cost a claim each: the
/// small CNN's 2-thread step ran 4.9 K samples/s that way and 5.9 K with
/// blocks, inference b256 204 K and 212 K (best of 4 and 8 interleaved runs).
fn grouped(chunks: usize, f: impl Fn(usize) + Sync) {
    let per = chunks.div_ceil(num_threads()).max(1);
    parallel_for(chunks.div_ceil(per), |t| {
        (t * per..((t + 1) * per).min(chunks)).for_each(&f)
    })
}

/// [`par_chunks_mut2`] over three slices.
pub fn par_chunks_mut3<A: Send, B: Send, C: Send>(
    (a, ca): (&mut [A], usize),
    (b, cb): (&mut [B], usize),
    (c, cc): (&mut [C], usize),
    f: impl Fn(usize, &mut [A], &mut [B], &mut [C]) + Sync,
) {
    let (na, nb, nc) = (a.len(), b.len(), c.len());
    let (ca, cb, cc) = (ca.max(1), cb.max(1), cc.max(1));
    let (pa, pb, pc) = (
        SharedPtr(a.as_mut_ptr()),
        SharedPtr(b.as_mut_ptr()),
        SharedPtr(c.as_mut_ptr()),
    );
    grouped(na.div_ceil(ca), |i| {
        // SAFETY: as in `par_chunks_mut2`.
        let (x, y, z) = unsafe {
            (
                piece(&pa, na, ca, i),
                piece(&pb, nb, cb, i),
                piece(&pc, nc, cc, i),
            )
        };
        f(i, x, y, z)
    })
}

/// [`par_chunks_mut2`] over four slices.
#[allow(clippy::type_complexity)]
pub fn par_chunks_mut4<A: Send, B: Send, C: Send, D: Send>(
    (a, ca): (&mut [A], usize),
    (b, cb): (&mut [B], usize),
    (c, cc): (&mut [C], usize),
    (d, cd): (&mut [D], usize),
    f: impl Fn(usize, &mut [A], &mut [B], &mut [C], &mut [D]) + Sync,
) {
    let (na, nb, nc, nd) = (a.len(), b.len(), c.len(), d.len());
    let (ca, cb, cc, cd) = (ca.max(1), cb.max(1), cc.max(1), cd.max(1));
    let (pa, pb) = (SharedPtr(a.as_mut_ptr()), SharedPtr(b.as_mut_ptr()));
    let (pc, pd) = (SharedPtr(c.as_mut_ptr()), SharedPtr(d.as_mut_ptr()));
    grouped(na.div_ceil(ca), |i| {
        // SAFETY: as in `par_chunks_mut2`.
        let (w, x, y, z) = unsafe {
            (
                piece(&pa, na, ca, i),
                piece(&pb, nb, cb, i),
                piece(&pc, nc, cc, i),
                piece(&pd, nd, cd, i),
            )
        };
        f(i, w, x, y, z)
    })
}

/// [`par_chunks_mut2`] over any number of slices of one length: task `i`
/// gets piece `i` (of `chunk` elements) of every slice.
///
/// ```
/// let (mut a, mut b) = (vec![0; 5], vec![0; 5]);
/// tapir_kernels::threads::par_chunks_mut_many(vec![&mut a[..], &mut b[..]], 2, |i, p| {
///     p[0].fill(i);
///     p[1].fill(10 * i);
/// });
/// assert_eq!((a, b), (vec![0, 0, 1, 1, 2], vec![0, 0, 10, 10, 20]));
/// ```
pub fn par_chunks_mut_many<T: Send>(
    slices: Vec<&mut [T]>,
    chunk: usize,
    f: impl Fn(usize, &mut [&mut [T]]) + Sync,
) {
    let n = slices.first().map_or(0, |s| s.len());
    assert!(
        slices.iter().all(|s| s.len() == n),
        "par_chunks_mut_many: the slices differ in length"
    );
    let chunk = chunk.max(1);
    let ptrs: Vec<SharedPtr<T>> = slices
        .into_iter()
        .map(|s| SharedPtr(s.as_mut_ptr()))
        .collect();
    grouped(n.div_ceil(chunk), |i| {
        // SAFETY: every slice is borrowed mutably for this whole call (moved
        // in), `grouped` returns only after every chunk, each index once, so
        // the pieces of different tasks are disjoint.
        let mut pieces: Vec<&mut [T]> = ptrs
            .iter()
            .map(|p| unsafe { piece(p, n, chunk, i) })
            .collect();
        f(i, &mut pieces)
    })
}

/// `f(i, chunk)` for each `chunk`-element piece of `data` (the last may be
/// shorter), across tapir's threads as [`parallel_for`]; small pieces go
/// several to a task.
///
/// ```
/// let mut v = vec![0usize; 10];
/// tapir_kernels::threads::par_chunks_mut(&mut v, 3, |i, c| c.fill(i));
/// assert_eq!(v, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
/// ```
pub fn par_chunks_mut<T: Send>(data: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let (n, chunk) = (data.len(), chunk.max(1));
    let base = SharedPtr(data.as_mut_ptr());
    grouped(n.div_ceil(chunk), |i| {
        // SAFETY: `data` is borrowed mutably for this whole call, and
        // `grouped` returns only after every chunk, each index once.
        f(i, unsafe { piece(&base, n, chunk, i) })
    })
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

/// How many of a reduction's `outputs` each task takes when `inputs`
/// elements feed them: all on the calling thread below [`PARALLEL_GRAIN`],
/// else an even share per thread in multiples of 16.
///
/// ```
/// use tapir_kernels::threads::outputs_per_task;
/// assert_eq!(outputs_per_task(100, 10), 10);
/// assert!(outputs_per_task(1 << 22, 2048) >= 2048 / tapir_kernels::threads::num_threads());
/// ```
pub fn outputs_per_task(inputs: usize, outputs: usize) -> usize {
    if inputs < PARALLEL_GRAIN {
        outputs
    } else {
        outputs.div_ceil(num_threads()).next_multiple_of(16)
    }
    .max(1)
}

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
