//! `nn.TransformerEncoderLayer`: self-attention and a feed-forward block,
//! each with a residual connection and a LayerNorm (post-norm by default,
//! pre-norm with `norm_first`), composed from existing layers.

use super::attention::MultiheadAttention;
use super::layers::Dropout;
use super::linear::Linear;
use super::module::{Forward, Module, TrainingFlag, named_children, repr_of_children};
use super::norm::LayerNorm;
use crate::Tensor;

/// The feed-forward block's activation (PyTorch's `activation="relu"` or `"gelu"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// `F.relu` (PyTorch's default).
    #[default]
    Relu,
    /// `F.gelu`, exact (erf) form.
    Gelu,
}

/// `nn.TransformerEncoderLayer`'s options after `d_model` and `nhead`, with
/// PyTorch's defaults.
///
/// ```
/// use tapir_runtime::nn::TransformerEncoderLayerOptions;
/// let o = TransformerEncoderLayerOptions { dim_feedforward: 64, ..Default::default() };
/// assert_eq!((o.dropout, o.layer_norm_eps, o.batch_first, o.norm_first), (0.1, 1e-5, false, false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransformerEncoderLayerOptions {
    /// Width of the feed-forward block's hidden layer (2048).
    pub dim_feedforward: usize,
    /// Dropout on the attention weights, the feed-forward hidden layer and
    /// both residual branches, in training (0.1).
    pub dropout: f64,
    /// The feed-forward activation (ReLU).
    pub activation: Activation,
    /// The LayerNorms' eps (1e-5).
    pub layer_norm_eps: f64,
    /// Inputs are `[N, L, E]` rather than `[L, N, E]` (false).
    pub batch_first: bool,
    /// LayerNorm before each block instead of after the residual (false).
    pub norm_first: bool,
    /// Biases in the linear layers and LayerNorms (true).
    pub bias: bool,
}

impl Default for TransformerEncoderLayerOptions {
    fn default() -> Self {
        TransformerEncoderLayerOptions {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

/// `nn.TransformerEncoderLayer` with PyTorch's submodules and names
/// (`self_attn`, `linear1`, `linear2`, `norm1`, `norm2`) and its forward:
/// `x = norm1(x + sa(x)); x = norm2(x + ff(x))`, or with `norm_first`
/// `x = x + sa(norm1(x)); x = x + ff(norm2(x))`.
///
/// ```
/// use tapir_runtime::{nn::{Forward, TransformerEncoderLayer, TransformerEncoderLayerOptions}, Tensor};
/// let opts = TransformerEncoderLayerOptions { dim_feedforward: 32, batch_first: true, ..Default::default() };
/// let layer = TransformerEncoderLayer::new(16, 4, opts);
/// assert_eq!(layer.forward(&Tensor::randn(&[2, 7, 16])).shape(), &[2, 7, 16]);
/// ```
pub struct TransformerEncoderLayer {
    /// The self-attention block.
    pub self_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// The LayerNorm of the attention block.
    pub norm1: LayerNorm,
    /// The LayerNorm of the feed-forward block.
    pub norm2: LayerNorm,
    /// Between the feed-forward block's two linears.
    pub dropout: Dropout,
    /// After the attention block.
    pub dropout1: Dropout,
    /// After the feed-forward block.
    pub dropout2: Dropout,
    /// The options it was built with.
    pub opts: TransformerEncoderLayerOptions,
    training: TrainingFlag,
}

impl TransformerEncoderLayer {
    /// `nn.TransformerEncoderLayer(d_model, nhead, ..)` with PyTorch's initialisation.
    pub fn new(
        d_model: usize,
        nhead: usize,
        opts: TransformerEncoderLayerOptions,
    ) -> TransformerEncoderLayer {
        let mut self_attn = MultiheadAttention::new(d_model, nhead, opts.batch_first);
        self_attn.dropout = opts.dropout;
        let norm = || {
            let mut n = LayerNorm::new(&[d_model], opts.layer_norm_eps, true);
            if !opts.bias {
                n.bias = None;
            }
            n
        };
        TransformerEncoderLayer {
            self_attn,
            linear1: Linear::new(d_model, opts.dim_feedforward, opts.bias),
            linear2: Linear::new(opts.dim_feedforward, d_model, opts.bias),
            norm1: norm(),
            norm2: norm(),
            dropout: Dropout::new(opts.dropout),
            dropout1: Dropout::new(opts.dropout),
            dropout2: Dropout::new(opts.dropout),
            opts,
            training: TrainingFlag::default(),
        }
    }

    /// The layer over `src` with PyTorch's optional `src_mask` `[L, L]`,
    /// `src_key_padding_mask` `[N, L]` (true = ignore) and `is_causal`.
    #[track_caller]
    pub fn forward_with(
        &self,
        src: &Tensor,
        src_mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Tensor {
        let e = self.self_attn.embed_dim;
        assert!(
            src.ndim() == 3 && src.size(-1) == e,
            "TransformerEncoderLayer: expected src [{}, {e}], got {:?}",
            if self.opts.batch_first {
                "N, L"
            } else {
                "L, N"
            },
            src.shape()
        );
        let sa = |x: &Tensor| {
            let (y, _) =
                self.self_attn
                    .forward(x, x, x, src_key_padding_mask, src_mask, false, is_causal);
            self.dropout1.forward(&y)
        };
        let ff = |x: &Tensor| {
            let h = self.linear1.forward(x);
            let h = match self.opts.activation {
                Activation::Relu => h.relu(),
                Activation::Gelu => h.gelu(),
            };
            let y = self.linear2.forward(&self.dropout.forward(&h));
            self.dropout2.forward(&y)
        };
        // Each residual add and the norm after it run as one fused pass.
        if self.opts.norm_first {
            let (x, h) = self.norm2.forward_add(src, &sa(&self.norm1.forward(src)));
            &x + &ff(&h)
        } else {
            let (_, x) = self.norm1.forward_add(src, &sa(src));
            self.norm2.forward_add(&x, &ff(&x)).1
        }
    }
}

impl Forward for TransformerEncoderLayer {
    #[track_caller]
    fn forward(&self, src: &Tensor) -> Tensor {
        self.forward_with(src, None, None, false)
    }
}

impl Module for TransformerEncoderLayer {
    // PyTorch's children in PyTorch's order (the dropouts hold no tensors).
    named_children!(
        "self_attn" => self_attn,
        "linear1" => linear1,
        "dropout" => dropout,
        "linear2" => linear2,
        "norm1" => norm1,
        "norm2" => norm2,
        "dropout1" => dropout1,
        "dropout2" => dropout2,
    );
    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.visit_children(&mut |_, child| child.set_training(on));
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
    fn repr(&self) -> String {
        repr_of_children("TransformerEncoderLayer", self)
    }
}

crate::display_as_repr!(TransformerEncoderLayer);
