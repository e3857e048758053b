//! Pooling layers and their functions: `MaxPool1d/2d`, `AvgPool1d/2d`
//! (with `ceil_mode`, `count_include_pad`, `divisor_override`), the
//! power-average `LPPool1d/2d`, and the adaptive `AdaptiveAvgPool1d/2d`,
//! `AdaptiveMaxPool1d/2d`. The 1-D forms
//! are the 2-D ones over a height of one; every layer takes batched or
//! unbatched input, as PyTorch's.

use super::module::{Forward, py_bool, stateless_module};
use crate::Tensor;
use crate::ops::pool::AvgPoolCount;

/// `F.max_pool2d` with `ceil_mode` (a partial last window counts).
///
/// ```
/// use tapir_runtime::{nn::max_pool2d, Tensor};
/// let x = Tensor::arange_f(0.0, 9.0, 1.0).reshape(&[1, 1, 3, 3]);
/// let y = max_pool2d(&x, (2, 2), (2, 2), (0, 0), (1, 1), true);
/// assert_eq!(y.to_vec::<f32>(), vec![4.0, 5.0, 7.0, 8.0]);
/// ```
pub fn max_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    ceil_mode: bool,
) -> Tensor {
    x.max_pool2d_ceil(kernel, stride, padding, dilation, ceil_mode)
}

/// `F.avg_pool2d` with every option: `ceil_mode`, whether the zero
/// padding counts in a window's divisor (`count_include_pad`, PyTorch's
/// default true), and a fixed divisor (`divisor_override`).
///
/// ```
/// use tapir_runtime::{nn::avg_pool2d, Tensor};
/// let x = Tensor::ones(&[1, 1, 2, 2]);
/// // Padding 1: each 2x2 window holds one value and three zeros.
/// let with_pad = avg_pool2d(&x, (2, 2), (2, 2), (1, 1), false, true, None);
/// let without = avg_pool2d(&x, (2, 2), (2, 2), (1, 1), false, false, None);
/// assert_eq!((with_pad.to_vec::<f32>()[0], without.to_vec::<f32>()[0]), (0.25, 1.0));
/// ```
pub fn avg_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
) -> Tensor {
    assert!(
        divisor_override != Some(0),
        "avg_pool2d: divisor_override must be positive"
    );
    let count = AvgPoolCount {
        ceil_mode,
        include_pad: count_include_pad,
        divisor_override,
    };
    x.avg_pool2d_full(kernel, stride, padding, count)
}

/// `F.adaptive_avg_pool2d`: output cell `i` averages rows
/// `floor(i H / oh) .. ceil((i + 1) H / oh)`, and likewise columns.
///
/// ```
/// use tapir_runtime::{nn::adaptive_avg_pool2d, Tensor};
/// let x = Tensor::arange_f(0.0, 3.0, 1.0).reshape(&[1, 1, 1, 3]);
/// let y = adaptive_avg_pool2d(&x, (1, 2));
/// assert_eq!(y.to_vec::<f32>(), vec![0.5, 1.5]);
/// ```
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: (usize, usize)) -> Tensor {
    let (h, w) = spatial(x, "adaptive_avg_pool2d");
    if output_size == (1, 1) {
        // One op of its own: ONNX has GlobalAveragePool for it.
        return crate::trace::op("global_avg_pool2d", [x], Vec::new, || {
            x.mean_dims(&[2, 3], true)
        });
    }
    let (oh, ow) = output_size;
    if h.is_multiple_of(oh) && w.is_multiple_of(ow) {
        // Equal windows that tile the input: PyTorch's adaptive pooling
        // is then average pooling, one op (its backward one pass, not a
        // full-size gradient per window).
        let k = (h / oh, w / ow);
        return x.avg_pool2d(k, k, (0, 0));
    }
    adaptive_cells(x, output_size, |cell| cell.mean_dims(&[2, 3], true))
}

