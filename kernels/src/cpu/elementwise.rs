//! Elementwise kernels over strided, broadcast operands.

use super::map_split::{map_dense_split, map_strided_split};
use super::strided::{coalesce, for_rows, row_count};
use crate::Layout;
use crate::alloc;
use crate::threads::{PARALLEL_GRAIN, num_threads, par_chunks_mut, parallel, simd};
use std::mem::MaybeUninit;

/// Elements per task when a dense loop is split across threads (32 KiB of f32).
pub(super) const CHUNK: usize = PARALLEL_GRAIN / 4;

/// `f` applied to every element of a view; output is row-major.
pub fn map<T, U>(src: &[T], l: &Layout, f: impl Fn(T) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + Default + 'static,
{
    map_with(
        src,
        l,
        (),
        #[inline(always)]
        |x, ()| f(x),
    )
}

/// [`map`] of `f(x, c)` for a value `c` every element shares (an op's
/// parameters), copied into each loop so it stays in a register: through a
/// reference `clamp`'s bounds were reloaded per element, unvectorised.
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let y = cpu::map_with(&[1.0f32, -3.0], &Layout::contiguous(&[2]), 2.0, |x, k| x * k);
/// assert_eq!(y, vec![2.0, -6.0]);
/// ```
pub fn map_with<T, C, U>(src: &[T], l: &Layout, c: C, f: impl Fn(T, C) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    C: Copy + Send + Sync,
    U: Copy + Send + Sync + Default + 'static,
{
    let n = l.numel();
    if let Some(off) = l.contiguous_offset() {
        return map_dense_with(&src[off..off + n], c, f);
    }
    // The strided walk of a split map with nothing rare.
    map_strided_split(src, l, c, &f, |_, _| false, &f)
}

/// `f` over a dense slice into a fresh buffer: vectorised (inside `simd`),
/// written straight into the buffer's spare capacity (no zero-fill first),
/// split across threads when large. The parallel path collected through
/// rayon item by item before, unvectorised: 13% of a 2-thread inference.
pub(crate) fn map_dense<T, U>(s: &[T], f: impl Fn(T) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    map_dense_with(
        s,
        (),
        #[inline(always)]
        |x, ()| f(x),
    )
}

/// [`map_dense`] of `f(x, c)` for a value `c` shared by every element: `c`
/// is copied into each loop, so it stays in a register. Read through the
/// closure's reference it was reloaded per element, and the loop did not
/// vectorise (`x * 0.125` on bf16 took 2.9 ms for 2M elements).
fn map_dense_with<T, C, U>(s: &[T], c: C, f: impl Fn(T, C) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    C: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    // No element is rare, so the fix-up pass compiles away.
    map_dense_split(s, c, &f, |_, _| false, &f)
}

/// `f(a, b)` over two views already broadcast to one shape; output row-major.
pub fn zip_map<A, B, O>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> O + Sync,
) -> Vec<O>
where
    A: Copy + Send + Sync,
    B: Copy + Send + Sync,
    O: Copy + Send + Sync + Default + 'static,
{
    debug_assert_eq!(la.shape, lb.shape);
    let n = la.numel();
    if let (Some(oa), Some(ob)) = (la.contiguous_offset(), lb.contiguous_offset()) {
        let (sa, sb) = (&a[oa..oa + n], &b[ob..ob + n]);
        let mut out = alloc::with_capacity(n);
        let spare = &mut out.spare_capacity_mut()[..n];
        let run = |o: &mut [MaybeUninit<O>], x: &[A], y: &[B]| {
            simd(
                #[inline(always)]
                || {
                    for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                        o.write(f(x, y));
                    }
                },
            )
        };
        if parallel(n) {
            par_chunks_mut(spare, CHUNK, |i, o| {
                let r = i * CHUNK..i * CHUNK + o.len();
                run(o, &sa[r.clone()], &sb[r])
            });
        } else {
            run(spare, sa, sb);
        }
        // SAFETY: `spare` is the first `n` slots of `out`'s spare capacity
        // (`out` was empty), and the loops above wrote every one of them.
        unsafe { out.set_len(n) };
        return out;
    }
    // A dense view against one broadcast value (`scores * scale`): one
    // vectorised, threaded pass. As strided rows it coalesced into a single
    // row that one thread walked without vector code.
    let scalar = |l: &Layout| n > 0 && l.strides.iter().all(|&s| s == 0);
    if let (Some(oa), true) = (la.contiguous_offset(), scalar(lb)) {
        return map_dense_with(&a[oa..oa + n], b[lb.offset], &f);
    }
    if let (true, Some(ob)) = (scalar(la), lb.contiguous_offset()) {
        return map_dense_with(
            &b[ob..ob + n],
            a[la.offset],
            #[inline(always)]
            |y, x| f(x, y),
        );
    }
    // Written once into spare capacity: a zero-fill first was an extra pass
    // (a conv's bias add, `[N, C, H, W] + [1, C, 1, 1]`, runs here).
    zip_rows_into(la, lb, |[ba, bb], [sa, sb], dst| {
        let len = dst.len();
        match (sa, sb) {
            (1, 1) => {
                for ((d, &x), &y) in dst.iter_mut().zip(&a[ba..ba + len]).zip(&b[bb..bb + len]) {
                    d.write(f(x, y));
                }
            }
            (1, 0) => {
                let y = b[bb];
                for (d, &x) in dst.iter_mut().zip(&a[ba..ba + len]) {
                    d.write(f(x, y));
                }
            }
            (0, 1) => {
                let x = a[ba];
                for (d, &y) in dst.iter_mut().zip(&b[bb..bb + len]) {
                    d.write(f(x, y));
                }
            }
            _ => {
                for (i, d) in dst.iter_mut().enumerate() {
                    d.write(f(a[ba + i * sa], b[bb + i * sb]));
                }
            }
        }
    })
}

