//! f16 computed in f32 a block at a time: a block of f16 is widened into
//! f32 on the stack, the op runs over it as over any f32 slice
//! (vectorised), and the results are narrowed back. Widening and narrowing
//! use the CPU's F16C instructions (eight values each) where it has them,
//! and the branchless scalar forms elsewhere and for a block's tail; both
//! round as `half` does (the tests hold them to it on every f16). Converted
//! element by element inside the op's loop, even branchless, f16 `a + b`
//! ran 2.3x and `exp` 1.6x behind PyTorch, which converts with F16C.

use super::convert::{f16_from_f32, f32_from_f16};
use super::elementwise::{CHUNK, map_inplace, zip_inplace, zip_rows_into};
use super::map_split::{map_dense_blocks, map_strided_blocks, split_chunk};
use super::sum::Widen;
use crate::Layout;
use crate::alloc;
use crate::threads::{par_chunks_mut, parallel, simd};
use half::f16;
use std::mem::MaybeUninit;

/// Values widened at a time: 1 KiB of f32 on the stack.
const SUB: usize = 256;

/// `dst[i] = src[i]` as f32, exactly, for `i < src.len()` (`dst` at least
/// as long).
pub(super) fn widen_f16(src: &[f16], dst: &mut [MaybeUninit<f32>]) {
    // SAFETY: `hardware` says what this CPU has.
    unsafe { widen_on(hardware(), src, dst) }
}

/// [`widen_f16`] through `hw`'s instructions.
///
/// # Safety
/// The CPU has `hw`'s instructions.
unsafe fn widen_on(hw: Hardware, src: &[f16], dst: &mut [MaybeUninit<f32>]) {
    let dst = &mut dst[..src.len()];
    match hw {
        // SAFETY: the CPU has AVX-512F and F16C (the caller's promise).
        #[cfg(target_arch = "x86_64")]
        Hardware::Avx512 => unsafe { x86::widen_avx512(src, dst) },
        // SAFETY: the CPU has AVX and F16C (the caller's promise).
        #[cfg(target_arch = "x86_64")]
        Hardware::F16c => unsafe { x86::widen_f16c(src, dst) },
        Hardware::None => simd(
            #[inline(always)]
            || widen_scalar(src, dst),
        ),
    }
}

/// `dst[i] = src[i]` rounded to f16 (nearest even, overflow to infinity,
/// NaN to a quiet NaN), for `i < src.len()` (`dst` at least as long).
pub(super) fn narrow_f16(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
    // SAFETY: `hardware` says what this CPU has.
    unsafe { narrow_on(hardware(), src, dst) }
}

/// [`narrow_f16`] through `hw`'s instructions.
///
/// # Safety
/// The CPU has `hw`'s instructions.
unsafe fn narrow_on(hw: Hardware, src: &[f32], dst: &mut [MaybeUninit<f16>]) {
    let dst = &mut dst[..src.len()];
    match hw {
        // SAFETY: the CPU has AVX-512F and F16C (the caller's promise).
        #[cfg(target_arch = "x86_64")]
        Hardware::Avx512 => unsafe { x86::narrow_avx512(src, dst) },
        // SAFETY: the CPU has AVX and F16C (the caller's promise).
        #[cfg(target_arch = "x86_64")]
        Hardware::F16c => unsafe { x86::narrow_f16c(src, dst) },
        Hardware::None => simd(
            #[inline(always)]
            || narrow_scalar(src, dst),
        ),
    }
}

#[inline(always)]
fn widen_scalar(src: &[f16], dst: &mut [MaybeUninit<f32>]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        d.write(f32_from_f16(s));
    }
}

#[inline(always)]
fn narrow_scalar(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        d.write(f16_from_f32(s));
    }
}

/// The conversion instructions this CPU has.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hardware {
    /// Sixteen values an instruction (AVX-512F's forms of F16C's).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// Eight values an instruction.
    #[cfg(target_arch = "x86_64")]
    F16c,
    None,
}

