//! The device seam: the one place in the runtime that matches on where data
//! lives. Ops call these methods; each routes to the CPU kernels or (with the
//! `cuda` feature, in the CUDA backend issue) to the GPU.

mod cpu;

pub(crate) use cpu::{AnyKernel, CpuBuffer, contiguous};

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::Result;
use tapir_kernels::{Float, Layout};

/// A scalar function a unary op applies elementwise, generic over the float
/// type it computes in; `INT` ops also run on integers.
pub(crate) trait UnaryFn: Sync {
    const INT: bool = false;
    fn f<T: Float>(&self, x: T) -> T;
    fn i(&self, _x: i64) -> i64 {
        unreachable!("integer path of a float-only op")
    }
}

/// A scalar function of two operands.
pub(crate) trait BinaryFn: Sync {
    const INT: bool = false;
    fn f<T: Float>(&self, a: T, b: T) -> T;
    fn i(&self, _a: i64, _b: i64) -> i64 {
        unreachable!("integer path of a float-only op")
    }
}

/// A tensor's buffer on its device.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuBuffer),
}

impl Storage {
    pub fn from_vec<T: Element>(v: Vec<T>) -> Storage {
        Storage::Cpu(cpu_from_vec(v))
    }

    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(b) => b.dtype(),
        }
    }

    /// The CPU buffer; every op goes through here, so this match is the seam.
    pub fn cpu(&self) -> &CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
        }
    }

    pub fn cpu_mut(&mut self) -> &mut CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
        }
    }

    /// A copy of the view on `device`.
    pub fn to_device(&self, l: &Layout, device: Device) -> Result<Storage> {
        match (self, device) {
            (Storage::Cpu(b), Device::Cpu) => Ok(Storage::Cpu(b.copy(l))),
            (Storage::Cpu(_), Device::Cuda(i)) => {
                cuda_device_check(i)?;
                Err(crate::device::unavailable(
                    device,
                    "CUDA kernels arrive with the CUDA backend; this build runs on the CPU only",
                ))
            }
        }
    }
}

fn cpu_from_vec<T: Element>(v: Vec<T>) -> CpuBuffer {
    // Element is implemented exactly for the CpuBuffer variants; route through Any.
    use std::any::Any;
    let any: Box<dyn Any> = Box::new(v);
    let any = match any.downcast::<Vec<f32>>() {
        Ok(v) => return CpuBuffer::F32(*v),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<f64>>() {
        Ok(v) => return CpuBuffer::F64(*v),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<half::f16>>() {
        Ok(v) => return CpuBuffer::F16(*v),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<half::bf16>>() {
        Ok(v) => return CpuBuffer::BF16(*v),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<i64>>() {
        Ok(v) => return CpuBuffer::I64(*v),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<u8>>() {
        Ok(v) => return CpuBuffer::U8(*v),
        Err(a) => a,
    };
    match any.downcast::<Vec<bool>>() {
        Ok(v) => CpuBuffer::Bool(*v),
        Err(_) => unreachable!("Element is only implemented for tapir's dtypes"),
    }
}

/// Checks that CUDA device `ordinal` can be used, without panicking when the
/// driver is missing (cudarc panics on a missing library, so look first).
pub(crate) fn cuda_device_check(ordinal: usize) -> Result<()> {
    let device = Device::Cuda(ordinal);
    #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
    {
        Err(crate::device::unavailable(
            device,
            "tapir was built without the `cuda` feature",
        ))
    }
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    {
        tapir_kernels::cuda::device_check(ordinal)
            .map_err(|why| crate::device::unavailable(device, why))
    }
}
