//! Cheap global counters of kernel launches, for tests and profiling
//! (e.g. showing that a frozen layer's weight gradient is never computed).

use std::sync::atomic::{AtomicU64, Ordering};

static MATMUL: AtomicU64 = AtomicU64::new(0);

pub(crate) fn count_matmul(gemms: usize) {
    MATMUL.fetch_add(gemms as u64, Ordering::Relaxed);
}

/// GEMM calls made by [`crate::cpu::matmul`] since the process started.
pub fn matmul_launches() -> u64 {
    MATMUL.load(Ordering::Relaxed)
}
