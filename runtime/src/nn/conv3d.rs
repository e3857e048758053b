//! Volumetric convolutions: `F.conv3d` / `nn.Conv3d` and
//! `F.conv_transpose3d` / `nn.ConvTranspose3d` over `[N, C, D, H, W]`.
//!
//! Both are compositions of the 2-D ops, so they have those ops' kernels,
//! backward and devices. A 3-D convolution gathers the `kD` depth slices
//! each output depth reads into the channel dim and makes one 2-D
//! convolution of them (one GEMM with the whole `C·kD·kH·kW` reduction);
//! a transposed one makes one 2-D transposed convolution with `kD` times
//! the output channels, then overlap-adds the depth taps with a 1-D fold.

use super::conv::{check_padding_mode, conv_params, conv_repr, padding_mode_repr};
use super::module::Forward;
use super::padding::{PadMode, pad, pad_with};
use crate::trace::{self, Attr};
use crate::{Conv2dOptions, Tensor};

/// A 3-D convolution's stride, padding and dilation as (depth, height,
/// width), and groups (PyTorch's defaults: 1, 0, 1, 1).
///
/// ```
/// use tapir_runtime::nn::Conv3dOptions;
/// let o = Conv3dOptions::default().stride(2).padding(1);
/// assert_eq!((o.stride, o.padding, o.dilation, o.groups), ((2, 2, 2), (1, 1, 1), (1, 1, 1), 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv3dOptions {
    /// Step between windows.
    pub stride: (usize, usize, usize),
    /// Implicit zero padding on each side.
    pub padding: (usize, usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize, usize),
    /// Channel groups (input and output channels must divide by it).
    pub groups: usize,
}

impl Default for Conv3dOptions {
    fn default() -> Self {
        Conv3dOptions {
            stride: (1, 1, 1),
            padding: (0, 0, 0),
            dilation: (1, 1, 1),
            groups: 1,
        }
    }
}

impl Conv3dOptions {
    /// The same stride in every dim.
    pub fn stride(mut self, s: usize) -> Self {
        self.stride = (s, s, s);
        self
    }
    /// The same padding in every dim.
    pub fn padding(mut self, p: usize) -> Self {
        self.padding = (p, p, p);
        self
    }
    /// The same dilation in every dim.
    pub fn dilation(mut self, d: usize) -> Self {
        self.dilation = (d, d, d);
        self
    }
    /// Channel groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }

    /// The options of the height and width (the 2-D convolution's).
    fn plane(&self) -> Conv2dOptions {
        Conv2dOptions {
            stride: (self.stride.1, self.stride.2),
            padding: (self.padding.1, self.padding.2),
            dilation: (self.dilation.1, self.dilation.2),
            groups: self.groups,
        }
    }

    /// The options as recorded attributes (for replay and export).
    fn attrs(&self) -> trace::Attrs {
        let triple =
            |t: (usize, usize, usize)| Attr::Ints(vec![t.0 as i64, t.1 as i64, t.2 as i64]);
        vec![
            ("stride", triple(self.stride)),
            ("padding", triple(self.padding)),
            ("dilation", triple(self.dilation)),
            ("groups", Attr::Int(self.groups as i64)),
        ]
    }

    /// The options recorded by [`Conv3dOptions::attrs`].
    pub(crate) fn from_attrs(ints: impl Fn(&str) -> Vec<i64>, groups: i64) -> Conv3dOptions {
        let triple = |k: &str| match ints(k)[..] {
            [a, b, c] => (a as usize, b as usize, c as usize),
            _ => (0, 0, 0),
        };
        Conv3dOptions {
            stride: triple("stride"),
            padding: triple("padding"),
            dilation: triple("dilation"),
            groups: groups as usize,
        }
    }
}

/// Dims of a 5-D weight or batched volume.
#[track_caller]
fn dims5(t: &Tensor, op: &str) -> [usize; 5] {
    match *t.shape() {
        [a, b, c, d, e] => [a, b, c, d, e],
        _ => panic!("{op}: weight must be 5-D, got shape {:?}", t.shape()),
    }
}

