//! Reductions: sum is the primitive; mean, var, std, logsumexp and norm are
//! composites (max, min and their kin are in `extremes.rs`).

use crate::trace::{self, Attr};
use crate::{DType, Tensor};

impl Tensor {
    /// The dims a reduction over `dims` takes, checked and sorted; an
    /// empty list means every dim, as in PyTorch (`x.sum(dim=())`).
    fn reduce_dims(&self, dims: &[isize], op: &str) -> Vec<usize> {
        if dims.is_empty() {
            return (0..self.ndim()).collect();
        }
        let mut out: Vec<usize> = dims.iter().map(|&d| self.dim(d, op)).collect();
        out.sort_unstable();
        let before = out.len();
        out.dedup();
        assert!(
            before == out.len(),
            "{op}: dim {dims:?} appears more than once"
        );
        if self.ndim() == 0 {
            out.clear();
        }
        out
    }

    /// Panics, naming `op`, where `dim` has no elements to pick one from
    /// (max, min, amax, median: PyTorch's "Expected reduction dim ... to
    /// have non-zero size").
    #[track_caller]
    pub(super) fn nonempty_dim(&self, dim: isize, op: &str) {
        let d = self.dim(dim, op);
        assert!(
            self.ndim() == 0 || self.shape()[d] > 0,
            "{op}: cannot reduce over a zero-size dim {dim} of shape {:?}",
            self.shape()
        );
    }

    pub(super) fn reduced_shape(&self, dims: &[usize], keepdim: bool) -> Vec<usize> {
        let mut shape = vec![];
        for (d, &s) in self.shape().iter().enumerate() {
            if !dims.contains(&d) {
                shape.push(s);
            } else if keepdim {
                shape.push(1);
            }
        }
        shape
    }

    /// Sum of all elements (a 0-d tensor).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(x.sum().item::<f32>(), 10.0);
    /// assert_eq!(x.sum_dims(&[0], false).to_vec::<f32>(), vec![4.0, 6.0]);
    /// ```
    pub fn sum(&self) -> Tensor {
        trace::op("sum", [self], Vec::new, || {
            let all: Vec<isize> = (0..self.ndim() as isize).collect();
            self.sum_dims(&all, false)
        })
    }

