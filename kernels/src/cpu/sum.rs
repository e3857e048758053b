//! Float sums with bounded rounding error. Folding n values one at a time
//! into one accumulator loses about n·ε relative (3.7e-5 for 2^22 f32
//! values); PyTorch's cascade sum loses about log(n)·ε. Here each group is
//! summed in blocks of [`BLOCK`] values spread over [`LANES`] independent
//! accumulators (which also vectorises), and the block sums are combined
//! pairwise through a binary counter of partial sums, so the error grows
//! with log(n / BLOCK).

use super::reduce::{Plan, in_callers_order};
use super::sum_columns::sum_columns;
use crate::threads::{par_chunks_mut, parallel, simd};
use crate::{Float, Layout};
use std::mem::MaybeUninit;

/// Values per block.
pub(super) const BLOCK: usize = 128;
/// Independent accumulators within a block.
pub(super) const LANES: usize = 8;
/// Levels of partial sums: 2^40 blocks is beyond any tensor.
const LEVELS: usize = 40;

/// How [`sum`] reads its values as the type it adds in: one at a time,
/// and a block at a time for values narrower than the sum, where the CPU
/// may widen many in one instruction. Every `Fn(T) -> A` is one (its
/// blocks converted value by value); [`F16ToF32`](super::F16ToF32) widens
/// f16 blocks with F16C.
///
/// ```
/// use tapir_kernels::cpu::Widen;
/// let double = |x: f32| 2.0 * x;
/// let mut out = [0.0; 2];
/// double.block(&[1.0, 3.0], &mut out);
/// assert_eq!((double.one(0.5), out), (1.0, [2.0, 6.0]));
/// ```
pub trait Widen<T, A>: Sync {
    /// One value.
    fn one(&self, x: T) -> A;

    /// `out[i] = one(xs[i])` for every `i < xs.len()` (`out` at least as
    /// long).
    #[inline(always)]
    fn block(&self, xs: &[T], out: &mut [A])
    where
        T: Copy,
    {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = self.one(x);
        }
    }

    /// One whole block's lane sums, exactly as the sum's own loop adds
    /// them (value `i` into lane `i % 8`, four sets of lanes taking runs
    /// of 8 in turn, the sets added pairwise at the end), where this
    /// reader has a faster way than widening first; `None` otherwise.
    #[inline(always)]
    fn block_lanes(&self, _block: &[T]) -> Option<[A; LANES]> {
        None
    }
}

impl<T, A, F: Fn(T) -> A + Sync> Widen<T, A> for F {
    #[inline(always)]
    fn one(&self, x: T) -> A {
        self(x)
    }
}

/// A running sum of a stream of values (see the module docs). The block
/// sums and the partial sums stay [`LANES`] wide (one vector register):
/// the lanes are added together once, in [`Cascade::finish`]. Adding them
/// at every block (eight shuffles and adds per 128 values) and keeping the
/// counter scalar took a third of a row sum's time (`x.sum(1)` over
/// 2048 x 2048 f32).
struct Cascade<A> {
    /// The open block's lane sums.
    lanes: [A; LANES],
    in_block: usize,
    /// `partial[k]` holds 2^k blocks' sum, lane by lane, while bit `k` of
    /// `blocks` is set; it is written before that bit is first set and
    /// read only while it is.
    partial: [MaybeUninit<[A; LANES]>; LEVELS],
    blocks: u64,
}

impl<A: Float> Cascade<A> {
    fn new() -> Self {
        Cascade {
            lanes: [A::zero(); LANES],
            in_block: 0,
            partial: [const { MaybeUninit::uninit() }; LEVELS],
            blocks: 0,
        }
    }

