//! Memory held by tensors, on the CPU and on a GPU, with a resettable peak
//! (PyTorch's `torch.cuda.memory_allocated` family, for every device).
//!
//! On the CPU, `allocated` is the bytes of every live tensor storage (views
//! share theirs) and `reserved` adds the buffers the caching allocator
//! keeps for reuse (`tapir_kernels::alloc`); on a GPU both are the CUDA
//! caching allocator's.
//!
//! ```
//! use tapir_runtime::{memory, Device, Tensor};
//! memory::reset_peak_memory_stats(Device::Cpu).unwrap();
//! let before = memory::memory_allocated(Device::Cpu).unwrap();
//! let t = Tensor::zeros(&[1024, 1024]); // 4 MiB of f32
//! assert!(memory::max_memory_allocated(Device::Cpu).unwrap() >= before + (4 << 20));
//! drop(t); // its buffer is cached for the next tensor of its size
//! assert!(memory::memory_reserved(Device::Cpu).unwrap() >= 4 << 20);
//! memory::empty_cache(Device::Cpu).unwrap();
//! ```

use crate::{Device, Result};

/// Memory figures of one device, in bytes (`torch.cuda.memory_stats`, reduced);
/// the CPU allocator and the CUDA one report the same struct.
pub use tapir_kernels::stats::MemoryStats;

/// The memory figures of `device`.
///
/// ```
/// use tapir_runtime::{memory, Device, Tensor};
/// let s = memory::memory_stats(Device::Cpu).unwrap();
/// assert!(s.reserved >= s.allocated);
/// ```
pub fn memory_stats(device: Device) -> Result<MemoryStats> {
    match device {
        Device::Cpu => {
            let (allocated, peak_allocated) = crate::storage::cpu_memory();
            let cache = tapir_kernels::alloc::stats();
            Ok(MemoryStats {
                allocated,
                peak_allocated,
                reserved: allocated + cache.cached_bytes,
                num_device_alloc: cache.system_allocs,
            })
        }
        Device::Cuda(_) => crate::cuda::memory_stats(device),
    }
}

/// Bytes held by live tensors on `device`.
pub fn memory_allocated(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.allocated)
}

/// The peak of [`memory_allocated`] since the last reset (or the start).
pub fn max_memory_allocated(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.peak_allocated)
}

/// Bytes held by live tensors plus the caching allocator's free buffers.
pub fn memory_reserved(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.reserved)
}

/// Frees the caching allocator's free buffers (`torch.cuda.empty_cache`);
/// live tensors are untouched.
pub fn empty_cache(device: Device) -> Result<()> {
    match device {
        Device::Cpu => {
            tapir_kernels::alloc::empty_cache();
            Ok(())
        }
        Device::Cuda(_) => crate::cuda::empty_cache(device),
    }
}

/// Starts the peak figure again from the current one.
pub fn reset_peak_memory_stats(device: Device) -> Result<()> {
    match device {
        Device::Cpu => {
            crate::storage::reset_cpu_peak();
            Ok(())
        }
        Device::Cuda(_) => crate::cuda::reset_peak_memory_stats(device),
    }
}
