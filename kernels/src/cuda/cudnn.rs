//! 2-D convolution on cuDNN (`libcudnn.so.9`, loaded at run time): the
//! forward pass and both gradients, for f32, f16 and bf16 in NCHW. The CPU
//! twin, and the fallback where cuDNN is absent, is the runtime's im2col +
//! GEMM lowering.
//!
//! As PyTorch: the compute type is f32 for every dtype (f16 and bf16 use
//! tensor cores), f32 may use TF32 tensor cores unless the caller says not
//! (`torch.backends.cudnn.allow_tf32`, on by default there), and the
//! algorithm is cuDNN's heuristic first choice (`benchmark=False`), picked
//! once per shape. cuDNN handles are not thread-safe, so each thread keeps
//! its own per device, bound to the device's one stream.

use super::CudaBuffer;
use super::device::{CudaDevice, CudaResult};
use super::error::CudaError;
use crate::{ConvPass, ConvSpec};
use cudarc::cudnn::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, CudnnDataType,
    FilterDescriptor, TensorDescriptor, sys,
};
use cudarc::driver::DeviceRepr;
use half::{bf16, f16};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

/// Whether the cuDNN library can be loaded (looked up once: a failed
/// lookup searches the library path for each of cudarc's candidate names).
pub fn cudnn_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen libcudnn.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// cuDNN's version (`torch.backends.cudnn.version()`, e.g. 91002), or
/// `None` where the library is absent.
pub fn cudnn_version() -> Option<usize> {
    cudnn_present().then(cudarc::cudnn::result::get_version)
}

/// The element types cuDNN convolves here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvDtype {
    /// f32, optionally on TF32 tensor cores.
    F32,
    /// f16, accumulated in f32.
    F16,
    /// bf16, accumulated in f32.
    BF16,
}

/// A dtype cuDNN takes, with the 1 and 0 of its scaling factors.
trait Elem: CudnnDataType + DeviceRepr + Copy {
    const ONE: Self;
    const ZERO: Self;
}
impl Elem for f32 {
    const ONE: f32 = 1.0;
    const ZERO: f32 = 0.0;
}
impl Elem for f16 {
    const ONE: f16 = f16::ONE;
    const ZERO: f16 = f16::ZERO;
}
impl Elem for bf16 {
    const ONE: bf16 = bf16::ONE;
    const ZERO: bf16 = bf16::ZERO;
}

/// The algorithm cuDNN's heuristics chose per shape, as its raw number.
type AlgoKey = (ConvPass, ConvSpec, ConvDtype, bool);
fn algorithms() -> &'static Mutex<HashMap<AlgoKey, u32>> {
    static ALGOS: OnceLock<Mutex<HashMap<AlgoKey, u32>>> = OnceLock::new();
    ALGOS.get_or_init(Mutex::default)
}

/// The cached algorithm for `key`, or `pick`'s choice, cached.
fn algorithm<A: Copy>(
    key: AlgoKey,
    pick: impl FnOnce() -> Result<A, cudarc::cudnn::CudnnError>,
    to_raw: fn(A) -> u32,
    from_raw: fn(u32) -> A,
) -> Result<A, cudarc::cudnn::CudnnError> {
    let cached = algorithms()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .copied();
    if let Some(raw) = cached {
        return Ok(from_raw(raw));
    }
    let algo = pick()?;
    algorithms()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, to_raw(algo));
    Ok(algo)
}

thread_local! {
    static HANDLES: RefCell<HashMap<usize, Arc<Cudnn>>> = RefCell::new(HashMap::new());
}

/// This thread's cuDNN handle for `dev`, on the device's stream.
fn handle(dev: &CudaDevice) -> CudaResult<Arc<Cudnn>> {
    if !cudnn_present() {
        return Err(CudaError::MissingLibrary {
            device: dev.ordinal(),
            library: "cuDNN (libcudnn.so.9)",
        });
    }
    dev.bind()?;
    HANDLES.with(|handles| {
        if let Some(h) = handles.borrow().get(&dev.ordinal()) {
            return Ok(h.clone());
        }
        let h = Cudnn::new(dev.stream().clone()).map_err(|e| dev.err("creating cuDNN", e))?;
        handles.borrow_mut().insert(dev.ordinal(), h.clone());
        Ok(h)
    })
}

