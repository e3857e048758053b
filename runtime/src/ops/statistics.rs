//! Order statistics, scans and distances composed of `sort`, comparisons,
//! reductions and `matmul` (so autograd, compile and both devices come
//! from those): `kthvalue`, `median`, `quantile`, `nanmean`, `nansum`,
//! `cumprod`, `cummax`, `cummin`, `logcumsumexp`, `logaddexp`, `xlogy`, `cov`, `corrcoef`,
//! `cdist`, `isin`, `bucketize`, `searchsorted` and `trapezoid`.

use crate::trace;
use crate::{DType, Tensor};

impl Tensor {
    /// The `k`-th smallest value along `dim` (1-based) and its index
    /// (`torch.kthvalue`); ties give the first of the equal elements.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![5.0f32, 1.0, 4.0, 2.0], &[4]);
    /// let (v, i) = x.kthvalue(2, 0, false);
    /// assert_eq!((v.item::<f32>(), i.item::<i64>()), (2.0, 3));
    /// ```
    #[track_caller]
    pub fn kthvalue(&self, k: usize, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        let d = self.dim(dim, "kthvalue");
        let n = self.shape().get(d).copied().unwrap_or(1);
        assert!(
            (1..=n).contains(&k),
            "kthvalue: k = {k} is out of range for dim {d} of shape {:?}",
            self.shape()
        );
        let (values, indices) = self.sort(d as isize, false);
        let pick = |t: Tensor| {
            let t = t.narrow(d as isize, k - 1, 1);
            if keepdim {
                t
            } else {
                t.squeeze_dim(d as isize)
            }
        };
        (pick(values), pick(indices))
    }

    /// The lower median along `dim` and its index (`torch.median(x, dim)`):
    /// of an even count, the smaller of the middle two. A slice holding NaN
    /// has NaN as its median, at the first NaN's index, as PyTorch's
    /// ([`Tensor::nanmedian_dim`] skips them).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![4.0f32, 1.0, 3.0, 2.0, 5.0, f32::NAN, 1.0, f32::NAN], &[2, 4]);
    /// let (values, indices) = x.median_dim(1, false);
    /// assert_eq!(values.to_vec::<f32>()[0], 2.0);
    /// assert!(values.to_vec::<f32>()[1].is_nan());
    /// assert_eq!(indices.to_vec::<i64>(), vec![3, 1]);
    /// assert!(x.median().item::<f32>().is_nan());
    /// ```
    #[track_caller]
    pub fn median_dim(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        self.nonempty_dim(dim, "median");
        let d = self.dim(dim, "median");
        let n = self.shape().get(d).copied().unwrap_or(1);
        let (values, indices) = self.kthvalue(n.saturating_sub(1) / 2 + 1, dim, keepdim);
        if !self.dtype().is_float() || self.ndim() == 0 {
            return (values, indices);
        }
        // kthvalue sorts NaN last; PyTorch's median takes the first NaN.
        // Selected on the device (no host read), so compile sees no break.
        let first_nan = self.isnan().to_dtype(DType::U8).argmax(d as isize, true);
        let at_nan = self.gather(d as isize, &first_nan);
        let (at_nan, first_nan) = match keepdim {
            true => (at_nan, first_nan),
            false => (
                at_nan.squeeze_dim(d as isize),
                first_nan.squeeze_dim(d as isize),
            ),
        };
        // The first NaN's place holds NaN exactly where a slice has one
        // (argmax gives 0 for a slice without).
        let has_nan = at_nan.isnan();
        (
            Tensor::where_(&has_nan, &at_nan, &values),
            Tensor::where_(&has_nan, &first_nan, &indices),
        )
    }

    /// The lower median of every element (`torch.median(x)`).
    #[track_caller]
    pub fn median(&self) -> Tensor {
        self.reshape(&[-1]).median_dim(0, false).0
    }

