//! The stacks: `nn.TransformerEncoder`, `nn.TransformerDecoder` (a layer
//! copied `num_layers` times, then an optional LayerNorm) and
//! `nn.Transformer` (an encoder and a decoder stack, each ending in a
//! LayerNorm, with PyTorch's xavier initialisation).

use super::container::ModuleList;
use super::init;
use super::module::{Module, named_children, repr_children};
use super::norm::LayerNorm;
use super::transformer::{TransformerEncoderLayer, TransformerEncoderLayerOptions};
use super::transformer_decoder::{DecoderMasks, TransformerDecoderLayer};
use crate::Tensor;

/// `num_layers` copies of `layer` with its weights (PyTorch's deepcopy):
/// fresh layers from `make`, loaded with the template's state.
fn copies<L: Module>(layer: L, num_layers: usize, make: impl Fn() -> L) -> Vec<L> {
    assert!(
        num_layers > 0,
        "a transformer stack needs at least one layer"
    );
    let state = layer.state_dict();
    let mut layers = vec![layer];
    for _ in 1..num_layers {
        let mut copy = make();
        copy.load_state_dict(&state, true)
            .expect("a layer built with the same options has the same keys");
        layers.push(copy);
    }
    layers
}

/// A stack's children, as PyTorch names them: `layers` (a `ModuleList`),
/// then `norm` if there is one.
fn stack_children<'a, L: Module>(
    layers: &'a ModuleList<L>,
    norm: &'a Option<LayerNorm>,
    f: &mut dyn FnMut(&str, &'a dyn Module),
) {
    f("layers", layers);
    if let Some(n) = norm {
        f("norm", n);
    }
}

fn stack_children_mut<L: Module>(
    layers: &mut ModuleList<L>,
    norm: &mut Option<LayerNorm>,
    f: &mut dyn FnMut(&str, &mut dyn Module),
) {
    f("layers", layers);
    if let Some(n) = norm {
        f("norm", n);
    }
}

/// PyTorch's repr of a stack: `(layers): ModuleList(\n (0-1): 2 x ...)`.
fn stack_repr<L: Module>(name: &str, layers: &[L], norm: &Option<LayerNorm>) -> String {
    let inner = layers[0].repr().replace('\n', "\n    ");
    // PyTorch's ModuleList folds identical children into one line.
    let item = match layers.len() {
        1 => format!("(0): {inner}"),
        n => format!("(0-{}): {n} x {inner}", n - 1),
    };
    let list = format!("ModuleList(\n    {item}\n  )");
    let mut s = format!("{name}(\n  (layers): {list}");
    if let Some(n) = norm {
        s.push_str(&format!("\n  (norm): {}", n.repr()));
    }
    s + "\n)"
}

