//! Ops that order along a dim: `cumsum`, `sort`, `argsort` and `topk`.
//! The kernels work on the last dim (`Storage::cumsum_last`,
//! `Storage::sort_last`); a view moves `dim` there and the result back.

use crate::trace::{self, Attr};
use crate::{Generator, Tensor};
use tapir_kernels::Layout;

/// `x`'s layout with dim `d` moved last (a 0-d tensor as one element).
fn moved_last(x: &Tensor, d: usize) -> Layout {
    if x.ndim() == 0 {
        return x.layout().clone();
    }
    let order: Vec<usize> = (0..x.ndim()).filter(|&k| k != d).chain([d]).collect();
    x.layout().permute(&order)
}

/// A result computed with dim `d` last, put back in `shape`'s order and
/// made dense (what PyTorch returns).
fn moved_back(t: Tensor, d: usize, shape: &[usize]) -> Tensor {
    if shape.is_empty() || d + 1 == shape.len() {
        return t;
    }
    t.movedim(-1, d as isize).contiguous_copy()
}

impl Tensor {
    /// Running sums along `dim` (`torch.cumsum`): floats keep their dtype
    /// (summed in f64 on the CPU, as PyTorch's CPU kernel), integers and
    /// bools give int64. The gradient is the running sum from the end.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(x.cumsum(1).to_vec::<f32>(), vec![1.0, 3.0, 3.0, 7.0]);
    /// assert_eq!(x.cumsum(0).to_vec::<f32>(), vec![1.0, 2.0, 4.0, 6.0]);
    /// ```
    pub fn cumsum(&self, dim: isize) -> Tensor {
        trace::op(
            "cumsum",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                    return x.cumsum(dim);
                }
                let d = self.dim(dim, "cumsum");
                let by_columns = self.read().cumsum_columns(self.layout(), d);
                let out = match by_columns {
                    Some(s) => Tensor::from_storage(s, self.shape()),
                    None => {
                        let l = moved_last(self, d);
                        let sums = Tensor::from_storage(self.read().cumsum_last(&l), &l.shape);
                        moved_back(sums, d, self.shape())
                    }
                };
                if !self.dtype().is_float() {
                    return out;
                }
                Tensor::record(out, "CumsumBackward0", &[self], move || {
                    move |g: &Tensor, _: &[bool]| {
                        let flip = [d as isize];
                        vec![Some(g.flip(&flip).cumsum(d as isize).flip(&flip))]
                    }
                })
            },
        )
    }

    /// The values sorted ascending along dim 0 (`torch.msort`:
    /// `sort(x, dim=0).values`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 0, 5], &[2, 2]);
    /// assert_eq!(x.msort().to_vec::<i64>(), vec![0, 1, 3, 5]);
    /// ```
    pub fn msort(&self) -> Tensor {
        self.sort(0, false).0
    }

    /// The elements sorted along `dim`, ascending or descending, with the
    /// index each came from (`torch.sort(x, dim, descending, stable=True)`):
    /// equal elements keep their order, NaN sorts above every number.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0], &[3]);
    /// let (v, i) = x.sort(0, true);
    /// assert_eq!(v.to_vec::<f32>(), vec![3.0, 2.0, 1.0]);
    /// assert_eq!(i.to_vec::<i64>(), vec![0, 2, 1]);
    /// ```
    pub fn sort(&self, dim: isize, descending: bool) -> (Tensor, Tensor) {
        trace::op(
            "sort",
            [self],
            || {
                vec![
                    ("dim", Attr::Int(dim as i64)),
                    ("descending", Attr::Int(descending as i64)),
                ]
            },
            || {
                let d = self.dim(dim, "sort");
                let l = moved_last(self, d);
                let (v, i) = self.read().sort_last(&l, descending);
                let values = moved_back(Tensor::from_storage(v, &l.shape), d, self.shape());
                let indices = moved_back(Tensor::from_storage(i, &l.shape), d, self.shape());
                if !self.dtype().is_float() {
                    return (values, indices);
                }
                let idx_saved = indices.saved();
                let values = Tensor::record(values, "SortBackward0", &[self], move || {
                    move |g: &Tensor, _: &[bool]| {
                        // Each gradient goes back to where its value came from.
                        vec![Some(if g.ndim() == 0 {
                            g.clone()
                        } else {
                            Tensor::zeros_like(g).scatter_add(d as isize, &idx_saved, g)
                        })]
                    }
                });
                (values, indices)
            },
        )
    }

    /// The indices that sort `dim` (`torch.argsort(stable=True)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 2], &[3]);
    /// assert_eq!(x.argsort(0, false).to_vec::<i64>(), vec![1, 2, 0]);
    /// ```
    pub fn argsort(&self, dim: isize, descending: bool) -> Tensor {
        self.sort(dim, descending).1
    }

    /// The `k` largest (or, with `largest: false`, smallest) elements along
    /// `dim`, in order, with their indices (`torch.topk`; ties keep their
    /// order).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 4.0], &[4]);
    /// let (v, i) = x.topk(2, 0, true);
    /// assert_eq!(v.to_vec::<f32>(), vec![5.0, 4.0]);
    /// assert_eq!(i.to_vec::<i64>(), vec![1, 3]);
    /// ```
    pub fn topk(&self, k: usize, dim: isize, largest: bool) -> (Tensor, Tensor) {
        trace::op(
            "topk",
            [self],
            || {
                vec![
                    ("k", Attr::Int(k as i64)),
                    ("dim", Attr::Int(dim as i64)),
                    ("largest", Attr::Int(largest as i64)),
                ]
            },
            || {
                let d = self.dim(dim, "topk");
                let n = if self.ndim() == 0 { 1 } else { self.shape()[d] };
                assert!(
                    k <= n,
                    "topk: k ({k}) is larger than dim {dim} of shape {:?}",
                    self.shape()
                );
                if self.ndim() > 0
                    && let Some(out) = self.topk_selected(d, k, largest)
                {
                    return out;
                }
                let (v, i) = self.sort(dim, largest);
                if self.ndim() == 0 {
                    return (v, i);
                }
                let d = d as isize;
                (v.narrow(d, 0, k), i.narrow(d, 0, k))
            },
        )
    }
}