    #[inline(always)]
    fn push_slice<T: Copy>(&mut self, mut xs: &[T], to: &impl Widen<T, A>) {
        if self.in_block > 0 {
            // Top up the open block.
            let take = (BLOCK - self.in_block).min(xs.len());
            let (part, rest) = xs.split_at(take);
            add_lanes(&mut self.lanes, part, to);
            self.in_block += take;
            if self.in_block == BLOCK {
                let full = std::mem::replace(&mut self.lanes, [A::zero(); LANES]);
                self.in_block = 0;
                self.close_block(full);
            }
            xs = rest;
        }
        let mut blocks = xs.chunks_exact(BLOCK);
        if size_of::<T>() < size_of::<A>() {
            // Values narrower than the sum (f16, bf16): each block summed
            // straight from F16C's conversions (f16), or widened in one go
            // first, then summed. Widened inside
            // the lanes' loop, the conversion kept it scalar (the sum of
            // 4 M f16 took 2.7 ms, PyTorch 0.2).
            let mut wide = [A::zero(); BLOCK];
            for block in &mut blocks {
                let lanes = to.block_lanes(block).unwrap_or_else(|| {
                    to.block(block, &mut wide);
                    let mut lanes = [A::zero(); LANES];
                    add_lanes(&mut lanes, &wide, &|v| v);
                    lanes
                });
                self.close_block(lanes);
            }
        }
        for block in &mut blocks {
            let mut lanes = [A::zero(); LANES];
            add_lanes(&mut lanes, block, to);
            self.close_block(lanes);
        }
        let rest = blocks.remainder();
        add_lanes(&mut self.lanes, rest, to);
        self.in_block += rest.len();
    }

    #[inline(always)]
    fn push(&mut self, v: A) {
        self.lanes[self.in_block % LANES] = self.lanes[self.in_block % LANES] + v;
        self.in_block += 1;
        if self.in_block == BLOCK {
            let full = std::mem::replace(&mut self.lanes, [A::zero(); LANES]);
            self.in_block = 0;
            self.close_block(full);
        }
    }

    /// Adds a finished block to the counter: equal-sized partial sums merge.
    #[inline(always)]
    fn close_block(&mut self, mut v: [A; LANES]) {
        let mut k = 0;
        while self.blocks & (1 << k) != 0 {
            // SAFETY: bit `k` of `blocks` is set, so `partial[k]` was
            // written (see the field's docs).
            let p = unsafe { self.partial[k].assume_init_read() };
            v = lanes_add(p, v);
            k += 1;
        }
        self.partial[k].write(v);
        self.blocks += 1;
    }

    fn finish(&self) -> A {
        let mut s = self.lanes;
        let mut bits = self.blocks;
        while bits != 0 {
            let k = bits.trailing_zeros() as usize;
            // SAFETY: bit `k` of `blocks` is set, so `partial[k]` was
            // written (see the field's docs).
            s = lanes_add(unsafe { self.partial[k].assume_init_read() }, s);
            bits &= bits - 1;
        }
        ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    }
}

/// `a + b`, lane by lane.
#[inline(always)]
fn lanes_add<A: Float>(a: [A; LANES], b: [A; LANES]) -> [A; LANES] {
    std::array::from_fn(|i| a[i] + b[i])
}

/// Adds `xs` into `lanes`, element `i` into lane `i % LANES`: four sets
/// of lanes in registers take runs of [`LANES`] values in turn, so four
/// chains of adds run at once (with two, a block waited on the adds'
/// latency; 16 lanes in one array left the registers and ran 2x slower).
#[inline(always)]
fn add_lanes<T: Copy, A: Float>(lanes: &mut [A; LANES], xs: &[T], to: &impl Widen<T, A>) {
    let mut acc = [
        *lanes,
        [A::zero(); LANES],
        [A::zero(); LANES],
        [A::zero(); LANES],
    ];
    let mut runs = xs.chunks_exact(4 * LANES);
    for c in &mut runs {
        for (set, run) in acc.iter_mut().zip(c.chunks_exact(LANES)) {
            for (a, &v) in set.iter_mut().zip(run) {
                *a = *a + to.one(v);
            }
        }
    }
    let [mut first, second, third, fourth] = acc;
    let mut chunks = runs.remainder().chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in first.iter_mut().zip(c) {
            *a = *a + to.one(v);
        }
    }
    for (a, &v) in first.iter_mut().zip(chunks.remainder()) {
        *a = *a + to.one(v);
    }
    *lanes = lanes_add(lanes_add(first, second), lanes_add(third, fourth));
}

