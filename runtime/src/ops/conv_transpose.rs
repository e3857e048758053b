//! `fold` (col2im, the adjoint of `unfold`) and the transposed convolution
//! built from it: each input pixel's channels times the weight give a
//! block of output taps (one GEMM), and `fold` sums the overlapping blocks
//! into the output image. Gradients come from the GEMM and from `fold`,
//! whose backward is `unfold`.

use super::conv::{Conv2dOptions, add_bias, conv_attrs};
use crate::Tensor;
use crate::trace::{self, Attr};
use tapir_kernels::Conv2dGeometry;

fn pair(p: (usize, usize)) -> Attr {
    Attr::Ints(vec![p.0 as i64, p.1 as i64])
}

impl Tensor {
    /// Sums sliding local blocks into an image (`F.fold`): `[N, C*kh*kw, L]`
    /// -> `[N, C, H, W]` for `output_size = (H, W)`, where `L` must be the
    /// number of windows [`Tensor::unfold2d`] takes from such an image with
    /// the same kernel and options (whose `groups` must be 1).
    ///
    /// ```
    /// use tapir_runtime::{Tensor, Conv2dOptions};
    /// let x = Tensor::ones(&[1, 1, 3, 3]);
    /// let cols = x.unfold2d((2, 2), Conv2dOptions::default()); // [1, 4, 4]
    /// let y = cols.fold2d((3, 3), (2, 2), Conv2dOptions::default());
    /// // Each pixel summed once per window that covers it.
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
    /// ```
    pub fn fold2d(
        &self,
        output_size: (usize, usize),
        kernel: (usize, usize),
        opts: Conv2dOptions,
    ) -> Tensor {
        let attrs = || {
            let mut a = conv_attrs(&opts);
            a.push(("kernel", pair(kernel)));
            a.push(("output_size", pair(output_size)));
            a
        };
        trace::op("fold2d", [self], attrs, || {
            let g = fold_geometry(self, output_size, kernel, &opts);
            let out_shape = [g.n, g.c, g.h, g.w];
            let out = Tensor::from_storage(self.read().col2im(self.layout(), &g), &out_shape);
            Tensor::record(out, "Col2ImBackward0", &[self], move || {
                move |grad: &Tensor, _: &[bool]| vec![Some(grad.unfold2d(kernel, opts))]
            })
        })
    }

    /// 2-D transposed convolution (`F.conv_transpose2d`, the gradient of
    /// `conv2d` with respect to its input): input `[N, C, H, W]`, weight
    /// `[C, OC/groups, kh, kw]`, optional bias `[OC]`. `output_padding`
    /// adds rows and columns at the bottom and right of the output (each
    /// smaller than the stride or the dilation), which picks among the
    /// output sizes a strided `conv2d` maps to the same input size.
    ///
    /// ```
    /// use tapir_runtime::{Tensor, Conv2dOptions};
    /// let x = Tensor::ones(&[1, 1, 2, 2]);
    /// let w = Tensor::ones(&[1, 3, 3, 3]);
    /// let y = x.conv_transpose2d(&w, None, Conv2dOptions::default().stride(2).padding(1), (1, 1));
    /// assert_eq!(y.shape(), &[1, 3, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()[..4], [1.0, 2.0, 1.0, 1.0]);
    /// ```
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: Conv2dOptions,
        output_padding: (usize, usize),
    ) -> Tensor {
        let attrs = || {
            let mut a = conv_attrs(&opts);
            a.push(("output_padding", pair(output_padding)));
            a
        };
        trace::op(
            "conv_transpose2d",
            [Some(self), Some(weight), bias],
            attrs,
            || {
                if let Some((x, w, b)) = crate::amp::cast_affine(self, weight, bias) {
                    return x.conv_transpose2d(&w, b.as_ref(), opts, output_padding);
                }
                transposed(self, weight, bias, opts, output_padding)
            },
        )
    }
}

