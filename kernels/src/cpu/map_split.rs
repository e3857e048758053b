//! A map through a fast form of a function that is exact but for rare
//! elements (the sine of |x| >= 2^22): one vectorised pass, then the exact
//! form on the rare ones.

use super::elementwise::{CHUNK, run_rows};
use super::strided::{coalesce, for_rows, row_count};
use crate::Layout;
use crate::alloc;
use crate::threads::{par_chunks_mut, parallel, simd};
use std::mem::MaybeUninit;

/// [`map_with`](super::map_with) of `exact`, computed as `fast` wherever
/// `rare` is false. A dense view runs `fast` over each chunk in one
/// vectorised loop that also notes whether any element is rare, then
/// `exact` on those; a strided view does the same over blocks gathered
/// from it. `fast` must equal `exact` where `rare` is false: the result is
/// then the same as `map_with` of `exact`.
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// // `x * x` wrong from 10 on, fixed by the exact form there.
/// let y = cpu::map_split_with(&[3.0f32, 20.0], &Layout::contiguous(&[2]), (),
///     |x, ()| if x < 10.0 { x * x } else { 0.0 }, |x, ()| x >= 10.0, |x, ()| x * x);
/// assert_eq!(y, vec![9.0, 400.0]);
/// ```
pub fn map_split_with<T, C, U>(
    src: &[T],
    l: &Layout,
    c: C,
    fast: impl Fn(T, C) -> U + Sync,
    rare: impl Fn(T, C) -> bool + Sync,
    exact: impl Fn(T, C) -> U + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    C: Copy + Send + Sync,
    U: Copy + Send + Sync + Default + 'static,
{
    let n = l.numel();
    let Some(off) = l.contiguous_offset() else {
        return map_strided_split(src, l, c, fast, rare, exact);
    };
    map_dense_split(&src[off..off + n], c, fast, rare, exact)
}

/// Elements per gathered block of a strided map (on the stack).
pub(super) const STRIDED_BLOCK: usize = 256;

/// [`map_split_with`] over a view that is not dense: the view's elements
/// are gathered in order (rows of the coalesced view) into a stack block of
/// 256, and each full block runs as a dense chunk does, inside `simd`: one
/// vectorised loop of `fast`, then `exact` on its rare elements. Mapping
/// in place of the strided loads kept the loop scalar (`tanh` of a
/// transposed [16, 2048] view took 6.9 ns an element, 0.4 dense), and a
/// block that spans rows keeps short rows from paying a dispatch each.
pub(super) fn map_strided_split<T, C, U>(
    src: &[T],
    l: &Layout,
    c: C,
    fast: impl Fn(T, C) -> U + Sync,
    rare: impl Fn(T, C) -> bool + Sync,
    exact: impl Fn(T, C) -> U + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    C: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    map_strided_blocks(src, l, |xs, out| {
        split_chunk(xs, out, c, &fast, &rare, &exact)
    })
}

/// `map_block(xs, out)` over a view that is not dense, `xs` its elements
/// in order, gathered into blocks of [`STRIDED_BLOCK`]; `map_block` writes
/// every element of `out`. The walk under [`map_strided_split`], and the
/// f16 maps' (which widen each block first).
pub(super) fn map_strided_blocks<T, U>(
    src: &[T],
    l: &Layout,
    map_block: impl Fn(&[T], &mut [MaybeUninit<U>]) + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    const BLOCK: usize = STRIDED_BLOCK;
    let n = l.numel();
    let (shape, strides) = coalesce(&l.shape, &[&l.strides]);
    let mut out = alloc::with_capacity(n);
    let rows = row_count(&shape);
    let len = n / rows.max(1);
    let fill = |start: usize, chunk: &mut [MaybeUninit<U>]| {
        if chunk.is_empty() {
            return; // no element: `src[l.offset]` below may not exist
        }
        let end = start + chunk.len() / len.max(1);
        let mut block = [src[l.offset]; BLOCK];
        let (mut held, mut done) = (0, 0);
        for_rows(
            &shape,
            [&strides[0]],
            [l.offset],
            start,
            end,
            |[b], len, [s]| {
                let mut i = 0;
                while i < len {
                    let take = (BLOCK - held).min(len - i);
                    let dst = &mut block[held..held + take];
                    if s == 1 {
                        dst.copy_from_slice(&src[b + i..b + i + take]);
                    } else {
                        for (k, d) in dst.iter_mut().enumerate() {
                            *d = src[b + (i + k) * s];
                        }
                    }
                    (held, i) = (held + take, i + take);
                    if held == BLOCK {
                        map_block(&block, &mut chunk[done..done + BLOCK]);
                        (held, done) = (0, done + BLOCK);
                    }
                }
            },
        );
        map_block(&block[..held], &mut chunk[done..done + held]);
    };
    run_rows(&mut out.spare_capacity_mut()[..n], rows, len, fill);
    // SAFETY: `out` was empty with capacity `n`; `run_rows` hands `fill`
    // every row of the `n` slots once, and `fill` writes each whole row
    // (every block of it through `map_block`, which writes all of it).
    unsafe { out.set_len(n) };
    out
}

/// [`map_split_with`] over a dense slice (also `map_dense_with`'s body,
/// with nothing rare): each chunk in one vectorised loop of `fast` that
/// notes whether any element is rare, then `exact` on those.
pub(super) fn map_dense_split<T, C, U>(
    s: &[T],
    c: C,
    fast: impl Fn(T, C) -> U + Sync,
    rare: impl Fn(T, C) -> bool + Sync,
    exact: impl Fn(T, C) -> U + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    C: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    map_dense_blocks(s, |xs, out| split_chunk(xs, out, c, &fast, &rare, &exact))
}

/// `map_chunk(xs, out)` over a dense slice, in chunks of [`CHUNK`] split
/// across threads when large; `map_chunk` writes every element of `out`.
pub(super) fn map_dense_blocks<T, U>(
    s: &[T],
    map_chunk: impl Fn(&[T], &mut [MaybeUninit<U>]) + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + 'static,
{
    let n = s.len();
    let mut out = alloc::with_capacity(n);
    let spare = &mut out.spare_capacity_mut()[..n];
    if parallel(n) {
        par_chunks_mut(spare, CHUNK, |i, o| {
            map_chunk(&s[i * CHUNK..i * CHUNK + o.len()], o)
        });
    } else {
        map_chunk(s, spare);
    }
    // SAFETY: `spare` is the first `n` slots of `out`'s spare capacity (`out`
    // was empty), and `map_chunk` wrote every one of them.
    unsafe { out.set_len(n) };
    out
}

/// `out[i] = fast(xs[i])` in one vectorised loop (inside `simd`) that also
/// notes whether any element is rare, then `exact` on those: a dense
/// chunk's work, and a gathered block's.
#[inline(always)]
pub(super) fn split_chunk<T: Copy, C: Copy, U>(
    xs: &[T],
    out: &mut [MaybeUninit<U>],
    c: C,
    fast: &impl Fn(T, C) -> U,
    rare: &impl Fn(T, C) -> bool,
    exact: &impl Fn(T, C) -> U,
) {
    let any_rare = simd(
        #[inline(always)]
        || {
            let shared = c; // a local copy, not the capture's pointer
            let mut any = false;
            for (o, &x) in out.iter_mut().zip(xs) {
                o.write(fast(x, shared));
                any |= rare(x, shared);
            }
            any
        },
    );
    if any_rare {
        for (o, &x) in out.iter_mut().zip(xs) {
            if rare(x, c) {
                o.write(exact(x, c));
            }
        }
    }
}

/// Views of a buffer of `n` for the maps' tests: dense; every other
/// element; and a transposed [7, n / 7], whose rows of 7 (7 * (n / 7)
/// apart) the gathered blocks of 256 straddle.
#[cfg(test)]
pub(super) fn test_views(n: usize) -> [Layout; 3] {
    let strided = Layout {
        shape: vec![n / 2],
        strides: vec![2],
        offset: 1,
    };
    let transposed = Layout::contiguous(&[7, n / 7]).transpose(0, 1);
    [Layout::contiguous(&[n]), strided, transposed]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::{Cos, Exp, Log, Log2, Log10, PowAny, Sin, Tan, UnaryFn};

    /// `row` of `x` (laid out as `l`) through the split map.
    fn split<R: UnaryFn>(x: &[f32], l: &Layout, row: R) -> Vec<f32> {
        map_split_with(x, l, row, |x, r| r.fast(x), |x, r| r.rare(x), |x, r| r.f(x))
    }

    /// `row` through the split map equals its exact form, bit for bit.
    fn same_as_exact<R: UnaryFn>(x: &[f32], l: &Layout, row: R) {
        let got = split(x, l, row);
        let mut want = Vec::new();
        l.for_each_offset(|o| want.push(row.f(x[o])));
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits(),
                "{} at {i}: {g} against {w}",
                R::NAME
            );
        }
    }

    /// Sine, cosine, tangent, exp, the logarithms and powers through the split map equal the exact function
    /// element by element, with huge arguments scattered through a dense
    /// slice long enough to be split across threads, and on a strided view.
    #[test]
    fn the_split_map_fixes_every_rare_element() {
        // Above the grain, so two threads split it (3 * CHUNK + 17 alone
        // stayed on one thread).
        crate::threads::set_num_threads(2);
        let n = crate::threads::PARALLEL_GRAIN + 3 * CHUNK + 17;
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 997 {
                0 => 1e10 + i as f32,
                1 => -3e38,
                2 => f32::NAN,
                3 => f32::INFINITY,
                4 => -100.0 + (i % 7) as f32,  // subnormal e^x
                5 => 88.5,                     // e^x near f32::MAX
                6 => f32::from_bits(i as u32), // subnormal
                7 => 0.0,
                8 => 5e6 + i as f32, // rare for sin, cos and tan since 2^22
                _ => (i as f32 * 0.37).sin() * 50.0,
            })
            .collect();
        for l in &test_views(n) {
            same_as_exact(&x, l, Sin);
            same_as_exact(&x, l, Cos);
            same_as_exact(&x, l, Tan);
            same_as_exact(&x, l, Exp);
            same_as_exact(&x, l, Log);
            same_as_exact(&x, l, Log2);
            same_as_exact(&x, l, Log10);
            same_as_exact(&x, l, PowAny { e: 2.5 });
            same_as_exact(&x, l, PowAny { e: -3.0 });
        }
        // The huge ones are right, not merely equal to a wrong exact form.
        let big = [1e10f32, -3e38, 123_456_789.0];
        let got = split(&big, &Layout::contiguous(&[3]), Sin);
        for (g, x) in got.iter().zip(big) {
            assert_eq!(*g, (x as f64).sin() as f32, "sin({x:e})");
        }
        let tiny = f32::from_bits(3);
        let got = split(&[tiny, 0.0, 2.0], &Layout::contiguous(&[3]), Log);
        assert_eq!(
            got,
            [(tiny as f64).ln() as f32, f32::NEG_INFINITY, 2f32.ln()]
        );
        let beyond = [-100.0f32, 88.5, -87.3, f32::NEG_INFINITY, 1.0];
        let got = split(&beyond, &Layout::contiguous(&[5]), Exp);
        for (g, x) in got.iter().zip(beyond) {
            let want = (x as f64).exp() as f32;
            assert!(
                g.to_bits().abs_diff(want.to_bits()) <= 1,
                "exp({x}) = {g:e}, not {want:e}"
            );
        }
    }
}
