//! The extremes: max/min over a dim with the index of the first (their
//! gradient routed through it), amax/amin (shared between ties), the
//! whole tensor's max and min, `aminmax`, argmax and argmin.

use super::reduce::dim_attrs;
use crate::Tensor;
use crate::trace;

impl Tensor {
    fn extreme_dim(&self, dim: isize, keepdim: bool, max: bool) -> (Tensor, Tensor) {
        let op = if max { "max" } else { "min" };
        self.nonempty_dim(dim, op);
        let d = self.dim(dim, op);
        let d = if self.ndim() == 0 { 0 } else { d };
        let src = if self.ndim() == 0 {
            self.reshape(&[1])
        } else {
            self.clone()
        };
        let (vals, idx) = src.read().extreme(src.layout(), d, max);
        let shape = src.reduced_shape(&[d], keepdim);
        let indices = Tensor::from_storage(idx, &shape);
        let out = Tensor::from_storage(vals, &shape);
        let in_shape = src.shape().to_vec();
        let keep: Vec<isize> = src
            .reduced_shape(&[d], true)
            .iter()
            .map(|&x| x as isize)
            .collect();
        let idx_saved = indices.saved();
        let name = if max { "MaxBackward0" } else { "MinBackward0" };
        let out = Tensor::record(out, name, &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                let z = super::creation::filled_on(&in_shape, 0.0, g.dtype(), g.device());
                let gi = z.scatter_add(d as isize, &idx_saved.reshape(&keep), &g.reshape(&keep));
                vec![Some(gi)]
            }
        });
        (out, indices)
    }

    /// `max_dim(dim, true)`'s values (`min_dim`'s unless `max`), by the
    /// device's values-only kernel where it has one (no index to track:
    /// about half the work).
    fn extreme_values_keepdim(&self, dim: isize, max: bool) -> Tensor {
        let d = self.dim(dim, if max { "amax" } else { "amin" });
        if self.ndim() > 0
            && self.shape()[d] > 0
            && let Some(v) = self.read().extreme_values(self.layout(), d, max)
        {
            return Tensor::from_storage(v, &self.reduced_shape(&[d], true));
        }
        let (v, _) = if max {
            self.max_dim(dim, true)
        } else {
            self.min_dim(dim, true)
        };
        v.detach()
    }

    /// Max over `dim`: values and the index of the first maximum (`torch.max(x, dim)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[2, 2]);
    /// let (v, i) = x.max_dim(1, false);
    /// assert_eq!(v.to_vec::<f32>(), vec![5.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>(), vec![1, 0]);
    /// ```
    pub fn max_dim(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        trace::op(
            "max_dim",
            [self],
            || dim_attrs(dim, keepdim),
            || self.extreme_dim(dim, keepdim, true),
        )
    }

    /// Minimum over `dim` and the index of its first occurrence.
    pub fn min_dim(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        trace::op(
            "min_dim",
            [self],
            || dim_attrs(dim, keepdim),
            || self.extreme_dim(dim, keepdim, false),
        )
    }

    /// Max over `dim` (`torch.amax`), the gradient shared evenly between
    /// ties (where `max_dim` gives it all to the first).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[2, 2]);
    /// assert_eq!(x.amax_dim(1, false).to_vec::<f32>(), vec![5.0, 3.0]);
    /// ```
    pub fn amax_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "amax_dim",
            [self],
            || dim_attrs(dim, keepdim),
            || self.extreme_dim_shared(dim, keepdim, true),
        )
    }

    /// Min over `dim` (`torch.amin`), the gradient shared evenly between
    /// ties; NaN wins, as in [`Tensor::amax_dim`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[2, 2]);
    /// assert_eq!(x.amin_dim(0, true).to_vec::<f32>(), vec![1.0, 2.0]);
    /// ```
    pub fn amin_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "amin_dim",
            [self],
            || dim_attrs(dim, keepdim),
            || self.extreme_dim_shared(dim, keepdim, false),
        )
    }

    /// [`Tensor::amax_dim`] (`max`) or [`Tensor::amin_dim`].
    fn extreme_dim_shared(&self, dim: isize, keepdim: bool, max: bool) -> Tensor {
        self.nonempty_dim(dim, if max { "amax" } else { "amin" });
        let m = self.extreme_values_keepdim(dim, max);
        let out = if keepdim {
            m.detach()
        } else {
            m.squeeze_dim(dim)
        };
        // The backward is its own node, not the gradient of a weighted
        // sum: `x * 0` at an infinite element would be NaN.
        let d = if dim < 0 {
            dim + self.ndim().max(1) as isize
        } else {
            dim
        };
        let name = if max {
            "AmaxBackward0"
        } else {
            "AminBackward0"
        };
        Tensor::record(out, name, &[self], || {
            let mask = self.eq(&m).to_dtype(self.dtype().to_float());
            let share = (&mask / &mask.sum_dim(d, true)).detach();
            move |g: &Tensor, n: &[bool]| {
                let g = if keepdim { g.clone() } else { g.unsqueeze(d) };
                vec![n[0].then(|| &g * &share)]
            }
        })
    }

    /// Max of all elements; the gradient is shared evenly between ties.
    #[doc(alias = "amax")]
    #[track_caller]
    pub fn max(&self) -> Tensor {
        assert!(
            self.numel() > 0,
            "max: the tensor of shape {:?} is empty, so it has no largest element",
            self.shape()
        );
        trace::op("max", [self], Vec::new, || {
            if !self.dtype().is_float() {
                // No gradient to share: the element itself, in its own dtype.
                return self.flatten_all().max_dim(0, false).0;
            }
            self.flatten_all().amax_dim(0, false)
        })
    }

    /// The smallest element.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![9u8, 0, 200], &[3]);
    /// assert_eq!((x.min().item::<u8>(), x.max().item::<u8>()), (0, 200));
    /// ```
    #[doc(alias = "amin")]
    #[track_caller]
    pub fn min(&self) -> Tensor {
        assert!(
            self.numel() > 0,
            "min: the tensor of shape {:?} is empty, so it has no smallest element",
            self.shape()
        );
        trace::op("min", [self], Vec::new, || {
            if !self.dtype().is_float() {
                // Negating would wrap unsigned values around.
                return self.flatten_all().min_dim(0, false).0;
            }
            self.neg().max().neg()
        })
    }

    /// Index of the first maximum along `dim`.
    pub fn argmax(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "argmax",
            [self],
            || dim_attrs(dim, keepdim),
            || self.max_dim(dim, keepdim).1,
        )
    }

    /// Index of the first minimum along `dim`.
    pub fn argmin(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "argmin",
            [self],
            || dim_attrs(dim, keepdim),
            || self.min_dim(dim, keepdim).1,
        )
    }

    /// Index of the max of the flattened tensor.
    pub fn argmax_all(&self) -> Tensor {
        trace::op("argmax_all", [self], Vec::new, || {
            self.flatten_all().max_dim(0, false).1
        })
    }

    /// The smallest and the largest element in one call (`torch.aminmax`),
    /// each gradient shared evenly between ties, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 5, 2], &[3]);
    /// let (lo, hi) = x.aminmax();
    /// assert_eq!((lo.item::<i64>(), hi.item::<i64>()), (1, 5));
    /// ```
    #[track_caller]
    pub fn aminmax(&self) -> (Tensor, Tensor) {
        assert!(
            self.numel() > 0,
            "aminmax: the tensor of shape {:?} is empty, so it has no smallest or largest element",
            self.shape()
        );
        (self.min(), self.max())
    }

    /// [`Tensor::amin_dim`] and [`Tensor::amax_dim`] over `dim` in one call
    /// (`torch.aminmax(x, dim=, keepdim=)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 0.0], &[2, 2]);
    /// let (lo, hi) = x.aminmax_dim(1, false);
    /// assert_eq!((lo.to_vec::<f32>(), hi.to_vec::<f32>()), (vec![1.0, 0.0], vec![3.0, 2.0]));
    /// ```
    #[track_caller]
    pub fn aminmax_dim(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        self.nonempty_dim(dim, "aminmax");
        (self.amin_dim(dim, keepdim), self.amax_dim(dim, keepdim))
    }
}