/// One whole block's lane sums as the sum adds them, `to` converting each
/// value inside the loop (for [`Widen::block_lanes`] of types whose
/// conversion vectorises there).
#[inline(always)]
pub(super) fn lanes_of<T: Copy, A: Float>(block: &[T], to: &impl Widen<T, A>) -> [A; LANES] {
    let mut lanes = [A::zero(); LANES];
    add_lanes(&mut lanes, block, to);
    lanes
}

/// Sums `src` (view `l`) over `dims` in the float type `A` (`to` converts
/// each element): one sum per combination of kept dims, row-major.
///
/// ```
/// use tapir_kernels::{cpu, Layout};
/// let x = vec![0.1f32; 1 << 20];
/// let s = cpu::sum(&x, &Layout::contiguous(&[1 << 20]), &[0], |v| v)[0];
/// assert!((s as f64 - 0.1f32 as f64 * (1 << 20) as f64).abs() < 1e-6 * 1e5);
/// ```
pub fn sum<T, A>(src: &[T], l: &Layout, dims: &[usize], to: impl Widen<T, A>) -> Vec<A>
where
    T: Copy + Send + Sync,
    A: Float,
{
    // A transposed or permuted view is summed in its memory's order (as
    // PyTorch's: `x.t().sum(1)` is `x.sum(0)`, 20 -> 0.4 ms at 2048 x 2048).
    if let Some(walk) = l.reduction_order(dims) {
        let out = sum(src, &walk.layout, &walk.dims, to);
        return in_callers_order(out, &walk);
    }
    if let Some(t) = trailing_rows(l, dims) {
        // Reduced dims on both sides of kept ones, the trailing ones a
        // contiguous row (a bias gradient of [N, C, H, W] over (0, 2, 3)):
        // row sums first, then those column-wise, two fast passes instead
        // of one strided walk per output (0.76 -> 0.26 ms over
        // [128, 32, 28, 28]).
        let rows = sum_planned(src, l, &dims[dims.len() - (l.ndim() - t)..], to);
        let lead: Vec<usize> = dims.iter().copied().filter(|&d| d < t).collect();
        return sum_planned(&rows, &Layout::contiguous(&l.shape[..t]), &lead, |v| v);
    }
    sum_planned(src, l, dims, to)
}

/// [`sum`] by one [`Plan`]: column-wise, one chunked sum, row sums, or a
/// strided walk per output.
fn sum_planned<T, A>(src: &[T], l: &Layout, dims: &[usize], to: impl Widen<T, A>) -> Vec<A>
where
    T: Copy + Send + Sync,
    A: Float,
{
    let plan = Plan::new(l, dims);
    let (outer, inner) = (plan.outer, plan.inner);
    // Column sums (a bias gradient: [B, D] over B; channels of [N, C, H, W]
    // over C): whole rows at a time.
    if let Some(c) = plan.columns {
        return c.per_batch(inner, A::zero(), |b, out| {
            sum_columns(c.batch(src, b, inner), inner, c.row_stride, &to, out);
        });
    }
    if outer == 1
        && inner > CHUNK
        && let Some(off) = l.contiguous_offset()
    {
        return vec![sum_chunked(&src[off..off + inner], &to)];
    }
    if plan.contiguous_groups() {
        // Row sums: each group one slice, summed inside the vector context
        // (through `runs`' closure the loop compiled without it).
        return plan.map_groups(|base| {
            simd(
                #[inline(always)]
                || {
                    let mut acc = Cascade::new();
                    acc.push_slice(&src[base..base + inner], &to);
                    acc.finish()
                },
            )
        });
    }
    plan.map_groups(|base| {
        simd(
            #[inline(always)]
            || {
                let mut acc = Cascade::new();
                plan.runs(base, |b, len, s| {
                    if s == 1 {
                        acc.push_slice(&src[b..b + len], &to);
                    } else {
                        for i in 0..len {
                            acc.push(to.one(src[b + i * s]));
                        }
                    }
                });
                acc.finish()
            },
        )
    })
}