/// The batched `[N, C, D, H, W]` form of a volume, whether it came
/// unbatched, and checks of the input's and weight's ranks and channels.
#[track_caller]
fn as_volume(x: &Tensor, weight: &Tensor, in_channels: usize, op: &str) -> (Tensor, bool) {
    let batched = x.ndim() == 5;
    assert!(
        (batched || x.ndim() == 4) && x.size(-4) == in_channels,
        "{op}: expected input [N, {in_channels}, D, H, W] or [{in_channels}, D, H, W] for weight {:?}, got {:?}",
        weight.shape(),
        x.shape()
    );
    let x5 = if batched { x.clone() } else { x.unsqueeze(0) };
    (x5, batched)
}

/// Checks that the padded input covers the dilated kernel in every dim.
#[track_caller]
fn check_window(x: &Tensor, kernel: [usize; 3], o: &Conv3dOptions, op: &str) {
    let s = &x.shape()[2..];
    let p = [o.padding.0, o.padding.1, o.padding.2];
    let d = [o.dilation.0, o.dilation.1, o.dilation.2];
    let fits = (0..3).all(|i| s[i] + 2 * p[i] > d[i] * (kernel[i] - 1));
    assert!(
        fits && kernel.iter().all(|&k| k > 0),
        "{op}: input {:?} padded by {:?} is smaller than the kernel {kernel:?} with dilation {:?}",
        x.shape(),
        o.padding,
        o.dilation
    );
}

/// `F.conv3d`: weight `[out_channels, in_channels / groups, kD, kH, kW]`,
/// input `[N, C, D, H, W]` or unbatched `[C, D, H, W]`.
///
/// ```
/// use tapir_runtime::{nn::{conv3d, Conv3dOptions}, Tensor};
/// let x = Tensor::ones(&[1, 1, 3, 3, 3]);
/// let w = Tensor::ones(&[2, 1, 3, 3, 3]);
/// let y = conv3d(&x, &w, None, Conv3dOptions::default().padding(1));
/// assert_eq!(y.shape(), &[1, 2, 3, 3, 3]);
/// // The centre sees all 27 ones; a corner 8.
/// assert_eq!((y.to_vec::<f32>()[13], y.to_vec::<f32>()[0]), (27.0, 8.0));
/// ```
#[track_caller]
pub fn conv3d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, o: Conv3dOptions) -> Tensor {
    let [oc, cg, kd, kh, kw] = dims5(weight, "conv3d");
    let g = o.groups;
    assert!(
        g > 0 && oc.is_multiple_of(g),
        "conv3d: out channels {oc} of weight {:?} are not divisible by groups {g}",
        weight.shape()
    );
    let (x5, batched) = as_volume(x, weight, cg * g, "conv3d");
    check_window(&x5, [kd, kh, kw], &o, "conv3d");
    let attrs = || o.attrs();
    // The batched volume is the recorded input: ONNX's Conv takes no other.
    let y = trace::op("conv3d", [Some(&x5), Some(weight), bias], attrs, || {
        let (sd, pd, dd) = (o.stride.0, o.padding.0, o.dilation.0);
        let padded = if pd > 0 {
            pad(&x5, &[0, 0, 0, 0, pd as i64, pd as i64], 0.0)
        } else {
            x5.clone()
        };
        let [n, c, depth, h, w] = dims5(&padded, "conv3d");
        let out_depth = (depth - dd * (kd - 1) - 1) / sd + 1;
        // [N, D, C, H, W]: a depth slice per kernel tap, each output depth's
        // taps then side by side in the channel dim, grouped as the weight.
        let by_depth = padded.permute(&[0, 2, 1, 3, 4]);
        let taps: Vec<Tensor> = (0..kd)
            .map(|t| {
                let start = (t * dd) as isize;
                by_depth.slice(1, start, start + ((out_depth - 1) * sd + 1) as isize, sd)
            })
            .collect();
        let planes = (n * out_depth) as isize;
        let (hi, wi) = (h as isize, w as isize);
        let stacked = if kd == 1 {
            taps[0].reshape(&[planes, c as isize, hi, wi])
        } else {
            let taps: Vec<&Tensor> = taps.iter().collect();
            let shape = [n, out_depth, kd, g, cg, h, w].map(|v| v as isize);
            Tensor::stack(&taps, 2)
                .reshape(&shape)
                .permute(&[0, 1, 3, 2, 4, 5, 6])
                .reshape(&[planes, (c * kd) as isize, hi, wi])
        };
        let w2 = weight.permute(&[0, 2, 1, 3, 4]).reshape(&[
            oc as isize,
            (kd * cg) as isize,
            kh as isize,
            kw as isize,
        ]);
        let y = stacked.conv2d(&w2, bias, o.plane());
        let (ho, wo) = (y.shape()[2] as isize, y.shape()[3] as isize);
        y.reshape(&[n as isize, out_depth as isize, oc as isize, ho, wo])
            .permute(&[0, 2, 1, 3, 4])
            .contiguous()
    });
    if batched { y } else { y.squeeze_dim(0) }
}

