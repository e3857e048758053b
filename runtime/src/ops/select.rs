//! Ops whose output size depends on the values: `nonzero` and
//! `masked_select`. On the CPU the positions come from one kernel (a count
//! and a write); elsewhere they read one count back to the host (as
//! PyTorch's do, a synchronisation on a GPU) and are built from a stable
//! sort, so their kernels and devices come from existing ops. Gradients
//! flow through `index_select` either way.

use crate::{DType, Tensor};

impl Tensor {
    /// The flat positions of the nonzero elements, in order, as a 1-D
    /// int64 tensor (the indices `nonzero` turns into coordinates).
    pub(super) fn nonzero_flat(&self) -> Tensor {
        if let Some(s) = self.read().nonzero(self.layout(), &[self.numel()]) {
            crate::trace::host_read("nonzero"); // the count, as the sort path's `item`
            let count = s.len();
            return Tensor::from_storage(s, &[count]);
        }
        let mask = self.flatten_all().ne_scalar(0.0).to_dtype(DType::I64);
        let count = mask.sum().item::<i64>() as usize;
        // A stable descending sort puts the ones first, in their order.
        mask.argsort(0, true).narrow(0, 0, count)
    }

    /// The coordinates of the nonzero elements, one row each in row-major
    /// order (`torch.nonzero`): int64 `[count, ndim]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 2.0, 3.0, 0.0], &[2, 2]);
    /// assert_eq!(x.nonzero().to_vec::<i64>(), vec![0, 1, 1, 0]);
    /// assert_eq!(x.nonzero().shape(), &[2, 2]);
    /// ```
    pub fn nonzero(&self) -> Tensor {
        if self.ndim() > 0
            && let Some(s) = self.read().nonzero(self.layout(), self.shape())
        {
            crate::trace::host_read("nonzero");
            let count = s.len() / self.ndim();
            return Tensor::from_storage(s, &[count, self.ndim()]);
        }
        let flat = self.nonzero_flat();
        let count = flat.numel();
        if self.ndim() == 0 {
            return Tensor::zeros_on(&[count, 0], DType::I64, self.device());
        }
        // Coordinate k is floor(i / stride_k) mod size_k, computed in f64:
        // exact below 2^53 elements.
        let i = flat.to_dtype(DType::F64);
        let mut stride = 1usize;
        let mut coords = Vec::with_capacity(self.ndim());
        for &size in self.shape().iter().rev() {
            let q = (&i / stride as f64).floor();
            let c = &q - &(&(&q / size as f64).floor() * size as f64);
            coords.push(c.to_dtype(DType::I64));
            stride *= size;
        }
        coords.reverse();
        let refs: Vec<&Tensor> = coords.iter().collect();
        Tensor::stack(&refs, 1)
    }

    /// The elements where `mask` (broadcast with this tensor) is true, as
    /// a 1-D tensor (`torch.masked_select`); the gradient flows back to
    /// those elements.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let keep = Tensor::from_vec(vec![true, false], &[2]);
    /// assert_eq!(x.masked_select(&keep).to_vec::<f32>(), vec![1.0, 3.0]);
    /// ```
    pub fn masked_select(&self, mask: &Tensor) -> Tensor {
        assert!(
            mask.dtype() == DType::Bool,
            "masked_select: mask must be bool, got {}",
            mask.dtype()
        );
        let shape = super::broadcast_shapes(self.shape(), mask.shape(), "masked_select");
        let values = self.expand(&shape).reshape(&[-1]);
        let picked = mask.expand(&shape).nonzero_flat();
        values.index_select(0, &picked)
    }
}
