//! Convolution, lowered to `unfold` (im2col) plus GEMM; `unfold`'s backward is `fold` (col2im), so they get their
//! gradient for free. On a GPU with cuDNN, convolution runs on cuDNN
//! instead, with its own backward (`conv2d_cudnn`); the lowering is its CPU
//! twin and its fallback.

use super::dense0;
use crate::Tensor;
use crate::trace::{self, Attr};
use tapir_kernels::{Conv2dGeometry, ConvPass, ConvSpec};

/// Options of a 2-D sliding window (PyTorch's defaults: stride 1, padding 0, dilation 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between windows, (height, width).
    pub stride: (usize, usize),
    /// Implicit padding on each side.
    pub padding: (usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize),
    /// Channel groups (input and output channels must divide by it).
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

impl Conv2dOptions {
    /// The same stride in both dims.
    pub fn stride(mut self, s: usize) -> Self {
        self.stride = (s, s);
        self
    }
    /// The same padding in both dims.
    pub fn padding(mut self, p: usize) -> Self {
        self.padding = (p, p);
        self
    }
    /// The same dilation in both dims.
    pub fn dilation(mut self, d: usize) -> Self {
        self.dilation = (d, d);
        self
    }
    /// Channel groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
}

/// `y + bias` over the channels of an `[N, OC, OH, OW]` output.
pub(super) fn add_bias(op: &str, y: Tensor, bias: Option<&Tensor>, oc: usize) -> Tensor {
    let Some(b) = bias else { return y };
    check_bias(op, b, oc);
    &y + &b.reshape(&[1, oc as isize, 1, 1])
}

/// Panics unless `bias` has shape `[oc]`.
fn check_bias(op: &str, bias: &Tensor, oc: usize) {
    assert!(
        bias.shape() == [oc],
        "{op}: bias must have shape [{oc}], got {:?}",
        bias.shape()
    );
}

/// The convolution on cuDNN, recording `ConvolutionBackward0` (PyTorch's
/// node), whose backward is cuDNN's two gradient convolutions; `None`
/// where cuDNN does not run it (see `storage/cudnn.rs`).
fn conv2d_cudnn(x: &Tensor, w: &Tensor, spec: ConvSpec) -> Option<Tensor> {
    if !x.read().takes_cudnn_conv(&w.read()) {
        return None;
    }
    let (xd, wd) = (dense0(x), dense0(w));
    let run = move |pass, a: &Tensor, b: &Tensor| {
        let s = a
            .read()
            .cudnn_conv2d(pass, a.layout(), (&b.read(), b.layout()), &spec);
        s.expect("cuDNN runs every pass of a convolution it takes")
    };
    let g = &spec.geometry;
    let (oh, ow) = g.out_hw().expect("the op checked the window fits");
    let out = Tensor::from_storage(run(ConvPass::Forward, &xd, &wd), &[g.n, spec.oc, oh, ow]);
    Some(Tensor::record(out, "ConvolutionBackward0", &[x, w], || {
        let (xd, wd) = (xd.saved(), wd.saved());
        move |grad: &Tensor, needs: &[bool]| {
            let gd = dense0(&grad.to_dtype(xd.dtype()));
            let dx = needs[0]
                .then(|| Tensor::from_storage(run(ConvPass::BackwardInput, &gd, &wd), xd.shape()));
            let dw = needs[1]
                .then(|| Tensor::from_storage(run(ConvPass::BackwardWeight, &xd, &gd), wd.shape()));
            vec![dx, dw]
        }
    }))
}

/// The convolution through the device's tiled forward kernel, which never
/// materialises im2col's columns, when nothing will need its gradient (the
/// columns are what the weight's gradient is made of); `None` where no
/// such kernel runs (see `Storage::conv2d_forward`).
fn conv2d_inference(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    spec: ConvSpec,
) -> Option<Tensor> {
    let inputs: Vec<&Tensor> = [Some(x), Some(w), bias].into_iter().flatten().collect();
    if Tensor::any_needs_grad(&inputs) {
        return None;
    }
    if let Some(b) = bias {
        check_bias("conv2d", b, spec.oc);
    }
    let b = bias.map(|b| (b.read(), b.layout()));
    let y = x.read().conv2d_forward(
        x.layout(),
        (&w.read(), w.layout()),
        b.as_ref().map(|(s, l)| (&**s, *l)),
        &spec,
    )?;
    let (oh, ow) = spec
        .geometry
        .out_hw()
        .expect("the op checked the window fits");
    Some(Tensor::from_storage(y, &[spec.geometry.n, spec.oc, oh, ow]))
}

pub(super) fn geometry(
    x: &Tensor,
    kernel: (usize, usize),
    o: &Conv2dOptions,
    op: &str,
) -> Conv2dGeometry {
    assert!(
        x.ndim() == 4,
        "{op}: expects a 4-D [N, C, H, W] input, got shape {:?}",
        x.shape()
    );
    assert!(
        o.stride.0 > 0 && o.stride.1 > 0 && o.dilation.0 > 0 && o.dilation.1 > 0,
        "{op}: stride and dilation must be positive"
    );
    let s = x.shape();
    let g = Conv2dGeometry {
        n: s[0],
        c: s[1],
        h: s[2],
        w: s[3],
        kernel,
        stride: o.stride,
        padding: o.padding,
        dilation: o.dilation,
    };
    assert!(
        g.out_hw().is_some_and(|(h, w)| h > 0 && w > 0),
        "{op}: kernel {kernel:?} (dilation {:?}) is larger than the padded input {:?} (padding {:?})",
        o.dilation,
        &s[2..],
        o.padding
    );
    g
}

