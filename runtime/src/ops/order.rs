//! Ops that order along a dim: `cumsum`, `sort`, `argsort` and `topk`.
//! The kernels work on the last dim (`Storage::cumsum_last`,
//! `Storage::sort_last`); a view moves `dim` there and the result back.

use crate::Tensor;
use crate::trace::{self, Attr};
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
                let l = moved_last(self, d);
                let sums = Tensor::from_storage(self.read().cumsum_last(&l), &l.shape);
                let out = moved_back(sums, d, self.shape());
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
                        let idx = idx_saved.detach();
                        vec![Some(if g.ndim() == 0 {
                            g.clone()
                        } else {
                            Tensor::zeros_like(g).scatter_add(d as isize, &idx, g)
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
