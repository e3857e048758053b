//! CUDA support (the `cuda` feature). cudarc loads the driver at run time, so
//! this builds on machines without CUDA; every entry point checks that the
//! libraries are present before calling into cudarc, which panics otherwise.
//!
//! - [`modules`]: the `.cu` sources and their NVRTC compilation (`nvrtc`:
//!   PTX and machine code);
//! - [`device`](mod@device): one context, stream, cuBLAS handle and caching allocator per GPU
//!   (`allocator`: the cache and the private pools of graph captures);
//! - [`CapturedGraph`]: queued work captured once and replayed (CUDA graphs),
//!   with [`HyperTable`] for optimizer steps inside them;
//! - [`CudaBuffer`]: a block of device memory that returns to the cache on drop;
//! - [`launch`]: the host side of each kernel (each has a CPU twin in `crate::cpu`);
//! - [`cudnn`]: convolution and its gradients on cuDNN (f32, f16, bf16);
//! - [`HostPin`]: page-locked host memory, copied to the GPU by DMA;
//! - [`nccl`]: NCCL collectives on device buffers (data-parallel training);
//! - `checks`: index bounds checked on the device, reported at the next host read;
//! - `twins` (tests, on a GPU): each kernel through its launcher against its
//!   CPU twin; `emulator` (tests, no GPU): the kernel sources compiled for
//!   the CPU, run with the launchers' shapes against the same twins.

mod allocator;
mod buffer;
mod checks;
pub mod cudnn;
pub mod device;
mod disk_cache;
#[cfg(test)]
mod emulator;
mod error;
mod graph;
mod hyper;
pub mod launch;
pub mod modules;
pub mod nccl;
mod nvrtc;
mod pinned;
#[cfg(test)]
mod twins;

pub use buffer::CudaBuffer;
pub use device::{CudaDevice, MemoryStats, TimingMark, device};
pub use error::{CudaError, CudaResult};
pub use graph::CapturedGraph;
pub use hyper::{HyperTable, TableMode};
pub use pinned::HostPin;

/// Whether CUDA device `ordinal` can be used; `Err` says why not.
pub fn device_check(ordinal: usize) -> Result<(), CudaError> {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library; it
    // has no preconditions.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    if !present {
        return Err(CudaError::NoDriver);
    }
    let count = cudarc::driver::CudaContext::device_count().map_err(|e| CudaError::Driver {
        device: ordinal,
        what: "counting devices".into(),
        detail: format!("{e:?}"),
    })?;
    if ordinal as i32 >= count {
        return Err(CudaError::NoSuchDevice {
            count: count.max(0) as usize,
        });
    }
    Ok(())
}

/// Whether NVRTC (the run-time CUDA compiler) can be loaded; it needs no GPU.
pub fn nvrtc_present() -> bool {
    // SAFETY: only attempts to dlopen the NVRTC library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
