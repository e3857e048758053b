//! `F.scaled_dot_product_attention`: one fused op (flash attention's tiling,
//! with its own backward) where a device has the kernel and the call allows
//! it, the plain composition (`q kᵀ`, mask, softmax, `· v`) otherwise; and
//! PyTorch's `sdpa_kernel` to choose between them.

use super::attention::mask_future;
use super::layers::dropout;
use crate::ops::dense0;
use crate::storage::AttentionDims;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use std::cell::Cell;

/// The implementations [`scaled_dot_product_attention`] chooses from
/// (PyTorch's `torch.nn.attention.SDPBackend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdpBackend {
    /// The composition of plain ops: materialises the `[.., L, S]` scores;
    /// takes every mask and dropout.
    Math,
    /// One tiled kernel with an online softmax and a backward that
    /// recomputes the probabilities: `O(L)` memory. Takes `is_causal` but no
    /// `attn_mask` or dropout; on a GPU, f32, f16 and bf16 heads up to 128
    /// wide.
    Flash,
}

thread_local! {
    /// (math allowed, flash allowed) on this thread.
    static ALLOWED: Cell<(bool, bool)> = const { Cell::new((true, true)) };
}

/// The backends `sdpa_kernel` allows on this thread now: (math, flash).
pub(crate) fn allowed_backends() -> (bool, bool) {
    ALLOWED.with(|a| a.get())
}

/// Runs `f` with `scaled_dot_product_attention` restricted to `backends` on
/// this thread (PyTorch's `with sdpa_kernel([...])`); nests, and restores the
/// previous choice on return or unwind.
///
/// ```
/// use tapir_runtime::nn::{scaled_dot_product_attention, sdpa_kernel, SdpBackend};
/// use tapir_runtime::Tensor;
/// let q = Tensor::randn(&[2, 3, 4]);
/// let flash = scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None);
/// let math = sdpa_kernel(&[SdpBackend::Math], || {
///     scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None)
/// });
/// assert!(flash.allclose(&math, 1e-5, 1e-6));
/// ```
pub fn sdpa_kernel<R>(backends: &[SdpBackend], f: impl FnOnce() -> R) -> R {
    struct Restore((bool, bool));
    impl Drop for Restore {
        fn drop(&mut self) {
            ALLOWED.with(|a| a.set(self.0));
        }
    }
    let allowed = (
        backends.contains(&SdpBackend::Math),
        backends.contains(&SdpBackend::Flash),
    );
    let _restore = Restore(ALLOWED.with(|a| a.replace(allowed)));
    f()
}