/// The descriptors of one convolution.
struct Descriptors<T: Elem> {
    x: TensorDescriptor<T>,
    w: FilterDescriptor<T>,
    y: TensorDescriptor<T>,
    conv: ConvDescriptor<f32>,
}

fn descriptors<T: Elem>(
    cudnn: &Arc<Cudnn>,
    s: &ConvSpec,
    allow_tf32: bool,
) -> Result<Descriptors<T>, cudarc::cudnn::CudnnError> {
    let i = |v: usize| v as std::ffi::c_int;
    let nchw = sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
    let g = &s.geometry;
    let (oh, ow) = g.out_hw().unwrap_or((0, 0));
    let x = cudnn.create_4d_tensor::<T>(nchw, [i(g.n), i(g.c), i(g.h), i(g.w)])?;
    let w = cudnn.create_4d_filter::<T>(
        nchw,
        [i(s.oc), i(g.c / s.groups), i(g.kernel.0), i(g.kernel.1)],
    )?;
    let y = cudnn.create_4d_tensor::<T>(nchw, [i(g.n), i(s.oc), i(oh), i(ow)])?;
    let mut conv = cudnn.create_conv2d::<f32>(
        [i(g.padding.0), i(g.padding.1)],
        [i(g.stride.0), i(g.stride.1)],
        [i(g.dilation.0), i(g.dilation.1)],
        sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
    )?;
    conv.set_group_count(i(s.groups))?;
    let math = match T::DATA_TYPE {
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT if !allow_tf32 => {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        }
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        _ => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
    };
    conv.set_math_type(math)?;
    Ok(Descriptors { x, w, y, conv })
}

/// A workspace of `bytes` from the caching allocator (freed blocks are
/// reused in stream order, so dropping it after the launch is safe).
fn workspace(dev: &Arc<CudaDevice>, bytes: usize) -> CudaResult<Option<CudaBuffer>> {
    (bytes > 0).then(|| dev.alloc(bytes)).transpose()
}

impl CudaDevice {
    /// One of the three convolutions on cuDNN, from contiguous NCHW buffers
    /// of `dtype`: `(a, b)` are `(x, w)` for [`ConvPass::Forward`] (giving
    /// `[n, oc, oh, ow]`), `(dy, w)` for [`ConvPass::BackwardInput`] (giving
    /// `[n, c, h, w]`) and `(x, dy)` for [`ConvPass::BackwardWeight`]
    /// (giving `[oc, c / groups, kh, kw]`). No bias: the caller adds it.
    pub fn conv2d(
        self: &Arc<Self>,
        pass: ConvPass,
        dtype: ConvDtype,
        spec: &ConvSpec,
        (a, b): (&CudaBuffer, &CudaBuffer),
        allow_tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        match dtype {
            ConvDtype::F32 => self.convolve::<f32>(pass, spec, a, b, allow_tf32),
            ConvDtype::F16 => self.convolve::<f16>(pass, spec, a, b, allow_tf32),
            ConvDtype::BF16 => self.convolve::<bf16>(pass, spec, a, b, allow_tf32),
        }
    }

