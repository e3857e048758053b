//! Fused scaled-dot-product attention: flash attention's tiling on the CPU.
//!
//! The composite (`q kᵀ`, scale, mask, softmax, `· v`) writes the whole
//! `[L, S]` score matrix several times per head and keeps the softmax for the
//! backward. Here queries and keys go in tiles of [`TILE`] rows: each query
//! tile walks the key tiles with an online softmax (running row max and sum,
//! the partial output rescaled when the max grows), so only one tile of
//! scores exists at a time and the forward keeps just the output and each
//! row's log-sum-exp. The backward recomputes each tile's probabilities from
//! that log-sum-exp. With a causal mask, tiles wholly above the diagonal are
//! skipped, halving the work.

use super::matmul::{Operand, gemm_tile};
use super::softmax::{exp_shifted_sum, lanes_max};
use crate::Float;
use crate::threads::{par_chunks_mut2, par_chunks_mut3, simd};
use gemm::Parallelism;

/// Query and key rows per tile: a 64 x 64 f32 score tile is 16 KiB, so the
/// tile, its query rows and the key rows stay in L1/L2.
pub const TILE: usize = 64;

/// The sizes of one attention call over dense row-major buffers: `q` is
/// `[batch, l, e]`, `k` `[batch, s, e]`, `v` `[batch, s, ev]` and the output
/// `[batch, l, ev]` (`batch` counts every leading dim, heads included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Independent (batch, head) slices.
    pub batch: usize,
    /// Query rows per slice.
    pub l: usize,
    /// Key and value rows per slice.
    pub s: usize,
    /// Query and key width.
    pub e: usize,
    /// Value (and output) width.
    pub ev: usize,
}

/// The memory order of a dense attention result `[outer, heads, rows,
/// width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionOrder {
    /// Row-major: `[outer, heads, rows, width]`.
    Dense,
    /// `[outer, rows, heads, width]` memory, read as `[outer, heads, rows,
    /// width]` (PyTorch's flash attention gives its output and gradients
    /// this order for a head split's transposed inputs, so merging the
    /// heads back needs no copy).
    HeadsInside,
}

impl AttentionOrder {
    /// The order a result takes from the input view `l` it matches (`q`
    /// for the output and `dq`, `k` for `dk`, `v` for `dv`): heads inside
    /// rows when the view's rows step over its heads (`[.., heads, rows,
    /// width]` with a head stride below the row stride: a head split's
    /// transposed view), as PyTorch's flash attention gives them on either
    /// device, so merging the heads back is no copy; dense otherwise.
    pub fn of(l: &crate::Layout) -> Self {
        let n = l.ndim();
        match n >= 3 && l.shape[n - 3] > 1 && l.strides[n - 3] < l.strides[n - 2] {
            true => AttentionOrder::HeadsInside,
            false => AttentionOrder::Dense,
        }
    }

    /// Where a dense `[lead.., heads, rows, width]` result's elements go in
    /// this order: the view of the dense values that, copied row-major,
    /// holds them in this order.
    pub fn arranging(self, shape: &[usize]) -> crate::Layout {
        let n = shape.len();
        let dense = crate::Layout::contiguous(shape);
        match (self, n >= 3) {
            (AttentionOrder::HeadsInside, true) => dense.transpose(n - 3, n - 2),
            _ => dense,
        }
    }

    /// The strides of a `shape` `[lead.., heads, rows, width]` tensor held
    /// in this order (a 2-dim shape has no heads: dense).
    pub fn strides(self, shape: &[usize]) -> Vec<usize> {
        let mut strides = crate::contiguous_strides(shape);
        let n = shape.len();
        if self == AttentionOrder::HeadsInside && n >= 3 {
            let (heads, width) = (shape[n - 3], shape[n - 1]);
            strides[n - 3] = width;
            strides[n - 2] = heads * width;
        }
        strides
    }
}