impl Tensor {
    /// Sliding local blocks: `[N, C, H, W]` -> `[N, C*kh*kw, L]` (`F.unfold`).
    pub fn unfold2d(&self, kernel: (usize, usize), opts: Conv2dOptions) -> Tensor {
        let attrs = || {
            let mut a = conv_attrs(&opts);
            a.push(("kernel", Attr::Ints(vec![kernel.0 as i64, kernel.1 as i64])));
            a
        };
        trace::op("unfold2d", [self], attrs, || {
            self.unfold_padded(kernel, opts, 0.0, "unfold")
        })
    }

    pub(super) fn unfold_padded(
        &self,
        kernel: (usize, usize),
        opts: Conv2dOptions,
        pad: f64,
        op: &str,
    ) -> Tensor {
        assert!(
            self.dtype().is_float(),
            "{op}: expects a float input, got {}",
            self.dtype()
        );
        let g = geometry(self, kernel, &opts, op);
        let (oh, ow) = g.out_hw().unwrap();
        let out_shape = [g.n, g.c * kernel.0 * kernel.1, oh * ow];
        let out = Tensor::from_storage(self.read().im2col(self.layout(), &g, pad), &out_shape);
        let in_shape = self.shape().to_vec();
        Tensor::record(out, "Im2ColBackward0", &[self], move || {
            move |grad: &Tensor, _: &[bool]| {
                if crate::autograd::differentiating() {
                    // `fold2d` records (its backward is this unfold), for
                    // `create_graph`; the padding value plays no part.
                    let opts = Conv2dOptions { groups: 1, ..opts };
                    let size = (in_shape[2], in_shape[3]);
                    return vec![Some(grad.fold2d(size, kernel, opts))];
                }
                let x = grad.read().col2im(grad.layout(), &g);
                vec![Some(Tensor::from_storage(x, &in_shape))]
            }
        })
    }

    /// 2-D convolution (`F.conv2d`): input `[N, C, H, W]`, weight
    /// `[OC, C/groups, kh, kw]`, optional bias `[OC]`.
    ///
    /// ```
    /// use tapir_runtime::{Tensor, Conv2dOptions};
    /// let x = Tensor::ones(&[1, 1, 4, 4]);
    /// let w = Tensor::ones(&[2, 1, 3, 3]);
    /// let y = x.conv2d(&w, None, Conv2dOptions::default().padding(1));
    /// assert_eq!(y.shape(), &[1, 2, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()[5], 9.0);
    /// ```
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: Conv2dOptions) -> Tensor {
        trace::op(
            "conv2d",
            [Some(self), Some(weight), bias],
            || conv_attrs(&opts),
            || {
                if let Some((x, w, b)) = crate::amp::cast_affine(self, weight, bias) {
                    return x.conv2d(&w, b.as_ref(), opts);
                }
                assert!(
                    weight.ndim() == 4,
                    "conv2d: weight must be 4-D [OC, C/groups, kh, kw], got shape {:?}",
                    weight.shape()
                );
                assert!(
                    self.ndim() == 4,
                    "conv2d: expects a 4-D [N, C, H, W] input, got shape {:?}",
                    self.shape()
                );
                let (oc, cg, kh, kw) = (
                    weight.shape()[0],
                    weight.shape()[1],
                    weight.shape()[2],
                    weight.shape()[3],
                );
                let groups = opts.groups;
                assert!(
                    groups > 0 && oc % groups == 0,
                    "conv2d: out channels {oc} are not divisible by groups {groups}"
                );
                assert!(
                    self.shape()[1] == cg * groups,
                    "conv2d: input {:?} has {} channels, but weight {:?} with groups={groups} expects {}",
                    self.shape(),
                    self.shape()[1],
                    weight.shape(),
                    cg * groups
                );
                let g = geometry(self, (kh, kw), &opts, "conv2d");
                let spec = ConvSpec {
                    geometry: g,
                    oc,
                    groups,
                };
                if let Some(y) = conv2d_cudnn(self, weight, spec) {
                    return add_bias("conv2d", y, bias, oc);
                }
                if let Some(y) = conv2d_inference(self, weight, bias, spec) {
                    return y;
                }
                let (oh, ow) = g.out_hw().unwrap();
                let n = self.shape()[0] as isize;
                let gi = groups as isize;
                let cols = self.unfold2d((kh, kw), opts); // [N, C*kh*kw, L]
                let cols = cols.reshape(&[n, gi, (cg * kh * kw) as isize, (oh * ow) as isize]);
                let w = weight.reshape(&[gi, (oc / groups) as isize, (cg * kh * kw) as isize]);
                let y = w
                    .matmul(&cols)
                    .reshape(&[n, oc as isize, oh as isize, ow as isize]);
                add_bias("conv2d", y, bias, oc)
            },
        )
    }
}

/// A convolution's stride, padding, dilation and groups as attributes
/// (for replay and export).
pub(crate) fn conv_attrs(opts: &Conv2dOptions) -> trace::Attrs {
    let pair = |p: (usize, usize)| Attr::Ints(vec![p.0 as i64, p.1 as i64]);
    vec![
        ("stride", pair(opts.stride)),
        ("padding", pair(opts.padding)),
        ("dilation", pair(opts.dilation)),
        ("groups", Attr::Int(opts.groups as i64)),
    ]
}