/// `F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
/// is_causal, scale)`: `softmax(q kᵀ · scale + mask) v` over the last two
/// dims (`[.., L, E]` queries, `[.., S, E]` keys, `[.., S, Ev]` values),
/// `scale` defaulting to `1/√E`. A bool `attn_mask` marks the allowed
/// positions (true = attend), as PyTorch's does; a float one is added;
/// `is_causal` lets query `i` see keys `0..=i`. Under autocast it runs in
/// the low dtype (it is on PyTorch's list).
///
/// Without a mask or dropout, on the CPU, it runs one fused kernel
/// ([`SdpBackend::Flash`]); otherwise the plain ops ([`SdpBackend::Math`]).
/// [`sdpa_kernel`] restricts the choice.
///
/// ```
/// use tapir_runtime::{nn::scaled_dot_product_attention, Tensor};
/// let q = Tensor::randn(&[2, 4, 5, 8]);
/// let y = scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None);
/// assert_eq!(y.shape(), &[2, 4, 5, 8]);
/// ```
#[track_caller]
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Tensor {
    if let Some(v) = crate::amp::cast(crate::amp::Policy::Lower, &[query, key, value]) {
        return scaled_dot_product_attention(
            &v[0], &v[1], &v[2], attn_mask, dropout_p, is_causal, scale,
        );
    }
    let (q, k) = (query, key);
    assert!(
        q.ndim() >= 2
            && k.ndim() >= 2
            && value.ndim() >= 2
            && q.size(-1) == k.size(-1)
            && k.size(-2) == value.size(-2),
        "scaled_dot_product_attention: query {:?}, key {:?} and value {:?} must be [.., L, E], [.., S, E] and [.., S, Ev]",
        q.shape(),
        k.shape(),
        value.shape()
    );
    let scale = scale.unwrap_or(1.0 / (q.size(-1) as f64).sqrt());
    let (math, flash) = ALLOWED.with(|a| a.get());
    if flash
        && attn_mask.is_none()
        && dropout_p == 0.0
        && let Some(out) = flash_attention(q, k, value, scale, is_causal)
    {
        return out;
    }
    assert!(
        math,
        "scaled_dot_product_attention: no allowed backend takes query {:?} ({}, {}) with{} attn_mask and dropout_p {dropout_p}: sdpa_kernel allows only Flash, which needs no mask, no dropout and equal leading dims (on a GPU also f32, f16 or bf16 and heads up to 128 wide)",
        q.shape(),
        q.dtype(),
        q.device(),
        if attn_mask.is_some() { "" } else { "out" },
    );
    let mut scores = &q.matmul(&k.transpose(-2, -1)) * scale;
    if is_causal {
        scores = mask_future(&scores);
    }
    if let Some(m) = attn_mask {
        scores = if m.dtype() == DType::Bool {
            // PyTorch's bool mask says where attention is allowed.
            let blocked = m.eq_scalar(0.0);
            scores.masked_fill(&blocked, f64::NEG_INFINITY)
        } else {
            &scores + m
        };
    }
    dropout(&scores.softmax(-1), dropout_p, true).matmul(value)
}

