//! The storage operations that exist only on a GPU: each returns `None` or
//! `false` on the CPU, whose ops run their own kernels instead. Part of the
//! device seam (with `mod.rs`): the only other place that matches on the
//! device.

use super::Storage;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use crate::dtype::DType;
use tapir_kernels::Layout;
use tapir_kernels::cpu::{AdamStep, RmspropStep, SgdStep};

/// A fused GPU optimizer step: the CPU twin's hyper-parameters, and for
/// SGD whether the momentum buffer starts this step.
#[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
pub(crate) enum GpuStep {
    Adam(AdamStep),
    Sgd(SgdStep, bool),
    Rmsprop(RmspropStep),
}

/// Where a GPU gather, index_select or scatter_add goes along its dim:
/// `inner` is the product of the index's (output's) dims after it, `len` its
/// size along it, `stride` the indexed tensor's stride there and `size` its
/// size there, which the kernel checks every index against (an error names
/// `op` and is reported at the next host read).
#[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexGeom {
    pub inner: usize,
    pub len: usize,
    pub stride: usize,
    pub size: usize,
    pub op: &'static str,
}

impl Storage {
    /// im2col (`pad` for taps in the padding) of a dense f32 `[n, c, h, w]`
    /// GPU storage; `None` on the CPU.
    pub fn im2col_gpu(&self, g: &tapir_kernels::cpu::Conv2dGeometry, pad: f32) -> Option<Storage> {
        match self {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => Some(Storage::Cuda(
                s.im2col(g, pad)?
                    .unwrap_or_else(|e| cuda::fail("im2col", e)),
            )),
            _ => {
                let _ = (g, pad);
                None
            }
        }
    }

    /// col2im of dense f32 GPU columns; `None` on the CPU.
    pub fn col2im_gpu(&self, g: &tapir_kernels::cpu::Conv2dGeometry) -> Option<Storage> {
        match self {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => Some(Storage::Cuda(
                s.col2im(g)?.unwrap_or_else(|e| cuda::fail("col2im", e)),
            )),
            _ => {
                let _ = g;
                None
            }
        }
    }

    /// LayerNorm of a dense GPU storage (rows of `n`) with an optional affine
    /// of its dtype: output, f32 mean and 1/std per row. `None` on the CPU.
    pub fn layer_norm_gpu(
        &self,
        affine: Option<(&Storage, &Storage)>,
        n: usize,
        eps: f64,
    ) -> Option<(Storage, Storage, Storage)> {
        match self {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(x) => {
                let affine = match affine {
                    Some((Storage::Cuda(w), Storage::Cuda(b))) => Some((w, b)),
                    None => None,
                    _ => return None,
                };
                let (y, m, r) = x
                    .layer_norm(affine, n, eps)?
                    .unwrap_or_else(|e| cuda::fail("layer_norm", e));
                Some((Storage::Cuda(y), Storage::Cuda(m), Storage::Cuda(r)))
            }
            _ => {
                let _ = (affine, n, eps);
                None
            }
        }
    }

    /// A fused optimizer update on a GPU for dense parameter, gradient and
    /// state storages of `n` elements, all of one float dtype (f32, f16 or
    /// bf16); `false` where it cannot run there (the CPU, f64), and the
    /// caller updates on the host.
    pub fn optim_step_gpu(
        p: &mut Storage,
        g: &Storage,
        states: &mut [&mut Storage],
        n: usize,
        step: GpuStep,
    ) -> bool {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            use tapir_kernels::cuda::launch;
            let (Storage::Cuda(p), Storage::Cuda(g)) = (p, g) else {
                return false;
            };
            let dtype = p.dtype;
            let Some(name) = cuda::kernel_dtype(dtype).filter(|_| g.dtype == dtype) else {
                return false;
            };
            let mut bufs = Vec::with_capacity(states.len());
            for s in states.iter_mut() {
                match &mut **s {
                    Storage::Cuda(s) if s.dtype == dtype => bufs.push(&mut s.buf),
                    _ => return false,
                }
            }
            let r = match step {
                GpuStep::Adam(h) => launch::adam(&mut p.buf, &g.buf, &mut bufs, n, name, &h),
                GpuStep::Sgd(h, first) => {
                    let buf = bufs.into_iter().next();
                    launch::sgd(&mut p.buf, &g.buf, buf, n, name, &h, first)
                }
                GpuStep::Rmsprop(h) => launch::rmsprop(&mut p.buf, &g.buf, &mut bufs, n, name, &h),
            };
            r.unwrap_or_else(|e| cuda::fail("optimizer step", e));
            true
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        {
            let _ = (p, g, states, n, step);
            false
        }
    }

    /// `torch.gather` (`per_element`) or `index_select` on a GPU: `view` is
    /// this storage's strides at the output's shape, `idx` a contiguous i64
    /// storage (checked on the device). `None` on the CPU, whose ops run
    /// their own kernels.
    pub fn gather_gpu(
        &self,
        view: &Layout,
        geom: IndexGeom,
        idx: &Storage,
        per_element: bool,
    ) -> Option<Storage> {
        match (self, idx) {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(s), Storage::Cuda(i)) => Some(Storage::Cuda(
                s.gather(view, geom, i, per_element)
                    .unwrap_or_else(|e| cuda::fail("gather", e)),
            )),
            _ => {
                let _ = (view, geom, per_element);
                None
            }
        }
    }

    /// Gather's adjoint on a GPU into this contiguous f32 storage; `false` on the CPU.
    pub fn scatter_add_gpu(
        &mut self,
        view: &Layout,
        geom: IndexGeom,
        src: &Storage,
        ls: &Layout,
        idx: &Storage,
    ) -> bool {
        match (self, src, idx) {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s), Storage::Cuda(i)) if d.dtype == DType::F32 => {
                d.scatter_add(view, geom, s, ls, i)
                    .unwrap_or_else(|e| cuda::fail("scatter_add", e));
                true
            }
            _ => {
                let _ = (view, geom, ls);
                false
            }
        }
    }

    /// index_select's adjoint on a GPU into this contiguous f32 `[outer,
    /// size, inner]` storage from a contiguous f32 `[outer, len, inner]` one;
    /// `false` on the CPU.
    pub fn index_add_gpu(
        &mut self,
        geom: (usize, usize, usize),
        src: &Storage,
        idx: &Storage,
        len: usize,
    ) -> bool {
        match (self, src, idx) {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s), Storage::Cuda(i)) if d.dtype == DType::F32 => {
                d.index_add(geom, s, i, len)
                    .unwrap_or_else(|e| cuda::fail("index_select backward", e));
                true
            }
            _ => {
                let _ = (geom, len);
                false
            }
        }
    }
}
