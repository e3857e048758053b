//! CUDA storage: a device buffer plus its dtype, and the CUDA arm of every
//! seam primitive. A method returning `None` has no kernel for the dtype,
//! and the seam runs the CPU kernel on a host copy instead.

use super::Along;
use super::Arange;
use super::cpu::CpuBuffer;
use crate::device::Device;
use crate::dtype::DType;
use half::{bf16, f16};
use std::sync::Arc;
use tapir_kernels::cuda::{CudaBuffer, CudaDevice, CudaError, CudaResult, launch};
use tapir_kernels::{Conv2dGeometry, Layout, ScatterMode};

#[derive(Debug)]
pub(crate) struct CudaStorage {
    pub buf: CudaBuffer,
    pub dtype: DType,
}

/// A CUDA failure inside an op: ops panic on misuse and, as PyTorch raises,
/// on device errors. Out of memory panics with a typed payload
/// ([`crate::Error::OutOfMemory`]) that the `try_` APIs turn back into an
/// `Err` (see [`crate::error::catch_out_of_memory`]).
pub(crate) fn fail(op: &str, e: CudaError) -> ! {
    let device = match &e {
        CudaError::OutOfMemory { device, .. }
        | CudaError::Driver { device, .. }
        | CudaError::Compile { device, .. }
        | CudaError::MissingLibrary { device, .. } => Device::Cuda(*device),
        _ => Device::Cuda(0),
    };
    match crate::device::cuda_error(device, e) {
        oom @ crate::Error::OutOfMemory { .. } => std::panic::panic_any(oom),
        other => panic!("{op}: {other}"),
    }
}

/// The launcher's description of a gather-like op's geometry.
fn gathered(a: Along<'_>) -> launch::Gathered<'_> {
    let d = a.dim;
    launch::Gathered {
        input: a.view,
        inner: a.view.shape[d + 1..].iter().product(),
        len: a.view.shape[d],
        stride: a.view.strides[d],
        size: a.size,
        op: a.op,
    }
}

/// The kernels' name for a float dtype with CUDA kernels.
pub(super) fn kernel_dtype(d: DType) -> Option<&'static str> {
    match d {
        DType::F32 => Some("f32"),
        DType::F16 => Some("f16"),
        DType::BF16 => Some("bf16"),
        _ => None,
    }
}

/// The kernels' name for any dtype (cast, fill, compare, data movement).
pub(crate) fn any_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F64 => "f64",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "b8",
    }
}

pub(crate) fn device(ordinal: usize) -> CudaResult<Arc<CudaDevice>> {
    tapir_kernels::cuda::device(ordinal)
}

impl CudaStorage {
    pub fn device(&self) -> Device {
        Device::Cuda(self.buf.device().ordinal())
    }

    /// A dense f32 buffer as a storage (a fused program's output).
    pub(crate) fn f32(buf: CudaBuffer) -> CudaStorage {
        CudaStorage::new(buf, DType::F32)
    }

    pub(super) fn new(buf: CudaBuffer, dtype: DType) -> CudaStorage {
        CudaStorage { buf, dtype }
    }

    /// Elements held (derived from the buffer, so it cannot disagree).
    pub fn len(&self) -> usize {
        self.buf.bytes() / self.dtype.size_in_bytes()
    }

    /// Uploads a CPU buffer to device `ordinal`.
    pub fn upload(ordinal: usize, host: &CpuBuffer) -> CudaResult<CudaStorage> {
        let dev = device(ordinal)?;
        let buf = match host {
            CpuBuffer::F32(v) => dev.upload(v),
            CpuBuffer::F64(v) => dev.upload(v),
            CpuBuffer::F16(v) => dev.upload(v),
            CpuBuffer::BF16(v) => dev.upload(v),
            CpuBuffer::I64(v) => dev.upload(v),
            CpuBuffer::U8(v) => dev.upload(v),
            CpuBuffer::Bool(v) => dev.upload(v),
        }?;
        Ok(CudaStorage::new(buf, host.dtype()))
    }

