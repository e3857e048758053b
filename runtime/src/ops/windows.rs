//! `Tensor::unfold`: the windows of `size` elements, `step` apart, along
//! one dim, as a view (PyTorch's): the dim's stride times `step` walks the
//! windows, a new last dim with the dim's stride walks inside one, so
//! overlapping windows share their elements. The backward adds each
//! window's gradient back where it came from (`index_add` of the window
//! positions), so overlaps sum and second derivatives come free.

use crate::Tensor;
use crate::trace::{self, Attr};

impl Tensor {
    /// Every window of `size` elements, `step` apart, along `dim`
    /// (`x.unfold(dim, size, step)`): `dim` becomes the
    /// `(len - size) / step + 1` windows and a new last dim of `size`
    /// holds each one. A view of the same data, as PyTorch's (1-D
    /// convolutions by hand, sliding statistics, framing a signal).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(7);
    /// let w = x.unfold(0, 3, 2);
    /// assert_eq!(w.shape(), &[3, 3]);
    /// assert_eq!(w.to_vec::<i64>(), vec![0, 1, 2, 2, 3, 4, 4, 5, 6]);
    /// ```
    #[track_caller]
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Tensor {
        let d = self.dim(dim, "unfold");
        let len = self.shape().get(d).copied().unwrap_or(1);
        assert!(step > 0, "unfold: step must be positive, got 0");
        assert!(
            size <= len,
            "unfold: windows of size {size} do not fit in dim {dim} of length {len} (shape {:?})",
            self.shape()
        );
        let attrs = || {
            vec![
                ("dim", Attr::Int(dim as i64)),
                ("size", Attr::Int(size as i64)),
                ("step", Attr::Int(step as i64)),
            ]
        };
        trace::op("unfold", [self], attrs, || {
            if self.ndim() == 0 {
                // PyTorch: a 0-d tensor gives its one element `size` (0 or 1) times.
                return self
                    .reshape(&[1])
                    .unfold(0, size, step)
                    .reshape(&[size as isize]);
            }
            let count = (len - size) / step + 1;
            let mut layout = self.layout().clone();
            let stride = layout.strides[d];
            layout.shape[d] = count;
            layout.strides[d] = stride * step;
            layout.shape.push(size);
            layout.strides.push(stride);
            let (shape, device) = (self.shape().to_vec(), self.device());
            self.view_op(layout, "UnfoldBackward0", move |g| {
                // Window w's element j came from position w * step + j.
                let (count, size, step) = (count as i64, size as i64, step as i64);
                let starts = Tensor::arange_on((0..count * step, step), device);
                let within = Tensor::arange_on((0..size, 1), device);
                let at = (&starts.unsqueeze(1) + &within.unsqueeze(0)).flatten_all();
                let rows = g
                    .movedim(-1, d as isize + 1)
                    .flatten(d as isize, d as isize + 1);
                let zeros = super::creation::filled_on(&shape, 0.0, g.dtype(), device);
                zeros.index_add(d as isize, &at, &rows, 1.0)
            })
        })
    }
}
