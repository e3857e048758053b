//! Convolutions: `Conv1d` (a `Conv2d` over a height-1 image), `Conv2d` and
//! `ConvTranspose2d`, with PyTorch's parameters, names and initialisation.

use super::init;
use super::module::Forward;
use super::padding::{PadMode, pad_with};
use crate::{Conv2dOptions, Tensor};

/// `nn.Conv1d`'s stride, padding, dilation and groups (PyTorch's defaults:
/// 1, 0, 1, 1).
///
/// ```
/// use tapir_runtime::nn::Conv1dOptions;
/// let o = Conv1dOptions { padding: 2, ..Default::default() };
/// assert_eq!((o.stride, o.padding, o.dilation, o.groups), (1, 2, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dOptions {
    /// Step between windows.
    pub stride: usize,
    /// Implicit zero padding on each side.
    pub padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Channel groups (input and output channels must divide by it).
    pub groups: usize,
}

impl Default for Conv1dOptions {
    fn default() -> Self {
        Conv1dOptions {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

/// `nn.Conv1d` over `[N, C, L]` (or unbatched `[C, L]`), with PyTorch's
/// init (kaiming-uniform a = √5, bias U(±1/√fan_in)). Computed as a
/// `Conv2d` over `[N, C, 1, L]`, so it shares that kernel and its backward.
///
/// ```
/// use tapir_runtime::{nn::{Conv1d, Conv1dOptions, Forward}, Tensor};
/// let c = Conv1d::new(4, 8, 3, Conv1dOptions { padding: 1, ..Default::default() }, true);
/// assert_eq!(c.weight.shape(), &[8, 4, 3]);
/// assert_eq!(c.forward(&Tensor::zeros(&[2, 4, 10])).shape(), &[2, 8, 10]);
/// ```
pub struct Conv1d {
    /// `[out_channels, in_channels / groups, kernel_size]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel width.
    pub kernel_size: usize,
    /// Stride, padding, dilation and groups.
    pub opts: Conv1dOptions,
    /// How the padding is filled (`padding_mode`; zeros by default).
    pub padding_mode: PadMode,
}

impl Conv1d {
    /// `nn.Conv1d(in_channels, out_channels, kernel_size, ..)` with PyTorch's initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        opts: Conv1dOptions,
        bias: bool,
    ) -> Conv1d {
        let g = opts.groups;
        assert!(
            g > 0 && in_channels.is_multiple_of(g) && out_channels.is_multiple_of(g),
            "Conv1d: in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {g}"
        );
        assert!(
            opts.stride > 0 && opts.dilation > 0,
            "Conv1d: stride ({}) and dilation ({}) must be positive",
            opts.stride,
            opts.dilation
        );
        let (weight, bias) = conv_params(
            &[out_channels, in_channels / g, kernel_size],
            out_channels,
            bias,
        );
        Conv1d {
            weight,
            bias,
            in_channels,
            out_channels,
            kernel_size,
            opts,
            padding_mode: PadMode::Constant(0.0),
        }
    }

    /// `padding_mode=`: `Reflect`, `Replicate` or `Circular` pad the input
    /// by `padding` that way before an unpadded convolution, as PyTorch.
    pub fn padding_mode(mut self, mode: PadMode) -> Conv1d {
        self.padding_mode = check_padding_mode(mode, "Conv1d");
        self
    }
}

impl Forward for Conv1d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (x4, batched) = as_image(x, self.in_channels, "Conv1d");
        let opts = image_options(self.opts);
        let (x4, padding) = pad_by_mode(&x4, opts.padding, self.padding_mode);
        let y = x4.conv2d(
            &self.weight.unsqueeze(2),
            self.bias.as_ref(),
            Conv2dOptions { padding, ..opts },
        );
        from_image(y, batched)
    }
}