/// The forward's results: the output `[batch, l, ev]` and each query row's
/// log-sum-exp of its scaled scores `[batch, l]`, which the backward uses to
/// recompute the probabilities.
#[derive(Debug)]
pub struct AttentionForward<T> {
    /// `softmax(q kᵀ · scale) v`.
    pub out: Vec<T>,
    /// `log(sum_j exp(scores[i, j]))` per query row (`-inf` for a row with no key).
    pub lse: Vec<T>,
}

/// How many of the `bk` keys from `ks` query `i` may see (they are a
/// prefix): PyTorch's `is_causal` is the top-left aligned lower triangle
/// (`tril(ones(L, S))`), so query `i` sees keys `0..=i`.
#[inline(always)]
fn visible_keys(causal: bool, i: usize, ks: usize, bk: usize) -> usize {
    if causal {
        (i + 1).saturating_sub(ks).min(bk)
    } else {
        bk
    }
}

/// One operand's rows, which need not be dense: slice `b`'s row `i` starts
/// at `offsets[b] + i * row_stride` in `data`, and its elements are
/// contiguous. A head split (`[B, T, H, E]` viewed as `[B, H, T, E]`) is read
/// in place, with no copy.
#[derive(Clone, Debug)]
pub struct Rows<'a, T> {
    /// The buffer the rows live in.
    pub data: &'a [T],
    /// Where each slice's first row starts.
    pub offsets: Vec<usize>,
    /// Elements from one row's start to the next's.
    pub row_stride: usize,
}

impl<'a, T> Rows<'a, T> {
    /// Dense `[batch, rows, width]` rows.
    pub fn dense(data: &'a [T], batch: usize, rows: usize, width: usize) -> Rows<'a, T> {
        Rows {
            data,
            offsets: (0..batch).map(|b| b * rows * width).collect(),
            row_stride: width,
        }
    }

    /// Row `i` of slice `b`, `width` elements.
    fn row(&self, b: usize, i: usize, width: usize) -> &'a [T] {
        let start = self.offsets[b] + i * self.row_stride;
        &self.data[start..start + width]
    }

    /// Slice `b`'s rows from `first` as a matrix operand (`transposed`: read
    /// as columns).
    fn operand(&self, b: usize, first: usize, transposed: bool) -> Operand<'a, T> {
        let start = self.offsets[b] + first * self.row_stride;
        match transposed {
            false => Operand::new(self.data, start, self.row_stride, 1),
            true => Operand::new(self.data, start, 1, self.row_stride),
        }
    }

    /// Whether `batch` slices of `rows` rows of `width` lie inside `data`.
    fn fits(&self, batch: usize, rows: usize, width: usize) -> bool {
        self.offsets.len() == batch
            && (rows == 0
                || width == 0
                || self
                    .offsets
                    .iter()
                    .all(|&o| o + (rows - 1) * self.row_stride + width <= self.data.len()))
    }
}

/// Keys a query tile starting at `qs` with `bq` rows may see: `0..end`.
fn key_end(d: &AttentionDims, causal: bool, qs: usize, bq: usize) -> usize {
    if causal { d.s.min(qs + bq) } else { d.s }
}