/// `F.conv_transpose3d`: weight `[in_channels, out_channels / groups, kD,
/// kH, kW]`; `output_padding` adds that many positions at the end of each
/// dim (less than the stride or the dilation there, as PyTorch requires).
///
/// ```
/// use tapir_runtime::{nn::{conv_transpose3d, Conv3dOptions}, Tensor};
/// let x = Tensor::ones(&[1, 1, 2, 2, 2]);
/// let w = Tensor::ones(&[1, 1, 2, 2, 2]);
/// let y = conv_transpose3d(&x, &w, None, Conv3dOptions::default().stride(2), (0, 0, 0));
/// assert_eq!(y.shape(), &[1, 1, 4, 4, 4]);
/// assert_eq!(y.sum().item::<f32>(), 64.0);
/// ```
#[track_caller]
pub fn conv_transpose3d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    o: Conv3dOptions,
    output_padding: (usize, usize, usize),
) -> Tensor {
    let attrs = || {
        let mut a = o.attrs();
        let (p0, p1, p2) = output_padding;
        a.push((
            "output_padding",
            Attr::Ints(vec![p0 as i64, p1 as i64, p2 as i64]),
        ));
        a
    };
    let [ic, cg_out, kd, kh, kw] = dims5(weight, "conv_transpose3d");
    let g = o.groups;
    assert!(
        g > 0 && ic.is_multiple_of(g),
        "conv_transpose3d: in channels {ic} of weight {:?} are not divisible by groups {g}",
        weight.shape()
    );
    let (x5, batched) = as_volume(x, weight, ic, "conv_transpose3d");
    let fits = |op: usize, s: usize, d: usize| op < s || op < d;
    assert!(
        fits(output_padding.0, o.stride.0, o.dilation.0)
            && fits(output_padding.1, o.stride.1, o.dilation.1)
            && fits(output_padding.2, o.stride.2, o.dilation.2)
            && kd * kh * kw > 0,
        "conv_transpose3d: output_padding {output_padding:?} must be smaller than either the stride {:?} or the dilation {:?} in each dim",
        o.stride,
        o.dilation
    );
    let oc = cg_out * g;
    assert!(
        bias.is_none_or(|b| b.shape() == [oc]),
        "conv_transpose3d: bias must have shape [{oc}] for weight {:?}, got {:?}",
        weight.shape(),
        bias.map(Tensor::shape)
    );
    let y = trace::op(
        "conv_transpose3d",
        [Some(&x5), Some(weight), bias],
        attrs,
        || {
            let (sd, pd, dd, opd) = (o.stride.0, o.padding.0, o.dilation.0, output_padding.0);
            let [n, _, depth, h, w] = dims5(&x5, "conv_transpose3d");
            // One 2-D transposed convolution of every input depth slice with all
            // kD weight taps as output channels, grouped as the weight.
            let planes = x5.permute(&[0, 2, 1, 3, 4]).reshape(&[
                (n * depth) as isize,
                ic as isize,
                h as isize,
                w as isize,
            ]);
            let w2 = weight
                .reshape(&[ic, cg_out, kd, kh, kw].map(|v| v as isize))
                .permute(&[0, 2, 1, 3, 4])
                .reshape(&[
                    ic as isize,
                    (kd * cg_out) as isize,
                    kh as isize,
                    kw as isize,
                ]);
            let out_plane = (0, output_padding.1, output_padding.2);
            let plane_opts = Conv3dOptions {
                padding: (0, o.padding.1, o.padding.2),
                ..o
            };
            let y =
                planes.conv_transpose2d(&w2, None, plane_opts.plane(), (out_plane.1, out_plane.2));
            let (ho, wo) = (y.shape()[2], y.shape()[3]);
            // [N, D, g, kD, C/g, H', W'] -> [N, C·H'·W'·kD, D] for a fold along depth.
            let cols = y
                .reshape(&[n, depth, g, kd, cg_out, ho, wo].map(|v| v as isize))
                .permute(&[0, 2, 4, 5, 6, 3, 1])
                .reshape(&[n as isize, (oc * ho * wo * kd) as isize, depth as isize]);
            let full = (depth - 1) * sd + dd * (kd - 1) + 1;
            let depth_opts = Conv2dOptions {
                stride: (1, sd),
                padding: (0, 0),
                dilation: (1, dd),
                groups: 1,
            };
            let summed = cols.fold2d((1, full), (1, kd), depth_opts);
            // Crop the padding and add the output padding (zeros past the taps).
            let trimmed = pad(&summed, &[-(pd as i64), opd as i64 - pd as i64], 0.0);
            let out_depth = trimmed.shape()[3];
            let mut y = trimmed
                .reshape(&[n, oc, ho, wo, out_depth].map(|v| v as isize))
                .permute(&[0, 1, 4, 2, 3])
                .contiguous();
            if let Some(b) = bias {
                y = &y + &b.reshape(&[1, oc as isize, 1, 1, 1]);
            }
            y
        },
    );
    if batched { y } else { y.squeeze_dim(0) }
}