/// A fresh row-major output of two views broadcast to one shape, filled
/// row by row of the coalesced views (split across threads when large):
/// `row(bases, strides, dst)` gets each row's offsets and inner strides in
/// `a` and `b` and must write all of `dst`, the row's slots.
pub(super) fn zip_rows_into<O: Copy + Send + 'static>(
    la: &Layout,
    lb: &Layout,
    row: impl Fn([usize; 2], [usize; 2], &mut [MaybeUninit<O>]) + Sync,
) -> Vec<O> {
    let n = la.numel();
    let (shape, strides) = coalesce(&la.shape, &[&la.strides, &lb.strides]);
    let mut out = alloc::with_capacity(n);
    let rows = row_count(&shape);
    let len = n / rows.max(1);
    let fill = |start: usize, chunk: &mut [MaybeUninit<O>]| {
        let mut pos = 0;
        let end = start + chunk.len() / len.max(1);
        for_rows(
            &shape,
            [&strides[0], &strides[1]],
            [la.offset, lb.offset],
            start,
            end,
            |bases, len, inner| {
                row(bases, inner, &mut chunk[pos..pos + len]);
                pos += len;
            },
        );
    };
    run_rows(&mut out.spare_capacity_mut()[..n], rows, len, fill);
    // SAFETY: `out` was empty with capacity `n`; `run_rows` hands `fill`
    // every row of the `n` slots once, and `row` writes each whole row.
    unsafe { out.set_len(n) };
    out
}

/// Splits `out` (rows of `len`) across threads when it is large enough.
pub(super) fn run_rows<O: Send>(
    out: &mut [O],
    rows: usize,
    len: usize,
    fill: impl Fn(usize, &mut [O]) + Sync,
) {
    if !parallel(out.len()) || rows < 2 || len == 0 {
        fill(0, out);
        return;
    }
    let rows_per = rows
        .div_ceil(num_threads() * 4)
        .max(CHUNK / len.max(1))
        .max(1);
    par_chunks_mut(out, rows_per * len, |i, chunk| fill(i * rows_per, chunk));
}

/// `dst[i] = f(dst[i])` over a strided view of a buffer, in place.
pub fn map_inplace<T: Copy + Send + Sync>(dst: &mut [T], l: &Layout, f: impl Fn(T) -> T + Sync) {
    let n = l.numel();
    if let Some(off) = l.contiguous_offset() {
        let s = &mut dst[off..off + n];
        let run = |c: &mut [T]| {
            simd(
                #[inline(always)]
                || c.iter_mut().for_each(|x| *x = f(*x)),
            )
        };
        match parallel(n) {
            true => par_chunks_mut(s, CHUNK, |_, c| run(c)),
            false => run(s),
        }
        return;
    }
    simd(
        #[inline(always)]
        || l.for_each_offset(|o| dst[o] = f(dst[o])),
    );
}