    /// Uploads a pinned CPU buffer by DMA from its own memory (`pin` is its
    /// registration; see `tapir_kernels::cuda::HostPin`).
    pub fn upload_pinned(
        ordinal: usize,
        host: &CpuBuffer,
        pin: &tapir_kernels::cuda::HostPin,
    ) -> CudaResult<CudaStorage> {
        let dev = device(ordinal)?;
        let buf = super::cpu::with_vec!(host, v => dev.upload_pinned(v, pin))?;
        Ok(CudaStorage::new(buf, host.dtype()))
    }

    /// The whole buffer on the host (waits for queued work).
    pub fn download(&self) -> CudaResult<CpuBuffer> {
        let n = self.len();
        Ok(match self.dtype {
            DType::F32 => CpuBuffer::F32(self.buf.read::<f32>(n)?),
            DType::F64 => CpuBuffer::F64(self.buf.read::<f64>(n)?),
            DType::F16 => CpuBuffer::F16(self.buf.read::<f16>(n)?),
            DType::BF16 => CpuBuffer::BF16(self.buf.read::<bf16>(n)?),
            DType::I64 => CpuBuffer::I64(self.buf.read::<i64>(n)?),
            DType::U8 => CpuBuffer::U8(self.buf.read::<u8>(n)?),
            // Read as bytes: a byte other than 0/1 must not become a Rust bool.
            DType::Bool => CpuBuffer::Bool(
                self.buf
                    .read::<u8>(n)?
                    .into_iter()
                    .map(|b| b != 0)
                    .collect(),
            ),
        })
    }

    /// The view's elements on the host, row-major: the buffer itself when
    /// the view is all of it, else a device-side copy of the view first.
    pub fn download_view(&self, l: &Layout) -> CudaResult<CpuBuffer> {
        if l.contiguous_offset() == Some(0) && l.numel() == self.len() {
            self.download()
        } else {
            self.copy(l)?.download()
        }
    }

    /// Overwrites the buffer with a same-dtype, same-length host buffer.
    pub fn overwrite(&mut self, host: &CpuBuffer) -> CudaResult<()> {
        assert!(
            (host.dtype(), host.len()) == (self.dtype, self.len()),
            "CUDA write-back must keep dtype and length"
        );
        match host {
            CpuBuffer::F32(v) => self.buf.write(v),
            CpuBuffer::F64(v) => self.buf.write(v),
            CpuBuffer::F16(v) => self.buf.write(v),
            CpuBuffer::BF16(v) => self.buf.write(v),
            CpuBuffer::I64(v) => self.buf.write(v),
            CpuBuffer::U8(v) => self.buf.write(v),
            CpuBuffer::Bool(v) => self.buf.write(v),
        }
    }

    /// A contiguous copy of the view, on the device.
    pub fn copy(&self, l: &Layout) -> CudaResult<CudaStorage> {
        let buf = launch::strided_copy(&self.buf, l, self.dtype.size_in_bytes())?;
        Ok(CudaStorage::new(buf, self.dtype))
    }

    /// A contiguous copy converted to `dtype`.
    pub fn cast(&self, l: &Layout, dtype: DType) -> CudaResult<CudaStorage> {
        let (from, to) = (any_dtype(self.dtype), any_dtype(dtype));
        launch::cast(&self.buf, l, from, to).map(|b| CudaStorage::new(b, dtype))
    }

    /// `n` copies of `value` on device `ordinal`.
    pub fn filled(ordinal: usize, n: usize, value: f64, dtype: DType) -> CudaResult<CudaStorage> {
        let dev = device(ordinal)?;
        let buf = launch::fill(&dev, n, any_dtype(dtype), value)?;
        Ok(CudaStorage::new(buf, dtype))
    }

