//! Host side of every CUDA kernel: argument packing and launch shapes. Each
//! function here has a CPU twin in `crate::cpu` that the GPU checks compare
//! it with (`twins.rs`, `tests/cuda.rs`).
//!
//! Float kernels take the dtype name (`"f32"`, `"f16"`, `"bf16"`); the kernel
//! launched is `<op>_<dtype>`, the same string as in the `.cu` source.

use super::CudaBuffer;
use super::device::{CudaDevice, CudaResult};
use crate::Layout;
use cudarc::cublas::sys as blas;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use std::sync::Arc;

const MAX_DIMS: usize = 8;

/// A view's shape and strides as the kernels take them (`Strided` in
/// `cu/common.cuh`, same field order and C layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Strided {
    ndim: i32,
    shape: [u64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for Strided {}

/// Packs views that share one shape (the output's), merging dims only where
/// every view allows it.
fn pack(shape: &[usize], views: &[&[usize]], op: &str) -> Vec<Strided> {
    // Merge jointly: a dim pair merges only if it merges in every view.
    let mut dims: Vec<(usize, Vec<usize>)> = Vec::new();
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let ks: Vec<usize> = views.iter().map(|v| v[d]).collect();
        match dims.last_mut() {
            Some((pn, pk)) if pk.iter().zip(&ks).all(|(p, k)| *p == k * shape[d]) => {
                *pn *= shape[d];
                *pk = ks;
            }
            _ => dims.push((shape[d], ks)),
        }
    }
    assert!(
        dims.len() <= MAX_DIMS,
        "{op}: CUDA kernels take views of at most {MAX_DIMS} (merged) dims, got shape {shape:?}"
    );
    (0..views.len())
        .map(|v| {
            let mut p = Strided {
                ndim: dims.len() as i32,
                shape: [1; MAX_DIMS],
                strides: [0; MAX_DIMS],
            };
            for (i, (n, ks)) in dims.iter().enumerate() {
                p.shape[i] = *n as u64;
                p.strides[i] = ks[v] as i64;
            }
            p
        })
        .collect()
}

/// Bytes per element of a dtype name (`f32 f16 bf16 f64 i64 u8 b8`).
pub fn width(dtype: &str) -> usize {
    match dtype {
        "f64" | "i64" => 8,
        "f32" => 4,
        "f16" | "bf16" => 2,
        "u8" | "b8" => 1,
        other => panic!("no CUDA kernels for dtype {other}"),
    }
}

/// The unsigned type of a width, as the data-movement kernels are named.
fn unit(width: usize) -> &'static str {
    match width {
        1 => "u8",
        2 => "u16",
        4 => "u32",
        8 => "u64",
        w => panic!("no CUDA data-movement kernel for {w}-byte elements"),
    }
}

/// Grid-stride launch shape for `n` elements (at most 64K blocks of 256).
fn elems(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 65536) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block of 256 threads per row, with a float of shared memory per thread.
fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 256 * 4,
    }
}

/// Launches kernel `$name` with the given argument references, in order.
macro_rules! launch {
    ($dev:expr, $name:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let dev: &CudaDevice = $dev;
        let name: String = $name;
        let f = dev.function(&name)?;
        let mut b = dev.stream().launch_builder(&f);
        $( b.arg($arg); )+
        // SAFETY: every use in this file passes exactly the arguments of the
        // kernel `name` as declared in its `.cu` source: sizes, `Strided`
        // views the runtime checked against the buffers' lengths, and device
        // addresses of live buffers; all launches are ordered on the device's
        // one stream, so a buffer is not reused before its kernels ran.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err(|e| dev.err(&format!("launching {name}"), e))
    }};
}

