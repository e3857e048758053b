//! The geometry of sliding-window ops (convolution, pooling), shared by the
//! CPU and CUDA kernels.

/// The geometry of a 2-D sliding window over an `[n, c, h, w]` input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dGeometry {
    /// Batch size.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel (window) height and width.
    pub kernel: (usize, usize),
    /// Step between windows.
    pub stride: (usize, usize),
    /// Implicit padding on each side.
    pub padding: (usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize),
}

impl Conv2dGeometry {
    /// Output height and width (PyTorch's formula, floor division). `None`
    /// when the dilated kernel does not fit in the padded input.
    ///
    /// ```
    /// use tapir_kernels::Conv2dGeometry;
    /// let g = Conv2dGeometry { n: 1, c: 1, h: 28, w: 28, kernel: (3, 3), stride: (1, 1), padding: (1, 1), dilation: (1, 1) };
    /// assert_eq!(g.out_hw(), Some((28, 28)));
    /// ```
    pub fn out_hw(&self) -> Option<(usize, usize)> {
        let span = |size: usize, k: usize, s: usize, p: usize, d: usize| {
            let eff = d * (k - 1) + 1;
            (size + 2 * p).checked_sub(eff).map(|r| r / s + 1)
        };
        let oh = span(
            self.h,
            self.kernel.0,
            self.stride.0,
            self.padding.0,
            self.dilation.0,
        )?;
        let ow = span(
            self.w,
            self.kernel.1,
            self.stride.1,
            self.padding.1,
            self.dilation.1,
        )?;
        Some((oh, ow))
    }

    /// Output positions per plane (`oh * ow`).
    pub(crate) fn plane_cols(&self) -> usize {
        let (oh, ow) = self.out_hw().expect("conv geometry checked by the caller");
        oh * ow
    }
}

/// A 2-D convolution: its window over the input, and its output channels
/// and channel groups (weight `[oc, c / groups, kh, kw]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvSpec {
    /// The input and the window.
    pub geometry: Conv2dGeometry,
    /// Output channels.
    pub oc: usize,
    /// Channel groups (dividing `c` and `oc`).
    pub groups: usize,
}

impl ConvSpec {
    /// Elements of the input, the weight and the output.
    ///
    /// ```
    /// use tapir_kernels::{Conv2dGeometry, ConvSpec};
    /// let geometry = Conv2dGeometry { n: 2, c: 4, h: 28, w: 20, kernel: (3, 5), stride: (2, 1), padding: (1, 2), dilation: (1, 2) };
    /// let s = ConvSpec { geometry, oc: 8, groups: 2 };
    /// // out: floor((28 + 2 - 2 - 1) / 2) + 1 = 14 by floor((20 + 4 - 8 - 1) / 1) + 1 = 16
    /// assert_eq!(s.lens(), (2 * 4 * 28 * 20, 8 * 2 * 3 * 5, 2 * 8 * 14 * 16));
    /// ```
    pub fn lens(&self) -> (usize, usize, usize) {
        let g = &self.geometry;
        let (oh, ow) = g.out_hw().unwrap_or((0, 0));
        (
            g.n * g.c * g.h * g.w,
            self.oc * (g.c / self.groups.max(1)) * g.kernel.0 * g.kernel.1,
            g.n * self.oc * oh * ow,
        )
    }
}

/// One of the three convolutions of a convolution layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvPass {
    /// The output from the input and the weight.
    Forward,
    /// The input's gradient from the output's and the weight.
    BackwardInput,
    /// The weight's gradient from the input and the output's gradient.
    BackwardWeight,
}
