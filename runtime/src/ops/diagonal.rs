//! `torch.diagonal` and `torch.trace`: the two dims moved last and merged,
//! then every `(c + 1)`-th element picked by `index_select` (indices from a
//! recorded `arange`, so compile replays it). The gradient is
//! `index_select`'s; unlike PyTorch's view, the result is a copy.

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