impl Tensor {
    /// `topk` along dim `d` by the device's selection kernel, where it has
    /// one (the CPU): the same values and indices as sorting and narrowing
    /// (`TopkBackward0` scatters the gradient back to the indices).
    fn topk_selected(&self, d: usize, k: usize, largest: bool) -> Option<(Tensor, Tensor)> {
        let l = moved_last(self, d);
        let (v, i) = self.read().topk_last(&l, k, largest)?;
        let mut last_k = l.shape.clone();
        *last_k.last_mut()? = k;
        let mut shape = self.shape().to_vec();
        shape[d] = k;
        let values = moved_back(Tensor::from_storage(v, &last_k), d, &shape);
        let indices = moved_back(Tensor::from_storage(i, &last_k), d, &shape);
        if !self.dtype().is_float() {
            return Some((values, indices));
        }
        let (idx_saved, in_shape) = (indices.saved(), self.shape().to_vec());
        let values = Tensor::record(values, "TopkBackward0", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                let zeros = super::creation::filled_on(&in_shape, 0.0, g.dtype(), g.device());
                vec![Some(zeros.scatter_add(d as isize, &idx_saved, g))]
            }
        });
        Some((values, indices))
    }

    /// Draws `num_samples` category indices from each row of
    /// non-negative weights `[C]` or `[N, C]` (`torch.multinomial`; rows
    /// need not sum to 1), from the default generators.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::from_vec(vec![0.0f32, 1.0, 0.0, 3.0], &[4]);
    /// let picks = w.multinomial(3, true).to_vec::<i64>();
    /// assert!(picks.iter().all(|&i| i == 1 || i == 3));
    /// let all = w.multinomial(2, false).to_vec::<i64>();
    /// assert!(all == vec![1, 3] || all == vec![3, 1]);
    /// ```
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Tensor {
        let u = Tensor::rand_on(
            &self.multinomial_draws(num_samples, replacement),
            self.device(),
        );
        self.multinomial_from(u, num_samples, replacement)
    }

    /// [`Tensor::multinomial`] drawing from `g` (PyTorch's `generator=`).
    pub fn multinomial_with(&self, num_samples: usize, replacement: bool, g: &Generator) -> Tensor {
        let shape = self.multinomial_draws(num_samples, replacement);
        let u = Tensor::rand_with(&shape, g)
            .to(self.device())
            .unwrap_or_else(|e| panic!("multinomial: {e}"));
        self.multinomial_from(u, num_samples, replacement)
    }

    /// Checks the weights as PyTorch does and says how many uniform draws
    /// the sampling takes: one per sample with replacement, one per
    /// category without.
    fn multinomial_draws(&self, num_samples: usize, replacement: bool) -> Vec<usize> {
        assert!(
            (1..=2).contains(&self.ndim()) && self.dtype().is_float(),
            "multinomial: weights must be a 1-D or 2-D float tensor, got {} of shape {:?}",
            self.dtype(),
            self.shape()
        );
        let c = self.shape()[self.ndim() - 1];
        assert!(num_samples > 0, "multinomial: cannot sample 0 samples");
        assert!(
            replacement || num_samples <= c,
            "multinomial: cannot sample {num_samples} > {c} categories without replacement"
        );
        let w = self.detach().to_dtype(crate::DType::F64);
        assert!(
            w.all_finite() && w.numel() > 0 && w.min().item::<f64>() >= 0.0,
            "multinomial: weights of shape {:?} contain inf, NaN or an element < 0",
            self.shape()
        );
        let rows = w.reshape(&[-1, c as isize]);
        assert!(
            rows.sum_dim(1, false).min().item::<f64>() > 0.0,
            "multinomial: a row of weights of shape {:?} sums to 0",
            self.shape()
        );
        if !replacement {
            let fewest = rows
                .ne_scalar(0.0)
                .to_dtype(crate::DType::I64)
                .sum_dim(1, false);
            assert!(
                fewest.min().item::<i64>() >= num_samples as i64,
                "multinomial: a row of weights of shape {:?} has fewer than {num_samples} nonzero categories to sample without replacement",
                self.shape()
            );
        }
        let mut shape = self.shape().to_vec();
        if replacement {
            *shape.last_mut().expect("1-D or 2-D") = num_samples;
        }
        shape
    }

    /// Sampling from uniform draws `u` in `[0, 1)`. With replacement: the
    /// count of running-sum entries below `(1 - u) * total`, so a category
    /// of weight 0 is never drawn. Without: the `num_samples` largest `w /
    /// e`, `e = -ln(1 - u)` exponential draws (PyTorch's own method, the
    /// same distribution as drawing one at a time).
    fn multinomial_from(&self, u: Tensor, num_samples: usize, replacement: bool) -> Tensor {
        let w = self.detach();
        let u = u.to_dtype(w.dtype());
        if !replacement {
            let e = (&u.neg() + 1.0).log().neg();
            return (&w / &e).topk(num_samples, -1, true).1;
        }
        let cdf = w.cumsum(-1);
        let total = cdf.narrow(-1, cdf.shape()[cdf.ndim() - 1] - 1, 1);
        let target = &(&u.neg() + 1.0) * &total;
        // [.., S, 1] against [.., 1, C]: entries below each target.
        cdf.unsqueeze(-2)
            .lt(&target.unsqueeze(-1))
            .to_dtype(crate::DType::I64)
            .sum_dim(-1, false)
    }
}
