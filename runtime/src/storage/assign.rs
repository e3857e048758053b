//! In-place writes through the device seam: a map or zip of a view into
//! itself, a converting copy and a fill, each with its CPU arm and its CUDA
//! arm (a kernel that does not take the dtype runs on a host copy).

use super::Storage;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::fail;
use tapir_kernels::Layout;
use tapir_kernels::elementwise::{BinaryFn, Second, UnaryFn};

impl Storage {
    /// In place: `self[l] = op(self[l])`.
    pub fn map_assign<F: UnaryFn>(&mut self, l: &Layout, op: &F) {
        match self {
            Storage::Cpu(b) => b.map_assign(l, op),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.map_assign(l, F::NAME, op.params()) {
                Some(r) => r.unwrap_or_else(|e| fail(F::NAME, e)),
                None => self.host_mut().map_assign(l, op),
            },
        }
    }

    /// In place: `self[l] = op(self[l], src[ls])`, `src` converted to this
    /// dtype first (views of one shape; `src` must not share this buffer).
    pub fn zip_assign<F: BinaryFn>(&mut self, l: &Layout, src: &Storage, ls: &Layout, op: &F) {
        #[allow(unreachable_patterns)]
        match (&mut *self, src) {
            (Storage::Cpu(d), Storage::Cpu(s)) => d.zip_assign(l, s, ls, op),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s)) => {
                match d.zip_assign(l, s, ls, F::NAME, op.param()) {
                    Some(r) => r.unwrap_or_else(|e| fail(F::NAME, e)),
                    None => {
                        let s = src.host();
                        self.host_mut().zip_assign(l, &s, ls, op)
                    }
                }
            }
            _ => {
                let s = src.host();
                self.host_mut().zip_assign(l, &s, ls, op)
            }
        }
    }

    /// In place: `self[l] = src[ls]` (views of one shape, `src` converted to
    /// this dtype).
    pub fn assign(&mut self, l: &Layout, src: &Storage, ls: &Layout) {
        #[allow(unreachable_patterns)]
        match (&mut *self, src) {
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s)) => d
                .assign_converting(l, s, ls)
                .unwrap_or_else(|e| fail("copy_", e)),
            (Storage::Cpu(d), Storage::Cpu(s)) => d.assign(l, s, ls),
            _ => self.zip_assign(l, src, ls, &Second),
        }
    }

    /// In place: every element of the view set to `value`.
    pub fn fill(&mut self, l: &Layout, value: f64) {
        match self {
            Storage::Cpu(b) => b.fill(l, value),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => s.fill(l, value).unwrap_or_else(|e| fail("fill_", e)),
        }
    }
}