    /// Sum over `dims` (every dim when `dims` is empty, as PyTorch's
    /// `dim=()`), keeping them as size 1 when `keepdim`.
    pub fn sum_dims(&self, dims: &[isize], keepdim: bool) -> Tensor {
        trace::op(
            "sum_dims",
            [self],
            || dims_attrs(dims, keepdim),
            || {
                // The user's sum is on autocast's CUDA f32 list; the sums inside
                // mean, var and gradient reduction are not (PyTorch's mean keeps its dtype).
                if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                    return x.sum_over(dims, keepdim);
                }
                self.sum_over(dims, keepdim)
            },
        )
    }

    /// [`Tensor::sum_dims`] without autocast's policy: the sum other ops build on.
    pub(crate) fn sum_over(&self, dims: &[isize], keepdim: bool) -> Tensor {
        let d = self.reduce_dims(dims, "sum");
        let storage = self.read().sum(self.layout(), &d);
        let out = Tensor::from_storage(storage, &self.reduced_shape(&d, keepdim));
        let in_shape = self.shape().to_vec();
        let kept_shape: Vec<isize> = self
            .reduced_shape(&d, true)
            .iter()
            .map(|&s| s as isize)
            .collect();
        Tensor::record(out, "SumBackward1", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                vec![Some(g.reshape(&kept_shape).expand(&in_shape).contiguous())]
            }
        })
    }

    /// Sum over one dim.
    pub fn sum_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "sum_dim",
            [self],
            || dims_attrs(&[dim], keepdim),
            || self.sum_dims(&[dim], keepdim),
        )
    }

    /// Mean of all elements.
    pub fn mean(&self) -> Tensor {
        trace::op("mean", [self], Vec::new, || {
            let n = self.numel() as f64;
            let all: Vec<isize> = (0..self.ndim() as isize).collect();
            &self.to_dtype(self.dtype().to_float()).sum_over(&all, false) / n
        })
    }

    /// Mean over `dims` (integers average as floats).
    pub fn mean_dims(&self, dims: &[isize], keepdim: bool) -> Tensor {
        trace::op(
            "mean_dims",
            [self],
            || dims_attrs(dims, keepdim),
            || {
                let d = self.reduce_dims(dims, "mean");
                let n: usize = d.iter().map(|&i| self.shape()[i]).product();
                &self
                    .to_dtype(self.dtype().to_float())
                    .sum_over(dims, keepdim)
                    / n as f64
            },
        )
    }

    /// Mean over one dim.
    pub fn mean_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "mean_dim",
            [self],
            || dims_attrs(&[dim], keepdim),
            || self.mean_dims(&[dim], keepdim),
        )
    }

    /// Variance over `dims` with Bessel-style `correction` (1 = unbiased, PyTorch's default).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(x.var_dims(&[1], 1, false).to_vec::<f32>(), vec![0.5, 0.5]);
    /// assert_eq!(x.var_dims(&[1], 0, false).to_vec::<f32>(), vec![0.25, 0.25]);
    /// ```
    pub fn var_dims(&self, dims: &[isize], correction: usize, keepdim: bool) -> Tensor {
        trace::op(
            "var_dims",
            [self],
            || correction_attrs(dims, correction, keepdim),
            || {
                let d = self.reduce_dims(dims, "var");
                let n: usize = d.iter().map(|&i| self.shape()[i]).product();
                let centered = self - &self.mean_dims(dims, true);
                &(&centered * &centered).sum_over(dims, keepdim)
                    / (n as f64 - correction as f64).max(0.0)
            },
        )
    }

    /// Variance of all elements (unbiased).
    pub fn var(&self) -> Tensor {
        trace::op("var", [self], Vec::new, || {
            let all: Vec<isize> = (0..self.ndim() as isize).collect();
            self.var_dims(&all, 1, false)
        })
    }

    /// Standard deviation over `dims` with `correction` (1 = unbiased).
    pub fn std_dims(&self, dims: &[isize], correction: usize, keepdim: bool) -> Tensor {
        trace::op(
            "std_dims",
            [self],
            || correction_attrs(dims, correction, keepdim),
            || self.var_dims(dims, correction, keepdim).sqrt(),
        )
    }

    /// Standard deviation of all elements (unbiased).
    pub fn std(&self) -> Tensor {
        trace::op("std", [self], Vec::new, || self.var().sqrt())
    }

    /// The variance and the mean over `dims` at once (`torch.var_mean`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 5.0], &[2, 2]);
    /// let (var, mean) = x.var_mean_dims(&[1], 1, false);
    /// assert_eq!((var.to_vec::<f32>(), mean.to_vec::<f32>()), (vec![0.5, 2.0], vec![1.5, 4.0]));
    /// ```
    pub fn var_mean_dims(
        &self,
        dims: &[isize],
        correction: usize,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        (
            self.var_dims(dims, correction, keepdim),
            self.mean_dims(dims, keepdim),
        )
    }

    /// The standard deviation and the mean over `dims` at once
    /// (`torch.std_mean`).
    pub fn std_mean_dims(
        &self,
        dims: &[isize],
        correction: usize,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        (
            self.std_dims(dims, correction, keepdim),
            self.mean_dims(dims, keepdim),
        )
    }

    /// `log(sum(exp(x)))` over `dims`, computed stably (max subtracted).
    pub fn logsumexp(&self, dims: &[isize], keepdim: bool) -> Tensor {
        trace::op(
            "logsumexp",
            [self],
            || dims_attrs(dims, keepdim),
            || {
                let d = self.reduce_dims(dims, "logsumexp");
                if d.iter().any(|&k| self.shape()[k] == 0) {
                    // An empty group: the log of an empty sum, -inf, as
                    // PyTorch's (its max below would have nothing to take).
                    return self.exp().sum_dims(dims, keepdim).log();
                }
                let last = self.ndim().checked_sub(1);
                if d.len() == 1
                    && Some(d[0]) == last
                    && self.shape()[d[0]] > 0
                    && self.dtype().is_float()
                    && self.read().fuses_scaled_softmax()
                {
                    return self.logsumexp_last(keepdim);
                }
                let mut m = self.detach();
                for &dim in d.iter().rev() {
                    m = m.max_dim(dim as isize, true).0;
                }
                // An all -inf group would give -inf - -inf = nan; shift by 0 there.
                let m = m.masked_fill(&m.abs().eq_scalar(f64::INFINITY), 0.0);
                let s = (self - &m).exp().sum_dims(dims, true).log() + &m;
                if keepdim {
                    s
                } else {
                    let shape: Vec<isize> = self
                        .reduced_shape(&d, false)
                        .iter()
                        .map(|&x| x as isize)
                        .collect();
                    s.reshape(&shape)
                }
            },
        )
    }

    /// [`Tensor::logsumexp`] over the last dim (not empty) by the fused row
    /// kernel, one read of `self`; the gradient is the rows' softmax, `g *
    /// exp(x - out)` (under `create_graph` the saved `out` is this node's
    /// output again, so the second derivative is whole).
    fn logsumexp_last(&self, keepdim: bool) -> Tensor {
        let last = self.ndim() - 1;
        let out = Tensor::from_storage(
            self.read().logsumexp_rows(self.layout()),
            &self.reduced_shape(&[last], true),
        );
        let out = Tensor::record(out.detach(), "LogsumexpBackward0", &[self], || {
            let (x, y) = (self.saved(), out.saved());
            move |g: &Tensor, _: &[bool]| vec![Some(g * &(&x - &y).exp())]
        });
        if keepdim { out } else { out.squeeze_dim(-1) }
    }

    /// The p-norm of all elements (`p` = 2.0, 1.0, f64::INFINITY, ...).
    pub fn norm(&self, p: f64) -> Tensor {
        trace::op(
            "norm",
            [self],
            || vec![("p", Attr::Float(p))],
            || {
                let all: Vec<isize> = (0..self.ndim() as isize).collect();
                self.norm_dims(p, &all, false)
            },
        )
    }

    /// The p-norm over `dims` (`torch.linalg.vector_norm`): `p` = inf is the
    /// largest magnitude, 0 the count of nonzeros (no gradient). The
    /// gradient is PyTorch's: 0 where the norm is 0, and for `p` < 1 at the
    /// zero elements, where the composition would give NaN.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[2]).requires_grad_(true);
    /// x.norm(2.0).backward();
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![0.0, 0.0]);
    /// let y = Tensor::from_vec(vec![0.0f32, 2.0, -3.0], &[3]);
    /// assert_eq!(y.norm(0.0).item::<f32>(), 2.0);
    /// ```
    #[doc(alias = "vector_norm")]
    pub fn norm_dims(&self, p: f64, dims: &[isize], keepdim: bool) -> Tensor {
        trace::op(
            "norm_dims",
            [self],
            || {
                let mut a = dims_attrs(dims, keepdim);
                a.push(("p", Attr::Float(p)));
                a
            },
            || {
                if p == f64::INFINITY {
                    let a = self.abs();
                    let d = self.reduce_dims(dims, "norm");
                    let mut m = a;
                    for &dim in d.iter().rev() {
                        m = m.amax_dim(dim as isize, keepdim);
                    }
                    return m;
                }
                let count = || self.ne_scalar(0.0).to_dtype(self.dtype().to_float());
                match p {
                    0.0 => return crate::no_grad(|| count().sum_dims(dims, keepdim)),
                    // |x|'s gradient is sign(x), 0 at 0: PyTorch's for p = 1.
                    1.0 => return self.abs().sum_dims(dims, keepdim),
                    _ => {}
                }
                let out = crate::no_grad(|| {
                    // f16/bf16 are raised, summed and rooted in f32 and
                    // rounded once, as PyTorch's norm kernels do.
                    let half = matches!(self.dtype(), DType::F16 | DType::BF16);
                    let x = if half {
                        self.to_dtype(DType::F32)
                    } else {
                        self.clone()
                    };
                    let n = match p {
                        2.0 => {
                            let d = x.reduce_dims(dims, "norm");
                            let squares = x.read().sum_squares(x.layout(), &d);
                            match squares {
                                Some(s) => Tensor::from_storage(s, &x.reduced_shape(&d, keepdim)),
                                None => (&x * &x).sum_dims(dims, keepdim),
                            }
                            .sqrt()
                        }
                        _ => x.abs().powf(p).sum_dims(dims, keepdim).powf(1.0 / p),
                    };
                    n.to_dtype(self.dtype())
                });
                let kept: Vec<isize> = self
                    .reduced_shape(&self.reduce_dims(dims, "norm"), true)
                    .iter()
                    .map(|&n| n as isize)
                    .collect();
                Tensor::record(out.detach(), "LinalgVectorNormBackward0", &[self], || {
                    let (x, norm) = (self.saved(), out.saved());
                    move |g: &Tensor, _: &[bool]| {
                        let (norm, g) = (norm.reshape(&kept), g.reshape(&kept));
                        vec![Some(norm_backward(&x, &norm, &g, p))]
                    }
                })
            },
        )
    }

    /// Whether every element is finite (no inf or nan).
    pub fn all_finite(&self) -> bool {
        let v: Vec<f64> = self.to_vec();
        v.iter().all(|x| x.is_finite())
    }

    /// `torch.allclose`: same shape and, everywhere, equal values or
    /// `|self - other| <= atol + rtol * |other|` (NaNs never equal;
    /// infinities equal themselves). A test's question, answered on the
    /// host; [`Tensor::isclose`] answers it elementwise.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, f32::INFINITY], &[3]);
    /// assert!(a.allclose(&(&a + 1e-6), 1e-5, 1e-8));
    /// assert!(!a.allclose(&(&a + 1.0), 1e-5, 1e-8));
    /// ```
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> bool {
        if self.shape() != other.shape() {
            return false;
        }
        let (a, b): (Vec<f64>, Vec<f64>) = (self.to_vec(), other.to_vec());
        a.iter()
            .zip(&b)
            .all(|(x, y)| x == y || (x - y).abs() <= atol + rtol * y.abs())
    }

    /// `torch.equal`: same shape and the same values.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert!(Tensor::ones(&[2, 3]).equal(&Tensor::full(&[2, 3], 1.0)));
    /// assert!(!Tensor::ones(&[2, 3]).equal(&Tensor::ones(&[3, 2])));
    /// ```
    pub fn equal(&self, other: &Tensor) -> bool {
        self.allclose(other, 0.0, 0.0)
    }

    /// Count of `true` (or nonzero) elements.
    pub fn count_nonzero(&self) -> usize {
        self.ne_scalar(0.0).to_dtype(DType::I64).sum().item::<i64>() as usize
    }
}

