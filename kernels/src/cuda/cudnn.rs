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
use crate::ConvSpec;
use cudarc::cudnn::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, CudnnDataType,
    FilterDescriptor, TensorDescriptor, sys,
};
use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr};
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

/// One of the three convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pass {
    Forward,
    BackwardInput,
    BackwardWeight,
}

/// The algorithm cuDNN's heuristics chose per shape, as its raw number.
type AlgoKey = (Pass, ConvSpec, ConvDtype, bool);
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

/// The first `len` elements of `buf` as `T`.
fn view<T: DeviceRepr>(buf: &CudaBuffer, len: usize) -> CudaView<'_, T> {
    assert!(
        len * std::mem::size_of::<T>() <= buf.bytes(),
        "cuDNN: {len} elements of {} bytes from a buffer of {}",
        std::mem::size_of::<T>(),
        buf.bytes()
    );
    // SAFETY: the view lies inside the block (checked above), and the runtime
    // passes the dtype the buffer was written as.
    unsafe { buf.block().transmute::<T>(len) }.expect("the block is large enough")
}

/// The first `len` elements of `buf` as `T`, writable.
fn view_mut<T: DeviceRepr>(buf: &mut CudaBuffer, len: usize) -> CudaViewMut<'_, T> {
    assert!(
        len * std::mem::size_of::<T>() <= buf.bytes(),
        "cuDNN: {len} elements of {} bytes into a buffer of {}",
        std::mem::size_of::<T>(),
        buf.bytes()
    );
    // SAFETY: as in `view`; the mutable borrow makes it the only view.
    unsafe { buf.block_mut().transmute_mut::<T>(len) }.expect("the block is large enough")
}

/// A workspace of `bytes` from the caching allocator (freed blocks are
/// reused in stream order, so dropping it after the launch is safe).
fn workspace(dev: &Arc<CudaDevice>, bytes: usize) -> CudaResult<Option<CudaBuffer>> {
    (bytes > 0).then(|| dev.alloc(bytes)).transpose()
}

impl CudaDevice {
    /// `conv2d(x, w)` without bias: `[n, oc, oh, ow]` from contiguous `x`
    /// and `w` of `dtype`.
    pub fn conv2d_forward(
        self: &Arc<Self>,
        dtype: ConvDtype,
        spec: &ConvSpec,
        x: &CudaBuffer,
        w: &CudaBuffer,
        allow_tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        match dtype {
            ConvDtype::F32 => self.forward::<f32>(spec, x, w, allow_tf32),
            ConvDtype::F16 => self.forward::<f16>(spec, x, w, allow_tf32),
            ConvDtype::BF16 => self.forward::<bf16>(spec, x, w, allow_tf32),
        }
    }

    /// The input's gradient `[n, c, h, w]` from the output's `dy`.
    pub fn conv2d_backward_input(
        self: &Arc<Self>,
        dtype: ConvDtype,
        spec: &ConvSpec,
        dy: &CudaBuffer,
        w: &CudaBuffer,
        allow_tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        match dtype {
            ConvDtype::F32 => self.backward_input::<f32>(spec, dy, w, allow_tf32),
            ConvDtype::F16 => self.backward_input::<f16>(spec, dy, w, allow_tf32),
            ConvDtype::BF16 => self.backward_input::<bf16>(spec, dy, w, allow_tf32),
        }
    }

    /// The weight's gradient `[oc, c / groups, kh, kw]` from `x` and `dy`.
    pub fn conv2d_backward_weight(
        self: &Arc<Self>,
        dtype: ConvDtype,
        spec: &ConvSpec,
        x: &CudaBuffer,
        dy: &CudaBuffer,
        allow_tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        match dtype {
            ConvDtype::F32 => self.backward_weight::<f32>(spec, x, dy, allow_tf32),
            ConvDtype::F16 => self.backward_weight::<f16>(spec, x, dy, allow_tf32),
            ConvDtype::BF16 => self.backward_weight::<bf16>(spec, x, dy, allow_tf32),
        }
    }

