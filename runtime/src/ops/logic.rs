//! Value tests and boolean reductions: `isnan`, `isinf`, `isfinite`,
//! `any` and `all` (whole tensor or along a dim), composed from
//! comparisons and sums; all give bool tensors, as PyTorch's.

use crate::{DType, Tensor};

impl Tensor {
    /// Where the elements are NaN (`torch.isnan`; never for integers).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, f32::NAN], &[2]);
    /// assert_eq!(x.isnan().to_vec::<bool>(), vec![false, true]);
    /// ```
    pub fn isnan(&self) -> Tensor {
        self.ne(self)
    }

    /// Where the elements are +inf or -inf (`torch.isinf`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NEG_INFINITY, 1.0, f32::NAN], &[3]);
    /// assert_eq!(x.isinf().to_vec::<bool>(), vec![true, false, false]);
    /// ```
    pub fn isinf(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.ne(self);
        }
        self.abs().eq_scalar(f64::INFINITY)
    }

    /// Where the elements are neither NaN nor infinite (`torch.isfinite`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![f32::INFINITY, 1.0, f32::NAN], &[3]);
    /// assert_eq!(x.isfinite().to_vec::<bool>(), vec![false, true, false]);
    /// ```
    pub fn isfinite(&self) -> Tensor {
        // `|x| < inf` is false for NaN and for both infinities.
        if !self.dtype().is_float() {
            return self.eq(self);
        }
        self.abs().lt_scalar(f64::INFINITY)
    }

    /// Whether any element is nonzero, as a 0-d bool tensor (`torch.any`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert!(Tensor::from_vec(vec![0.0f32, 2.0], &[2]).any().item::<bool>());
    /// ```
    pub fn any(&self) -> Tensor {
        self.nonzero_count(None, false).gt_scalar(0.0)
    }

    /// Whether every element is nonzero, as a 0-d bool tensor (`torch.all`;
    /// true for an empty tensor).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert!(!Tensor::from_vec(vec![0.0f32, 2.0], &[2]).all().item::<bool>());
    /// ```
    pub fn all(&self) -> Tensor {
        self.eq_scalar(0.0).any().logical_not()
    }

    /// [`Tensor::any`] along `dim`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0i64, 0, 1, 0], &[2, 2]);
    /// assert_eq!(x.any_dim(1, false).to_vec::<bool>(), vec![false, true]);
    /// ```
    pub fn any_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        self.nonzero_count(Some(dim), keepdim).gt_scalar(0.0)
    }

    /// [`Tensor::all`] along `dim`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 1, 0], &[2, 2]);
    /// assert_eq!(x.all_dim(1, false).to_vec::<bool>(), vec![true, false]);
    /// ```
    pub fn all_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        self.eq_scalar(0.0).any_dim(dim, keepdim).logical_not()
    }

    /// How many elements are nonzero, overall or along `dim`, as int64.
    fn nonzero_count(&self, dim: Option<isize>, keepdim: bool) -> Tensor {
        let ones = self.ne_scalar(0.0).to_dtype(DType::I64);
        match dim {
            None => ones.sum(),
            Some(d) => ones.sum_dim(d, keepdim),
        }
    }
}