/// `F.conv1d(x, weight, bias, stride, padding, dilation, groups)` over
/// `[N, C, L]` or `[C, L]` with a `[out, C / groups, k]` weight: what
/// [`Conv1d`] computes with zero padding (a 2-D convolution over
/// `[N, C, 1, L]`, sharing its kernel and backward).
///
/// ```
/// use tapir_runtime::{nn::{conv1d, Conv1dOptions}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4]);
/// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[1, 1, 2]);
/// let y = conv1d(&x, &w, None, Conv1dOptions::default());
/// assert_eq!(y.to_vec::<f32>(), vec![-1.0, -1.0, -1.0]);
/// ```
#[track_caller]
pub fn conv1d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: Conv1dOptions) -> Tensor {
    assert!(
        weight.ndim() == 3 && opts.groups > 0,
        "conv1d: expects a 3-D weight [out_channels, in_channels / groups, kernel] and groups > 0, got weight \
         shape {:?} and groups {}",
        weight.shape(),
        opts.groups
    );
    let (x4, batched) = as_image(x, weight.shape()[1] * opts.groups, "conv1d");
    let y = x4.conv2d(&weight.unsqueeze(2), bias, image_options(opts));
    from_image(y, batched)
}

/// A 1-D convolution's input `[N, C, L]` or `[C, L]` as `[N, C, 1, L]`,
/// checked against `in_channels`, and whether it was batched.
#[track_caller]
fn as_image(x: &Tensor, in_channels: usize, layer: &str) -> (Tensor, bool) {
    let batched = x.ndim() == 3;
    assert!(
        (batched || x.ndim() == 2) && x.size(-2) == in_channels,
        "{layer}: expected input [N, {in_channels}, L] or [{in_channels}, L], got {:?}",
        x.shape()
    );
    let x4 = if batched {
        x.unsqueeze(2)
    } else {
        x.unsqueeze(0).unsqueeze(2)
    };
    (x4, batched)
}

/// A 1-D convolution's options along the width of a height-one image.
fn image_options(o: Conv1dOptions) -> Conv2dOptions {
    Conv2dOptions {
        stride: (1, o.stride),
        padding: (0, o.padding),
        dilation: (1, o.dilation),
        groups: o.groups,
    }
}

/// A 1-D layer's output back from `[N, C, 1, L]`.
fn from_image(y: Tensor, batched: bool) -> Tensor {
    let y = y.squeeze_dim(2);
    if batched { y } else { y.squeeze_dim(0) }
}

/// PyTorch's repr of a 1-D convolution's options after the stride.
fn conv1d_options_repr(o: &Conv1dOptions, output_padding: usize, bias: &Option<Tensor>) -> String {
    let mut s = String::new();
    let optional = [
        ("padding", o.padding, 0),
        ("dilation", o.dilation, 1),
        ("output_padding", output_padding, 0),
    ];
    for (name, v, default) in optional {
        if v != default {
            s.push_str(&format!(", {name}=({v},)"));
        }
    }
    if o.groups != 1 {
        s.push_str(&format!(", groups={}", o.groups));
    }
    if bias.is_none() {
        s.push_str(", bias=False");
    }
    s
}

/// A convolution's weight of `shape` (`[out, in / groups, ..kernel]`, or
/// `[in, out / groups, ..kernel]` when transposed) and optional bias of
/// `bias_len`, initialised as PyTorch's `_ConvNd.reset_parameters` (whose
/// fan-in is the weight's dim 1 times the kernel either way).
pub(super) fn conv_params(
    shape: &[usize],
    bias_len: usize,
    bias: bool,
) -> (Tensor, Option<Tensor>) {
    let weight = Tensor::zeros(shape);
    init::kaiming_uniform_(&weight, 5f64.sqrt(), init::FanMode::FanIn, "leaky_relu");
    let bias = bias.then(|| {
        let (fan_in, _) = init::fans(&weight);
        let bound = 1.0 / (fan_in as f64).sqrt();
        let b = Tensor::zeros(&[bias_len]);
        init::uniform_(&b, -bound, bound);
        b.requires_grad_(true)
    });
    (weight.requires_grad_(true), bias)
}

/// `nn.Conv2d` with PyTorch's default init (kaiming-uniform a = √5, bias
/// U(±1/√fan_in)).
///
/// ```
/// use tapir_runtime::{nn::{Conv2d, Forward}, Conv2dOptions, Tensor};
/// let c = Conv2d::new(1, 32, (3, 3), Conv2dOptions::default().padding(1), true);
/// assert_eq!(c.forward(&Tensor::zeros(&[8, 1, 28, 28])).shape(), &[8, 32, 28, 28]);
/// ```
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: (usize, usize),
    /// Stride, padding, dilation and groups.
    pub opts: Conv2dOptions,
    /// How the padding is filled (`padding_mode`; zeros by default).
    pub padding_mode: PadMode,
}