#[inline]
fn hardware() -> Hardware {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("f16c") && has!("avx") {
            return if has!("avx512f") {
                Hardware::Avx512
            } else {
                Hardware::F16c
            };
        }
    }
    Hardware::None
}

#[cfg(target_arch = "x86_64")]
mod x86;

/// f16 read as f32 by [`sum`](super::sum), a block at a time through
/// F16C where the CPU has it (one at a time, the sum of 4 M f16 ran 3x
/// behind PyTorch's).
///
/// ```
/// use half::f16;
/// use tapir_kernels::{cpu, Layout};
/// let x = vec![f16::from_f32(0.5); 1000];
/// let s = cpu::sum(&x, &Layout::contiguous(&[1000]), &[0], cpu::F16ToF32);
/// assert_eq!(s, vec![500.0f32]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct F16ToF32;

impl Widen<f16, f32> for F16ToF32 {
    #[inline(always)]
    fn one(&self, x: f16) -> f32 {
        f32_from_f16(x)
    }

    #[inline(always)]
    fn block_lanes(&self, block: &[f16]) -> Option<[f32; 8]> {
        // Added from the converted registers: widened to the stack first
        // and read back, the sum of 4 M f16 took 0.25-0.31 ms (PyTorch's
        // 0.20).
        #[cfg(target_arch = "x86_64")]
        if block.len().is_multiple_of(32) && !matches!(hardware(), Hardware::None) {
            // SAFETY: the CPU has AVX and F16C (`hardware` is not `None`).
            return Some(unsafe { x86::block_lanes_f16c(block) });
        }
        let _ = block;
        None
    }

    #[inline(always)]
    fn block(&self, xs: &[f16], out: &mut [f32]) {
        // SAFETY: `widen_f16` writes only initialised values.
        widen_f16(xs, unsafe { as_slots(out) });
    }
}

/// f16 to f32 for a dense slice, in blocks, on all threads.
pub(super) fn widen_dense(v: &[f16]) -> Vec<f32> {
    map_dense_blocks(v, widen_f16)
}

/// f32 to f16 for a dense slice, in blocks, on all threads.
pub(super) fn narrow_dense(v: &[f32]) -> Vec<f16> {
    map_dense_blocks(v, narrow_f16)
}

/// [`map_split_with`](super::map_split_with) for f16 with the op written
/// on f32: `exact(x, c)` of each element of the view widened to f32,
/// computed as `fast` wherever `rare` is false, rounded back to f16. Each
/// block is widened once, mapped in one vectorised loop, and narrowed.
///
/// ```
/// use half::f16;
/// use tapir_kernels::{cpu, Layout};
/// let x = [f16::from_f32(1.0), f16::from_f32(-2.0)];
/// let y = cpu::map_f16_split_with(&x, &Layout::contiguous(&[2]), 3.0,
///     |x, k| x * k, |_, _| false, |x, k| x * k);
/// assert_eq!(y, vec![f16::from_f32(3.0), f16::from_f32(-6.0)]);
/// ```
pub fn map_f16_split_with<C: Copy + Send + Sync>(
    src: &[f16],
    l: &Layout,
    c: C,
    fast: impl Fn(f32, C) -> f32 + Sync,
    rare: impl Fn(f32, C) -> bool + Sync,
    exact: impl Fn(f32, C) -> f32 + Sync,
) -> Vec<f16> {
    let map_block = |xs: &[f16], out: &mut [MaybeUninit<f16>]| {
        let mut wide = [MaybeUninit::<f32>::uninit(); SUB];
        let mut mapped = [MaybeUninit::<f32>::uninit(); SUB];
        for (xs, out) in xs.chunks(SUB).zip(out.chunks_mut(SUB)) {
            let n = xs.len();
            widen_f16(xs, &mut wide);
            // SAFETY: `widen_f16` wrote the first `n` slots.
            let wide = unsafe { wide[..n].assume_init_ref() };
            split_chunk(wide, &mut mapped[..n], c, &fast, &rare, &exact);
            // SAFETY: `split_chunk` wrote all `n` slots it was given.
            narrow_f16(unsafe { mapped[..n].assume_init_ref() }, out);
        }
    };
    match l.contiguous_offset() {
        Some(off) => map_dense_blocks(&src[off..off + l.numel()], map_block),
        None => map_strided_blocks(src, l, map_block),
    }
}