    /// The lower median along `dim` of the values that are not NaN, and
    /// its index (`torch.nanmedian(x, dim)`); NaN where a slice holds
    /// nothing else.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![4.0f32, f32::NAN, 1.0, f32::NAN, f32::NAN, f32::NAN], &[2, 3]);
    /// let (values, indices) = x.nanmedian_dim(1, false);
    /// assert_eq!(values.to_vec::<f32>()[0], 1.0);
    /// assert!(values.to_vec::<f32>()[1].is_nan());
    /// assert_eq!(indices.to_vec::<i64>()[0], 2);
    /// ```
    #[track_caller]
    pub fn nanmedian_dim(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        let d = self.dim(dim, "nanmedian") as isize;
        if self.ndim() == 0 {
            return (self.clone(), Tensor::scalar(0i64));
        }
        // NaN sorts last, so the numbers of a slice come first, in order.
        let (sorted, order) = self.sort(d, false);
        let numbers = self.isnan().logical_not().to_dtype(DType::F64);
        let count = numbers.sum_dims(&[d], true);
        let lower_middle = (&(&count - 1.0).clamp_min(0.0) * 0.5)
            .floor()
            .to_dtype(DType::I64);
        let (values, indices) = (
            sorted.gather(d, &lower_middle),
            order.gather(d, &lower_middle),
        );
        match keepdim {
            true => (values, indices),
            false => (values.squeeze_dim(d), indices.squeeze_dim(d)),
        }
    }

    /// The lower median of every element that is not NaN
    /// (`torch.nanmedian(x)`).
    #[track_caller]
    pub fn nanmedian(&self) -> Tensor {
        self.reshape(&[-1]).nanmedian_dim(0, false).0
    }

    /// The `q`-quantile along `dim` (over every element for `None`) by
    /// linear interpolation between the two nearest ranks
    /// (`torch.quantile`, `interpolation="linear"`); NaN where the slice
    /// holds a NaN.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
    /// assert_eq!(x.quantile(0.5, None, false).item::<f32>(), 2.5);
    /// assert_eq!(x.quantile(0.25, Some(0), true).to_vec::<f32>(), vec![1.75]);
    /// ```
    #[track_caller]
    pub fn quantile(&self, q: f64, dim: Option<isize>, keepdim: bool) -> Tensor {
        self.quantile_of("quantile", q, dim, keepdim)
    }

    /// [`Tensor::quantile`] of the elements that are not NaN
    /// (`torch.nanquantile`): NaN only where a slice is all NaN.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![4.0f32, f32::NAN, 1.0, 2.0], &[4]);
    /// assert_eq!(x.nanquantile(0.5, None, false).item::<f32>(), 2.0);
    /// assert!(x.quantile(0.5, None, false).item::<f32>().is_nan());
    /// ```
    #[track_caller]
    pub fn nanquantile(&self, q: f64, dim: Option<isize>, keepdim: bool) -> Tensor {
        self.quantile_of("nanquantile", q, dim, keepdim)
    }

