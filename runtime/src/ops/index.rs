//! Indexing ops: index_select, gather, scatter_add, embedding.

use super::dense0;
use crate::storage::{AnyKernel, CpuBuffer, IndexGeom};
use crate::{DType, Element, Tensor};
use tapir_kernels::{Layout, cpu};

fn index_dtype(idx: &Tensor, op: &str) {
    assert_eq!(
        idx.dtype(),
        DType::I64,
        "{op}: index must be int64, got {}",
        idx.dtype()
    );
}

/// Reads an int64 index tensor as offsets for a host kernel, checking each
/// against `size`. GPU kernels check their indices themselves, so that the
/// host need not wait to read them (`IndexGeom`).
fn indices(idx: &Tensor, size: usize, op: &str) -> Vec<usize> {
    index_dtype(idx, op);
    idx.to_vec::<i64>()
        .into_iter()
        .map(|i| {
            assert!(
                i >= 0 && (i as usize) < size,
                "{op}: index {i} is out of bounds for dim of size {size}"
            );
            i as usize
        })
        .collect()
}

/// How a GPU kernel walks `t` along dim `d` for an index (or output) of
/// `shape`: `t`'s strides viewed at that shape, and the geometry around `d`.
fn along(t: &Tensor, d: usize, shape: &[usize], op: &'static str) -> (Layout, IndexGeom) {
    let view = Layout {
        shape: shape.to_vec(),
        strides: t.strides().to_vec(),
        offset: t.layout().offset,
    };
    let geom = IndexGeom {
        inner: shape[d + 1..].iter().product(),
        len: shape[d],
        stride: t.strides()[d],
        size: t.shape()[d],
        op,
    };
    (view, geom)
}

impl Tensor {
    /// The GPU path of gather (`per_element`) and index_select, its index
    /// errors naming `op`: `None` on the CPU.
    fn gather_on_gpu(
        &self,
        d: usize,
        out_shape: &[usize],
        index: &Tensor,
        per_element: bool,
        op: &'static str,
    ) -> Option<Tensor> {
        if !self.device().is_cuda() {
            return None;
        }
        let idx = dense0(index);
        let (view, geom) = along(self, d, out_shape, op);
        let s = self
            .read()
            .gather_gpu(&view, geom, &idx.read(), per_element)?;
        Some(Tensor::from_storage(s, out_shape))
    }
}

struct Select<'a> {
    outer: usize,
    size: usize,
    inner: usize,
    idx: &'a [usize],
}
impl AnyKernel for Select<'_> {
    fn run<T: Element>(&self, x: &[T]) -> Vec<T> {
        cpu::index_select(x, self.outer, self.size, self.inner, self.idx)
    }
}

struct Gather<'a> {
    dim: usize,
    shape: &'a [usize],
    idx: &'a [usize],
    index_shape: &'a [usize],
}
impl AnyKernel for Gather<'_> {
    fn run<T: Element>(&self, x: &[T]) -> Vec<T> {
        cpu::gather(
            x,
            &Layout::contiguous(self.shape),
            self.dim,
            self.idx,
            self.index_shape,
        )
    }
}

