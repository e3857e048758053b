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
