//! Value tests and boolean reductions: `isnan`, `isinf`, `isposinf`,
//! `isneginf`, `isfinite`, `isclose`, `any` and `all` (whole tensor or
//! along a dim), composed from comparisons and sums; all give bool tensors,
//! as PyTorch's (`&`, `|`, `^` and `!` are in `bitwise.rs`).

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

    /// Where the elements are +inf (`torch.isposinf`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NEG_INFINITY, f32::INFINITY, 1.0], &[3]);
    /// assert_eq!(x.isposinf().to_vec::<bool>(), vec![false, true, false]);
    /// ```
    pub fn isposinf(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.ne(self);
        }
        self.eq_scalar(f64::INFINITY)
    }

    /// Where the elements are -inf (`torch.isneginf`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NEG_INFINITY, f32::INFINITY, 1.0], &[3]);
    /// assert_eq!(x.isneginf().to_vec::<bool>(), vec![true, false, false]);
    /// ```
    pub fn isneginf(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.ne(self);
        }
        self.eq_scalar(f64::NEG_INFINITY)
    }

    /// Where `self` and `other` (broadcast together) are close
    /// (`torch.isclose`): equal, or finitely apart by at most
    /// `atol + rtol * |other|`; infinities are close only to themselves and
    /// NaN to NaN only with `equal_nan`. PyTorch's defaults are `rtol` 1e-5
    /// and `atol` 1e-8. The dtypes must match, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, f32::INFINITY, f32::NAN, 1.0], &[4]);
    /// let b = Tensor::from_vec(vec![1.000001f32, f32::INFINITY, f32::NAN, 1.1], &[4]);
    /// assert_eq!(a.isclose(&b, 1e-5, 1e-8, false).to_vec::<bool>(), vec![true, true, false, false]);
    /// assert_eq!(a.isclose(&b, 1e-5, 1e-8, true).to_vec::<bool>(), vec![true, true, true, false]);
    /// ```
    #[track_caller]
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        assert!(
            self.dtype() == other.dtype(),
            "isclose: the tensors have different dtypes ({} and {}); cast one to the other's first",
            self.dtype(),
            other.dtype()
        );
        assert!(
            rtol >= 0.0 && atol >= 0.0,
            "isclose: rtol ({rtol}) and atol ({atol}) must not be negative"
        );
        let mut close = self.eq(other);
        if equal_nan {
            close = close.logical_or(&self.isnan().logical_and(&other.isnan()));
        }
        if rtol == 0.0 && atol == 0.0 {
            return close;
        }
        let float = self.dtype().to_float();
        let (a, b) = (self.to_dtype(float), other.to_dtype(float));
        let error = (&a - &b).abs();
        let allowed = &(&b.abs() * rtol) + atol;
        // A finite error only: inf - inf is NaN and inf - x is inf.
        close.logical_or(&error.isfinite().logical_and(&error.le(&allowed)))
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
