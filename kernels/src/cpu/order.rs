//! Row-wise ordering kernels over a dense `[rows, n]` buffer: running sums
//! and stable sorts. The CUDA twins are `cu/order.cu` (a thread per row,
//! the same accumulation and the same comparison).

use rayon::prelude::*;

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
    let mut y = crate::alloc::filled(x.len(), T::default());
    if n == 0 {
        return y;
    }
    y.par_chunks_mut(n)
        .zip(x.par_chunks(n))
        .for_each(|(yr, xr)| {
            let mut acc = zero;
            for (o, &v) in yr.iter_mut().zip(xr) {
                acc = add(acc, v);
                *o = out(acc);
            }
        });
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
    idx.par_chunks_mut(n)
        .zip(vals.par_chunks_mut(n))
        .zip(x.par_chunks(n))
        .for_each(|((ir, vr), xr)| {
            for (k, i) in ir.iter_mut().enumerate() {
                *i = k as i64;
            }
            // A stable sort by "comes before": ties keep their order.
            ir.sort_by(|&a, &b| {
                let (a, b) = (&xr[a as usize], &xr[b as usize]);
                if before(a, b, descending) {
                    std::cmp::Ordering::Less
                } else if before(b, a, descending) {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            });
            for (v, &i) in vr.iter_mut().zip(ir.iter()) {
                *v = xr[i as usize];
            }
        });
    (vals, idx)
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
    fn running_sums_restart_at_each_row() {
        let y = cumsum_rows(&[1i64, 2, 3, 4, 5, 6], 3, 0i64, |a, x| a + x, |a| a);
        assert_eq!(y, vec![1, 3, 6, 4, 9, 15]);
        assert!(
            cumsum_rows(&[] as &[f32], 0, 0.0f64, |a, x| a + x as f64, |a| a as f32).is_empty()
        );
    }
}