/// `dst[i] = f(dst[i], src[i])` over a strided view of `dst` and a view of
/// `src` broadcast to the same shape, in place.
pub fn zip_inplace<T, B>(
    dst: &mut [T],
    l: &Layout,
    src: &[B],
    ls: &Layout,
    f: impl Fn(T, B) -> T + Sync,
) where
    T: Copy + Send + Sync,
    B: Copy + Send + Sync,
{
    let n = l.numel();
    if let (Some(od), Some(os)) = (l.contiguous_offset(), ls.contiguous_offset()) {
        let (d, s) = (&mut dst[od..od + n], &src[os..os + n]);
        let run = |c: &mut [T], s: &[B]| {
            simd(
                #[inline(always)]
                || c.iter_mut().zip(s).for_each(|(x, &y)| *x = f(*x, y)),
            )
        };
        match parallel(n) {
            true => par_chunks_mut(d, CHUNK, |i, c| run(c, &s[i * CHUNK..i * CHUNK + c.len()])),
            false => run(d, s),
        }
        return;
    }
    let (shape, strides) = coalesce(&l.shape, &[&l.strides, &ls.strides]);
    for_rows(
        &shape,
        [&strides[0], &strides[1]],
        [l.offset, ls.offset],
        0,
        row_count(&shape),
        |[bd, bs], len, [sd, ss]| match (sd, ss) {
            // Unit-stride rows against a broadcast scalar (`g.mul_(&coef)`
            // in gradient clipping) or a unit-stride row: slice loops that
            // vectorise.
            (1, 0) => {
                let y = src[bs];
                dst[bd..bd + len].iter_mut().for_each(|x| *x = f(*x, y));
            }
            (1, 1) => {
                let d = &mut dst[bd..bd + len];
                d.iter_mut()
                    .zip(&src[bs..bs + len])
                    .for_each(|(x, &y)| *x = f(*x, y));
            }
            _ => {
                for i in 0..len {
                    let o = bd + i * sd;
                    dst[o] = f(dst[o], src[bs + i * ss]);
                }
            }
        },
    );
}

/// `cond ? a : b` over three views already broadcast to one shape (`where`);
/// output row-major. Rows whose operand is strided or broadcast are gathered
/// into a contiguous scratch row first, so the select itself is one loop
/// over slices that vectorises: the attention mask's `masked_fill` (a
/// `[T, T]` mask and a scalar against `[B, H, T, T]` scores) was a serial
/// gather of all three operands.
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let l = Layout::contiguous(&[2, 2]);
/// let fill = Layout::contiguous(&[1]).broadcast_to(&[2, 2]);
/// let y = cpu::select(&[true, false, false, true], &l, &[-1.0f32], &fill, &[1.0, 2.0, 3.0, 4.0], &l);
/// assert_eq!(y, vec![-1.0, 2.0, 3.0, -1.0]);
/// ```
pub fn select<T: Copy + Send + Sync + Default + 'static>(
    cond: &[bool],
    lc: &Layout,
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
) -> Vec<T> {
    assert!(
        lc.shape == la.shape && la.shape == lb.shape,
        "where kernel: shapes {:?}, {:?} and {:?} differ",
        lc.shape,
        la.shape,
        lb.shape
    );
    let n = la.numel();
    let mut out = alloc::with_capacity(n);
    let slots = &mut out.spare_capacity_mut()[..n];
    if let (Some(oc), Some(oa), Some(ob)) = (
        lc.contiguous_offset(),
        la.contiguous_offset(),
        lb.contiguous_offset(),
    ) {
        let (c, x, y) = (&cond[oc..oc + n], &a[oa..oa + n], &b[ob..ob + n]);
        match parallel(n) {
            true => par_chunks_mut(slots, CHUNK, |i, d| {
                let r = i * CHUNK..i * CHUNK + d.len();
                pick(d, &c[r.clone()], &x[r.clone()], &y[r])
            }),
            false => pick(slots, c, x, y),
        }
    } else {
        let (shape, strides) = coalesce(&la.shape, &[&lc.strides, &la.strides, &lb.strides]);
        let rows = row_count(&shape);
        let len = n / rows.max(1);
        let fill = |start: usize, chunk: &mut [MaybeUninit<T>]| {
            let (mut kc, mut ka, mut kb) = (Vec::new(), Vec::new(), Vec::new());
            let mut pos = 0;
            let end = start + chunk.len() / len.max(1);
            let strides = [&strides[0][..], &strides[1][..], &strides[2][..]];
            let offsets = [lc.offset, la.offset, lb.offset];
            for_rows(
                &shape,
                strides,
                offsets,
                start,
                end,
                |[bc, ba, bb], len, [sc, sa, sb]| {
                    let c = unit_row(cond, bc, sc, len, &mut kc);
                    let x = unit_row(a, ba, sa, len, &mut ka);
                    let y = unit_row(b, bb, sb, len, &mut kb);
                    pick(&mut chunk[pos..pos + len], c, x, y);
                    pos += len;
                },
            );
        };
        run_rows(slots, rows, len, fill);
    }
    // SAFETY: `out` was empty with capacity `n`, and `pick` wrote every
    // slot: the dense path hands it all `n`, and `run_rows` every row.
    unsafe { out.set_len(n) };
    out
}

