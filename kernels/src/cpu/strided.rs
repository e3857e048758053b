//! Walking several same-shaped strided operands together, row by row.

/// Merges adjacent dims that are contiguous in every operand and drops size-1
/// dims, so the innermost row is as long as possible (PyTorch's
/// TensorIterator does the same). Returns the merged shape and strides.
///
/// ```
/// use tapir_kernels::cpu::coalesce;
/// let (shape, strides) = coalesce(&[4, 5, 6], &[&[30, 6, 1], &[0, 6, 1]]);
/// assert_eq!(shape, vec![4, 30]);
/// assert_eq!(strides, vec![vec![30, 1], vec![0, 1]]);
/// ```
pub fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides
                .iter()
                .zip(&out_strides)
                .all(|(s, o)| *o.last().unwrap() == s[d] * shape[d]);
        if mergeable {
            *out_shape.last_mut().unwrap() *= shape[d];
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                *o.last_mut().unwrap() = s[d];
            }
        } else {
            out_shape.push(shape[d]);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    (out_shape, out_strides)
}

/// Calls `f(bases, len, inner_strides)` for rows `start..end` of `N` operands
/// that share `shape` (already coalesced or not).
pub(crate) fn for_rows<const N: usize>(
    shape: &[usize],
    strides: [&[usize]; N],
    offsets: [usize; N],
    start: usize,
    end: usize,
    mut f: impl FnMut([usize; N], usize, [usize; N]),
) {
    let nd = shape.len();
    if nd == 0 {
        if start < end {
            f(offsets, 1, [1; N]);
        }
        return;
    }
    if start >= end || shape.contains(&0) {
        return;
    }
    let len = shape[nd - 1];
    let inner: [usize; N] = std::array::from_fn(|i| strides[i][nd - 1]);
    let outer = &shape[..nd - 1];
    // The index on the stack: a reduction calls this once per output, and
    // a heap index there was half of a mean over 2 x 2 windows' time.
    let (mut stack, mut heap) = ([0usize; 8], Vec::new());
    let idx: &mut [usize] = if nd - 1 <= stack.len() {
        &mut stack[..nd - 1]
    } else {
        heap.resize(nd - 1, 0);
        &mut heap
    };
    let mut bases = offsets;
    let mut rem = start;
    for d in (0..nd - 1).rev() {
        idx[d] = rem % outer[d];
        rem /= outer[d];
        for i in 0..N {
            bases[i] += idx[d] * strides[i][d];
        }
    }
    for _ in start..end {
        f(bases, len, inner);
        let mut d = nd - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for i in 0..N {
                bases[i] += strides[i][d];
            }
            if idx[d] < outer[d] {
                break;
            }
            for i in 0..N {
                bases[i] -= idx[d] * strides[i][d];
            }
            idx[d] = 0;
        }
    }
}

/// Number of rows of `shape` (product of all but the last dim).
pub(crate) fn row_count(shape: &[usize]) -> usize {
    match shape.split_last() {
        None => 1,
        Some((&0, _)) => 0,
        Some((_, outer)) => outer.iter().product(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;

    /// Rows of a transposed view, from any start row, against the view's
    /// own element order: with up to 8 outer dims (the index on the stack)
    /// and with 10 (on the heap).
    #[test]
    fn rows_walk_a_view_in_order_at_any_depth() {
        for nd in [3, 9, 11] {
            let shape: Vec<usize> = (0..nd).map(|d| 1 + d % 3).collect();
            let l = Layout::contiguous(&shape).transpose(0, nd - 2);
            let mut want = vec![];
            l.for_each_offset(|o| want.push(o));
            let rows = row_count(&l.shape);
            let len = l.shape[nd - 1];
            for start in [0, rows / 2] {
                let mut got = vec![];
                for_rows(
                    &l.shape,
                    [&l.strides],
                    [l.offset],
                    start,
                    rows,
                    |[b], n, [s]| got.extend((0..n).map(|i| b + i * s)),
                );
                assert_eq!(got, want[start * len..], "{nd} dims from row {start}");
            }
        }
    }
}
