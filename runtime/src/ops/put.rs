//! Reads and writes at computed positions, composed of `gather` and the
//! scatters (so gradients, both devices, compile and export come from
//! them): `take` and `put` over the flattened tensor, `index_put` (what
//! PyTorch's `x[i, j] = v` and `x[rows] += v` run), `masked_scatter`,
//! and `slice_scatter` / `select_scatter` (an `index_copy` of the slice's
//! positions).
//! Negative indices count from the end, as PyTorch's.

use crate::trace::{self, Attr};
use crate::{DType, Tensor};

/// `index` (int64) with negative entries moved up by `size`.
fn from_the_end(index: &Tensor, size: usize, op: &str) -> Tensor {
    assert!(
        index.dtype() == DType::I64,
        "{op}: indices must be int64, got {}",
        index.dtype()
    );
    Tensor::where_(&index.lt_scalar(0.0), &(index + size as f64), index)
}

/// Checks that every entry of `index` is below `size`, as index kernels
/// do (on a GPU in the kernel, reported at the next host read, never
/// waited for here): flattened positions would hide an entry past its
/// own dim.
fn in_range(index: &Tensor, size: usize, op: &'static str) {
    let probe = super::creation::filled_on(&[size], 0.0, DType::U8, index.device());
    let _ = probe.gather_as(0, &index.reshape(&[-1]), op);
}

impl Tensor {
    /// The elements at the flat (row-major) positions `index`, shaped like
    /// `index` (`torch.take`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let at = Tensor::from_vec(vec![3i64, -4], &[2]);
    /// assert_eq!(x.take(&at).to_vec::<f32>(), vec![4.0, 1.0]);
    /// ```
    pub fn take(&self, index: &Tensor) -> Tensor {
        trace::op("take", [self, index], Vec::new, || {
            let at = from_the_end(index, self.numel(), "take").reshape(&[-1]);
            self.reshape(&[-1])
                .gather_as(0, &at, "take")
                .reshape_as_shape(index.shape())
        })
    }

    /// `self` with `source`'s elements written at the flat positions
    /// `index` (`Tensor.put`; added there when `accumulate`). `index` and
    /// `source` have the same number of elements.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[2, 2]);
    /// let at = Tensor::from_vec(vec![1i64, 1], &[2]);
    /// let v = Tensor::from_vec(vec![2.0f32, 3.0], &[2]);
    /// assert_eq!(x.put(&at, &v, true).to_vec::<f32>(), vec![0.0, 5.0, 0.0, 0.0]);
    /// ```
    pub fn put(&self, index: &Tensor, source: &Tensor, accumulate: bool) -> Tensor {
        let attrs = || vec![("accumulate", Attr::Int(accumulate as i64))];
        trace::op("put", [self, index, source], attrs, || {
            self.put_untraced(index, source, accumulate)
        })
    }

    fn put_untraced(&self, index: &Tensor, source: &Tensor, accumulate: bool) -> Tensor {
        assert!(
            index.numel() == source.numel(),
            "put: index has {} elements, source of shape {:?} has {}",
            index.numel(),
            source.shape(),
            source.numel()
        );
        let at = from_the_end(index, self.numel(), "put").reshape(&[-1]);
        self.reshape(&[-1])
            .scatter_as(0, &at, &source.reshape(&[-1]), accumulate, "put")
            .reshape_as_shape(self.shape())
    }

    /// `self` with `values` written where the index tensors point
    /// (`Tensor.index_put`, PyTorch's `x[i, j] = v`; added when
    /// `accumulate`, `x[i, j] += v` with repeats adding up). `indices` index
    /// the leading dims, one int64 tensor each, broadcast together; the
    /// dims after them are taken whole, and `values` broadcasts to the
    /// indices' shape followed by those dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[3, 2]);
    /// let rows = Tensor::from_vec(vec![2i64, 0, 2], &[3]);
    /// let out = x.index_put(&[&rows], &Tensor::ones(&[1]), true);
    /// assert_eq!(out.to_vec::<f32>(), vec![1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);
    /// ```
    pub fn index_put(&self, indices: &[&Tensor], values: &Tensor, accumulate: bool) -> Tensor {
        // Traced as [self, values, indices...].
        let mut inputs = vec![self, values];
        inputs.extend_from_slice(indices);
        let attrs = || vec![("accumulate", Attr::Int(accumulate as i64))];
        trace::op("index_put", inputs.as_slice(), attrs, || {
            self.index_put_untraced(indices, values, accumulate)
        })
    }

    fn index_put_untraced(&self, indices: &[&Tensor], values: &Tensor, accumulate: bool) -> Tensor {
        let k = indices.len();
        assert!(
            (1..=self.ndim()).contains(&k),
            "index_put: {k} index tensors for a tensor of shape {:?} (1 to {} allowed)",
            self.shape(),
            self.ndim()
        );
        let mut batch: Vec<usize> = indices[0].shape().to_vec();
        for i in &indices[1..] {
            batch = super::broadcast_shapes(&batch, i.shape(), "index_put");
        }
        // One flat position among the leading dims per index entry.
        let lead = &self.shape()[..k];
        let mut flat: Option<Tensor> = None;
        for (d, idx) in indices.iter().enumerate() {
            let stride: usize = lead[d + 1..].iter().product();
            let idx = from_the_end(idx, lead[d], "index_put");
            in_range(&idx, lead[d], "index_put");
            let at = &idx.expand(&batch) * stride as f64;
            flat = Some(match flat {
                None => at,
                Some(f) => &f + &at,
            });
        }
        let flat = flat
            .unwrap_or_else(|| unreachable!("k >= 1"))
            .reshape(&[-1]);
        let rest = &self.shape()[k..];
        let rows = flat.numel();
        let mut target: Vec<usize> = batch.clone();
        target.extend_from_slice(rest);
        let mut grid = vec![rows as isize];
        grid.extend(rest.iter().map(|&n| n as isize));
        let values = values.expand(&target).reshape(&grid);
        let mut column = vec![1isize; grid.len()];
        column[0] = rows as isize;
        let at = flat.reshape(&column).expand(values.shape());
        let mut view = vec![lead.iter().product::<usize>() as isize];
        view.extend(rest.iter().map(|&n| n as isize));
        self.reshape(&view)
            .scatter_as(0, &at, &values, accumulate, "index_put")
            .reshape_as_shape(self.shape())
    }

