//! Small fused-in-PyTorch formulas as compositions (`lerp`, `addcmul`,
//! `addcdiv`, `addmm`, `baddbmm`, `addmv`, `addr`, `addbmm`, `cross`,
//! `inner`, `sinc`, `deg2rad`, `rad2deg`, `logical_xor`), and the
//! counting ops `bincount`, `histc` and `unique`, which read their sizes
//! on the host as PyTorch's do.

use crate::trace;
use crate::{DType, Tensor};

impl Tensor {
    /// `self + weight * (end - self)`, broadcast (`torch.lerp` with a
    /// tensor weight; a scalar weight is a 0-d tensor). As PyTorch's, a
    /// weight of magnitude 0.5 or more steps back from the end instead,
    /// `end + (weight - 1) * (end - self)`, so a weight of 1 gives `end`
    /// exactly.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let (a, b) = (Tensor::zeros(&[2]), Tensor::full(&[2], 10.0));
    /// assert_eq!(a.lerp(&b, &Tensor::scalar(0.25f32)).to_vec::<f32>(), vec![2.5, 2.5]);
    /// let far = Tensor::full(&[1], 1e20);
    /// assert_eq!(far.lerp(&Tensor::ones(&[1]), &Tensor::scalar(1.0f32)).item::<f32>(), 1.0);
    /// ```
    pub fn lerp(&self, end: &Tensor, weight: &Tensor) -> Tensor {
        // PyTorch's `base + coeff * (end - self)`, which also keeps the
        // sign of a zero `end` at weight 1 (less its fused multiply-add).
        let small = weight.abs().lt_scalar(0.5);
        let coeff = Tensor::where_(&small, weight, &(weight - 1.0));
        let base = Tensor::where_(&small, self, end);
        &base + &(&coeff * &(end - self))
    }

