//! Indexing ops: index_select, gather, embedding (the scatters are in
//! `scatter.rs`).

use super::creation::filled_on;
use super::dense0;
use crate::storage::Along;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use tapir_kernels::Layout;

pub(super) fn index_dtype(idx: &Tensor, op: &str) {
    assert!(
        idx.dtype() == DType::I64,
        "{op}: index must be int64, got {}",
        idx.dtype()
    );
}

/// `t`'s strides and offset viewed at `shape` (an index's or an output's):
/// how an index op walks `t`.
pub(super) fn view_at(t: &Tensor, shape: &[usize]) -> Layout {
    Layout {
        shape: shape.to_vec(),
        strides: t.strides().to_vec(),
        offset: t.layout().offset,
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
        trace::op(
            "index_select",
            [self, index],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
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
                let idx = dense0(index);
                let view = view_at(self, &shape);
                let along = Along {
                    view: &view,
                    dim: d,
                    size,
                    op: "index_select",
                };
                let out = Tensor::from_storage(
                    self.read()
                        .gather(along, (&idx.read(), idx.layout()), false),
                    &shape,
                );
                let (in_shape, idx) = (self.shape().to_vec(), idx.saved());
                Tensor::record(out, "IndexSelectBackward0", &[self], move || {
                    move |g: &Tensor, _: &[bool]| {
                        if crate::autograd::differentiating() {
                            // Recorded (its backward is this index_select),
                            // for `create_graph`.
                            let zeros = filled_on(&in_shape, 0.0, g.dtype(), g.device());
                            return vec![Some(zeros.index_add(d as isize, &idx, g, 1.0))];
                        }
                        // Rows add up in f32 (f64 for f64), then round once.
                        let acc = if g.dtype() == DType::F64 {
                            DType::F64
                        } else {
                            DType::F32
                        };
                        let src = dense0(&g.to_dtype(acc));
                        let dst = filled_on(&in_shape, 0.0, acc, g.device());
                        dst.write().index_add(
                            [outer, size, inner],
                            &src.read(),
                            &idx.read(),
                            (len, "index_select backward"),
                        );
                        vec![Some(dst.to_dtype(g.dtype()))]
                    }
                })
            },
        )
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
        trace::op(
            "gather",
            [self, index],
            || vec![("dim", Attr::Int(dim as i64))],
            || self.gather_as(dim, index, "gather"),
        )
    }

    /// `gather` whose out-of-range indices are reported as `op`'s.
    pub(crate) fn gather_as(&self, dim: isize, index: &Tensor, op: &'static str) -> Tensor {
        let d = self.dim(dim, "gather");
        assert!(
            index.ndim() == self.ndim(),
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
        let view = view_at(self, index.shape());
        let along = Along {
            view: &view,
            dim: d,
            size: self.shape()[d],
            op,
        };
        // Read at its own strides: an expanded index is not copied out.
        let idx = (&*index.read(), index.layout());
        let out = Tensor::from_storage(self.read().gather(along, idx, true), index.shape());
        let in_shape = self.shape().to_vec();
        let index = index.saved();
        Tensor::record(out, "GatherBackward0", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                vec![Some(
                    filled_on(&in_shape, 0.0, g.dtype(), g.device())
                        .scatter_add(d as isize, &index, g),
                )]
            }
        })
    }

    /// Rows of `self` (the `[num, dim]` weight) for every id in `ids`:
    /// output shape `ids.shape + [dim]` (`F.embedding`).
    pub fn embedding(&self, ids: &Tensor) -> Tensor {
        trace::op("embedding", [self, ids], Vec::new, || {
            assert!(
                self.ndim() == 2,
                "embedding: weight must be 2-D, got shape {:?}",
                self.shape()
            );
            let mut shape: Vec<isize> = ids.shape().iter().map(|&s| s as isize).collect();
            shape.push(self.shape()[1] as isize);
            self.index_select(0, &ids.flatten_all()).reshape(&shape)
        })
    }
}