    /// `arange`'s values on device `ordinal`: i64, or f32 computed in f64
    /// (see `launch::arange_i64` / `arange_f32`).
    pub fn arange(ordinal: usize, n: usize, values: Arange) -> CudaResult<CudaStorage> {
        let dev = device(ordinal)?;
        Ok(match values {
            Arange::I64 { start, step } => {
                CudaStorage::new(launch::arange_i64(&dev, n, start, step)?, DType::I64)
            }
            Arange::F32 { start, step } => {
                CudaStorage::new(launch::arange_f32(&dev, n, start, step)?, DType::F32)
            }
        })
    }

    /// `n` Philox draws as f32 on device `ordinal` (see `launch::philox`).
    pub fn philox(
        ordinal: usize,
        n: usize,
        seed: u64,
        offset: u64,
        normal: bool,
    ) -> CudaResult<CudaStorage> {
        let dev = device(ordinal)?;
        let buf = launch::philox(&dev, n, seed, offset, normal)?;
        Ok(CudaStorage::new(buf, DType::F32))
    }

    /// `self[l] = src[ls]` (same dtype, views of one shape).
    pub fn assign(&mut self, l: &Layout, src: &CudaStorage, ls: &Layout) -> CudaResult<()> {
        assert!(self.dtype == src.dtype, "CUDA assign needs one dtype");
        launch::strided_assign(&mut self.buf, l, &src.buf, ls, self.dtype.size_in_bytes())
    }

    /// Elementwise comparison `cmp` (`eq ne lt le gt ge`) to bool.
    pub fn compare(
        &self,
        la: &Layout,
        rhs: &CudaStorage,
        lb: &Layout,
        cmp: &str,
    ) -> CudaResult<CudaStorage> {
        assert!(self.dtype == rhs.dtype, "CUDA compare needs one dtype");
        let buf = launch::compare(&self.buf, la, &rhs.buf, lb, cmp, any_dtype(self.dtype))?;
        Ok(CudaStorage::new(buf, DType::Bool))
    }

    /// `cond ? a : b` (cond bool; a, b one dtype; views broadcast to one shape).
    pub fn select_where(
        cond: &CudaStorage,
        lc: &Layout,
        a: &CudaStorage,
        la: &Layout,
        b: &CudaStorage,
        lb: &Layout,
    ) -> CudaResult<CudaStorage> {
        assert!(
            cond.dtype == DType::Bool,
            "CUDA where needs a bool condition"
        );
        assert!(a.dtype == b.dtype, "CUDA where needs one dtype");
        let w = a.dtype.size_in_bytes();
        let buf = launch::select_where(&cond.buf, lc, &a.buf, la, &b.buf, lb, w)?;
        Ok(CudaStorage::new(buf, a.dtype))
    }

    /// LayerNorm of the first `rows * n` elements (rows of `n`), with an
    /// optional weight and bias of this dtype (a missing one is ones or
    /// zeros): `[y, mean, rstd]`, the statistics in f32.
    pub fn layer_norm(
        &self,
        rows: usize,
        n: usize,
        weight: Option<&CudaStorage>,
        bias: Option<&CudaStorage>,
        eps: f64,
    ) -> Option<CudaResult<[CudaStorage; 3]>> {
        let kd = kernel_dtype(self.dtype)?;
        Some((|| {
            let ordinal = self.buf.device().ordinal();
            let (ones, zeros);
            let affine = match (weight, bias) {
                (None, None) => None,
                (w, b) => {
                    let w = match w {
                        Some(w) => w,
                        None => {
                            ones = CudaStorage::filled(ordinal, n, 1.0, self.dtype)?;
                            &ones
                        }
                    };
                    let b = match b {
                        Some(b) => b,
                        None => {
                            zeros = CudaStorage::filled(ordinal, n, 0.0, self.dtype)?;
                            &zeros
                        }
                    };
                    Some((&w.buf, &b.buf))
                }
            };
            let (y, m, r) = launch::layer_norm(&self.buf, affine, rows, n, eps as f32, kd)?;
            Ok([
                CudaStorage::new(y, self.dtype),
                CudaStorage::new(m, DType::F32),
                CudaStorage::new(r, DType::F32),
            ])
        })())
    }

