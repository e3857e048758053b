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

/// Keys a query tile starting at `qs` with `bq` rows may see: `0..end`.
fn key_end(d: &AttentionDims, causal: bool, qs: usize, bq: usize) -> usize {
    if causal { d.s.min(qs + bq) } else { d.s }
}

/// `softmax(q kᵀ · scale [+ causal mask]) v` for each slice, tiled.
///
/// ```
/// use tapir_kernels::cpu::{attention_forward, AttentionDims};
/// // One query, two keys with equal scores: the output is the values' mean.
/// let d = AttentionDims { batch: 1, l: 1, s: 2, e: 1, ev: 1 };
/// let f = attention_forward(&[1.0f32], &[2.0, 2.0], &[1.0, 3.0], d, 1.0, false);
/// assert_eq!(f.out, vec![2.0]);
/// assert!((f.lse[0] - (2.0 + 2f32.ln())).abs() < 1e-6);
/// ```
pub fn attention_forward<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
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
        let (ks, vs) = (slice * d.s * d.e, slice * d.s * d.ev);
        let qrows = &q[(slice * d.l + qs) * d.e..(slice * d.l + qs + m.len()) * d.e];
        let kv = (&k[ks..ks + d.s * d.e], &v[vs..vs + d.s * d.ev]);
        simd(
            #[inline(always)]
            || forward_tile(qrows, kv, &d, scale, causal, qs, o, m),
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
        // One task per (slice, query tile): a tile never spans two slices.
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
    q: &[T],
    (k, v): (&[T], &[T]),
    d: &AttentionDims,
    scale: T,
    causal: bool,
    qs: usize,
    out: &mut [T],
    lse: &mut [T],
) {
    let bq = lse.len();
    let mut scores = vec![T::zero(); bq * TILE];
    let mut max = vec![T::neg_infinity(); bq];
    let mut sum = vec![T::zero(); bq];
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
            Operand::new(q, 0, d.e, 1),
            Operand::new(k, ks * d.e, 1, d.e),
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
            Operand::new(v, ks * d.ev, d.ev, 1),
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
/// gradient `g` of its output, from the same inputs, its output and its
/// log-sum-exp (flash attention 2's backward: per slice, key tiles outer so
/// each key tile's `dk`, `dv` are finished in one place, query tiles inner).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    out: &[T],
    lse: &[T],
    g: &[T],
    d: AttentionDims,
    scale: T,
    causal: bool,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    check(&d, q, k, v);
    let (ql, kl, vl) = (d.l * d.e, d.s * d.e, d.s * d.ev);
    assert!(
        out.len() == g.len() && g.len() == d.batch * d.l * d.ev && lse.len() == d.batch * d.l,
        "attention_backward kernel: output, gradient or log-sum-exp length does not match {d:?}"
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
        let rows = |x, n| rows(x, n, b);
        let o = (rows(out, d.l * d.ev), rows(g, d.l * d.ev));
        simd(
            #[inline(always)]
            || {
                backward_slice(
                    (rows(q, ql), rows(k, kl), rows(v, vl)),
                    o,
                    rows(lse, d.l),
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
    (q, k, v): (&[T], &[T], &[T]),
    (out, g): (&[T], &[T]),
    lse: &[T],
    d: &AttentionDims,
    (scale, causal): (T, bool),
    (dq, dk, dv): (&mut [T], &mut [T], &mut [T]),
) {
    // delta_i = sum_c g[i, c] out[i, c]: softmax's backward term per row.
    let delta: Vec<T> = out
        .chunks(d.ev)
        .zip(g.chunks(d.ev))
        .map(|(o, g)| o.iter().zip(g).fold(T::zero(), |s, (&o, &g)| s + o * g))
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
            let q_tile = Operand::new(q, qs * d.e, d.e, 1);
            let g_tile = Operand::new(g, qs * d.ev, d.ev, 1);
            // p = exp(scale · q kᵀ - lse): the forward's probabilities.
            gemm_tile(
                (bq, bk, d.e),
                p,
                false,
                scale,
                q_tile,
                Operand::new(k, ks * d.e, 1, d.e),
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
            gemm_tile((bk, d.ev, bq), v_rows, true, T::one(), p_t, g_tile);
            // dp = g vᵀ, then ds = p (dp - delta) in place.
            let v_t = Operand::new(v, ks * d.ev, 1, d.ev);
            gemm_tile((bq, bk, d.ev), dp, false, T::one(), g_tile, v_t);
            for (i, (ds, p)) in dp.chunks_mut(bk).zip(p.chunks(bk)).enumerate() {
                let di = delta[qs + i];
                for (x, &p) in ds.iter_mut().zip(p) {
                    *x = p * (*x - di);
                }
            }
            // dq += scale · ds k ;  dk += scale · dsᵀ q
            let q_rows = &mut dq[qs * d.e..(qs + bq) * d.e];
            let k_tile = Operand::new(k, ks * d.e, d.e, 1);
            gemm_tile(
                (bq, d.e, bk),
                q_rows,
                true,
                scale,
                Operand::new(dp, 0, bk, 1),
                k_tile,
            );
            let k_rows = &mut dk[ks * d.e..(ks + bk) * d.e];
            let ds_t = Operand::new(dp, 0, 1, bk);
            gemm_tile((bk, d.e, bq), k_rows, true, scale, ds_t, q_tile);
        }
    }
}

fn check<T>(d: &AttentionDims, q: &[T], k: &[T], v: &[T]) {
    assert!(
        q.len() == d.batch * d.l * d.e
            && k.len() == d.batch * d.s * d.e
            && v.len() == d.batch * d.s * d.ev,
        "attention kernel: buffers of {}, {} and {} elements do not match {d:?}",
        q.len(),
        k.len(),
        v.len()
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
            let got = attention_forward(&q, &k, &v, d, 0.7, causal).out;
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() < 1e-12,
                    "l {l} s {s} causal {causal} [{i}]: got {g}, want {w}"
                );
            }
        }
    }
}
