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