/// The shortest row worth a pass of row sums of its own: each row sum has
/// a fixed cost, and over [128, 64, 14, 14] (rows of 196) the strided walk
/// stayed faster (0.27 against 0.38 ms).
const MIN_ROW: usize = 512;

/// For a contiguous view summed over some leading dims and all dims from
/// `t` on, with a kept dim between and rows of at least [`MIN_ROW`]: `t`.
/// `dims` in increasing order (as the ops pass them; others take one pass).
fn trailing_rows(l: &Layout, dims: &[usize]) -> Option<usize> {
    let nd = l.ndim();
    l.contiguous_offset()?;
    if !dims.is_sorted_by(|a, b| a < b) {
        return None;
    }
    // The trailing run of reduced dims.
    let mut t = nd;
    while t > 0 && dims.contains(&(t - 1)) {
        t -= 1;
    }
    let row: usize = l.shape[t..].iter().product();
    let lead = dims.first().is_some_and(|&d| d < t);
    let kept_between = (0..t).any(|d| !dims.contains(&d));
    (t < nd && lead && kept_between && row >= MIN_ROW).then_some(t)
}

/// Elements per chunk of one large sum.
const CHUNK: usize = BLOCK * 1024;

/// One sum of a large contiguous buffer: fixed chunks (on all threads when
/// it pays), combined pairwise; the same result on any number of threads.
fn sum_chunked<T, A>(src: &[T], to: &impl Widen<T, A>) -> A
where
    T: Copy + Send + Sync,
    A: Float,
{
    let one = |c: &[T]| {
        simd(
            #[inline(always)]
            || {
                let mut acc = Cascade::new();
                acc.push_slice(c, to);
                acc.finish()
            },
        )
    };
    let parts: Vec<A> = if parallel(src.len()) {
        let mut parts = vec![A::zero(); src.len().div_ceil(CHUNK)];
        par_chunks_mut(&mut parts, 1, |i, p| {
            p[0] = one(&src[i * CHUNK..((i + 1) * CHUNK).min(src.len())])
        });
        parts
    } else {
        src.chunks(CHUNK).map(one).collect()
    };
    pairwise(&parts)
}

