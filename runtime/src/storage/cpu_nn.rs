//! The CPU arms of the seam's neural-network primitives: softmax, layer
//! norm, indexing, in-place updates and optimizer steps (the windowed ones
//! are in `cpu_conv.rs`).
//! Float kernels compute in f64 for f64 and in f32 otherwise (f16/bf16 are
//! widened, and each result rounded once), as PyTorch's CPU kernels do.

use super::cpu::{CpuBuffer, contiguous, planes, with_vec};
use crate::dtype::{DType, Element};
use std::borrow::Cow;
use tapir_kernels::elementwise::{BinaryFn, UnaryFn};
use tapir_kernels::optim::OptimStep;
use tapir_kernels::{Layout, cpu};

/// The first `n` elements as f32 (borrowed when they are f32 already).
fn f32s(b: &CpuBuffer, n: usize) -> Cow<'_, [f32]> {
    match b {
        CpuBuffer::F32(v) => Cow::Borrowed(&v[..n]),
        // bf16/f16 (LayerNorm under autocast) through the vectorised conversion.
        other => match other.cast(&Layout::contiguous(&[n]), DType::F32) {
            CpuBuffer::F32(v) => Cow::Owned(v),
            _ => unreachable!("cast to f32 gives f32"),
        },
    }
}

/// The first `n` elements as f64 (borrowed when they are f64 already).
fn f64s(b: &CpuBuffer, n: usize) -> Cow<'_, [f64]> {
    match b {
        CpuBuffer::F64(v) => Cow::Borrowed(&v[..n]),
        other => Cow::Owned(other.to_vec(&Layout::contiguous(&[n]))),
    }
}

/// Each of `bufs` converted by `conv`, a buffer they share converted once
/// (self-attention's packed projection makes q, k and v views of one
/// buffer, and a bf16 step spent 2.5x as long converting it three times):
/// the distinct conversions, and for each of `bufs` the index of its own.
fn convert_once<'a, T: Clone>(
    bufs: [&'a CpuBuffer; 3],
    conv: impl Fn(&'a CpuBuffer, usize) -> Cow<'a, [T]>,
) -> (Vec<Cow<'a, [T]>>, [usize; 3]) {
    let mut distinct: Vec<&CpuBuffer> = Vec::with_capacity(3);
    let index = bufs.map(
        |b| match distinct.iter().position(|d| std::ptr::eq(*d, b)) {
            Some(i) => i,
            None => {
                distinct.push(b);
                distinct.len() - 1
            }
        },
    );
    (
        distinct.into_iter().map(|b| conv(b, b.len())).collect(),
        index,
    )
}

/// The rows of a `[.., rows, width]` view whose rows are contiguous: one
/// offset per slice of the leading dims, and the view's row stride.
fn rows<'a, T>(data: &'a [T], l: &Layout) -> cpu::Rows<'a, T> {
    cpu::Rows {
        data,
        offsets: l.batch_offsets(),
        row_stride: l.strides[l.ndim() - 2],
    }
}

impl CpuBuffer {
    /// This buffer converted to `dtype` (itself when it has that dtype).
    pub(super) fn into_dtype(self, dtype: DType) -> CpuBuffer {
        if self.dtype() == dtype {
            return self;
        }
        let out = self.cast(&Layout::contiguous(&[self.len()]), dtype);
        // The f32 temporary goes back to the cache: freed to the system, an
        // 8 MB one came back as fresh pages each call (a bf16 softmax in the
        // char transformer took 8 ms in the step against 2 ms alone).
        with_vec!(self, v => {
            tapir_kernels::alloc::recycle(v);
        });
        out
    }

    /// A float kernel over a contiguous copy of the view (borrowed when
    /// dense): in f64 for f64, in f32 otherwise; the result in this dtype.
    pub(super) fn float_kernel(
        &self,
        l: &Layout,
        k32: impl Fn(&[f32]) -> Vec<f32>,
        k64: impl Fn(&[f64]) -> Vec<f64>,
    ) -> CpuBuffer {
        match self {
            CpuBuffer::F64(v) => CpuBuffer::F64(k64(&contiguous(v, l))),
            CpuBuffer::F32(v) => CpuBuffer::F32(k32(&contiguous(v, l))),
            other => {
                let x: Vec<f32> = other.to_vec(l);
                let y = k32(&x);
                tapir_kernels::alloc::recycle(x);
                CpuBuffer::F32(y).into_dtype(other.dtype().to_float())
            }
        }
    }