    /// LayerNorm's gradients `[dx, dw, db]` (this dtype) for this dense input.
    pub fn layer_norm_backward(
        &self,
        g: &CudaStorage,
        mean: &CudaStorage,
        rstd: &CudaStorage,
        weight: Option<&CudaStorage>,
        rows: usize,
        n: usize,
    ) -> Option<CudaResult<[CudaStorage; 3]>> {
        let kd = kernel_dtype(self.dtype)?;
        let w = weight.map(|w| &w.buf);
        let r =
            launch::layer_norm_backward(&self.buf, &g.buf, &mean.buf, &rstd.buf, w, [rows, n], kd);
        Some(r.map(|(dx, dw, db)| [dx, dw, db].map(|b| CudaStorage::new(b, self.dtype))))
    }

    /// Max (or min) over dim `dim` of the view, with the i64 index of the
    /// first extreme element (float dtypes).
    pub fn extreme(
        &self,
        l: &Layout,
        dim: usize,
        max: bool,
    ) -> Option<CudaResult<(CudaStorage, CudaStorage)>> {
        let kd = kernel_dtype(self.dtype)?;
        let order: Vec<usize> = (0..l.ndim()).filter(|&d| d != dim).chain([dim]).collect();
        let moved = l.permute(&order);
        let n = l.shape[dim];
        let rows = l.numel() / n.max(1);
        Some((|| {
            let mut copy = None;
            let packed = self.dense(&moved, &mut copy)?;
            let (v, i) = launch::extreme_last(packed, rows, n, kd, max)?;
            Ok((
                CudaStorage::new(v, self.dtype),
                CudaStorage::new(i, DType::I64),
            ))
        })())
    }

    /// im2col of the `[n, c, h, w]` view, computed in f32 (half types are
    /// widened and the columns rounded back).
    pub fn im2col(
        &self,
        l: &Layout,
        g: &Conv2dGeometry,
        pad: f64,
    ) -> Option<CudaResult<CudaStorage>> {
        kernel_dtype(self.dtype)?;
        let geom = launch::ConvGeom::new(g)?;
        Some((|| {
            let copy = self.dense_f32(l)?;
            let x = copy.as_ref().unwrap_or(self);
            let cols = launch::im2col_f32(&x.buf, geom, pad as f32)?;
            CudaStorage::new(cols, DType::F32).into_dtype(self.dtype)
        })())
    }

    /// col2im of the `[n, c*kh*kw, oh*ow]` view, summed in f32.
    pub fn col2im(&self, l: &Layout, g: &Conv2dGeometry) -> Option<CudaResult<CudaStorage>> {
        kernel_dtype(self.dtype)?;
        let geom = launch::ConvGeom::new(g)?;
        Some((|| {
            let copy = self.dense_f32(l)?;
            let cols = copy.as_ref().unwrap_or(self);
            let x = launch::col2im_f32(&cols.buf, geom)?;
            CudaStorage::new(x, DType::F32).into_dtype(self.dtype)
        })())
    }

    /// Max pooling of the `[n, c, h, w]` view, compared in f32 (exact for
    /// half types): the maxima and their i64 plane argmaxes.
    pub fn max_pool2d(
        &self,
        l: &Layout,
        g: &Conv2dGeometry,
    ) -> Option<CudaResult<(CudaStorage, CudaStorage)>> {
        kernel_dtype(self.dtype)?;
        let geom = launch::ConvGeom::new(g)?;
        Some((|| {
            let copy = self.dense_f32(l)?;
            let x = copy.as_ref().unwrap_or(self);
            let (v, i) = launch::max_pool2d_f32(&x.buf, geom)?;
            Ok((
                CudaStorage::new(v, DType::F32).into_dtype(self.dtype)?,
                CudaStorage::new(i, DType::I64),
            ))
        })())
    }

