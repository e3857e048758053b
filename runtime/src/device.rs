//! Where a tensor's data lives.

use crate::error::{Error, Result};
use std::fmt;

/// A compute device (PyTorch's `torch.device`).
///
/// ```
/// use tapir_runtime::Device;
/// assert_eq!(Device::Cpu.to_string(), "cpu");
/// assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The host CPU.
    #[default]
    Cpu,
    /// CUDA GPU by ordinal (`cuda:0`).
    Cuda(usize),
}

impl Device {
    /// The CUDA device `ordinal`, or an error saying why it cannot be used
    /// (no `cuda` feature, no driver, no such device).
    pub fn cuda(ordinal: usize) -> Result<Device> {
        crate::storage::cuda_device_check(ordinal)?;
        Ok(Device::Cuda(ordinal))
    }

    /// CUDA device 0 when one can be used, else the CPU.
    pub fn cuda_if_available() -> Device {
        Device::cuda(0).unwrap_or(Device::Cpu)
    }

    /// Whether this is a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

pub(crate) fn unavailable(device: Device, why: impl Into<String>) -> Error {
    Error::DeviceUnavailable {
        device: device.to_string(),
        reason: why.into(),
    }
}

/// A CUDA failure on `device` as tapir's error: out of memory as
/// [`Error::OutOfMemory`], a missing driver or device as
/// [`Error::DeviceUnavailable`], anything else as [`Error::Cuda`].
#[cfg(any(feature = "cuda", feature = "cuda12"))]
pub(crate) fn cuda_error(device: Device, e: tapir_kernels::cuda::CudaError) -> Error {
    use tapir_kernels::cuda::CudaError as E;
    match e {
        E::OutOfMemory {
            requested, free, ..
        } => Error::OutOfMemory {
            device: device.to_string(),
            requested,
            free,
        },
        E::NoDriver | E::NoSuchDevice { .. } | E::MissingLibrary { .. } => {
            unavailable(device, e.to_string())
        }
        E::Driver { what, detail, .. } => Error::Cuda {
            device: device.to_string(),
            message: format!("{what}: {detail}"),
        },
        E::Compile { message, .. } => Error::Cuda {
            device: device.to_string(),
            message,
        },
        E::Unsupported(message) => Error::Cuda {
            device: device.to_string(),
            message,
        },
    }
}