/// `F.adaptive_max_pool2d` (without indices): the maximum of the same
/// windows [`adaptive_avg_pool2d`] averages.
///
/// ```
/// use tapir_runtime::{nn::adaptive_max_pool2d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 5.0, 2.0], &[1, 1, 1, 3]);
/// assert_eq!(adaptive_max_pool2d(&x, (1, 2)).to_vec::<f32>(), vec![5.0, 5.0]);
/// ```
pub fn adaptive_max_pool2d(x: &Tensor, output_size: (usize, usize)) -> Tensor {
    let (h, w) = spatial(x, "adaptive_max_pool2d");
    let (oh, ow) = output_size;
    if h.is_multiple_of(oh) && w.is_multiple_of(ow) {
        let k = (h / oh, w / ow);
        return x.max_pool2d(k, k, (0, 0), (1, 1));
    }
    adaptive_cells(x, output_size, |cell| {
        cell.amax_dim(3, true).amax_dim(2, true)
    })
}

/// `F.lp_pool2d`: each window's `(Σ xᵖ)^(1/p)` for `norm_type` p, over
/// `[N, C, H, W]` or `[C, H, W]`; stride defaults to the kernel, no
/// padding. As PyTorch computes it: an average pool of `xᵖ` times the
/// kernel's area (so a partial `ceil_mode` window is scaled as a full
/// one), and a window summing to zero gets a zero gradient.
///
/// ```
/// use tapir_runtime::{nn::lp_pool2d, Tensor};
/// let x = Tensor::from_vec(vec![3.0f32, 4.0, 0.0, 0.0], &[1, 1, 2, 2]);
/// assert_eq!(lp_pool2d(&x, 2.0, (2, 2), None, false).to_vec::<f32>(), [5.0]);
/// ```
pub fn lp_pool2d(
    x: &Tensor,
    norm_type: f64,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    ceil_mode: bool,
) -> Tensor {
    pooled(x, 2, "lp_pool2d", |x| {
        lp_pool(x, norm_type, kernel, stride.unwrap_or(kernel), ceil_mode)
    })
}

/// `F.lp_pool1d`: [`lp_pool2d`] over the last dim of `[N, C, L]` or `[C, L]`.
///
/// ```
/// use tapir_runtime::{nn::lp_pool1d, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 2.0, 2.0], &[1, 4]);
/// assert_eq!(lp_pool1d(&x, 1.0, 2, None, false).to_vec::<f32>(), [3.0, 4.0]);
/// ```
pub fn lp_pool1d(
    x: &Tensor,
    norm_type: f64,
    kernel: usize,
    stride: Option<usize>,
    ceil_mode: bool,
) -> Tensor {
    pooled(x, 1, "lp_pool1d", |x| {
        let stride = (1, stride.unwrap_or(kernel));
        lp_pool(x, norm_type, (1, kernel), stride, ceil_mode)
    })
}

fn lp_pool(
    x: &Tensor,
    p: f64,
    kernel: (usize, usize),
    stride: (usize, usize),
    ceil_mode: bool,
) -> Tensor {
    assert!(
        p.is_finite() && p != 0.0,
        "lp_pool: norm_type must be finite and nonzero, got {p}"
    );
    let mean = avg_pool2d(&x.powf(p), kernel, stride, (0, 0), ceil_mode, true, None);
    // sign * relu(abs) is the identity in value; it is PyTorch's formula
    // because relu's backward is a select, zeroing the NaN that pow's
    // infinite slope at zero would otherwise send back.
    let sum = &(&mean.sign() * &mean.abs().relu()) * (kernel.0 * kernel.1) as f64;
    sum.powf(1.0 / p)
}

/// The height and width of a `[N, C, H, W]` input, checked.
fn spatial(x: &Tensor, op: &str) -> (usize, usize) {
    assert!(
        x.ndim() == 4,
        "{op}: expects [N, C, H, W], got shape {:?}",
        x.shape()
    );
    (x.shape()[2], x.shape()[3])
}

