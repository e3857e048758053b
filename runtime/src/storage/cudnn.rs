//! The seam's entry points for convolution on cuDNN: whether cuDNN runs a
//! convolution of two storages (both on one GPU, f32/f16/bf16, cuDNN
//! present and enabled), and the three convolutions themselves, each
//! `None` where cuDNN does not run it; the op then takes the im2col path.
//! Inputs are contiguous NCHW views at offset 0 (the op makes them so).

use super::Storage;
use tapir_kernels::{ConvPass, ConvSpec, Layout};

#[cfg(any(feature = "cuda", feature = "cuda12"))]
mod on_gpu {
    use super::*;
    use crate::dtype::DType;
    use tapir_kernels::cuda::cudnn::{ConvDtype, cudnn_present};

    /// cuDNN's dtype for two CUDA storages on one device, where it has one.
    pub(super) fn conv_dtype(a: &Storage, b: &Storage) -> Option<ConvDtype> {
        let dtype = match (a.dtype(), b.dtype()) {
            (DType::F32, DType::F32) => ConvDtype::F32,
            (DType::F16, DType::F16) => ConvDtype::F16,
            (DType::BF16, DType::BF16) => ConvDtype::BF16,
            _ => return None,
        };
        let on_gpu = matches!((a, b), (Storage::Cuda(_), Storage::Cuda(_)));
        (on_gpu && a.device() == b.device() && cudnn_present()).then_some(dtype)
    }

    pub(super) fn run(
        pass: ConvPass,
        a: (&Storage, &Layout),
        b: (&Storage, &Layout),
        s: &ConvSpec,
    ) -> Option<Storage> {
        let dtype = conv_dtype(a.0, b.0)?;
        let dense = |l: &Layout| l.contiguous_offset() == Some(0);
        let (Storage::Cuda(x), Storage::Cuda(y)) = (a.0, b.0) else {
            return None;
        };
        if !(dense(a.1) && dense(b.1)) {
            return None;
        }
        let tf32 = crate::cuda::cudnn::allow_tf32();
        let out = x
            .buf
            .device()
            .conv2d(pass, dtype, s, (&x.buf, &y.buf), tf32);
        let buf = out.unwrap_or_else(|e| super::super::cuda::fail("conv2d", e));
        Some(Storage::Cuda(super::super::cuda::CudaStorage {
            buf,
            dtype: x.dtype,
        }))
    }
}

impl Storage {
    /// Whether a convolution of this input by weight `w` runs on cuDNN:
    /// both on one GPU in f32, f16 or bf16, with cuDNN present and enabled.
    pub fn takes_cudnn_conv(&self, w: &Storage) -> bool {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            crate::cuda::cudnn::enabled() && on_gpu::conv_dtype(self, w).is_some()
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        {
            let _ = w;
            false
        }
    }

    /// One of the three convolutions on cuDNN: `(self, other)` are `(x, w)`
    /// forward, `(dy, w)` for the input's gradient and `(x, dy)` for the
    /// weight's. A backward runs wherever its forward did, even if cuDNN
    /// was disabled since; `None` where cuDNN cannot run it.
    pub fn cudnn_conv2d(
        &self,
        pass: ConvPass,
        l: &Layout,
        other: (&Storage, &Layout),
        s: &ConvSpec,
    ) -> Option<Storage> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            on_gpu::run(pass, (self, l), other, s)
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        {
            let _ = (pass, l, other, s);
            None
        }
    }
}
