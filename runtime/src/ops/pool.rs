//! 2-D max and average pooling, with PyTorch's `ceil_mode` and average
//! pooling's `count_include_pad` and `divisor_override`. Max pooling has
//! its own kernel (it was 41% of a small CNN's train step as unfold + max);
//! average pooling is unfold plus a mean, or a sum over a count of the taps
//! that count, so it gets its gradient for free. `ceil_mode` pads the
//! bottom and right edges so the last, partial window exists.

use super::conv::{Conv2dOptions, geometry};
use crate::trace::{self, Attr};
use crate::{DType, Tensor};

/// Windows along one dim of `n` values (PyTorch's `pooling_output_shape`):
/// with `ceil_mode` a partial last window counts, unless it would start in
/// the right padding. `None` when the kernel outgrows the padded input.
fn pooled_len(n: usize, k: usize, s: usize, p: usize, d: usize, ceil_mode: bool) -> Option<usize> {
    let span = (n + 2 * p).checked_sub(d * (k - 1) + 1)?;
    let mut out = if ceil_mode {
        span.div_ceil(s)
    } else {
        span / s
    } + 1;
    if ceil_mode && (out - 1) * s >= n + p {
        out -= 1;
    }
    Some(out)
}

/// What `ceil_mode` adds past the right padding of a dim for its last
/// window to fit (0 without it, or when the windows tile exactly).
fn ceil_overhang(n: usize, k: usize, s: usize, p: usize, d: usize, ceil_mode: bool) -> usize {
    match pooled_len(n, k, s, p, d, ceil_mode) {
        Some(out) if ceil_mode => ((out - 1) * s + d * (k - 1) + 1).saturating_sub(n + 2 * p),
        _ => 0,
    }
}

/// The bottom and right padding `ceil_mode` needs for a `[.., H, W]` input.
fn overhang(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    ceil_mode: bool,
) -> (usize, usize) {
    let (h, w) = (x.shape()[x.ndim() - 2], x.shape()[x.ndim() - 1]);
    (
        ceil_overhang(h, kernel.0, stride.0, padding.0, dilation.0, ceil_mode),
        ceil_overhang(w, kernel.1, stride.1, padding.1, dilation.1, ceil_mode),
    )
}

/// `x` with `value` rows below and columns right of it.
fn pad_bottom_right(x: &Tensor, (h, w): (usize, usize), value: f64) -> Tensor {
    if (h, w) == (0, 0) {
        return x.clone();
    }
    crate::nn::pad(x, &[0, w as i64, 0, h as i64], value)
}

fn check_pool(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    op: &str,
) {
    assert!(
        x.ndim() == 4,
        "{op}: expects a 4-D [N, C, H, W] input, got shape {:?}",
        x.shape()
    );
    assert!(
        x.dtype().is_float(),
        "{op}: expects a float input, got {}",
        x.dtype()
    );
    assert!(
        kernel.0 > 0 && kernel.1 > 0 && stride.0 > 0 && stride.1 > 0,
        "{op}: kernel {kernel:?} and stride {stride:?} must be positive"
    );
    assert!(
        padding.0 * 2 <= kernel.0 && padding.1 * 2 <= kernel.1,
        "{op}: padding {padding:?} should be at most half of kernel {kernel:?}"
    );
}

impl Tensor {
    /// 2-D max pooling (`F.max_pool2d`); `stride` defaults to the kernel in
    /// PyTorch — pass it explicitly. For `ceil_mode`, `nn::max_pool2d`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange_f(0.0, 16.0, 1.0).reshape(&[1, 1, 4, 4]);
    /// let y = x.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1));
    /// assert_eq!(y.to_vec::<f32>(), vec![5.0, 7.0, 13.0, 15.0]);
    /// ```
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Tensor {
        self.max_pool2d_ceil(kernel, stride, padding, dilation, false)
    }

    /// [`Tensor::max_pool2d`] with `ceil_mode`: the recorded "max_pool2d".
    pub(crate) fn max_pool2d_ceil(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        ceil_mode: bool,
    ) -> Tensor {
        let attrs = || {
            let mut a = pool_attrs(kernel, stride, padding, dilation);
            a.push(("ceil_mode", Attr::Int(ceil_mode as i64)));
            a
        };
        trace::op("max_pool2d", [self], attrs, || {
            check_pool(self, kernel, stride, padding, "max_pool2d");
            let extra = overhang(self, kernel, stride, padding, dilation, ceil_mode);
            let x = pad_bottom_right(self, extra, f64::NEG_INFINITY);
            x.max_pool2d_with_indices(kernel, stride, padding, dilation)
                .0
        })
    }