    /// `self` with `source`'s leading elements written, in order, where
    /// `mask` (bool, broadcast to `self`'s shape) is true
    /// (`Tensor.masked_scatter`). Reads the count back to the host, as
    /// `masked_select` does.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[2, 2]);
    /// let mask = Tensor::from_vec(vec![true, false, true, true], &[2, 2]);
    /// let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
    /// assert_eq!(x.masked_scatter(&mask, &src).to_vec::<f32>(), vec![1.0, 0.0, 2.0, 3.0]);
    /// ```
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Tensor {
        trace::op("masked_scatter", [self, mask, source], Vec::new, || {
            self.masked_scatter_untraced(mask, source)
        })
    }

    fn masked_scatter_untraced(&self, mask: &Tensor, source: &Tensor) -> Tensor {
        assert!(
            mask.dtype() == DType::Bool,
            "masked_scatter: mask must be bool, got {}",
            mask.dtype()
        );
        let shape = super::broadcast_shapes(self.shape(), mask.shape(), "masked_scatter");
        assert!(
            shape == self.shape(),
            "masked_scatter: mask of shape {:?} does not broadcast to self's {:?}",
            mask.shape(),
            self.shape()
        );
        let at = mask.expand(&shape).nonzero_flat();
        assert!(
            at.numel() <= source.numel(),
            "masked_scatter: the mask selects {} elements, source of shape {:?} has only {}",
            at.numel(),
            source.shape(),
            source.numel()
        );
        let values = source.reshape(&[-1]).narrow(0, 0, at.numel());
        self.reshape(&[-1])
            .scatter_as(0, &at, &values, false, "masked_scatter")
            .reshape_as_shape(self.shape())
    }

    fn reshape_as_shape(&self, shape: &[usize]) -> Tensor {
        let s: Vec<isize> = shape.iter().map(|&n| n as isize).collect();
        self.reshape(&s)
    }
}

impl Tensor {
    /// `self` with the slice `start..end` (step `step`) of `dim` replaced
    /// by `src` (`torch.slice_scatter`); `start` and `end` clamp and count
    /// from the end when negative, as [`Tensor::slice`]'s, and `src` has
    /// the slice's shape. Gradients flow to both, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let out = Tensor::zeros(&[5]).slice_scatter(&Tensor::ones(&[2]), 0, 1, 5, 2);
    /// assert_eq!(out.to_vec::<f32>(), vec![0.0, 1.0, 0.0, 1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn slice_scatter(
        &self,
        src: &Tensor,
        dim: isize,
        start: isize,
        end: isize,
        step: usize,
    ) -> Tensor {
        let d = self.dim(dim, "slice_scatter");
        assert!(
            step > 0 && self.ndim() > 0,
            "slice_scatter: needs a positive step and a tensor with dims, got step {step} and shape {:?}",
            self.shape()
        );
        let (s, len) = super::view::slice_span(self.shape()[d], start, end, step);
        let mut want = self.shape().to_vec();
        want[d] = len;
        assert!(
            src.shape() == want,
            "slice_scatter: src has shape {:?}, but the slice {start}..{end} (step {step}) of dim {dim} of shape {:?} \
             has shape {want:?}",
            src.shape(),
            self.shape()
        );
        let (s, len, step) = (s as i64, len as i64, step as i64);
        let at = Tensor::arange_on((s..s + len * step, step), self.device());
        self.index_copy(d as isize, &at, src)
    }

    /// `self` with entry `index` of `dim` replaced by `src`, which has
    /// `self`'s shape without `dim` (`torch.select_scatter`); a negative
    /// index counts from the end. Gradients flow to both, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let out = Tensor::zeros(&[2, 2]).select_scatter(&Tensor::ones(&[2]), 1, -1);
    /// assert_eq!(out.to_vec::<f32>(), vec![0.0, 1.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn select_scatter(&self, src: &Tensor, dim: isize, index: isize) -> Tensor {
        let d = self.dim(dim, "select_scatter");
        assert!(
            self.ndim() > 0,
            "select_scatter: needs a tensor with dims, got a 0-d tensor"
        );
        let size = self.shape()[d] as isize;
        let i = if index < 0 { index + size } else { index };
        assert!(
            (0..size).contains(&i),
            "select_scatter: index {index} is out of range for dim {dim} of length {size} (shape {:?})",
            self.shape()
        );
        let mut want = self.shape().to_vec();
        want.remove(d);
        assert!(
            src.shape() == want,
            "select_scatter: src has shape {:?}, but entry {index} of dim {dim} of shape {:?} has shape {want:?}",
            src.shape(),
            self.shape()
        );
        let at = Tensor::arange_on((i as i64..i as i64 + 1, 1), self.device());
        self.index_copy(d as isize, &at, &src.unsqueeze(d as isize))
    }
}
