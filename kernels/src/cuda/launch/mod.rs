//! Host side of every CUDA kernel: argument packing and launch shapes. Each
//! function here has a CPU twin in `crate::cpu` that the GPU checks compare
//! it with (`twins/`, `tests/cuda/`).
//!
//! Float kernels take the dtype name (`"f32"`, `"f16"`, `"bf16"`); the kernel
//! launched is `<op>_<dtype>`, the same string as in the `.cu` source.

use super::CudaBuffer;
use super::device::{CudaDevice, CudaError, CudaResult};
use crate::Layout;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use std::sync::Arc;

const MAX_DIMS: usize = 8;

/// A view's shape and strides as the kernels take them (`Strided` in
/// `cu/common.cuh`, same field order and C layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct Strided {
    pub ndim: i32,
    pub shape: [u64; MAX_DIMS],
    pub strides: [i64; MAX_DIMS],
}

// SAFETY: plain `#[repr(C)]` data matching the C struct, passed by value.
unsafe impl DeviceRepr for Strided {}

/// Packs views that share one shape (the output's), merging dims only where
/// every view allows it.
pub(in crate::cuda) fn pack(shape: &[usize], views: &[&[usize]], op: &str) -> Vec<Strided> {
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
pub(in crate::cuda) fn elems(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 65536) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block of 256 threads per row, with a float of shared memory per thread.
pub(in crate::cuda) fn per_row(rows: usize) -> LaunchConfig {
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
        let f = dev.function(&name, &[$(std::mem::size_of_val($arg)),+])?;
        let mut b = dev.stream().launch_builder(&f);
        $( b.arg($arg); )+
        // SAFETY: every use in this file passes exactly the arguments of the
        // kernel `name` as declared in its `.cu` source: sizes, `Strided`
        // views the runtime checked against the buffers' lengths, and device
        // addresses of live buffers; all launches are ordered on the device's
        // one stream, so a buffer is not reused before its kernels ran.
        unsafe { b.launch($cfg) }
            .map(|_| crate::cuda::device::count_launch())
            .map_err(|e| dev.err(&format!("launching {name}"), e))
    }};
}

pub(super) mod attention;
mod blas;
mod conv;
mod index;
mod movement;
pub(super) mod optim;
mod optim_hypers;
mod program;
pub(super) mod rows;

pub use attention::{
    ATTENTION_MAX_ROWS, ATTENTION_MAX_WIDTH, AttentionRows, AttentionSpec, AttentionView,
    attention_backward, attention_forward,
};
pub use blas::matmul;
pub use conv::{ConvGeom, col2im_f32, im2col_f32, max_pool2d_backward_f32, max_pool2d_f32};
pub use index::{Gathered, gather, index_add_f32, scatter, scatter_kernel};
pub use movement::{
    arange_f32, arange_i64, cast, compare, fill, philox, select_where, strided_assign, strided_copy,
};
pub use optim::{MULTI, UpdateItem, adam, optim_step, optim_step_many, rmsprop, sgd};
pub use program::run_program;
pub use rows::{
    cumsum_last, extreme_last, layer_norm, layer_norm_backward, softmax, sort_last, sum_first,
    sum_last,
};

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

/// `y = op(a, b)` over two views already broadcast to one shape; `p0` is
/// the op's scalar parameter (`alpha` of add_scaled), ignored by the others.
pub fn binary(
    a: &CudaBuffer,
    la: &Layout,
    b: &CudaBuffer,
    lb: &Layout,
    op: &str,
    dtype: &str,
    p0: f32,
) -> CudaResult<CudaBuffer> {
    let w = width(dtype);
    two_views(a, la, b, lb, format!("{op}_{dtype}"), (w, w), Some(p0))
}

/// Launches `kernel(n, Strided a, Strided b, [p0,] a, b, y)` over two views
/// of one shape (elements of `in_width` bytes) into a contiguous output of
/// `out_width`-byte elements; `p0` is the scalar parameter of the kernels
/// that take one (the binary ops).
fn two_views(
    a: &CudaBuffer,
    la: &Layout,
    b: &CudaBuffer,
    lb: &Layout,
    kernel: String,
    (in_width, out_width): (usize, usize),
    p0: Option<f32>,
) -> CudaResult<CudaBuffer> {
    assert!(
        la.shape == lb.shape,
        "{kernel}: CUDA views must share a shape"
    );
    let n = la.numel();
    let dev = a.device();
    let y = dev.alloc(n * out_width)?;
    if n > 0 {
        let v = pack(&la.shape, &[&la.strides, &lb.strides], &kernel);
        let (pa, pb, py) = (
            a.ptr(la.offset * in_width),
            b.ptr(lb.offset * in_width),
            y.ptr(0),
        );
        match p0 {
            Some(p0) => launch!(dev, kernel, elems(n), &n, &v[0], &v[1], &p0, &pa, &pb, &py)?,
            None => launch!(dev, kernel, elems(n), &n, &v[0], &v[1], &pa, &pb, &py)?,
        }
    }
    Ok(y)
}

/// Launches `kernel(n, Strided x, x, y)` over one view (elements of
/// `in_width` bytes) into a contiguous output of `out_width`-byte elements.
fn one_view(
    x: &CudaBuffer,
    l: &Layout,
    kernel: String,
    in_width: usize,
    out_width: usize,
) -> CudaResult<CudaBuffer> {
    let n = l.numel();
    let dev = x.device();
    let y = dev.alloc(n * out_width)?;
    if n > 0 {
        let v = pack(&l.shape, &[&l.strides], &kernel)[0];
        let (px, py) = (x.ptr(l.offset * in_width), y.ptr(0));
        launch!(dev, kernel, elems(n), &n, &v, &px, &py)?;
    }
    Ok(y)
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