/// `f(a, b)` on f16 views already broadcast to one shape, with `f` written
/// on f32: the operands widened a block at a time where both are dense,
/// one is a single value broadcast, or rows of them are (a bias row), value
/// by value otherwise; the result rounded to f16, row-major.
///
/// ```
/// use half::f16;
/// use tapir_kernels::{cpu, Layout};
/// let (a, b) = ([f16::from_f32(1.5), f16::ONE], [f16::from_f32(0.25)]);
/// let lb = Layout::contiguous(&[1]).broadcast_to(&[2]);
/// let y = cpu::zip_map_f16(&a, &Layout::contiguous(&[2]), &b, &lb, |x, y| x + y);
/// assert_eq!(y, vec![f16::from_f32(1.75), f16::from_f32(1.25)]);
/// ```
pub fn zip_map_f16(
    a: &[f16],
    la: &Layout,
    b: &[f16],
    lb: &Layout,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Vec<f16> {
    let n = la.numel();
    let single = |l: &Layout| n > 0 && l.strides.iter().all(|&s| s == 0);
    match (la.contiguous_offset(), lb.contiguous_offset()) {
        (Some(oa), Some(ob)) => zip_dense(&a[oa..oa + n], &b[ob..ob + n], &f),
        (Some(_), None) if single(lb) => {
            let y = f32_from_f16(b[lb.offset]);
            map_f16_split_with(a, la, y, &f, |_, _| false, &f)
        }
        (None, Some(_)) if single(la) => {
            let x = f32_from_f16(a[la.offset]);
            let flipped = |y: f32, x: f32| f(x, y);
            map_f16_split_with(b, lb, x, flipped, |_, _| false, flipped)
        }
        _ => zip_rows(a, la, b, lb, &f),
    }
}

/// `f(a[i], b[i])` over two dense f16 slices of one length.
fn zip_dense(a: &[f16], b: &[f16], f: &(impl Fn(f32, f32) -> f32 + Sync)) -> Vec<f16> {
    let n = a.len();
    let mut out = alloc::with_capacity(n);
    let spare = &mut out.spare_capacity_mut()[..n];
    let run = |o: &mut [MaybeUninit<f16>], a: &[f16], b: &[f16]| {
        zip_row(Other::Dense(a), Other::Dense(b), o, f)
    };
    if parallel(n) {
        par_chunks_mut(spare, CHUNK, |i, o| {
            let r = i * CHUNK..i * CHUNK + o.len();
            run(o, &a[r.clone()], &b[r])
        });
    } else {
        run(spare, a, b);
    }
    // SAFETY: `spare` is the first `n` slots of `out`'s spare capacity
    // (`out` was empty), and `zip_row` narrowed into every one of them.
    unsafe { out.set_len(n) };
    out
}

/// [`zip_map_f16`] over views that are neither dense nor a single value
/// (a bias row broadcast down a matrix): row by row of the coalesced
/// views, each row with unit strides or one side broadcast a block at a
/// time, other rows value by value.
fn zip_rows(
    a: &[f16],
    la: &Layout,
    b: &[f16],
    lb: &Layout,
    f: &(impl Fn(f32, f32) -> f32 + Sync),
) -> Vec<f16> {
    /// Rows shorter than this go value by value: a block's fixed costs
    /// (two calls, a fill) outweigh the conversions saved.
    const MIN_ROW: usize = 64;
    zip_rows_into(la, lb, |[ba, bb], [sa, sb], dst| {
        let len = dst.len();
        match (Other::row(a, ba, sa, len), Other::row(b, bb, sb, len)) {
            (Some(x), Some(y)) if len >= MIN_ROW => zip_row(x, y, dst, f),
            _ => {
                for (i, d) in dst.iter_mut().enumerate() {
                    let (x, y) = (a[ba + i * sa], b[bb + i * sb]);
                    d.write(f16_from_f32(f(f32_from_f16(x), f32_from_f16(y))));
                }
            }
        }
    })
}

/// `out[i] = f(x[i], y[i])` for one row, a block of [`SUB`] at a time
/// (see [`Widened`]); the results narrowed into `out`. Dense sides are
/// `out`'s length.
#[inline(always)]
fn zip_row(x: Other<'_>, y: Other<'_>, out: &mut [MaybeUninit<f16>], f: &impl Fn(f32, f32) -> f32) {
    let (mut wx, mut wy) = (Widened::new(x), Widened::new(y));
    let mut r = [0f32; SUB];
    for (k, out) in out.chunks_mut(SUB).enumerate() {
        let (at, n) = (k * SUB, out.len());
        apply(
            wx.block(at, n),
            wy.block(at, n),
            &mut r[..n],
            (),
            &|x, y, ()| f(x, y),
        );
        narrow_f16(&r[..n], out);
    }
}

/// One operand of a zip as f32, a block at a time: a single value spread
/// over the buffer once, a dense side widened block by block.
struct Widened<'a> {
    side: Other<'a>,
    buf: [MaybeUninit<f32>; SUB],
}

