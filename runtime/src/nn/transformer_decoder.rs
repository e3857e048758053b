//! `nn.TransformerDecoderLayer`: self-attention over the target, attention
//! from the target to the encoder's output (`memory`) and a feed-forward
//! block, each with a residual connection and a LayerNorm (post-norm by
//! default, pre-norm with `norm_first`), composed from existing layers.

use super::attention::MultiheadAttention;
use super::layers::Dropout;
use super::linear::Linear;
use super::module::{Module, TrainingFlag, named_children, repr_of_children};
use super::norm::LayerNorm;
use super::transformer::{Activation, TransformerEncoderLayerOptions};
use crate::Tensor;

/// `nn.TransformerDecoderLayer`'s options after `d_model` and `nhead`: the
/// encoder layer's, with the same PyTorch defaults.
pub type TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

/// The optional masks of a decoder layer's forward, as PyTorch names them
/// (bool masks: true = not attended; float masks are added to the scores).
///
/// ```
/// use tapir_runtime::{nn::DecoderMasks, Tensor};
/// let causal = Tensor::ones(&[5, 5]).triu(1).gt_scalar(0.0);
/// let masks = DecoderMasks { tgt_mask: Some(&causal), ..Default::default() };
/// assert!(masks.memory_mask.is_none() && !masks.tgt_is_causal);
/// ```
#[derive(Clone, Copy, Default)]
pub struct DecoderMasks<'a> {
    /// `[T, T]` over the target's self-attention.
    pub tgt_mask: Option<&'a Tensor>,
    /// `[T, S]` over the attention to the memory.
    pub memory_mask: Option<&'a Tensor>,
    /// `[N, T]`: target positions to ignore.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]`: memory positions to ignore.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// Mask the target's future positions in its self-attention (as
    /// [`MultiheadAttention::forward`]'s `is_causal`, beside any `tgt_mask`).
    pub tgt_is_causal: bool,
    /// Mask future memory positions (`is_causal` of the memory attention).
    pub memory_is_causal: bool,
}

/// `nn.TransformerDecoderLayer` with PyTorch's submodules and names
/// (`self_attn`, `multihead_attn`, `linear1`, `linear2`, `norm1`..`norm3`)
/// and its forward: `x = norm1(x + sa(x)); x = norm2(x + mha(x, memory));
/// x = norm3(x + ff(x))`, or with `norm_first` each block on the normed
/// input and added to it.
///
/// ```
/// use tapir_runtime::{nn::{TransformerDecoderLayer, TransformerDecoderLayerOptions}, Tensor};
/// let opts = TransformerDecoderLayerOptions { dim_feedforward: 32, batch_first: true, ..Default::default() };
/// let layer = TransformerDecoderLayer::new(16, 4, opts);
/// let (tgt, memory) = (Tensor::randn(&[2, 5, 16]), Tensor::randn(&[2, 9, 16]));
/// assert_eq!(layer.forward(&tgt, &memory).shape(), &[2, 5, 16]);
/// ```
pub struct TransformerDecoderLayer {
    /// The target's self-attention.
    pub self_attn: MultiheadAttention,
    /// The attention from the target to the memory.
    pub multihead_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// The LayerNorm of the self-attention block.
    pub norm1: LayerNorm,
    /// The LayerNorm of the memory-attention block.
    pub norm2: LayerNorm,
    /// The LayerNorm of the feed-forward block.
    pub norm3: LayerNorm,
    /// Between the feed-forward block's two linears.
    pub dropout: Dropout,
    /// After the self-attention block.
    pub dropout1: Dropout,
    /// After the memory-attention block.
    pub dropout2: Dropout,
    /// After the feed-forward block.
    pub dropout3: Dropout,
    /// The options it was built with.
    pub opts: TransformerDecoderLayerOptions,
    training: TrainingFlag,
}

