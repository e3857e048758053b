//! Volumetric pooling: `MaxPool3d`, `AvgPool3d`, `LPPool3d`,
//! `AdaptiveAvgPool3d` and `AdaptiveMaxPool3d` with their functions, over `[N, C, D, H, W]` or
//! unbatched `[C, D, H, W]`.
//!
//! A box window is separable, so each is two 2-D poolings: over the height
//! and width of every depth slice, then over the depth of every output
//! pixel (a `(kD, 1)` window). The maximum of the maxima is the maximum,
//! and the first of the first (depth, then row-major) is the first in
//! PyTorch's scan order, so ties send their gradient where PyTorch's do;
//! an average's divisor (the window's size or its part inside the input,
//! either clipped by `ceil_mode`) is a product over the dims, so two
//! averages make it. Gradients and devices are the 2-D ops'.

use super::module::{Forward, py_bool, stateless_module};
use super::pool::{
    adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d, max_pool2d_with_indices,
    norm_type_repr,
};
use crate::trace::{self, Attr};
use crate::{DType, Tensor};

/// A triple of per-dim sizes: (depth, height, width).
pub type Triple = (usize, usize, usize);

/// The batched `[N, C, D, H, W]` form of a volume and whether it came
/// unbatched (`[C, D, H, W]`).
#[track_caller]
fn volume(x: &Tensor, op: &str) -> (Tensor, bool) {
    let batched = x.ndim() == 5;
    assert!(
        batched || x.ndim() == 4,
        "{op}: expects a 5-D [N, C, D, H, W] or 4-D [C, D, H, W] input, got shape {:?}",
        x.shape()
    );
    assert!(
        x.dtype().is_float(),
        "{op}: expects a float input, got {}",
        x.dtype()
    );
    (if batched { x.clone() } else { x.unsqueeze(0) }, batched)
}

fn unbatched(y: Tensor, batched: bool) -> Tensor {
    if batched { y } else { y.squeeze_dim(0) }
}

fn list(t: Triple) -> [usize; 3] {
    [t.0, t.1, t.2]
}

fn triple_attr(t: Triple) -> Attr {
    Attr::Ints(list(t).map(|v| v as i64).to_vec())
}

/// Checks a window against a `[N, C, D, H, W]` input: positive kernel and
/// stride, padding at most half the kernel, a padded input that holds
/// one dilated window.
#[track_caller]
fn check_window(
    x: &Tensor,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    op: &str,
) {
    let (k, s, p, d) = (list(kernel), list(stride), list(padding), list(dilation));
    assert!(
        k.iter().chain(&s).chain(&d).all(|&v| v > 0),
        "{op}: kernel {kernel:?}, stride {stride:?} and dilation {dilation:?} must be positive"
    );
    assert!(
        (0..3).all(|i| 2 * p[i] <= k[i]),
        "{op}: padding {padding:?} should be at most half of kernel {kernel:?}"
    );
    let size = &x.shape()[2..];
    assert!(
        (0..3).all(|i| size[i] + 2 * p[i] > d[i] * (k[i] - 1)),
        "{op}: input {:?} padded by {padding:?} is smaller than the kernel {kernel:?} with dilation {dilation:?}",
        x.shape()
    );
}

/// Pools `[N, C, D, H, W]` by `plane` over every depth slice's height and
/// width, then by `depth` over the depth of every output pixel.
fn separable(
    x: &Tensor,
    plane: impl Fn(&Tensor) -> Tensor,
    depth: impl Fn(&Tensor) -> Tensor,
) -> Tensor {
    let s = x.shape();
    let (n, c, d) = (s[0] as isize, s[1] as isize, s[2] as isize);
    let y = plane(&x.reshape(&[n, c * d, s[3] as isize, s[4] as isize]));
    let (ho, wo) = (y.shape()[2] as isize, y.shape()[3] as isize);
    let z = depth(&y.reshape(&[n, c, d, ho * wo]));
    z.reshape(&[n, c, z.shape()[2] as isize, ho, wo])
}

