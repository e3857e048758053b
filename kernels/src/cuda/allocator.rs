//! The caching allocator (PyTorch's `CUDACachingAllocator`, reduced to
//! exact-size free lists: a training loop asks for the same sizes every
//! step, so freed blocks are reused instead of returned to the driver), and
//! the private pools of CUDA graph captures.
//!
//! A captured graph replays its kernels on the addresses they had during
//! the capture. Every block the capture touched therefore belongs to the
//! graph until the graph is dropped: blocks allocated while capturing come
//! from, and go back to, the capture's private pool, which no allocation
//! outside that capture draws from (PyTorch's graph memory pools).

use super::buffer::CudaBuffer;
use super::device::{CudaDevice, CudaError, CudaResult};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// Blocks are rounded up to this many bytes, as PyTorch's allocator does, so
/// that slightly different sizes share cached blocks.
const ROUND: usize = 512;

/// The owner of blocks outside every capture.
pub(crate) const SHARED: u64 = 0;

type FreeLists = BTreeMap<usize, Vec<CudaSlice<u8>>>;

/// The caching allocator's books.
#[derive(Default)]
pub(crate) struct Pool {
    free: FreeLists,
    /// The free blocks of each live graph's private pool, by pool id.
    private: HashMap<u64, FreeLists>,
    /// The private pool that allocations go to while a capture runs.
    capturing: Option<u64>,
    next_private: u64,
    /// Blocks made with `cuMemAlloc` during a capture (see `outside_graph`),
    /// by address: they are freed with `cuMemFree`.
    sync_allocated: HashSet<u64>,
    allocated: usize,
    peak: usize,
    reserved: usize,
    device_allocs: u64,
}

