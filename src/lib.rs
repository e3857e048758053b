//! # tapir
//!
//! PyTorch's define-by-run training loop in Rust. This facade re-exports
//! everything a user needs; `use tapir::prelude::*;` brings the common names.
//!
//! ```
//! use tapir::prelude::*;
//! let w = Tensor::randn(&[784, 10]).requires_grad_(true);
//! let x = Tensor::rand(&[32, 784]);
//! let loss = x.matmul(&w).log_softmax(-1).mean().neg();
//! loss.backward();
//! assert_eq!(w.grad().unwrap().shape(), &[784, 10]);
//! ```

#![warn(missing_docs)]

/// Defines a model: layers as fields, `forward` with shapes, every shape
/// checked while the crate compiles. [`model_macro_reference`] has the
/// grammar, the shape rules, the layer table and every error.
///
/// ```
/// use tapir::{model, Device, Tensor};
///
/// model! {
///     /// The seed's residual block.
///     pub struct ResBlock<const D: usize> {
///         net: Sequential<(Linear<D, D>, LayerNorm<D>, GELU, Linear<D, D>)>,
///     }
///     fn forward(&self, x: [B, D]) -> [B, D] {
///         x + self.net(x)
///     }
/// }
///
/// model! {
///     pub struct Mlp<const IN: usize, const OUT: usize> {
///         stem: Linear<IN, 256>,
///         blocks: [ResBlock<256>; 4],
///         head: Linear<256, OUT>, // `Linear<128, OUT>` would not compile
///     }
///     fn forward(&self, x: [B, IN]) -> [B, OUT] {
///         let mut h = self.stem(x);
///         for block in &self.blocks {
///             h = block(h);
///         }
///         self.head(h)
///     }
/// }
///
/// let model = Mlp::<784, 10>::new(&Device::Cpu); // PyTorch's default init
/// let logits = model.forward(&Tensor::randn(&[32, 784]));
/// assert_eq!(logits.shape(), &[32, 10]);
/// // A wrong input is an error naming the dims' values.
/// let err = model.try_forward(&Tensor::randn(&[32, 100])).unwrap_err();
/// assert!(err.to_string().contains("[B, IN] = [B, 784], got [32, 100]"));
/// ```
pub use tapir_macros::model;
pub use tapir_runtime::*;

/// The reference of the `model!` macro: its grammar, shape rules, layer
/// table and errors. Its examples run as doctests.
#[doc = include_str!("../docs/model-macro.md")]
pub mod model_macro_reference {}

/// The names a training script uses.
pub mod prelude {
    pub use crate::model;
    pub use tapir_runtime::nn::{self, Forward, Module, cross_entropy};
    pub use tapir_runtime::optim::{self, LrScheduler, Optimizer, clip_grad_norm_};
    pub use tapir_runtime::{
        Conv2dOptions, DType, Device, Generator, NoGradGuard, Tensor, enable_grad, manual_seed,
        no_grad, set_num_threads,
    };
}