impl Conv2d {
    /// `nn.Conv2d` with PyTorch's initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize),
        opts: Conv2dOptions,
        bias: bool,
    ) -> Conv2d {
        let g = opts.groups;
        assert!(
            g > 0 && in_channels.is_multiple_of(g) && out_channels.is_multiple_of(g),
            "Conv2d: in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {g}"
        );
        let (weight, bias) = conv_params(
            &[out_channels, in_channels / g, kernel.0, kernel.1],
            out_channels,
            bias,
        );
        Conv2d {
            weight,
            bias,
            in_channels,
            out_channels,
            kernel,
            opts,
            padding_mode: PadMode::Constant(0.0),
        }
    }

    /// `padding_mode=`: `Reflect`, `Replicate` or `Circular` pad the input
    /// by `padding` that way before an unpadded convolution, as PyTorch.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Conv2d, Forward, PadMode}, Conv2dOptions, Tensor};
    /// let c = Conv2d::new(1, 1, (3, 3), Conv2dOptions::default().padding(1), false)
    ///     .padding_mode(PadMode::Replicate);
    /// tapir_runtime::no_grad(|| c.weight.fill_(1.0 / 9.0));
    /// // A constant image stays constant: its edges are repeated, not zeros.
    /// let y = c.forward(&Tensor::ones(&[1, 1, 4, 4]));
    /// assert!((&y - 1.0).abs().max().item::<f32>() < 1e-6);
    /// ```
    pub fn padding_mode(mut self, mode: PadMode) -> Conv2d {
        self.padding_mode = check_padding_mode(mode, "Conv2d");
        self
    }
}

impl Forward for Conv2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let (x, padding) = pad_by_mode(x, self.opts.padding, self.padding_mode);
        x.conv2d(
            &self.weight,
            self.bias.as_ref(),
            Conv2dOptions {
                padding,
                ..self.opts
            },
        )
    }
}

/// PyTorch's padding modes are zeros or one of the three that copy input.
pub(super) fn check_padding_mode(mode: PadMode, layer: &str) -> PadMode {
    assert!(
        !matches!(mode, PadMode::Constant(v) if v != 0.0),
        "{layer}: padding_mode is zeros (PadMode::Constant(0.0)), Reflect, Replicate or Circular, got {mode:?}"
    );
    mode
}

/// The input padded by `padding` in a copying mode, and the padding left
/// for the convolution (none then; all of it for zeros).
fn pad_by_mode(x: &Tensor, padding: (usize, usize), mode: PadMode) -> (Tensor, (usize, usize)) {
    if matches!(mode, PadMode::Constant(_)) || padding == (0, 0) {
        return (x.clone(), padding);
    }
    let (h, w) = (padding.0 as i64, padding.1 as i64);
    let pads = if h == 0 { vec![w, w] } else { vec![w, w, h, h] };
    (pad_with(x, &pads, mode), (0, 0))
}

/// `, padding_mode=reflect` as PyTorch's repr adds for a mode not zeros.
pub(super) fn padding_mode_repr(mode: PadMode) -> String {
    match mode {
        PadMode::Reflect => ", padding_mode=reflect".into(),
        PadMode::Replicate => ", padding_mode=replicate".into(),
        PadMode::Circular => ", padding_mode=circular".into(),
        PadMode::Constant(_) => String::new(),
    }
}

/// PyTorch's `_ConvNd.extra_repr` for the 2-D convolutions: the options
/// that differ from their defaults, in PyTorch's order.
fn conv2d_repr(
    name: &str,
    channels: (usize, usize),
    kernel: (usize, usize),
    o: &Conv2dOptions,
    output_padding: (usize, usize),
    bias: &Option<Tensor>,
) -> String {
    let optional = [
        ("padding", format!("{:?}", o.padding), o.padding == (0, 0)),
        (
            "dilation",
            format!("{:?}", o.dilation),
            o.dilation == (1, 1),
        ),
        (
            "output_padding",
            format!("{output_padding:?}"),
            output_padding == (0, 0),
        ),
    ];
    let head = (format!("{kernel:?}"), format!("{:?}", o.stride));
    conv_repr(name, channels, head, optional, o.groups, bias)
}