    /// Both quantiles: the ranks of `quantile` count every element, those of
    /// `nanquantile` the slice's numbers (NaN sorts last, so they come first).
    #[track_caller]
    fn quantile_of(&self, op: &str, q: f64, dim: Option<isize>, keepdim: bool) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&q) && self.dtype().is_float(),
            "{op}: q = {q} must be in [0, 1] and the input a float tensor, got {}",
            self.dtype()
        );
        let (x, d) = match dim {
            Some(d) => (self.clone(), self.dim(d, op) as isize),
            None => (self.reshape(&[-1]), 0),
        };
        let n = x.shape()[d as usize];
        assert!(n > 0, "{op}: input of shape {:?} is empty", self.shape());
        let (sorted, _) = x.sort(d, false);
        let nan = super::binary::scalar_for(&sorted, f64::NAN);
        let y = if op == "quantile" {
            let rank = q * (n - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            let (a, b) = (sorted.narrow(d, lo, 1), sorted.narrow(d, hi, 1));
            let y = &a + &(&(&b - &a) * (rank - lo as f64));
            Tensor::where_(&sorted.narrow(d, n - 1, 1).isnan(), &nan, &y)
        } else {
            let numbers = sorted.isnan().logical_not().to_dtype(sorted.dtype());
            let count = numbers.sum_dim(d, true);
            let rank = &(&count - 1.0) * q;
            let below = rank.floor().clamp_min(0.0);
            let above = rank.ceil().clamp_min(0.0);
            let a = sorted.gather(d, &below.to_dtype(DType::I64));
            let b = sorted.gather(d, &above.to_dtype(DType::I64));
            let y = &a + &(&(&b - &a) * &(&rank - &below));
            Tensor::where_(&count.eq_scalar(0.0), &nan, &y)
        };
        match (dim, keepdim) {
            (Some(_), true) => y,
            (Some(_), false) => y.squeeze_dim(d),
            (None, true) => y.reshape(&vec![1isize; self.ndim()]),
            (None, false) => y.reshape(&[]),
        }
    }

    /// The sum over `dims` treating NaN as zero (`torch.nansum`; every dim
    /// for an empty list).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0], &[3]);
    /// assert_eq!(x.nansum(&[], false).item::<f32>(), 4.0);
    /// assert_eq!(x.nanmean(&[0], false).item::<f32>(), 2.0);
    /// ```
    pub fn nansum(&self, dims: &[isize], keepdim: bool) -> Tensor {
        let zero = super::binary::scalar_for(self, 0.0);
        let kept = Tensor::where_(&self.isnan(), &zero, self);
        kept.sum_dims(dims, keepdim)
    }

    /// The mean over `dims` of the elements that are not NaN
    /// (`torch.nanmean`; every dim for an empty list).
    pub fn nanmean(&self, dims: &[isize], keepdim: bool) -> Tensor {
        let count = self.isnan().logical_not().to_dtype(self.dtype());
        &self.nansum(dims, keepdim) / &count.sum_dims(dims, keepdim)
    }

    /// A scan of `combine` along `dim` by doubling: after step `s`, entry
    /// `i` combines entries `i - 2s + 1 ..= i`; `identity` fills before the
    /// start. `log2(n)` passes, each one elementwise op.
    fn doubling_scan(
        &self,
        dim: isize,
        identity: f64,
        combine: impl Fn(&Tensor, &Tensor) -> Tensor,
    ) -> Tensor {
        let d = self.dim(dim, "scan") as isize;
        let n = self.shape().get(d as usize).copied().unwrap_or(1);
        let mut y = self.clone();
        let mut step = 1;
        while step < n {
            let mut pad = vec![0i64; 2 * (self.ndim() - d as usize)];
            let at = pad.len() - 2;
            pad[at] = step as i64;
            pad[at + 1] = -(step as i64);
            let shifted = crate::nn::pad(&y, &pad, identity);
            y = combine(&y, &shifted);
            step *= 2;
        }
        y
    }

    /// The running product along `dim` (`torch.cumprod`); zeros and signs
    /// are exact products, so the gradient is too.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 0.0, 5.0], &[5]);
    /// assert_eq!(x.cumprod(0).to_vec::<f32>(), vec![1.0, 2.0, 6.0, 0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn cumprod(&self, dim: isize) -> Tensor {
        if self.ndim() == 0 {
            return self.clone();
        }
        self.doubling_scan(dim, 1.0, |a, b| a * b)
    }

    /// The running maximum along `dim` and the index it came from
    /// (`torch.cummax`): a tie takes the later index and NaN propagates, as
    /// PyTorch's. The gradient goes to the element each maximum came from.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 3.0], &[4]);
    /// let (v, i) = x.cummax(0);
    /// assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![1.0, 3.0, 3.0, 3.0], vec![0, 1, 1, 3]));
    /// ```
    #[track_caller]
    pub fn cummax(&self, dim: isize) -> (Tensor, Tensor) {
        self.running_extreme(dim, true)
    }

    /// The running minimum along `dim` and its index (`torch.cummin`), as
    /// [`Tensor::cummax`].
    #[track_caller]
    pub fn cummin(&self, dim: isize) -> (Tensor, Tensor) {
        self.running_extreme(dim, false)
    }

    /// [`Tensor::cummax`] (`max`) or [`Tensor::cummin`] by doubling: entry
    /// `i` keeps its own (later) candidate unless an earlier one beats it
    /// strictly, or is NaN while it is not.
    fn running_extreme(&self, dim: isize, max: bool) -> (Tensor, Tensor) {
        if self.ndim() == 0 {
            return (
                self.clone(),
                Tensor::zeros_on(&[], DType::I64, self.device()),
            );
        }
        let d = self.dim(dim, if max { "cummax" } else { "cummin" });
        let n = self.shape()[d];
        let mut shape = vec![1isize; self.ndim()];
        shape[d] = n as isize;
        let positions = Tensor::arange_on(n as i64, self.device())
            .reshape(&shape)
            .expand(self.shape());
        let (mut v, mut at) = (self.clone(), positions.contiguous());
        let mut step = 1;
        while step < n {
            let mut pad = vec![0i64; 2 * (self.ndim() - d)];
            let k = pad.len() - 2;
            (pad[k], pad[k + 1]) = (step as i64, -(step as i64));
            let fill = if max {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
            let (earlier, earlier_at) = (
                crate::nn::pad(&v, &pad, fill),
                crate::nn::pad(&at, &pad, -1.0),
            );
            let beats = if max { earlier.gt(&v) } else { earlier.lt(&v) };
            let nan_first = earlier.isnan().logical_and(&v.isnan().logical_not());
            let take = beats.logical_or(&nan_first);
            v = Tensor::where_(&take, &earlier, &v);
            at = Tensor::where_(&take, &earlier_at, &at);
            step *= 2;
        }
        (v, at)
    }

    /// `log(exp(self) + exp(other))` without overflow, broadcast
    /// (`torch.logaddexp`); two `-∞` give `-∞`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1000.0f32, f32::NEG_INFINITY], &[2]);
    /// let y = a.logaddexp(&Tensor::from_vec(vec![1000.0f32, f32::NEG_INFINITY], &[2]));
    /// assert_eq!(y.to_vec::<f32>(), vec![1000.0 + 2f32.ln(), f32::NEG_INFINITY]);
    /// ```
    pub fn logaddexp(&self, other: &Tensor) -> Tensor {
        log_add_exp(self, other, false)
    }

    /// `log2(2^self + 2^other)` without overflow, broadcast
    /// (`torch.logaddexp2`): [`Tensor::logaddexp`] in base 2.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1000.0f32, 3.0], &[2]);
    /// assert_eq!(x.logaddexp2(&x).to_vec::<f32>(), vec![1001.0, 4.0]);
    /// ```
    pub fn logaddexp2(&self, other: &Tensor) -> Tensor {
        log_add_exp(self, other, true)
    }

    /// The running `log(Σ exp)` along `dim` (`torch.logcumsumexp`), each
    /// step a [`Tensor::logaddexp`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 0.0, 0.0], &[3]);
    /// let y = x.logcumsumexp(0).to_vec::<f32>();
    /// assert!((y[2] - 3f32.ln()).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn logcumsumexp(&self, dim: isize) -> Tensor {
        if self.ndim() == 0 {
            return self.clone();
        }
        self.doubling_scan(dim, f64::NEG_INFINITY, |a, b| a.logaddexp(b))
    }

    /// `self * log(other)`, 0 where `self` is 0 (unless `other` is NaN),
    /// broadcast (`torch.xlogy`). PyTorch's gradients: `log(other)` for
    /// `self` (0 where `other` is 0), `self / other` for `other`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 2.0], &[2]);
    /// assert_eq!(x.xlogy(&Tensor::from_vec(vec![0.0f32, 1.0], &[2])).to_vec::<f32>(), vec![0.0, 0.0]);
    /// ```
    pub fn xlogy(&self, other: &Tensor) -> Tensor {
        trace::op("xlogy", [self, other], Vec::new, || {
            let value = crate::no_grad(|| {
                let zero_x = self
                    .eq_scalar(0.0)
                    .logical_and(&other.isnan().logical_not());
                let zero = super::binary::scalar_for(self, 0.0);
                Tensor::where_(&zero_x, &zero, &(self * &other.log()))
            });
            let shapes = [self.shape().to_vec(), other.shape().to_vec()];
            Tensor::record(value, "XlogyBackward0", &[self, other], || {
                let (x, y) = (self.saved(), other.saved());
                move |g: &Tensor, needs: &[bool]| {
                    let gx = needs[0].then(|| {
                        let zero = super::binary::scalar_for(&y, 0.0);
                        let log_y = Tensor::where_(&y.eq_scalar(0.0), &zero, &y.log());
                        (g * &log_y).sum_to(&shapes[0])
                    });
                    let gy = needs[1].then(|| (g * &(&x / &y)).sum_to(&shapes[1]));
                    vec![gx, gy]
                }
            })
        })
    }

    /// `self * log1p(other)`, 0 where `self` is 0 (unless `other` is NaN),
    /// broadcast (`torch.special.xlog1py`). PyTorch's gradients:
    /// `log1p(other)` for `self` (0 where `self` is 0 and `other` ≤ -1),
    /// `self / (1 + other)` for `other`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 2.0], &[2]);
    /// let y = Tensor::from_vec(vec![-1.0f32, 0.0], &[2]);
    /// assert_eq!(x.xlog1py(&y).to_vec::<f32>(), vec![0.0, 0.0]);
    /// ```
    pub fn xlog1py(&self, other: &Tensor) -> Tensor {
        trace::op("xlog1py", [self, other], Vec::new, || {
            let value = crate::no_grad(|| {
                let zero_x = self
                    .eq_scalar(0.0)
                    .logical_and(&other.isnan().logical_not());
                let zero = super::binary::scalar_for(self, 0.0);
                Tensor::where_(&zero_x, &zero, &(self * &other.log1p()))
            });
            let shapes = [self.shape().to_vec(), other.shape().to_vec()];
            Tensor::record(value, "SpecialXlog1PyBackward0", &[self, other], || {
                let (x, y) = (self.saved(), other.saved());
                move |g: &Tensor, needs: &[bool]| {
                    let gx = needs[0].then(|| {
                        let masked = x.eq_scalar(0.0).logical_and(&y.le_scalar(-1.0));
                        let zero = super::binary::scalar_for(&y, 0.0);
                        Tensor::where_(&masked, &zero, &g.xlog1py(&y)).sum_to(&shapes[0])
                    });
                    let gy = needs[1].then(|| (g * &(&x / &(&y + 1.0))).sum_to(&shapes[1]));
                    vec![gx, gy]
                }
            })
        })
    }

    /// The covariance matrix of the rows of `self` (variables), observed
    /// along the columns (`torch.cov`, no weights); `correction` 1 is the
    /// unbiased estimate. A 1-D input is one variable.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 2.0, 4.0, 6.0], &[2, 3]);
    /// assert_eq!(x.cov(1).to_vec::<f32>(), vec![1.0, 2.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn cov(&self, correction: usize) -> Tensor {
        assert!(
            self.ndim() <= 2 && self.dtype().is_float(),
            "cov: expects a 1-D or 2-D float tensor of variables by observations, got {} of shape {:?}",
            self.dtype(),
            self.shape()
        );
        let x = if self.ndim() < 2 {
            self.reshape(&[1, -1])
        } else {
            self.clone()
        };
        let n = x.shape()[1];
        let centred = &x - &x.mean_dims(&[1], true);
        let c = &centred.matmul(&centred.t()) / (n as f64 - correction as f64).max(0.0);
        if self.ndim() < 2 { c.reshape(&[]) } else { c }
    }

    /// The correlation coefficients of the rows (`torch.corrcoef`): the
    /// covariance over the outer product of the standard deviations,
    /// clipped to `[-1, 1]`.
    #[track_caller]
    pub fn corrcoef(&self) -> Tensor {
        let c = self.cov(1);
        if c.ndim() == 0 {
            // One variable: its variance over itself (1, or NaN if constant).
            let variance = c.clone();
            return c.div(&variance);
        }
        let sd = c.diagonal(0, 0, 1).sqrt();
        (&(&c / &sd.unsqueeze(1)) / &sd.unsqueeze(0)).clamp(-1.0, 1.0)
    }

    /// The `p`-norm distance between each row of `self` `[.., P, M]` and
    /// each row of `other` `[.., R, M]`: `[.., P, R]` (`torch.cdist`). For
    /// `p = 2` with more than 25 rows on either side, as PyTorch's default,
    /// `√(|x|² + |y|² - 2 x·y)` by a matrix product (clamped at 1e-30 below
    /// the root); otherwise the norm of each difference.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![0.0f32, 0.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(a.cdist(&a, 2.0).to_vec::<f32>(), vec![0.0, 5.0, 5.0, 0.0]);
    /// assert_eq!(a.cdist(&a, 1.0).to_vec::<f32>()[1], 7.0);
    /// ```
    #[track_caller]
    pub fn cdist(&self, other: &Tensor, p: f64) -> Tensor {
        let ok =
            self.ndim() >= 2 && other.ndim() >= 2 && self.size(-1) == other.size(-1) && p >= 0.0;
        assert!(
            ok,
            "cdist: expects [.., P, M] and [.., R, M] with the same M and p >= 0, got {:?} and {:?} (p = {p})",
            self.shape(),
            other.shape()
        );
        let (rows_a, rows_b) = (self.size(-2), other.size(-2));
        if p == 2.0 && (rows_a > 25 || rows_b > 25) {
            let sq_a = self.square().sum_dim(-1, true);
            let sq_b = other.square().sum_dim(-1, true).transpose(-2, -1);
            let cross = self.matmul(&other.transpose(-2, -1));
            let d2 = &(&sq_a + &sq_b) - &(&cross * 2.0);
            return d2.clamp_min(1e-30).sqrt();
        }
        let diff = &self.unsqueeze(-2) - &other.unsqueeze(-3);
        diff.norm_dims(p, &[-1], false)
    }

    /// Whether each element is one of `elements` (`torch.isin`), or is not
    /// (`invert`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 3, 4], &[4]);
    /// let y = x.isin(&Tensor::from_vec(vec![2i64, 4], &[2]), false);
    /// assert_eq!(y.to_vec::<bool>(), vec![false, true, false, true]);
    /// ```
    pub fn isin(&self, elements: &Tensor, invert: bool) -> Tensor {
        let hit = self
            .unsqueeze(-1)
            .eq(&elements.reshape(&[-1]))
            .any_dim(-1, false);
        if invert { hit.logical_not() } else { hit }
    }

    /// The index of the bucket of `boundaries` (ascending, 1-D) each
    /// element falls in (`torch.bucketize`): the count of boundaries below
    /// it, or at or below it with `right`; int64.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let b = Tensor::from_vec(vec![1.0f32, 3.0, 5.0], &[3]);
    /// let x = Tensor::from_vec(vec![0.0f32, 1.0, 4.0, 9.0], &[4]);
    /// assert_eq!(x.bucketize(&b, false).to_vec::<i64>(), vec![0, 0, 2, 3]);
    /// assert_eq!(x.bucketize(&b, true).to_vec::<i64>(), vec![0, 1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn bucketize(&self, boundaries: &Tensor, right: bool) -> Tensor {
        assert!(
            boundaries.ndim() == 1,
            "bucketize: boundaries must be 1-D, got shape {:?}",
            boundaries.shape()
        );
        let x = self.unsqueeze(-1);
        let below = if right {
            boundaries.le(&x)
        } else {
            boundaries.lt(&x)
        };
        below.to_dtype(DType::I64).sum_dim(-1, false)
    }

    /// Where each of `values` would be inserted into `self`, sorted
    /// ascending along its last dim, to keep it sorted
    /// (`torch.searchsorted(sorted_sequence, values, right=)`): a 1-D
    /// sequence serves every value, an N-D one its matching rows.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let s = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[4]);
    /// let v = Tensor::from_vec(vec![3.0f32, 6.0], &[2]);
    /// assert_eq!(s.searchsorted(&v, false).to_vec::<i64>(), vec![1, 3]);
    /// assert_eq!(s.searchsorted(&v, true).to_vec::<i64>(), vec![2, 3]);
    /// ```
    #[track_caller]
    pub fn searchsorted(&self, values: &Tensor, right: bool) -> Tensor {
        if self.ndim() == 1 {
            return values.bucketize(self, right);
        }
        let leading_match = values.ndim() == self.ndim()
            && self.shape()[..self.ndim() - 1] == values.shape()[..values.ndim() - 1];
        assert!(
            leading_match,
            "searchsorted: a sorted sequence of shape {:?} needs values with the same leading dims, got {:?}",
            self.shape(),
            values.shape()
        );
        let (seq, v) = (self.unsqueeze(-2), values.unsqueeze(-1));
        let below = if right { seq.le(&v) } else { seq.lt(&v) };
        below.to_dtype(DType::I64).sum_dim(-1, false)
    }

    /// The integral of samples spaced `dx` apart along `dim` by the
    /// trapezoidal rule (`torch.trapezoid(y, dx=dx, dim=dim)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// assert_eq!(y.trapezoid(0.5, -1).item::<f32>(), 2.0);
    /// ```
    #[track_caller]
    pub fn trapezoid(&self, dx: f64, dim: isize) -> Tensor {
        let d = self.dim(dim, "trapezoid") as isize;
        let n = self.shape()[d as usize];
        if n == 0 {
            return self.sum_dim(d, false);
        }
        let (hi, lo) = (self.narrow(d, 1, n - 1), self.narrow(d, 0, n - 1));
        &(&hi + &lo).sum_dim(d, false) * (dx / 2.0)
    }
}

/// `log(e^a + e^b)`, or in base 2: the larger plus `log1p` of the smaller's
/// share, PyTorch's formula. Where the larger is infinite it is the result
/// (`-inf` and `-inf` give `-inf`, `+inf` and anything `+inf`), but the
/// difference may be `inf - inf`, NaN: 0 is used there, so the unused
/// branch has a finite gradient.
fn log_add_exp(a: &Tensor, b: &Tensor, base2: bool) -> Tensor {
    let m = a.maximum(b);
    let infinite = m.isinf();
    let zero = super::binary::scalar_for(&m, 0.0);
    let gap = &Tensor::where_(&infinite, &zero, &(a - b)).abs() * -1.0;
    let y = if base2 {
        &m + &(&gap.exp2().log1p() / std::f64::consts::LN_2)
    } else {
        &m + &gap.exp().log1p()
    };
    Tensor::where_(&infinite, &m, &y)
}
