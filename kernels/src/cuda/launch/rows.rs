//! Row kernels over contiguous `[rows, n]` buffers: sums, extremes, softmax, layer norm.

use super::*;

/// Row sums of a contiguous `[rows, n]` buffer.
pub fn sum_last(x: &CudaBuffer, rows: usize, n: usize, dtype: &str) -> CudaResult<CudaBuffer> {
    let dev = x.device();
    if rows == 0 {
        return dev.alloc(0);
    }
    if n == 0 {
        return fill(dev, rows, dtype, 0.0);
    }
    let y = dev.alloc(rows * width(dtype))?;
    let (px, py) = (x.ptr(0), y.ptr(0));
    launch!(
        dev,
        format!("sum_last_{dtype}"),
        per_row(rows),
        &n,
        &px,
        &py
    )?;
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

/// Running sums along each row of a contiguous `[rows, n]` buffer,
/// accumulated in f64 (twin: `cpu::cumsum_rows`).
pub fn cumsum_last(x: &CudaBuffer, rows: usize, n: usize, dtype: &str) -> CudaResult<CudaBuffer> {
    let dev = x.device();
    let y = dev.alloc(rows * n * width(dtype))?;
    if rows > 0 && n > 0 {
        let (px, py) = (x.ptr(0), y.ptr(0));
        launch!(
            dev,
            format!("cumsum_last_{dtype}"),
            elems(rows),
            &rows,
            &n,
            &px,
            &py
        )?;
    }
    Ok(y)
}

/// Each row of a contiguous `[rows, n]` buffer sorted stably, NaN last
/// (first when `descending`), with the i64 index of each value (twin:
/// `cpu::sort_rows`).
pub fn sort_last(
    x: &CudaBuffer,
    rows: usize,
    n: usize,
    dtype: &str,
    descending: bool,
) -> CudaResult<(CudaBuffer, CudaBuffer)> {
    let dev = x.device();
    let vals = dev.alloc(rows * n * width(dtype))?;
    let idx = dev.alloc(rows * n * 8)?;
    if rows > 0 && n > 0 {
        let scratch = dev.alloc(rows * n * 8)?;
        let (px, pv, pi, ps) = (x.ptr(0), vals.ptr(0), idx.ptr(0), scratch.ptr(0));
        let d = descending as i32;
        launch!(
            dev,
            format!("sort_last_{dtype}"),
            elems(rows),
            &rows,
            &n,
            &d,
            &px,
            &pv,
            &pi,
            &ps
        )?;
    }
    Ok((vals, idx))
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

/// LayerNorm's gradients for a contiguous `[rows, n]` input `x` and upstream
/// `g` (of `dtype`; `[rows, n]`), from the forward's f32 `mean` and `rstd` and the
/// optional weight: `(dx, dw, db)`, `dw`/`db` summed over the rows (the CUDA
/// twin of `cpu::layer_norm_backward_rows`).
pub fn layer_norm_backward(
    x: &CudaBuffer,
    g: &CudaBuffer,
    mean: &CudaBuffer,
    rstd: &CudaBuffer,
    weight: Option<&CudaBuffer>,
    [rows, n]: [usize; 2],
    dtype: &str,
) -> CudaResult<(CudaBuffer, CudaBuffer, CudaBuffer)> {
    let dev = x.device();
    let w = width(dtype);
    let dx = dev.alloc(rows * n * w)?;
    let dw = dev.alloc(n * w)?;
    let db = dev.alloc(n * w)?;
    if n == 0 {
        return Ok((dx, dw, db));
    }
    if rows == 0 {
        return Ok((dx, fill(dev, n, dtype, 0.0)?, fill(dev, n, dtype, 0.0)?));
    }
    let (px, pg, pm, pr) = (x.ptr(0), g.ptr(0), mean.ptr(0), rstd.ptr(0));
    let pw = weight.map_or(0u64, |b| b.ptr(0));
    let (pdx, pdw, pdb) = (dx.ptr(0), dw.ptr(0), db.ptr(0));
    launch!(
        dev,
        format!("layer_norm_backward_{dtype}"),
        per_row(rows),
        &n,
        &px,
        &pg,
        &pm,
        &pr,
        &pw,
        &pdx
    )?;
    let (per, chunks) = column_chunks(rows);
    let partials = dev.alloc(2 * chunks * n * 4)?;
    let (ppw, ppb) = (partials.ptr(0), partials.ptr(chunks * n * 4));
    launch!(
        dev,
        format!("layer_norm_param_partials_{dtype}"),
        column_partials(n, chunks, 2),
        &rows,
        &n,
        &per,
        &px,
        &pg,
        &pm,
        &pr,
        &ppw,
        &ppb
    )?;
    // `partials` goes back to the cache after this launch is queued; the
    // cache reuses blocks in stream order, so no later kernel overwrites
    // it before this one has read it.
    launch!(
        dev,
        format!("layer_norm_param_grads_{dtype}"),
        elems(n),
        &chunks,
        &n,
        &ppw,
        &ppb,
        &pdw,
        &pdb
    )?;
    Ok((dx, dw, db))
}

/// Rows per chunk and chunks of a two-stage column reduction (column sums,
/// LayerNorm's weight and bias gradients): chunks of at least 64 rows, at
/// most 256 chunks.
pub(in crate::cuda) fn column_chunks(rows: usize) -> (usize, usize) {
    let per = rows.div_ceil(256).max(64);
    (per, rows.div_ceil(per))
}

/// The first stage of a column reduction: a block per 32 columns (x) and
/// chunk of rows (y), 8 row lanes of 32 threads, `floats` floats of shared
/// memory per thread.
pub(in crate::cuda) fn column_partials(n: usize, chunks: usize, floats: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(32) as u32, chunks as u32, 1),
        block_dim: (32, 8, 1),
        shared_mem_bytes: (floats * 32 * 8 * 4) as u32,
    }
}

/// Column sums of a contiguous `[rows, n]` buffer (a sum over its leading
/// dims), in f32 whatever `dtype`, without a transposing copy.
pub fn sum_first(x: &CudaBuffer, rows: usize, n: usize, dtype: &str) -> CudaResult<CudaBuffer> {
    let dev = x.device();
    if n == 0 {
        return dev.alloc(0);
    }
    if rows == 0 {
        return fill(dev, n, dtype, 0.0);
    }
    let y = dev.alloc(n * width(dtype))?;
    let (per, chunks) = column_chunks(rows);
    let partial = dev.alloc(chunks * n * 4)?;
    let (px, pp, py) = (x.ptr(0), partial.ptr(0), y.ptr(0));
    launch!(
        dev,
        format!("sum_first_partials_{dtype}"),
        column_partials(n, chunks, 1),
        &rows,
        &n,
        &per,
        &px,
        &pp
    )?;
    // `partial` goes back to the cache once queued: reused in stream order.
    launch!(
        dev,
        format!("sum_first_finish_{dtype}"),
        elems(n),
        &chunks,
        &n,
        &pp,
        &py
    )?;
    Ok(y)
}
