//! `torch.diagonal`, `torch.trace`, `torch.diag` and the diagonal writers
//! `diagonal_scatter`, `diag_embed` and `diagflat`: the two dims moved
//! last and merged, then every `(c + 1)`-th element picked by
//! `index_select` (indices from a recorded `arange`, so compile replays
//! it) or written by `index_copy`. The gradients are those ops'; unlike
//! PyTorch's view, `diagonal` is a copy.

use crate::Tensor;

impl Tensor {
    /// The elements at `(i, i + offset)` of dims `dim1` and `dim2`, in a new
    /// last dim (`torch.diagonal(x, offset, dim1, dim2)`); `offset > 0` is
    /// above the main diagonal, `offset < 0` below.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]);
    /// assert_eq!(x.diagonal(0, 0, 1).to_vec::<f32>(), vec![0.0, 4.0]);
    /// assert_eq!(x.diagonal(1, 0, 1).to_vec::<f32>(), vec![1.0, 5.0]);
    /// assert_eq!(x.diagonal(-1, 0, 1).to_vec::<f32>(), vec![3.0]);
    /// ```
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let plan = self.diagonal_plan(offset, dim1, dim2, "diagonal");
        self.permute(&plan.order)
            .reshape(&plan.merged)
            .index_select(-1, &plan.at)
    }

    /// `self` with diagonal `offset` of dims `dim1`, `dim2` replaced by
    /// `src` (`torch.diagonal_scatter`); `src` has the shape
    /// [`Tensor::diagonal`] would return. Gradients flow to both, as
    /// PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let out = Tensor::zeros(&[2, 3]).diagonal_scatter(&Tensor::ones(&[2]), 1, 0, 1);
    /// assert_eq!(out.to_vec::<f32>(), vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn diagonal_scatter(
        &self,
        src: &Tensor,
        offset: isize,
        dim1: isize,
        dim2: isize,
    ) -> Tensor {
        let plan = self.diagonal_plan(offset, dim1, dim2, "diagonal_scatter");
        let mut want: Vec<usize> = plan.merged.iter().map(|&d| d as usize).collect();
        *want.last_mut().expect("the merged dims") = plan.at.numel();
        assert!(
            src.shape() == want,
            "diagonal_scatter: src has shape {:?}, but diagonal {offset} of dims {dim1} and {dim2} of shape {:?} has \
             shape {want:?}",
            src.shape(),
            self.shape()
        );
        let permuted = self.permute(&plan.order);
        let moved: Vec<isize> = permuted.shape().iter().map(|&d| d as isize).collect();
        let filled = (permuted.reshape(&plan.merged))
            .index_copy(-1, &plan.at, src)
            .reshape(&moved);
        let mut back = vec![0isize; plan.order.len()];
        for (i, &d) in plan.order.iter().enumerate() {
            back[d as usize] = i as isize;
        }
        filled.permute(&back)
    }

    /// Each last-dim vector of `self` placed on diagonal `offset` of a new
    /// pair of dims `dim1`, `dim2` of the result, zeros elsewhere
    /// (`torch.diag_embed`; PyTorch's defaults are `0, -2, -1`): a batch
    /// of diagonal matrices. The gradient is the diagonal back.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let m = v.diag_embed(0, -2, -1);
    /// assert_eq!(m.shape(), &[2, 2, 2]);
    /// assert_eq!(m.to_vec::<f32>(), vec![1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn diag_embed(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let rank = self.ndim().max(1) + 1;
        let norm = |d: isize| {
            let r = if d < 0 { d + rank as isize } else { d };
            assert!(
                (0..rank as isize).contains(&r),
                "diag_embed: dim {d} is out of range for the result's {rank} dims (input shape {:?})",
                self.shape()
            );
            r as usize
        };
        let (d1, d2) = (norm(dim1), norm(dim2));
        assert!(
            d1 != d2,
            "diag_embed: dim1 and dim2 cannot be the same dim ({dim1} and {dim2})"
        );
        let x = if self.ndim() == 0 {
            self.reshape(&[1])
        } else {
            self.clone()
        };
        let (n, batch) = x.shape().split_last().expect("at least one dim");
        let m = n + offset.unsigned_abs();
        let mut batch = batch.iter();
        let shape: Vec<usize> = (0..rank)
            .map(|i| {
                if i == d1 || i == d2 {
                    m
                } else {
                    *batch.next().expect("a batch dim")
                }
            })
            .collect();
        let zeros = super::creation::filled_on(&shape, 0.0, x.dtype(), x.device());
        zeros.diagonal_scatter(&x, offset, d1 as isize, d2 as isize)
    }

    /// The flattened input on diagonal `offset` of a square matrix
    /// (`torch.diagflat`): [`Tensor::diag`] of `self.flatten_all()`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2]);
    /// assert_eq!(x.diagflat(0).to_vec::<f32>(), vec![1.0, 0.0, 0.0, 2.0]);
    /// ```
    pub fn diagflat(&self, offset: isize) -> Tensor {
        self.flatten_all().diag(offset)
    }

    /// Where diagonal `offset` of dims `dim1`, `dim2` lies: those two dims
    /// moved last (`order`) and merged (`merged`), and the positions
    /// along the merged dim (`at`).
    #[track_caller]
    fn diagonal_plan(&self, offset: isize, dim1: isize, dim2: isize, op: &str) -> DiagonalPlan {
        let (d1, d2) = (self.dim(dim1, op), self.dim(dim2, op));
        assert!(
            d1 != d2,
            "{op}: dim1 and dim2 cannot be the same dim ({dim1} and {dim2} of shape {:?})",
            self.shape()
        );
        let (r, c) = (self.shape()[d1] as isize, self.shape()[d2] as isize);
        let n = if offset >= 0 {
            r.min(c - offset)
        } else {
            (r + offset).min(c)
        }
        .max(0) as usize;
        let start = if offset >= 0 { offset } else { -offset * c }.max(0) as i64;
        let rest: Vec<usize> = (0..self.ndim()).filter(|&d| d != d1 && d != d2).collect();
        let order: Vec<isize> = rest.iter().chain([&d1, &d2]).map(|&d| d as isize).collect();
        let mut merged: Vec<isize> = rest.iter().map(|&d| self.shape()[d] as isize).collect();
        merged.push(r * c);
        let step = c as i64 + 1;
        let at = Tensor::arange_on((start..start + n as i64 * step, step), self.device());
        DiagonalPlan { order, merged, at }
    }

    /// `torch.diag`: a vector becomes a square matrix with it on diagonal
    /// `offset` (above the main one when positive) and zeros elsewhere; a
    /// matrix gives its diagonal `offset` as a vector.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let v = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// assert_eq!(v.diag(0).to_vec::<f32>(), vec![1.0, 0.0, 0.0, 2.0]);
    /// assert_eq!(v.diag(1).to_vec::<f32>(), vec![0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
    /// assert_eq!(v.diag(1).diag(1).to_vec::<f32>(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn diag(&self, offset: isize) -> Tensor {
        match self.ndim() {
            1 => {
                let n = self.shape()[0];
                let m = n + offset.unsigned_abs();
                let step = m as i64 + 1;
                let start = if offset >= 0 {
                    offset as i64
                } else {
                    offset.unsigned_abs() as i64 * m as i64
                };
                let at = Tensor::arange_on((start..start + n as i64 * step, step), self.device());
                let zeros = super::creation::filled_on(&[m * m], 0.0, self.dtype(), self.device());
                zeros
                    .index_copy(0, &at, self)
                    .reshape(&[m as isize, m as isize])
            }
            2 => self.diagonal(offset, 0, 1),
            _ => panic!(
                "diag: expects a vector or a matrix, got shape {:?}",
                self.shape()
            ),
        }
    }

    /// The sum of a matrix's main diagonal (`torch.trace`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]);
    /// assert_eq!(x.trace().item::<f32>(), 4.0);
    /// ```
    pub fn trace(&self) -> Tensor {
        assert!(
            self.ndim() == 2,
            "trace: expects a matrix, got shape {:?}",
            self.shape()
        );
        self.diagonal(0, 0, 1).sum()
    }
}

/// See [`Tensor::diagonal_plan`].
struct DiagonalPlan {
    order: Vec<isize>,
    merged: Vec<isize>,
    at: Tensor,
}
