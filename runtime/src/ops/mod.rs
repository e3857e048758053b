//! Every op: forward (through the device seam) and backward side by side,
//! one file per family.

pub(crate) mod activation;
pub(crate) mod binary;
pub(crate) mod combine;
pub(crate) mod conv;
pub(crate) mod conv_transpose;
pub(crate) mod creation;
pub(crate) mod diagonal;
pub(crate) mod einsum;
pub(crate) mod index;
pub(crate) mod inplace;
pub(crate) mod linalg;
pub(crate) mod logic;
pub(crate) mod math;
pub(crate) mod norm;
pub(crate) mod order;
pub(crate) mod pool;
pub(crate) mod put;
pub(crate) mod reduce;
pub(crate) mod scatter;
pub(crate) mod select;
pub(crate) mod shape;
pub(crate) mod softmax;
pub(crate) mod special;
pub(crate) mod statistics;
pub(crate) mod structured;
pub(crate) mod triangle;
pub(crate) mod unary;
pub(crate) mod view;

use crate::Tensor;

/// The shape two shapes broadcast to, or a panic naming the op.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize], op: &str) -> Vec<usize> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => panic!(
                "{op}: shapes {a:?} and {b:?} cannot be broadcast together (dim {i}: {da} vs {db})"
            ),
        };
    }
    out
}

/// `t` as a dense buffer from offset 0, copied only when it is not one
/// already (what the GPU kernels that take plain pointers read).
pub(crate) fn dense0(t: &Tensor) -> Tensor {
    if t.is_contiguous() && t.layout().offset == 0 {
        t.detach()
    } else {
        t.contiguous_copy()
    }
}

/// Panics unless both tensors are on one device.
pub(crate) fn same_device(a: &Tensor, b: &Tensor, op: &str) {
    assert!(
        a.device() == b.device(),
        "{op}: expected all tensors on one device, got {} and {} (shapes {:?} and {:?})",
        a.device(),
        b.device(),
        a.shape(),
        b.shape()
    );
}

impl Tensor {
    /// Sums a broadcast gradient back down to `shape` (the adjoint of expand).
    pub(crate) fn sum_to(&self, shape: &[usize]) -> Tensor {
        if self.shape() == shape {
            return self.clone();
        }
        let lead = self.ndim() - shape.len();
        let mut dims: Vec<isize> = (0..lead as isize).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push((lead + i) as isize);
            }
        }
        let summed = if dims.is_empty() {
            self.clone()
        } else {
            self.sum_over(&dims, true)
        };
        let kept: Vec<isize> = summed.shape()[lead..].iter().map(|&d| d as isize).collect();
        summed.reshape(&kept)
    }
}
