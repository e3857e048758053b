//! Ordering through the device seam: running sums and stable sorts along
//! the last dim of a view, by the CPU kernels of `tapir_kernels::cpu`
//! (`cumsum_rows`, `sort_rows`) or on a GPU their twins in `cu/order.cu`
//! (f32, f16, bf16; other dtypes on a host copy). `topk` and `nonzero` have
//! CPU kernels of their own (a selection, a count and a write); elsewhere
//! the runtime builds them from the sort.

use super::cpu::{Wrap, contiguous, planes, with_vec};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::{CudaStorage, fail, kernel_dtype};
use super::{CpuBuffer, Storage};
use crate::dtype::{DType, Element};
use tapir_kernels::Layout;
use tapir_kernels::cpu::{
    copy_strided, cumsum_columns, cumsum_rows, nonzero_coords, sort_rows, sort_rows_f32, topk_rows,
};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use tapir_kernels::cuda::launch;

/// Rows of the last dim: `(rows, n)` of a view.
fn rows_of(l: &Layout) -> (usize, usize) {
    let n = l.shape.last().copied().unwrap_or(1);
    (l.numel().checked_div(n).unwrap_or(0), n)
}

impl CpuBuffer {
    /// Running sums along the last dim of the view, dense. Floats add in
    /// f64 (as PyTorch's CPU kernel) and round each sum once through f32
    /// (the GPU twin's path; exact for f32); integers and bools as i64.
    fn cumsum_last(&self, l: &Layout) -> CpuBuffer {
        let (_, n) = rows_of(l);
        if !self.dtype().is_float() {
            let CpuBuffer::I64(v) = self.cast(l, DType::I64) else {
                unreachable!("a cast to i64 gives i64")
            };
            return CpuBuffer::I64(cumsum_rows(&v, n, 0i64, |a, x| a.wrapping_add(x), |a| a));
        }
        let wide = self.dtype() == DType::F64;
        with_vec!(self, v => {
            // Read in place when dense.
            let rows = contiguous(v, l);
            let round = move |a: f64| Element::from_f64(if wide { a } else { a as f32 as f64 });
            let sums = cumsum_rows(&rows, n, 0.0f64, |a, x| a + x.to_f64(), round);
            if let std::borrow::Cow::Owned(copy) = rows {
                tapir_kernels::alloc::recycle(copy); // back to the cache
            }
            Wrap::wrap(sums)
        })
    }

    /// Running sums over `dim` of a contiguous view, a dim that is not the
    /// last, by columns (the sums and rounding of [`Self::cumsum_last`]);
    /// `None` for other views.
    fn cumsum_columns(&self, l: &Layout, dim: usize) -> Option<CpuBuffer> {
        let (span, len, inner) = planes(l, dim).filter(|&(_, _, inner)| inner > 1)?;
        if !self.dtype().is_float() {
            let CpuBuffer::I64(v) = self.cast(l, DType::I64) else {
                unreachable!("a cast to i64 gives i64")
            };
            let sums = cumsum_columns(&v, len, inner, 0i64, |a, x| a.wrapping_add(x), |a| a);
            return Some(CpuBuffer::I64(sums));
        }
        let wide = self.dtype() == DType::F64;
        Some(with_vec!(self, v => {
            let round = move |a: f64| Element::from_f64(if wide { a } else { a as f32 as f64 });
            Wrap::wrap(cumsum_columns(&v[span], len, inner, 0.0f64, |a, x| a + x.to_f64(), round))
        }))
    }

    /// The first `k` along the last dim of the view in `sort_last`'s
    /// order: values and i64 indices.
    fn topk_last(&self, l: &Layout, k: usize, largest: bool) -> (CpuBuffer, CpuBuffer) {
        let (_, n) = rows_of(l);
        with_vec!(self, v => {
            // Read in place when dense: the kernel reads each row once.
            let (vals, idx) = topk_rows(&contiguous(v, l), n, k, largest);
            (Wrap::wrap(vals), CpuBuffer::I64(idx))
        })
    }

    /// The coordinates in `shape` (as many elements as the view) of the
    /// view's nonzero elements in row-major order, `[count, shape.len()]`.
    fn nonzero(&self, l: &Layout, shape: &[usize]) -> CpuBuffer {
        with_vec!(self, v => CpuBuffer::I64(nonzero_coords(&contiguous(v, l), shape)))
    }