/// PyTorch's `_ConvNd.extra_repr` from the options as Python tuples:
/// `(kernel_size, stride)`, then `(name, value, is_default)` for padding,
/// dilation and output_padding (only those not at their default shown).
pub(super) fn conv_repr(
    name: &str,
    (in_channels, out_channels): (usize, usize),
    (kernel, stride): (String, String),
    optional: [(&str, String, bool); 3],
    groups: usize,
    bias: &Option<Tensor>,
) -> String {
    let mut s =
        format!("{name}({in_channels}, {out_channels}, kernel_size={kernel}, stride={stride}");
    for (key, value, is_default) in optional {
        if !is_default {
            s.push_str(&format!(", {key}={value}"));
        }
    }
    if groups != 1 {
        s.push_str(&format!(", groups={groups}"));
    }
    if bias.is_none() {
        s.push_str(", bias=False");
    }
    s + ")"
}

/// `nn.ConvTranspose2d` (weight `[in_channels, out_channels / groups, kh,
/// kw]`) with PyTorch's init (kaiming-uniform a = √5 over the fan-in
/// `out_channels / groups * kh * kw`, bias U(±1/√fan_in)). Upsamples: with
/// stride `s` an `H`-row input gives `(H - 1) s - 2 padding + dilation (kh -
/// 1) + output_padding + 1` rows.
///
/// ```
/// use tapir_runtime::{nn::{ConvTranspose2d, Forward}, Conv2dOptions, Tensor};
/// let up = ConvTranspose2d::new(8, 4, (3, 3), Conv2dOptions::default().stride(2).padding(1), (1, 1), true);
/// assert_eq!(up.weight.shape(), &[8, 4, 3, 3]);
/// assert_eq!(up.forward(&Tensor::zeros(&[2, 8, 7, 7])).shape(), &[2, 4, 14, 14]);
/// assert_eq!(up.forward_with_output_size(&Tensor::zeros(&[2, 8, 7, 7]), (13, 14)).shape(), &[2, 4, 13, 14]);
/// ```
pub struct ConvTranspose2d {
    /// `[in_channels, out_channels / groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: (usize, usize),
    /// Stride, padding, dilation and groups (of the convolution this one transposes).
    pub opts: Conv2dOptions,
    /// Rows and columns added at the bottom and right of the output.
    pub output_padding: (usize, usize),
}

impl ConvTranspose2d {
    /// `nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride,
    /// padding, output_padding, groups, bias, dilation)` with PyTorch's
    /// initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize),
        opts: Conv2dOptions,
        output_padding: (usize, usize),
        bias: bool,
    ) -> ConvTranspose2d {
        let g = opts.groups;
        assert!(
            g > 0 && in_channels.is_multiple_of(g) && out_channels.is_multiple_of(g),
            "ConvTranspose2d: in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {g}"
        );
        let (weight, bias) = conv_params(
            &[in_channels, out_channels / g, kernel.0, kernel.1],
            out_channels,
            bias,
        );
        ConvTranspose2d {
            weight,
            bias,
            in_channels,
            out_channels,
            kernel,
            opts,
            output_padding,
        }
    }

    /// The forward for an output of `size` (`forward(input, output_size)`
    /// in PyTorch): the output padding that reaches it, in place of
    /// `output_padding`. Panics naming the sizes a stride allows if `size`
    /// is not one of them.
    pub fn forward_with_output_size(&self, x: &Tensor, size: (usize, usize)) -> Tensor {
        assert!(
            x.ndim() == 4,
            "ConvTranspose2d: expects a 4-D [N, C, H, W] input, got shape {:?}",
            x.shape()
        );
        let o = &self.opts;
        let extra = |i: usize, s: usize, p: usize, d: usize, k: usize, want: usize| {
            let least = ((i.max(1) - 1) * s + d * (k - 1) + 1).saturating_sub(2 * p);
            let span = s - 1;
            assert!(
                (least..=least + span).contains(&want),
                "ConvTranspose2d: requested an output size of {size:?}, but valid sizes for input of shape {:?} range from {least} to {} in that dim",
                x.shape(),
                least + span
            );
            want - least
        };
        let output_padding = (
            extra(
                x.shape()[2],
                o.stride.0,
                o.padding.0,
                o.dilation.0,
                self.kernel.0,
                size.0,
            ),
            extra(
                x.shape()[3],
                o.stride.1,
                o.padding.1,
                o.dilation.1,
                self.kernel.1,
                size.1,
            ),
        );
        x.conv_transpose2d(&self.weight, self.bias.as_ref(), self.opts, output_padding)
    }
}