/// Adaptive pooling of uneven windows: `reduce` of each cell, joined.
fn adaptive_cells(
    x: &Tensor,
    (oh, ow): (usize, usize),
    reduce: impl Fn(Tensor) -> Tensor,
) -> Tensor {
    let (h, w) = (x.shape()[2], x.shape()[3]);
    assert!(
        oh > 0 && ow > 0,
        "adaptive pooling: output size ({oh}, {ow}) must be positive"
    );
    let span = |i: usize, o: usize, n: usize| (i * n / o, ((i + 1) * n).div_ceil(o));
    let rows: Vec<Tensor> = (0..oh)
        .map(|i| {
            let (r0, r1) = span(i, oh, h);
            let cells: Vec<Tensor> = (0..ow)
                .map(|j| {
                    let (c0, c1) = span(j, ow, w);
                    reduce(x.narrow(2, r0, r1 - r0).narrow(3, c0, c1 - c0))
                })
                .collect();
            Tensor::cat(&cells.iter().collect::<Vec<_>>(), 3)
        })
        .collect();
    Tensor::cat(&rows.iter().collect::<Vec<_>>(), 2)
}

/// `F.max_pool2d(..., return_indices=True)` with `ceil_mode`, over
/// `[N, C, H, W]` or `[C, H, W]`: the maxima and each one's flat index
/// `ih * W + iw` in its input plane (what [`super::max_unpool2d`] takes).
///
/// ```
/// use tapir_runtime::{nn::max_pool2d_with_indices, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 4.0, 3.0, 2.0, 0.0, 5.0], &[1, 2, 3]);
/// let (v, i) = max_pool2d_with_indices(&x, (2, 2), (2, 2), (0, 0), (1, 1), true);
/// assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![4.0, 5.0], vec![1, 5]));
/// ```
pub fn max_pool2d_with_indices(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    ceil_mode: bool,
) -> (Tensor, Tensor) {
    let (batched, x) = batch_of(x, 2, "max_pool2d_with_indices");
    let (v, i) = x.max_pool2d_ceil_with_indices(kernel, stride, padding, dilation, ceil_mode);
    (unbatch(v, 2, batched), unbatch(i, 2, batched))
}

/// `x` as `[N, C, H, W]` (a 1-D input gets a height of one, an unbatched
/// one a batch of one), with whether it had a batch.
fn batch_of(x: &Tensor, spatial: usize, layer: &str) -> (bool, Tensor) {
    let batched = x.ndim() == spatial + 2;
    assert!(
        batched || x.ndim() == spatial + 1,
        "{layer}: expected a {}-D or {}-D input, got shape {:?}",
        spatial + 1,
        spatial + 2,
        x.shape()
    );
    let x = if batched { x.clone() } else { x.unsqueeze(0) };
    (batched, if spatial == 1 { x.unsqueeze(2) } else { x })
}

/// [`batch_of`] undone on an output.
fn unbatch(y: Tensor, spatial: usize, batched: bool) -> Tensor {
    let y = if spatial == 1 { y.squeeze_dim(2) } else { y };
    if batched { y } else { y.squeeze_dim(0) }
}

/// Runs a 2-D pooling `f` on `x` with `spatial` trailing dims (1 or 2),
/// batched (`[N, C, ..]`) or not (`[C, ..]`): a 1-D input gets a height
/// of one, an unbatched one a batch of one, both taken off after.
pub(super) fn pooled(
    x: &Tensor,
    spatial: usize,
    layer: &str,
    f: impl Fn(&Tensor) -> Tensor,
) -> Tensor {
    let (batched, x) = batch_of(x, spatial, layer);
    unbatch(f(&x), spatial, batched)
}

/// `nn.MaxPool2d`: fields as PyTorch's arguments; [`MaxPool2d::new`] is
/// `nn.MaxPool2d(kernel)` (stride the kernel, no padding).
///
/// ```
/// use tapir_runtime::{nn::{Forward, MaxPool2d}, Tensor};
/// let pool = MaxPool2d { ceil_mode: true, ..MaxPool2d::new(2) };
/// assert_eq!(pool.forward(&Tensor::randn(&[2, 3, 5, 5])).shape(), &[2, 3, 3, 3]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MaxPool2d {
    /// Window height and width.
    pub kernel: (usize, usize),
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: (usize, usize),
    /// Implicit `-inf` padding on each side.
    pub padding: (usize, usize),
    /// Spacing between window taps.
    pub dilation: (usize, usize),
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl MaxPool2d {
    /// Square window; stride defaults to the kernel size, as PyTorch.
    pub fn new(kernel: usize) -> MaxPool2d {
        MaxPool2d {
            kernel: (kernel, kernel),
            stride: (kernel, kernel),
            padding: (0, 0),
            dilation: (1, 1),
            ceil_mode: false,
        }
    }
}

