//! The device seam: the one place in the runtime that matches on where data
//! lives. Ops call `Storage` methods — one total method per kernel-backed
//! primitive — and each routes to the CPU kernels or, with the `cuda`
//! feature, to the CUDA kernels. Where a CUDA kernel does not take a dtype
//! (f64, integers), the method runs the CPU kernel on a host copy, inside
//! the seam and counted by [`host_fallbacks`]: correct on every device, and
//! the path a GPU kernel replaces when a benchmark shows it matters. Ops,
//! nn and optim never see a buffer type.
//!
//! `mod.rs` holds the storage itself and data movement; `compute.rs` the
//! compute primitives (`attention.rs` the fused attention's, `optim.rs` the
//! optimizer updates'); `cpu.rs` / `cpu_nn.rs` and `cuda.rs` their two arms.

mod assign;
mod attention;
mod compute;
mod cpu;
mod cpu_conv;
mod cpu_index;
mod cpu_nn;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
pub(crate) mod cuda;
mod cudnn;
mod host;
mod linalg;
mod optim;
mod order;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
mod pinned;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
pub(crate) use pinned::empty_cache as pinned_empty_cache;

pub(crate) use compute::{Along, ProgramInput};
use cpu::CpuBuffer;
use host::Tracked;
pub(crate) use host::{cpu_memory, reset_cpu_peak};
pub(crate) use optim::OptimItem;
/// The sizes of a fused attention call, as the seam's `attention` takes them.
pub(crate) use tapir_kernels::cpu::AttentionDims;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::Result;
use std::borrow::Cow;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use tapir_kernels::Layout;
use tapir_kernels::alloc::filled;

static HOST_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many times an op on a CUDA tensor ran on a host copy because it has no
/// CUDA kernel yet (for profiling and the GPU checks).
pub fn host_fallbacks() -> u64 {
    HOST_FALLBACKS.load(Ordering::Relaxed)
}

/// What `Storage::arange` makes: exact i64 values, or f32 computed in f64.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arange {
    I64 { start: i64, step: i64 },
    F32 { start: f64, step: f64 },
}

/// A tensor's buffer on its device.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(Tracked),
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    Cuda(cuda::CudaStorage),
}

/// The host view of a storage opened for writing: the buffer itself on the
/// CPU; on a GPU a host copy that is written back when the guard drops.
struct HostMut<'a> {
    storage: &'a mut Storage,
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    copy: Option<CpuBuffer>,
}

impl Deref for HostMut<'_> {
    type Target = CpuBuffer;
    fn deref(&self) -> &CpuBuffer {
        match (&self.copy, &*self.storage) {
            (Some(c), _) => c,
            (None, Storage::Cpu(b)) => b,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (None, Storage::Cuda(_)) => unreachable!("a CUDA HostMut holds a copy"),
        }
    }
}

impl DerefMut for HostMut<'_> {
    fn deref_mut(&mut self) -> &mut CpuBuffer {
        match (&mut self.copy, &mut *self.storage) {
            (Some(c), _) => c,
            (None, Storage::Cpu(b)) => b,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (None, Storage::Cuda(_)) => unreachable!("a CUDA HostMut holds a copy"),
        }
    }
}

impl Drop for HostMut<'_> {
    fn drop(&mut self) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Some(c), Storage::Cuda(s)) = (&self.copy, &mut *self.storage) {
            s.overwrite(c)
                .unwrap_or_else(|e| cuda::fail("write-back", e));
        }
    }
}

impl Storage {
    pub fn from_vec<T: Element>(v: Vec<T>) -> Storage {
        Storage::cpu(cpu_from_vec(v))
    }

