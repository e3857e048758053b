//! Fused attention through the device seam: the tiled CPU kernel
//! (`tapir_kernels::cpu::attention_forward`), or on a GPU the
//! one-warp-per-row kernels of `cu/attention.cu`, whose twin it is. Both
//! keep only each query row's log-sum-exp for the backward.

#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::{CudaStorage, fail, kernel_dtype};
use super::{CpuBuffer, Storage};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use crate::dtype::DType;
use tapir_kernels::Layout;
use tapir_kernels::cpu::{AttentionDims, AttentionOrder};
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use tapir_kernels::cuda::launch::{AttentionSpec, AttentionView};
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
    /// and device (their last dim must have stride 1): the output `[batch,
    /// l, ev]` (this dtype) held in the returned order, and each query
    /// row's log-sum-exp (f64 for f64, f32 otherwise, dense). The output
    /// takes the query's order ([`AttentionOrder::of`]): heads inside rows
    /// for a head split's transposed query, so merging the heads back costs
    /// no copy (PyTorch's flash attention does the same on either device).
    /// The CPU reads the views in place; a GPU reads in place every view
    /// whose leading dims but the last (the heads) merge. Callers ask
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
    ) -> ([Storage; 2], AttentionOrder) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(q), Storage::Cuda(k), Storage::Cuda(v)) = (self, k, v)
            && self.fuses_attention(d)
        {
            let (out, order) = q
                .attention([(q, lq), (k, lk), (v, lv)], d, scale, causal)
                .unwrap_or_else(|e| fail("scaled_dot_product_attention", e));
            return (out.map(Storage::Cuda), order);
        }
        let (kh, vh) = (k.host(), v.host());
        let [out, lse] = self
            .host()
            .attention(lq, (&kh, lk), (&vh, lv), d, scale, causal);
        // The kernel writes dense rows; a head split's output is laid out
        // as on a GPU (the copy that merging the heads would make).
        let order = AttentionOrder::of(lq);
        let mut shape = lq.shape.clone();
        *shape.last_mut().expect("attention views have rows") = d.ev;
        let out = arrange(out, &shape, order);
        let out = [out, lse].map(|b| Storage::on_device(b, self.device()));
        (out, order)
    }

    /// The fused attention's gradients `[dq, dk, dv]`, each with the order
    /// it is held in, for this query, `k` and `v` (views as in
    /// [`Storage::attention`]), the forward's output (its view `lo`) and
    /// log-sum-exp, and the upstream view `g` (`[.., l, ev]`; both views'
    /// last dims with stride 1, as the inputs'). Each gradient takes its
    /// input's order.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_backward(
        &self,
        lq: &Layout,
        (k, lk): (&Storage, &Layout),
        (v, lv): (&Storage, &Layout),
        ((out, lo), lse, (g, lg)): ((&Storage, &Layout), &Storage, (&Storage, &Layout)),
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> [(Storage, AttentionOrder); 3] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(q), Storage::Cuda(k), Storage::Cuda(v)) = (self, k, v)
            && let (Storage::Cuda(out), Storage::Cuda(lse), Storage::Cuda(g)) = (out, lse, g)
            && self.fuses_attention(d)
        {
            let inputs = [(q, lq), (k, lk), (v, lv)];
            return q
                .attention_backward(inputs, [(out, lo), (g, lg)], lse, d, scale, causal)
                .unwrap_or_else(|e| fail("scaled_dot_product_attention backward", e))
                .map(|(s, order)| (Storage::Cuda(s), order));
        }
        // The CPU kernel, on the buffers themselves or on host copies.
        let (kh, vh, m) = (k.host(), v.host(), lse.host());
        let (oh, gh) = (out.host(), g.host());
        let grads = self.host().attention_backward(
            lq,
            (&kh, lk),
            (&vh, lv),
            ((&oh, lo), &m, (&gh, lg)),
            d,
            scale,
            causal,
        );
        let mut views = [lq, lk, lv].into_iter();
        grads.map(|b| {
            let l = views.next().expect("three inputs");
            let order = AttentionOrder::of(l);
            let b = arrange(b, &l.shape, order);
            (Storage::on_device(b, self.device()), order)
        })
    }
}

