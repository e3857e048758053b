//! Cheap per-thread counters of kernel launches, for tests and profiling
//! (e.g. showing that a frozen layer's weight gradient is never computed).
//! Per thread, so concurrent work elsewhere in the process does not blur them.

use std::cell::Cell;

thread_local! {
    static MATMUL: Cell<u64> = const { Cell::new(0) };
}

pub(crate) fn count_matmul(gemms: usize) {
    MATMUL.with(|c| c.set(c.get() + gemms as u64));
}

/// GEMM calls made by [`crate::cpu::matmul`] from this thread so far.
pub fn matmul_launches() -> u64 {
    MATMUL.with(|c| c.get())
}

/// Memory figures of one device, in bytes (`torch.cuda.memory_stats`, reduced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Held by live tensors (`memory_allocated`).
    pub allocated: usize,
    /// The most held at once since the last reset (`max_memory_allocated`).
    pub peak_allocated: usize,
    /// Held by live tensors plus cached free buffers (`memory_reserved`).
    pub reserved: usize,
    /// Buffers taken from the system (CPU) or the driver (GPU) because the
    /// cache had none to reuse, since the process started (PyTorch's
    /// `num_device_alloc`): flat across steady-state training steps.
    pub num_device_alloc: u64,
}