/// `softmax(q kᵀ · scale [+ causal mask]) v` for each slice, tiled.
///
/// ```
/// use tapir_kernels::cpu::{attention_forward, AttentionDims, Rows};
/// // One query, two keys with equal scores: the output is the values' mean.
/// let d = AttentionDims { batch: 1, l: 1, s: 2, e: 1, ev: 1 };
/// let (q, k, v) = ([1.0f32], [2.0, 2.0], [1.0, 3.0]);
/// let (q, k, v) = (Rows::dense(&q, 1, 1, 1), Rows::dense(&k, 1, 2, 1), Rows::dense(&v, 1, 2, 1));
/// let f = attention_forward(&q, &k, &v, d, 1.0, false);
/// assert_eq!(f.out, vec![2.0]);
/// assert!((f.lse[0] - (2.0 + 2f32.ln())).abs() < 1e-6);
/// ```
pub fn attention_forward<T: Float>(
    q: &Rows<'_, T>,
    k: &Rows<'_, T>,
    v: &Rows<'_, T>,
    d: AttentionDims,
    scale: T,
    causal: bool,
) -> AttentionForward<T> {
    check(&d, q, k, v);
    let mut out = crate::alloc::filled(d.batch * d.l * d.ev, T::zero());
    let mut lse = crate::alloc::filled(d.batch * d.l, T::zero());
    if out.is_empty() {
        return AttentionForward { out, lse };
    }
    let tile = |slice: usize, qs: usize, o: &mut [T], m: &mut [T]| {
        simd(
            #[inline(always)]
            || forward_tile((q, k, v), slice, &d, scale, causal, qs, o, m),
        )
    };
    let work = d.batch * d.l * d.s * (d.e + d.ev);
    let slices = out.chunks_mut(d.l * d.ev).zip(lse.chunks_mut(d.l));
    if !crate::threads::parallel(work) {
        for (b, (o, m)) in slices.enumerate() {
            for (t, (o, m)) in o
                .chunks_mut(TILE * d.ev)
                .zip(m.chunks_mut(TILE))
                .enumerate()
            {
                tile(b, t * TILE, o, m);
            }
        }
    } else {
        // One task per slice, its query tiles in turn.
        let tiles = d.l.div_ceil(TILE);
        let (o_tile, m_tile) = (TILE * d.ev, TILE);
        par_chunks_mut2((&mut out, d.l * d.ev), (&mut lse, d.l), |b, o, m| {
            for t in 0..tiles {
                let (o, m) = (&mut o[t * o_tile..], &mut m[t * m_tile..]);
                let rows = TILE.min(m.len());
                tile(b, t * TILE, &mut o[..rows * d.ev], &mut m[..rows]);
            }
        });
    }
    AttentionForward { out, lse }
}

/// One query tile (`q` rows `qs..qs + lse.len()` of a slice) against all
/// the keys it may see, with the online softmax; writes its output rows and
/// their log-sum-exp.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn forward_tile<T: Float>(
    (q, k, v): (&Rows<'_, T>, &Rows<'_, T>, &Rows<'_, T>),
    slice: usize,
    d: &AttentionDims,
    scale: T,
    causal: bool,
    qs: usize,
    out: &mut [T],
    lse: &mut [T],
) {
    let bq = lse.len();
    // Scratch for one tile, on the stack as in the backward: no allocation per tile.
    let mut scores = [T::zero(); TILE * TILE];
    let mut max = [T::neg_infinity(); TILE];
    let mut sum = [T::zero(); TILE];
    out.fill(T::zero());
    let end = key_end(d, causal, qs, bq);
    for ks in (0..end).step_by(TILE) {
        let bk = TILE.min(end - ks);
        let s = &mut scores[..bq * bk];
        // s = scale · q kᵀ over this key tile (kᵀ read through its strides).
        gemm_tile(
            (bq, bk, d.e),
            s,
            false,
            scale,
            q.operand(slice, qs, false),
            k.operand(slice, ks, true),
            Parallelism::None,
        );
        for (i, row) in s.chunks_mut(bk).enumerate() {
            // Hidden keys become -inf, which the exp below turns into 0:
            // whole rows stay in full vector lanes.
            let seen = visible_keys(causal, qs + i, ks, bk);
            row[seen..].fill(T::neg_infinity());
            let new_max = max[i].max(lanes_max(&row[..seen]));
            if new_max == T::neg_infinity() {
                row.fill(T::zero()); // no visible key yet: nothing to add
                continue;
            }
            let tile_sum = exp_shifted_sum(row, new_max);
            // Rescale what earlier tiles added for this row to the new max.
            let correction = (max[i] - new_max).fast_exp();
            if correction != T::one() {
                out[i * d.ev..(i + 1) * d.ev]
                    .iter_mut()
                    .for_each(|o| *o = *o * correction);
            }
            sum[i] = sum[i] * correction + tile_sum;
            max[i] = new_max;
        }
        // out += p v over this tile.
        gemm_tile(
            (bq, d.ev, bk),
            out,
            true,
            T::one(),
            Operand::new(s, 0, bk, 1),
            v.operand(slice, ks, false),
            Parallelism::None,
        );
    }
    for (i, row) in out.chunks_mut(d.ev).enumerate() {
        if sum[i] == T::zero() {
            row.fill(T::zero()); // a query with no key: an empty sum
            lse[i] = T::neg_infinity();
            continue;
        }
        let inv = T::one() / sum[i];
        row.iter_mut().for_each(|o| *o = *o * inv);
        lse[i] = max[i] + sum[i].ln();
    }
}