fn pairwise<A: Float>(v: &[A]) -> A {
    match v.len() {
        0 => A::zero(),
        1 => v[0],
        n => pairwise(&v[..n / 2]) + pairwise(&v[n / 2..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize) -> Vec<f32> {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32
            })
            .collect()
    }

    fn exact(v: &[f32]) -> f64 {
        v.iter().map(|&x| x as f64).sum()
    }

    /// Reduced dims on both sides of a kept one, with long trailing rows:
    /// rows first, then columns (`trailing_rows`), against f64 sums, and
    /// the same plan is not taken for short rows or a kept trailing dim.
    #[test]
    fn outer_and_trailing_dims_sum_in_two_passes_like_f64() {
        let (n, c, hw) = (5, 3, 600);
        let v = values(n * c * hw);
        let l = Layout::contiguous(&[n, c, hw]);
        assert_eq!(trailing_rows(&l, &[0, 2]), Some(2));
        assert_eq!(
            trailing_rows(&Layout::contiguous(&[n, c, 100]), &[0, 2]),
            None
        );
        assert_eq!(trailing_rows(&l, &[0, 1]), None);
        assert_eq!(trailing_rows(&l.transpose(0, 1), &[0, 2]), None);
        let got = sum(&v, &l, &[0, 2], |x| x);
        for (k, &g) in got.iter().enumerate() {
            let want: f64 = (0..n)
                .map(|i| exact(&v[(i * c + k) * hw..(i * c + k + 1) * hw]))
                .sum();
            let g = g as f64;
            assert!(
                (g - want).abs() <= 1e-6 * want.abs(),
                "channel {k}: {g} vs {want}"
            );
        }
    }

    #[test]
    fn every_path_sums_like_f64_within_a_few_ulps() {
        for n in [0, 1, 7, 128, 129, 1000, 70_001] {
            let v = values(n);
            let want = exact(&v);
            let l = Layout::contiguous(&[n]);
            let got = sum(&v, &l, &[0], |x| x)[0] as f64;
            assert!(
                (got - want).abs() <= 1e-6 * want.abs() + 1e-7,
                "{n}: {got} vs {want}"
            );
        }
        // Rows (contiguous groups), columns (leading reduced dim) and strided groups.
        let (r, c) = (300, 70);
        let v = values(r * c);
        let l = Layout::contiguous(&[r, c]);
        let rows = sum(&v, &l, &[1], |x| x);
        let cols = sum(&v, &l, &[0], |x| x);
        let strided = sum(&v, &l.transpose(0, 1), &[1], |x| x);
        for i in 0..r {
            let want = exact(&v[i * c..(i + 1) * c]);
            assert!((rows[i] as f64 - want).abs() <= 1e-6 * want, "row {i}");
        }
        for j in 0..c {
            let col: Vec<f32> = (0..r).map(|i| v[i * c + j]).collect();
            let want = exact(&col);
            assert!((cols[j] as f64 - want).abs() <= 1e-6 * want, "col {j}");
            assert!(
                (strided[j] as f64 - want).abs() <= 1e-6 * want,
                "strided {j}"
            );
        }
    }

    /// Half-type sums (each block widened first, then summed) against f64
    /// sums of the same values: one long sum and rows with partial blocks.
    #[test]
    fn half_type_sums_widen_each_block_and_sum_like_f64() {
        use half::{bf16, f16};
        let v = values(70_001);
        let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        let b: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
        let hf: Vec<f32> = h.iter().map(|x| x.to_f32()).collect();
        let bf: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (l, dims) in [
            (Layout::contiguous(&[70_001]), vec![0]),
            (Layout::contiguous(&[7, 10_000]), vec![1]),
        ] {
            let n = l.numel();
            let rows = n / l.shape[dims[0]];
            let got_h = sum(&h[..n], &l, &dims, super::super::f32_from_f16);
            let got_b = sum(&b[..n], &l, &dims, super::super::f32_from_bf16);
            // Blocks widened by F16C: the same values in the same order.
            let blocks = sum(&h[..n], &l, &dims, super::super::F16ToF32);
            assert_eq!(bits(&blocks), bits(&got_h), "F16ToF32 {n}");
            // bf16 converted inside the lanes' loop: the same again.
            let inside = sum(&b[..n], &l, &dims, super::super::Bf16ToF32);
            assert_eq!(bits(&inside), bits(&got_b), "Bf16ToF32 {n}");
            for r in 0..rows {
                let len = n / rows;
                let (wh, wb) = (
                    exact(&hf[r * len..(r + 1) * len]),
                    exact(&bf[r * len..(r + 1) * len]),
                );
                assert!((got_h[r] as f64 - wh).abs() <= 1e-6 * wh, "f16 {n}/{r}");
                assert!((got_b[r] as f64 - wb).abs() <= 1e-6 * wb, "bf16 {n}/{r}");
            }
        }
    }

    /// Groups made of several contiguous runs (a narrowed view): each run
    /// after the first tops up the block the last one left open.
    #[test]
    fn groups_of_several_runs_sum_like_f64() {
        let (b, r, w, stride) = (3, 5, 150, 200);
        let v = values(b * r * stride);
        let l = Layout {
            shape: vec![b, r, w],
            strides: vec![r * stride, stride, 1],
            offset: 0,
        };
        let got = sum(&v, &l, &[1, 2], |x| x);
        for (i, &g) in got.iter().enumerate() {
            let want: f64 = (0..r)
                .map(|j| exact(&v[i * r * stride + j * stride..][..w]))
                .sum();
            let g = g as f64;
            assert!((g - want).abs() <= 1e-6 * want, "group {i}: {g} vs {want}");
        }
    }

    /// Narrow batches (the windows of a pooling: 4 rows x 49 columns each)
    /// split across the threads give the serial result bit for bit.
    #[test]
    fn narrow_column_batches_give_the_same_bits_on_two_threads() {
        let v = values(2048 * 4 * 49);
        let l = Layout::contiguous(&[2048, 4, 49]);
        let maxed =
            |v: &[f32]| super::super::reduce::reduce(v, &l, &[1], f32::MIN, |a, x, _| a.max(x));
        crate::threads::set_num_threads(1);
        let (one, one_max) = (sum(&v, &l, &[1], |x| x), maxed(&v));
        crate::threads::set_num_threads(2);
        let (two, two_max) = (sum(&v, &l, &[1], |x| x), maxed(&v));
        assert_eq!(one, two);
        assert_eq!(one_max, two_max);
        let k = 1234 * 49 + 17; // batch 1234, column 17
        let want: f64 = (0..4).map(|r| v[(1234 * 4 + r) * 49 + 17] as f64).sum();
        assert!((two[k] as f64 - want).abs() <= 1e-6 * want.abs());
    }

    /// Column sums split by runs of rows across threads give the serial
    /// cascade's bits, with and without a partial last run.
    #[test]
    fn column_sums_by_runs_of_rows_give_the_serial_bits() {
        for rows in [300, 512, 1000, 4097] {
            let cols = 130;
            let v = values(rows * cols);
            let l = Layout::contiguous(&[rows, cols]);
            crate::threads::set_num_threads(1);
            let one = sum(&v, &l, &[0], |x| x);
            for threads in [2, 3, 8] {
                crate::threads::set_num_threads(threads);
                assert_eq!(
                    one,
                    sum(&v, &l, &[0], |x| x),
                    "{rows} rows, {threads} threads"
                );
            }
            for (j, &got) in one.iter().enumerate() {
                let want: f64 = (0..rows).map(|i| v[i * cols + j] as f64).sum();
                assert!(
                    (got as f64 - want).abs() <= 1e-6 * want,
                    "{rows} rows, col {j}"
                );
            }
        }
        crate::threads::set_num_threads(2);
    }

    /// A run of reduced dims between kept ones (channels of [N, C, H, W])
    /// goes column-wise per batch: sums and a max against the definition.
    #[test]
    fn reduced_dims_between_kept_ones_go_column_wise_per_batch() {
        let (n, c, h, w) = (3, 70, 2, 33);
        let v = values(n * c * h * w);
        let l = Layout::contiguous(&[n, c, h, w]);
        let at = |i: usize, j: usize, k: usize, m: usize| v[((i * c + j) * h + k) * w + m];
        let sums = sum(&v, &l, &[1], |x| x);
        let both = sum(&v, &l, &[1, 2], |x| x);
        let maxes = super::super::reduce::reduce(&v, &l, &[1], f32::MIN, |a, x, _| a.max(x));
        for i in 0..n {
            for m in 0..w {
                let want_both: f64 = (0..c * h).map(|jk| at(i, jk / h, jk % h, m) as f64).sum();
                let got = both[i * w + m] as f64;
                assert!((got - want_both).abs() <= 1e-6 * want_both, "({i}, {m})");
                for k in 0..h {
                    let want: f64 = (0..c).map(|j| at(i, j, k, m) as f64).sum();
                    let o = (i * h + k) * w + m;
                    assert!(
                        (sums[o] as f64 - want).abs() <= 1e-6 * want,
                        "({i}, {k}, {m})"
                    );
                    let max = (0..c).map(|j| at(i, j, k, m)).fold(f32::MIN, f32::max);
                    assert_eq!(maxes[o], max, "max ({i}, {k}, {m})");
                }
            }
        }
    }
}