impl Tensor {
    /// Picks entries `index` (1-D int64) along `dim`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[3, 2]);
    /// let r = x.index_select(0, &Tensor::from_vec(vec![2i64, 0], &[2]));
    /// assert_eq!(r.to_vec::<i64>(), vec![4, 5, 0, 1]);
    /// ```
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Tensor {
        let d = self.dim(dim, "index_select");
        assert!(
            index.ndim() <= 1,
            "index_select: index must be 1-D, got shape {:?}",
            index.shape()
        );
        super::same_device(self, index, "index_select");
        index_dtype(index, "index_select");
        let size = self.shape()[d];
        let len = index.numel();
        let outer: usize = self.shape()[..d].iter().product();
        let inner: usize = self.shape()[d + 1..].iter().product();
        let mut shape = self.shape().to_vec();
        shape[d] = len;
        let out = self
            .gather_on_gpu(d, &shape, index, false, "index_select")
            .unwrap_or_else(|| {
                let idx = indices(index, size, "index_select");
                let buf = self.read().host().any_kernel(
                    self.layout(),
                    Select {
                        outer,
                        size,
                        inner,
                        idx: &idx,
                    },
                );
                Tensor::from_buffer_on(buf, &shape, self.device())
            });
        let in_shape = self.shape().to_vec();
        let index = dense0(index);
        Tensor::record(out, "IndexSelectBackward0", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                // f64 stays exact on the host path; other floats add in f32.
                if g.device().is_cuda() && g.dtype() != DType::F64 {
                    let gf = dense0(&g.to_dtype(DType::F32));
                    let dst = super::creation::filled_on(&in_shape, 0.0, DType::F32, g.device());
                    let done = dst.write().index_add_gpu(
                        (outer, size, inner),
                        &gf.read(),
                        &index.read(),
                        len,
                    );
                    assert!(
                        done,
                        "index_select backward: a CUDA gradient has a CUDA kernel"
                    );
                    return vec![Some(dst.to_dtype(g.dtype()))];
                }
                let idx = indices(&index, size, "index_select");
                let g = g.contiguous();
                let mut dst: Vec<f64> = vec![0.0; in_shape.iter().product()];
                let src: Vec<f64> = g.to_vec();
                cpu::index_add_rows(&mut dst, size, inner, &src, &idx);
                vec![Some(
                    Tensor::from_vec(dst, &in_shape)
                        .to(g.device())
                        .expect("the input's device was usable in forward")
                        .to_dtype(g.dtype()),
                )]
            }
        })
    }

    /// `out[i][j] = self[index[i][j]][j]` for dim 0, and so on (`torch.gather`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let i = Tensor::from_vec(vec![1i64, 0], &[2, 1]);
    /// assert_eq!(x.gather(1, &i).to_vec::<f32>(), vec![2.0, 3.0]);
    /// ```
    pub fn gather(&self, dim: isize, index: &Tensor) -> Tensor {
        self.gather_as(dim, index, "gather")
    }

    /// `gather` whose out-of-range indices are reported as `op`'s.
    pub(crate) fn gather_as(&self, dim: isize, index: &Tensor, op: &'static str) -> Tensor {
        let d = self.dim(dim, "gather");
        assert_eq!(
            index.ndim(),
            self.ndim(),
            "gather: index has {} dims, input of shape {:?} has {}",
            index.ndim(),
            self.shape(),
            self.ndim()
        );
        for k in 0..self.ndim() {
            assert!(
                k == d || index.shape()[k] <= self.shape()[k],
                "gather: index shape {:?} exceeds input shape {:?} at dim {k}",
                index.shape(),
                self.shape()
            );
        }
        super::same_device(self, index, "gather");
        index_dtype(index, "gather");
        let out = self
            .gather_on_gpu(d, index.shape(), index, true, op)
            .unwrap_or_else(|| {
                let idx = indices(index, self.shape()[d], op);
                // any_kernel densifies the view itself (borrowing when already dense).
                let buf = self.read().host().any_kernel(
                    self.layout(),
                    Gather {
                        dim: d,
                        shape: self.shape(),
                        idx: &idx,
                        index_shape: index.shape(),
                    },
                );
                Tensor::from_buffer_on(buf, index.shape(), self.device())
            });
        let in_shape = self.shape().to_vec();
        let index = index.detach();
        Tensor::record(out, "GatherBackward0", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                vec![Some(
                    super::creation::filled_on(&in_shape, 0.0, g.dtype(), g.device())
                        .scatter_add(d as isize, &index, g),
                )]
            }
        })
    }

    /// `self` with `src` added at `index` along `dim` (`Tensor.scatter_add`).
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let d = self.dim(dim, "scatter_add");
        assert_eq!(
            index.ndim(),
            self.ndim(),
            "scatter_add: index has {} dims, self of shape {:?} has {}",
            index.ndim(),
            self.shape(),
            self.ndim()
        );
        assert!(
            self.dtype().is_float(),
            "scatter_add: only float tensors are supported, got {}",
            self.dtype()
        );
        for k in 0..self.ndim() {
            assert!(
                index.shape()[k] <= src.shape()[k]
                    && (k == d || index.shape()[k] <= self.shape()[k]),
                "scatter_add: index shape {:?} exceeds src {:?} or self {:?} at dim {k}",
                index.shape(),
                src.shape(),
                self.shape()
            );
        }
        super::same_device(self, index, "scatter_add");
        super::same_device(self, src, "scatter_add");
        if !matches!(self.dtype(), DType::F32 | DType::F64) {
            // Half types add in f32 and round once, on either device (a
            // composition, so autograd comes with it).
            return self
                .to_dtype(DType::F32)
                .scatter_add(dim, index, &src.to_dtype(DType::F32))
                .to_dtype(self.dtype());
        }
        index_dtype(index, "scatter_add");
        let dst = self.contiguous_copy();
        let src_d = src.to_dtype(self.dtype()).detach();
        let on_gpu = dst.device().is_cuda() && dst.dtype() == DType::F32 && {
            let (view, geom) = along(&dst, d, index.shape(), "scatter_add");
            let ls = Layout {
                shape: index.shape().to_vec(),
                strides: src_d.strides().to_vec(),
                offset: src_d.layout().offset,
            };
            let index = dense0(index);
            let (s, i) = (src_d.read(), index.read());
            dst.write().scatter_add_gpu(&view, geom, &s, &ls, &i)
        };
        if !on_gpu {
            let idx = indices(index, self.shape()[d], "scatter_add");
            let mut w = dst.write();
            let s = src_d.read();
            let mut wh = w.host_mut();
            let sh = s.host();
            match (&mut *wh, &*sh) {
                (CpuBuffer::F32(dv), CpuBuffer::F32(sv)) => {
                    cpu::scatter_add(dv, self.shape(), d, &idx, index.shape(), sv, src_d.layout())
                }
                (CpuBuffer::F64(dv), CpuBuffer::F64(sv)) => {
                    cpu::scatter_add(dv, self.shape(), d, &idx, index.shape(), sv, src_d.layout())
                }
                _ => unreachable!("scatter_add: half types add in f32"),
            }
        }
        let index = index.detach();
        Tensor::record(dst, "ScatterAddBackward0", &[self, src], move || {
            move |g: &Tensor, n: &[bool]| {
                vec![
                    n[0].then(|| g.clone()),
                    n[1].then(|| g.gather(d as isize, &index)),
                ]
            }
        })
    }

    /// Rows of `self` (the `[num, dim]` weight) for every id in `ids`:
    /// output shape `ids.shape + [dim]` (`F.embedding`).
    pub fn embedding(&self, ids: &Tensor) -> Tensor {
        assert_eq!(
            self.ndim(),
            2,
            "embedding: weight must be 2-D, got shape {:?}",
            self.shape()
        );
        let mut shape: Vec<isize> = ids.shape().iter().map(|&s| s as isize).collect();
        shape.push(self.shape()[1] as isize);
        self.index_select(0, &ids.flatten_all()).reshape(&shape)
    }
}