/// [`scaled_dot_product_attention`] with `enable_gqa=True`: grouped-query
/// attention, `query` `[.., Hq, L, E]` against `key` / `value` with fewer
/// heads `[.., Hkv, S, ..]` (Hq a multiple of Hkv), each key/value head
/// shared by `Hq / Hkv` consecutive query heads, as PyTorch repeats them.
///
/// ```
/// use tapir_runtime::{nn::scaled_dot_product_attention_gqa, Tensor};
/// let q = Tensor::randn(&[2, 8, 5, 16]);
/// let kv = Tensor::randn(&[2, 2, 7, 16]);
/// let y = scaled_dot_product_attention_gqa(&q, &kv, &kv, None, 0.0, false, None);
/// assert_eq!(y.shape(), &[2, 8, 5, 16]);
/// ```
#[track_caller]
pub fn scaled_dot_product_attention_gqa(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Tensor {
    let heads = |t: &Tensor| (t.ndim() >= 3).then(|| t.size(-3));
    let (hq, hk, hv) = (heads(query), heads(key), heads(value));
    let groups = match (hq, hk, hv) {
        (Some(q), Some(k), Some(v)) if k == v && k > 0 && q % k == 0 => q / k,
        _ => panic!(
            "scaled_dot_product_attention (enable_gqa): query {:?} must have a multiple of the heads (dim -3) of key {:?} and value {:?}, which must agree",
            query.shape(),
            key.shape(),
            value.shape()
        ),
    };
    let shared = |t: &Tensor| match groups {
        1 => t.clone(),
        g => t.repeat_interleave(g, Some(-3)),
    };
    scaled_dot_product_attention(
        query,
        &shared(key),
        &shared(value),
        attn_mask,
        dropout_p,
        is_causal,
        scale,
    )
}

/// The fused op, or `None` when the inputs or the device do not suit it:
/// mixed dtypes or devices, leading dims that differ (broadcast), an empty
/// dim, or a device without the kernel.
fn flash_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64, causal: bool) -> Option<Tensor> {
    let nd = q.ndim();
    let lead = &q.shape()[..nd - 2];
    let suits = q.dtype().is_float()
        && [k, v].iter().all(|t| {
            t.dtype() == q.dtype()
                && t.device() == q.device()
                && t.ndim() == nd
                && &t.shape()[..nd - 2] == lead
        });
    let d = AttentionDims {
        batch: lead.iter().product(),
        l: q.size(-2),
        s: k.size(-2),
        e: q.size(-1),
        ev: v.size(-1),
    };
    if !suits || d.batch * d.l * d.s * d.e * d.ev == 0 || !q.read().fuses_attention(d) {
        return None;
    }
    let attrs = || {
        vec![
            ("scale", Attr::Float(scale)),
            ("is_causal", Attr::Int(causal as i64)),
        ]
    };
    trace::op("scaled_dot_product_attention", [q, k, v], attrs, || {
        // Read in place (a head split's transposed view needs no copy)
        // unless a row's elements are not contiguous.
        let rows = move |t: &Tensor| match t.strides()[nd - 1] == 1 || t.size(-1) == 1 {
            true => t.detach(),
            false => dense0(t),
        };
        let (qd, kd, vd) = (rows(q), rows(k), rows(v));
        let ([out, lse], order) = qd.read().attention(
            qd.layout(),
            (&kd.read(), kd.layout()),
            (&vd.read(), vd.layout()),
            d,
            scale,
            causal,
        );
        let mut shape = q.shape()[..nd - 1].to_vec();
        shape.push(d.ev);
        // A head split's output comes with its heads inside rows, so the
        // caller's `transpose(1, 2).reshape(..)` that merges them is free.
        let out = Tensor::from_storage_in(out, &shape, order);
        let lse = Tensor::from_storage(lse, &[d.batch * d.l]);
        let name = qd.read().attention_node();
        Tensor::record(out.detach(), name, &[q, k, v], || {
            let shapes = [q, k, v].map(|t| t.shape().to_vec());
            let [qd, kd, vd, out] = [qd, kd, vd, out].map(|t| t.saved());
            // As the caller passed them, for a `create_graph` backward.
            let [qo, ko, vo] = [q, k, v].map(|t| t.saved());
            move |g: &Tensor, needs: &[bool]| {
                if crate::autograd::differentiating() {
                    return attention_backward_recorded([&qo, &ko, &vo], g, scale, causal, needs);
                }
                // Read in place where its rows are consecutive (a
                // merged-heads gradient's transposed view is taken as is).
                let g = rows(&g.to_dtype(out.dtype()));
                let grads = qd.read().attention_backward(
                    qd.layout(),
                    (&kd.read(), kd.layout()),
                    (&vd.read(), vd.layout()),
                    (
                        (&out.read(), out.layout()),
                        &lse.read(),
                        (&g.read(), g.layout()),
                    ),
                    d,
                    scale,
                    causal,
                );
                grads
                    .into_iter()
                    .zip(&shapes)
                    .zip(needs)
                    .map(|(((s, order), shape), &need)| {
                        need.then(|| Tensor::from_storage_in(s, shape, order))
                    })
                    .collect()
            }
        })
    })
    .into()
}

/// Attention's backward from recorded ops, for a `create_graph` backward:
/// the probabilities recomputed from `q` and `k`, so every gradient
/// carries their graph and `g`'s.
fn attention_backward_recorded(
    [q, k, v]: [&Tensor; 3],
    g: &Tensor,
    scale: f64,
    causal: bool,
    needs: &[bool],
) -> Vec<Option<Tensor>> {
    let g = g.to_dtype(q.dtype());
    let mut scores = &q.matmul(&k.transpose(-2, -1)) * scale;
    if causal {
        scores = mask_future(&scores);
    }
    let p = scores.softmax(-1);
    let dp = g.matmul(&v.transpose(-2, -1));
    let ds = &p * &(&dp - &(&dp * &p).sum_dim(-1, true));
    vec![
        needs[0].then(|| &ds.matmul(k) * scale),
        needs[1].then(|| &ds.transpose(-2, -1).matmul(q) * scale),
        needs[2].then(|| p.transpose(-2, -1).matmul(&g)),
    ]
}
