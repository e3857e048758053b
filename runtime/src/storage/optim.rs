//! Fused optimizer updates through the device seam: one tensor at a time
//! (`optim_step`), or many at once (`optim_step_many`), which on a GPU
//! packs up to `launch::MULTI` tensors into each launch, as PyTorch's
//! default multi-tensor (`foreach`) optimizers on CUDA do. On the CPU each
//! tensor runs the same kernel as alone.

use super::Storage;
use super::cpu::CpuBuffer;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::{CudaStorage, fail, kernel_dtype};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use tapir_kernels::cuda::{CudaBuffer, CudaResult, launch};
use tapir_kernels::optim::OptimStep;

/// One tensor of a multi-tensor update: the parameter, its gradient and its
/// state, as [`Storage::optim_step`] takes them.
pub(crate) type OptimItem<'a> = (&'a mut Storage, &'a Storage, Vec<&'a mut Storage>);

impl Storage {
    /// One fused optimizer update of `p` (dense, whole buffer) with gradient
    /// `g` (dense, same dtype) and `state` (each dense, whole, same dtype) in
    /// the step's order. f16/bf16 compute in f32 and round each stored
    /// value once, as PyTorch's fused kernels.
    pub fn optim_step(p: &mut Storage, g: &Storage, state: &mut [&mut Storage], step: &OptimStep) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(pc), Storage::Cuda(gc)) = (&mut *p, g) {
            let n = state.len();
            let mut bufs = Vec::with_capacity(n);
            for s in state.iter_mut() {
                if let Storage::Cuda(c) = &mut **s {
                    bufs.push(c);
                }
            }
            if bufs.len() == n
                && let Some(r) = pc.optim_step(gc, &mut bufs, step)
            {
                return r.unwrap_or_else(|e| fail("optimizer step", e));
            }
        }
        let gh = g.host();
        let mut hosts: Vec<super::HostMut<'_>> = std::iter::once(p)
            .chain(state.iter_mut().map(|s| &mut **s))
            .map(|s| s.host_mut())
            .collect();
        let (ph, rest) = hosts.split_first_mut().expect("the parameter");
        let mut rest: Vec<&mut CpuBuffer> = rest.iter_mut().map(|h| &mut **h).collect();
        ph.optim_step(&gh, &mut rest, step);
    }

    /// The same update `step` of every item, each as [`Storage::optim_step`]
    /// would do it; on one GPU in one dtype, [`launch::MULTI`] tensors per
    /// launch.
    pub fn optim_step_many(items: &mut [OptimItem<'_>], step: &OptimStep) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Some(r) = CudaStorage::optim_step_many(items, step) {
            return r.unwrap_or_else(|e| fail("optimizer step", e));
        }
        for (p, g, state) in items.iter_mut() {
            Storage::optim_step(p, g, state, step);
        }
    }
}

#[cfg(any(feature = "cuda", feature = "cuda12"))]
impl CudaStorage {
    /// One fused optimizer update of this whole buffer (f32, f16, bf16;
    /// `None` for other dtypes).
    pub fn optim_step(
        &mut self,
        g: &CudaStorage,
        state: &mut [&mut CudaStorage],
        step: &OptimStep,
    ) -> Option<CudaResult<()>> {
        let kd = kernel_dtype(self.dtype)?;
        if g.dtype != self.dtype || state.iter().any(|s| s.dtype != self.dtype) {
            return None;
        }
        let n = self.len();
        let mut bufs: Vec<&mut CudaBuffer> = state.iter_mut().map(|s| &mut s.buf).collect();
        Some(launch::optim_step(
            &mut self.buf,
            &g.buf,
            &mut bufs,
            n,
            kd,
            step,
        ))
    }

    /// Multi-tensor updates of `items`: `None` (nothing done) unless every
    /// storage is on one GPU in one kernel dtype.
    fn optim_step_many(items: &mut [OptimItem<'_>], step: &OptimStep) -> Option<CudaResult<()>> {
        let (dtype, ordinal) = match items.first()? {
            (Storage::Cuda(p), ..) => (p.dtype, p.buf.device().ordinal()),
            _ => return None,
        };
        let kd = kernel_dtype(dtype)?;
        let same = |c: &CudaStorage| c.dtype == dtype && c.buf.device().ordinal() == ordinal;
        let mut batch: Vec<launch::UpdateItem<'_>> = Vec::with_capacity(items.len());
        for (p, g, state) in items.iter_mut() {
            let (Storage::Cuda(pc), Storage::Cuda(gc)) = (&mut **p, &**g) else {
                return None;
            };
            if !same(pc) || !same(gc) {
                return None;
            }
            let n = pc.len();
            let mut bufs = Vec::with_capacity(state.len());
            for s in state.iter_mut() {
                match &mut **s {
                    Storage::Cuda(c) if same(c) => bufs.push(&mut c.buf),
                    _ => return None,
                }
            }
            batch.push((&mut pc.buf, &gc.buf, bufs, n));
        }
        Some(launch::optim_step_many(&mut batch, kd, step))
    }
}