/// `F.max_pool3d` with `ceil_mode` (a partial last window counts), over
/// `[N, C, D, H, W]` or `[C, D, H, W]`.
///
/// ```
/// use tapir_runtime::{nn::max_pool3d, Tensor};
/// let x = Tensor::arange_f(0.0, 27.0, 1.0).reshape(&[1, 1, 3, 3, 3]);
/// let y = max_pool3d(&x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), false);
/// assert_eq!(y.to_vec::<f32>(), vec![13.0]);
/// let y = max_pool3d(&x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), true);
/// assert_eq!(y.shape(), &[1, 1, 2, 2, 2]);
/// ```
#[track_caller]
pub fn max_pool3d(
    x: &Tensor,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    ceil_mode: bool,
) -> Tensor {
    let (x5, batched) = volume(x, "max_pool3d");
    check_window(&x5, kernel, stride, padding, dilation, "max_pool3d");
    let attrs = || {
        vec![
            ("kernel", triple_attr(kernel)),
            ("stride", triple_attr(stride)),
            ("padding", triple_attr(padding)),
            ("dilation", triple_attr(dilation)),
            ("ceil_mode", Attr::Int(ceil_mode as i64)),
        ]
    };
    let y = trace::op("max_pool3d", [&x5], attrs, || {
        let (k, s, p, d) = (kernel, stride, padding, dilation);
        separable(
            &x5,
            |x| max_pool2d(x, (k.1, k.2), (s.1, s.2), (p.1, p.2), (d.1, d.2), ceil_mode),
            |x| max_pool2d(x, (k.0, 1), (s.0, 1), (p.0, 0), (d.0, 1), ceil_mode),
        )
    });
    unbatched(y, batched)
}

/// `F.max_pool3d(..., return_indices=True)` with `ceil_mode`: the maxima
/// and each one's flat index `(id · H + ih) · W + iw` in its input volume
/// (what [`super::max_unpool3d`] takes); ties pick the first in PyTorch's
/// scan order, as [`max_pool3d`].
///
/// ```
/// use tapir_runtime::{nn::max_pool3d_with_indices, Tensor};
/// let x = Tensor::arange_f(0.0, 8.0, 1.0).reshape(&[1, 2, 2, 2]);
/// let (v, i) = max_pool3d_with_indices(&x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), false);
/// assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![7.0], vec![7]));
/// ```
#[track_caller]
pub fn max_pool3d_with_indices(
    x: &Tensor,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    ceil_mode: bool,
) -> (Tensor, Tensor) {
    let (x5, batched) = volume(x, "max_pool3d_with_indices");
    check_window(
        &x5,
        kernel,
        stride,
        padding,
        dilation,
        "max_pool3d_with_indices",
    );
    let s = x5.shape().to_vec();
    let (n, c, d) = (s[0] as isize, s[1] as isize, s[2] as isize);
    let (k, st, p, dl) = (kernel, stride, padding, dilation);
    let planes = x5.reshape(&[n, c * d, s[3] as isize, s[4] as isize]);
    let (v1, i1) = max_pool2d_with_indices(
        &planes,
        (k.1, k.2),
        (st.1, st.2),
        (p.1, p.2),
        (dl.1, dl.2),
        ceil_mode,
    );
    let (ho, wo) = (v1.shape()[2], v1.shape()[3]);
    let cells = (ho * wo) as isize;
    let columns = v1.reshape(&[n, c, d, cells]);
    let (v2, i2) = max_pool2d_with_indices(
        &columns,
        (k.0, 1),
        (st.0, 1),
        (p.0, 0),
        (dl.0, 1),
        ceil_mode,
    );
    // i2 is `depth * cells + cell`: the depth each maximum came from.
    let cell = Tensor::arange_on(cells as i64, x.device());
    let depth = (&(&i2 - &cell).to_dtype(DType::F64) / cells as f64)
        .round()
        .to_dtype(DType::I64);
    let within = i1.reshape(&[n, c, d, cells]).gather(2, &depth);
    let index = &(&depth * (s[3] * s[4]) as f64) + &within;
    let out_d = v2.shape()[2] as isize;
    let shape = [n, c, out_d, ho as isize, wo as isize];
    (
        unbatched(v2.reshape(&shape), batched),
        unbatched(index.reshape(&shape), batched),
    )
}

