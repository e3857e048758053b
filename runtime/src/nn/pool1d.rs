//! The 1-D pooling functions (`F.max_pool1d`, `F.avg_pool1d`,
//! `F.adaptive_avg_pool1d`, `F.adaptive_max_pool1d`): the 2-D kernels
//! over `[N, C, 1, L]`, as the 1-D pooling modules, which call these.

use super::pool::{adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d, pooled};
use super::{AvgPool1d, MaxPool1d};
use crate::Tensor;

/// `F.max_pool1d(x, kernel, stride, padding, dilation, ceil_mode)` over
/// the last dim of `[N, C, L]` or `[C, L]` (PyTorch's default stride is
/// the kernel), as [`MaxPool1d`].
///
/// ```
/// use tapir_runtime::{nn::max_pool1d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 5.0, 2.0, 4.0, 3.0], &[1, 5]);
/// assert_eq!(max_pool1d(&x, 2, 2, 0, 1, true).to_vec::<f32>(), vec![5.0, 4.0, 3.0]);
/// ```
#[track_caller]
pub fn max_pool1d(
    x: &Tensor,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
) -> Tensor {
    let pool = MaxPool1d {
        kernel,
        stride,
        padding,
        dilation,
        ceil_mode,
    };
    max_pool1d_named(x, pool, "max_pool1d")
}

/// `F.avg_pool1d(x, kernel, stride, padding, ceil_mode,
/// count_include_pad)` over the last dim, as [`AvgPool1d`].
///
/// ```
/// use tapir_runtime::{nn::avg_pool1d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[1, 4]);
/// assert_eq!(avg_pool1d(&x, 2, 2, 0, false, true).to_vec::<f32>(), vec![2.0, 6.0]);
/// ```
#[track_caller]
pub fn avg_pool1d(
    x: &Tensor,
    kernel: usize,
    stride: usize,
    padding: usize,
    ceil_mode: bool,
    count_include_pad: bool,
) -> Tensor {
    let pool = AvgPool1d {
        kernel,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
    };
    avg_pool1d_named(x, pool, "avg_pool1d")
}

/// `F.adaptive_avg_pool1d(x, output_size)`: the last dim averaged down to
/// `output_size` windows (PyTorch's window bounds).
///
/// ```
/// use tapir_runtime::{nn::adaptive_avg_pool1d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0], &[1, 5]);
/// assert_eq!(adaptive_avg_pool1d(&x, 2).to_vec::<f32>(), vec![2.0, 4.0]);
/// ```
#[track_caller]
pub fn adaptive_avg_pool1d(x: &Tensor, output_size: usize) -> Tensor {
    adaptive_pool1d(x, output_size, false, "adaptive_avg_pool1d")
}

/// `F.adaptive_max_pool1d(x, output_size)`: the last dim's maxima over
/// `output_size` windows.
///
/// ```
/// use tapir_runtime::{nn::adaptive_max_pool1d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 7.0, 3.0, 4.0, 5.0], &[1, 5]);
/// assert_eq!(adaptive_max_pool1d(&x, 2).to_vec::<f32>(), vec![7.0, 5.0]);
/// ```
#[track_caller]
pub fn adaptive_max_pool1d(x: &Tensor, output_size: usize) -> Tensor {
    adaptive_pool1d(x, output_size, true, "adaptive_max_pool1d")
}

#[track_caller]
pub(super) fn max_pool1d_named(x: &Tensor, s: MaxPool1d, layer: &str) -> Tensor {
    pooled(x, 1, layer, |x| {
        let (k, st, p, d) = (
            (1, s.kernel),
            (1, s.stride),
            (0, s.padding),
            (1, s.dilation),
        );
        max_pool2d(x, k, st, p, d, s.ceil_mode)
    })
}

#[track_caller]
pub(super) fn avg_pool1d_named(x: &Tensor, s: AvgPool1d, layer: &str) -> Tensor {
    pooled(x, 1, layer, |x| {
        let (k, st, p) = ((1, s.kernel), (1, s.stride), (0, s.padding));
        avg_pool2d(x, k, st, p, s.ceil_mode, s.count_include_pad, None)
    })
}

#[track_caller]
pub(super) fn adaptive_pool1d(x: &Tensor, output_size: usize, max: bool, layer: &str) -> Tensor {
    pooled(x, 1, layer, |x| match max {
        true => adaptive_max_pool2d(x, (1, output_size)),
        false => adaptive_avg_pool2d(x, (1, output_size)),
    })
}
