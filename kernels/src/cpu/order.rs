//! Row-wise ordering kernels over a dense `[rows, n]` buffer: running sums
//! and stable sorts. The CUDA twins are `cu/order.cu` (a thread per row,
//! the same accumulation and the same comparison).

use super::columns::{COLUMN_BLOCK, par_column_runs};
use crate::threads::{SharedSlice, par_chunks_mut, par_chunks_mut2};

/// Running sums along each row of a dense `[rows, n]` buffer: `add` folds
/// an element into the accumulator (which may be wider than `T`: PyTorch
/// sums f32 in f64 on the CPU) and `out` rounds it back.
///
/// ```
/// use tapir_kernels::cpu::cumsum_rows;
/// let y = cumsum_rows(&[1.0f32, 2.0, 3.0, 4.0], 2, 0.0f64, |a, x| a + x as f64, |a| a as f32);
/// assert_eq!(y, vec![1.0, 3.0, 3.0, 7.0]);
/// ```
pub fn cumsum_rows<T, A>(
    x: &[T],
    n: usize,
    zero: A,
    add: impl Fn(A, T) -> A + Sync,
    out: impl Fn(A) -> T + Sync,
) -> Vec<T>
where
    T: Copy + Default + Send + Sync + 'static,
    A: Copy + Sync,
{
    if n == 0 {
        return crate::alloc::filled(x.len(), T::default());
    }
    let mut y = crate::alloc::with_capacity(x.len());
    // Rows in groups, summed side by side in strips of 16: each row's sum
    // is one chain of dependent adds (4 cycles each in f64), so one row at
    // a time left the core waiting; the rows' strips overlap. (Element by
    // element across the rows, each load followed a store 8 KB, a multiple
    // of 4 KB, before it: false store-to-load aliasing, 2x slower.) Each row
    // keeps its own order.
    const GROUP: usize = 8;
    const STRIP: usize = 16;
    let slots = &mut y.spare_capacity_mut()[..x.len()];
    par_chunks_mut(slots, n * GROUP, |g, block| {
        let rows = block.len() / n;
        let src = &x[g * n * GROUP..][..rows * n];
        let mut acc = [zero; GROUP];
        for i0 in (0..n).step_by(STRIP) {
            let i1 = (i0 + STRIP).min(n);
            for (k, a) in acc.iter_mut().enumerate().take(rows) {
                for i in k * n + i0..k * n + i1 {
                    *a = add(*a, src[i]);
                    block[i].write(out(*a));
                }
            }
        }
    });
    // SAFETY: the groups cover every row, and each wrote all `n` of its
    // slots just above.
    unsafe { y.set_len(x.len()) };
    y
}

/// Running sums down the middle dim of a contiguous `[outer, len, inner]`
/// buffer, as [`cumsum_rows`] sums each row (the same `add` and `out`, in
/// row order): a running sum per column, vectorised across the columns and
/// reading rows whole. Along a dim that is not the last this was two
/// transposed copies around the rows kernel.
///
/// ```
/// use tapir_kernels::cpu::cumsum_columns;
/// let y = cumsum_columns(&[1.0f32, 2.0, 3.0, 4.0], 2, 2, 0.0f64, |a, x| a + x as f64, |a| a as f32);
/// assert_eq!(y, vec![1.0, 2.0, 4.0, 6.0]);
/// ```
pub fn cumsum_columns<T, A>(
    x: &[T],
    len: usize,
    inner: usize,
    zero: A,
    add: impl Fn(A, T) -> A + Sync,
    out: impl Fn(A) -> T + Sync,
) -> Vec<T>
where
    T: Copy + Send + Sync + 'static,
    A: Copy + Sync,
{
    let mut y = crate::alloc::with_capacity(x.len());
    let shared = SharedSlice::new(&mut y.spare_capacity_mut()[..x.len()]);
    par_column_runs(x.len(), len, inner, |base, cols| {
        let mut acc = [zero; COLUMN_BLOCK];
        let acc = &mut acc[..cols.len()];
        for r in 0..len {
            let at = base + r * inner + cols.start;
            // SAFETY: these columns of this plane belong to this run alone,
            // and one row's piece lives at a time.
            let dst = unsafe { shared.piece(at, cols.len()) };
            for ((a, d), &v) in acc.iter_mut().zip(dst).zip(&x[at..at + cols.len()]) {
                *a = add(*a, v);
                d.write(out(*a));
            }
        }
    });
    // SAFETY: the runs covered every column of every plane, each writing
    // all `len` rows of its columns.
    unsafe { y.set_len(x.len()) };
    y
}