/// The gradients `(dq, dk, dv)` of [`attention_forward`] for the upstream
/// gradient rows `g` of its output, from the same inputs, its output's rows
/// (read in place, as the inputs: a head split's output or gradient needs no
/// dense copy) and its dense log-sum-exp (flash attention 2's backward: per
/// slice, key tiles outer so each key tile's `dk`, `dv` are finished in one
/// place, query tiles inner).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: Float>(
    q: &Rows<'_, T>,
    k: &Rows<'_, T>,
    v: &Rows<'_, T>,
    out: &Rows<'_, T>,
    lse: &[T],
    g: &Rows<'_, T>,
    d: AttentionDims,
    scale: T,
    causal: bool,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    check(&d, q, k, v);
    let (ql, kl, vl) = (d.l * d.e, d.s * d.e, d.s * d.ev);
    assert!(
        out.fits(d.batch, d.l, d.ev) && g.fits(d.batch, d.l, d.ev) && lse.len() == d.batch * d.l,
        "attention_backward kernel: output, gradient or log-sum-exp rows do not fit {d:?}"
    );
    let mut dq = crate::alloc::filled(d.batch * ql, T::zero());
    let mut dk = crate::alloc::filled(d.batch * kl, T::zero());
    let mut dv = crate::alloc::filled(d.batch * vl, T::zero());
    if d.batch * d.l * d.s == 0 {
        return (dq, dk, dv);
    }
    let slice = |b: usize, (dq, dk, dv): (&mut [T], &mut [T], &mut [T])| {
        fn rows<T>(x: &[T], n: usize, b: usize) -> &[T] {
            &x[b * n..(b + 1) * n]
        }
        simd(
            #[inline(always)]
            || {
                backward_slice(
                    (q, k, v),
                    b,
                    (out, g),
                    rows(lse, d.l, b),
                    &d,
                    (scale, causal),
                    (dq, dk, dv),
                )
            },
        )
    };
    let work = d.batch * d.l * d.s * (d.e + d.ev);
    let grads = dq
        .chunks_mut(ql)
        .zip(dk.chunks_mut(kl))
        .zip(dv.chunks_mut(vl));
    if !crate::threads::parallel(work) {
        for (b, ((dq, dk), dv)) in grads.enumerate() {
            slice(b, (dq, dk, dv));
        }
    } else {
        par_chunks_mut3(
            (&mut dq, ql),
            (&mut dk, kl),
            (&mut dv, vl),
            |b, dq, dk, dv| slice(b, (dq, dk, dv)),
        );
    }
    (dq, dk, dv)
}