/// `y = op(x)` elementwise over the view `l` of `x`; contiguous result.
pub fn unary(
    x: &CudaBuffer,
    l: &Layout,
    op: &str,
    dtype: &str,
    p0: f32,
    p1: f32,
) -> CudaResult<CudaBuffer> {
    let w = width(dtype);
    let n = l.numel();
    let dev = x.device();
    let y = dev.alloc(n * w)?;
    if n > 0 {
        let v = pack(&l.shape, &[&l.strides], op)[0];
        let (px, py) = (x.ptr(l.offset * w), y.ptr(0));
        launch!(
            dev,
            format!("{op}_{dtype}"),
            elems(n),
            &n,
            &v,
            &p0,
            &p1,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// `y = op(a, b)` over two views already broadcast to one shape.
pub fn binary(
    a: &CudaBuffer,
    la: &Layout,
    b: &CudaBuffer,
    lb: &Layout,
    op: &str,
    dtype: &str,
) -> CudaResult<CudaBuffer> {
    assert_eq!(
        la.shape, lb.shape,
        "{op}: CUDA binary views must share a shape"
    );
    let w = width(dtype);
    let n = la.numel();
    let dev = a.device();
    let y = dev.alloc(n * w)?;
    if n > 0 {
        let v = pack(&la.shape, &[&la.strides, &lb.strides], op);
        let (pa, pb, py) = (a.ptr(la.offset * w), b.ptr(lb.offset * w), y.ptr(0));
        launch!(
            dev,
            format!("{op}_{dtype}"),
            elems(n),
            &n,
            &v[0],
            &v[1],
            &pa,
            &pb,
            &py
        )?;
    }
    Ok(y)
}

/// A contiguous copy of the view `l` (elements of `width` bytes: 1, 2, 4, 8).
pub fn strided_copy(x: &CudaBuffer, l: &Layout, width: usize) -> CudaResult<CudaBuffer> {
    let n = l.numel();
    let dev = x.device();
    if l.contiguous_offset() == Some(0) && x.bytes() == n * width {
        return x.duplicate();
    }
    let y = dev.alloc(n * width)?;
    if n > 0 {
        let v = pack(&l.shape, &[&l.strides], "copy")[0];
        let unit = unit(width);
        let (px, py) = (x.ptr(l.offset * width), y.ptr(0));
        launch!(
            dev,
            format!("strided_copy_{unit}"),
            elems(n),
            &n,
            &v,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// `n` elements of `value` in any dtype.
pub fn fill(dev: &Arc<CudaDevice>, n: usize, dtype: &str, value: f64) -> CudaResult<CudaBuffer> {
    let y = dev.alloc(n * width(dtype))?;
    if n > 0 {
        let py = y.ptr(0);
        launch!(dev, format!("fill_{dtype}"), elems(n), &n, &value, &py)?;
    }
    Ok(y)
}

/// A contiguous copy of the view converted between any two dtypes.
pub fn cast(x: &CudaBuffer, l: &Layout, from: &str, to: &str) -> CudaResult<CudaBuffer> {
    let n = l.numel();
    let dev = x.device();
    let y = dev.alloc(n * width(to))?;
    if n > 0 {
        let v = pack(&l.shape, &[&l.strides], "cast")[0];
        let (px, py) = (x.ptr(l.offset * width(from)), y.ptr(0));
        launch!(
            dev,
            format!("cast_to_{to}_{from}"),
            elems(n),
            &n,
            &v,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// `y[ly] = x[lx]` for two views of one shape (elements of `width` bytes).
pub fn strided_assign(
    y: &mut CudaBuffer,
    ly: &Layout,
    x: &CudaBuffer,
    lx: &Layout,
    width: usize,
) -> CudaResult<()> {
    assert_eq!(
        ly.shape, lx.shape,
        "strided_assign: views must share a shape"
    );
    let n = ly.numel();
    if n == 0 {
        return Ok(());
    }
    let v = pack(&ly.shape, &[&ly.strides, &lx.strides], "copy_");
    let (py, px) = (y.ptr(ly.offset * width), x.ptr(lx.offset * width));
    let dev = y.device().clone();
    launch!(
        &dev,
        format!("strided_assign_{}", unit(width)),
        elems(n),
        &n,
        &v[0],
        &v[1],
        &py,
        &px
    )
}

/// `cond ? a : b` over three views broadcast to one shape (`cond` is bool).
pub fn select_where(
    c: &CudaBuffer,
    lc: &Layout,
    a: &CudaBuffer,
    la: &Layout,
    b: &CudaBuffer,
    lb: &Layout,
    width: usize,
) -> CudaResult<CudaBuffer> {
    let n = la.numel();
    let dev = a.device();
    let y = dev.alloc(n * width)?;
    if n > 0 {
        let v = pack(&la.shape, &[&lc.strides, &la.strides, &lb.strides], "where");
        let (pc, pa, pb, py) = (
            c.ptr(lc.offset),
            a.ptr(la.offset * width),
            b.ptr(lb.offset * width),
            y.ptr(0),
        );
        launch!(
            dev,
            format!("where_{}", unit(width)),
            elems(n),
            &n,
            &v[0],
            &v[1],
            &v[2],
            &pc,
            &pa,
            &pb,
            &py
        )?;
    }
    Ok(y)
}

/// `a <cmp> b` (`eq ne lt le gt ge`) over two same-dtype views broadcast to one shape, as bool.
pub fn compare(
    a: &CudaBuffer,
    la: &Layout,
    b: &CudaBuffer,
    lb: &Layout,
    cmp: &str,
    dtype: &str,
) -> CudaResult<CudaBuffer> {
    let n = la.numel();
    let w = width(dtype);
    let dev = a.device();
    let y = dev.alloc(n)?;
    if n > 0 {
        let v = pack(&la.shape, &[&la.strides, &lb.strides], cmp);
        let (pa, pb, py) = (a.ptr(la.offset * w), b.ptr(lb.offset * w), y.ptr(0));
        launch!(
            dev,
            format!("{cmp}_{dtype}"),
            elems(n),
            &n,
            &v[0],
            &v[1],
            &pa,
            &pb,
            &py
        )?;
    }
    Ok(y)
}

/// Where a gather-like kernel reads: the input's strides viewed at the
/// output's shape, and the output's geometry around the gathered dim.
pub struct Gathered<'a> {
    pub input: &'a Layout,
    pub inner: usize,
    pub len: usize,
    pub stride: usize,
}

/// `torch.gather` (`per_element`: one index per output element) or
/// `index_select` (one index per position along the dim); `idx` is a
/// contiguous i64 buffer of in-range indices.
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
        let stride = g.stride as i64;
        let op = if per_element {
            "gather"
        } else {
            "index_select"
        };
        launch!(
            dev,
            format!("{op}_{}", unit(width)),
            elems(n),
            &n,
            &v,
            &g.inner,
            &g.len,
            &stride,
            &pi,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// `dst[.., idx[i], ..] += src[i]` along a dim (gather's adjoint), f32 with
/// atomics. `g.input` is `dst`'s contiguous strides viewed at the index's
/// shape; `ls` is the source view.
pub fn scatter_add_f32(
    dst: &mut CudaBuffer,
    g: Gathered<'_>,
    src: &CudaBuffer,
    ls: &Layout,
    idx: &CudaBuffer,
) -> CudaResult<()> {
    let n = ls.numel();
    if n == 0 {
        return Ok(());
    }
    let v = pack(&ls.shape, &[&ls.strides, &g.input.strides], "scatter_add");
    let (ps, pi, pd) = (src.ptr(ls.offset * 4), idx.ptr(0), dst.ptr(0));
    let stride = g.stride as i64;
    let dev = dst.device().clone();
    launch!(
        &dev,
        "scatter_add_f32".to_string(),
        elems(n),
        &n,
        &v[0],
        &v[1],
        &g.inner,
        &g.len,
        &stride,
        &pi,
        &ps,
        &pd
    )
}

/// Rows of a contiguous `[outer, len, inner]` f32 source added into a
/// contiguous `[outer, size, inner]` destination at rows `idx` (index_select's adjoint).
pub fn index_add_f32(
    dst: &mut CudaBuffer,
    (outer, size, inner): (usize, usize, usize),
    src: &CudaBuffer,
    idx: &CudaBuffer,
    len: usize,
) -> CudaResult<()> {
    let n = outer * len * inner;
    if n == 0 {
        return Ok(());
    }
    let (pi, ps, pd) = (idx.ptr(0), src.ptr(0), dst.ptr(0));
    let dev = dst.device().clone();
    launch!(
        &dev,
        "index_add_f32".to_string(),
        elems(n),
        &n,
        &inner,
        &len,
        &size,
        &pi,
        &ps,
        &pd
    )
}

/// Row sums (or maxima) of a contiguous `[rows, n]` buffer.
pub fn reduce_last(
    x: &CudaBuffer,
    rows: usize,
    n: usize,
    dtype: &str,
    max: bool,
) -> CudaResult<CudaBuffer> {
    let dev = x.device();
    if rows == 0 {
        return dev.alloc(0);
    }
    if n == 0 {
        return fill(dev, rows, dtype, if max { f64::NEG_INFINITY } else { 0.0 });
    }
    let y = dev.alloc(rows * width(dtype))?;
    let (px, py) = (x.ptr(0), y.ptr(0));
    let op = if max { "max_last" } else { "sum_last" };
    launch!(dev, format!("{op}_{dtype}"), per_row(rows), &n, &px, &py)?;
    Ok(y)
}

/// Softmax (or log-softmax) of each row of a contiguous `[rows, n]` buffer.
pub fn softmax(
    x: &CudaBuffer,
    rows: usize,
    n: usize,
    dtype: &str,
    log: bool,
) -> CudaResult<CudaBuffer> {
    let dev = x.device();
    let y = dev.alloc(rows * n * width(dtype))?;
    if rows > 0 && n > 0 {
        let (px, py) = (x.ptr(0), y.ptr(0));
        let op = if log { "log_softmax" } else { "softmax" };
        launch!(dev, format!("{op}_{dtype}"), per_row(rows), &n, &px, &py)?;
    }
    Ok(y)
}

/// Max (or min) of each row of a contiguous `[rows, n]` buffer (`n > 0`)
/// with the i64 index of the first extreme element; NaN wins.
pub fn extreme_last(
    x: &CudaBuffer,
    rows: usize,
    n: usize,
    dtype: &str,
    max: bool,
) -> CudaResult<(CudaBuffer, CudaBuffer)> {
    assert!(n > 0, "extreme_last: empty rows");
    let dev = x.device();
    let vals = dev.alloc(rows * width(dtype))?;
    let idx = dev.alloc(rows * 8)?;
    if rows > 0 {
        let (px, pv, pi) = (x.ptr(0), vals.ptr(0), idx.ptr(0));
        let m = max as i32;
        launch!(
            dev,
            format!("extreme_last_{dtype}"),
            elems(rows),
            &rows,
            &n,
            &m,
            &px,
            &pv,
            &pi
        )?;
    }
    Ok((vals, idx))
}

/// A 2-D sliding window over an `[n, c, h, w]` input (`ConvGeom` in `cu/conv.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConvGeom {
    pub n: i32,
    pub c: i32,
    pub h: i32,
    pub w: i32,
    pub kh: i32,
    pub kw: i32,
    pub sh: i32,
    pub sw: i32,
    pub ph: i32,
    pub pw: i32,
    pub dh: i32,
    pub dw: i32,
    pub oh: i32,
    pub ow: i32,
}

// SAFETY: plain `#[repr(C)]` i32 fields matching the C struct, passed by value.
unsafe impl DeviceRepr for ConvGeom {}

impl ConvGeom {
    /// From the CPU kernels' geometry (sizes checked to fit in i32).
    pub fn new(g: &crate::cpu::Conv2dGeometry) -> Option<ConvGeom> {
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

/// LayerNorm over the last dim of a contiguous `[rows, n]` buffer, with an
/// optional affine `(weight, bias)`: the output and the per-row f32 mean and
/// 1/std kept for backward.
pub fn layer_norm(
    x: &CudaBuffer,
    affine: Option<(&CudaBuffer, &CudaBuffer)>,
    rows: usize,
    n: usize,
    eps: f32,
    dtype: &str,
) -> CudaResult<(CudaBuffer, CudaBuffer, CudaBuffer)> {
    let dev = x.device();
    let y = dev.alloc(rows * n * width(dtype))?;
    let mean = dev.alloc(rows * 4)?;
    let rstd = dev.alloc(rows * 4)?;
    if rows > 0 && n > 0 {
        let (pw, pb) = affine.map_or((0u64, 0u64), |(w, b)| (w.ptr(0), b.ptr(0)));
        let (px, py, pm, pr) = (x.ptr(0), y.ptr(0), mean.ptr(0), rstd.ptr(0));
        launch!(
            dev,
            format!("layer_norm_{dtype}"),
            per_row(rows),
            &n,
            &eps,
            &px,
            &pw,
            &pb,
            &py,
            &pm,
            &pr
        )?;
    }
    Ok((y, mean, rstd))
}

/// Rows `ids` of a contiguous `[num, dim]` table (`ids` are i64, checked in
/// range by the caller).
pub fn embedding(
    ids: &CudaBuffer,
    n_ids: usize,
    table: &CudaBuffer,
    dim: usize,
    dtype: &str,
) -> CudaResult<CudaBuffer> {
    let dev = table.device();
    let y = dev.alloc(n_ids * dim * width(dtype))?;
    let n = n_ids * dim;
    if n > 0 {
        let (pi, pt, py) = (ids.ptr(0), table.ptr(0), y.ptr(0));
        launch!(
            dev,
            format!("embedding_{dtype}"),
            elems(n),
            &n_ids,
            &dim,
            &pi,
            &pt,
            &py
        )?;
    }
    Ok(y)
}

/// The hyper-parameters of one fused Adam/AdamW step (PyTorch's names).
#[derive(Clone, Copy, Debug)]
pub struct AdamArgs {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub decoupled: bool,
    pub step: i32,
}

/// One fused Adam/AdamW step on `n` elements: `p` (dtype), `g` (dtype),
/// and f32 moments `m`, `v`, all updated in place.
pub fn adam(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    m: &mut CudaBuffer,
    v: &mut CudaBuffer,
    n: usize,
    dtype: &str,
    h: AdamArgs,
) -> CudaResult<()> {
    if n == 0 {
        return Ok(());
    }
    let dev = p.device().clone();
    let (pp, pg, pm, pv) = (p.ptr(0), g.ptr(0), m.ptr(0), v.ptr(0));
    let decoupled = h.decoupled as i32;
    launch!(
        &dev,
        format!("adam_{dtype}"),
        elems(n),
        &n,
        &pp,
        &pg,
        &pm,
        &pv,
        &h.lr,
        &h.beta1,
        &h.beta2,
        &h.eps,
        &h.weight_decay,
        &decoupled,
        &h.step
    )
}

/// The hyper-parameters of one fused SGD step (PyTorch's names).
#[derive(Clone, Copy, Debug)]
pub struct SgdArgs {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub weight_decay: f32,
    pub nesterov: bool,
    /// The first step with momentum: the buffer starts as the gradient.
    pub first: bool,
}

/// One fused SGD step on `n` elements; `buf` (f32) is the momentum buffer.
pub fn sgd(
    p: &mut CudaBuffer,
    g: &CudaBuffer,
    buf: &mut CudaBuffer,
    n: usize,
    dtype: &str,
    h: SgdArgs,
) -> CudaResult<()> {
    if n == 0 {
        return Ok(());
    }
    let dev = p.device().clone();
    let (pp, pg, pb) = (p.ptr(0), g.ptr(0), buf.ptr(0));
    let (nesterov, first) = (h.nesterov as i32, h.first as i32);
    launch!(
        &dev,
        format!("sgd_{dtype}"),
        elems(n),
        &n,
        &pp,
        &pg,
        &pb,
        &h.lr,
        &h.momentum,
        &h.dampening,
        &h.weight_decay,
        &nesterov,
        &first
    )
}

/// `C[b] = A[b] @ B[b]` for row-major `[batch, m, k]` and `[batch, k, n]`
/// views, each contiguous in its last two dims or their transpose, with
/// batch strides (0 broadcasts one matrix over the batch). cuBLAS is
/// column-major, so it computes `C^T = B^T A^T`.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    a: &CudaBuffer,
    a_offset: usize,
    a_batch_stride: usize,
    a_transposed: bool,
    b: &CudaBuffer,
    b_offset: usize,
    b_batch_stride: usize,
    b_transposed: bool,
    (batch, m, k, n): (usize, usize, usize, usize),
    dtype: &str,
) -> CudaResult<CudaBuffer> {
    let w = width(dtype);
    let dev = a.device().clone();
    let mut c = dev.alloc(batch * m * n * w)?;
    if batch * m * n == 0 {
        return Ok(c);
    }
    if k == 0 {
        c.zero()?;
        return Ok(c);
    }
    let blas = dev.blas()?;
    // A thread's first CUDA call may be this one: cuBLAS runs in the
    // thread's current context.
    dev.bind()?;
    let op = |t: bool| {
        if t {
            blas::cublasOperation_t::CUBLAS_OP_T
        } else {
            blas::cublasOperation_t::CUBLAS_OP_N
        }
    };
    // Row-major X with leading dim ld is column-major X^T, so C^T = B^T A^T:
    // cuBLAS's first operand is B (n x k), its second A (k x m).
    let ldb = if b_transposed { k } else { n };
    let lda = if a_transposed { m } else { k };
    let (data_type, compute) = match dtype {
        "f32" if dev.allow_tf32() => (
            blas::cudaDataType::CUDA_R_32F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        "f32" => (
            blas::cudaDataType::CUDA_R_32F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        "f16" => (
            blas::cudaDataType::CUDA_R_16F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        "bf16" => (
            blas::cudaDataType::CUDA_R_16BF,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        other => panic!("matmul: no cuBLAS path for {other}"),
    };
    let int = |v: usize| -> CudaResult<i32> {
        i32::try_from(v).map_err(|_| format!("matmul: dimension {v} exceeds cuBLAS's 32-bit sizes"))
    };
    let (one, zero) = (1.0f32, 0.0f32);
    let (pa, pb, pc) = (a.ptr(a_offset * w), b.ptr(b_offset * w), c.ptr(0));
    // SAFETY: the views lie inside `a` and `b` (the runtime passes offsets,
    // leading dims and batch strides of in-bounds matrices), `c` holds
    // batch*m*n elements of `dtype`, alpha/beta are f32 as the 32F compute
    // types require, and the handle runs on the device's one stream.
    unsafe {
        cudarc::cublas::result::gemm_strided_batched_ex(
            *blas.handle(),
            op(b_transposed),
            op(a_transposed),
            int(n)?,
            int(m)?,
            int(k)?,
            (&one) as *const f32 as *const _,
            pb as *const _,
            data_type,
            int(ldb)?,
            b_batch_stride as i64,
            pa as *const _,
            data_type,
            int(lda)?,
            a_batch_stride as i64,
            (&zero) as *const f32 as *const _,
            pc as *mut _,
            data_type,
            int(n)?,
            (m * n) as i64,
            int(batch)?,
            compute,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| dev.err("cuBLAS gemm", e))?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_merges_contiguous_dims_only() {
        let p = pack(&[2, 3, 4], &[&[12, 4, 1]], "t");
        assert_eq!((p[0].ndim, p[0].shape[0], p[0].strides[0]), (1, 24, 1));
        let p = pack(&[2, 3], &[&[1, 2]], "t");
        assert_eq!(p[0].ndim, 2);
        let p = pack(&[4, 1, 5], &[&[5, 99, 1]], "t");
        assert_eq!((p[0].ndim, p[0].shape[0]), (1, 20));
        let p = pack(&[3, 4], &[&[4, 1], &[0, 1]], "t");
        assert_eq!((p[0].ndim, p[1].ndim), (2, 2));
        let p = pack(&[3, 4], &[&[4, 1], &[4, 1]], "t");
        assert_eq!((p[0].ndim, p[0].shape[0], p[0].strides[0]), (1, 12, 1));
    }
}
