//! A CPU storage's buffer: counted in the memory statistics while it lives,
//! returned to the caching allocator when it drops, and, with the `cuda`
//! feature, possibly page-locked (`Tensor::pin_memory`; see `pinned.rs`).

use super::cpu::{CpuBuffer, with_vec};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use tapir_kernels::alloc;

/// Bytes held by live CPU storages, and their peak (`tapir::memory`).
static CPU_ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static CPU_PEAK: AtomicUsize = AtomicUsize::new(0);

/// (bytes held by live CPU storages, their peak since the last reset).
pub(crate) fn cpu_memory() -> (usize, usize) {
    (
        CPU_ALLOCATED.load(Ordering::Relaxed),
        CPU_PEAK.load(Ordering::Relaxed),
    )
}

/// Starts the CPU peak again from the current figure.
pub(crate) fn reset_cpu_peak() {
    CPU_PEAK.store(CPU_ALLOCATED.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// A CPU storage's buffer, whose bytes are counted while it lives (the
/// CPU side of `memory_allocated`). Reads and writes go through `Deref`;
/// writes to pinned memory first wait for any copy still reading it.
#[derive(Debug)]
pub(crate) struct Tracked {
    buf: CpuBuffer,
    /// The page-locking of `buf`, when it is pinned.
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    pin: Option<tapir_kernels::cuda::HostPin>,
}

impl Tracked {
    pub(super) fn new(buf: CpuBuffer) -> Tracked {
        count(&buf);
        Tracked {
            buf,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            pin: None,
        }
    }

    /// A pinned buffer with its registration.
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    pub(super) fn pinned(buf: CpuBuffer, pin: tapir_kernels::cuda::HostPin) -> Tracked {
        count(&buf);
        Tracked {
            buf,
            pin: Some(pin),
        }
    }

    /// The registration of this very buffer, when it is pinned.
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    pub(super) fn pin(&self) -> Option<&tapir_kernels::cuda::HostPin> {
        let pin = self.pin.as_ref()?;
        with_vec!(&self.buf, v => pin.covers(v)).then_some(pin)
    }

    /// Whether the buffer is page-locked (`Tensor::is_pinned`).
    pub(super) fn is_pinned(&self) -> bool {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            self.pin().is_some()
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        false
    }
}

fn count(buf: &CpuBuffer) {
    let now = CPU_ALLOCATED.fetch_add(buf.nbytes(), Ordering::Relaxed) + buf.nbytes();
    CPU_PEAK.fetch_max(now, Ordering::Relaxed);
}

impl Drop for Tracked {
    fn drop(&mut self) {
        CPU_ALLOCATED.fetch_sub(self.buf.nbytes(), Ordering::Relaxed);
        let buf = std::mem::replace(&mut self.buf, CpuBuffer::U8(Vec::new()));
        // A pinned buffer goes back to the pinned cache, still registered.
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Some(pin) = self.pin.take() {
            super::pinned::release(buf, pin);
            return;
        }
        // Others go to the caching allocator for the next op's output.
        with_vec!(buf, v => {
            alloc::recycle(v);
        });
    }
}

impl Deref for Tracked {
    type Target = CpuBuffer;
    fn deref(&self) -> &CpuBuffer {
        &self.buf
    }
}

impl DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut CpuBuffer {
        // A copy to a GPU may still be reading pinned memory by DMA.
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Some(pin) = &self.pin {
            pin.wait()
                .unwrap_or_else(|e| super::cuda::fail("writing pinned memory", e));
        }
        &mut self.buf
    }
}