impl TransformerDecoderLayer {
    /// `nn.TransformerDecoderLayer(d_model, nhead, ..)` with PyTorch's initialisation.
    pub fn new(
        d_model: usize,
        nhead: usize,
        opts: TransformerDecoderLayerOptions,
    ) -> TransformerDecoderLayer {
        let attention = || {
            let mut a = MultiheadAttention::new(d_model, nhead, opts.batch_first);
            a.dropout = opts.dropout;
            a
        };
        let norm = || {
            let mut n = LayerNorm::new(&[d_model], opts.layer_norm_eps, true);
            if !opts.bias {
                n.bias = None;
            }
            n
        };
        TransformerDecoderLayer {
            self_attn: attention(),
            multihead_attn: attention(),
            linear1: Linear::new(d_model, opts.dim_feedforward, opts.bias),
            linear2: Linear::new(opts.dim_feedforward, d_model, opts.bias),
            norm1: norm(),
            norm2: norm(),
            norm3: norm(),
            dropout: Dropout::new(opts.dropout),
            dropout1: Dropout::new(opts.dropout),
            dropout2: Dropout::new(opts.dropout),
            dropout3: Dropout::new(opts.dropout),
            opts,
            training: TrainingFlag::default(),
        }
    }

    /// The layer over `tgt` attending to `memory`, without masks.
    #[track_caller]
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor) -> Tensor {
        self.forward_with(tgt, memory, DecoderMasks::default())
    }

    /// The layer over `tgt` (`[T, N, E]`, or `[N, T, E]` batch-first)
    /// attending to `memory` (`[S, N, E]` / `[N, S, E]`) under `masks`.
    #[track_caller]
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, masks: DecoderMasks) -> Tensor {
        let e = self.self_attn.embed_dim;
        let layout = if self.opts.batch_first {
            "[N, T, E] and [N, S, E]"
        } else {
            "[T, N, E] and [S, N, E]"
        };
        assert!(
            tgt.ndim() == 3 && memory.ndim() == 3 && tgt.size(-1) == e && memory.size(-1) == e,
            "TransformerDecoderLayer: expected tgt and memory {layout} with E = {e}, got {:?} and {:?}",
            tgt.shape(),
            memory.shape()
        );
        let m = masks;
        let sa = |x: &Tensor| {
            let (y, _) = self.self_attn.forward(
                x,
                x,
                x,
                m.tgt_key_padding_mask,
                m.tgt_mask,
                false,
                m.tgt_is_causal,
            );
            self.dropout1.forward(&y)
        };
        let mha = |x: &Tensor| {
            let (y, _) = self.multihead_attn.forward(
                x,
                memory,
                memory,
                m.memory_key_padding_mask,
                m.memory_mask,
                false,
                m.memory_is_causal,
            );
            self.dropout2.forward(&y)
        };
        let ff = |x: &Tensor| {
            let h = self.linear1.forward(x);
            let h = match self.opts.activation {
                Activation::Relu => h.relu(),
                Activation::Gelu => h.gelu(),
            };
            let y = self.linear2.forward(&self.dropout.forward(&h));
            self.dropout3.forward(&y)
        };
        use super::module::Forward;
        // Each residual add and the norm after it run as one fused pass.
        if self.opts.norm_first {
            let (x, h) = self.norm2.forward_add(tgt, &sa(&self.norm1.forward(tgt)));
            let (x, h) = self.norm3.forward_add(&x, &mha(&h));
            &x + &ff(&h)
        } else {
            let (_, x) = self.norm1.forward_add(tgt, &sa(tgt));
            let (_, x) = self.norm2.forward_add(&x, &mha(&x));
            self.norm3.forward_add(&x, &ff(&x)).1
        }
    }
}

impl Module for TransformerDecoderLayer {
    // PyTorch's children in PyTorch's order (the dropouts hold no tensors).
    named_children!(
        "self_attn" => self_attn,
        "multihead_attn" => multihead_attn,
        "linear1" => linear1,
        "dropout" => dropout,
        "linear2" => linear2,
        "norm1" => norm1,
        "norm2" => norm2,
        "norm3" => norm3,
        "dropout1" => dropout1,
        "dropout2" => dropout2,
        "dropout3" => dropout3,
    );
    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.visit_children(&mut |_, child| child.set_training(on));
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
    fn repr(&self) -> String {
        repr_of_children("TransformerDecoderLayer", self)
    }
}

crate::display_as_repr!(TransformerDecoderLayer);
