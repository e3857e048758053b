//! `torch.cuda`'s functions: availability, memory figures of the caching
//! allocator, synchronisation, TF32. They exist in every build; without the
//! `cuda` feature or a GPU they report that no device is available.
//!
//! ```
//! use tapir_runtime::{cuda, Device};
//! if !cuda::is_available() {
//!     assert_eq!(cuda::device_count(), 0);
//!     assert!(cuda::memory_allocated(Device::Cuda(0)).is_err());
//! }
//! ```

use crate::device::Device;
use crate::error::Result;

mod graph;
pub(crate) use graph::StepTable;
pub use graph::{CudaGraph, graphs_enabled, set_graphs_enabled};

/// Whether at least one CUDA device can be used.
pub fn is_available() -> bool {
    device_count() > 0
}

/// How many CUDA devices can be used (0 without the feature or a driver).
pub fn device_count() -> usize {
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    {
        (0..64)
            .take_while(|&i| tapir_kernels::cuda::device_check(i).is_ok())
            .count()
    }
    #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
    {
        0
    }
}

pub use crate::memory::MemoryStats;

#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn with_device<T>(
    device: Device,
    f: impl FnOnce(&tapir_kernels::cuda::CudaDevice) -> T,
) -> Result<T> {
    match device {
        Device::Cuda(i) => crate::storage::cuda::device(i)
            .map(|d| f(&d))
            .map_err(|e| crate::device::cuda_error(device, e)),
        Device::Cpu => Err(crate::device::unavailable(device, "not a CUDA device")),
    }
}

#[cfg(not(any(feature = "cuda", feature = "cuda12")))]
fn with_device<T>(device: Device, _f: impl FnOnce(&()) -> T) -> Result<T> {
    Err(crate::device::unavailable(
        device,
        "tapir was built without the `cuda` feature",
    ))
}

/// The caching allocator's figures for `device`.
pub fn memory_stats(device: Device) -> Result<MemoryStats> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            _d.memory_stats()
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        MemoryStats::default()
    })
}

/// Bytes held by live tensors on `device` (`torch.cuda.memory_allocated`).
pub fn memory_allocated(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.allocated)
}

/// The peak of [`memory_allocated`] since the last reset.
pub fn max_memory_allocated(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.peak_allocated)
}

/// Unregisters and frees the pinned host buffers that
/// [`Tensor::pin_memory`](crate::Tensor::pin_memory) keeps for reuse
/// (PyTorch's `torch._C._host_emptyCache`); returns the bytes released
/// (0 without the `cuda` feature, where nothing is ever pinned).
///
/// ```
/// let _released: usize = tapir_runtime::cuda::host_empty_cache();
/// ```
pub fn host_empty_cache() -> usize {
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    {
        crate::storage::pinned_empty_cache()
    }
    #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
    0
}

/// Bytes taken from the driver, cached free blocks included.
pub fn memory_reserved(device: Device) -> Result<usize> {
    memory_stats(device).map(|s| s.reserved)
}

/// Returns cached free blocks to the driver (`torch.cuda.empty_cache`).
pub fn empty_cache(device: Device) -> Result<()> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        _d.empty_cache();
    })
}

/// Starts the peak figure again from the current one.
pub fn reset_peak_memory_stats(device: Device) -> Result<()> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        _d.reset_peak_memory_stats();
    })
}

/// The GPU's product name, e.g. `NVIDIA H200` (`torch.cuda.get_device_name`).
///
/// ```
/// use tapir_runtime::{cuda, Device};
/// // An error, never a crash, where there is no such GPU.
/// if !cuda::is_available() {
///     assert!(cuda::get_device_name(Device::Cuda(0)).is_err());
/// }
/// ```
pub fn get_device_name(device: Device) -> Result<String> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return _d.name().map_err(|e| crate::device::cuda_error(device, e));
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        Ok(String::new())
    })?
}

/// Free and total memory of `device` in bytes, as the driver sees them
/// (`torch.cuda.mem_get_info`): blocks held in tapir's cache count as used.
pub fn mem_get_info(device: Device) -> Result<(usize, usize)> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return _d
            .mem_get_info()
            .map_err(|e| crate::device::cuda_error(device, e));
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        Ok((0, 0))
    })?
}

/// The GPU's compute capability as (major, minor), e.g. (9, 0) on an H100
/// or H200 (`torch.cuda.get_device_capability`).
pub fn get_device_capability(device: Device) -> Result<(u32, u32)> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return _d.capability();
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        (0, 0)
    })
}