/// `nn.TransformerEncoder`: `num_layers` copies of a layer (its weights
/// included, as PyTorch's deepcopy), then an optional LayerNorm.
///
/// ```
/// use tapir_runtime::{nn::*, Tensor};
/// let opts = TransformerEncoderLayerOptions { dim_feedforward: 32, batch_first: true, ..Default::default() };
/// let enc = TransformerEncoder::new(TransformerEncoderLayer::new(16, 4, opts), 3, None);
/// assert_eq!(enc.forward(&Tensor::randn(&[2, 7, 16])).shape(), &[2, 7, 16]);
/// assert_eq!(enc.named_parameters()[0].0, "layers.0.self_attn.in_proj_weight");
/// ```
pub struct TransformerEncoder {
    /// The layers, applied in order.
    pub layers: ModuleList<TransformerEncoderLayer>,
    /// The final LayerNorm, if any.
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// `nn.TransformerEncoder(encoder_layer, num_layers, norm)`.
    pub fn new(
        layer: TransformerEncoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> TransformerEncoder {
        let (e, h, opts) = (
            layer.self_attn.embed_dim,
            layer.self_attn.num_heads,
            layer.opts,
        );
        let layers = copies(layer, num_layers, || {
            TransformerEncoderLayer::new(e, h, opts)
        });
        TransformerEncoder {
            layers: ModuleList::new(layers),
            norm,
        }
    }

    /// The stack over `src` with PyTorch's `mask`, `src_key_padding_mask`
    /// and `is_causal`, given to every layer.
    #[track_caller]
    pub fn forward_with(
        &self,
        src: &Tensor,
        mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Tensor {
        let mut x = src.clone();
        for layer in &self.layers {
            x = layer.forward_with(&x, mask, src_key_padding_mask, is_causal);
        }
        match &self.norm {
            Some(n) => super::module::Forward::forward(n, &x),
            None => x,
        }
    }
}

impl super::module::Forward for TransformerEncoder {
    #[track_caller]
    fn forward(&self, src: &Tensor) -> Tensor {
        self.forward_with(src, None, None, false)
    }
}

impl Module for TransformerEncoder {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        stack_children(&self.layers, &self.norm, f);
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        stack_children_mut(&mut self.layers, &mut self.norm, f);
    }
    fn is_training(&self) -> bool {
        self.layers[0].is_training()
    }
    fn repr(&self) -> String {
        stack_repr("TransformerEncoder", &self.layers.items, &self.norm)
    }
}

/// `nn.TransformerDecoder`: `num_layers` copies of a decoder layer (its
/// weights included), each attending to the same memory, then an
/// optional LayerNorm.
///
/// ```
/// use tapir_runtime::{nn::*, Tensor};
/// let opts = TransformerDecoderLayerOptions { dim_feedforward: 32, batch_first: true, ..Default::default() };
/// let dec = TransformerDecoder::new(TransformerDecoderLayer::new(16, 4, opts), 2, None);
/// let (tgt, memory) = (Tensor::randn(&[2, 5, 16]), Tensor::randn(&[2, 9, 16]));
/// assert_eq!(dec.forward(&tgt, &memory).shape(), &[2, 5, 16]);
/// ```
pub struct TransformerDecoder {
    /// The layers, applied in order.
    pub layers: ModuleList<TransformerDecoderLayer>,
    /// The final LayerNorm, if any.
    pub norm: Option<LayerNorm>,
}

impl TransformerDecoder {
    /// `nn.TransformerDecoder(decoder_layer, num_layers, norm)`.
    pub fn new(
        layer: TransformerDecoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> TransformerDecoder {
        let (e, h, opts) = (
            layer.self_attn.embed_dim,
            layer.self_attn.num_heads,
            layer.opts,
        );
        let layers = copies(layer, num_layers, || {
            TransformerDecoderLayer::new(e, h, opts)
        });
        TransformerDecoder {
            layers: ModuleList::new(layers),
            norm,
        }
    }

    /// The stack over `tgt` attending to `memory`, without masks.
    #[track_caller]
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor) -> Tensor {
        self.forward_with(tgt, memory, DecoderMasks::default())
    }

    /// The stack over `tgt` attending to `memory`, `masks` given to every layer.
    #[track_caller]
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, masks: DecoderMasks) -> Tensor {
        let mut x = tgt.clone();
        for layer in &self.layers {
            x = layer.forward_with(&x, memory, masks);
        }
        match &self.norm {
            Some(n) => super::module::Forward::forward(n, &x),
            None => x,
        }
    }
}

impl Module for TransformerDecoder {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        stack_children(&self.layers, &self.norm, f);
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        stack_children_mut(&mut self.layers, &mut self.norm, f);
    }
    fn is_training(&self) -> bool {
        self.layers[0].is_training()
    }
    fn repr(&self) -> String {
        stack_repr("TransformerDecoder", &self.layers.items, &self.norm)
    }
}

/// The masks of [`Transformer::forward_with`]: the encoder's, then the
/// decoder's (whose `memory_key_padding_mask` usually repeats
/// `src_key_padding_mask`).
#[derive(Clone, Copy, Default)]
pub struct TransformerMasks<'a> {
    /// `[S, S]` over the source's self-attention.
    pub src_mask: Option<&'a Tensor>,
    /// `[N, S]`: source positions to ignore.
    pub src_key_padding_mask: Option<&'a Tensor>,
    /// Mask the source's future positions.
    pub src_is_causal: bool,
    /// The decoder stack's masks.
    pub decoder: DecoderMasks<'a>,
}

