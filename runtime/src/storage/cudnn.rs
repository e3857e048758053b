//! The seam's entry points for convolution on cuDNN: each returns `None`
//! where cuDNN does not run it (a CPU storage, a build without `cuda`,
//! cuDNN absent or disabled, a dtype other than f32/f16/bf16), and the op
//! then takes the im2col path. Inputs are contiguous NCHW views at offset
//! 0 (the op makes them so).

use super::Storage;
use tapir_kernels::{ConvSpec, Layout};

/// Which of the three convolutions to run.
#[derive(Clone, Copy)]
enum Pass {
    Forward,
    BackwardInput,
    BackwardWeight,
}

#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn run(
    pass: Pass,
    a: (&Storage, &Layout),
    b: (&Storage, &Layout),
    s: &ConvSpec,
) -> Option<Storage> {
    use crate::dtype::DType;
    use tapir_kernels::cuda::cudnn::{ConvDtype, ConvPass, cudnn_present};
    let dtype = match (a.0.dtype(), b.0.dtype()) {
        (DType::F32, DType::F32) => ConvDtype::F32,
        (DType::F16, DType::F16) => ConvDtype::F16,
        (DType::BF16, DType::BF16) => ConvDtype::BF16,
        _ => return None,
    };
    let (Storage::Cuda(x), Storage::Cuda(y)) = (a.0, b.0) else {
        return None;
    };
    let dense = |l: &Layout| l.contiguous_offset() == Some(0);
    // A backward follows its forward onto cuDNN even if it was disabled since.
    let enabled = !matches!(pass, Pass::Forward) || crate::cuda::cudnn::enabled();
    if !(dense(a.1) && dense(b.1) && enabled && cudnn_present()) {
        return None;
    }
    let dev = x.buf.device();
    let tf32 = crate::cuda::cudnn::allow_tf32();
    let (pass, what) = match pass {
        Pass::Forward => (ConvPass::Forward, "conv2d"),
        Pass::BackwardInput => (ConvPass::BackwardInput, "conv2d backward (input)"),
        Pass::BackwardWeight => (ConvPass::BackwardWeight, "conv2d backward (weight)"),
    };
    let out = dev.conv2d(pass, dtype, s, (&x.buf, &y.buf), tf32);
    let buf = out.unwrap_or_else(|e| super::cuda::fail(what, e));
    Some(Storage::Cuda(super::cuda::CudaStorage {
        buf,
        dtype: x.dtype,
    }))
}

#[cfg(not(any(feature = "cuda", feature = "cuda12")))]
fn run(_: Pass, _: (&Storage, &Layout), _: (&Storage, &Layout), _: &ConvSpec) -> Option<Storage> {
    None
}

impl Storage {
    /// `conv2d(x, w)` without bias on cuDNN (`self` is `x`).
    pub fn cudnn_conv2d(
        &self,
        l: &Layout,
        w: (&Storage, &Layout),
        s: &ConvSpec,
    ) -> Option<Storage> {
        run(Pass::Forward, (self, l), w, s)
    }

    /// The input's gradient on cuDNN (`self` is the output's gradient).
    pub fn cudnn_conv2d_backward_input(
        &self,
        l: &Layout,
        w: (&Storage, &Layout),
        s: &ConvSpec,
    ) -> Option<Storage> {
        run(Pass::BackwardInput, (self, l), w, s)
    }

    /// The weight's gradient on cuDNN (`self` is the input `x`).
    pub fn cudnn_conv2d_backward_weight(
        &self,
        l: &Layout,
        dy: (&Storage, &Layout),
        s: &ConvSpec,
    ) -> Option<Storage> {
        run(Pass::BackwardWeight, (self, l), dy, s)
    }
}