    /// A host buffer as storage, counted in the CPU memory statistics.
    pub fn cpu(b: CpuBuffer) -> Storage {
        Storage::Cpu(Tracked::new(b))
    }

    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.device(),
        }
    }

    /// The address of the buffer's first byte (host or device).
    pub fn address(&self) -> usize {
        match self {
            Storage::Cpu(b) => cpu::with_vec!(&**b, v => v.as_ptr() as usize),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.buf.address() as usize,
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(b) => b.dtype(),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.dtype,
        }
    }

    /// The device buffer of a CUDA storage, read-only (see `cuda_buffer_mut`).
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    pub fn cuda_buffer(&self) -> Option<&tapir_kernels::cuda::CudaBuffer> {
        match self {
            Storage::Cpu(_) => None,
            Storage::Cuda(s) => Some(&s.buf),
        }
    }

    /// The device buffer of a CUDA storage, for library calls that work on
    /// it in place (NCCL's collectives); `None` for a CPU storage.
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    pub fn cuda_buffer_mut(&mut self) -> Option<&mut tapir_kernels::cuda::CudaBuffer> {
        match self {
            Storage::Cpu(_) => None,
            Storage::Cuda(s) => Some(&mut s.buf),
        }
    }

    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(b) => b.len(),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.len(),
        }
    }

    /// The buffer on the host: itself on the CPU, a copy from a GPU (which
    /// waits for the GPU; counted by [`host_fallbacks`]).
    fn host(&self) -> Cow<'_, CpuBuffer> {
        match self {
            Storage::Cpu(b) => Cow::Borrowed(b),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => {
                HOST_FALLBACKS.fetch_add(1, Ordering::Relaxed);
                Cow::Owned(
                    s.download()
                        .unwrap_or_else(|e| cuda::fail("device-to-host copy", e)),
                )
            }
        }
    }

    /// The buffer on the host for writing; see [`HostMut`].
    fn host_mut(&mut self) -> HostMut<'_> {
        let copy = match &*self {
            Storage::Cpu(_) => None,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => {
                HOST_FALLBACKS.fetch_add(1, Ordering::Relaxed);
                Some(
                    s.download()
                        .unwrap_or_else(|e| cuda::fail("device-to-host copy", e)),
                )
            }
        };
        HostMut {
            storage: self,
            copy,
        }
    }

    /// A host-computed buffer placed on `device` (the result of an op that
    /// ran on the host for inputs on `device`).
    fn on_device(buf: CpuBuffer, device: Device) -> Storage {
        match device {
            Device::Cpu => Storage::cpu(buf),
            Device::Cuda(i) => Storage::upload(&buf, i).unwrap_or_else(|e| panic!("{e}")),
        }
    }

    fn upload(buf: &CpuBuffer, ordinal: usize) -> Result<Storage> {
        let device = Device::Cuda(ordinal);
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            cuda::CudaStorage::upload(ordinal, buf)
                .map(Storage::Cuda)
                .map_err(|e| crate::device::cuda_error(device, e))
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        {
            let _ = buf;
            Err(crate::device::unavailable(
                device,
                "tapir was built without the `cuda` feature",
            ))
        }
    }

    /// Applies a host computation to this storage and puts the result back
    /// on its device.
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    fn map_host(&self, f: impl FnOnce(&CpuBuffer) -> CpuBuffer) -> Storage {
        Storage::on_device(f(&self.host()), self.device())
    }

    /// A copy of the view on `device`. From pinned memory to a GPU, a
    /// whole contiguous buffer is copied by DMA from the buffer itself.
    pub fn to_device(&self, l: &Layout, device: Device) -> Result<Storage> {
        if let Device::Cuda(i) = device {
            cuda_device_check(i)?;
        }
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cpu(b), Device::Cuda(i)) = (self, device) {
            let whole = l.contiguous_offset() == Some(0) && l.numel() == b.len();
            if let Some(pin) = b.pin().filter(|_| whole) {
                return cuda::CudaStorage::upload_pinned(i, b, pin)
                    .map(Storage::Cuda)
                    .map_err(|e| crate::device::cuda_error(device, e));
            }
        }
        match (self, device) {
            (Storage::Cpu(b), Device::Cpu) => Ok(Storage::cpu(b.copy(l))),
            (Storage::Cpu(b), Device::Cuda(i)) => Storage::upload(&b.copy(l), i),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(s), Device::Cpu) => {
                let copy = s.download_view(l);
                copy.map(Storage::cpu)
                    .map_err(|e| crate::device::cuda_error(device, e))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(s), Device::Cuda(i)) => {
                let host = s.download_view(l);
                host.map_err(|e| crate::device::cuda_error(self.device(), e))
                    .and_then(|h| Storage::upload(&h, i))
            }
        }
    }

    /// A contiguous copy of the view in page-locked host memory, which a
    /// copy to a GPU reads by DMA (`Tensor::pin_memory`). `Err` without a
    /// usable GPU. A CUDA storage is the caller's misuse (checked there).
    pub fn pinned_copy(&self, l: &Layout) -> Result<Storage> {
        let device = Device::Cuda(0);
        cuda_device_check(0)?;
        match self {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cpu(b) => pinned::pinned_copy(b, l, 0)
                .map(Storage::Cpu)
                .map_err(|e| crate::device::cuda_error(device, e)),
            #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
            Storage::Cpu(_) => {
                let _ = l;
                Err(crate::device::unavailable(device, "no CUDA support"))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(_) => unreachable!("pin_memory checks for a CPU tensor"),
        }
    }

    /// Whether the buffer is page-locked host memory.
    pub fn is_pinned(&self) -> bool {
        match self {
            Storage::Cpu(b) => b.is_pinned(),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(_) => false,
        }
    }

    // ---- ops with CUDA kernels: native on the GPU, the CPU kernel otherwise ----

    /// A contiguous copy of the view.
    pub fn copy(&self, l: &Layout) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.copy(l)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => Storage::Cuda(s.copy(l).unwrap_or_else(|e| cuda::fail("copy", e))),
        }
    }

    /// A contiguous copy converted to `dtype`.
    pub fn cast(&self, l: &Layout, dtype: DType) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.cast(l, dtype)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => Storage::Cuda(
                s.cast(l, dtype)
                    .unwrap_or_else(|e| cuda::fail("to_dtype", e)),
            ),
        }
    }

    /// `n` elements of `value` in `dtype` on `device`.
    pub fn filled(n: usize, value: f64, dtype: DType, device: Device) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Device::Cuda(i) = device {
            let s = cuda::CudaStorage::filled(i, n, value, dtype);
            return Storage::Cuda(s.unwrap_or_else(|e| cuda::fail("full", e)));
        }
        let buf = match dtype {
            DType::F32 => CpuBuffer::F32(filled(n, value as f32)),
            DType::F64 => CpuBuffer::F64(filled(n, value)),
            DType::F16 => CpuBuffer::F16(filled(n, half::f16::from_f64(value))),
            DType::BF16 => CpuBuffer::BF16(filled(n, half::bf16::from_f64(value))),
            DType::I64 => CpuBuffer::I64(filled(n, value as i64)),
            DType::U8 => CpuBuffer::U8(filled(n, value as u8)),
            DType::Bool => CpuBuffer::Bool(filled(n, value != 0.0)),
        };
        Storage::on_device(buf, device)
    }

    /// `start + i * step` for `i` in `0..n` on `device` (`arange`).
    pub fn arange(n: usize, values: Arange, device: Device) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Device::Cuda(i) = device {
            let s = cuda::CudaStorage::arange(i, n, values);
            return Storage::Cuda(s.unwrap_or_else(|e| cuda::fail("arange", e)));
        }
        let _ = device; // only the CPU is left
        Storage::cpu(match values {
            Arange::I64 { start, step } => {
                CpuBuffer::I64(tapir_kernels::cpu::arange_i64(n, start, step))
            }
            Arange::F32 { start, step } => {
                CpuBuffer::F32(tapir_kernels::cpu::arange_f32(n, start, step))
            }
        })
    }

    /// `n` f32 draws made on `device` itself from the device generator
    /// (uniform in `[0, 1)`, or standard normal), or `None` where the host
    /// generator makes them (the CPU).
    pub fn device_draws(device: Device, n: usize, normal: bool) -> Option<Storage> {
        match device {
            Device::Cpu => None,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Device::Cuda(i) => {
                let (seed, offset) = crate::random::device_generator().reserve(n);
                let s = cuda::CudaStorage::philox(i, n, seed, offset, normal);
                Some(Storage::Cuda(
                    s.unwrap_or_else(|e| cuda::fail("random draws", e)),
                ))
            }
            #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
            Device::Cuda(_) => {
                let _ = (n, normal); // no GPU tensors exist in this build
                None
            }
        }
    }

    /// The key of one CPU dropout mask: one draw of the default generator
    /// (a fused program's dropout draws it at the same point as eager).
    pub fn dropout_seed() -> u64 {
        crate::default_generator().fill(1, |next| next())[0]
    }

    /// Dropout's scaled keep mask (`1 / keep` or 0 per element, f32) for
    /// `n` elements on the CPU, from a Philox stream keyed by one draw of the
    /// default generator, made in parallel; `None` on a GPU, where
    /// `bernoulli` already draws on the device.
    pub fn dropout_mask(device: Device, n: usize, keep: f64) -> Option<Storage> {
        match device {
            Device::Cpu => {
                let seed = Storage::dropout_seed();
                let mask = tapir_kernels::cpu::philox_dropout_mask(n, keep, seed);
                Some(Storage::cpu(CpuBuffer::F32(mask)))
            }
            Device::Cuda(_) => None,
        }
    }

    /// The view's elements as `T`, row-major, into `dst` (on the host; a
    /// dense CPU view of `T` is one copy, with no allocation).
    pub fn read_into<T: Element>(&self, l: &Layout, dst: &mut [T]) {
        match self {
            Storage::Cpu(b) => b.read_into(l, dst),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(_) => dst.copy_from_slice(&self.to_vec::<T>(l)),
        }
    }

    /// Overwrites a dense CPU view of `T` with `src · scale`; `false` (and
    /// nothing written) for any other view, dtype or device.
    pub fn write_scaled<T: Element>(&mut self, l: &Layout, src: &[T], scale: f64) -> bool {
        match self {
            Storage::Cpu(b) => b.write_scaled(l, src, scale),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(_) => false,
        }
    }

    /// The view's elements as `T`, row-major (on the host).
    pub fn to_vec<T: Element>(&self, l: &Layout) -> Vec<T> {
        match self {
            Storage::Cpu(b) => b.to_vec(l),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => {
                let c = s.download_view(l);
                c.unwrap_or_else(|e| cuda::fail("to_vec", e))
                    .to_vec(&Layout::contiguous(&[l.numel()]))
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
            .map_err(|why| crate::device::cuda_error(device, why))
    }
}
