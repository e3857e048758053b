//! The fork-join pool mid-size kernels run on: the calling thread takes
//! tasks too, and helper threads spin for a while after each job before
//! they park, as OpenMP's workers do.
//!
//! A training step is hundreds of kernels of 5-500 µs with a few µs of serial
//! work between them. Handing each to rayon cost 10-60 µs here (2 vCPUs
//! under KVM): its workers sleep between jobs, waking one is an
//! inter-processor interrupt, and the caller sleeps on a latch until the
//! job ends, which costs a second wake-up. With a spinning helper the same
//! dispatch costs at most ~5 µs, so splitting a 20 µs elementwise op pays.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a helper spins for the next job before it parks: longer than
/// the serial gaps inside a training step, short enough that an idle
/// process stops burning a core at once. `TAPIR_SPIN_US` sets it (0 parks
/// at once, as `OMP_WAIT_POLICY=passive`), for a process whose other
/// threads (data workers) need the cores more than the kernels do.
fn spin_time() -> Duration {
    static SPIN: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("TAPIR_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok());
        Duration::from_micros(us.unwrap_or(300))
    })
}

/// One job's tasks: called with each task index in `0..tasks` exactly once.
type Tasks<'a> = dyn Fn(usize) + Sync + 'a;

struct Shared {
    /// Odd while a job is open, even between jobs.
    generation: AtomicU64,
    /// The open job's closure (its lifetime erased: see `SpinPool::run`).
    job: UnsafeCell<Option<&'static Tasks<'static>>>,
    tasks: AtomicUsize,
    /// The next unclaimed task index.
    next: AtomicUsize,
    /// Tasks finished (or panicked).
    done: AtomicUsize,
    /// Helpers between seeing an open job and leaving it.
    entered: AtomicUsize,
    /// Helpers parked (or about to park).
    parked: AtomicUsize,
    /// Bumped to send spinning helpers to park (a rayon job starts).
    quiet: AtomicU64,
    shutdown: AtomicBool,
    /// The first panic of the open job's tasks, re-raised on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: every field but `job` is a synchronisation primitive. `job` is
// written only by the thread that holds `SpinPool::busy`, while no helper
// is inside the job (`entered` is 0 and `generation` even), and read only by
// helpers that registered in `entered` and then saw the job's generation
// still open (see `helper`); the SeqCst generation update orders the write
// before those reads.
unsafe impl Sync for Shared {}

impl Shared {
    /// Claims and runs tasks until none is left.
    fn work(&self, f: &Tasks<'_>) {
        let tasks = self.tasks.load(SeqCst);
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            if i >= tasks {
                return;
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                let mut first = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(p);
            }
            self.done.fetch_add(1, SeqCst);
        }
    }
}

/// A fixed set of helper threads and the job they share.
pub(crate) struct SpinPool {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
    /// Held by the thread whose job is open; others run serially.
    busy: Mutex<()>,
}

