//! The geometry of sliding-window ops (convolution, pooling), shared by the
//! CPU and CUDA kernels.

/// The geometry of a 2-D sliding window over an `[n, c, h, w]` input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