impl MaxPool2d {
    /// `nn.MaxPool2d(..., return_indices=True)`: the output and each
    /// maximum's flat index in its input plane (for [`super::MaxUnpool2d`]).
    pub fn forward_with_indices(&self, x: &Tensor) -> (Tensor, Tensor) {
        let s = *self;
        max_pool2d_with_indices(x, s.kernel, s.stride, s.padding, s.dilation, s.ceil_mode)
    }
}

impl Forward for MaxPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = *self;
        pooled(x, 2, "MaxPool2d", |x| {
            max_pool2d(x, s.kernel, s.stride, s.padding, s.dilation, s.ceil_mode)
        })
    }
}

/// `nn.MaxPool1d` over the last dim of `[N, C, L]` or `[C, L]`.
///
/// ```
/// use tapir_runtime::{nn::{Forward, MaxPool1d}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 5.0, 4.0], &[1, 5]);
/// assert_eq!(MaxPool1d::new(2).forward(&x).to_vec::<f32>(), vec![3.0, 5.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MaxPool1d {
    /// Window length.
    pub kernel: usize,
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: usize,
    /// Implicit `-inf` padding on each side.
    pub padding: usize,
    /// Spacing between window taps.
    pub dilation: usize,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl MaxPool1d {
    /// `nn.MaxPool1d(kernel)`: stride the kernel, no padding.
    pub fn new(kernel: usize) -> MaxPool1d {
        MaxPool1d {
            kernel,
            stride: kernel,
            padding: 0,
            dilation: 1,
            ceil_mode: false,
        }
    }
}

impl MaxPool1d {
    /// `nn.MaxPool1d(..., return_indices=True)`: the output and each
    /// maximum's index along the input's length.
    ///
    /// ```
    /// use tapir_runtime::{nn::MaxPool1d, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 5.0, 4.0], &[1, 5]);
    /// let (v, i) = MaxPool1d::new(2).forward_with_indices(&x);
    /// assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![3.0, 5.0], vec![1, 3]));
    /// ```
    pub fn forward_with_indices(&self, x: &Tensor) -> (Tensor, Tensor) {
        let s = *self;
        let (batched, x) = batch_of(x, 1, "MaxPool1d");
        let (k, st, p, d) = (
            (1, s.kernel),
            (1, s.stride),
            (0, s.padding),
            (1, s.dilation),
        );
        let (v, i) = x.max_pool2d_ceil_with_indices(k, st, p, d, s.ceil_mode);
        (unbatch(v, 1, batched), unbatch(i, 1, batched))
    }
}

impl Forward for MaxPool1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        super::pool1d::max_pool1d_named(x, *self, "MaxPool1d")
    }
}

/// `nn.AvgPool2d`: fields as PyTorch's arguments; [`AvgPool2d::new`] is
/// `nn.AvgPool2d(kernel)` (stride the kernel, no padding, padding counted).
///
/// ```
/// use tapir_runtime::{nn::{AvgPool2d, Forward}, Tensor};
/// let pool = AvgPool2d { padding: (1, 1), count_include_pad: false, ..AvgPool2d::new(2) };
/// assert_eq!(pool.forward(&Tensor::ones(&[1, 2, 2])).to_vec::<f32>(), vec![1.0; 4]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AvgPool2d {
    /// Window height and width.
    pub kernel: (usize, usize),
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: (usize, usize),
    /// Implicit zero padding on each side.
    pub padding: (usize, usize),
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
    /// Whether the padding counts in a window's divisor (true).
    pub count_include_pad: bool,
    /// A fixed divisor instead of the window's size.
    pub divisor_override: Option<usize>,
}