/// Waits until every queued kernel on `device` has finished
/// (`torch.cuda.synchronize`); reading a tensor's data waits on its own.
pub fn synchronize(device: Device) -> Result<()> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return _d
            .synchronize()
            .map_err(|e| crate::device::cuda_error(device, e));
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        Ok(())
    })?
}

/// Lets f32 matmuls on `device` use TF32 tensor cores
/// (`torch.backends.cuda.matmul.allow_tf32`; off by default, as in PyTorch).
pub fn set_allow_tf32(device: Device, on: bool) -> Result<()> {
    with_device(device, |_d| {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        _d.set_allow_tf32(on);
        let _ = on;
    })
}

/// How many times an op on a CUDA tensor ran on a host copy because it has
/// no CUDA kernel yet. Zero on a run that stayed on the GPU.
pub fn host_fallbacks() -> u64 {
    crate::storage::host_fallbacks()
}

/// How many times this thread has waited for a GPU to finish its queued
/// work: each read of GPU data (`item`, `to_vec`, a copy to the CPU) and
/// each [`synchronize`]. A training step that reads only its loss waits
/// once; everything else stays queued on the device.
///
/// ```
/// assert_eq!(tapir_runtime::cuda::host_syncs(), 0); // no GPU work on this thread
/// ```
pub fn host_syncs() -> u64 {
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    return tapir_kernels::cuda::device::host_waits();
    #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
    0
}

/// How many kernels this process has queued on its GPUs: each tapir kernel
/// (fills and strided copies included), cuBLAS GEMM and cuDNN convolution
/// counts one; plain memory copies (uploads, reads to the host) do not. At small sizes a GPU step's speed is its launch count times the
/// host's cost per launch, so `bench_ref` reports it per step.
///
/// ```
/// let before = tapir_runtime::cuda::kernel_launches();
/// let _ = &tapir_runtime::Tensor::ones(&[3]) + 1.0; // a CPU op launches nothing
/// assert_eq!(tapir_runtime::cuda::kernel_launches(), before);
/// ```
pub fn kernel_launches() -> u64 {
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    return tapir_kernels::cuda::device::kernel_launches();
    #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
    0
}

/// cuDNN's switches (`torch.backends.cudnn`): convolutions on CUDA tensors
/// of f32, f16 and bf16 run on cuDNN when it is available and enabled, and
/// on tapir's own im2col + cuBLAS kernels otherwise (and for other dtypes).
/// A convolution that ran on cuDNN records `ConvolutionBackward0` in the
/// autograd graph and the profiler; the fallback records `Im2ColBackward0`
/// and `MmBackward0`.
///
/// ```
/// use tapir_runtime::cuda::cudnn;
/// if !tapir_runtime::cuda::is_available() {
///     assert!(!cudnn::is_available());
/// }
/// assert!(cudnn::enabled() && cudnn::allow_tf32()); // PyTorch's defaults
/// ```
pub mod cudnn {
    use std::sync::atomic::{AtomicBool, Ordering};

    static ENABLED: AtomicBool = AtomicBool::new(true);
    static ALLOW_TF32: AtomicBool = AtomicBool::new(true);

    /// Whether cuDNN can be used: a GPU, the `cuda` feature, and
    /// `libcudnn.so.9` on the library path (`torch.backends.cudnn.is_available`).
    pub fn is_available() -> bool {
        version().is_some()
    }

    /// cuDNN's version number (e.g. 91002), `None` where it is not available
    /// (`torch.backends.cudnn.version`).
    pub fn version() -> Option<usize> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if super::is_available() {
            return tapir_kernels::cuda::cudnn::cudnn_version();
        }
        None
    }

    /// Whether convolutions use cuDNN where it is available
    /// (`torch.backends.cudnn.enabled`; on by default).
    pub fn enabled() -> bool {
        ENABLED.load(Ordering::Relaxed)
    }

    /// Turns cuDNN on or off for later convolutions, in every thread.
    pub fn set_enabled(on: bool) {
        ENABLED.store(on, Ordering::Relaxed);
    }

    /// Whether f32 convolutions on cuDNN may use TF32 tensor cores
    /// (`torch.backends.cudnn.allow_tf32`; on by default, as there, unlike
    /// matmul's [`set_allow_tf32`](super::set_allow_tf32)).
    pub fn allow_tf32() -> bool {
        ALLOW_TF32.load(Ordering::Relaxed)
    }

    /// Allows or forbids TF32 in later f32 convolutions on cuDNN.
    pub fn set_allow_tf32(on: bool) {
        ALLOW_TF32.store(on, Ordering::Relaxed);
    }
}
