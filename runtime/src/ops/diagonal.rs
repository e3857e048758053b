//! `torch.diagonal`, `torch.trace` and `torch.diag`: the two dims moved
//! last and merged, then every `(c + 1)`-th element picked by
//! `index_select` (indices from a recorded `arange`, so compile replays
//! it); `diag` of a vector places it the same way with `index_copy`. The
//! gradients are those ops'; unlike PyTorch's view, `diagonal` is a copy.

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
        let (d1, d2) = (self.dim(dim1, "diagonal"), self.dim(dim2, "diagonal"));
        assert!(
            d1 != d2,
            "diagonal: dim1 and dim2 cannot be the same dim ({dim1} and {dim2} of shape {:?})",
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
        let flat = self.permute(&order).reshape(&merged);
        let step = c as i64 + 1;
        let at = Tensor::arange_on((start..start + n as i64 * step, step), self.device());
        flat.index_select(-1, &at)
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