impl Forward for ConvTranspose2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            self.opts,
            self.output_padding,
        )
    }
}

/// `nn.ConvTranspose1d` (weight `[in_channels, out_channels / groups,
/// kernel_size]`) with PyTorch's init: [`ConvTranspose2d`] over
/// `[N, C, 1, L]`, so it shares that kernel and its backward. Batched or
/// unbatched input.
///
/// ```
/// use tapir_runtime::{nn::{ConvTranspose1d, Conv1dOptions, Forward}, Tensor};
/// let opts = Conv1dOptions { stride: 2, padding: 1, ..Default::default() };
/// let up = ConvTranspose1d::new(8, 4, 3, opts, 1, true);
/// assert_eq!(up.forward(&Tensor::zeros(&[2, 8, 7])).shape(), &[2, 4, 14]);
/// ```
pub struct ConvTranspose1d {
    /// `[in_channels, out_channels / groups, kernel_size]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel width.
    pub kernel_size: usize,
    /// Stride, padding, dilation and groups (of the convolution this one transposes).
    pub opts: Conv1dOptions,
    /// Positions added at the end of the output.
    pub output_padding: usize,
}

impl ConvTranspose1d {
    /// `nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride,
    /// padding, output_padding, groups, bias, dilation)` with PyTorch's
    /// initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        opts: Conv1dOptions,
        output_padding: usize,
        bias: bool,
    ) -> ConvTranspose1d {
        let g = opts.groups;
        assert!(
            g > 0 && in_channels.is_multiple_of(g) && out_channels.is_multiple_of(g),
            "ConvTranspose1d: in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {g}"
        );
        let (weight, bias) = conv_params(
            &[in_channels, out_channels / g, kernel_size],
            out_channels,
            bias,
        );
        ConvTranspose1d {
            weight,
            bias,
            in_channels,
            out_channels,
            kernel_size,
            opts,
            output_padding,
        }
    }
}

impl Forward for ConvTranspose1d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let (x4, batched) = as_image(x, self.in_channels, "ConvTranspose1d");
        let w = self.weight.unsqueeze(2);
        let op = (0, self.output_padding);
        let y = x4.conv_transpose2d(&w, self.bias.as_ref(), image_options(self.opts), op);
        from_image(y, batched)
    }
}

super::linear::weight_bias_module! {
    Conv1d => |l| {
        let o = &l.opts;
        let s = format!(
            "Conv1d({}, {}, kernel_size=({},), stride=({},)",
            l.in_channels, l.out_channels, l.kernel_size, o.stride
        ) + &conv1d_options_repr(o, 0, &l.bias);
        s + &padding_mode_repr(l.padding_mode) + ")"
    };
    Conv2d => |l| {
        let channels = (l.in_channels, l.out_channels);
        let mut s = conv2d_repr("Conv2d", channels, l.kernel, &l.opts, (0, 0), &l.bias);
        s.pop();
        s + &padding_mode_repr(l.padding_mode) + ")"
    };
    ConvTranspose2d => |l| {
        let channels = (l.in_channels, l.out_channels);
        let (k, o, op) = (l.kernel, &l.opts, l.output_padding);
        conv2d_repr("ConvTranspose2d", channels, k, o, op, &l.bias)
    };
    ConvTranspose1d => |l| {
        let o = &l.opts;
        format!(
            "ConvTranspose1d({}, {}, kernel_size=({},), stride=({},)",
            l.in_channels, l.out_channels, l.kernel_size, o.stride
        ) + &conv1d_options_repr(o, l.output_padding, &l.bias)
            + ")"
    };
}
