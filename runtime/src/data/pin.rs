//! Pinning whole batches (`DataLoaderOptions::pin_memory`): PyTorch's
//! loader pins every tensor in a batch, through lists and tuples, and
//! leaves other values as they are; [`PinMemory`] is that walk.

use crate::Tensor;
use crate::error::Result;

/// A batch whose tensors can be moved to pinned memory (the loader's
/// `pin_memory`). Implemented for tensors, `Vec`s and tuples of pinnable
/// values and plain numbers. A custom batch type opts in with an empty
/// `impl PinMemory for MyBatch {}`, which leaves it as it is (as PyTorch
/// does for a type without a `pin_memory` method), or pins its tensors by
/// implementing [`pinned`](PinMemory::pinned).
///
/// ```
/// use tapir_runtime::data::PinMemory;
/// use tapir_runtime::{Tensor, cuda};
/// let batch = (Tensor::zeros(&[4, 3]), vec![Tensor::ones(&[4])]);
/// match batch.pinned() {
///     Ok((x, ys)) => assert!(x.is_pinned() && ys[0].is_pinned()),
///     Err(e) => assert!(!cuda::is_available(), "{e}"),
/// }
/// ```
pub trait PinMemory: Sized {
    /// The batch with every tensor in it pinned (`Tensor::pin_memory`).
    fn pinned(self) -> Result<Self> {
        Ok(self)
    }
}

impl PinMemory for Tensor {
    fn pinned(self) -> Result<Self> {
        self.pin_memory()
    }
}

impl<T: PinMemory> PinMemory for Vec<T> {
    fn pinned(self) -> Result<Self> {
        self.into_iter().map(PinMemory::pinned).collect()
    }
}

impl<T: PinMemory> PinMemory for Option<T> {
    fn pinned(self) -> Result<Self> {
        self.map(PinMemory::pinned).transpose()
    }
}

impl<A: PinMemory, B: PinMemory> PinMemory for (A, B) {
    fn pinned(self) -> Result<Self> {
        Ok((self.0.pinned()?, self.1.pinned()?))
    }
}

impl<A: PinMemory, B: PinMemory, C: PinMemory> PinMemory for (A, B, C) {
    fn pinned(self) -> Result<Self> {
        Ok((self.0.pinned()?, self.1.pinned()?, self.2.pinned()?))
    }
}

impl PinMemory for i64 {}
impl PinMemory for usize {}
impl PinMemory for f32 {}
impl PinMemory for f64 {}
impl PinMemory for String {}