    /// [`Tensor::max_pool2d_with_indices`] with `ceil_mode`: the indices
    /// still count in the unpadded `[H, W]` plane.
    pub(crate) fn max_pool2d_ceil_with_indices(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        ceil_mode: bool,
    ) -> (Tensor, Tensor) {
        check_pool(self, kernel, stride, padding, "max_pool2d");
        let extra = overhang(self, kernel, stride, padding, dilation, ceil_mode);
        let x = pad_bottom_right(self, extra, f64::NEG_INFINITY);
        let (values, at) = x.max_pool2d_with_indices(kernel, stride, padding, dilation);
        if extra.1 == 0 {
            return (values, at);
        }
        // A -inf column never wins, so each index re-counts in the narrower
        // rows exactly (integers in f64 up to 2^53).
        let (w, padded_w) = (self.size(-1) as f64, x.size(-1) as f64);
        let flat = at.to_dtype(DType::F64);
        let row = (&flat / padded_w).floor();
        let at = &(&row * (w - padded_w)) + &flat;
        (values, at.to_dtype(DType::I64))
    }

    /// 2-D max pooling with each maximum's flat index `ih * W + iw` in its
    /// `[H, W]` plane (`F.max_pool2d(..., return_indices=True)`). A NaN in a
    /// window wins it; ties keep the first tap. Computed from the image
    /// directly (no im2col); the backward adds each gradient at its index.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 4.0, 3.0, 2.0], &[1, 1, 2, 2]);
    /// let (v, i) = x.max_pool2d_with_indices((2, 2), (2, 2), (0, 0), (1, 1));
    /// assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![4.0], vec![1]));
    /// ```
    pub fn max_pool2d_with_indices(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> (Tensor, Tensor) {
        trace::op(
            "max_pool2d_with_indices",
            [self],
            || pool_attrs(kernel, stride, padding, dilation),
            || {
                let op = "max_pool2d";
                check_pool(self, kernel, stride, padding, op);
                let opts = Conv2dOptions {
                    stride,
                    padding,
                    dilation,
                    groups: 1,
                };
                let g = geometry(self, kernel, &opts, op);
                let (oh, ow) = g.out_hw().unwrap();
                let out_shape = [g.n, g.c, oh, ow];
                let (vals, idx) = self.read().max_pool2d(self.layout(), &g);
                let indices = Tensor::from_storage(idx, &out_shape);
                let saved = indices.saved();
                let in_shape = self.shape().to_vec();
                let out = Tensor::record(
                    Tensor::from_storage(vals, &out_shape),
                    "MaxPool2DWithIndicesBackward0",
                    &[self],
                    move || {
                        move |grad: &Tensor, _: &[bool]| {
                            if crate::autograd::differentiating() {
                                // Recorded for `create_graph`: each gradient
                                // added at its index of the plane.
                                let (n, c) = (in_shape[0], in_shape[1]);
                                let plane = [n as isize, c as isize, -1];
                                let zeros = super::creation::filled_on(
                                    &[n, c, in_shape[2] * in_shape[3]],
                                    0.0,
                                    grad.dtype(),
                                    grad.device(),
                                );
                                let gi = zeros.scatter_add(
                                    2,
                                    &saved.reshape(&plane),
                                    &grad.reshape(&plane),
                                );
                                let in_shape: Vec<isize> =
                                    in_shape.iter().map(|&d| d as isize).collect();
                                return vec![Some(gi.reshape(&in_shape))];
                            }
                            let gi =
                                grad.read()
                                    .max_pool2d_backward(grad.layout(), &saved.read(), &g);
                            vec![Some(Tensor::from_storage(gi, &in_shape))]
                        }
                    },
                );
                (out, indices)
            },
        )
    }

    /// 2-D average pooling (`F.avg_pool2d` with count_include_pad = true;
    /// the other options are `nn::avg_pool2d`'s).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange_f(0.0, 16.0, 1.0).reshape(&[1, 1, 4, 4]);
    /// let y = x.avg_pool2d((2, 2), (2, 2), (0, 0));
    /// assert_eq!(y.to_vec::<f32>(), vec![2.5, 4.5, 10.5, 12.5]);
    /// ```
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        self.avg_pool2d_full(kernel, stride, padding, AvgPoolCount::default())
    }