impl<'a> Widened<'a> {
    #[inline(always)]
    fn new(side: Other<'a>) -> Self {
        let mut buf = [MaybeUninit::uninit(); SUB];
        if let Other::Single(v) = side {
            buf.fill(MaybeUninit::new(v));
        }
        Widened { side, buf }
    }

    /// The values `at..at + n` (`n` at most [`SUB`]).
    #[inline(always)]
    fn block(&mut self, at: usize, n: usize) -> &[f32] {
        if let Other::Dense(s) = self.side {
            widen_f16(&s[at..at + n], &mut self.buf);
        }
        // SAFETY: the first `n` slots were written: all of them filled with
        // the single value in `new`, or the first `n` widened just now.
        unsafe { self.buf[..n].assume_init_ref() }
    }
}

/// `r[i] = f(x[i], y[i], c)` in one vectorised loop, `c` copied into it
/// (read through the closure's reference, an op's parameter was reloaded
/// per element and the loop stayed scalar).
#[inline(always)]
fn apply<C: Copy>(x: &[f32], y: &[f32], r: &mut [f32], c: C, f: &impl Fn(f32, f32, C) -> f32) {
    simd(
        #[inline(always)]
        || {
            let shared = c; // a local copy, not the capture's pointer
            for ((r, &x), &y) in r.iter_mut().zip(x).zip(y) {
                *r = f(x, y, shared);
            }
        },
    )
}

/// `dst[i] = f(dst[i], c)` on a view of an f16 buffer, in place, with `f`
/// written on f32 and `c` a value every element shares (an op's
/// parameters, copied into the loop so it stays in a register): a dense
/// view a block at a time, others value by value.
///
/// ```
/// use half::f16;
/// use tapir_kernels::{cpu, Layout};
/// let mut x = [f16::from_f32(1.5), f16::from_f32(-2.0)];
/// cpu::map_inplace_f16_with(&mut x, &Layout::contiguous(&[2]), 2.0, |v, k| v * k);
/// assert_eq!(x, [f16::from_f32(3.0), f16::from_f32(-4.0)]);
/// ```
pub fn map_inplace_f16_with<C: Copy + Send + Sync>(
    dst: &mut [f16],
    l: &Layout,
    c: C,
    f: impl Fn(f32, C) -> f32 + Sync,
) {
    match l.contiguous_offset() {
        Some(off) => update_dense(
            &mut dst[off..off + l.numel()],
            Other::Single(0.0),
            c,
            &|x, _, c| f(x, c),
        ),
        None => map_inplace(
            dst,
            l,
            #[inline(always)]
            |x| f16_from_f32(f(f32_from_f16(x), c)),
        ),
    }
}

