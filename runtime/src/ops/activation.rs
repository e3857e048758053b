//! The rest of `torch.nn.functional`'s activations, each a composition of
//! primitives: its gradient is theirs (and equals PyTorch's formula, kinks
//! included: `where` takes the negative branch at 0, as PyTorch's ELU
//! backward does; clamps are 0 at their bounds, as `hardtanh_backward`).
//! They are not wrapped as ops of their own, so ONNX export, `compile` (and
//! its fusion of elementwise chains) and the profiler see their parts.

use crate::Tensor;

/// SELU's constants (`torch.nn.functional.selu`).
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// `x` with its positive entries (`positive`) set to 0: what the negative
/// branch of a `where` exponentiates, so a large input gives no `inf` whose
/// zero gradient would be `0 * inf = NaN`; the gradient still reaches `x`
/// at 0, as PyTorch's ELU backward's does.
fn non_positive_part(x: &Tensor, positive: &Tensor) -> Tensor {
    x.masked_fill(positive, 0.0)
}

impl Tensor {
    /// `x` above 0, `alpha * (e^x - 1)` otherwise (`F.elu`, PyTorch's
    /// default `alpha` is 1).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).elu(1.0);
    /// assert!((y.to_vec::<f32>()[0] - (-1f32).exp_m1()).abs() < 1e-7);
    /// ```
    pub fn elu(&self, alpha: f64) -> Tensor {
        let positive = self.gt_scalar(0.0);
        // expm1, not exp - 1: near 0 the difference would keep only the
        // rounding of exp (1% off at -1e-6), as PyTorch's ELU does not.
        let negative = non_positive_part(self, &positive).expm1();
        Tensor::where_(&positive, self, &(&negative * alpha))
    }

    /// `scale * elu(x, alpha)` with SELU's fixed constants (`F.selu`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32], &[1]).selu();
    /// assert!((y.item::<f32>() - 1.050_701).abs() < 1e-6);
    /// ```
    pub fn selu(&self) -> Tensor {
        &self.elu(SELU_ALPHA) * SELU_SCALE
    }

    /// `max(0, x) + min(0, alpha * (e^(x / alpha) - 1))` (`F.celu`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-2.0f32, 3.0], &[2]).celu(2.0);
    /// assert!((y.to_vec::<f32>()[0] - 2.0 * (-1f32).exp_m1()).abs() < 1e-6);
    /// ```
    pub fn celu(&self, alpha: f64) -> Tensor {
        assert!(alpha != 0.0, "celu: alpha of 0 is not allowed (x / alpha)");
        let positive = self.gt_scalar(0.0);
        let negative = (&non_positive_part(self, &positive) / alpha).expm1();
        Tensor::where_(&positive, self, &(&negative * alpha))
    }

    /// `x * tanh(softplus(x))` (`F.mish`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32], &[1]).mish();
    /// assert!((y.item::<f32>() - 0.865_098_4).abs() < 1e-6);
    /// ```
    pub fn mish(&self) -> Tensor {
        self * &self.softplus().tanh()
    }

    /// `x` limited to `[min_val, max_val]` (`F.hardtanh`, PyTorch's
    /// defaults -1 and 1); the gradient is 0 at the bounds.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-3.0f32, 0.5, 3.0], &[3]).hardtanh(-1.0, 1.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 0.5, 1.0]);
    /// ```
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Tensor {
        assert!(
            min_val <= max_val,
            "hardtanh: min_val ({min_val}) must not be above max_val ({max_val})"
        );
        self.clamp(min_val, max_val)
    }

    /// `min(max(0, x), 6)` (`F.relu6`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f32, 7.0], &[2]).relu6();
    /// assert_eq!(y.to_vec::<f32>(), vec![0.0, 6.0]);
    /// ```
    pub fn relu6(&self) -> Tensor {
        self.hardtanh(0.0, 6.0)
    }

    /// `relu6(x + 3) / 6` (`F.hardsigmoid`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-4.0f32, 0.0, 4.0], &[3]).hardsigmoid();
    /// assert_eq!(y.to_vec::<f32>(), vec![0.0, 0.5, 1.0]);
    /// ```
    pub fn hardsigmoid(&self) -> Tensor {
        &(self + 3.0).relu6() / 6.0
    }

    /// `log(sigmoid(x))`, as `0 - softplus(-x)` so large inputs stay finite
    /// (`F.logsigmoid`); large positives give +0 as PyTorch's (negating
    /// the softplus gave -0).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-100.0f32, 0.0, 1e4], &[3]).logsigmoid();
    /// assert_eq!(y.to_vec::<f32>()[0], -100.0);
    /// assert!(y.to_vec::<f32>()[2].is_sign_positive());
    /// ```
    pub fn logsigmoid(&self) -> Tensor {
        0.0 - &self.neg().softplus()
    }

    /// `x / (1 + |x|)` (`F.softsign`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-3.0f32, 1.0], &[2]).softsign();
    /// assert_eq!(y.to_vec::<f32>(), vec![-0.75, 0.5]);
    /// ```
    pub fn softsign(&self) -> Tensor {
        self / &(&self.abs() + 1.0)
    }

    /// `x - tanh(x)` (`F.tanhshrink`).
    pub fn tanhshrink(&self) -> Tensor {
        self - &self.tanh()
    }

    /// `x` where `|x| > lambd`, else 0 (`F.hardshrink`, default 0.5).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f32, 0.3, 0.5, 0.7], &[4]).hardshrink(0.5);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 0.0, 0.0, 0.7]);
    /// ```
    pub fn hardshrink(&self, lambd: f64) -> Tensor {
        self.masked_fill(&self.abs().le_scalar(lambd), 0.0)
    }

    /// `x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0
    /// (`F.softshrink`, default 0.5).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f32, 0.3, 0.75], &[3]).softshrink(0.5);
    /// assert_eq!(y.to_vec::<f32>(), vec![-0.5, 0.0, 0.25]);
    /// ```
    pub fn softshrink(&self, lambd: f64) -> Tensor {
        assert!(
            lambd >= 0.0,
            "softshrink: lambd must be at least 0, got {lambd}"
        );
        let shifted = &self.sign() * &(&self.abs() - lambd);
        shifted.masked_fill(&self.abs().le_scalar(lambd), 0.0)
    }

    /// `x` above `threshold`, else `value` (`F.threshold`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![0.5f32, 2.0], &[2]).threshold(1.0, -1.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 2.0]);
    /// ```
    pub fn threshold(&self, threshold: f64, value: f64) -> Tensor {
        self.masked_fill(&self.le_scalar(threshold), value)
    }

    /// The gated linear unit (`F.glu`): the first half of `dim` times the
    /// sigmoid of the second.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![2.0f32, 0.0], &[2]).glu(-1);
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0]);
    /// ```
    pub fn glu(&self, dim: isize) -> Tensor {
        let d = self.dim(dim, "glu");
        let n = if self.ndim() == 0 { 0 } else { self.shape()[d] };
        assert!(
            self.ndim() > 0 && n % 2 == 0,
            "glu: halving dimension must be even, but dimension {dim} of shape {:?} is size {n}",
            self.shape()
        );
        let d = d as isize;
        let half = n / 2;
        &self.narrow(d, 0, half) * &self.narrow(d, half, half).sigmoid()
    }
}