impl AvgPool2d {
    /// `nn.AvgPool2d(kernel)` with stride = kernel, no padding.
    pub fn new(kernel: usize) -> AvgPool2d {
        AvgPool2d {
            kernel: (kernel, kernel),
            stride: (kernel, kernel),
            padding: (0, 0),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

impl Forward for AvgPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = *self;
        pooled(x, 2, "AvgPool2d", |x| {
            avg_pool2d(
                x,
                s.kernel,
                s.stride,
                s.padding,
                s.ceil_mode,
                s.count_include_pad,
                s.divisor_override,
            )
        })
    }
}

/// `nn.AvgPool1d` over the last dim of `[N, C, L]` or `[C, L]`.
///
/// ```
/// use tapir_runtime::{nn::{AvgPool1d, Forward}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 6.0], &[1, 1, 4]);
/// assert_eq!(AvgPool1d::new(2).forward(&x).to_vec::<f32>(), vec![2.0, 4.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AvgPool1d {
    /// Window length.
    pub kernel: usize,
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: usize,
    /// Implicit zero padding on each side.
    pub padding: usize,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
    /// Whether the padding counts in a window's divisor (true).
    pub count_include_pad: bool,
}

impl AvgPool1d {
    /// `nn.AvgPool1d(kernel)`: stride the kernel, no padding.
    pub fn new(kernel: usize) -> AvgPool1d {
        AvgPool1d {
            kernel,
            stride: kernel,
            padding: 0,
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}

impl Forward for AvgPool1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        super::pool1d::avg_pool1d_named(x, *self, "AvgPool1d")
    }
}

/// `nn.AdaptiveAvgPool2d(output_size)`: see [`adaptive_avg_pool2d`].
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveAvgPool2d {
    /// Output height and width.
    pub output_size: (usize, usize),
}

impl Forward for AdaptiveAvgPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        pooled(x, 2, "AdaptiveAvgPool2d", |x| {
            adaptive_avg_pool2d(x, self.output_size)
        })
    }
}

/// `nn.AdaptiveMaxPool2d(output_size)`: see [`adaptive_max_pool2d`].
///
/// ```
/// use tapir_runtime::{nn::{AdaptiveMaxPool2d, Forward}, Tensor};
/// let pool = AdaptiveMaxPool2d { output_size: (2, 3) };
/// assert_eq!(pool.forward(&Tensor::randn(&[4, 5, 7])).shape(), &[4, 2, 3]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveMaxPool2d {
    /// Output height and width.
    pub output_size: (usize, usize),
}

impl Forward for AdaptiveMaxPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        pooled(x, 2, "AdaptiveMaxPool2d", |x| {
            adaptive_max_pool2d(x, self.output_size)
        })
    }
}

/// `nn.AdaptiveAvgPool1d(output_size)` over the last dim.
///
/// ```
/// use tapir_runtime::{nn::{AdaptiveAvgPool1d, Forward}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0], &[1, 3]);
/// let y = AdaptiveAvgPool1d { output_size: 2 }.forward(&x);
/// assert_eq!(y.to_vec::<f32>(), vec![2.0, 4.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveAvgPool1d {
    /// Output length.
    pub output_size: usize,
}

impl Forward for AdaptiveAvgPool1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        super::pool1d::adaptive_pool1d(x, self.output_size, false, "AdaptiveAvgPool1d")
    }
}

/// `nn.AdaptiveMaxPool1d(output_size)` over the last dim.
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveMaxPool1d {
    /// Output length.
    pub output_size: usize,
}

impl Forward for AdaptiveMaxPool1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        super::pool1d::adaptive_pool1d(x, self.output_size, true, "AdaptiveMaxPool1d")
    }
}