/// Whether `a` comes strictly before `b`: ascending puts NaN last,
/// descending first (PyTorch's order; NaN is `x != x`).
#[inline]
fn before<T: PartialOrd>(a: &T, b: &T, descending: bool) -> bool {
    #[allow(clippy::eq_op)]
    let (a_nan, b_nan) = (a != a, b != b);
    match (descending, a_nan) {
        (true, true) => !b_nan,
        (true, false) => !b_nan && a > b,
        (false, true) => false,
        (false, false) => b_nan || a < b,
    }
}

/// [`before`] as an ordering: `Equal` for ties (NaN with NaN among them).
#[inline]
fn order<T: PartialOrd>(a: &T, b: &T, descending: bool) -> std::cmp::Ordering {
    if before(a, b, descending) {
        std::cmp::Ordering::Less
    } else if before(b, a, descending) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// Each row of a dense `[rows, n]` buffer sorted, stably (equal elements
/// keep their order), with the i64 index each value came from.
///
/// ```
/// use tapir_kernels::cpu::sort_rows;
/// let (v, i) = sort_rows(&[3.0f32, f32::NAN, 1.0, 3.0], 4, false);
/// assert_eq!(&v[..3], &[1.0, 3.0, 3.0]);
/// assert!(v[3].is_nan());
/// assert_eq!(i, vec![2, 0, 3, 1]);
/// ```
pub fn sort_rows<T>(x: &[T], n: usize, descending: bool) -> (Vec<T>, Vec<i64>)
where
    T: Copy + Default + PartialOrd + Send + Sync + 'static,
{
    let mut idx = crate::alloc::filled(x.len(), 0i64);
    let mut vals = crate::alloc::filled(x.len(), T::default());
    if n == 0 {
        return (vals, idx);
    }
    par_chunks_mut2((&mut idx, n), (&mut vals, n), |r, ir, vr| {
        let xr = &x[r * n..(r + 1) * n];
        for (k, i) in ir.iter_mut().enumerate() {
            *i = k as i64;
        }
        // A stable sort by "comes before": ties keep their order.
        ir.sort_by(|&a, &b| order(&xr[a as usize], &xr[b as usize], descending));
        for (v, &i) in vr.iter_mut().zip(ir.iter()) {
            *v = xr[i as usize];
        }
    });
    (vals, idx)
}

/// [`sort_rows`] for f32 rows of up to 2^32: each element packed as its
/// order key (NaN last ascending, first descending; `-0.0` as `0.0`) above
/// its index, so an unstable sort of the packed words is the stable sort
/// (ties fall back to the index). Sorting indices by comparing the values
/// they point to, NaN-aware, was 0.75x PyTorch's time.
///
/// ```
/// use tapir_kernels::cpu::sort_rows_f32;
/// let (v, i) = sort_rows_f32(&[3.0, f32::NAN, -0.0, 0.0], 4, true);
/// assert!(v[0].is_nan());
/// assert_eq!((&v[1..], i), (&[3.0, -0.0, 0.0][..], vec![1, 0, 2, 3]));
/// ```
pub fn sort_rows_f32(x: &[f32], n: usize, descending: bool) -> (Vec<f32>, Vec<i64>) {
    assert!(
        n <= u32::MAX as usize && (n == 0 || x.len().is_multiple_of(n)),
        "sort_rows_f32 kernel: {} elements are not rows of {n} (up to 2^32)",
        x.len()
    );
    let mut idx = crate::alloc::filled(x.len(), 0i64);
    let mut vals = crate::alloc::filled(x.len(), 0.0f32);
    if n == 0 {
        return (vals, idx);
    }
    par_chunks_mut2((&mut idx, n), (&mut vals, n), |r, ir, vr| {
        let xr = &x[r * n..(r + 1) * n];
        let mut packed: Vec<u64> = xr
            .iter()
            .enumerate()
            .map(|(i, &v)| (order_key(v, descending) as u64) << 32 | i as u64)
            .collect();
        packed.sort_unstable();
        for ((i, v), &p) in ir.iter_mut().zip(vr.iter_mut()).zip(&packed) {
            let at = (p & u32::MAX as u64) as usize;
            (*i, *v) = (at as i64, xr[at]);
        }
    });
    (vals, idx)
}

/// A u32 whose unsigned order is [`before`]'s order of f32 values: the
/// sign-flipped bits for numbers (`-0.0` counted as `0.0`), NaN above all
/// ascending, below all descending.
#[inline(always)]
fn order_key(v: f32, descending: bool) -> u32 {
    let key = if v.is_nan() {
        u32::MAX
    } else {
        let b = (v + 0.0).to_bits(); // -0.0 + 0.0 is 0.0
        if b >> 31 == 1 { !b } else { b | 1 << 31 }
    };
    if descending { !key } else { key }
}

/// Largest `k` that [`topk_rows`] keeps in an ordered buffer while it scans
/// a row (above it, a selection and a sort of the selected).
const SMALL_K: usize = 64;

/// The first `k` of each row of a dense `[rows, n]` buffer in the order
/// [`sort_rows`] puts them (largest first when `largest`, NaN counted above
/// everything, ties by index): `[rows, k]` values and their i64 indices.
/// For `k` up to 64 one pass keeping the best `k`, else a
/// selection and a sort of the `k` selected; `topk` of 10 from rows of 2048
/// had sorted whole rows (18x PyTorch's time).
///
/// ```
/// use tapir_kernels::cpu::topk_rows;
/// let (v, i) = topk_rows(&[3.0f32, 9.0, 1.0, 9.0, 5.0], 5, 2, true);
/// assert_eq!((v, i), (vec![9.0, 9.0], vec![1, 3]));
/// ```
pub fn topk_rows<T>(x: &[T], n: usize, k: usize, largest: bool) -> (Vec<T>, Vec<i64>)
where
    T: Copy + Default + PartialOrd + Send + Sync + 'static,
{
    assert!(
        k <= n && (n == 0 || x.len().is_multiple_of(n)),
        "topk_rows kernel: k {k} of rows of {n} in {} elements",
        x.len()
    );
    let rows = x.len().checked_div(n).unwrap_or(0);
    let mut idx = crate::alloc::filled(rows * k, 0i64);
    let mut vals = crate::alloc::filled(rows * k, T::default());
    if k == 0 {
        return (vals, idx);
    }
    par_chunks_mut2((&mut idx, k), (&mut vals, k), |r, ir, vr| {
        let xr = &x[r * n..(r + 1) * n];
        let first = if k <= SMALL_K {
            best_k_by_scan(xr, k, largest)
        } else {
            best_k_by_selection(xr, k, largest)
        };
        for ((i, v), &(value, j)) in ir.iter_mut().zip(vr.iter_mut()).zip(first.iter()) {
            (*i, *v) = (j as i64, value);
        }
    });
    (vals, idx)
}

/// Elements [`best_k_by_scan`] checks against the k-th best at once.
const SCAN_BLOCK: usize = 16;

/// The first `k` of a row, in order, by one pass that keeps them sorted:
/// a block of elements none of which beats the k-th is skipped after one
/// compare each, and on random rows almost every block is.
fn best_k_by_scan<T: Copy + PartialOrd>(xr: &[T], k: usize, largest: bool) -> Vec<(T, usize)> {
    let mut best: Vec<(T, usize)> = Vec::with_capacity(k + 1);
    for (b, block) in xr.chunks(SCAN_BLOCK).enumerate() {
        if best.len() == k {
            let kth = best[k - 1].0;
            if !block
                .iter()
                .fold(false, |any, v| any | before(v, &kth, largest))
            {
                continue;
            }
        }
        for (o, &v) in block.iter().enumerate() {
            // Later elements lose ties: only a strict "comes before" enters.
            if best.len() == k && !before(&v, &best[k - 1].0, largest) {
                continue;
            }
            let at = best.partition_point(|(u, _)| !before(&v, u, largest));
            best.insert(at, (v, b * SCAN_BLOCK + o));
            best.truncate(k);
        }
    }
    best
}

/// The first `k` of a row, in order, by a selection: the k-th value found
/// among a copy of the values, then one pass taking everything before it
/// and, in index order, as many of its ties as fill `k`, then a stable
/// sort of those (`0 < k <= xr.len()`).
fn best_k_by_selection<T: Copy + PartialOrd>(xr: &[T], k: usize, largest: bool) -> Vec<(T, usize)> {
    let mut values = xr.to_vec();
    let (_, &mut kth, _) = values.select_nth_unstable_by(k - 1, |a, b| order(a, b, largest));
    let ahead = values[..k - 1]
        .iter()
        .filter(|&v| before(v, &kth, largest))
        .count();
    let mut ties = k - ahead;
    let mut best: Vec<(T, usize)> = Vec::with_capacity(k);
    for (j, &v) in xr.iter().enumerate() {
        if before(&v, &kth, largest) {
            best.push((v, j));
        } else if ties > 0 && !before(&kth, &v, largest) {
            best.push((v, j));
            ties -= 1;
        }
    }
    best.sort_by(|(a, _), (b, _)| order(a, b, largest)); // stable: ties stay in index order
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_are_stable_and_put_nan_where_pytorch_does() {
        let x = [2.0f64, f64::NAN, 2.0, -1.0, f64::NAN, 5.0];
        let (v, i) = sort_rows(&x, 6, true);
        assert_eq!(
            i,
            vec![1, 4, 5, 0, 2, 3],
            "descending: NaN first, ties in order"
        );
        assert_eq!(&v[2..], &[5.0, 2.0, 2.0, -1.0]);
        let (_, i) = sort_rows(&x, 3, false);
        assert_eq!(i, vec![0, 2, 1, 0, 2, 1], "two rows of three");
        let (_, i) = sort_rows(&[7i64, 7, 7], 3, true);
        assert_eq!(i, vec![0, 1, 2]);
    }

    #[test]
    fn topk_is_the_stable_sorts_first_k() {
        // Rows with many ties and NaNs, both directions, every k.
        let pool = [2.0f64, f64::NAN, -1.0, 2.0, 0.5, -1.0, 7.0];
        // k up to 64 by the scan, above by selection; long rows give the
        // selection's sort runs of ties of a hundred.
        for (rows, n, ks) in [
            (30, 90, (0..=90).collect()),
            (3, 700, vec![65, 300, 699, 700]),
        ] {
            let x: Vec<f64> = (0..rows * n)
                .map(|i| pool[(i * 3 + i * i / 7) % 7])
                .collect();
            for largest in [true, false] {
                let (sv, si) = sort_rows(&x, n, largest);
                for &k in &ks {
                    let (v, i) = topk_rows(&x, n, k, largest);
                    for r in 0..rows {
                        assert_eq!(
                            &i[r * k..(r + 1) * k],
                            &si[r * n..r * n + k],
                            "k {k}, row {r}"
                        );
                        let same = (v[r * k..(r + 1) * k].iter().zip(&sv[r * n..r * n + k]))
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "values, k {k}, row {r}");
                    }
                }
            }
        }
        assert_eq!(topk_rows(&[] as &[f32], 0, 0, true).0.len(), 0);
    }

    #[test]
    fn running_sums_restart_at_each_row() {
        let y = cumsum_rows(&[1i64, 2, 3, 4, 5, 6], 3, 0i64, |a, x| a + x, |a| a);
        assert_eq!(y, vec![1, 3, 6, 4, 9, 15]);
        assert!(
            cumsum_rows(&[] as &[f32], 0, 0.0f64, |a, x| a + x as f64, |a| a as f32).is_empty()
        );
    }

    #[test]
    fn grouped_running_sums_are_each_rows_own_fold() {
        // Row counts around the group of 8 and the threads' split; the
        // values' rounding in f32 depends on the order they are added in.
        for (rows, n) in [(1, 5), (7, 3), (8, 1), (9, 17), (45, 33), (300, 129)] {
            let x: Vec<f32> = (0..rows * n)
                .map(|i| ((i * 7919) % 2003) as f32 * 1.37e-3 - (i % 5) as f32 * 1e4)
                .collect();
            for threads in [1, 2] {
                crate::threads::set_num_threads(threads);
                let y = cumsum_rows(&x, n, 0.0f32, |a, v| a + v, |a| a);
                for (r, row) in x.chunks(n).enumerate() {
                    let mut acc = 0.0f32;
                    for (i, &v) in row.iter().enumerate() {
                        acc += v;
                        assert!(
                            y[r * n + i].to_bits() == acc.to_bits(),
                            "{rows} rows of {n}, threads {threads}, ({r}, {i}): {} against {acc}",
                            y[r * n + i]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn running_sums_down_columns_are_each_columns_own_fold() {
        // One plane split across threads, blocks whole and short, planes
        // of narrow columns.
        for (outer, len, inner) in [(1, 1, 3), (5, 4, 3), (3, 7, 1), (2, 33, 1000), (1, 3, 4500)] {
            let x: Vec<f32> = (0..outer * len * inner)
                .map(|i| ((i * 7919) % 2003) as f32 * 1.37e-3 - (i % 5) as f32 * 1e4)
                .collect();
            for threads in [1, 2] {
                crate::threads::set_num_threads(threads);
                let y = cumsum_columns(&x, len, inner, 0.0f32, |a, v| a + v, |a| a);
                for o in 0..outer {
                    for c in 0..inner {
                        let mut acc = 0.0f32;
                        for r in 0..len {
                            let k = (o * len + r) * inner + c;
                            acc += x[k];
                            assert!(
                                y[k].to_bits() == acc.to_bits(),
                                "[{outer}, {len}, {inner}], threads {threads}, ({o}, {r}, {c}): {} against {acc}",
                                y[k]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn packed_key_sort_is_the_stable_sort_of_f32() {
        // Ties, signed zeros, infinities and NaN; rows short and long.
        for n in [1, 2, 17, 300] {
            let pool = [
                0.0f32,
                -0.0,
                1.5,
                -1.5,
                3.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
            ];
            let x: Vec<f32> = (0..n * 9)
                .map(|i| pool[(i * 7919 + i / 5) % 8] * (1 + i % 3) as f32)
                .collect();
            for descending in [false, true] {
                for threads in [1, 2] {
                    crate::threads::set_num_threads(threads);
                    let (v, i) = sort_rows_f32(&x, n, descending);
                    let (want_v, want_i) = sort_rows(&x, n, descending);
                    assert_eq!(i, want_i, "rows of {n}, descending {descending}");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&v),
                        bits(&want_v),
                        "rows of {n}, descending {descending}"
                    );
                }
            }
        }
    }
}