/// A reduction's attributes for export: its dims and `keepdim`.
/// PyTorch's gradient of `norm = (sum |x|^p)^(1/p)` (`p` not 0, 1 or inf)
/// for `g` and `norm` with the reduced dims kept: `x |x|^(p-2) g /
/// norm^(p-1)`, taken as 0 where the norm is 0, and written with `sign`
/// for `p` < 2 so a zero element gives 0 rather than `0 * inf`.
fn norm_backward(x: &Tensor, norm: &Tensor, g: &Tensor, p: f64) -> Tensor {
    let zero_norm = norm.eq_scalar(0.0);
    if p < 1.0 {
        // norm^(1-p) is 0 at a zero norm, so no mask is needed there.
        let scaled = (&x.sign() * &x.abs().powf(p - 1.0)).masked_fill(&x.eq_scalar(0.0), 0.0);
        return &scaled * &(g * &norm.powf(1.0 - p));
    }
    let scale = match p {
        2.0 => g / norm,
        _ => g / &norm.powf(p - 1.0),
    }
    .masked_fill(&zero_norm, 0.0);
    let scaled = match p {
        2.0 => x.clone(),
        _ if p < 2.0 => &x.sign() * &x.abs().powf(p - 1.0),
        _ => x * &x.abs().powf(p - 2.0),
    };
    &scaled * &scale
}

/// A one-dim reduction's attributes: `dim` and `keepdim`.
pub(super) fn dim_attrs(dim: isize, keepdim: bool) -> trace::Attrs {
    vec![
        ("dim", Attr::Int(dim as i64)),
        ("keepdim", Attr::Int(keepdim as i64)),
    ]
}

/// A variance's attributes: its dims, `correction` and `keepdim`.
fn correction_attrs(dims: &[isize], correction: usize, keepdim: bool) -> trace::Attrs {
    let mut a = dims_attrs(dims, keepdim);
    a.push(("correction", Attr::Int(correction as i64)));
    a
}

fn dims_attrs(dims: &[isize], keepdim: bool) -> trace::Attrs {
    vec![
        ("dims", Attr::Ints(dims.iter().map(|&d| d as i64).collect())),
        ("keepdim", Attr::Int(keepdim as i64)),
    ]
}