/// `F.avg_pool3d` with every option: `ceil_mode`, whether the zero padding
/// counts in a window's divisor (`count_include_pad`, true in PyTorch),
/// and a fixed divisor (`divisor_override`).
///
/// ```
/// use tapir_runtime::{nn::avg_pool3d, Tensor};
/// let x = Tensor::ones(&[1, 1, 2, 2, 2]);
/// let k = (2, 2, 2);
/// // Padding 1: each window holds one value and seven zeros.
/// let with_pad = avg_pool3d(&x, k, k, (1, 1, 1), false, true, None);
/// let without = avg_pool3d(&x, k, k, (1, 1, 1), false, false, None);
/// assert_eq!((with_pad.to_vec::<f32>()[0], without.to_vec::<f32>()[0]), (0.125, 1.0));
/// ```
#[track_caller]
pub fn avg_pool3d(
    x: &Tensor,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
) -> Tensor {
    let (x5, batched) = volume(x, "avg_pool3d");
    check_window(&x5, kernel, stride, padding, (1, 1, 1), "avg_pool3d");
    assert!(
        divisor_override != Some(0),
        "avg_pool3d: divisor_override must be positive"
    );
    let attrs = || {
        vec![
            ("kernel", triple_attr(kernel)),
            ("stride", triple_attr(stride)),
            ("padding", triple_attr(padding)),
            ("ceil_mode", Attr::Int(ceil_mode as i64)),
            ("count_include_pad", Attr::Int(count_include_pad as i64)),
            (
                "divisor_override",
                Attr::Int(divisor_override.unwrap_or(0) as i64),
            ),
        ]
    };
    let y = trace::op("avg_pool3d", [&x5], attrs, || {
        let (k, s, p) = (kernel, stride, padding);
        let include = count_include_pad;
        // A fixed divisor divides the sum once: the planes are summed
        // (divisor 1), the depth divides.
        let plane_divisor = divisor_override.map(|_| 1);
        separable(
            &x5,
            |x| {
                avg_pool2d(
                    x,
                    (k.1, k.2),
                    (s.1, s.2),
                    (p.1, p.2),
                    ceil_mode,
                    include,
                    plane_divisor,
                )
            },
            |x| {
                avg_pool2d(
                    x,
                    (k.0, 1),
                    (s.0, 1),
                    (p.0, 0),
                    ceil_mode,
                    include,
                    divisor_override,
                )
            },
        )
    });
    unbatched(y, batched)
}

/// `F.lp_pool3d`: each window's `(Σ xᵖ)^(1/p)` for `norm_type` p; stride
/// defaults to the kernel, no padding. As PyTorch computes it: an average
/// pool of `xᵖ` times the window's volume, a window summing to zero given
/// a zero gradient.
///
/// ```
/// use tapir_runtime::{nn::lp_pool3d, Tensor};
/// let x = Tensor::full(&[1, 2, 2, 2], 0.5);
/// assert_eq!(lp_pool3d(&x, 1.0, (2, 2, 2), None, false).to_vec::<f32>(), [4.0]);
/// ```
#[track_caller]
pub fn lp_pool3d(
    x: &Tensor,
    norm_type: f64,
    kernel: Triple,
    stride: Option<Triple>,
    ceil_mode: bool,
) -> Tensor {
    assert!(
        norm_type.is_finite() && norm_type != 0.0,
        "lp_pool3d: norm_type must be finite and nonzero, got {norm_type}"
    );
    let stride = stride.unwrap_or(kernel);
    let mean = avg_pool3d(
        &x.powf(norm_type),
        kernel,
        stride,
        (0, 0, 0),
        ceil_mode,
        true,
        None,
    );
    // sign · relu(|·|) is the identity in value and PyTorch's formula: its
    // select zeroes the NaN pow's infinite slope at 0 would send back.
    let volume = (kernel.0 * kernel.1 * kernel.2) as f64;
    (&(&mean.sign() * &mean.abs().relu()) * volume).powf(1.0 / norm_type)
}

/// Checks an adaptive pool's output size.
#[track_caller]
fn check_output_size(output_size: Triple, op: &str) {
    assert!(
        list(output_size).iter().all(|&v| v > 0),
        "{op}: output size {output_size:?} must be positive"
    );
}

/// `F.adaptive_avg_pool3d`: output cell `i` of a dim of `n` averages
/// `floor(i n / o) .. ceil((i + 1) n / o)` there, in every dim.
///
/// ```
/// use tapir_runtime::{nn::adaptive_avg_pool3d, Tensor};
/// let x = Tensor::arange_f(0.0, 8.0, 1.0).reshape(&[1, 2, 2, 2]);
/// assert_eq!(adaptive_avg_pool3d(&x, (1, 1, 1)).to_vec::<f32>(), vec![3.5]);
/// assert_eq!(adaptive_avg_pool3d(&x, (2, 1, 1)).to_vec::<f32>(), vec![1.5, 5.5]);
/// ```
#[track_caller]
pub fn adaptive_avg_pool3d(x: &Tensor, output_size: Triple) -> Tensor {
    adaptive(x, output_size, "adaptive_avg_pool3d", adaptive_avg_pool2d)
}