    fn convolve<T: Elem>(
        self: &Arc<Self>,
        pass: ConvPass,
        s: &ConvSpec,
        a: &CudaBuffer,
        b: &CudaBuffer,
        tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        let what = match pass {
            ConvPass::Forward => "cuDNN convolution forward",
            ConvPass::BackwardInput => "cuDNN convolution backward (input)",
            ConvPass::BackwardWeight => "cuDNN convolution backward (weight)",
        };
        let fail = |e| self.err(what, e);
        let cudnn = handle(self)?;
        let d = descriptors::<T>(&cudnn, s, tf32).map_err(fail)?;
        let (x, w, y) = s.lens();
        let (a_len, b_len, out_len) = match pass {
            ConvPass::Forward => (x, w, y),
            ConvPass::BackwardInput => (y, w, x),
            ConvPass::BackwardWeight => (x, y, w),
        };
        let mut out = self.alloc(out_len * std::mem::size_of::<T>())?;
        let (av, bv) = (a.typed::<T>(a_len), b.typed::<T>(b_len));
        let mut ov = out.typed_mut::<T>(out_len);
        let key = (pass, *s, dtype_of::<T>(), tf32);
        let scale = (T::ONE, T::ZERO);
        // SAFETY (the three launches): the descriptors describe exactly
        // these contiguous NCHW buffers of `T` (their sizes checked by the
        // views), the workspace has the bytes cuDNN asked for, and the
        // handle runs on this device's stream.
        match pass {
            ConvPass::Forward => {
                let (conv, x, w, y) = (&d.conv, &d.x, &d.w, &d.y);
                let op = ConvForward { conv, x, w, y };
                let algo = algorithm(key, || op.pick_algorithm(), |a| a as u32, fwd_algo);
                let algo = algo.map_err(fail)?;
                let mut ws = workspace(self, op.get_workspace_size(algo).map_err(fail)?)?;
                let ws = ws.as_mut().map(CudaBuffer::block_mut);
                // SAFETY: see above.
                unsafe { op.launch(algo, ws, scale, &av, &bv, &mut ov) }.map_err(fail)?;
            }
            ConvPass::BackwardInput => {
                let (conv, dx, w, dy) = (&d.conv, &d.x, &d.w, &d.y);
                let op = ConvBackwardData { conv, dx, w, dy };
                let algo = algorithm(key, || op.pick_algorithm(), |a| a as u32, data_algo);
                let algo = algo.map_err(fail)?;
                let mut ws = workspace(self, op.get_workspace_size(algo).map_err(fail)?)?;
                let ws = ws.as_mut().map(CudaBuffer::block_mut);
                // SAFETY: see above.
                unsafe { op.launch(algo, ws, scale, &mut ov, &bv, &av) }.map_err(fail)?;
            }
            ConvPass::BackwardWeight => {
                let (conv, x, dw, dy) = (&d.conv, &d.x, &d.w, &d.y);
                let op = ConvBackwardFilter { conv, x, dw, dy };
                let algo = algorithm(key, || op.pick_algorithm(), |a| a as u32, filter_algo);
                let algo = algo.map_err(fail)?;
                let mut ws = workspace(self, op.get_workspace_size(algo).map_err(fail)?)?;
                let ws = ws.as_mut().map(CudaBuffer::block_mut);
                // SAFETY: see above.
                unsafe { op.launch(algo, ws, scale, &av, &mut ov, &bv) }.map_err(fail)?;
            }
        }
        super::device::count_launch();
        Ok(out)
    }
}

fn dtype_of<T: Elem>() -> ConvDtype {
    match T::DATA_TYPE {
        sys::cudnnDataType_t::CUDNN_DATA_HALF => ConvDtype::F16,
        sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16 => ConvDtype::BF16,
        _ => ConvDtype::F32,
    }
}

/// The algorithm enums back from the raw numbers they were cached as. Each
/// lists every algorithm cuDNN 9 has; a number not listed cannot have been
/// cached (it came from the same enum), and falls back to the first.
fn fwd_algo(raw: u32) -> sys::cudnnConvolutionFwdAlgo_t {
    use sys::cudnnConvolutionFwdAlgo_t::*;
    [
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
    ]
    .into_iter()
    .find(|&a| a as u32 == raw)
    .unwrap_or(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)
}

fn data_algo(raw: u32) -> sys::cudnnConvolutionBwdDataAlgo_t {
    use sys::cudnnConvolutionBwdDataAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
    ]
    .into_iter()
    .find(|&a| a as u32 == raw)
    .unwrap_or(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
}

fn filter_algo(raw: u32) -> sys::cudnnConvolutionBwdFilterAlgo_t {
    use sys::cudnnConvolutionBwdFilterAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
    ]
    .into_iter()
    .find(|&a| a as u32 == raw)
    .unwrap_or(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_algorithms_come_back_as_themselves() {
        use sys::cudnnConvolutionBwdFilterAlgo_t as F;
        use sys::cudnnConvolutionFwdAlgo_t as Fw;
        for a in [
            Fw::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
            Fw::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
        ] {
            assert_eq!(fwd_algo(a as u32), a);
        }
        let a = F::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
        assert_eq!(filter_algo(a as u32), a);
        let d = sys::cudnnConvolutionBwdDataAlgo_t::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        assert_eq!(data_algo(d as u32), d);
    }

    #[test]
    fn without_libcudnn_there_is_no_version() {
        if cudnn_present() {
            println!("SKIPPED: libcudnn is present");
            return;
        }
        assert_eq!(cudnn_version(), None);
    }
}
