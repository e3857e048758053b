//! Memory held by tensors, on the CPU and on a GPU, with a resettable peak
//! (PyTorch's `torch.cuda.memory_allocated` family, for every device).
//!
//! On the CPU the figure is the bytes of every live tensor storage (views
//! share theirs); on a GPU it is the caching allocator's `allocated`.
//!
//! ```
//! use tapir_runtime::{memory, Device, Tensor};
//! memory::reset_peak_memory_stats(Device::Cpu).unwrap();
//! let before = memory::memory_allocated(Device::Cpu).unwrap();
//! let t = Tensor::zeros(&[1024, 1024]); // 4 MiB of f32
//! assert!(memory::max_memory_allocated(Device::Cpu).unwrap() >= before + (4 << 20));
//! drop(t);
//! ```

use crate::{Device, Result};

/// Bytes held by live tensors on `device`.
pub fn memory_allocated(device: Device) -> Result<usize> {
    match device {
        Device::Cpu => Ok(crate::storage::cpu_memory().0),
        Device::Cuda(_) => crate::cuda::memory_allocated(device),
    }
}

/// The peak of [`memory_allocated`] since the last reset (or the start).
pub fn max_memory_allocated(device: Device) -> Result<usize> {
    match device {
        Device::Cpu => Ok(crate::storage::cpu_memory().1),
        Device::Cuda(_) => crate::cuda::max_memory_allocated(device),
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
