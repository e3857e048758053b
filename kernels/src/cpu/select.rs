//! Kernels whose output size depends on the values: the coordinates of
//! the nonzero elements (`torch.nonzero`, and `masked_select`'s positions).

use crate::threads::{SharedSlice, par_chunks_mut, parallel_for};

/// Elements one task counts, then writes the coordinates of.
const NONZERO_BLOCK: usize = 1 << 16;

/// The coordinates of the nonzero elements of a dense buffer of `shape`,
/// in row-major order, one row of `shape.len()` each (`[count, ndim]`
/// flat). Zero is `T::default()`, compared with `==`: NaN counts as
/// nonzero, `-0.0` as zero, as in PyTorch. The flat positions are the
/// coordinates for `shape = [len]`.
///
/// Two passes over the blocks of the buffer, each split across threads:
/// count, then write each block's coordinates from its offset.
///
/// ```
/// use tapir_kernels::cpu::nonzero_coords;
/// let x = [0.0f32, 2.0, f32::NAN, -0.0, 0.0, 5.0];
/// assert_eq!(nonzero_coords(&x, &[2, 3]), vec![0, 1, 0, 2, 1, 2]);
/// assert_eq!(nonzero_coords(&x, &[6]), vec![1, 2, 5]);
/// ```
pub fn nonzero_coords<T>(x: &[T], shape: &[usize]) -> Vec<i64>
where
    T: Copy + Default + PartialEq + Send + Sync + 'static,
{
    assert!(
        shape.iter().product::<usize>() == x.len(),
        "nonzero_coords kernel: shape {shape:?} for {} elements",
        x.len()
    );
    let zero = T::default();
    let block = |b: usize| &x[b * NONZERO_BLOCK..((b + 1) * NONZERO_BLOCK).min(x.len())];
    let mut counts = vec![0usize; x.len().div_ceil(NONZERO_BLOCK)];
    par_chunks_mut(&mut counts, 1, |b, c| {
        c[0] = block(b).iter().filter(|&&v| v != zero).count()
    });
    let mut starts = Vec::with_capacity(counts.len());
    let mut total = 0;
    for &c in &counts {
        starts.push(total);
        total += c;
    }
    let nd = shape.len();
    let mut out = crate::alloc::filled(total * nd, 0i64);
    let shared = SharedSlice::new(&mut out);
    parallel_for(counts.len(), |b| {
        // SAFETY: block b's rows start after every earlier block's `counts`
        // rows, so the pieces of different blocks are disjoint.
        let rows = unsafe { shared.piece(starts[b] * nd, counts[b] * nd) };
        let mut rows = rows.chunks_exact_mut(nd.max(1));
        for (j, v) in block(b).iter().enumerate() {
            if *v == zero {
                continue;
            }
            let Some(row) = rows.next() else { break };
            let mut at = b * NONZERO_BLOCK + j;
            for (c, &size) in row.iter_mut().zip(shape).rev() {
                *c = (at % size) as i64;
                at /= size;
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_across_blocks_are_the_nonzeros_in_order() {
        // Over two blocks, zeros scattered through (6 in 13).
        let shape = [3, 5, NONZERO_BLOCK / 7 + 11];
        let len: usize = shape.iter().product();
        let x: Vec<i64> = (0..len)
            .map(|i| ((i * i) % 13 < 5) as i64 * i as i64)
            .collect();
        let got = nonzero_coords(&x, &shape);
        let mut want = Vec::new();
        for (i, &v) in x.iter().enumerate() {
            if v != 0 {
                let (k, rest) = (i / (shape[1] * shape[2]), i % (shape[1] * shape[2]));
                want.extend([k as i64, (rest / shape[2]) as i64, (rest % shape[2]) as i64]);
            }
        }
        let rows = want.len() / 3;
        assert!(
            rows > NONZERO_BLOCK && rows < len * 3 / 5,
            "{rows} of {len}"
        );
        assert_eq!(got, want);
        assert_eq!(nonzero_coords(&[true, false, true], &[3]), vec![0, 2]);
        assert!(nonzero_coords(&[] as &[f32], &[0, 4]).is_empty());
        // A 0-d tensor: one element, zero coordinates each.
        assert!(nonzero_coords(&[1.0f64], &[]).is_empty());
    }
}