/// `dst[i] = if c[i] { x[i] } else { y[i] }`. For the float types the
/// values are blended as bit patterns: written as a select of values, LLVM
/// turned the loop into a select of *addresses* and an AVX-512 gather, and
/// an f32 `where_` of 2 M elements took 3.5 ms (bf16, which has no gather,
/// 0.9 ms).
#[inline(always)]
fn pick<T: Copy + 'static>(dst: &mut [MaybeUninit<T>], c: &[bool], x: &[T], y: &[T]) {
    /// Reinterprets `T` slices as `B` slices when `T` is `F`, a float type
    /// whose bits `B` holds (same size and alignment, every bit pattern
    /// valid for both).
    macro_rules! as_bits {
        ($f:ty, $b:ty) => {
            if std::any::TypeId::of::<T>() == std::any::TypeId::of::<$f>() {
                const {
                    assert!(
                        size_of::<$f>() == size_of::<$b>() && align_of::<$f>() == align_of::<$b>()
                    )
                };
                // SAFETY: `T` is `$f` (the TypeId check), and `$f` and `$b`
                // have one size and alignment with every bit pattern valid
                // for both, so the slices are the same memory read as bits.
                let (d, x, y) = unsafe {
                    (
                        &mut *(dst as *mut [MaybeUninit<T>] as *mut [MaybeUninit<$b>]),
                        &*(x as *const [T] as *const [$b]),
                        &*(y as *const [T] as *const [$b]),
                    )
                };
                return blend(d, c, x, y);
            }
        };
    }
    as_bits!(f32, u32);
    as_bits!(f64, u64);
    as_bits!(half::bf16, u16);
    as_bits!(half::f16, u16);
    simd(
        #[inline(always)]
        || {
            for (((d, &k), &x), &y) in dst.iter_mut().zip(c).zip(x).zip(y) {
                d.write(if k { x } else { y });
            }
        },
    )
}

/// `dst[i] = (x[i] & m) | (y[i] & !m)` with `m` all ones where `c[i]`.
#[inline(always)]
fn blend<B>(dst: &mut [MaybeUninit<B>], c: &[bool], x: &[B], y: &[B])
where
    B: Copy
        + Default
        + std::ops::Not<Output = B>
        + std::ops::BitAnd<Output = B>
        + std::ops::BitOr<Output = B>,
{
    simd(
        #[inline(always)]
        || {
            for (((d, &k), &x), &y) in dst.iter_mut().zip(c).zip(x).zip(y) {
                let m = if k { !B::default() } else { B::default() };
                d.write((x & m) | (y & !m));
            }
        },
    )
}