    /// The gradient of `max_pool2d` from the gradient view and the dense
    /// indices, summed in f32.
    pub fn max_pool2d_backward(
        &self,
        l: &Layout,
        idx: &CudaStorage,
        g: &Conv2dGeometry,
    ) -> Option<CudaResult<CudaStorage>> {
        kernel_dtype(self.dtype)?;
        let geom = launch::ConvGeom::new(g)?;
        Some((|| {
            let copy = self.dense_f32(l)?;
            let grad = copy.as_ref().unwrap_or(self);
            let x = launch::max_pool2d_backward_f32(&grad.buf, &idx.buf, geom)?;
            CudaStorage::new(x, DType::F32).into_dtype(self.dtype)
        })())
    }

    /// The view as a dense f32 buffer from offset 0, which the conv kernels
    /// read: `None` when this storage already is one, else a converted copy.
    fn dense_f32(&self, l: &Layout) -> CudaResult<Option<CudaStorage>> {
        if self.dtype == DType::F32 && l.contiguous_offset() == Some(0) {
            Ok(None)
        } else {
            self.cast(l, DType::F32).map(Some)
        }
    }

    /// This storage converted to `dtype` (itself when it has that dtype).
    fn into_dtype(self, dtype: DType) -> CudaResult<CudaStorage> {
        if self.dtype == dtype {
            Ok(self)
        } else {
            self.cast(&Layout::contiguous(&[self.len()]), dtype)
        }
    }

    /// `torch.gather` / `index_select` (see `launch::gather`); `idx` is a
    /// dense i64 storage, checked against `along.size` by the kernel.
    pub fn gather(
        &self,
        along: Along<'_>,
        idx: &CudaStorage,
        per_element: bool,
    ) -> CudaResult<CudaStorage> {
        let g = gathered(along);
        let buf = launch::gather(
            &self.buf,
            g,
            &idx.buf,
            self.dtype.size_in_bytes(),
            per_element,
        )?;
        Ok(CudaStorage::new(buf, self.dtype))
    }

    /// Whether a kernel does the scatter of `mode` in this dtype: assignment
    /// in every dtype, the reductions in f32.
    pub fn can_scatter(&self, mode: ScatterMode) -> bool {
        mode == ScatterMode::Assign || self.dtype == DType::F32
    }

    /// The scatter of `mode` into this storage (see [`Self::can_scatter`]).
    pub fn scatter(
        &mut self,
        along: Along<'_>,
        src: &CudaStorage,
        ls: &Layout,
        idx: &CudaStorage,
        mode: ScatterMode,
    ) -> CudaResult<()> {
        let g = gathered(along);
        let width = self.dtype.size_in_bytes();
        let kernel = launch::scatter_kernel(mode, width)
            .expect("Storage::scatter asks can_scatter before launching");
        launch::scatter(&mut self.buf, g, &src.buf, ls, &idx.buf, (&kernel, width))
    }

