//! The layer table: one row per layer `model!` knows. A row is a struct
//! holding the layer's parameters (in PyTorch's order, with PyTorch's names
//! and defaults) and implementing [`Row`]: its shape rule and the code that
//! builds it sit together, and its parser is its [`RowSpec`] in [`TABLE`].
//! Adding a layer is adding a row here (and its runtime type in `tapir::nn`).

mod act;
mod attention;
mod conv;
mod embedding;
mod linear;
mod misc;
mod pool;
mod sequence;

pub use attention::Attention;

use super::dims::DimScope;
use super::layers::Args;
use super::rules::Facts;
use crate::shape::Shape;
use proc_macro2::TokenStream;
use std::rc::Rc;

/// One layer of the table, parsed.
pub trait Row {
    /// The one-input shape rule: the output shape for input `x`, or a
    /// message with a `{from}` placeholder (where the checker says where the
    /// input came from). `label` names the layer ("Linear `head`").
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String>;
    /// The field's runtime type (`::tapir::nn::Linear`).
    fn runtime_type(&self) -> TokenStream;
    /// The expression that builds the field on the CPU with PyTorch's defaults.
    fn constructor(&self) -> TokenStream;
    /// The parameter left as `_` that no call has filled in, if any.
    fn uninferred(&self) -> Option<&'static str> {
        None
    }
    /// Whether a call returns more than one tensor (GRU, LSTM); such a
    /// row's shape rule is [`Row::outputs`].
    fn multi_output(&self) -> bool {
        false
    }
    /// The shapes a call returns, nested as the runtime's tuple.
    fn outputs(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Outputs, String> {
        self.apply(label, x, facts).map(Outputs::Tensor)
    }
    /// Attention takes three inputs and options; its call rule is the
    /// checker's (`calls.rs`), which reads the row through this.
    fn attention(&self) -> Option<&Attention> {
        None
    }
}

/// What a layer call returns: one tensor, or a tuple (`(output, h_n)`).
pub enum Outputs {
    /// One tensor of this shape.
    Tensor(Shape),
    /// A tuple of outputs.
    Tuple(Vec<Outputs>),
}

/// How a row is written in a field type: its name (and accepted spellings),
/// its parameters in order, and its parser.
pub struct RowSpec {
    /// The name as the table lists it (and errors say it).
    pub name: &'static str,
    /// Other spellings accepted (`Relu` for `ReLU`).
    pub aliases: &'static [&'static str],
    /// Parameters in PyTorch's order.
    pub params: &'static [&'static str],
    /// Builds the row from its bound arguments.
    pub parse: fn(&mut Args, &mut DimScope) -> syn::Result<Rc<dyn Row>>,
}

/// Every row.
pub const TABLE: &[RowSpec] = &[
    linear::LINEAR,
    linear::LAYER_NORM,
    linear::RMS_NORM,
    linear::BATCH_NORM_1D,
    linear::BATCH_NORM_2D,
    linear::BATCH_NORM_3D,
    linear::GROUP_NORM,
    linear::INSTANCE_NORM_1D,
    linear::INSTANCE_NORM_2D,
    linear::INSTANCE_NORM_3D,
    misc::DROPOUT,
    embedding::EMBEDDING,
    embedding::EMBEDDING_BAG,
    conv::CONV1D,
    conv::CONV2D,
    conv::CONV_TRANSPOSE1D,
    conv::CONV_TRANSPOSE2D,
    conv::CONV3D,
    conv::CONV_TRANSPOSE3D,
    pool::MAX_POOL1D,
    pool::MAX_POOL2D,
    pool::AVG_POOL1D,
    pool::AVG_POOL2D,
    pool::LP_POOL1D,
    pool::LP_POOL2D,
    pool::LP_POOL3D,
    pool::ADAPTIVE_AVG_POOL1D,
    pool::ADAPTIVE_AVG_POOL2D,
    pool::ADAPTIVE_MAX_POOL1D,
    pool::ADAPTIVE_MAX_POOL2D,
    pool::MAX_POOL3D,
    pool::AVG_POOL3D,
    pool::ADAPTIVE_AVG_POOL3D,
    pool::ADAPTIVE_MAX_POOL3D,
    pool::ZERO_PAD1D,
    pool::ZERO_PAD2D,
    pool::REFLECTION_PAD1D,
    pool::REFLECTION_PAD2D,
    pool::REPLICATION_PAD1D,
    pool::REPLICATION_PAD2D,
    pool::CIRCULAR_PAD1D,
    pool::CIRCULAR_PAD2D,
    pool::CONSTANT_PAD1D,
    pool::CONSTANT_PAD2D,
    pool::ZERO_PAD3D,
    pool::REFLECTION_PAD3D,
    pool::REPLICATION_PAD3D,
    pool::CIRCULAR_PAD3D,
    pool::CONSTANT_PAD3D,
    misc::FLATTEN,
    misc::IDENTITY,
    misc::PIXEL_SHUFFLE,
    misc::PIXEL_UNSHUFFLE,
    misc::CHANNEL_SHUFFLE,
    misc::LOCAL_RESPONSE_NORM,
    act::RELU,
    act::GELU,
    act::SILU,
    act::TANH,
    act::SIGMOID,
    act::HARDSWISH,
    act::LEAKY_RELU,
    act::SELU,
    act::MISH,
    act::RELU6,
    act::HARDSIGMOID,
    act::LOG_SIGMOID,
    act::SOFTSIGN,
    act::SOFTPLUS,
    act::TANHSHRINK,
    act::ELU,
    act::CELU,
    act::HARDTANH,
    act::HARDSHRINK,
    act::SOFTSHRINK,
    act::PRELU,
    act::SOFTMAX2D,
    misc::SOFTMAX,
    misc::LOG_SOFTMAX,
    misc::SOFTMIN,
    attention::MULTIHEAD_ATTENTION,
    sequence::TRANSFORMER_ENCODER_LAYER,
    sequence::RNN,
    sequence::GRU,
    sequence::LSTM,
];

/// The row written `name` (or one of its spellings).
pub fn find(name: &str) -> Option<&'static RowSpec> {
    TABLE
        .iter()
        .find(|r| r.name == name || r.aliases.contains(&name))
}
