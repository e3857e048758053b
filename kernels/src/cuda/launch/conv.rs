//! im2col / col2im for convolution, and max pooling.

use super::*;

/// A 2-D sliding window over an `[n, c, h, w]` input (`ConvGeom` in `cu/conv.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConvGeom {
    /// Batch size.
    pub n: i32,
    /// Channels.
    pub c: i32,
    /// Input height.
    pub h: i32,
    /// Input width.
    pub w: i32,
    /// Kernel height.
    pub kh: i32,
    /// Kernel width.
    pub kw: i32,
    /// Vertical stride.
    pub sh: i32,
    /// Horizontal stride.
    pub sw: i32,
    /// Vertical padding.
    pub ph: i32,
    /// Horizontal padding.
    pub pw: i32,
    /// Vertical dilation.
    pub dh: i32,
    /// Horizontal dilation.
    pub dw: i32,
    /// Output height.
    pub oh: i32,
    /// Output width.
    pub ow: i32,
}

// SAFETY: plain `#[repr(C)]` i32 fields matching the C struct, passed by value.
unsafe impl DeviceRepr for ConvGeom {}

impl ConvGeom {
    /// From the CPU kernels' geometry (sizes checked to fit in i32).
    pub fn new(g: &crate::Conv2dGeometry) -> Option<ConvGeom> {
        let (oh, ow) = g.out_hw()?;
        let i = |v: usize| i32::try_from(v).ok();
        Some(ConvGeom {
            n: i(g.n)?,
            c: i(g.c)?,
            h: i(g.h)?,
            w: i(g.w)?,
            kh: i(g.kernel.0)?,
            kw: i(g.kernel.1)?,
            sh: i(g.stride.0)?,
            sw: i(g.stride.1)?,
            ph: i(g.padding.0)?,
            pw: i(g.padding.1)?,
            dh: i(g.dilation.0)?,
            dw: i(g.dilation.1)?,
            oh: i(oh)?,
            ow: i(ow)?,
        })
    }

    fn count(&self, dims: &[i32]) -> usize {
        dims.iter().map(|&d| d as usize).product()
    }
}

/// im2col of a contiguous f32 `[n, c, h, w]` buffer into `[n, c*kh*kw, oh*ow]`
/// columns; taps in the padding read `pad`.
pub fn im2col_f32(x: &CudaBuffer, g: ConvGeom, pad: f32) -> CudaResult<CudaBuffer> {
    let total = g.count(&[g.n, g.c, g.kh, g.kw, g.oh, g.ow]);
    let dev = x.device();
    let y = dev.alloc(total * 4)?;
    if total > 0 {
        let (px, py) = (x.ptr(0), y.ptr(0));
        launch!(
            dev,
            "im2col_f32".to_string(),
            elems(total),
            &total,
            &g,
            &pad,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// col2im (im2col's adjoint) of contiguous f32 columns into `[n, c, h, w]`.
pub fn col2im_f32(cols: &CudaBuffer, g: ConvGeom) -> CudaResult<CudaBuffer> {
    let total = g.count(&[g.n, g.c, g.h, g.w]);
    let dev = cols.device();
    let y = dev.alloc(total * 4)?;
    if total > 0 {
        let (pc, py) = (cols.ptr(0), y.ptr(0));
        launch!(
            dev,
            "col2im_f32".to_string(),
            elems(total),
            &total,
            &g,
            &pc,
            &py
        )?;
    }
    Ok(y)
}

/// Max pooling of a contiguous f32 `[n, c, h, w]` buffer: the `[n, c, oh, ow]`
/// maxima and their flat i64 argmax within each plane (CPU twin
/// [`crate::cpu::max_pool2d`]).
pub fn max_pool2d_f32(x: &CudaBuffer, g: ConvGeom) -> CudaResult<(CudaBuffer, CudaBuffer)> {
    let total = g.count(&[g.n, g.c, g.oh, g.ow]);
    let dev = x.device();
    let vals = dev.alloc(total * 4)?;
    let idx = dev.alloc(total * 8)?;
    if total > 0 {
        let (px, pv, pi) = (x.ptr(0), vals.ptr(0), idx.ptr(0));
        launch!(
            dev,
            "max_pool2d_f32".to_string(),
            elems(total),
            &total,
            &g,
            &px,
            &pv,
            &pi
        )?;
    }
    Ok((vals, idx))
}

/// The gradient of [`max_pool2d_f32`] from contiguous f32 `[n, c, oh, ow]`
/// gradients and its indices: an `[n, c, h, w]` image (CPU twin
/// [`crate::cpu::max_pool2d_backward`]).
pub fn max_pool2d_backward_f32(
    grad: &CudaBuffer,
    idx: &CudaBuffer,
    g: ConvGeom,
) -> CudaResult<CudaBuffer> {
    let total = g.count(&[g.n, g.c, g.h, g.w]);
    let dev = grad.device();
    let y = dev.alloc(total * 4)?;
    if total > 0 {
        let (pg, pi, py) = (grad.ptr(0), idx.ptr(0), y.ptr(0));
        launch!(
            dev,
            "max_pool2d_backward_f32".to_string(),
            elems(total),
            &total,
            &g,
            &pg,
            &pi,
            &py
        )?;
    }
    Ok(y)
}
