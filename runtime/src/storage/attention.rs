//! Fused attention through the device seam: the tiled CPU kernel
//! (`tapir_kernels::cpu::attention_forward`), or on a GPU the
//! one-warp-per-row kernels of `cu/attention.cu`, whose twin it is. Both
//! keep only each query row's log-sum-exp for the backward.

use super::Storage;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::{CudaStorage, fail, kernel_dtype};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use crate::dtype::DType;
use tapir_kernels::Layout;
use tapir_kernels::cpu::AttentionDims;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use tapir_kernels::cuda::{CudaBuffer, CudaResult, launch};

impl Storage {
    /// Whether this device has a fused attention kernel for this dtype and
    /// these sizes: the CPU always; a GPU for f32, f16 and bf16 with `e`
    /// and `ev` up to 128 (and at most 524,280 rows per slice). Elsewhere
    /// attention is composed from ops.
    pub fn fuses_attention(&self, d: AttentionDims) -> bool {
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        let _ = d; // every width fuses on the CPU
        match self {
            Storage::Cpu(_) => true,
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(c) => {
                kernel_dtype(c.dtype).is_some()
                    && d.e.max(d.ev) <= launch::ATTENTION_MAX_WIDTH
                    && d.l.max(d.s) <= launch::ATTENTION_MAX_ROWS
            }
        }
    }

    /// The autograd node PyTorch records for the fused attention on this
    /// device.
    pub fn attention_node(&self) -> &'static str {
        match self {
            Storage::Cpu(_) => "ScaledDotProductFlashAttentionForCpuBackward0",
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(_) => "ScaledDotProductFlashAttentionBackward0",
        }
    }

    /// Fused scaled-dot-product attention of this query, view `lq` `[..,
    /// l, e]`, over `k` `[.., s, e]` and `v` `[.., s, ev]` of the same dtype
    /// and device (their last dim must have stride 1): the dense output
    /// `[batch, l, ev]` (this dtype) and each query row's log-sum-exp (f64
    /// for f64, f32 otherwise). The CPU reads the views in place; a GPU
    /// reads dense copies of views that are not dense. Callers ask
    /// [`Storage::fuses_attention`] first; elsewhere it runs on host copies.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        lq: &Layout,
        (k, lk): (&Storage, &Layout),
        (v, lv): (&Storage, &Layout),
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> [Storage; 2] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(q), Storage::Cuda(k), Storage::Cuda(v)) = (self, k, v)
            && self.fuses_attention(d)
        {
            return q
                .attention([(q, lq), (k, lk), (v, lv)], d, scale, causal)
                .unwrap_or_else(|e| fail("scaled_dot_product_attention", e))
                .map(Storage::Cuda);
        }
        let (kh, vh) = (k.host(), v.host());
        let out = self
            .host()
            .attention(lq, (&kh, lk), (&vh, lv), d, scale, causal);
        out.map(|b| Storage::on_device(b, self.device()))
    }

    /// The fused attention's dense gradients `[dq, dk, dv]` for this query,
    /// `k` and `v` (views as in [`Storage::attention`]), the forward's dense
    /// `out` and `lse` and the dense upstream `g`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_backward(
        &self,
        lq: &Layout,
        (k, lk): (&Storage, &Layout),
        (v, lv): (&Storage, &Layout),
        (out, lse, g): (&Storage, &Storage, &Storage),
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> [Storage; 3] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(q), Storage::Cuda(k), Storage::Cuda(v)) = (self, k, v)
            && let (Storage::Cuda(out), Storage::Cuda(lse), Storage::Cuda(g)) = (out, lse, g)
            && self.fuses_attention(d)
        {
            let inputs = [(q, lq), (k, lk), (v, lv)];
            return q
                .attention_backward(inputs, [out, lse, g], d, scale, causal)
                .unwrap_or_else(|e| fail("scaled_dot_product_attention backward", e))
                .map(Storage::Cuda);
        }
        // The CPU kernel, on the buffers themselves or on host copies.
        let (k, v, o, m, g) = (k.host(), v.host(), out.host(), lse.host(), g.host());
        let grads =
            self.host()
                .attention_backward(lq, (&k, lk), (&v, lv), (&o, &m, &g), d, scale, causal);
        grads.map(|b| Storage::on_device(b, self.device()))
    }
}

#[cfg(any(feature = "cuda", feature = "cuda12"))]
impl CudaStorage {
    /// The view's buffer when it is dense from the buffer's start, else a
    /// dense copy kept in `copy` (a kernel that reads dense rows then needs
    /// no copy of a tensor that already is).
    pub(super) fn dense<'a>(
        &'a self,
        l: &Layout,
        copy: &'a mut Option<CudaStorage>,
    ) -> CudaResult<&'a CudaBuffer> {
        if l.contiguous_offset() == Some(0) {
            return Ok(&self.buf);
        }
        Ok(&copy.insert(self.copy(l)?).buf)
    }

    /// `[out, lse]` of [`Storage::attention`] for `(q, k, v)` views of
    /// this dtype.
    fn attention(
        &self,
        [(q, lq), (k, lk), (v, lv)]: [(&CudaStorage, &Layout); 3],
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> CudaResult<[CudaStorage; 2]> {
        let kd = kernel_dtype(self.dtype).expect("fuses_attention checked the dtype");
        let mut copies: [Option<CudaStorage>; 3] = [None, None, None];
        let [cq, ck, cv] = &mut copies;
        let (q, k, v) = (q.dense(lq, cq)?, k.dense(lk, ck)?, v.dense(lv, cv)?);
        let (out, lse) = launch::attention_forward((q, k, v), d, scale as f32, causal, kd)?;
        Ok([
            CudaStorage::new(out, self.dtype),
            CudaStorage::new(lse, DType::F32),
        ])
    }

    /// `[dq, dk, dv]` of [`Storage::attention_backward`].
    fn attention_backward(
        &self,
        [(q, lq), (k, lk), (v, lv)]: [(&CudaStorage, &Layout); 3],
        [out, lse, g]: [&CudaStorage; 3],
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> CudaResult<[CudaStorage; 3]> {
        let kd = kernel_dtype(self.dtype).expect("fuses_attention checked the dtype");
        let mut copies: [Option<CudaStorage>; 3] = [None, None, None];
        let [cq, ck, cv] = &mut copies;
        let (q, k, v) = (q.dense(lq, cq)?, k.dense(lk, ck)?, v.dense(lv, cv)?);
        let grads = launch::attention_backward(
            (q, k, v),
            (&out.buf, &lse.buf, &g.buf),
            d,
            scale as f32,
            causal,
            kd,
        )?;
        Ok([grads.0, grads.1, grads.2].map(|b| CudaStorage::new(b, self.dtype)))
    }
}
