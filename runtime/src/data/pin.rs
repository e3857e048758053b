//! Pinning whole batches (`DataLoaderOptions::pin_memory`): PyTorch's
//! loader pins every tensor in a batch, through lists and tuples, and
//! leaves other values as they are; [`PinMemory`] is that walk. Pinning
//! one tensor (`Tensor::pin_memory`) is here too.

use crate::error::Result;
use crate::{Device, Tensor};

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

impl Tensor {
    /// A contiguous copy of this CPU tensor in page-locked (pinned) host
    /// memory, which [`to`](Tensor::to) copies to a GPU by DMA, without a
    /// staging copy (`Tensor.pin_memory()`); the tensor itself if it is
    /// pinned already. Gradient flows back unchanged. Pinned buffers that
    /// drop are kept for the next pin of the same dtype and size.
    ///
    /// `Err` when no GPU can be used (pinning needs the CUDA driver).
    /// Panics on a tensor that is not on the CPU.
    ///
    /// ```
    /// use tapir_runtime::{Tensor, cuda};
    /// let x = Tensor::ones(&[2, 3]);
    /// match x.pin_memory() {
    ///     Ok(p) => assert!(p.is_pinned() && !x.is_pinned()),
    ///     Err(e) => assert!(!cuda::is_available(), "{e}"),
    /// }
    /// ```
    pub fn pin_memory(&self) -> Result<Tensor> {
        assert!(
            self.device() == Device::Cpu,
            "pin_memory: only CPU tensors can be pinned, and this {:?} {} tensor is on {}",
            self.shape(),
            self.dtype(),
            self.device()
        );
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let storage = self.read().pinned_copy(self.layout())?;
        let out = Tensor::from_storage(storage, self.shape());
        Ok(Tensor::record(out, "PinMemoryBackward0", &[self], || {
            |g: &Tensor, _: &[bool]| vec![Some(g.clone())]
        }))
    }

    /// Whether the tensor's memory is page-locked host memory
    /// (`Tensor.is_pinned()`); always false on a GPU and without CUDA.
    pub fn is_pinned(&self) -> bool {
        self.read().is_pinned()
    }
}
