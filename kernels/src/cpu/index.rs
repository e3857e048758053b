//! Indexing kernels: index_select, gather, scatter_add. Indices are checked
//! by the runtime (with a message naming the op) before they get here.

use crate::Layout;

/// Rows `idx` of a contiguous buffer viewed as `[outer, size, inner]` along
/// the middle dim: output `[outer, idx.len(), inner]`.
///
/// ```
/// let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
/// assert_eq!(tapir_kernels::cpu::index_select(&x, 1, 3, 2, &[2, 0]), vec![4.0, 5.0, 0.0, 1.0]);
/// ```
pub fn index_select<T: Copy>(
    x: &[T],
    outer: usize,
    size: usize,
    inner: usize,
    idx: &[usize],
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            let start = (o * size + i) * inner;
            out.extend_from_slice(&x[start..start + inner]);
        }
    }
    out
}

/// Adds rows of `src` (`[outer, idx.len(), inner]`) into rows `idx` of `dst`
/// (`[outer, size, inner]`): the adjoint of [`index_select`].
pub fn index_add_rows<T: crate::Float>(
    dst: &mut [T],
    size: usize,
    inner: usize,
    src: &[T],
    idx: &[usize],
) {
    let outer = dst.len() / (size * inner).max(1);
    for o in 0..outer {
        for (j, &i) in idx.iter().enumerate() {
            let d = (o * size + i) * inner;
            let s = (o * idx.len() + j) * inner;
            for (a, &b) in dst[d..d + inner].iter_mut().zip(&src[s..s + inner]) {
                *a = *a + b;
            }
        }
    }
}

/// `out[p] = x[p with dim replaced by index[p]]` for every position `p` of the
/// row-major `index` of shape `index_shape`; `x` is any view.
pub fn gather<T: Copy>(
    x: &[T],
    lx: &Layout,
    dim: usize,
    index: &[usize],
    index_shape: &[usize],
) -> Vec<T> {
    let mut out = Vec::with_capacity(index.len());
    for_positions(index_shape, |flat, pos| {
        let mut off = lx.offset;
        for (d, &p) in pos.iter().enumerate() {
            off += if d == dim { index[flat] } else { p } * lx.strides[d];
        }
        out.push(x[off]);
    });
    out
}

/// `dst[p with dim replaced by index[p]] += src[p]` for every position `p` of
/// `index` (row-major, shape `index_shape`); `ld` is `dst`'s strides and
/// offset (its shape is the index's: only positions the index reaches are
/// touched), `src` is any view of at least the index's extent.
pub fn scatter_add<T: crate::Float>(
    dst: &mut [T],
    ld: &Layout,
    dim: usize,
    index: &[usize],
    src: &[T],
    ls: &Layout,
) {
    for_positions(&ld.shape, |flat, pos| {
        let mut d_off = ld.offset;
        let mut s_off = ls.offset;
        for (d, &p) in pos.iter().enumerate() {
            d_off += if d == dim { index[flat] } else { p } * ld.strides[d];
            s_off += p * ls.strides[d];
        }
        dst[d_off] = dst[d_off] + src[s_off];
    });
}

fn for_positions(shape: &[usize], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = shape.iter().product();
    let mut pos = vec![0usize; shape.len()];
    for flat in 0..n {
        f(flat, &pos);
        for d in (0..shape.len()).rev() {
            pos[d] += 1;
            if pos[d] < shape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
}