/// The checked geometry of `fold`: the image it makes, whose windows must
/// number `cols`' last dim.
fn fold_geometry(
    cols: &Tensor,
    (h, w): (usize, usize),
    kernel: (usize, usize),
    opts: &Conv2dOptions,
) -> Conv2dGeometry {
    assert!(
        cols.ndim() == 3,
        "fold: expects a 3-D [N, C*kh*kw, L] input, got shape {:?}",
        cols.shape()
    );
    assert!(
        cols.dtype().is_float(),
        "fold: expects a float input, got {}",
        cols.dtype()
    );
    assert!(
        opts.groups == 1,
        "fold: takes no groups, got groups={}",
        opts.groups
    );
    let taps = kernel.0 * kernel.1;
    let (n, ckk, l) = (cols.shape()[0], cols.shape()[1], cols.shape()[2]);
    assert!(
        taps > 0 && ckk.is_multiple_of(taps),
        "fold: dim 1 of the input (shape {:?}) must divide by the kernel's {taps} taps {kernel:?}",
        cols.shape()
    );
    let (s, d) = (opts.stride, opts.dilation);
    assert!(
        s.0 > 0 && s.1 > 0 && d.0 > 0 && d.1 > 0,
        "fold: stride {s:?} and dilation {d:?} must be positive"
    );
    // The image `unfold` would take these blocks from.
    let g = Conv2dGeometry {
        n,
        c: ckk / taps,
        h,
        w,
        kernel,
        stride: s,
        padding: opts.padding,
        dilation: d,
    };
    let Some((oh, ow)) = g.out_hw() else {
        panic!(
            "fold: kernel {kernel:?} (dilation {d:?}) is larger than the padded output of size {:?} (padding {:?})",
            (h, w),
            opts.padding
        )
    };
    assert!(
        oh * ow == l,
        "fold: output size {:?} with kernel {kernel:?}, stride {:?}, padding {:?} and dilation {:?} has {oh}x{ow} = {} blocks, but the input of shape {:?} has {l}",
        (h, w),
        opts.stride,
        opts.padding,
        opts.dilation,
        oh * ow,
        cols.shape()
    );
    g
}

fn transposed(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: Conv2dOptions,
    output_padding: (usize, usize),
) -> Tensor {
    const OP: &str = "conv_transpose2d";
    assert!(
        x.ndim() == 4 && weight.ndim() == 4,
        "{OP}: expects a 4-D [N, C, H, W] input and a 4-D [C, OC/groups, kh, kw] weight, got shapes {:?} and {:?}",
        x.shape(),
        weight.shape()
    );
    super::same_device(x, weight, OP);
    let (c, ocg, kh, kw) = (
        weight.shape()[0],
        weight.shape()[1],
        weight.shape()[2],
        weight.shape()[3],
    );
    let groups = opts.groups;
    assert!(
        groups > 0 && c.is_multiple_of(groups),
        "{OP}: weight {:?} has {c} input channels, which do not divide into groups={groups}",
        weight.shape()
    );
    assert!(
        x.shape()[1] == c,
        "{OP}: input {:?} has {} channels, but weight {:?} expects {c}",
        x.shape(),
        x.shape()[1],
        weight.shape()
    );
    let (s, p, d) = (opts.stride, opts.padding, opts.dilation);
    assert!(
        s.0 > 0 && s.1 > 0 && d.0 > 0 && d.1 > 0,
        "{OP}: stride {s:?} and dilation {d:?} must be positive"
    );
    let op = output_padding;
    assert!(
        (op.0 < s.0 || op.0 < d.0) && (op.1 < s.1 || op.1 < d.1),
        "{OP}: output_padding {op:?} must be smaller than either stride {s:?} or dilation {d:?}"
    );
    let (n, h, w) = (x.shape()[0], x.shape()[2], x.shape()[3]);
    let size = |i: usize, s: usize, p: usize, d: usize, k: usize, o: usize| {
        (i.checked_sub(1)? * s + d * (k - 1) + o + 1)
            .checked_sub(2 * p)
            .filter(|&n| n > 0)
    };
    let out = size(h, s.0, p.0, d.0, kh, op.0).zip(size(w, s.1, p.1, d.1, kw, op.1));
    let (oh, ow) = match out {
        Some(hw) => hw,
        None => panic!(
            "{OP}: input {:?} with weight {:?}, stride {s:?}, padding {p:?}, dilation {d:?} and output_padding {op:?} gives an empty output",
            x.shape(),
            weight.shape()
        ),
    };
    let oc = ocg * groups;
    let fold_opts = Conv2dOptions { groups: 1, ..opts };
    // The windows `fold` takes over the output: one per input pixel, plus
    // (when output_padding reaches a whole stride) windows no pixel feeds.
    let probe = Conv2dGeometry {
        n,
        c: oc,
        h: oh,
        w: ow,
        kernel: (kh, kw),
        stride: s,
        padding: p,
        dilation: d,
    };
    let (bh, bw) = probe.out_hw().expect("the output fits its own windows");
    let x = if (bh, bw) != (h, w) {
        crate::nn::pad(x, &[0, (bw - w) as i64, 0, (bh - h) as i64], 0.0)
    } else {
        x.clone()
    };
    let (gi, cg) = (groups as isize, (c / groups) as isize);
    let xg = x.reshape(&[n as isize, gi, cg, (bh * bw) as isize]);
    let wg = weight
        .reshape(&[gi, cg, (ocg * kh * kw) as isize])
        .transpose(1, 2);
    let cols = wg
        .matmul(&xg)
        .reshape(&[n as isize, (oc * kh * kw) as isize, (bh * bw) as isize]);
    let y = cols.fold2d((oh, ow), (kh, kw), fold_opts);
    add_bias(OP, y, bias, oc)
}