    /// `self + value * t1 * t2`, broadcast (`torch.addcmul`).
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: f64) -> Tensor {
        self + &(&(t1 * t2) * value)
    }

    /// `self + value * t1 / t2`, broadcast (`torch.addcdiv`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::ones(&[2]).addcdiv(&Tensor::full(&[2], 3.0), &Tensor::full(&[2], 2.0), 0.5);
    /// assert_eq!(y.to_vec::<f32>(), vec![1.75, 1.75]);
    /// ```
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: f64) -> Tensor {
        self + &(&(t1 / t2) * value)
    }

    /// `beta * self + alpha * (mat1 @ mat2)` (`torch.addmm`); `self`
    /// broadcasts to the product's shape. With `beta` 0, `self` is not
    /// read (its NaN do not propagate), as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::ones(&[2]).addmm(&Tensor::ones(&[2, 3]), &Tensor::ones(&[3, 2]), 1.0, 2.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![7.0; 4]);
    /// ```
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        add_scaled(self, &mat1.mm(mat2), beta, alpha)
    }

    /// `beta * self + alpha * (batch1 @ batch2)` over batches of matrices
    /// (`torch.baddbmm`).
    pub fn baddbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        add_scaled(self, &batch1.bmm(batch2), beta, alpha)
    }

    /// `beta * self + alpha * (mat @ vec)` (`torch.addmv`); `self`
    /// broadcasts to the product's length, and is not read with `beta` 0.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::ones(&[2]).addmv(&Tensor::ones(&[2, 3]), &Tensor::ones(&[3]), 0.5, 2.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![6.5, 6.5]);
    /// ```
    pub fn addmv(&self, mat: &Tensor, vec: &Tensor, beta: f64, alpha: f64) -> Tensor {
        add_scaled(self, &mat.mv(vec), beta, alpha)
    }

    /// `beta * self + alpha * outer(vec1, vec2)` (`torch.addr`); `self`
    /// broadcasts to the outer product's shape, and is not read with
    /// `beta` 0.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let (u, v) = (Tensor::from_vec(vec![1.0f32, 2.0], &[2]), Tensor::from_vec(vec![3.0f32], &[1]));
    /// assert_eq!(Tensor::zeros(&[2, 1]).addr(&u, &v, 1.0, 1.0).to_vec::<f32>(), vec![3.0, 6.0]);
    /// ```
    pub fn addr(&self, vec1: &Tensor, vec2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        add_scaled(self, &vec1.outer(vec2), beta, alpha)
    }

    /// `beta * self + alpha * Σᵢ batch1[i] @ batch2[i]` (`torch.addbmm`):
    /// the batch of products summed into one matrix.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let b = Tensor::ones(&[4, 2, 3]);
    /// let y = Tensor::zeros(&[2, 2]).addbmm(&b, &Tensor::ones(&[4, 3, 2]), 0.0, 1.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![12.0; 4]);
    /// ```
    pub fn addbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        add_scaled(self, &batch1.bmm(batch2).sum_dim(0, false), beta, alpha)
    }

    /// The cross product of 3-vectors along `dim` (`torch.linalg.cross`,
    /// default `dim = -1`), broadcast.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 0.0], &[3]);
    /// let y = Tensor::from_vec(vec![0.0f32, 1.0, 0.0], &[3]);
    /// assert_eq!(x.cross(&y, -1).to_vec::<f32>(), vec![0.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn cross(&self, other: &Tensor, dim: isize) -> Tensor {
        let (d, e) = (self.dim(dim, "cross"), other.dim(dim, "cross"));
        assert!(
            self.shape()[d] == 3 && other.shape()[e] == 3,
            "cross: dim {dim} must have size 3 in both {:?} and {:?}",
            self.shape(),
            other.shape()
        );
        let at = |t: &Tensor, i: usize| t.narrow(dim, i, 1);
        let part =
            |i: usize, j: usize| &(&at(self, i) * &at(other, j)) - &(&at(self, j) * &at(other, i));
        Tensor::cat(&[&part(1, 2), &part(2, 0), &part(0, 1)], dim)
    }

    /// The sum of products over the last dims (`torch.inner`): `[.., k]`
    /// and `[.., k]` give `self`'s leading dims, then `other`'s.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::ones(&[2, 3]);
    /// assert_eq!(a.inner(&Tensor::ones(&[4, 3])).shape(), &[2, 4]);
    /// ```
    #[track_caller]
    pub fn inner(&self, other: &Tensor) -> Tensor {
        if self.ndim() == 0 || other.ndim() == 0 {
            return self * other;
        }
        self.tensordot(other, &[-1], &[-1])
    }

    /// `sin(πx) / (πx)`, 1 at 0 (`torch.sinc`). The gradient is PyTorch's
    /// `(πx cos πx - sin πx) / (πx²)`, 0 where `πx²` is 0: the derivative of
    /// the quotient, `π (cos πx / πx - sin πx / (πx)²)`, is two large terms
    /// that cancel near 0 (it gave ∓inf at ±1e-30 in f32).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.0f32, 0.5, 1.0], &[3]).sinc().to_vec::<f32>();
    /// assert_eq!(y[0], 1.0);
    /// assert!((y[1] - 2.0 / std::f32::consts::PI).abs() < 1e-6 && y[2].abs() < 1e-6);
    /// ```
    pub fn sinc(&self) -> Tensor {
        trace::op("sinc", [self], Vec::new, || {
            let x = self.detach();
            let zero = x.eq_scalar(0.0);
            let one = super::binary::scalar_for(&x, 1.0);
            let px = &Tensor::where_(&zero, &one, &x) * std::f64::consts::PI;
            let out = Tensor::where_(&zero, &one, &(&px.sin() / &px));
            Tensor::record(out, "SincBackward0", &[self], || {
                let x = self.saved();
                move |g: &Tensor, _: &[bool]| {
                    let px = &x * std::f64::consts::PI;
                    let px2 = &px * &x;
                    let slope = &(&(&px * &px.cos()) - &px.sin()) / &px2;
                    let zero = super::binary::scalar_for(&slope, 0.0);
                    let slope = Tensor::where_(&px2.eq_scalar(0.0), &zero, &slope);
                    vec![Some((g * &slope).to_dtype(g.dtype()))]
                }
            })
        })
    }

    /// Degrees to radians (`torch.deg2rad`).
    pub fn deg2rad(&self) -> Tensor {
        self * (std::f64::consts::PI / 180.0)
    }

    /// Radians to degrees (`torch.rad2deg`).
    pub fn rad2deg(&self) -> Tensor {
        self * (180.0 / std::f64::consts::PI)
    }

    /// Whether exactly one of the two is nonzero, broadcast
    /// (`torch.logical_xor`).
    pub fn logical_xor(&self, other: &Tensor) -> Tensor {
        self.ne_scalar(0.0).ne(&other.ne_scalar(0.0))
    }

    /// How often each value `0..` occurs in a 1-D non-negative int64
    /// tensor, or the sum of `weights` at them (`torch.bincount`); at least
    /// `minlength` bins. int64 counts, or the weights' dtype.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 3, 1, 0], &[4]);
    /// assert_eq!(x.bincount(None, 0).to_vec::<i64>(), vec![1, 2, 0, 1]);
    /// ```
    #[track_caller]
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: usize) -> Tensor {
        assert!(
            self.ndim() == 1 && self.dtype() == DType::I64,
            "bincount: expects a 1-D int64 tensor, got {} of shape {:?}",
            self.dtype(),
            self.shape()
        );
        assert!(
            weights.is_none_or(|w| w.shape() == self.shape()),
            "bincount: weights of shape {:?} must match the input's {:?}",
            weights.map(Tensor::shape),
            self.shape()
        );
        let values = self.to_vec::<i64>();
        assert!(
            values.iter().all(|&v| v >= 0),
            "bincount: the input must be non-negative"
        );
        let bins = values
            .iter()
            .map(|&v| v as usize + 1)
            .max()
            .unwrap_or(0)
            .max(minlength);
        // Counts are summed in f64 (exact below 2^53; scatter_add is for
        // floats), then made int64.
        let src = match weights {
            Some(w) => w.clone(),
            None => Tensor::ones_on(self.shape(), DType::F64, self.device()),
        };
        let sums = Tensor::zeros_on(&[bins], src.dtype(), self.device()).scatter_add(0, self, &src);
        if weights.is_some() {
            sums
        } else {
            sums.to_dtype(DType::I64)
        }
    }

    /// A histogram of `bins` equal bins over `[min, max]` (the data's own
    /// range when both are 0), elements outside ignored, the last bin
    /// closed (`torch.histc`); in the input's dtype.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 1.0, 4.0], &[4]);
    /// assert_eq!(x.histc(4, 0.0, 3.0).to_vec::<f32>(), vec![0.0, 2.0, 1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn histc(&self, bins: usize, min: f64, max: f64) -> Tensor {
        assert!(
            bins > 0 && self.dtype().is_float() && min <= max,
            "histc: needs bins > 0, min <= max and a float input, got {bins}, [{min}, {max}] and {}",
            self.dtype()
        );
        let flat = self.reshape(&[-1]);
        let (mut lo, mut hi) = (min, max);
        if lo == hi && flat.numel() > 0 {
            lo = flat.min().item::<f64>();
            hi = flat.max().item::<f64>();
        }
        if lo == hi {
            (lo, hi) = (lo - 1.0, hi + 1.0);
        }
        let inside = flat.ge_scalar(lo).logical_and(&flat.le_scalar(hi));
        let kept = flat.masked_select(&inside).to_dtype(DType::F64);
        let at = (&(&kept - lo) * (bins as f64 / (hi - lo)))
            .floor()
            .clamp(0.0, (bins - 1) as f64)
            .to_dtype(DType::I64);
        let ones = Tensor::ones_like(&at).to_dtype(self.dtype());
        Tensor::zeros_on(&[bins], self.dtype(), self.device()).scatter_add(0, &at, &ones)
    }

    /// The distinct elements, sorted, with the index of each element's
    /// value among them (`return_inverse`, the input's shape) and each
    /// value's count (`torch.unique(sorted=True, return_inverse=True,
    /// return_counts=True)`, flattened).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 3, 2], &[2, 2]);
    /// let (values, inverse, counts) = x.unique();
    /// assert_eq!(values.to_vec::<i64>(), vec![1, 2, 3]);
    /// assert_eq!(inverse.to_vec::<i64>(), vec![2, 0, 2, 1]);
    /// assert_eq!(counts.to_vec::<i64>(), vec![1, 1, 2]);
    /// ```
    pub fn unique(&self) -> (Tensor, Tensor, Tensor) {
        let flat = self.detach().reshape(&[-1]);
        let n = flat.numel();
        if n == 0 {
            let inverse = Tensor::zeros_on(self.shape(), DType::I64, self.device());
            return (
                flat,
                inverse,
                Tensor::zeros_on(&[0], DType::I64, self.device()),
            );
        }
        let (sorted, order) = flat.sort(0, false);
        // A new value starts where the sorted run changes.
        let changes = sorted.diff(1, 0).ne_scalar(0.0);
        let first = Tensor::ones_on(&[1], DType::Bool, self.device());
        let starts = Tensor::cat(&[&first, &changes], 0);
        let values = sorted.masked_select(&starts);
        let group = &starts.to_dtype(DType::I64).cumsum(0) - 1.0;
        let inverse = Tensor::zeros_on(&[n], DType::F64, self.device())
            .scatter_add(0, &order, &group.to_dtype(DType::F64))
            .to_dtype(DType::I64);
        let counts = group.bincount(None, values.numel());
        let shape: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        (values, inverse.reshape(&shape), counts)
    }
}

/// `beta * input + alpha * product`, `input` unread when `beta` is 0.
fn add_scaled(input: &Tensor, product: &Tensor, beta: f64, alpha: f64) -> Tensor {
    let scaled = if alpha == 1.0 {
        product.clone()
    } else {
        product * alpha
    };
    if beta == 0.0 {
        return scaled;
    }
    let base = if beta == 1.0 {
        input.clone()
    } else {
        input * beta
    };
    &base + &scaled
}
