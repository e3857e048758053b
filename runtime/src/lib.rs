//! `tapir-runtime`: tensors, define-by-run autograd and ops.
//!
//! ```
//! use tapir_runtime::Tensor;
//! let w = Tensor::randn(&[3, 2]).requires_grad_(true);
//! let x = Tensor::ones(&[4, 3]);
//! let loss = x.matmul(&w).relu().mean();
//! loss.backward();
//! assert_eq!(w.grad().unwrap().shape(), &[3, 2]);
//! ```

#![warn(missing_docs)]

pub mod amp;
pub mod autograd;
pub mod checkpoint;
pub mod compile;
pub mod cuda;
pub mod data;
mod device;
mod display;
pub mod distributed;
mod dtype;
pub mod error;
pub mod linalg;
#[doc(hidden)]
pub mod macro_support;
pub mod memory;
pub mod nn;
pub mod onnx;
mod ops;
pub mod optim;
pub mod profiler;
mod random;
pub mod special;
mod storage;
mod tensor;
mod trace;

pub use autograd::{
    EnableGradGuard, GradcheckError, NoGradGuard, Region, checkpoint, checkpoint_sequential,
    checkpoint_with, enable_grad, gradcheck, is_grad_enabled, no_grad,
};
pub use checkpoint::{Checkpoint, load, save};
pub use compile::{CompileOptions, Compiled, CompiledStep, compile, compile_step};
pub use device::Device;
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use ops::conv::Conv2dOptions;
pub use ops::creation::ArangeArgs;
pub use ops::division::RoundingMode;
pub use ops::scatter::ScatterReduce;
pub use ops::structured::Indexing;
pub use random::{DeviceGenerator, Generator, default_generator, device_generator, manual_seed};
pub use tensor::Tensor;

/// Sets the number of CPU threads every kernel uses (`torch.set_num_threads`).
pub fn set_num_threads(n: usize) {
    tapir_kernels::threads::set_num_threads(n);
}

/// The number of CPU threads kernels use (`torch.get_num_threads`).
pub fn get_num_threads() -> usize {
    tapir_kernels::threads::num_threads()
}