/// Row `base + i * stride` for `i < len` as a slice: borrowed when the
/// stride is 1, else gathered into `scratch` (filled for a broadcast).
fn unit_row<'a, T: Copy>(
    src: &'a [T],
    base: usize,
    stride: usize,
    len: usize,
    scratch: &'a mut Vec<T>,
) -> &'a [T] {
    if stride == 1 {
        return &src[base..base + len];
    }
    scratch.clear();
    match stride {
        0 => scratch.resize(len, src[base]),
        s => scratch.extend((0..len).map(|i| src[base + i * s])),
    }
    scratch
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dense view against a broadcast value, on either side, as a walk.
    #[test]
    fn zip_map_with_a_broadcast_value_matches_an_elementwise_walk() {
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            for n in [0, 5, 100_003] {
                let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
                let dense = Layout::contiguous(&[n]);
                let value = Layout::contiguous(&[1]).broadcast_to(&[n]);
                let minus = |x: f32, y: f32| x - y;
                let left = zip_map(&a, &dense, &[3.0], &value, minus);
                let right = zip_map(&[3.0], &value, &a, &dense, minus);
                assert_eq!(left.len(), n);
                assert_eq!(right.len(), n);
                for (i, &x) in a.iter().enumerate() {
                    assert!(
                        left[i] == x - 3.0 && right[i] == 3.0 - x,
                        "element {i} of {n}"
                    );
                }
            }
        }
    }

    /// `select` against a per-element walk of the three views, for dense,
    /// broadcast (stride 0), transposed and offset views, on 1 and 2 threads.
    #[test]
    fn select_matches_an_elementwise_walk_in_every_layout() {
        let shape = [4, 3, 40, 160];
        let n: usize = shape.iter().product();
        let cond: Vec<bool> = (0..n).map(|i| (i * 7919) % 3 == 0).collect();
        let a: Vec<f32> = (0..n + 5).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
        let dense = Layout::contiguous(&shape);
        let mask = Layout::contiguous(&[40, 160]).broadcast_to(&shape);
        let scalar = Layout::contiguous(&[1]).broadcast_to(&shape);
        let mut offset = Layout::contiguous(&shape);
        offset.offset = 5;
        let transposed = Layout::contiguous(&[4, 3, 160, 40]).transpose(2, 3);
        let walk = |l: &Layout| {
            let mut v = vec![];
            l.for_each_offset(|o| v.push(o));
            v
        };
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            for (lc, la, lb) in [
                (&dense, &dense, &dense),
                (&mask, &scalar, &dense),
                (&dense, &offset, &transposed),
                (&mask, &transposed, &scalar),
            ] {
                let got = select(&cond, lc, &a, la, &b, lb);
                let (oc, oa, ob) = (walk(lc), walk(la), walk(lb));
                for (i, &g) in got.iter().enumerate() {
                    let want = if cond[oc[i]] { a[oa[i]] } else { b[ob[i]] };
                    assert!(g == want, "element {i}: got {g}, want {want}");
                }
            }
        }
    }

    /// Every element type `where_` runs on picks the same values, bit for
    /// bit (the float types go through the bit blend; -0.0, NaN and -inf
    /// keep their bits).
    #[test]
    fn select_keeps_every_element_type_bit_for_bit() {
        fn check<T: Copy + Send + Sync + Default + std::fmt::Debug + 'static>(
            values: impl Fn(usize) -> T,
            bits: impl Fn(T) -> u64,
        ) {
            let n = 70_000; // past the parallel grain
            let cond: Vec<bool> = (0..n).map(|i| (i * 7919) % 3 == 0).collect();
            let x: Vec<T> = (0..n).map(&values).collect();
            let y: Vec<T> = x.iter().rev().copied().collect();
            let l = Layout::contiguous(&[n]);
            let got = select(&cond, &l, &x, &l, &y, &l);
            for i in 0..n {
                let want = if cond[i] { x[i] } else { y[i] };
                assert_eq!(
                    bits(got[i]),
                    bits(want),
                    "element {i}: {:?} vs {want:?}",
                    got[i]
                );
            }
        }
        let special = [-0.0f64, f64::NAN, f64::NEG_INFINITY, 1.5, -2.25];
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            check(|i| special[i % 5] as f32, |v: f32| v.to_bits() as u64);
            check(|i| special[i % 5] + i as f64, |v: f64| v.to_bits());
            check(
                |i| half::bf16::from_f64(special[i % 5]),
                |v: half::bf16| v.to_bits() as u64,
            );
            check(
                |i| half::f16::from_f64(special[i % 5]),
                |v: half::f16| v.to_bits() as u64,
            );
            check(|i| i as i64 - 9, |v: i64| v as u64);
            check(|i| i % 2 == 0, |v: bool| v as u64);
        }
    }
}