/// A 3-D convolution's weight (`[out, in / groups, kD, kH, kW]`, or `[in,
/// out / groups, ..]` when `transposed`) and bias with PyTorch's init,
/// after checking the channels divide by the groups.
#[track_caller]
fn volume_params(
    layer: &str,
    (in_channels, out_channels): (usize, usize),
    kernel: (usize, usize, usize),
    g: usize,
    transposed: bool,
    bias: bool,
) -> (Tensor, Option<Tensor>) {
    assert!(
        g > 0 && in_channels.is_multiple_of(g) && out_channels.is_multiple_of(g),
        "{layer}: in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {g}"
    );
    let (rows, per_group) = if transposed {
        (in_channels, out_channels / g)
    } else {
        (out_channels, in_channels / g)
    };
    let shape = [rows, per_group, kernel.0, kernel.1, kernel.2];
    conv_params(&shape, out_channels, bias)
}

/// `nn.Conv3d` with PyTorch's init (kaiming-uniform a = √5, bias
/// U(±1/√fan_in)) over `[N, C, D, H, W]` or `[C, D, H, W]`.
///
/// ```
/// use tapir_runtime::{nn::{Conv3d, Conv3dOptions, Forward, Module}, Tensor};
/// let c = Conv3d::new(2, 4, (3, 3, 3), Conv3dOptions::default().padding(1), true);
/// assert_eq!(c.weight.shape(), &[4, 2, 3, 3, 3]);
/// assert_eq!(c.forward(&Tensor::zeros(&[1, 2, 5, 6, 7])).shape(), &[1, 4, 5, 6, 7]);
/// assert_eq!(
///     c.repr(),
///     "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1))"
/// );
/// ```
pub struct Conv3d {
    /// `[out_channels, in_channels / groups, kD, kH, kW]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel depth, height and width.
    pub kernel: (usize, usize, usize),
    /// Stride, padding, dilation and groups.
    pub opts: Conv3dOptions,
    /// How the padding is filled (`padding_mode`; zeros by default).
    pub padding_mode: PadMode,
}