    /// index_select's adjoint into this f32 `[outer, size, inner]` storage.
    pub fn index_add(
        &mut self,
        [outer, size, inner]: [usize; 3],
        src: &CudaStorage,
        idx: &CudaStorage,
        len: (usize, &'static str),
    ) -> CudaResult<()> {
        launch::index_add_f32(&mut self.buf, (outer, size, inner), &src.buf, &idx.buf, len)
    }

    /// The unary kernel `op` with parameters `p` over the view (float
    /// dtypes only); contiguous result.
    pub fn unary(&self, l: &Layout, op: &str, p: [f64; 2]) -> Option<CudaResult<CudaStorage>> {
        let kd = kernel_dtype(self.dtype)?;
        let r = launch::unary(&self.buf, l, op, kd, p[0] as f32, p[1] as f32);
        Some(r.map(|b| CudaStorage::new(b, self.dtype)))
    }

    /// The binary kernel `op` with parameter `p0` over two same-dtype views
    /// broadcast to one shape; contiguous result.
    pub fn binary(
        &self,
        la: &Layout,
        rhs: &CudaStorage,
        lb: &Layout,
        op: &str,
        p0: f64,
    ) -> Option<CudaResult<CudaStorage>> {
        let kd = kernel_dtype(self.dtype)?;
        if rhs.dtype != self.dtype {
            return None;
        }
        let r = launch::binary(&self.buf, la, &rhs.buf, lb, op, kd, p0 as f32);
        Some(r.map(|b| CudaStorage::new(b, self.dtype)))
    }

    /// In place: `self[l] = op(self[l])`, as the out-of-place kernel
    /// followed by a strided copy back into the view.
    pub fn map_assign(&mut self, l: &Layout, op: &str, p: [f64; 2]) -> Option<CudaResult<()>> {
        let r = self.unary(l, op, p)?;
        Some(r.and_then(|y| self.assign(l, &y, &Layout::contiguous(&l.shape))))
    }

    /// In place: `self[l] = op(self[l], src[ls])`, `src` converted to this
    /// dtype first.
    pub fn zip_assign(
        &mut self,
        l: &Layout,
        src: &CudaStorage,
        ls: &Layout,
        op: &str,
        p0: f64,
    ) -> Option<CudaResult<()>> {
        kernel_dtype(self.dtype)?;
        Some((|| {
            let converted;
            let (src, ls) = if src.dtype == self.dtype {
                (src, ls)
            } else {
                converted = (src.cast(ls, self.dtype)?, Layout::contiguous(&ls.shape));
                (&converted.0, &converted.1)
            };
            let y = self.binary(l, src, ls, op, p0).expect("a float dtype")?;
            self.assign(l, &y, &Layout::contiguous(&l.shape))
        })())
    }

    /// `self[l] = src[ls]` with `src` converted to this dtype first.
    pub fn assign_converting(
        &mut self,
        l: &Layout,
        src: &CudaStorage,
        ls: &Layout,
    ) -> CudaResult<()> {
        if src.dtype == self.dtype {
            return self.assign(l, src, ls);
        }
        let c = src.cast(ls, self.dtype)?;
        self.assign(l, &c, &Layout::contiguous(&ls.shape))
    }

    /// In place: the view set to `value`.
    pub fn fill(&mut self, l: &Layout, value: f64) -> CudaResult<()> {
        let ordinal = self.buf.device().ordinal();
        let v = CudaStorage::filled(ordinal, l.numel(), value, self.dtype)?;
        self.assign(l, &v, &Layout::contiguous(&l.shape))
    }

    /// Sum over `dims`. Over the leading dims of a dense view (a bias's
    /// gradient), as column sums in place; otherwise the reduced dims are
    /// moved last and made contiguous, then each row is summed by one block.
    pub fn sum(&self, l: &Layout, dims: &[usize]) -> Option<CudaResult<CudaStorage>> {
        let kd = kernel_dtype(self.dtype)?;
        let leading = (0..dims.len()).all(|d| dims.contains(&d));
        if leading && dims.len() < l.ndim() && l.contiguous_offset() == Some(0) {
            let rows: usize = l.shape[..dims.len()].iter().product();
            let n: usize = l.shape[dims.len()..].iter().product();
            let out = launch::sum_first(&self.buf, rows, n, kd);
            return Some(out.map(|b| CudaStorage::new(b, self.dtype)));
        }
        let keep: Vec<usize> = (0..l.ndim()).filter(|d| !dims.contains(d)).collect();
        let order: Vec<usize> = keep.iter().chain(dims).copied().collect();
        let moved = l.permute(&order);
        let rows: usize = keep.iter().map(|&d| l.shape[d]).product();
        let n: usize = dims.iter().map(|&d| l.shape[d]).product();
        Some((|| {
            let mut copy = None;
            let packed = self.dense(&moved, &mut copy)?;
            let out = launch::sum_last(packed, rows, n, kd)?;
            Ok(CudaStorage::new(out, self.dtype))
        })())
    }

    /// Row-wise softmax or log-softmax over the last dim of the view.
    pub fn softmax(&self, l: &Layout, log: bool) -> Option<CudaResult<CudaStorage>> {
        let kd = kernel_dtype(self.dtype)?;
        let n = *l.shape.last()?;
        let rows = l.numel() / n.max(1);
        Some((|| {
            let mut copy = None;
            let y = launch::softmax(self.dense(l, &mut copy)?, rows, n, kd, log)?;
            Ok(CudaStorage::new(y, self.dtype))
        })())
    }

    /// `a @ b` for views `[batch.., m, k]` and `[batch.., k, n]` already
    /// broadcast to one batch shape, on cuBLAS.
    pub fn matmul(
        &self,
        la: &Layout,
        rhs: &CudaStorage,
        lb: &Layout,
    ) -> Option<CudaResult<CudaStorage>> {
        let kd = kernel_dtype(self.dtype)?;
        if rhs.dtype != self.dtype {
            return None;
        }
        let nd = la.ndim();
        let (m, k, n) = (la.shape[nd - 2], la.shape[nd - 1], lb.shape[nd - 1]);
        let batch: usize = la.shape[..nd - 2].iter().product();
        Some((|| {
            // Each operand must be one batch stride over matrices that are
            // row-major or transposed; anything else is copied first.
            let a = gemm_operand(&self.buf, la, self.dtype.size_in_bytes())?;
            let b = gemm_operand(&rhs.buf, lb, rhs.dtype.size_in_bytes())?;
            let (abuf, bbuf) = (
                a.copy.as_ref().unwrap_or(&self.buf),
                b.copy.as_ref().unwrap_or(&rhs.buf),
            );
            let out = launch::matmul(
                abuf,
                a.offset,
                a.batch_stride,
                a.transposed,
                bbuf,
                b.offset,
                b.batch_stride,
                b.transposed,
                (batch, m, k, n),
                kd,
            )?;
            Ok(CudaStorage::new(out, self.dtype))
        })())
    }
}

/// How cuBLAS reads one operand of a matmul.
struct GemmOperand {
    /// A contiguous copy, when the view could not be read in place.
    copy: Option<CudaBuffer>,
    offset: usize,
    batch_stride: usize,
    transposed: bool,
}

/// A view qualifies as it is when its last two dims are dense (row-major or
/// transposed) and its batch dims collapse to one stride (or all broadcast).
fn gemm_operand(buf: &CudaBuffer, l: &Layout, width: usize) -> CudaResult<GemmOperand> {
    let nd = l.ndim();
    let (r, c) = (l.shape[nd - 2], l.shape[nd - 1]);
    let (sr, sc) = (l.strides[nd - 2], l.strides[nd - 1]);
    let transposed = if (sc == 1 || c == 1) && (sr == c || r == 1) {
        Some(false)
    } else if (sr == 1 || r == 1) && (sc == r || c == 1) {
        Some(true)
    } else {
        None
    };
    let batch: Vec<(usize, usize)> = (0..nd - 2)
        .filter(|&d| l.shape[d] != 1)
        .map(|d| (l.shape[d], l.strides[d]))
        .collect();
    let stride = match batch.as_slice() {
        [] => Some(0),
        [(_, s)] => Some(*s),
        many if many.iter().all(|&(_, s)| s == 0) => Some(0),
        many if many.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0) => many.last().map(|&(_, s)| s),
        _ => None,
    };
    Ok(match (transposed, stride) {
        (Some(transposed), Some(batch_stride)) => GemmOperand {
            copy: None,
            offset: l.offset,
            batch_stride,
            transposed,
        },
        _ => GemmOperand {
            copy: Some(launch::strided_copy(buf, l, width)?),
            offset: 0,
            batch_stride: r * c,
            transposed: false,
        },
    })
}