/// `F.adaptive_max_pool3d` (without indices): the maximum of the windows
/// [`adaptive_avg_pool3d`] averages.
///
/// ```
/// use tapir_runtime::{nn::adaptive_max_pool3d, Tensor};
/// let x = Tensor::arange_f(0.0, 8.0, 1.0).reshape(&[1, 2, 2, 2]);
/// assert_eq!(adaptive_max_pool3d(&x, (2, 1, 1)).to_vec::<f32>(), vec![3.0, 7.0]);
/// ```
#[track_caller]
pub fn adaptive_max_pool3d(x: &Tensor, output_size: Triple) -> Tensor {
    adaptive(x, output_size, "adaptive_max_pool3d", adaptive_max_pool2d)
}

/// A 3-D adaptive pool as the 2-D one `pool` over the planes, then over
/// depth with a width of one cell per column.
#[track_caller]
fn adaptive(
    x: &Tensor,
    (od, oh, ow): Triple,
    op: &str,
    pool: fn(&Tensor, (usize, usize)) -> Tensor,
) -> Tensor {
    let (x5, batched) = volume(x, op);
    check_output_size((od, oh, ow), op);
    let y = separable(&x5, |x| pool(x, (oh, ow)), |x| pool(x, (od, x.shape()[3])));
    unbatched(y, batched)
}

/// `nn.MaxPool3d`: fields as PyTorch's arguments; [`MaxPool3d::new`] is
/// `nn.MaxPool3d(kernel)` (stride the kernel, no padding).
///
/// ```
/// use tapir_runtime::{nn::{Forward, MaxPool3d, Module}, Tensor};
/// let pool = MaxPool3d::new(2);
/// assert_eq!(pool.forward(&Tensor::randn(&[2, 3, 4, 6, 6])).shape(), &[2, 3, 2, 3, 3]);
/// assert_eq!(pool.repr(), "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MaxPool3d {
    /// Window depth, height and width.
    pub kernel: Triple,
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: Triple,
    /// Implicit `-inf` padding on each side.
    pub padding: Triple,
    /// Spacing between window taps.
    pub dilation: Triple,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl MaxPool3d {
    /// Cubic window; stride defaults to the kernel size, as PyTorch.
    pub fn new(kernel: usize) -> MaxPool3d {
        MaxPool3d {
            kernel: (kernel, kernel, kernel),
            stride: (kernel, kernel, kernel),
            padding: (0, 0, 0),
            dilation: (1, 1, 1),
            ceil_mode: false,
        }
    }
}

impl MaxPool3d {
    /// `nn.MaxPool3d(..., return_indices=True)`: the output and each
    /// maximum's flat index in its input volume (for [`super::MaxUnpool3d`]).
    #[track_caller]
    pub fn forward_with_indices(&self, x: &Tensor) -> (Tensor, Tensor) {
        let s = *self;
        max_pool3d_with_indices(x, s.kernel, s.stride, s.padding, s.dilation, s.ceil_mode)
    }
}

impl Forward for MaxPool3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = *self;
        max_pool3d(x, s.kernel, s.stride, s.padding, s.dilation, s.ceil_mode)
    }
}

/// `nn.AvgPool3d`: fields as PyTorch's arguments; [`AvgPool3d::new`] is
/// `nn.AvgPool3d(kernel)`.
///
/// ```
/// use tapir_runtime::{nn::{AvgPool3d, Forward}, Tensor};
/// let pool = AvgPool3d { ceil_mode: true, ..AvgPool3d::new(2) };
/// assert_eq!(pool.forward(&Tensor::ones(&[2, 3, 3, 3])).to_vec::<f32>(), vec![1.0; 16]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AvgPool3d {
    /// Window depth, height and width.
    pub kernel: Triple,
    /// Step between windows (PyTorch's default: the kernel).
    pub stride: Triple,
    /// Implicit zero padding on each side.
    pub padding: Triple,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
    /// Whether the padding counts in a window's divisor (true).
    pub count_include_pad: bool,
    /// A fixed divisor instead of the window's size.
    pub divisor_override: Option<usize>,
}