/// A dense result of `shape` (`[lead.., heads, rows, width]`) held in
/// `order`.
fn arrange(b: CpuBuffer, shape: &[usize], order: AttentionOrder) -> CpuBuffer {
    match order {
        AttentionOrder::Dense => b,
        AttentionOrder::HeadsInside => {
            let arranged = b.copy(&order.arranging(shape));
            b.recycle();
            arranged
        }
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

    /// This view read in place by the attention kernels, or a dense copy
    /// (kept in `copy`) where its rows do not suit them; `heads` as the
    /// call splits its slices, `rows` rows of `width`.
    fn attention_view<'a>(
        &'a self,
        l: &Layout,
        copy: &'a mut Option<CudaStorage>,
        (heads, rows, width): (usize, usize, usize),
    ) -> CudaResult<AttentionView<'a>> {
        if let Some(view) = AttentionView::of(&self.buf, l) {
            return Ok(view);
        }
        let dense = &copy.insert(self.copy(l)?).buf;
        Ok(AttentionView::whole(
            dense,
            AttentionOrder::Dense,
            heads,
            rows,
            width,
        ))
    }

    /// `[out, lse]` of [`Storage::attention`] for `(q, k, v)` views of
    /// this dtype, and the output's order.
    fn attention(
        &self,
        [(q, lq), (k, lk), (v, lv)]: [(&CudaStorage, &Layout); 3],
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> CudaResult<([CudaStorage; 2], AttentionOrder)> {
        let spec = attention_spec(self.dtype, lq, d, scale, causal);
        let h = spec.heads;
        let mut copies: [Option<CudaStorage>; 3] = [None, None, None];
        let [cq, ck, cv] = &mut copies;
        let inputs = [
            q.attention_view(lq, cq, (h, d.l, d.e))?,
            k.attention_view(lk, ck, (h, d.s, d.e))?,
            v.attention_view(lv, cv, (h, d.s, d.ev))?,
        ];
        let order = AttentionOrder::of(lq);
        let (out, lse) = launch::attention_forward(spec, inputs, order)?;
        let out = [
            CudaStorage::new(out, self.dtype),
            CudaStorage::new(lse, DType::F32),
        ];
        Ok((out, order))
    }

    /// `[dq, dk, dv]` of [`Storage::attention_backward`], each in the order
    /// of its input's rows.
    fn attention_backward(
        &self,
        [(q, lq), (k, lk), (v, lv)]: [(&CudaStorage, &Layout); 3],
        [(out, lo), (g, lg)]: [(&CudaStorage, &Layout); 2],
        lse: &CudaStorage,
        d: AttentionDims,
        scale: f64,
        causal: bool,
    ) -> CudaResult<[(CudaStorage, AttentionOrder); 3]> {
        let spec = attention_spec(self.dtype, lq, d, scale, causal);
        let h = spec.heads;
        let mut copies: [Option<CudaStorage>; 5] = [None, None, None, None, None];
        let [cq, ck, cv, co, cg] = &mut copies;
        let inputs = [
            q.attention_view(lq, cq, (h, d.l, d.e))?,
            k.attention_view(lk, ck, (h, d.s, d.e))?,
            v.attention_view(lv, cv, (h, d.s, d.ev))?,
        ];
        let out = out.attention_view(lo, co, (h, d.l, d.ev))?;
        let g = g.attention_view(lg, cg, (h, d.l, d.ev))?;
        let orders = [lq, lk, lv].map(AttentionOrder::of);
        let (dq, dk, dv) = launch::attention_backward(spec, inputs, (out, &lse.buf, g), orders)?;
        let grads = [dq, dk, dv].map(|b| CudaStorage::new(b, self.dtype));
        let [a, b, c] = grads;
        Ok([(a, orders[0]), (b, orders[1]), (c, orders[2])])
    }
}

/// The launch spec of an attention call on query view `lq`: its heads are
/// the query's last leading dim (1 without one).
#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn attention_spec(
    dtype: DType,
    lq: &Layout,
    d: AttentionDims,
    scale: f64,
    causal: bool,
) -> AttentionSpec<'static> {
    let n = lq.ndim();
    AttentionSpec {
        d,
        heads: if n > 2 { lq.shape[n - 3] } else { 1 },
        scale: scale as f32,
        causal,
        dtype: kernel_dtype(dtype).expect("fuses_attention checked the dtype"),
    }
}