    /// `ln(sum(exp(x)))` over the last dim of the view, one value per row.
    pub fn logsumexp_rows(&self, l: &Layout) -> CpuBuffer {
        let n = l.shape.last().copied().unwrap_or(1);
        self.float_kernel(
            l,
            |x| cpu::logsumexp_rows(x, n),
            |x| cpu::logsumexp_rows(x, n),
        )
    }

    /// Softmax (or log-softmax) over the last dim of the view.
    pub fn softmax(&self, l: &Layout, log: bool) -> CpuBuffer {
        let n = l.shape.last().copied().unwrap_or(1);
        if let (CpuBuffer::BF16(v), Some(off)) = (self, l.contiguous_offset()) {
            return CpuBuffer::BF16(cpu::softmax_rows_bf16(&v[off..off + l.numel()], n, log));
        }
        if log {
            self.float_kernel(
                l,
                |x| cpu::log_softmax_rows(x, n),
                |x| cpu::log_softmax_rows(x, n),
            )
        } else {
            self.float_kernel(l, |x| cpu::softmax_rows(x, n), |x| cpu::softmax_rows(x, n))
        }
    }

    /// Softmax (or log-softmax) over `dim` of a contiguous f32 or f64 view
    /// by columns, where the dim is not the last; `None` otherwise.
    pub fn softmax_columns(&self, l: &Layout, dim: usize, log: bool) -> Option<CpuBuffer> {
        let (_, len, inner) = planes(l, dim).filter(|&(_, _, inner)| inner > 1)?;
        matches!(self, CpuBuffer::F32(_) | CpuBuffer::F64(_)).then(|| {
            self.float_kernel(
                l,
                |x| cpu::softmax_columns(x, len, inner, log),
                |x| cpu::softmax_columns(x, len, inner, log),
            )
        })
    }

    /// Softmax over the last dim of `scale * x` for the view, causal-masked
    /// when asked (rows are queries `r % queries`).
    pub fn scaled_softmax(
        &self,
        l: &Layout,
        queries: usize,
        scale: f64,
        causal: bool,
    ) -> CpuBuffer {
        let n = l.shape.last().copied().unwrap_or(1);
        self.float_kernel(
            l,
            |x| cpu::scaled_softmax_rows(x, n, queries, scale as f32, causal),
            |x| cpu::scaled_softmax_rows(x, n, queries, scale, causal),
        )
    }

    /// The gradient of [`CpuBuffer::scaled_softmax`] from its dense output
    /// (this buffer) and the upstream `g` (view `lg`).
    pub fn scaled_softmax_backward(&self, g: &CpuBuffer, lg: &Layout, scale: f64) -> CpuBuffer {
        let n = lg.shape.last().copied().unwrap_or(1);
        let dense = Layout::contiguous(&lg.shape);
        match (self, g) {
            (CpuBuffer::F32(y), CpuBuffer::F32(g)) => CpuBuffer::F32(
                cpu::scaled_softmax_backward_rows(y, &contiguous(g, lg), n, scale as f32),
            ),
            (CpuBuffer::F64(y), CpuBuffer::F64(g)) => CpuBuffer::F64(
                cpu::scaled_softmax_backward_rows(y, &contiguous(g, lg), n, scale),
            ),
            (CpuBuffer::BF16(y), CpuBuffer::BF16(g)) => CpuBuffer::BF16(
                cpu::scaled_softmax_backward_rows_bf16(y, &contiguous(g, lg), n, scale as f32),
            ),
            (y, g) => {
                let (y32, g32): (Vec<f32>, Vec<f32>) = (y.to_vec(&dense), g.to_vec(lg));
                let dx = cpu::scaled_softmax_backward_rows(&y32, &g32, n, scale as f32);
                CpuBuffer::F32(dx).into_dtype(y.dtype())
            }
        }
    }

