//! `nn.MultiheadAttention`: projections, then `scaled_dot_product_attention`
//! when no weights are asked for (PyTorch's fast path), plain ops otherwise.

use super::init;
use super::layers::dropout;
use super::linear::Linear;
use super::module::{
    Module, TensorKind, TrainingFlag, named_children, visit_child, visit_child_mut,
};
use crate::{DType, Tensor};

/// Multi-head attention with PyTorch's parameters and init: a packed
/// `in_proj_weight` `[3E, E]` (xavier-uniform), `in_proj_bias` (zeros), and
/// `out_proj` (a Linear with zero bias).
///
/// ```
/// use tapir_runtime::{nn::MultiheadAttention, Tensor};
/// let mha = MultiheadAttention::new(8, 2, true);
/// let x = Tensor::randn(&[3, 5, 8]);
/// let (y, w) = mha.forward(&x, &x, &x, None, None, true, true);
/// assert_eq!(y.shape(), &[3, 5, 8]);
/// assert_eq!(w.unwrap().shape(), &[3, 5, 5]);
/// ```
pub struct MultiheadAttention {
    /// Query, key and value projections stacked: `[3 * embed_dim, embed_dim]`.
    pub in_proj_weight: Tensor,
    /// Their biases: `[3 * embed_dim]`.
    pub in_proj_bias: Tensor,
    /// The output projection.
    pub out_proj: Linear,
    /// Model width.
    pub embed_dim: usize,
    /// Number of heads (dividing `embed_dim`).
    pub num_heads: usize,
    /// Inputs are `[N, L, E]` rather than `[L, N, E]`.
    pub batch_first: bool,
    /// Dropout on the attention weights in training (PyTorch's `dropout`,
    /// default 0).
    pub dropout: f64,
    training: TrainingFlag,
}

impl MultiheadAttention {
    /// `nn.MultiheadAttention(embed_dim, num_heads, batch_first=...)` with PyTorch's initialisation.
    pub fn new(embed_dim: usize, num_heads: usize, batch_first: bool) -> MultiheadAttention {
        assert!(
            num_heads > 0 && embed_dim.is_multiple_of(num_heads),
            "MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads {num_heads}"
        );
        let w = Tensor::zeros(&[3 * embed_dim, embed_dim]);
        init::xavier_uniform_(&w, 1.0);
        let out_proj = Linear::new(embed_dim, embed_dim, true);
        init::zeros_(out_proj.bias.as_ref().unwrap());
        MultiheadAttention {
            in_proj_weight: w.requires_grad_(true),
            in_proj_bias: Tensor::zeros(&[3 * embed_dim]).requires_grad_(true),
            out_proj,
            embed_dim,
            num_heads,
            batch_first,
            dropout: 0.0,
            training: TrainingFlag::default(),
        }
    }