    fn forward<T: Elem>(
        self: &Arc<Self>,
        s: &ConvSpec,
        x: &CudaBuffer,
        w: &CudaBuffer,
        tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        let fail = |e| self.err("cuDNN convolution forward", e);
        let cudnn = handle(self)?;
        let (in_len, w_len, out_len) = s.lens();
        let d = descriptors::<T>(&cudnn, s, tf32).map_err(fail)?;
        let op = ConvForward {
            conv: &d.conv,
            x: &d.x,
            w: &d.w,
            y: &d.y,
        };
        let key = (Pass::Forward, *s, dtype_of::<T>(), tf32);
        let algo = algorithm(key, || op.pick_algorithm(), |a| a as u32, fwd_algo).map_err(fail)?;
        let bytes = op.get_workspace_size(algo).map_err(fail)?;
        let mut ws = workspace(self, bytes)?;
        let mut y = self.alloc(out_len * std::mem::size_of::<T>())?;
        let (xv, wv) = (view::<T>(x, in_len), view::<T>(w, w_len));
        let mut yv = view_mut::<T>(&mut y, out_len);
        // SAFETY: the descriptors describe exactly these contiguous NCHW
        // buffers of `T` (sizes checked by the views), the workspace has the
        // bytes cuDNN asked for, and the handle runs on this device's stream.
        unsafe {
            op.launch(
                algo,
                ws.as_mut().map(CudaBuffer::block_mut),
                (T::ONE, T::ZERO),
                &xv,
                &wv,
                &mut yv,
            )
        }
        .map_err(fail)?;
        Ok(y)
    }

    fn backward_input<T: Elem>(
        self: &Arc<Self>,
        s: &ConvSpec,
        dy: &CudaBuffer,
        w: &CudaBuffer,
        tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        let fail = |e| self.err("cuDNN convolution backward (input)", e);
        let cudnn = handle(self)?;
        let (in_len, w_len, out_len) = s.lens();
        let d = descriptors::<T>(&cudnn, s, tf32).map_err(fail)?;
        let op = ConvBackwardData {
            conv: &d.conv,
            dx: &d.x,
            w: &d.w,
            dy: &d.y,
        };
        let key = (Pass::BackwardInput, *s, dtype_of::<T>(), tf32);
        let algo = algorithm(key, || op.pick_algorithm(), |a| a as u32, data_algo).map_err(fail)?;
        let bytes = op.get_workspace_size(algo).map_err(fail)?;
        let mut ws = workspace(self, bytes)?;
        let mut dx = self.alloc(in_len * std::mem::size_of::<T>())?;
        let (dyv, wv) = (view::<T>(dy, out_len), view::<T>(w, w_len));
        let mut dxv = view_mut::<T>(&mut dx, in_len);
        // SAFETY: as in `forward`: buffers of `T` as the descriptors say.
        unsafe {
            op.launch(
                algo,
                ws.as_mut().map(CudaBuffer::block_mut),
                (T::ONE, T::ZERO),
                &mut dxv,
                &wv,
                &dyv,
            )
        }
        .map_err(fail)?;
        Ok(dx)
    }

    fn backward_weight<T: Elem>(
        self: &Arc<Self>,
        s: &ConvSpec,
        x: &CudaBuffer,
        dy: &CudaBuffer,
        tf32: bool,
    ) -> CudaResult<CudaBuffer> {
        let fail = |e| self.err("cuDNN convolution backward (weight)", e);
        let cudnn = handle(self)?;
        let (in_len, w_len, out_len) = s.lens();
        let d = descriptors::<T>(&cudnn, s, tf32).map_err(fail)?;
        let op = ConvBackwardFilter {
            conv: &d.conv,
            x: &d.x,
            dw: &d.w,
            dy: &d.y,
        };
        let key = (Pass::BackwardWeight, *s, dtype_of::<T>(), tf32);
        let algo =
            algorithm(key, || op.pick_algorithm(), |a| a as u32, filter_algo).map_err(fail)?;
        let bytes = op.get_workspace_size(algo).map_err(fail)?;
        let mut ws = workspace(self, bytes)?;
        let mut dw = self.alloc(w_len * std::mem::size_of::<T>())?;
        let (xv, dyv) = (view::<T>(x, in_len), view::<T>(dy, out_len));
        let mut dwv = view_mut::<T>(&mut dw, w_len);
        // SAFETY: as in `forward`: buffers of `T` as the descriptors say.
        unsafe {
            op.launch(
                algo,
                ws.as_mut().map(CudaBuffer::block_mut),
                (T::ONE, T::ZERO),
                &xv,
                &mut dwv,
                &dyv,
            )
        }
        .map_err(fail)?;
        Ok(dw)
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
