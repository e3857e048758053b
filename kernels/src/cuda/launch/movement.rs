//! Data movement: copies between views, fills, casts, `where`, comparisons.

use super::*;

/// A contiguous copy of the view `l` (elements of `width` bytes: 1, 2, 4, 8).
pub fn strided_copy(x: &CudaBuffer, l: &Layout, width: usize) -> CudaResult<CudaBuffer> {
    if l.contiguous_offset() == Some(0) && x.bytes() == l.numel() * width {
        return x.duplicate();
    }
    one_view(x, l, format!("strided_copy_{}", unit(width)), width, width)
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

/// `start + i * step` for `i` in `0..n`, as i64 (the CPU twin is
/// `cpu::arange_i64`).
pub fn arange_i64(
    dev: &Arc<CudaDevice>,
    n: usize,
    start: i64,
    step: i64,
) -> CudaResult<CudaBuffer> {
    let y = dev.alloc(n * 8)?;
    if n > 0 {
        let py = y.ptr(0);
        launch!(
            dev,
            "arange_i64".to_string(),
            elems(n),
            &n,
            &start,
            &step,
            &py
        )?;
    }
    Ok(y)
}

/// `start + i * step` for `i` in `0..n`, computed in f64, as f32 (the CPU
/// twin is `cpu::arange_f32`).
pub fn arange_f32(
    dev: &Arc<CudaDevice>,
    n: usize,
    start: f64,
    step: f64,
) -> CudaResult<CudaBuffer> {
    let y = dev.alloc(n * 4)?;
    if n > 0 {
        let py = y.ptr(0);
        launch!(
            dev,
            "arange_f32".to_string(),
            elems(n),
            &n,
            &start,
            &step,
            &py
        )?;
    }
    Ok(y)
}

/// `n` Philox4x32-10 draws as f32 at stream positions `offset..offset + n`
/// under `seed`: uniform in `[0, 1)`, or standard normal with `normal`
/// (the CPU twins are `cpu::philox_uniform` and `cpu::philox_normal`).
pub fn philox(
    dev: &Arc<CudaDevice>,
    n: usize,
    seed: u64,
    offset: u64,
    normal: bool,
) -> CudaResult<CudaBuffer> {
    let y = dev.alloc(n * 4)?;
    if n > 0 {
        let py = y.ptr(0);
        let name = match normal {
            true => "philox_normal_f32",
            false => "philox_uniform_f32",
        };
        launch!(dev, name.to_string(), elems(n), &n, &seed, &offset, &py)?;
    }
    Ok(y)
}

/// A contiguous copy of the view converted between any two dtypes.
pub fn cast(x: &CudaBuffer, l: &Layout, from: &str, to: &str) -> CudaResult<CudaBuffer> {
    one_view(x, l, format!("cast_to_{to}_{from}"), width(from), width(to))
}

/// `y[ly] = x[lx]` for two views of one shape (elements of `width` bytes).
pub fn strided_assign(
    y: &mut CudaBuffer,
    ly: &Layout,
    x: &CudaBuffer,
    lx: &Layout,
    width: usize,
) -> CudaResult<()> {
    assert!(
        ly.shape == lx.shape,
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
    two_views(
        a,
        la,
        b,
        lb,
        format!("{cmp}_{dtype}"),
        (width(dtype), 1),
        None,
    )
}