/// `nn.Transformer`: an encoder stack and a decoder stack, each ending in
/// a LayerNorm, every matrix initialised xavier-uniform as PyTorch's
/// `_reset_parameters` does.
///
/// ```
/// use tapir_runtime::{nn::*, Tensor};
/// let opts = TransformerEncoderLayerOptions { dim_feedforward: 32, batch_first: true, ..Default::default() };
/// let model = Transformer::new(16, 4, 2, 2, opts);
/// let (src, tgt) = (Tensor::randn(&[2, 9, 16]), Tensor::randn(&[2, 5, 16]));
/// let causal = Transformer::generate_square_subsequent_mask(5);
/// let masks = TransformerMasks { decoder: DecoderMasks { tgt_mask: Some(&causal), ..Default::default() }, ..Default::default() };
/// assert_eq!(model.forward_with(&src, &tgt, masks).shape(), &[2, 5, 16]);
/// ```
pub struct Transformer {
    /// The encoder stack (with its final LayerNorm).
    pub encoder: TransformerEncoder,
    /// The decoder stack (with its final LayerNorm).
    pub decoder: TransformerDecoder,
}

impl Transformer {
    /// `nn.Transformer(d_model, nhead, num_encoder_layers,
    /// num_decoder_layers, ..)` with the layers' options (PyTorch's
    /// defaults are 512, 8, 6, 6).
    pub fn new(
        d_model: usize,
        nhead: usize,
        num_encoder_layers: usize,
        num_decoder_layers: usize,
        opts: TransformerEncoderLayerOptions,
    ) -> Transformer {
        let norm = || {
            let mut n = LayerNorm::new(&[d_model], opts.layer_norm_eps, true);
            if !opts.bias {
                n.bias = None;
            }
            Some(n)
        };
        let encoder = TransformerEncoder::new(
            TransformerEncoderLayer::new(d_model, nhead, opts),
            num_encoder_layers,
            norm(),
        );
        let decoder = TransformerDecoder::new(
            TransformerDecoderLayer::new(d_model, nhead, opts),
            num_decoder_layers,
            norm(),
        );
        let model = Transformer { encoder, decoder };
        for (_, p) in model.named_parameters() {
            if p.ndim() > 1 {
                init::xavier_uniform_(&p, 1.0);
            }
        }
        model
    }

    /// PyTorch's `generate_square_subsequent_mask(sz)`: a float `[sz, sz]`
    /// mask, `-inf` above the diagonal and 0 elsewhere.
    ///
    /// ```
    /// use tapir_runtime::nn::Transformer;
    /// let m = Transformer::generate_square_subsequent_mask(2).to_vec::<f32>();
    /// assert_eq!(m, vec![0.0, f32::NEG_INFINITY, 0.0, 0.0]);
    /// ```
    pub fn generate_square_subsequent_mask(sz: usize) -> Tensor {
        let future = Tensor::ones(&[sz, sz]).triu(1).gt_scalar(0.0);
        Tensor::zeros(&[sz, sz]).masked_fill(&future, f64::NEG_INFINITY)
    }

    /// The model on `src` and `tgt`, without masks.
    #[track_caller]
    pub fn forward(&self, src: &Tensor, tgt: &Tensor) -> Tensor {
        self.forward_with(src, tgt, TransformerMasks::default())
    }

    /// `memory = encoder(src)`, then `decoder(tgt, memory)`, under `masks`.
    #[track_caller]
    pub fn forward_with(&self, src: &Tensor, tgt: &Tensor, masks: TransformerMasks) -> Tensor {
        let memory = self.encoder.forward_with(
            src,
            masks.src_mask,
            masks.src_key_padding_mask,
            masks.src_is_causal,
        );
        self.decoder.forward_with(tgt, &memory, masks.decoder)
    }
}

impl Module for Transformer {
    named_children!(
        "encoder" => encoder,
        "decoder" => decoder,
    );
    fn is_training(&self) -> bool {
        self.encoder.is_training()
    }
    fn repr(&self) -> String {
        repr_children(
            "Transformer",
            &[("encoder", &self.encoder), ("decoder", &self.decoder)],
        )
    }
}

crate::display_as_repr!(TransformerEncoder, TransformerDecoder, Transformer);