    /// [`Tensor::avg_pool2d`] with every option: the recorded "avg_pool2d".
    pub(crate) fn avg_pool2d_full(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        count: AvgPoolCount,
    ) -> Tensor {
        let attrs = || {
            let mut a = pool_attrs(kernel, stride, padding, (1, 1));
            a.extend([
                ("ceil_mode", Attr::Int(count.ceil_mode as i64)),
                ("count_include_pad", Attr::Int(count.include_pad as i64)),
                (
                    "divisor_override",
                    Attr::Int(count.divisor_override.unwrap_or(0) as i64),
                ),
            ]);
            a
        };
        trace::op("avg_pool2d", [self], attrs, || {
            check_pool(self, kernel, stride, padding, "avg_pool2d");
            if count == AvgPoolCount::default() {
                return self.avg_pool(kernel, stride, padding);
            }
            self.avg_pool_counted(kernel, stride, padding, count)
        })
    }

    /// Every window's mean over all its taps, padding included.
    fn avg_pool(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        let (cols, [n, c, oh, ow]) = self.pool_columns(kernel, stride, padding, (0, 0));
        cols.mean_dim(1, false).reshape(&[n, c, oh, ow])
    }

    /// Every window's sum over the taps that count (PyTorch's CPU kernel:
    /// the padding up to `padding` counts with `count_include_pad`, what
    /// `ceil_mode` adds past it never), or over `divisor_override`.
    fn avg_pool_counted(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        count: AvgPoolCount,
    ) -> Tensor {
        let extra = overhang(self, kernel, stride, padding, (1, 1), count.ceil_mode);
        let (cols, [n, c, oh, ow]) = self.pool_columns(kernel, stride, padding, extra);
        let sums = cols.sum_dim(1, false).reshape(&[n, c, oh, ow]);
        if let Some(d) = count.divisor_override {
            return &sums / d as f64;
        }
        let s = self.shape();
        let ones = Tensor::full_on(&[1, 1, s[2], s[3]], 1.0, self.dtype(), self.device());
        let (taps, pad) = match count.include_pad {
            true => {
                let (p0, p1) = (padding.0 as i64, padding.1 as i64);
                (crate::nn::pad(&ones, &[p1, p1, p0, p0], 1.0), (0, 0))
            }
            false => (ones, padding),
        };
        let (taps, _) =
            pad_bottom_right(&taps, extra, 0.0).pool_columns(kernel, stride, pad, (0, 0));
        &sums / &taps.sum_dim(1, false).reshape(&[1, 1, oh, ow])
    }

    /// The windows of each plane as columns, `[N * C, kh * kw, L]` (zero
    /// padding, then `extra` rows and columns of zeros below and right),
    /// and the output shape `[N, C, oh, ow]`.
    fn pool_columns(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        extra: (usize, usize),
    ) -> (Tensor, [isize; 4]) {
        let s = self.shape().to_vec();
        let opts = Conv2dOptions {
            stride,
            padding,
            ..Conv2dOptions::default()
        };
        let planes = self.reshape(&[(s[0] * s[1]) as isize, 1, s[2] as isize, s[3] as isize]);
        let planes = pad_bottom_right(&planes, extra, 0.0);
        let g = geometry(&planes, kernel, &opts, "avg_pool2d");
        let (oh, ow) = g.out_hw().unwrap();
        let cols = planes.unfold_padded(kernel, opts, 0.0, "avg_pool2d");
        (
            cols,
            [s[0] as isize, s[1] as isize, oh as isize, ow as isize],
        )
    }
}

/// How [`Tensor::avg_pool2d_full`] sizes and divides its windows
/// (PyTorch's defaults: no ceil mode, padding counted, no override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AvgPoolCount {
    pub ceil_mode: bool,
    pub include_pad: bool,
    pub divisor_override: Option<usize>,
}

impl Default for AvgPoolCount {
    fn default() -> Self {
        AvgPoolCount {
            ceil_mode: false,
            include_pad: true,
            divisor_override: None,
        }
    }
}

/// A pooling op's attributes for replay and export.
fn pool_attrs(
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
) -> trace::Attrs {
    let pair = |p: (usize, usize)| Attr::Ints(vec![p.0 as i64, p.1 as i64]);
    vec![
        ("kernel", pair(kernel)),
        ("stride", pair(stride)),
        ("padding", pair(padding)),
        ("dilation", pair(dilation)),
    ]
}
