//! `tapir-kernels`: raw compute over buffers and layouts.
//!
//! Every function here takes plain slices plus a [`Layout`] (shape, strides,
//! offset) and returns fresh buffers. Nothing here knows about autograd: the
//! runtime composes these kernels into differentiable ops.
//!
//! ```
//! use tapir_kernels::{Layout, cpu};
//! let a = [1.0f32, 2.0, 3.0, 4.0];
//! let l = Layout::contiguous(&[2, 2]);
//! let t = l.transpose(0, 1);
//! assert_eq!(cpu::copy_strided(&a, &t), vec![1.0, 3.0, 2.0, 4.0]);
//! ```

#![warn(missing_docs)]

pub mod alloc;
pub mod cpu;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
pub mod cuda;
pub mod elementwise;
mod float;
mod geometry;
mod integer;
pub(crate) mod layout;
pub mod optim;
pub mod program;
pub mod special;
mod spin;
pub mod stats;
pub mod threads;
mod vecmath;

pub use cpu::ScatterMode;
pub use cpu::linalg::{Decomposition, Triangular};
pub use float::Float;
pub use geometry::{Conv2dGeometry, ConvPass, ConvSpec};
pub use layout::{Layout, ReductionOrder, contiguous_strides};