/// `dst[i] = f(dst[i], src[i])` on a view of an f16 buffer, in place, `src`
/// broadcast to its shape, with `f` written on f32: a block at a time
/// where `dst` is dense and `src` dense or a single value broadcast, value
/// by value otherwise.
///
/// ```
/// use half::f16;
/// use tapir_kernels::{cpu, Layout};
/// let mut x = [f16::from_f32(1.5), f16::ONE];
/// let one = Layout::contiguous(&[1]).broadcast_to(&[2]);
/// cpu::zip_inplace_f16(&mut x, &Layout::contiguous(&[2]), &[f16::from_f32(0.5)], &one, |a, b| a - b);
/// assert_eq!(x, [f16::ONE, f16::from_f32(0.5)]);
/// ```
pub fn zip_inplace_f16(
    dst: &mut [f16],
    l: &Layout,
    src: &[f16],
    ls: &Layout,
    f: impl Fn(f32, f32) -> f32 + Sync,
) {
    let n = l.numel();
    let single = n > 0 && ls.strides.iter().all(|&s| s == 0);
    match (l.contiguous_offset(), ls.contiguous_offset()) {
        (Some(od), Some(os)) => {
            let other = Other::Dense(&src[os..os + n]);
            update_dense(&mut dst[od..od + n], other, (), &|x, y, ()| f(x, y))
        }
        (Some(od), None) if single => {
            let other = Other::Single(f32_from_f16(src[ls.offset]));
            update_dense(&mut dst[od..od + n], other, (), &|x, y, ()| f(x, y))
        }
        _ => zip_inplace(
            dst,
            l,
            src,
            ls,
            #[inline(always)]
            |x, y| f16_from_f32(f(f32_from_f16(x), f32_from_f16(y))),
        ),
    }
}

/// An operand of [`zip_row`] or [`update_dense`].
#[derive(Clone, Copy)]
enum Other<'a> {
    /// As long as the output.
    Dense(&'a [f16]),
    /// One value for every element.
    Single(f32),
}

impl<'a> Other<'a> {
    /// The row of `len` values of `v` from `base`, `stride` apart, when it
    /// is dense or one value.
    fn row(v: &'a [f16], base: usize, stride: usize, len: usize) -> Option<Self> {
        match stride {
            0 => Some(Other::Single(f32_from_f16(v[base]))),
            1 => Some(Other::Dense(&v[base..base + len])),
            _ => None,
        }
    }
}

/// `d[i] = f(d[i], other[i], c)` over a dense slice, a block at a time:
/// `d`'s block (and `other`'s) widened, `f` in one vectorised loop
/// ([`apply`]), the results narrowed back into `d`; in chunks across
/// threads when large.
fn update_dense<C: Copy + Send + Sync>(
    d: &mut [f16],
    other: Other<'_>,
    c: C,
    f: &(impl Fn(f32, f32, C) -> f32 + Sync),
) {
    let run = |d: &mut [f16], start: usize| {
        let mut wd = [MaybeUninit::<f32>::uninit(); SUB];
        let mut wo = Widened::new(other);
        let mut r = [0f32; SUB];
        for (k, d) in d.chunks_mut(SUB).enumerate() {
            let n = d.len();
            widen_f16(d, &mut wd);
            // SAFETY: `widen_f16` wrote the first `n` slots.
            let x = unsafe { wd[..n].assume_init_ref() };
            apply(x, wo.block(start + k * SUB, n), &mut r[..n], c, f);
            // SAFETY: `narrow_f16` writes only initialised values (all `n`).
            narrow_f16(&r[..n], unsafe { as_slots(d) });
        }
    };
    if parallel(d.len()) {
        par_chunks_mut(d, CHUNK, |i, c| run(c, i * CHUNK));
    } else {
        run(d, 0);
    }
}

/// `s` as slots to write.
///
/// # Safety
/// Only initialised values may be written through the result (`s` must
/// stay initialised).
unsafe fn as_slots<T>(s: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the caller keeps every
    // element initialised.
    unsafe { &mut *(s as *mut [T] as *mut [MaybeUninit<T>]) }
}

#[cfg(test)]
mod tests;