impl AvgPool3d {
    /// `nn.AvgPool3d(kernel)` with stride = kernel, no padding.
    pub fn new(kernel: usize) -> AvgPool3d {
        AvgPool3d {
            kernel: (kernel, kernel, kernel),
            stride: (kernel, kernel, kernel),
            padding: (0, 0, 0),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

impl Forward for AvgPool3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = *self;
        let (k, st, p) = (s.kernel, s.stride, s.padding);
        avg_pool3d(
            x,
            k,
            st,
            p,
            s.ceil_mode,
            s.count_include_pad,
            s.divisor_override,
        )
    }
}

/// `nn.LPPool3d(norm_type, kernel_size, stride=None, ceil_mode=False)`:
/// see [`lp_pool3d`].
///
/// ```
/// use tapir_runtime::{nn::{Forward, LPPool3d, Module}, Tensor};
/// let pool = LPPool3d::new(2.0, 2);
/// assert_eq!(pool.forward(&Tensor::randn(&[1, 3, 4, 4, 4])).shape(), &[1, 3, 2, 2, 2]);
/// assert_eq!(pool.repr(), "LPPool3d(norm_type=2, kernel_size=2, stride=None, ceil_mode=False)");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LPPool3d {
    /// The p of the power average.
    pub norm_type: f64,
    /// Window depth, height and width.
    pub kernel: Triple,
    /// Step between windows (None: the kernel).
    pub stride: Option<Triple>,
    /// Whether a partial last window makes an output (false).
    pub ceil_mode: bool,
}

impl LPPool3d {
    /// `nn.LPPool3d(norm_type, kernel)`: cubic window, stride the kernel.
    pub fn new(norm_type: f64, kernel: usize) -> LPPool3d {
        LPPool3d {
            norm_type,
            kernel: (kernel, kernel, kernel),
            stride: None,
            ceil_mode: false,
        }
    }
}

impl Forward for LPPool3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        lp_pool3d(x, self.norm_type, self.kernel, self.stride, self.ceil_mode)
    }
}

/// `nn.AdaptiveAvgPool3d(output_size)`: see [`adaptive_avg_pool3d`].
///
/// ```
/// use tapir_runtime::{nn::{AdaptiveAvgPool3d, Forward}, Tensor};
/// let pool = AdaptiveAvgPool3d { output_size: (1, 2, 3) };
/// assert_eq!(pool.forward(&Tensor::randn(&[2, 4, 5, 5, 7])).shape(), &[2, 4, 1, 2, 3]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveAvgPool3d {
    /// Output depth, height and width.
    pub output_size: Triple,
}

impl Forward for AdaptiveAvgPool3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        adaptive_avg_pool3d(x, self.output_size)
    }
}

/// `nn.AdaptiveMaxPool3d(output_size)`: see [`adaptive_max_pool3d`].
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveMaxPool3d {
    /// Output depth, height and width.
    pub output_size: Triple,
}

impl Forward for AdaptiveMaxPool3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        adaptive_max_pool3d(x, self.output_size)
    }
}

/// A cube as one number, as PyTorch prints an int argument.
fn triple_repr(t: Triple) -> String {
    if t.0 == t.1 && t.1 == t.2 {
        t.0.to_string()
    } else {
        format!("{t:?}")
    }
}

stateless_module! {
    MaxPool3d => |s| format!(
        "MaxPool3d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
        triple_repr(s.kernel), triple_repr(s.stride), triple_repr(s.padding),
        triple_repr(s.dilation), py_bool(s.ceil_mode)
    );
    AvgPool3d => |s| format!(
        "AvgPool3d(kernel_size={}, stride={}, padding={})",
        triple_repr(s.kernel), triple_repr(s.stride), triple_repr(s.padding)
    );
    LPPool3d => |s| format!(
        "LPPool3d(norm_type={}, kernel_size={}, stride={}, ceil_mode={})",
        norm_type_repr(s.norm_type), triple_repr(s.kernel),
        s.stride.map_or("None".to_string(), triple_repr), py_bool(s.ceil_mode)
    );
    AdaptiveAvgPool3d => |s| format!("AdaptiveAvgPool3d(output_size={})", triple_repr(s.output_size));
    AdaptiveMaxPool3d => |s| format!("AdaptiveMaxPool3d(output_size={})", triple_repr(s.output_size));
}
