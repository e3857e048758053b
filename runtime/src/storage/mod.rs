//! The device seam: the one place in the runtime that matches on where data
//! lives. Ops call these methods; each routes to the CPU kernels or, with the
//! `cuda` feature, to the CUDA kernels. An op that has no CUDA kernel yet runs
//! on a host copy of its inputs ([`Storage::host`], [`Storage::on_device`]):
//! correct on every device, and the path a GPU kernel replaces when a
//! benchmark shows it matters. [`host_fallbacks`] counts those trips. The
//! operations that exist only on a GPU live in `gpu.rs`.

mod cpu;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
pub(crate) mod cuda;
mod gpu;

pub(crate) use cpu::{AnyKernel, CpuBuffer, contiguous};
pub(crate) use gpu::{GpuStep, IndexGeom};

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::Result;
use std::borrow::Cow;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use tapir_kernels::{Float, Layout};

/// A scalar function a unary op applies elementwise, generic over the float
/// type it computes in; `INT` ops also run on integers.
pub(crate) trait UnaryFn: Sync {
    const INT: bool = false;
    fn f<T: Float>(&self, x: T) -> T;
    fn i(&self, _x: i64) -> i64 {
        unreachable!("integer path of a float-only op")
    }
    /// The CUDA kernel computing the same function, with its two scalar
    /// parameters (`<op>` of `cu/elementwise.cu`), if there is one.
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    fn cuda(&self) -> Option<(&'static str, f32, f32)> {
        None
    }
}

/// A scalar function of two operands.
pub(crate) trait BinaryFn: Sync {
    const INT: bool = false;
    /// The CUDA kernel computing the same function, if there is one.
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    const CUDA: Option<&'static str> = None;
    fn f<T: Float>(&self, a: T, b: T) -> T;
    fn i(&self, _a: i64, _b: i64) -> i64 {
        unreachable!("integer path of a float-only op")
    }
}

static HOST_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many times an op on a CUDA tensor ran on a host copy because it has no
/// CUDA kernel yet (for profiling and the GPU checks).
pub fn host_fallbacks() -> u64 {
    HOST_FALLBACKS.load(Ordering::Relaxed)
}

/// A tensor's buffer on its device.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuBuffer),
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    Cuda(cuda::CudaStorage),
}

