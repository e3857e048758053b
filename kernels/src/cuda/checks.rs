//! Index bounds checks on the device, reported at the host's next read.
//!
//! Checking indices on the host would read them back and make the host wait
//! for the GPU at every gather, embedding or cross entropy. Instead, as
//! PyTorch's device-side asserts, the indexing kernels check each index
//! themselves: an out-of-range one is neither read nor written, and the
//! first is recorded in a small flag buffer. The host looks at the flag
//! where it waits for the device anyway (a read, `synchronize`) and panics
//! there with the op, the index and the size, as the CPU does at the op.
//! Unlike a device-side assert, the device stays usable afterwards.
//! `CUDA_LAUNCH_BLOCKING=1` (PyTorch's switch for the same trade) checks
//! after every indexing launch instead, so the panic comes from the op.
//!
//! Launches captured into a CUDA graph run again at every replay, long after
//! their ids would have been reused, so they take ids of their own (from
//! `CAPTURED_BASE`, never reused), and a replay of a graph that holds any
//! makes the next check read the flag.

use super::device::{CudaDevice, CudaResult};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A forced check after this many unreported launches bounds the books.
const MAX_PENDING: usize = 1 << 16;

/// Ids of captured launches start above this (ordinary ids stay below
/// `MAX_PENDING`).
const CAPTURED_BASE: i64 = 1 << 40;

/// One device's flag and the launches that may have set it since the last check.
#[derive(Default)]
pub(crate) struct IndexChecks {
    /// `[id of the first failing launch (0: none), its index]`, made on first use.
    flag: Mutex<Option<CudaSlice<u64>>>,
    /// The op and dim size of each launch since the last check, by id - 1.
    pending: Mutex<Vec<(&'static str, usize)>>,
    /// The op and dim size of each launch captured into a graph, by id -
    /// `CAPTURED_BASE` - 1; kept for the process.
    captured: Mutex<Vec<(&'static str, usize)>>,
    /// A graph with checked launches was replayed since the last check.
    replayed: AtomicBool,
    blocking: bool,
}

impl IndexChecks {
    pub(crate) fn new() -> Self {
        IndexChecks {
            blocking: std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v == "1"),
            ..Default::default()
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kernel arguments of one checked launch: the flag's address, the id.
pub(crate) struct CheckArgs {
    pub flag: u64,
    pub id: i64,
}

impl CudaDevice {
    /// Registers a launch of `op` whose indices must lie in `0..size`.
    pub(crate) fn index_check(&self, op: &'static str, size: usize) -> CudaResult<CheckArgs> {
        if self.is_capturing() {
            let flag = self.index_flag()?;
            let mut captured = lock(&self.checks().captured);
            captured.push((op, size));
            return Ok(CheckArgs {
                flag,
                id: CAPTURED_BASE + captured.len() as i64,
            });
        }
        if lock(&self.checks().pending).len() >= MAX_PENDING {
            self.synchronize()?;
        }
        let flag = self.index_flag()?;
        let mut pending = lock(&self.checks().pending);
        pending.push((op, size));
        Ok(CheckArgs {
            flag,
            id: pending.len() as i64,
        })
    }

    /// The flag's address, made on first use (a capture makes it before it
    /// starts: an allocation inside would belong to the graph).
    pub(crate) fn index_flag(&self) -> CudaResult<u64> {
        let mut flag = lock(&self.checks().flag);
        if flag.is_none() {
            let f = self
                .stream()
                .alloc_zeros::<u64>(2)
                .map_err(|e| self.err("allocating the index-check flag", e))?;
            *flag = Some(f);
        }
        let (ptr, _sync) = flag.as_ref().expect("made above").device_ptr(self.stream());
        Ok(ptr)
    }

    /// How many launches have been captured with checks so far (a graph
    /// compares the count before and after its capture).
    pub(crate) fn captured_checks(&self) -> usize {
        lock(&self.checks().captured).len()
    }

    /// A graph holding checked launches was replayed: the next check reads
    /// the flag.
    pub(crate) fn note_checked_replay(&self) {
        self.checks().replayed.store(true, Ordering::Relaxed);
    }

    /// After a checked launch: with `CUDA_LAUNCH_BLOCKING=1`, report now.
    pub(crate) fn after_checked_launch(&self) -> CudaResult<()> {
        if self.checks().blocking && !self.is_capturing() {
            self.synchronize()?;
        }
        Ok(())
    }

    /// Called once the stream is idle: panics with the first out-of-range
    /// index since the last check, after clearing the flag so the device
    /// stays usable. Reads the flag only if an indexing kernel ran.
    pub(crate) fn report_index_errors(&self) -> CudaResult<()> {
        let launches = std::mem::take(&mut *lock(&self.checks().pending));
        let replayed = self.checks().replayed.swap(false, Ordering::Relaxed);
        if launches.is_empty() && !replayed {
            return Ok(());
        }
        let mut guard = lock(&self.checks().flag);
        let flag = guard.as_mut().expect("a checked launch made the flag");
        let got = self
            .stream()
            .clone_dtoh(flag)
            .map_err(|e| self.err("reading the index-check flag", e))?;
        self.stream()
            .synchronize()
            .map_err(|e| self.err("reading the index-check flag", e))?;
        if got[0] == 0 {
            return Ok(());
        }
        self.stream()
            .memset_zeros(flag)
            .map_err(|e| self.err("clearing the index-check flag", e))?;
        drop(guard);
        let id = got[0] as i64;
        let found = match id > CAPTURED_BASE {
            true => lock(&self.checks().captured)
                .get((id - CAPTURED_BASE - 1) as usize)
                .copied(),
            false => launches.get(id as usize - 1).copied(),
        };
        let (op, size) = found.unwrap_or(("an indexing op", 0));
        panic!(
            "{op}: index {} is out of bounds for dim of size {size} (found on {self:?} at the next \
             host read; CUDA_LAUNCH_BLOCKING=1 reports it at the op)",
            got[1] as i64
        );
    }
}