/// One slice's backward (see [`attention_backward`]).
#[inline(always)]
fn backward_slice<T: Float>(
    (q, k, v): (&Rows<'_, T>, &Rows<'_, T>, &Rows<'_, T>),
    slice: usize,
    (out, g): (&Rows<'_, T>, &Rows<'_, T>),
    lse: &[T],
    d: &AttentionDims,
    (scale, causal): (T, bool),
    (dq, dk, dv): (&mut [T], &mut [T], &mut [T]),
) {
    // delta_i = sum_c g[i, c] out[i, c]: softmax's backward term per row.
    let delta: Vec<T> = (0..d.l)
        .map(|i| {
            let (o, g) = (out.row(slice, i, d.ev), g.row(slice, i, d.ev));
            o.iter().zip(g).fold(T::zero(), |s, (&o, &g)| s + o * g)
        })
        .collect();
    let mut p = [T::zero(); TILE * TILE];
    let mut dp = [T::zero(); TILE * TILE];
    for ks in (0..d.s).step_by(TILE) {
        let bk = TILE.min(d.s - ks);
        // With the causal mask, query tiles ending before this key tile see none of it.
        let first = if causal { ks / TILE * TILE } else { 0 };
        for qs in (first..d.l).step_by(TILE) {
            let bq = TILE.min(d.l - qs);
            if key_end(d, causal, qs, bq) <= ks {
                continue;
            }
            let (p, dp) = (&mut p[..bq * bk], &mut dp[..bq * bk]);
            let q_tile = q.operand(slice, qs, false);
            let g_tile = g.operand(slice, qs, false);
            // p = exp(scale · q kᵀ - lse): the forward's probabilities.
            gemm_tile(
                (bq, bk, d.e),
                p,
                false,
                scale,
                q_tile,
                k.operand(slice, ks, true),
                Parallelism::None,
            );
            for (i, row) in p.chunks_mut(bk).enumerate() {
                let m = lse[qs + i];
                let seen = match m == T::neg_infinity() {
                    true => 0, // a row without keys has no probabilities
                    false => visible_keys(causal, qs + i, ks, bk),
                };
                if seen == 0 {
                    row.fill(T::zero());
                    continue;
                }
                row[seen..].fill(T::neg_infinity()); // exp gives 0 there
                row.iter_mut().for_each(|x| *x = (*x - m).fast_exp());
            }
            // dv += pᵀ g
            let v_rows = &mut dv[ks * d.ev..(ks + bk) * d.ev];
            let p_t = Operand::new(p, 0, 1, bk);
            gemm_tile(
                (bk, d.ev, bq),
                v_rows,
                true,
                T::one(),
                p_t,
                g_tile,
                Parallelism::None,
            );
            // dp = g vᵀ, then ds = p (dp - delta) in place.
            let v_t = v.operand(slice, ks, true);
            gemm_tile(
                (bq, bk, d.ev),
                dp,
                false,
                T::one(),
                g_tile,
                v_t,
                Parallelism::None,
            );
            for (i, (ds, p)) in dp.chunks_mut(bk).zip(p.chunks(bk)).enumerate() {
                let di = delta[qs + i];
                for (x, &p) in ds.iter_mut().zip(p) {
                    *x = p * (*x - di);
                }
            }
            // dq += scale · ds k ;  dk += scale · dsᵀ q
            let q_rows = &mut dq[qs * d.e..(qs + bq) * d.e];
            let k_tile = k.operand(slice, ks, false);
            gemm_tile(
                (bq, d.e, bk),
                q_rows,
                true,
                scale,
                Operand::new(dp, 0, bk, 1),
                k_tile,
                Parallelism::None,
            );
            let k_rows = &mut dk[ks * d.e..(ks + bk) * d.e];
            let ds_t = Operand::new(dp, 0, 1, bk);
            gemm_tile(
                (bk, d.e, bq),
                k_rows,
                true,
                scale,
                ds_t,
                q_tile,
                Parallelism::None,
            );
        }
    }
}

fn check<T>(d: &AttentionDims, q: &Rows<'_, T>, k: &Rows<'_, T>, v: &Rows<'_, T>) {
    assert!(
        q.fits(d.batch, d.l, d.e) && k.fits(d.batch, d.s, d.e) && v.fits(d.batch, d.s, d.ev),
        "attention kernel: the query, key or value rows do not fit their buffers for {d:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain composition in f64: scores, mask, softmax, times v.
    fn reference(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> Vec<f64> {
        let mut out = vec![0.0; d.batch * d.l * d.ev];
        for b in 0..d.batch {
            for i in 0..d.l {
                let s: Vec<f64> = (0..d.s)
                    .map(|j| {
                        let dot: f64 = (0..d.e)
                            .map(|c| q[(b * d.l + i) * d.e + c] * k[(b * d.s + j) * d.e + c])
                            .sum();
                        if !causal || j <= i {
                            dot * scale
                        } else {
                            f64::NEG_INFINITY
                        }
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for c in 0..d.ev {
                    out[(b * d.l + i) * d.ev + c] = (0..d.s)
                        .map(|j| (s[j] - m).exp() / z * v[(b * d.s + j) * d.ev + c])
                        .sum();
                }
            }
        }
        out
    }

    /// Rows read in place from a head split: `[B, T, H, E]` viewed as
    /// `[B, H, T, E]` gives the same results as its dense copy, forward and
    /// backward.
    #[test]
    fn strided_rows_give_what_their_dense_copy_gives() {
        let (b, h, t, e) = (2, 3, 70, 4);
        let d = AttentionDims {
            batch: b * h,
            l: t,
            s: t,
            e,
            ev: e,
        };
        let bthe = values(b * t * h * e, 5);
        // The dense [B, H, T, E] copy of the [B, T, H, E] buffer.
        let mut dense = vec![0.0; bthe.len()];
        for (bi, hi, ti, ei) in (0..b).flat_map(|bi| {
            (0..h).flat_map(move |hi| {
                (0..t).flat_map(move |ti| (0..e).map(move |ei| (bi, hi, ti, ei)))
            })
        }) {
            dense[((bi * h + hi) * t + ti) * e + ei] = bthe[((bi * t + ti) * h + hi) * e + ei];
        }
        let strided = Rows {
            data: &bthe[..],
            offsets: (0..b * h)
                .map(|s| (s / h) * t * h * e + (s % h) * e)
                .collect(),
            row_stride: h * e,
        };
        let packed = Rows::dense(&dense, b * h, t, e);
        let f1 = attention_forward(&strided, &strided, &strided, d, 0.5, true);
        let f2 = attention_forward(&packed, &packed, &packed, d, 0.5, true);
        assert_eq!(f1.out, f2.out);
        let g = values(f1.out.len(), 6);
        let (o1, o2) = (
            Rows::dense(&f1.out, b * h, t, e),
            Rows::dense(&f2.out, b * h, t, e),
        );
        let gr = Rows::dense(&g, b * h, t, e);
        let b1 = attention_backward(
            &strided, &strided, &strided, &o1, &f1.lse, &gr, d, 0.5, true,
        );
        let b2 = attention_backward(&packed, &packed, &packed, &o2, &f2.lse, &gr, d, 0.5, true);
        assert_eq!(b1, b2);
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f64 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn tiled_forward_matches_the_composition_across_tile_edges() {
        // Sizes that leave partial tiles on both axes, L > S and L < S.
        for (l, s, causal) in [
            (130, 70, true),
            (70, 130, true),
            (129, 129, false),
            (1, 200, false),
        ] {
            let d = AttentionDims {
                batch: 2,
                l,
                s,
                e: 5,
                ev: 3,
            };
            let (q, k, v) = (
                values(2 * l * 5, 1),
                values(2 * s * 5, 2),
                values(2 * s * 3, 3),
            );
            let want = reference(&q, &k, &v, d, 0.7, causal);
            let dense = |x, rows, width| Rows::dense(x, 2, rows, width);
            let (qr, kr, vr) = (dense(&q, l, 5), dense(&k, s, 5), dense(&v, s, 3));
            let got = attention_forward(&qr, &kr, &vr, d, 0.7, causal).out;
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() < 1e-12,
                    "l {l} s {s} causal {causal} [{i}]: got {g}, want {w}"
                );
            }
        }
    }
}