    /// Attention of `query` over `key`/`value`. `key_padding_mask` `[B, S]`
    /// (true = ignore that key), `attn_mask` `[L, S]` (bool: true = not
    /// allowed; float: added to the scores), `is_causal` masks future keys.
    /// Returns the output and, with `need_weights`, the head-averaged weights `[B, L, S]`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        key_padding_mask: Option<&Tensor>,
        attn_mask: Option<&Tensor>,
        need_weights: bool,
        is_causal: bool,
    ) -> (Tensor, Option<Tensor>) {
        let e = self.embed_dim;
        let to_bf = |t: &Tensor| {
            if self.batch_first {
                t.clone()
            } else {
                t.transpose(0, 1)
            }
        };
        let (q, k, v) = (to_bf(query), to_bf(key), to_bf(value));
        for (n, t) in [("query", &q), ("key", &k), ("value", &v)] {
            assert!(
                t.ndim() == 3 && t.size(-1) == e,
                "MultiheadAttention: {n} of shape {:?} must be 3-D with embed dim {e}",
                t.shape()
            );
        }
        let (b, l, s) = (q.size(0), q.size(1), k.size(1));
        let (h, hd) = (self.num_heads, e / self.num_heads);
        // [B, n, E] -> [B, H, n, hd]: a view whose heads lie inside its rows
        // (the fused attention reads it in place).
        let split = |x: &Tensor, n: usize| {
            x.reshape(&[b as isize, n as isize, h as isize, hd as isize])
                .transpose(1, 2)
        };
        let self_attention =
            std::sync::Arc::ptr_eq(&query.0, &key.0) && std::sync::Arc::ptr_eq(&key.0, &value.0);
        let (qh, kh, vh) = if self_attention {
            // PyTorch's packed in-projection (`query is key is value`): one
            // GEMM for q, k and v, whose backward is one GEMM per operand
            // and no gradient sum over three branches.
            let w = Some(&self.in_proj_bias);
            let qkv = super::linear::linear(&q, &self.in_proj_weight, w).chunk(3, -1);
            (split(&qkv[0], l), split(&qkv[1], l), split(&qkv[2], l))
        } else {
            let w = self.in_proj_weight.chunk(3, 0);
            let bias = self.in_proj_bias.chunk(3, 0);
            let project = |x: &Tensor, i: usize| super::linear::linear(x, &w[i], Some(&bias[i]));
            (
                split(&project(&q, 0), l),
                split(&project(&k, 1), s),
                split(&project(&v, 2), s),
            )
        };
        let no_dropout = self.dropout == 0.0 || !self.training.get();
        if !need_weights && key_padding_mask.is_none() && attn_mask.is_none() && no_dropout {
            // PyTorch's fast path: without weights to return, attention is
            // one `scaled_dot_product_attention` (fused where it can be).
            let ctx =
                super::scaled_dot_product_attention(&qh, &kh, &vh, None, 0.0, is_causal, None);
            return (self.project(&ctx, b, l), None);
        }
        let mut scores = &qh.matmul(&kh.transpose(-1, -2)) * (1.0 / (hd as f64).sqrt()); // [B, H, L, S]
        if is_causal {
            scores = mask_future(&scores);
        }
        if let Some(m) = attn_mask {
            assert!(
                m.shape() == [l, s],
                "MultiheadAttention: attn_mask must have shape [{l}, {s}], got {:?}",
                m.shape()
            );
            scores = if m.dtype() == DType::Bool {
                scores.masked_fill(m, f64::NEG_INFINITY)
            } else {
                &scores + m
            };
        }
        if let Some(m) = key_padding_mask {
            assert!(
                m.shape() == [b, s],
                "MultiheadAttention: key_padding_mask must have shape [{b}, {s}], got {:?}",
                m.shape()
            );
            let m = m.reshape(&[b as isize, 1, 1, s as isize]);
            scores = if m.dtype() == DType::Bool {
                scores.masked_fill(&m, f64::NEG_INFINITY)
            } else {
                &scores + &m
            };
        }
        let attn = dropout(&scores.softmax(-1), self.dropout, self.training.get());
        let out = self.project(&attn.matmul(&vh), b, l);
        (out, need_weights.then(|| attn.mean_dim(1, false)))
    }

    /// The heads' outputs `[B, H, L, hd]` joined and through `out_proj`,
    /// in the caller's layout.
    fn project(&self, heads: &Tensor, b: usize, l: usize) -> Tensor {
        let joined =
            heads
                .transpose(1, 2)
                .reshape(&[b as isize, l as isize, self.embed_dim as isize]);
        let out = crate::nn::Forward::forward(&self.out_proj, &joined);
        if self.batch_first {
            out
        } else {
            out.transpose(0, 1)
        }
    }
}

impl Module for MultiheadAttention {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f(
            "in_proj_weight",
            &self.in_proj_weight,
            TensorKind::Parameter,
        );
        f("in_proj_bias", &self.in_proj_bias, TensorKind::Parameter);
        visit_child("out_proj", &self.out_proj, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f(
            "in_proj_weight",
            &mut self.in_proj_weight,
            TensorKind::Parameter,
        );
        f(
            "in_proj_bias",
            &mut self.in_proj_bias,
            TensorKind::Parameter,
        );
        visit_child_mut("out_proj", &mut self.out_proj, f);
    }
    named_children!(
        "out_proj" => out_proj,
    );
    fn set_training(&self, on: bool) {
        self.training.set(on);
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
    fn repr(&self) -> String {
        format!(
            "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features={e}, out_features={e}, bias=True)\n)",
            e = self.embed_dim
        )
    }
}

crate::display_as_repr!(MultiheadAttention);

/// Scores `[.., L, S]` with every key after its query (the causal mask's
/// blocked positions) set to -inf.
pub(crate) fn mask_future(scores: &Tensor) -> Tensor {
    crate::trace::op("causal_mask", [scores], Vec::new, || {
        let (l, s) = (scores.size(-2), scores.size(-1));
        let (cols, rows) = crate::ops::triangle::diagonal_grid(l, s, 0, scores.device());
        let future = cols.gt(&rows);
        scores.masked_fill(&future, f64::NEG_INFINITY)
    })
}