    /// A stable sort along the last dim of the view: values and indices.
    fn sort_last(&self, l: &Layout, descending: bool) -> (CpuBuffer, CpuBuffer) {
        let (_, n) = rows_of(l);
        if let CpuBuffer::F32(v) = self
            && n <= u32::MAX as usize
        {
            let (vals, idx) = sort_rows_f32(&contiguous(v, l), n, descending);
            return (CpuBuffer::F32(vals), CpuBuffer::I64(idx));
        }
        with_vec!(self, v => {
            let rows = copy_strided(v, l);
            let (vals, idx) = sort_rows(&rows, n, descending);
            tapir_kernels::alloc::recycle(rows);
            (Wrap::wrap(vals), CpuBuffer::I64(idx))
        })
    }
}

impl Storage {
    /// Running sums along the last dim of the view `l`, dense in its shape:
    /// this dtype for floats, i64 for integers and bools (PyTorch's result
    /// type).
    pub fn cumsum_last(&self, l: &Layout) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.cumsum_last(l)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match kernel_dtype(s.dtype) {
                Some(kd) => {
                    let buf = on_rows(s, l, "cumsum", |x, rows, n| {
                        launch::cumsum_last(x, rows, n, kd)
                    });
                    Storage::Cuda(CudaStorage::new(buf, s.dtype))
                }
                None => self.map_host(|b| b.cumsum_last(l)),
            },
        }
    }

    /// Running sums over `dim` of the view `l`, not its last dim, by
    /// columns where the device has a kernel for the view; `None` elsewhere
    /// (the caller moves the dim last for [`Storage::cumsum_last`]).
    pub fn cumsum_columns(&self, l: &Layout, dim: usize) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => b.cumsum_columns(l, dim).map(Storage::cpu),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The first `k` along the last dim of the view `l` in `sort_last`'s
    /// order (`[.., k]` values and i64 indices), by a selection on the CPU;
    /// `None` elsewhere, and the caller sorts and narrows.
    pub fn topk_last(&self, l: &Layout, k: usize, largest: bool) -> Option<(Storage, Storage)> {
        match self {
            Storage::Cpu(b) => {
                let (v, i) = b.topk_last(l, k, largest);
                Some((Storage::cpu(v), Storage::cpu(i)))
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The coordinates of the nonzero elements of the view `l`, read in
    /// row-major order, within `shape` (the view's own, or `[numel]` for
    /// flat positions): `[count, shape.len()]` i64, dense, by the CPU's
    /// count and write; `None` elsewhere, and the caller builds them from
    /// a sort.
    pub fn nonzero(&self, l: &Layout, shape: &[usize]) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => Some(Storage::cpu(b.nonzero(l, shape))),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// A stable sort along the last dim of the view `l` (NaN last, or first
    /// when `descending`): the values in this dtype and their i64 indices,
    /// both dense in its shape.
    pub fn sort_last(&self, l: &Layout, descending: bool) -> (Storage, Storage) {
        match self {
            Storage::Cpu(b) => {
                let (v, i) = b.sort_last(l, descending);
                (Storage::cpu(v), Storage::cpu(i))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match kernel_dtype(s.dtype) {
                Some(kd) => {
                    let (v, i) = on_rows(s, l, "sort", |x, rows, n| {
                        launch::sort_last(x, rows, n, kd, descending)
                    });
                    (
                        Storage::Cuda(CudaStorage::new(v, s.dtype)),
                        Storage::Cuda(CudaStorage::new(i, DType::I64)),
                    )
                }
                None => {
                    let (v, i) = self.host().sort_last(l, descending);
                    let d = self.device();
                    (Storage::on_device(v, d), Storage::on_device(i, d))
                }
            },
        }
    }
}

/// Runs a row kernel `f(buffer, rows, n)` over the view `l` of a GPU
/// tensor, packed densely first where it is not; a CUDA error panics
/// naming `op`.
#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn on_rows<T>(
    s: &CudaStorage,
    l: &Layout,
    op: &str,
    f: impl FnOnce(&tapir_kernels::cuda::CudaBuffer, usize, usize) -> tapir_kernels::cuda::CudaResult<T>,
) -> T {
    let (rows, n) = rows_of(l);
    let mut copy = None;
    s.dense(l, &mut copy)
        .and_then(|packed| f(packed, rows, n))
        .unwrap_or_else(|e| fail(op, e))
}