/// The host view of a storage opened for writing: the buffer itself on the
/// CPU; on a GPU a host copy that is written back when the guard drops.
pub(crate) struct HostMut<'a> {
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
        Storage::Cpu(cpu_from_vec(v))
    }

    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.device(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(b) => b.dtype(),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.dtype,
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
    pub fn host(&self) -> Cow<'_, CpuBuffer> {
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
    pub fn host_mut(&mut self) -> HostMut<'_> {
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
    pub fn on_device(buf: CpuBuffer, device: Device) -> Storage {
        match device {
            Device::Cpu => Storage::Cpu(buf),
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
    pub fn map_host(&self, f: impl FnOnce(&CpuBuffer) -> CpuBuffer) -> Storage {
        Storage::on_device(f(&self.host()), self.device())
    }

    /// A copy of the view on `device`.
    pub fn to_device(&self, l: &Layout, device: Device) -> Result<Storage> {
        if let Device::Cuda(i) = device {
            cuda_device_check(i)?;
        }
        match (self, device) {
            (Storage::Cpu(b), Device::Cpu) => Ok(Storage::Cpu(b.copy(l))),
            (Storage::Cpu(b), Device::Cuda(i)) => Storage::upload(&b.copy(l), i),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(s), Device::Cpu) => {
                let copy = s.download_view(l);
                copy.map(Storage::Cpu)
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

    // ---- ops with CUDA kernels: native on the GPU, the CPU kernel otherwise ----

    /// A contiguous copy of the view.
    pub fn copy(&self, l: &Layout) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::Cpu(b.copy(l)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => Storage::Cuda(s.copy(l).unwrap_or_else(|e| cuda::fail("copy", e))),
        }
    }

    /// A contiguous copy converted to `dtype`.
    pub fn cast(&self, l: &Layout, dtype: DType) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::Cpu(b.cast(l, dtype)),
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
            DType::F32 => CpuBuffer::F32(vec![value as f32; n]),
            DType::F64 => CpuBuffer::F64(vec![value; n]),
            DType::F16 => CpuBuffer::F16(vec![half::f16::from_f64(value); n]),
            DType::BF16 => CpuBuffer::BF16(vec![half::bf16::from_f64(value); n]),
            DType::I64 => CpuBuffer::I64(vec![value as i64; n]),
            DType::U8 => CpuBuffer::U8(vec![value as u8; n]),
            DType::Bool => CpuBuffer::Bool(vec![value != 0.0; n]),
        };
        Storage::on_device(buf, device)
    }

    /// `self[l] = src[ls]`: views of one shape, `src` converted to this dtype.
    pub fn assign(&mut self, l: &Layout, src: &Storage, ls: &Layout) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(d), Storage::Cuda(s)) = (&mut *self, src) {
            let converted;
            let (s, ls) = if s.dtype == d.dtype {
                (s, ls)
            } else {
                converted = (s.cast(ls, d.dtype), Layout::contiguous(&ls.shape));
                let c = converted
                    .0
                    .as_ref()
                    .unwrap_or_else(|e| cuda::fail("copy_", e.clone()));
                (c, &converted.1)
            };
            return d
                .assign(l, s, ls)
                .unwrap_or_else(|e| cuda::fail("copy_", e));
        }
        self.host_mut().zip_assign(l, &src.host(), ls, |_, y| y);
    }

    /// Elementwise comparison (`eq ne lt le gt ge`) of two same-dtype views, to bool.
    pub fn compare(
        &self,
        la: &Layout,
        rhs: &Storage,
        lb: &Layout,
        cmp: &str,
        f: fn(f64, f64) -> bool,
    ) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(a), Storage::Cuda(b)) = (self, rhs) {
            return Storage::Cuda(
                a.compare(la, b, lb, cmp)
                    .unwrap_or_else(|e| cuda::fail(cmp, e)),
            );
        }
        let _ = cmp;
        let out = self.host().compare(la, &rhs.host(), lb, f);
        Storage::on_device(out, self.device())
    }

    /// `cond ? a : b` over three views broadcast to one shape (a, b one dtype).
    pub fn select_where(
        cond: &Storage,
        lc: &Layout,
        a: &Storage,
        la: &Layout,
        b: &Storage,
        lb: &Layout,
    ) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(c), Storage::Cuda(x), Storage::Cuda(y)) = (cond, a, b) {
            let r = cuda::CudaStorage::select_where(c, lc, x, la, y, lb);
            return Storage::Cuda(r.unwrap_or_else(|e| cuda::fail("where", e)));
        }
        let c = cond.host();
        let CpuBuffer::Bool(cv) = &*c else {
            unreachable!("where: the condition is bool")
        };
        let out = CpuBuffer::select_where(cv, lc, &a.host(), la, &b.host(), lb);
        Storage::on_device(out, a.device())
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

    /// Max (or min) over one dim: values (same dtype) and i64 indices of the
    /// first extreme element; NaN wins, as in PyTorch.
    pub fn extreme(&self, l: &Layout, dim: usize, max: bool) -> (Storage, Storage) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Storage::Cuda(s) = self
            && let Some(r) = s.extreme(l, dim, max)
        {
            let (v, i) = r.unwrap_or_else(|e| cuda::fail(if max { "max" } else { "min" }, e));
            return (Storage::Cuda(v), Storage::Cuda(i));
        }
        let (vals, idx) = self.host().extreme(l, dim, max);
        (
            Storage::on_device(vals, self.device()),
            Storage::on_device(CpuBuffer::I64(idx), self.device()),
        )
    }

    pub fn unary<F: UnaryFn>(&self, l: &Layout, op: &F) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(s), Some(k)) = (self, op.cuda())
            && let Some(r) = s.unary(l, k)
        {
            return Storage::Cuda(r.unwrap_or_else(|e| cuda::fail(k.0, e)));
        }
        self.map_host(|b| b.unary(l, op))
    }

    /// `op(self[la], rhs[lb])` over two same-dtype views broadcast to one shape.
    pub fn binary<F: BinaryFn>(&self, la: &Layout, rhs: &Storage, lb: &Layout, op: &F) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(a), Storage::Cuda(b), Some(k)) = (self, rhs, F::CUDA)
            && let Some(r) = a.binary(la, b, lb, k)
        {
            return Storage::Cuda(r.unwrap_or_else(|e| cuda::fail(k, e)));
        }
        let out = self.host().binary(la, &rhs.host(), lb, op);
        Storage::on_device(out, self.device())
    }

    /// Sum over `dims` (floats keep their dtype, integers and bool sum to i64).
    pub fn sum(&self, l: &Layout, dims: &[usize]) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Storage::Cuda(s) = self
            && let Some(r) = s.sum(l, dims)
        {
            return Storage::Cuda(r.unwrap_or_else(|e| cuda::fail("sum", e)));
        }
        self.map_host(|b| b.sum(l, dims))
    }

    /// Softmax (or log-softmax) over the last dim of the view, when a kernel
    /// exists for this storage; `None` means: use the CPU path.
    pub fn softmax_last(&self, _l: &Layout, _log: bool) -> Option<Storage> {
        match self {
            Storage::Cpu(_) => None,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s
                .softmax(_l, _log)
                .map(|r| Storage::Cuda(r.unwrap_or_else(|e| cuda::fail("softmax", e)))),
        }
    }

    pub fn matmul(&self, la: &Layout, rhs: &Storage, lb: &Layout) -> Storage {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(a), Storage::Cuda(b)) = (self, rhs)
            && let Some(r) = a.matmul(la, b, lb)
        {
            return Storage::Cuda(r.unwrap_or_else(|e| cuda::fail("matmul", e)));
        }
        let out = self.host().matmul(la, &rhs.host(), lb);
        Storage::on_device(out, self.device())
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