impl Pool {
    /// A free block of `size` bytes for `owner`: from its private pool
    /// first, then from the shared cache (the block joins the capture).
    fn take(&mut self, size: usize, owner: u64) -> Option<CudaSlice<u8>> {
        // Private pools are numbered from 1, so SHARED finds none here.
        let private = self
            .private
            .get_mut(&owner)
            .and_then(|p| p.get_mut(&size).and_then(Vec::pop));
        let block = private.or_else(|| self.free.get_mut(&size).and_then(Vec::pop));
        if block.is_some() {
            self.allocated += size;
            self.peak = self.peak.max(self.allocated);
        }
        block
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CudaDevice {
    /// A block of at least `bytes` bytes, reused from the cache when one of
    /// that size is free. Out of memory, it empties the cache and tries once
    /// more before giving up with PyTorch's figures. While a graph is being
    /// captured the block belongs to the capture's private pool.
    pub(crate) fn alloc(self: &Arc<Self>, bytes: usize) -> CudaResult<CudaBuffer> {
        let size = bytes.max(1).div_ceil(ROUND) * ROUND;
        let (cached, owner) = {
            let mut pool = lock(&self.pool);
            let owner = pool.capturing.unwrap_or(SHARED);
            (pool.take(size, owner), owner)
        };
        let slice = match cached {
            Some(s) => s,
            None => {
                let s = match self.fresh(size, owner) {
                    Ok(s) => s,
                    // Emptying the cache frees blocks, which a capture
                    // cannot do (a free would become a graph node).
                    Err(_) if owner == SHARED => {
                        self.empty_cache();
                        self.fresh(size, owner)
                            .map_err(|_| self.out_of_memory(size))?
                    }
                    Err(_) => return Err(self.out_of_memory(size)),
                };
                let mut pool = lock(&self.pool);
                pool.device_allocs += 1;
                pool.reserved += size;
                pool.allocated += size;
                pool.peak = pool.peak.max(pool.allocated);
                s
            }
        };
        Ok(CudaBuffer::new(self.clone(), slice, bytes, owner))
    }

    /// A new block from the driver: stream-ordered outside captures; inside
    /// one, an ordinary allocation, since a stream-ordered one would become
    /// a graph-owned allocation that only the graph may use.
    fn fresh(&self, size: usize, owner: u64) -> CudaResult<CudaSlice<u8>> {
        if owner == SHARED {
            // SAFETY: the block is uninitialised; every tapir op writes its
            // output in full before anything reads it.
            return unsafe { self.stream().alloc::<u8>(size) }
                .map_err(|e| self.err("allocating device memory", e));
        }
        self.bind()?;
        // SAFETY: the context is current (bound above) and cuMemAlloc has no
        // other precondition; the block is uninitialised, as above. Captures
        // run in relaxed mode, where this call is allowed.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(size) }
            .map_err(|e| self.err("allocating device memory during a capture", e))?;
        lock(&self.pool).sync_allocated.insert(ptr);
        // SAFETY: `ptr` is a live allocation of `size` bytes, made just
        // above and owned by this slice from now on.
        Ok(unsafe { self.stream().upgrade_device_ptr::<u8>(ptr, size) })
    }

    fn out_of_memory(&self, size: usize) -> CudaError {
        let st = self.memory_stats();
        CudaError::OutOfMemory {
            device: self.ordinal(),
            requested: size,
            free: self.mem_get_info().map_or(0, |(free, _)| free),
            allocated: st.allocated,
            reserved: st.reserved,
        }
    }

    /// Returns a block to its owner's free list (called when a buffer
    /// drops): a live graph's private pool, or the shared cache.
    pub(crate) fn release(&self, slice: CudaSlice<u8>, owner: u64) {
        let mut guard = lock(&self.pool);
        let pool = &mut *guard;
        let size = slice.len();
        pool.allocated -= size;
        let list = match pool.private.get_mut(&owner) {
            Some(p) => p,
            None => &mut pool.free,
        };
        list.entry(size).or_default().push(slice);
    }

    /// Frees every cached block back to the driver (`torch.cuda.empty_cache`).
    /// Blocks of live graphs' private pools stay; nothing is freed while a
    /// capture runs.
    pub fn empty_cache(&self) {
        let (blocks, synced) = {
            let mut pool = lock(&self.pool);
            if pool.capturing.is_some() {
                return;
            }
            let blocks: Vec<_> = std::mem::take(&mut pool.free)
                .into_values()
                .flatten()
                .collect();
            pool.reserved -= blocks.iter().map(|b| b.len()).sum::<usize>();
            let (synced, blocks): (Vec<_>, Vec<_>) = blocks
                .into_iter()
                .partition(|b| pool.sync_allocated.contains(&self.address_of(b)));
            for b in &synced {
                let address = self.address_of(b);
                pool.sync_allocated.remove(&address);
            }
            (blocks, synced)
        };
        drop(blocks);
        for b in synced {
            let ptr = b.leak();
            // SAFETY: `ptr` came from cuMemAlloc (it is in `sync_allocated`)
            // and its slice was just leaked, so nothing else frees or uses
            // it; cuMemFree waits for the work queued on it.
            let freed = unsafe { cudarc::driver::result::free_sync(ptr) };
            if let Err(e) = freed {
                eprintln!("tapir: cuda:{}: freeing a block: {e:?}", self.ordinal());
            }
        }
    }

    fn address_of(&self, b: &CudaSlice<u8>) -> u64 {
        b.device_ptr(self.stream()).0
    }

    /// The caching allocator's figures.
    pub fn memory_stats(&self) -> super::MemoryStats {
        let pool = lock(&self.pool);
        super::MemoryStats {
            allocated: pool.allocated,
            peak_allocated: pool.peak,
            reserved: pool.reserved,
            num_device_alloc: pool.device_allocs,
        }
    }

    /// Starts the peak figure again from what is allocated now.
    pub fn reset_peak_memory_stats(&self) {
        let mut pool = lock(&self.pool);
        pool.peak = pool.allocated;
    }

    /// Opens a private pool and sends every allocation to it until
    /// [`stop_private`](Self::stop_private); `Err` if a capture is running.
    pub(crate) fn start_private(&self) -> CudaResult<u64> {
        let mut pool = lock(&self.pool);
        if pool.capturing.is_some() {
            return Err(CudaError::Unsupported(format!(
                "cuda:{}: a CUDA graph is already being captured on this device",
                self.ordinal()
            )));
        }
        pool.next_private += 1;
        let id = pool.next_private;
        pool.private.insert(id, FreeLists::new());
        pool.capturing = Some(id);
        Ok(id)
    }

    /// Allocations go to the shared cache again; the private pool lives on.
    pub(crate) fn stop_private(&self) {
        lock(&self.pool).capturing = None;
    }

    /// Whether a capture is running on this device.
    pub(crate) fn is_capturing(&self) -> bool {
        lock(&self.pool).capturing.is_some()
    }

    /// Closes private pool `id` (its graph is gone): its free blocks join
    /// the shared cache, and its blocks still in use go there when freed.
    pub(crate) fn retire_private(&self, id: u64) {
        let mut guard = lock(&self.pool);
        let pool = &mut *guard;
        if let Some(lists) = pool.private.remove(&id) {
            for (size, blocks) in lists {
                pool.free.entry(size).or_default().extend(blocks);
            }
        }
    }
}