    /// The gradient of log-softmax over the last dim from its dense output
    /// (this buffer) and the upstream `g` (view `lg`); half types in f32,
    /// rounded once.
    pub fn log_softmax_backward(&self, g: &CpuBuffer, lg: &Layout) -> CpuBuffer {
        let n = lg.shape.last().copied().unwrap_or(1);
        let dense = Layout::contiguous(&lg.shape);
        match (self, g) {
            (CpuBuffer::F32(y), CpuBuffer::F32(g)) => {
                CpuBuffer::F32(cpu::log_softmax_backward_rows(y, &contiguous(g, lg), n))
            }
            (CpuBuffer::F64(y), CpuBuffer::F64(g)) => {
                CpuBuffer::F64(cpu::log_softmax_backward_rows(y, &contiguous(g, lg), n))
            }
            (y, g) => {
                let (y32, g32): (Vec<f32>, Vec<f32>) = (y.to_vec(&dense), g.to_vec(lg));
                let dx = cpu::log_softmax_backward_rows(&y32, &g32, n);
                CpuBuffer::F32(dx).into_dtype(y.dtype())
            }
        }
    }

    /// Fused attention of q (this buffer, view `lq`), k and v (their views
    /// read in place: rows contiguous, any slice offsets and row strides):
    /// `[out, lse]` (see `Storage`).
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        lq: &Layout,
        (k, lk): (&CpuBuffer, &Layout),
        (v, lv): (&CpuBuffer, &Layout),
        d: cpu::AttentionDims,
        scale: f64,
        causal: bool,
    ) -> [CpuBuffer; 2] {
        if self.dtype() == DType::F64 {
            let (c, [iq, ik, iv]) = convert_once([self, k, v], f64s);
            let (q, k, v) = (rows(&c[iq], lq), rows(&c[ik], lk), rows(&c[iv], lv));
            let f = cpu::attention_forward(&q, &k, &v, d, scale, causal);
            return [CpuBuffer::F64(f.out), CpuBuffer::F64(f.lse)];
        }
        let (c, [iq, ik, iv]) = convert_once([self, k, v], f32s);
        let (q, k, v) = (rows(&c[iq], lq), rows(&c[ik], lk), rows(&c[iv], lv));
        let f = cpu::attention_forward(&q, &k, &v, d, scale as f32, causal);
        [
            CpuBuffer::F32(f.out).into_dtype(self.dtype()),
            CpuBuffer::F32(f.lse),
        ]
    }

    /// Fused attention's `[dq, dk, dv]` (dense) for q (this buffer), k, v as
    /// in [`CpuBuffer::attention`], the forward's output and the upstream
    /// `g` (views whose rows are read in place, as the inputs') and its
    /// dense log-sum-exp.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_backward(
        &self,
        lq: &Layout,
        (k, lk): (&CpuBuffer, &Layout),
        (v, lv): (&CpuBuffer, &Layout),
        ((out, lo), lse, (g, lg)): ((&CpuBuffer, &Layout), &CpuBuffer, (&CpuBuffer, &Layout)),
        d: cpu::AttentionDims,
        scale: f64,
        causal: bool,
    ) -> [CpuBuffer; 3] {
        let nl = d.batch * d.l;
        if self.dtype() == DType::F64 {
            let (c, [iq, ik, iv]) = convert_once([self, k, v], f64s);
            let (q, k, v) = (rows(&c[iq], lq), rows(&c[ik], lk), rows(&c[iv], lv));
            let (o, m, g) = (f64s(out, out.len()), f64s(lse, nl), f64s(g, g.len()));
            let (o, g) = (rows(&o, lo), rows(&g, lg));
            let (dq, dk, dv) = cpu::attention_backward(&q, &k, &v, &o, &m, &g, d, scale, causal);
            return [dq, dk, dv].map(CpuBuffer::F64);
        }
        let (c, [iq, ik, iv]) = convert_once([self, k, v], f32s);
        let (q, k, v) = (rows(&c[iq], lq), rows(&c[ik], lk), rows(&c[iv], lv));
        let (o, m, g) = (f32s(out, out.len()), f32s(lse, nl), f32s(g, g.len()));
        let (o, g) = (rows(&o, lo), rows(&g, lg));
        let (dq, dk, dv) = cpu::attention_backward(&q, &k, &v, &o, &m, &g, d, scale as f32, causal);
        [dq, dk, dv].map(|x| CpuBuffer::F32(x).into_dtype(self.dtype()))
    }

    /// LayerNorm of the first `rows * n` elements: `[y, mean, rstd]`.
    pub fn layer_norm(
        &self,
        rows: usize,
        n: usize,
        w: Option<&CpuBuffer>,
        b: Option<&CpuBuffer>,
        eps: f64,
    ) -> [CpuBuffer; 3] {
        self.norm_rows(None, rows, n, (w, b), eps).1
    }

    /// `s = self + residual` and LayerNorm of `s`: `[s, y, mean, rstd]`.
    pub fn add_layer_norm(
        &self,
        residual: &CpuBuffer,
        rows: usize,
        n: usize,
        w: Option<&CpuBuffer>,
        b: Option<&CpuBuffer>,
        eps: f64,
    ) -> [CpuBuffer; 4] {
        let (s, [y, mean, rstd]) = self.norm_rows(Some(residual), rows, n, (w, b), eps);
        [s.expect("a residual gives a sum"), y, mean, rstd]
    }

    /// LayerNorm of the first `rows * n` elements, or of their sum with
    /// `residual`: (the sum when there is a residual, `[y, mean, rstd]`).
    #[allow(clippy::type_complexity)]
    fn norm_rows(
        &self,
        residual: Option<&CpuBuffer>,
        rows: usize,
        n: usize,
        (w, b): (Option<&CpuBuffer>, Option<&CpuBuffer>),
        eps: f64,
    ) -> (Option<CpuBuffer>, [CpuBuffer; 3]) {
        fn run<T: tapir_kernels::Float>(
            x: &[T],
            r: Option<&[T]>,
            n: usize,
            (w, b): (Option<&[T]>, Option<&[T]>),
            eps: f64,
        ) -> (Option<Vec<T>>, cpu::LayerNormForward<T>) {
            match r {
                Some(r) => {
                    let (s, f) = cpu::add_layer_norm_rows(x, r, n, w, b, eps);
                    (Some(s), f)
                }
                None => (None, cpu::layer_norm_rows(x, n, w, b, eps)),
            }
        }
        let len = rows * n;
        if self.dtype() == DType::F64 {
            let (w, b) = (w.map(|w| f64s(w, n)), b.map(|b| f64s(b, n)));
            let r = residual.map(|r| f64s(r, len));
            let (x, wb) = (f64s(self, len), (w.as_deref(), b.as_deref()));
            let (s, f) = run(&x, r.as_deref(), n, wb, eps);
            return (
                s.map(CpuBuffer::F64),
                [f.y, f.mean, f.rstd].map(CpuBuffer::F64),
            );
        }
        let (w, b) = (w.map(|w| f32s(w, n)), b.map(|b| f32s(b, n)));
        let r = residual.map(|r| f32s(r, len));
        let (x, wb) = (f32s(self, len), (w.as_deref(), b.as_deref()));
        let (s, f) = run(&x, r.as_deref(), n, wb, eps);
        let own = |v: Vec<f32>| CpuBuffer::F32(v).into_dtype(self.dtype());
        (
            s.map(own),
            [own(f.y), CpuBuffer::F32(f.mean), CpuBuffer::F32(f.rstd)],
        )
    }

    /// LayerNorm's gradients `[dx, dw, db]` for this input (see `Storage`).
    pub fn layer_norm_backward(
        &self,
        g: &CpuBuffer,
        mean: &CpuBuffer,
        rstd: &CpuBuffer,
        w: Option<&CpuBuffer>,
        rows: usize,
        n: usize,
    ) -> [CpuBuffer; 3] {
        let len = rows * n;
        if self.dtype() == DType::F64 {
            let w = w.map(|w| f64s(w, n));
            let (m, r) = (f64s(mean, rows), f64s(rstd, rows));
            let (dx, dw, db) = cpu::layer_norm_backward_rows(
                &f64s(self, len),
                &f64s(g, len),
                n,
                &m,
                &r,
                w.as_deref(),
            );
            return [CpuBuffer::F64(dx), CpuBuffer::F64(dw), CpuBuffer::F64(db)];
        }
        let w = w.map(|w| f32s(w, n));
        let (m, r) = (f32s(mean, rows), f32s(rstd, rows));
        let (dx, dw, db) =
            cpu::layer_norm_backward_rows(&f32s(self, len), &f32s(g, len), n, &m, &r, w.as_deref());
        [dx, dw, db].map(|v| CpuBuffer::F32(v).into_dtype(self.dtype()))
    }

    /// In place: `self[l] = op(self[l])`.
    pub fn map_assign<F: UnaryFn>(&mut self, l: &Layout, op: &F) {
        match self {
            CpuBuffer::F32(d) => cpu::map_inplace(
                d,
                l,
                #[inline(always)]
                |x| op.f(x),
            ),
            CpuBuffer::F64(d) => cpu::map_inplace(
                d,
                l,
                #[inline(always)]
                |x| op.f(x),
            ),
            CpuBuffer::F16(d) => cpu::map_inplace_f16_with(
                d,
                l,
                *op,
                #[inline(always)]
                |x, op| op.f(x),
            ),
            CpuBuffer::BF16(d) => cpu::map_inplace(
                d,
                l,
                #[inline(always)]
                |x| cpu::bf16_from_f32(op.f(cpu::f32_from_bf16(x))),
            ),
            other if F::INT => {
                with_vec!(other, d => cpu::map_inplace(d, l, |x| Element::from_i64(op.i(x.to_i64()))))
            }
            other => {
                with_vec!(other, d => cpu::map_inplace(d, l, #[inline(always)] |x| Element::from_f64(op.f(x.to_f64()))))
            }
        }
    }

    /// In place: `self[l] = src[ls]`, `src` converted to this dtype; where
    /// the dtypes agree, a plain copy that keeps every bit (a bf16 copy went
    /// through f32 element by element before: 1.7 ms for 3 M elements).
    pub fn assign(&mut self, l: &Layout, src: &CpuBuffer, ls: &Layout) {
        use CpuBuffer::*;
        match (&mut *self, src) {
            (F32(d), F32(s)) => cpu::copy_into(d, l, s, ls),
            (F64(d), F64(s)) => cpu::copy_into(d, l, s, ls),
            (F16(d), F16(s)) => cpu::copy_into(d, l, s, ls),
            (BF16(d), BF16(s)) => cpu::copy_into(d, l, s, ls),
            (I64(d), I64(s)) => cpu::copy_into(d, l, s, ls),
            (U8(d), U8(s)) => cpu::copy_into(d, l, s, ls),
            (Bool(d), Bool(s)) => cpu::copy_into(d, l, s, ls),
            _ => self.zip_assign(l, src, ls, &tapir_kernels::elementwise::Second),
        }
    }

    /// In place: `self[l] = op(self[l], src[ls])`, `src` converted to this dtype.
    pub fn zip_assign<F: BinaryFn>(&mut self, l: &Layout, src: &CpuBuffer, ls: &Layout, op: &F) {
        use CpuBuffer::*;
        let converted;
        let (src, ls) = if src.dtype() == self.dtype() {
            (src, ls)
        } else {
            converted = (src.cast(ls, self.dtype()), Layout::contiguous(&ls.shape));
            (&converted.0, &converted.1)
        };
        match (self, src) {
            (F32(d), F32(s)) => cpu::zip_inplace(
                d,
                l,
                s,
                ls,
                #[inline(always)]
                |x, y| op.f(x, y),
            ),
            (F64(d), F64(s)) => cpu::zip_inplace(
                d,
                l,
                s,
                ls,
                #[inline(always)]
                |x, y| op.f(x, y),
            ),
            (F16(d), F16(s)) => cpu::zip_inplace_f16(
                d,
                l,
                s,
                ls,
                #[inline(always)]
                |x, y| op.f(x, y),
            ),
            (BF16(d), BF16(s)) => cpu::zip_inplace(
                d,
                l,
                s,
                ls,
                #[inline(always)]
                |x, y| cpu::bf16_from_f32(op.f(cpu::f32_from_bf16(x), cpu::f32_from_bf16(y))),
            ),
            (d, s) if F::INT => {
                let sv: Vec<i64> = s.to_vec(ls);
                let lc = Layout::contiguous(&ls.shape);
                with_vec!(d, dv => cpu::zip_inplace(dv, l, &sv, &lc, |x, y| Element::from_i64(op.i(x.to_i64(), y))))
            }
            (d, s) => {
                let sv: Vec<f64> = s.to_vec(ls);
                let lc = Layout::contiguous(&ls.shape);
                with_vec!(d, dv => cpu::zip_inplace(dv, l, &sv, &lc, #[inline(always)] |x, y| Element::from_f64(op.f(x.to_f64(), y))))
            }
        }
    }

    /// In place: every element of the view set to `value`.
    pub fn fill(&mut self, l: &Layout, value: f64) {
        with_vec!(self, d => {
            let v = Element::from_f64(value);
            cpu::map_inplace(d, l, |_| v)
        })
    }

    /// One fused optimizer update in place (see `Storage::optim_step`).
    pub fn optim_step(&mut self, g: &CpuBuffer, state: &mut [&mut CpuBuffer], step: &OptimStep) {
        let (n, dtype) = (self.len(), self.dtype());
        for s in state.iter() {
            assert!(
                s.dtype() == dtype,
                "optimizer: state buffer is {}, parameter is {dtype}",
                s.dtype()
            );
        }
        match (self, g) {
            (CpuBuffer::F32(p), CpuBuffer::F32(g)) => {
                let st = state.iter_mut().map(|s| as_slice_f32(s)).collect();
                chunked(p, &g[..n], st, step)
            }
            (CpuBuffer::F64(p), CpuBuffer::F64(g)) => {
                let st = state.iter_mut().map(|s| as_slice_f64(s)).collect();
                chunked(p, &g[..n], st, step)
            }
            (p, g) if matches!(dtype, DType::F16 | DType::BF16) && g.dtype() == dtype => {
                // PyTorch's fused kernels for reduced-precision parameters:
                // the math in f32, the parameter and its state rounded once.
                let mut p32 = f32s(p, n).into_owned();
                let mut s32: Vec<Vec<f32>> =
                    state.iter().map(|s| f32s(s, n).into_owned()).collect();
                let st = s32.iter_mut().map(|s| s.as_mut_slice()).collect();
                chunked(&mut p32, &f32s(g, n), st, step);
                *p = CpuBuffer::F32(p32).into_dtype(dtype);
                for (s, v) in state.iter_mut().zip(s32) {
                    **s = CpuBuffer::F32(v).into_dtype(dtype);
                }
            }
            (p, g) => panic!(
                "optimizer: parameters must be floating point with a gradient of their dtype, got {} and {}",
                p.dtype(),
                g.dtype()
            ),
        }
    }
}

fn as_slice_f32(b: &mut CpuBuffer) -> &mut [f32] {
    match b {
        CpuBuffer::F32(v) => v,
        other => unreachable!("optimizer: state buffer is {}", other.dtype()),
    }
}

fn as_slice_f64(b: &mut CpuBuffer) -> &mut [f64] {
    match b {
        CpuBuffer::F64(v) => v,
        other => unreachable!("optimizer: state buffer is {}", other.dtype()),
    }
}

/// Applies an optimizer step to aligned chunks of the parameter, its
/// gradient and its state on all threads (updates are independent per element).
fn chunked<T: tapir_kernels::Float>(p: &mut [T], g: &[T], mut st: Vec<&mut [T]>, step: &OptimStep) {
    const CHUNK: usize = 1 << 14;
    if !tapir_kernels::threads::parallel(p.len()) {
        return step.apply(p, g, &mut st);
    }
    // Split every state buffer into the same chunks as the parameter.
    let mut state_chunks: Vec<std::slice::ChunksMut<'_, T>> =
        st.iter_mut().map(|s| s.chunks_mut(CHUNK)).collect();
    type Work<'a, T> = (&'a mut [T], &'a [T], Vec<&'a mut [T]>);
    let work: Vec<Work<'_, T>> = p
        .chunks_mut(CHUNK)
        .zip(g.chunks(CHUNK))
        .map(|(pc, gc)| {
            let sc = state_chunks
                .iter_mut()
                .map(|it| it.next().expect("state matches the parameter"))
                .collect();
            (pc, gc, sc)
        })
        .collect();
    // Each task takes its own chunk tuple out of its slot.
    let work: Vec<std::sync::Mutex<Option<Work<'_, T>>>> = work
        .into_iter()
        .map(|w| std::sync::Mutex::new(Some(w)))
        .collect();
    tapir_kernels::threads::parallel_for(work.len(), |i| {
        let taken = work[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((pc, gc, mut sc)) = taken {
            step.apply(pc, gc, &mut sc)
        }
    });
}