/// `nn.LPPool2d(norm_type, kernel_size, stride=None, ceil_mode=False)`:
/// see [`lp_pool2d`].
///
/// ```
/// use tapir_runtime::{nn::{Forward, LPPool2d}, Tensor};
/// let pool = LPPool2d::new(2.0, 3);
/// assert_eq!(pool.forward(&Tensor::randn(&[2, 4, 7, 7])).shape(), &[2, 4, 2, 2]);
/// assert_eq!(pool.to_string(), "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LPPool2d {
    /// The p of the power average.
    pub norm_type: f64,
    /// Window height and width.
    pub kernel: (usize, usize),
    /// Step between windows (None: the kernel).
    pub stride: Option<(usize, usize)>,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl LPPool2d {
    /// `nn.LPPool2d(norm_type, kernel)`: square window, stride the kernel.
    pub fn new(norm_type: f64, kernel: usize) -> LPPool2d {
        LPPool2d {
            norm_type,
            kernel: (kernel, kernel),
            stride: None,
            ceil_mode: false,
        }
    }
}

impl Forward for LPPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        lp_pool2d(x, self.norm_type, self.kernel, self.stride, self.ceil_mode)
    }
}

/// `nn.LPPool1d(norm_type, kernel_size, stride=None, ceil_mode=False)`:
/// see [`lp_pool1d`].
#[derive(Debug, Clone, Copy)]
pub struct LPPool1d {
    /// The p of the power average.
    pub norm_type: f64,
    /// Window length.
    pub kernel: usize,
    /// Step between windows (None: the kernel).
    pub stride: Option<usize>,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl LPPool1d {
    /// `nn.LPPool1d(norm_type, kernel)`: stride the kernel.
    pub fn new(norm_type: f64, kernel: usize) -> LPPool1d {
        LPPool1d {
            norm_type,
            kernel,
            stride: None,
            ceil_mode: false,
        }
    }
}

impl Forward for LPPool1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        lp_pool1d(x, self.norm_type, self.kernel, self.stride, self.ceil_mode)
    }
}

/// A norm type as a Python user most likely wrote it (2, not 2.0).
pub(super) fn norm_type_repr(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        p.to_string()
    }
}

/// A square pair as one number, as PyTorch prints an int argument.
pub(super) fn pair_repr((a, b): (usize, usize)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("({a}, {b})")
    }
}

stateless_module! {
    MaxPool2d => |s| format!(
        "MaxPool2d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
        pair_repr(s.kernel), pair_repr(s.stride), pair_repr(s.padding), pair_repr(s.dilation),
        py_bool(s.ceil_mode)
    );
    MaxPool1d => |s| format!(
        "MaxPool1d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
        s.kernel, s.stride, s.padding, s.dilation, py_bool(s.ceil_mode)
    );
    AvgPool2d => |s| format!(
        "AvgPool2d(kernel_size={}, stride={}, padding={})",
        pair_repr(s.kernel), pair_repr(s.stride), pair_repr(s.padding)
    );
    AvgPool1d => |s| format!(
        "AvgPool1d(kernel_size=({},), stride=({},), padding=({},))",
        s.kernel, s.stride, s.padding
    );
    LPPool2d => |s| format!(
        "LPPool2d(norm_type={}, kernel_size={}, stride={}, ceil_mode={})",
        norm_type_repr(s.norm_type), pair_repr(s.kernel),
        s.stride.map_or("None".to_string(), pair_repr), py_bool(s.ceil_mode)
    );
    LPPool1d => |s| format!(
        "LPPool1d(norm_type={}, kernel_size={}, stride={}, ceil_mode={})",
        norm_type_repr(s.norm_type), s.kernel,
        s.stride.map_or("None".to_string(), |v| v.to_string()), py_bool(s.ceil_mode)
    );
    AdaptiveAvgPool2d => |s| format!("AdaptiveAvgPool2d(output_size={})", pair_repr(s.output_size));
    AdaptiveMaxPool2d => |s| format!("AdaptiveMaxPool2d(output_size={})", pair_repr(s.output_size));
    AdaptiveAvgPool1d => |s| format!("AdaptiveAvgPool1d(output_size={})", s.output_size);
    AdaptiveMaxPool1d => |s| format!("AdaptiveMaxPool1d(output_size={})", s.output_size);
}