impl Conv3d {
    /// `nn.Conv3d(in_channels, out_channels, kernel_size, ..)` with
    /// PyTorch's initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize, usize),
        opts: Conv3dOptions,
        bias: bool,
    ) -> Conv3d {
        let channels = (in_channels, out_channels);
        let (weight, bias) = volume_params("Conv3d", channels, kernel, opts.groups, false, bias);
        Conv3d {
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
    pub fn padding_mode(mut self, mode: PadMode) -> Conv3d {
        self.padding_mode = check_padding_mode(mode, "Conv3d");
        self
    }
}

impl Forward for Conv3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (d, h, w) = self.opts.padding;
        if matches!(self.padding_mode, PadMode::Constant(_)) || (d, h, w) == (0, 0, 0) {
            return conv3d(x, &self.weight, self.bias.as_ref(), self.opts);
        }
        let pads = [w, w, h, h, d, d].map(|p| p as i64);
        let padded = pad_with(x, &pads, self.padding_mode);
        let opts = Conv3dOptions {
            padding: (0, 0, 0),
            ..self.opts
        };
        conv3d(&padded, &self.weight, self.bias.as_ref(), opts)
    }
}

/// `(a, b, c)` as Python writes a tuple.
fn tuple3(t: (usize, usize, usize)) -> String {
    format!("{t:?}")
}

/// PyTorch's repr of a 3-D convolution.
fn conv3d_repr(
    name: &str,
    channels: (usize, usize),
    kernel: (usize, usize, usize),
    o: &Conv3dOptions,
    output_padding: (usize, usize, usize),
    bias: &Option<Tensor>,
) -> String {
    let optional = [
        ("padding", tuple3(o.padding), o.padding == (0, 0, 0)),
        ("dilation", tuple3(o.dilation), o.dilation == (1, 1, 1)),
        (
            "output_padding",
            tuple3(output_padding),
            output_padding == (0, 0, 0),
        ),
    ];
    let head = (tuple3(kernel), tuple3(o.stride));
    conv_repr(name, channels, head, optional, o.groups, bias)
}

/// `nn.ConvTranspose3d` (weight `[in_channels, out_channels / groups, kD,
/// kH, kW]`) with PyTorch's init. With stride `s` a depth-`D` input gives
/// `(D - 1) s - 2 padding + dilation (kD - 1) + output_padding + 1`, and
/// likewise in height and width.
///
/// ```
/// use tapir_runtime::{nn::{Conv3dOptions, ConvTranspose3d, Forward}, Tensor};
/// let opts = Conv3dOptions::default().stride(2).padding(1);
/// let up = ConvTranspose3d::new(4, 2, (3, 3, 3), opts, (1, 1, 1), true);
/// assert_eq!(up.forward(&Tensor::zeros(&[1, 4, 3, 4, 5])).shape(), &[1, 2, 6, 8, 10]);
/// ```
pub struct ConvTranspose3d {
    /// `[in_channels, out_channels / groups, kD, kH, kW]`.
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    pub bias: Option<Tensor>,
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel depth, height and width.
    pub kernel: (usize, usize, usize),
    /// Stride, padding, dilation and groups (of the convolution this one transposes).
    pub opts: Conv3dOptions,
    /// Positions added at the end of each output dim.
    pub output_padding: (usize, usize, usize),
}

impl ConvTranspose3d {
    /// `nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride,
    /// padding, output_padding, groups, bias, dilation)` with PyTorch's
    /// initialisation.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize, usize),
        opts: Conv3dOptions,
        output_padding: (usize, usize, usize),
        bias: bool,
    ) -> ConvTranspose3d {
        let channels = (in_channels, out_channels);
        let (weight, bias) =
            volume_params("ConvTranspose3d", channels, kernel, opts.groups, true, bias);
        ConvTranspose3d {
            weight,
            bias,
            in_channels,
            out_channels,
            kernel,
            opts,
            output_padding,
        }
    }
}

impl Forward for ConvTranspose3d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        conv_transpose3d(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.opts,
            self.output_padding,
        )
    }
}

super::linear::weight_bias_module! {
    Conv3d => |l| {
        let channels = (l.in_channels, l.out_channels);
        let mut s = conv3d_repr("Conv3d", channels, l.kernel, &l.opts, (0, 0, 0), &l.bias);
        s.pop();
        s + &padding_mode_repr(l.padding_mode) + ")"
    };
    ConvTranspose3d => |l| {
        let channels = (l.in_channels, l.out_channels);
        let (k, o, op) = (l.kernel, &l.opts, l.output_padding);
        conv3d_repr("ConvTranspose3d", channels, k, o, op, &l.bias)
    };
}
