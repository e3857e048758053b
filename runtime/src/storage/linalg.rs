//! The decompositions of `torch.linalg` at the seam. They run on the host
//! on either device: a CUDA storage is copied to the host, factored by
//! faer and the factors copied back (counted by
//! [`super::host_fallbacks`]); cuSOLVER is not wired in.

use super::Storage;
use super::cpu::{CpuBuffer, Wrap};
use std::borrow::Cow;
use tapir_kernels::Decomposition;
use tapir_kernels::Layout;
use tapir_kernels::cpu::linalg::{LinalgFloat, decompose};
use tapir_kernels::cpu::map;

impl Storage {
    /// Runs `d` over the batch of matrices in the view `l` (the last two
    /// dims; `rhs` the right-hand sides of a solve, already broadcast to
    /// the batch): the outputs, dense and on `self`'s device, and one
    /// LAPACK-style info code per matrix. f32 and f64 only (the ops check).
    pub(crate) fn decompose(
        &self,
        l: &Layout,
        rhs: Option<(&Storage, &Layout)>,
        d: Decomposition,
    ) -> (Vec<Storage>, Vec<i64>) {
        let device = self.device();
        let a = self.host();
        let b = rhs.map(|(s, lb)| (s.host(), lb));
        let (outs, info) = a.decompose(l, b.as_ref().map(|(s, lb)| (&**s, *lb)), d);
        let outs = outs
            .into_iter()
            .map(|o| Storage::on_device(o, device))
            .collect();
        (outs, info)
    }
}

impl CpuBuffer {
    fn decompose(
        &self,
        l: &Layout,
        rhs: Option<(&CpuBuffer, &Layout)>,
        d: Decomposition,
    ) -> (Vec<CpuBuffer>, Vec<i64>) {
        match self {
            CpuBuffer::F32(v) => run(v, l, rhs, d),
            CpuBuffer::F64(v) => run(v, l, rhs, d),
            other => panic!("linalg: expects f32 or f64 matrices, got {}", other.dtype()),
        }
    }
}

/// The view's elements row-major: borrowed when they already are.
fn dense<'a, T: LinalgFloat + Default>(v: &'a [T], l: &Layout) -> Cow<'a, [T]> {
    match l.contiguous_offset() {
        Some(off) => Cow::Borrowed(&v[off..off + l.numel()]),
        None => Cow::Owned(map(v, l, |x| x)),
    }
}

fn run<T: LinalgFloat + Wrap + Default>(
    v: &[T],
    l: &Layout,
    rhs: Option<(&CpuBuffer, &Layout)>,
    d: Decomposition,
) -> (Vec<CpuBuffer>, Vec<i64>) {
    let nd = l.shape.len();
    let (m, n) = (l.shape[nd - 2], l.shape[nd - 1]);
    let batch = l.shape[..nd - 2].iter().product();
    let a = dense(v, l);
    let b = rhs.map(|(buf, lb)| {
        let v = T::peek(buf).expect("linalg: the right-hand side has the matrix's dtype");
        dense(v, lb)
    });
    let (outs, info) = decompose(&a, b.as_deref(), (batch, m, n), d);
    // The dense copies of strided views go back to the cache.
    for copy in [Some(a), b].into_iter().flatten() {
        if let Cow::Owned(v) = copy {
            tapir_kernels::alloc::recycle(v);
        }
    }
    (outs.into_iter().map(T::wrap).collect(), info)
}
