//! Gathers along a dim (gather, index_select; embedding is index_select of
//! rows) and their adjoints.

use super::*;
use crate::cpu::ScatterMode;

/// Where a gather-like kernel reads: the input's strides viewed at the
/// output's shape, and the output's geometry around the gathered dim; `size`
/// is the input's size along it, which every index is checked against on
/// the device (an error names `op`; see `checks.rs`).
pub struct Gathered<'a> {
    /// The input's strides and offset at the output's (index's) shape.
    pub input: &'a Layout,
    /// Product of the output's dims after the indexed one.
    pub inner: usize,
    /// The output's size along the indexed dim.
    pub len: usize,
    /// The input's stride along the indexed dim.
    pub stride: usize,
    /// The input's size along it (indices are checked against it).
    pub size: usize,
    /// The op an out-of-range index is reported as.
    pub op: &'static str,
}

/// `torch.gather` (`per_element`: one index per output element) or
/// `index_select` (one index per position along the dim); `idx` is a
/// contiguous i64 buffer. An out-of-range index reads nothing (its output
/// is 0) and is reported at the next host read.
pub fn gather(
    x: &CudaBuffer,
    g: Gathered<'_>,
    idx: &CudaBuffer,
    width: usize,
    per_element: bool,
) -> CudaResult<CudaBuffer> {
    let n = g.input.numel();
    let dev = x.device();
    let y = dev.alloc(n * width)?;
    if n > 0 {
        let v = pack(&g.input.shape, &[&g.input.strides], "gather")[0];
        let (px, pi, py) = (x.ptr(g.input.offset * width), idx.ptr(0), y.ptr(0));
        let (stride, size) = (g.stride as i64, g.size as i64);
        let kernel = if per_element {
            "gather"
        } else {
            "index_select"
        };
        let check = dev.index_check(g.op, g.size)?;
        launch!(
            dev,
            format!("{kernel}_{}", unit(width)),
            elems(n),
            &n,
            &v,
            &g.inner,
            &g.len,
            &stride,
            &size,
            &check.flag,
            &check.id,
            &pi,
            &px,
            &py
        )?;
        dev.after_checked_launch()?;
    }
    Ok(y)
}

/// The scatter kernel for `mode` on elements of `width` bytes, if there is
/// one: assignment for every width, the sum, product, max and min in f32.
pub fn scatter_kernel(mode: ScatterMode, width: usize) -> Option<String> {
    match (mode, width) {
        (ScatterMode::Assign, _) => Some(format!("scatter_assign_{}", unit(width))),
        (ScatterMode::Sum, 4) => Some("scatter_add_f32".into()),
        (m, 4) => Some(format!("scatter_{}_f32", m.name())),
        _ => None,
    }
}

/// `dst[.., idx[i], ..] = mode(dst[.., idx[i], ..], src[i])` along a dim
/// (the sum is gather's adjoint), with atomics; out-of-range indices touch
/// nothing and are reported. `g.input` is `dst`'s contiguous strides viewed
/// at the index's shape; `ls` is the source view. `kernel` is
/// [`scatter_kernel`]'s name for the mode and element width.
pub fn scatter(
    dst: &mut CudaBuffer,
    g: Gathered<'_>,
    src: &CudaBuffer,
    ls: &Layout,
    idx: &CudaBuffer,
    (kernel, width): (&str, usize),
) -> CudaResult<()> {
    let n = ls.numel();
    if n == 0 {
        return Ok(());
    }
    let v = pack(&ls.shape, &[&ls.strides, &g.input.strides], "scatter");
    let (ps, pi, pd) = (src.ptr(ls.offset * width), idx.ptr(0), dst.ptr(0));
    let (stride, size) = (g.stride as i64, g.size as i64);
    let dev = dst.device().clone();
    let check = dev.index_check(g.op, g.size)?;
    launch!(
        &dev,
        kernel.to_string(),
        elems(n),
        &n,
        &v[0],
        &v[1],
        &g.inner,
        &g.len,
        &stride,
        &size,
        &check.flag,
        &check.id,
        &pi,
        &ps,
        &pd
    )?;
    dev.after_checked_launch()
}

/// Rows of a contiguous `[outer, len, inner]` f32 source added into a
/// contiguous `[outer, size, inner]` destination at rows `idx` (index_select's
/// adjoint, and `index_add`); a bad index is reported as `op`'s.
pub fn index_add_f32(
    dst: &mut CudaBuffer,
    (outer, size, inner): (usize, usize, usize),
    src: &CudaBuffer,
    idx: &CudaBuffer,
    (len, op): (usize, &'static str),
) -> CudaResult<()> {
    let n = outer * len * inner;
    if n == 0 {
        return Ok(());
    }
    let (pi, ps, pd) = (idx.ptr(0), src.ptr(0), dst.ptr(0));
    let dev = dst.device().clone();
    let check = dev.index_check(op, size)?;
    launch!(
        &dev,
        "index_add_f32".to_string(),
        elems(n),
        &n,
        &inner,
        &len,
        &size,
        &check.flag,
        &check.id,
        &pi,
        &ps,
        &pd
    )?;
    dev.after_checked_launch()
}