impl SpinPool {
    /// A pool for `threads` threads in all: the caller and `threads - 1` helpers.
    pub(crate) fn new(threads: usize) -> SpinPool {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            tasks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
            quiet: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
        });
        let helpers = (1..threads.max(1))
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("tapir-spin-{i}"))
                    .spawn(move || helper(&s))
                    .expect("tapir: failed to start a CPU helper thread")
            })
            .collect();
        SpinPool {
            shared,
            helpers,
            busy: Mutex::new(()),
        }
    }

    /// Runs `f(i)` for every `i` in `0..tasks`, on the calling thread and the
    /// helpers; returns when all have finished, re-raising the first panic.
    /// A call made while another job is open (from a task, or from another
    /// thread) runs its tasks serially on its own thread.
    pub(crate) fn run(&self, tasks: usize, f: &Tasks<'_>) {
        let busy = match self.helpers.is_empty() || tasks < 2 {
            true => None,
            false => self.busy.try_lock().ok(),
        };
        let Some(_busy) = busy else {
            (0..tasks).for_each(f);
            return;
        };
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only for the duration of this call:
        // helpers read the closure only while the job is open and registered
        // in `entered`, and this function returns (or unwinds) only after
        // closing the job and seeing `entered` at 0, then clears the slot.
        let f_static: &'static Tasks<'static> = unsafe { std::mem::transmute(f) };
        // SAFETY: no job is open and `busy` is held (see `Shared`'s Sync).
        unsafe { *s.job.get() = Some(f_static) };
        s.tasks.store(tasks, SeqCst);
        s.next.store(0, SeqCst);
        s.done.store(0, SeqCst);
        s.generation.fetch_add(1, SeqCst); // open
        if s.parked.load(SeqCst) > 0 {
            self.helpers.iter().for_each(|h| h.thread().unpark());
        }
        s.work(f);
        spin_until(|| s.done.load(SeqCst) >= tasks);
        s.generation.fetch_add(1, SeqCst); // closed
        spin_until(|| s.entered.load(SeqCst) == 0);
        // SAFETY: the job is closed and no helper is inside it.
        unsafe { *s.job.get() = None };
        let panic = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }

    /// Sends spinning helpers to park now: a rayon job is about to use
    /// every core, and a spinning helper would take one from it.
    pub(crate) fn quiet(&self) {
        self.shared.quiet.fetch_add(1, SeqCst);
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        for h in self.helpers.drain(..) {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// Spins until `done()`, yielding the core now and then: a helper that
/// the scheduler put on the caller's core (or the caller on a helper's) must
/// get to run, or the spinning thread waits for a time slice to end.
fn spin_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(YIELD_EVERY) {
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

/// Spins between yields of the core (~1 µs of `pause` on Zen 5).
const YIELD_EVERY: u32 = 64;

/// A helper's life: wait for a job (spinning, then parked), take its tasks.
fn helper(s: &Shared) {
    let mut seen = 0;
    loop {
        let Some(g) = wait_for_job(s, seen) else {
            return;
        };
        seen = g;
        s.entered.fetch_add(1, SeqCst);
        if s.generation.load(SeqCst) == g {
            // SAFETY: registered in `entered` with the job still open, so
            // the caller keeps the closure alive and the slot unchanged
            // until this helper leaves (see `SpinPool::run`).
            if let Some(f) = unsafe { *s.job.get() } {
                s.work(f);
            }
        }
        s.entered.fetch_sub(1, SeqCst);
    }
}

/// The next open job's generation after `seen`, or `None` at shutdown.
fn wait_for_job(s: &Shared, seen: u64) -> Option<u64> {
    let open = |g: u64| !g.is_multiple_of(2) && g != seen;
    let mut start = Instant::now();
    let mut quiet = s.quiet.load(SeqCst);
    let mut spins = 0u32;
    loop {
        if s.shutdown.load(SeqCst) {
            return None;
        }
        let g = s.generation.load(SeqCst);
        if open(g) {
            return Some(g);
        }
        spins = spins.wrapping_add(1);
        // Yield now and then, as in `spin_until`: on a VM (or a busy machine)
        // the scheduler may put this helper on the core of the thread whose
        // next job it waits for; measured here, 2-thread inference b256
        // gained 13% in the median run, and its slowest runs 12%.
        if spins.is_multiple_of(YIELD_EVERY) {
            std::thread::yield_now();
        }
        if spins.is_multiple_of(256)
            && (start.elapsed() > spin_time() || s.quiet.load(SeqCst) != quiet)
        {
            s.parked.fetch_add(1, SeqCst);
            // Re-checked after announcing the park: a job opened before the
            // announcement is seen here; one opened after it unparks us.
            if !open(s.generation.load(SeqCst)) && !s.shutdown.load(SeqCst) {
                std::thread::park_timeout(Duration::from_millis(100));
            }
            s.parked.fetch_sub(1, SeqCst);
            start = Instant::now();
            quiet = s.quiet.load(SeqCst);
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_task_runs_once_across_threads_and_parks() {
        let pool = SpinPool::new(3);
        for tasks in [0, 1, 2, 7, 100] {
            let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            pool.run(tasks, &|i| {
                hits[i].fetch_add(1, SeqCst);
            });
            assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "{tasks} tasks");
        }
        // After parking (well past the spin time), a job still reaches the helpers.
        std::thread::sleep(Duration::from_millis(5));
        let threads = Mutex::new(std::collections::HashSet::new());
        pool.run(64, &|_| {
            threads.lock().unwrap().insert(std::thread::current().id());
            std::thread::sleep(Duration::from_micros(200));
        });
        assert!(
            threads.lock().unwrap().len() > 1,
            "the helpers took no task"
        );
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_and_the_pool_survives() {
        let pool = SpinPool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(8, &|i| {
                if i == 5 {
                    panic!("task five");
                }
            })
        }));
        let msg = *r.unwrap_err().downcast::<&str>().unwrap();
        assert_eq!(msg, "task five");
        let count = AtomicUsize::new(0);
        pool.run(8, &|_| {
            count.fetch_add(1, SeqCst);
        });
        assert_eq!(count.load(SeqCst), 8);
    }

    #[test]
    fn a_nested_job_runs_serially_instead_of_deadlocking() {
        let pool = SpinPool::new(2);
        let count = AtomicUsize::new(0);
        pool.run(4, &|_| {
            pool.run(3, &|_| {
                count.fetch_add(1, SeqCst);
            });
        });
        assert_eq!(count.load(SeqCst), 12);
    }
}
