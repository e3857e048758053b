//! Triangles of matrices (`tril`, `triu`), masked on the device.

use crate::trace::{self, Attr};
use crate::{Device, Tensor};

impl Tensor {
    fn triangle(&self, k: isize, lower: bool, op: &str) -> Tensor {
        assert!(
            self.ndim() >= 2,
            "{op}: expects a tensor with >= 2 dims, got shape {:?}",
            self.shape()
        );
        let (r, c) = (self.shape()[self.ndim() - 2], self.shape()[self.ndim() - 1]);
        let (cols, rows_plus_k) = diagonal_grid(r, c, k, self.device());
        let mask = match lower {
            true => cols.gt(&rows_plus_k),
            false => cols.lt(&rows_plus_k),
        };
        self.masked_fill(&mask, 0.0)
    }

    /// Lower triangle (elements with `col - row <= k`), the rest zeroed.
    pub fn tril(&self, k: isize) -> Tensor {
        trace::op(
            "tril",
            [self],
            || vec![("k", Attr::Int(k as i64))],
            || self.triangle(k, true, "tril"),
        )
    }

    /// Upper triangle (elements with `col - row >= k`), the rest zeroed.
    pub fn triu(&self, k: isize) -> Tensor {
        trace::op(
            "triu",
            [self],
            || vec![("k", Attr::Int(k as i64))],
            || self.triangle(k, false, "triu"),
        )
    }
}

/// The column index `j` as `[1, c]` and the row index plus `k`, `i + k`, as
/// `[r, 1]` (i64, made on `device`): compared, they broadcast to an
/// `[r, c]` mask of the elements on one side of diagonal `k`, with nothing
/// built on the host (a mask uploaded from the host would stop a CUDA graph
/// capture, and costs a copy per call on a GPU).
pub(crate) fn diagonal_grid(r: usize, c: usize, k: isize, device: Device) -> (Tensor, Tensor) {
    let cols = Tensor::arange_on(0..c as i64, device).reshape(&[1, c as isize]);
    let k = k as i64;
    let rows_plus_k = Tensor::arange_on(k..r as i64 + k, device).reshape(&[r as isize, 1]);
    (cols, rows_plus_k)
}
