//! The compute primitives of the device seam: one total method per
//! kernel-backed primitive, each with its CPU arm and its CUDA arm. A CUDA
//! arm whose kernel does not take the dtype (f64, integers) runs the CPU
//! kernel on a host copy, counted by [`super::host_fallbacks`].

use super::Storage;
use super::cpu::CpuBuffer;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use super::cuda::fail;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
use crate::dtype::DType;
use tapir_kernels::cpu::{Operand, run_program};
use tapir_kernels::elementwise::{BinaryFn, Compare, UnaryFn};
use tapir_kernels::program::Program;
use tapir_kernels::{Conv2dGeometry, ConvSpec, Layout, ScatterMode};

/// One input of [`Storage::run_program`]: a dense f32 storage read one
/// element per element (`Full`) or cycled over (`Cycle`: a bias row).
pub(crate) enum ProgramInput<'a> {
    Full(&'a Storage),
    Cycle(&'a Storage),
}

/// How an index op walks the indexed tensor along `dim`: `view` is the
/// tensor's strides and offset at the index's (or output's) shape, `size`
/// the tensor's size along `dim`, which every index is checked against on
/// either device (on a GPU by the kernel, reported at the next host read);
/// errors name `op`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Along<'a> {
    pub view: &'a Layout,
    pub dim: usize,
    pub size: usize,
    pub op: &'static str,
}

/// `on_host!(x = a, y = b; expr)` runs `expr` on the host buffers `x`, `y` of
/// storages `a`, `b` (a GPU storage is copied to
/// the host, counted) and puts the result on the first one's device.
macro_rules! on_host {
    ($b0:ident = $s0:expr $(, $b:ident = $s:expr)*; $cpu:expr) => {{
        let device = $s0.device();
        let $b0 = $s0.host();
        $(let $b = $s.host();)*
        let out: CpuBuffer = $cpu;
        Storage::on_device(out, device)
    }};
}

/// The CUDA storage of an optional operand (the ops have checked that all
/// operands share the device).
#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn cuda(s: Option<&Storage>) -> Option<&super::cuda::CudaStorage> {
    match s {
        Some(Storage::Cuda(c)) => Some(c),
        _ => None,
    }
}

impl Storage {
    /// `op` elementwise over the view.
    pub fn unary<F: UnaryFn>(&self, l: &Layout, op: &F) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.unary(l, op)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.unary(l, F::NAME, op.params()) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail(F::NAME, e))),
                None => self.map_host(|b| b.unary(l, op)),
            },
        }
    }

    /// `op(self[la], rhs[lb])` over two same-dtype views broadcast to one shape.
    pub fn binary<F: BinaryFn>(&self, la: &Layout, rhs: &Storage, lb: &Layout, op: &F) -> Storage {
        #[allow(unreachable_patterns)]
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::cpu(a.binary(la, b, lb, op)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(a), Storage::Cuda(b)) => {
                match a.binary(la, b, lb, F::NAME, op.param()) {
                    Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail(F::NAME, e))),
                    None => on_host!(x = self, y = rhs; x.binary(la, &y, lb, op)),
                }
            }
            _ => on_host!(x = self, y = rhs; x.binary(la, &y, lb, op)),
        }
    }

    /// Elementwise comparison of two same-dtype views, to bool.
    pub fn compare(&self, la: &Layout, rhs: &Storage, lb: &Layout, cmp: Compare) -> Storage {
        #[allow(unreachable_patterns)]
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::cpu(a.compare(la, b, lb, cmp)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(a), Storage::Cuda(b)) => Storage::Cuda(
                a.compare(la, b, lb, cmp.name())
                    .unwrap_or_else(|e| fail(cmp.name(), e)),
            ),
            _ => on_host!(x = self, y = rhs; x.compare(la, &y, lb, cmp)),
        }
    }

    /// `cond ? a : b` over three views broadcast to one shape (a, b one dtype).
    pub fn select_where(
        cond: &Storage,
        lc: &Layout,
        a: &Storage,
        la: &Layout,
        b: &Storage,
        lb: &Layout,
    ) -> Storage {
        #[allow(unreachable_patterns)]
        match (cond, a, b) {
            (Storage::Cpu(c), Storage::Cpu(x), Storage::Cpu(y)) => {
                Storage::cpu(CpuBuffer::select_where(c, lc, x, la, y, lb))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(c), Storage::Cuda(x), Storage::Cuda(y)) => {
                let r = super::cuda::CudaStorage::select_where(c, lc, x, la, y, lb);
                Storage::Cuda(r.unwrap_or_else(|e| fail("where", e)))
            }
            _ => on_host!(x = a, c = cond, y = b; CpuBuffer::select_where(&c, lc, &x, la, &y, lb)),
        }
    }

    /// Sum over `dims` (floats keep their dtype, integers and bool sum to i64).
    pub fn sum(&self, l: &Layout, dims: &[usize]) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.sum(l, dims)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.sum(l, dims) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("sum", e))),
                None => self.map_host(|b| b.sum(l, dims)),
            },
        }
    }

    /// Sum of squares over `dims` in one pass where the device has it (the
    /// CPU, f32 and f64): `None` elsewhere, and the caller squares and sums.
    pub fn sum_squares(&self, l: &Layout, dims: &[usize]) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => b.sum_squares(l, dims).map(Storage::cpu),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Max (or min) values over one dim without indices (`amax`), where
    /// the device has a kernel for the view; `None` elsewhere (the caller
    /// takes [`Storage::extreme`]'s values).
    pub fn extreme_values(&self, l: &Layout, dim: usize, max: bool) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => b.extreme_values(l, dim, max).map(Storage::cpu),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The product over one dim, where the device has a kernel for the
    /// view (the CPU, f32 and f64); `None` elsewhere (the caller multiplies
    /// halves with `mul`).
    pub fn product(&self, l: &Layout, dim: usize) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => b.product(l, dim).map(Storage::cpu),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Max (or min) over one dim: values (same dtype) and i64 indices of the
    /// first extreme element; NaN wins, as in PyTorch.
    pub fn extreme(&self, l: &Layout, dim: usize, max: bool) -> (Storage, Storage) {
        let on_cpu = |b: &CpuBuffer| {
            let (v, i) = b.extreme(l, dim, max);
            (v, CpuBuffer::I64(i))
        };
        match self {
            Storage::Cpu(b) => {
                let (v, i) = on_cpu(b);
                (Storage::cpu(v), Storage::cpu(i))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.extreme(l, dim, max) {
                Some(r) => {
                    let (v, i) = r.unwrap_or_else(|e| fail(if max { "max" } else { "min" }, e));
                    (Storage::Cuda(v), Storage::Cuda(i))
                }
                None => {
                    let (v, i) = on_cpu(&self.host());
                    let d = self.device();
                    (Storage::on_device(v, d), Storage::on_device(i, d))
                }
            },
        }
    }

    /// `a @ b` for views `[batch.., m, k]` and `[batch.., k, n]` already
    /// broadcast to one batch shape.
    pub fn matmul(&self, la: &Layout, rhs: &Storage, lb: &Layout) -> Storage {
        #[allow(unreachable_patterns)]
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::cpu(a.matmul(la, b, lb)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(a), Storage::Cuda(b)) => match a.matmul(la, b, lb) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("matmul", e))),
                None => on_host!(x = self, y = rhs; x.matmul(la, &y, lb)),
            },
            _ => on_host!(x = self, y = rhs; x.matmul(la, &y, lb)),
        }
    }

    /// `self[l] += a @ b` in one GEMM for 2-D views, where the device has
    /// such a kernel (the CPU, in f32 and f64) and `l` is dense; `false`
    /// elsewhere (nothing written), and the caller composes matmul and add.
    pub fn matmul_accumulate(
        &mut self,
        l: &Layout,
        a: &Storage,
        la: &Layout,
        b: &Storage,
        lb: &Layout,
    ) -> bool {
        match (self, a, b) {
            (Storage::Cpu(d), Storage::Cpu(x), Storage::Cpu(y)) => {
                d.matmul_accumulate(l, x, la, y, lb)
            }
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// `a @ b + bias` in one pass for 2-D views and a 1-D bias, where the
    /// device has such a kernel (the CPU); `None` elsewhere, and the caller
    /// composes matmul and add.
    pub fn matmul_bias(
        &self,
        la: &Layout,
        rhs: &Storage,
        lb: &Layout,
        bias: &Storage,
        lbias: &Layout,
    ) -> Option<Storage> {
        match (self, rhs, bias) {
            (Storage::Cpu(a), Storage::Cpu(b), Storage::Cpu(c)) => {
                Some(Storage::cpu(a.matmul_bias(la, b, lb, c, lbias)))
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Softmax (or log-softmax) over the last dim of the view; contiguous result.
    pub fn softmax(&self, l: &Layout, log: bool) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.softmax(l, log)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.softmax(l, log) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("softmax", e))),
                None => self.map_host(|b| b.softmax(l, log)),
            },
        }
    }

    /// Softmax (or log-softmax) over a dim that is not the last, where the
    /// device has a kernel for the view; `None` elsewhere (the caller moves
    /// the dim last for [`Storage::softmax`]).
    pub fn softmax_columns(&self, l: &Layout, dim: usize, log: bool) -> Option<Storage> {
        match self {
            Storage::Cpu(b) => b.softmax_columns(l, dim, log).map(Storage::cpu),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Whether a fused program may hold dropout here: the CPU's masks are
    /// Philox streams a program recomputes per element (a GPU's dropout
    /// draws with `bernoulli`, which programs do not do).
    pub fn fuses_dropout(&self) -> bool {
        matches!(self, Storage::Cpu(_))
    }

    /// Runs the elementwise program `p` over `n` elements of dense f32
    /// inputs (a `Cycle` input is read at `i % len`), its dropouts keyed by
    /// `seeds`: one dense f32 storage per output, on `device`.
    pub fn run_program(
        p: &Program,
        inputs: &[ProgramInput],
        seeds: &[u64],
        n: usize,
        device: crate::Device,
    ) -> Vec<Storage> {
        fn storage<'a>(i: &ProgramInput<'a>) -> &'a Storage {
            match *i {
                ProgramInput::Full(s) | ProgramInput::Cycle(s) => s,
            }
        }
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Some(Storage::Cuda(_)) = inputs.first().map(storage) {
            let bufs: Vec<(&tapir_kernels::cuda::CudaBuffer, usize)> = inputs
                .iter()
                .map(|i| match storage(i) {
                    Storage::Cuda(c) => (&c.buf, storage(i).len()),
                    Storage::Cpu(_) => {
                        panic!("compile: a fused program's inputs are on one device")
                    }
                })
                .collect();
            let outs = tapir_kernels::cuda::launch::run_program(p, &bufs, n)
                .unwrap_or_else(|e| fail("a fused elementwise kernel", e));
            return outs
                .into_iter()
                .map(|b| Storage::Cuda(super::cuda::CudaStorage::f32(b)))
                .collect();
        }
        let hosts: Vec<std::borrow::Cow<'_, CpuBuffer>> =
            inputs.iter().map(|i| storage(i).host()).collect();
        let operands: Vec<Operand> = inputs
            .iter()
            .zip(&hosts)
            .map(|(i, h)| {
                let CpuBuffer::F32(v) = &**h else {
                    panic!("compile: a fused program takes f32 inputs");
                };
                match i {
                    ProgramInput::Full(_) => Operand::Full(v),
                    ProgramInput::Cycle(_) => Operand::Cycle(v),
                }
            })
            .collect();
        let outs = run_program(p, &operands, seeds, n);
        outs.into_iter()
            .map(|v| Storage::on_device(CpuBuffer::F32(v), device))
            .collect()
    }

    /// Whether this device has the fused scaled, causal softmax (the CPU;
    /// `compile` rewrites `x * scale`, the causal mask and `softmax` to it).
    pub fn fuses_scaled_softmax(&self) -> bool {
        matches!(self, Storage::Cpu(_))
    }

    /// Softmax over the last dim of `scale * x` for the view `l`, the keys
    /// after each query masked when `causal` (rows are queries `r %
    /// queries`); dense result. Callers ask `fuses_scaled_softmax` first;
    /// elsewhere it runs on a host copy.
    pub fn scaled_softmax(&self, l: &Layout, queries: usize, scale: f64, causal: bool) -> Storage {
        self.map_host(|b| b.scaled_softmax(l, queries, scale, causal))
    }

    /// The input gradient of [`Storage::scaled_softmax`] from its dense
    /// output (this storage) and the upstream gradient `g` (view `lg`).
    pub fn scaled_softmax_backward(&self, g: &Storage, lg: &Layout, scale: f64) -> Storage {
        let g = g.host();
        self.map_host(|y| y.scaled_softmax_backward(&g, lg, scale))
    }

    /// `ln(sum(exp(x)))` over the last dim of the view `l` (not empty), one
    /// value per row, in one pass. Callers ask `fuses_scaled_softmax` first;
    /// elsewhere it runs on a host copy.
    pub fn logsumexp_rows(&self, l: &Layout) -> Storage {
        self.map_host(|b| b.logsumexp_rows(l))
    }

    /// The input gradient of log-softmax over the last dim from its dense
    /// output (this storage) and the upstream gradient `g` (view `lg`), in
    /// one pass per row. Callers ask `fuses_scaled_softmax` first.
    pub fn log_softmax_backward(&self, g: &Storage, lg: &Layout) -> Storage {
        let g = g.host();
        self.map_host(|y| y.log_softmax_backward(&g, lg))
    }

    /// `Σ x²` of each view, in one parallel job over all of them (gradient
    /// clipping's norms), where every view is a dense f32 view on the CPU;
    /// `None` otherwise, and the caller composes `x * x` and `sum`.
    pub fn sum_squares_many(items: &[(&Storage, &Layout)]) -> Option<Vec<f64>> {
        let slices = items
            .iter()
            .map(|(s, l)| match (*s, l.contiguous_offset()) {
                (Storage::Cpu(b), Some(off)) => match &**b {
                    CpuBuffer::F32(v) => Some(&v[off..off + l.numel()]),
                    _ => None,
                },
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .collect::<Option<Vec<&[f32]>>>()?;
        Some(tapir_kernels::cpu::sum_squares_many(&slices))
    }

    /// `x *= k` over each view, in one parallel job, where every view is a
    /// dense f32 view on the CPU (returns whether it did; otherwise nothing
    /// changed and the caller scales each tensor itself).
    pub fn scale_many(items: &mut [(&mut Storage, &Layout)], k: f32) -> bool {
        let mut slices: Vec<&mut [f32]> = Vec::with_capacity(items.len());
        for (s, l) in items.iter_mut() {
            let Some(off) = l.contiguous_offset() else {
                return false;
            };
            match &mut **s {
                Storage::Cpu(b) => match &mut **b {
                    CpuBuffer::F32(v) => slices.push(&mut v[off..off + l.numel()]),
                    _ => return false,
                },
                #[allow(unreachable_patterns)]
                _ => return false,
            }
        }
        tapir_kernels::cpu::scale_many(&mut slices, k);
        true
    }

    /// LayerNorm of the first `rows * n` elements (dense, rows of `n`), with
    /// optional weight and bias of `n` elements, all of this dtype: the
    /// output, and the per-row mean and 1/std the backward takes (f64 for
    /// f64, f32 otherwise).
    pub fn layer_norm(
        &self,
        rows: usize,
        n: usize,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        eps: f64,
    ) -> [Storage; 3] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Storage::Cuda(x) = self
            && let Some(r) = x.layer_norm(rows, n, cuda(weight), cuda(bias), eps)
        {
            return r
                .unwrap_or_else(|e| fail("layer_norm", e))
                .map(Storage::Cuda);
        }
        // The CPU kernel, on the buffers themselves or on host copies.
        let (w, b) = (weight.map(|s| s.host()), bias.map(|s| s.host()));
        let out = self
            .host()
            .layer_norm(rows, n, w.as_deref(), b.as_deref(), eps);
        out.map(|o| Storage::on_device(o, self.device()))
    }

    /// `s = self + residual` (both dense, `rows * n` elements, one dtype)
    /// and LayerNorm of `s` as [`Storage::layer_norm`]: `[s, y, mean,
    /// rstd]`. One pass per row on the CPU; on a GPU the add and the norm
    /// kernels one after the other.
    pub fn add_layer_norm(
        &self,
        residual: &Storage,
        rows: usize,
        n: usize,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        eps: f64,
    ) -> [Storage; 4] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Storage::Cuda(_) = self {
            let l = Layout::contiguous(&[rows * n]);
            let sum = self.binary(&l, residual, &l, &tapir_kernels::elementwise::Add);
            let [y, mean, rstd] = sum.layer_norm(rows, n, weight, bias, eps);
            return [sum, y, mean, rstd];
        }
        let (w, b) = (weight.map(|s| s.host()), bias.map(|s| s.host()));
        let out =
            self.host()
                .add_layer_norm(&residual.host(), rows, n, w.as_deref(), b.as_deref(), eps);
        out.map(|o| Storage::on_device(o, self.device()))
    }

    /// LayerNorm's gradients `[dx, dw, db]` (this dtype; `dw`, `db` summed
    /// over rows) for this dense input, the dense upstream `g`, the forward's
    /// `mean` and `rstd`, and the optional weight.
    pub fn layer_norm_backward(
        &self,
        g: &Storage,
        mean: &Storage,
        rstd: &Storage,
        weight: Option<&Storage>,
        rows: usize,
        n: usize,
    ) -> [Storage; 3] {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let (Storage::Cuda(x), Storage::Cuda(gs), Storage::Cuda(m), Storage::Cuda(r)) =
            (self, g, mean, rstd)
            && let Some(out) = x.layer_norm_backward(gs, m, r, cuda(weight), rows, n)
        {
            return out
                .unwrap_or_else(|e| fail("layer_norm backward", e))
                .map(Storage::Cuda);
        }
        // The CPU kernel, on the buffers themselves or on host copies.
        let w = weight.map(|s| s.host());
        let out = self.host().layer_norm_backward(
            &g.host(),
            &mean.host(),
            &rstd.host(),
            w.as_deref(),
            rows,
            n,
        );
        out.map(|o| Storage::on_device(o, self.device()))
    }

    /// im2col of the `[n, c, h, w]` view (`pad` for taps in the padding);
    /// same dtype.
    pub fn im2col(&self, l: &Layout, g: &Conv2dGeometry, pad: f64) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.im2col(l, g, pad)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.im2col(l, g, pad) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("im2col", e))),
                None => self.map_host(|b| b.im2col(l, g, pad)),
            },
        }
    }

    /// The convolution forward of the `[n, c, h, w]` view by weight `w`
    /// (`+ bias`) without materialising im2col's columns, where a kernel
    /// runs it: on the CPU in f32 and f64; `None` elsewhere (the op then
    /// lowers to im2col and GEMM).
    pub fn conv2d_forward(
        &self,
        l: &Layout,
        (w, lw): (&Storage, &Layout),
        bias: Option<(&Storage, &Layout)>,
        s: &ConvSpec,
    ) -> Option<Storage> {
        let out = match (self, w, bias) {
            (Storage::Cpu(x), Storage::Cpu(w), None) => x.conv2d_forward(l, (w, lw), None, s),
            (Storage::Cpu(x), Storage::Cpu(w), Some((Storage::Cpu(b), lb))) => {
                x.conv2d_forward(l, (w, lw), Some((b, lb)), s)
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            _ => None,
        };
        out.map(Storage::cpu)
    }

    /// col2im (im2col's adjoint) of the `[n, c*kh*kw, oh*ow]` view; same dtype.
    pub fn col2im(&self, l: &Layout, g: &Conv2dGeometry) -> Storage {
        match self {
            Storage::Cpu(b) => Storage::cpu(b.col2im(l, g)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.col2im(l, g) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("col2im", e))),
                None => self.map_host(|b| b.col2im(l, g)),
            },
        }
    }

    /// Max pooling of the `[n, c, h, w]` view: the `[n, c, oh, ow]` maxima
    /// (same dtype) and each one's flat argmax `ih * w + iw` in its plane (i64).
    pub fn max_pool2d(&self, l: &Layout, g: &Conv2dGeometry) -> (Storage, Storage) {
        let on_cpu = |b: &CpuBuffer| {
            let (v, i) = b.max_pool2d(l, g);
            (v, CpuBuffer::I64(i))
        };
        match self {
            Storage::Cpu(b) => {
                let (v, i) = on_cpu(b);
                (Storage::cpu(v), Storage::cpu(i))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            Storage::Cuda(s) => match s.max_pool2d(l, g) {
                Some(r) => {
                    let (v, i) = r.unwrap_or_else(|e| fail("max_pool2d", e));
                    (Storage::Cuda(v), Storage::Cuda(i))
                }
                None => {
                    let (v, i) = on_cpu(&self.host());
                    let d = self.device();
                    (Storage::on_device(v, d), Storage::on_device(i, d))
                }
            },
        }
    }

    /// The gradient of [`Storage::max_pool2d`] from this `[n, c, oh, ow]`
    /// gradient view and the forward's dense indices: an `[n, c, h, w]` image.
    pub fn max_pool2d_backward(&self, l: &Layout, idx: &Storage, g: &Conv2dGeometry) -> Storage {
        #[allow(unreachable_patterns)]
        match (self, idx) {
            (Storage::Cpu(b), Storage::Cpu(i)) => Storage::cpu(b.max_pool2d_backward(l, i, g)),
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(s), Storage::Cuda(i)) => match s.max_pool2d_backward(l, i, g) {
                Some(r) => Storage::Cuda(r.unwrap_or_else(|e| fail("max_pool2d backward", e))),
                None => self.map_host(|b| b.max_pool2d_backward(l, &idx.host(), g)),
            },
            _ => unreachable!("max_pool2d backward: gradient and indices share a device"),
        }
    }

    /// `torch.gather` (`per_element`: one index per output element, an i64
    /// storage at `il`, the view's shape, any strides) or `index_select`
    /// (one index per position along the dim, a dense i64 storage of that
    /// length), reading this storage through `along`; contiguous output of
    /// the view's shape.
    pub fn gather(
        &self,
        along: Along<'_>,
        (idx, il): (&Storage, &Layout),
        per_element: bool,
    ) -> Storage {
        #[allow(unreachable_patterns)]
        match (self, idx) {
            (Storage::Cpu(x), Storage::Cpu(i)) => {
                Storage::cpu(x.gather(along, (i, il), per_element))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(x), Storage::Cuda(i)) => {
                let dense = dense_index(i, il).unwrap_or_else(|e| fail(along.op, e));
                Storage::Cuda(
                    x.gather(along, dense.as_ref().unwrap_or(i), per_element)
                        .unwrap_or_else(|e| fail(along.op, e)),
                )
            }
            _ => on_host!(x = self, i = idx; x.gather(along, (&i, il), per_element)),
        }
    }

    /// The scatter of `mode`, in place (the sum is gather's adjoint):
    /// combines `src` (its view at the index's shape) into this storage at
    /// the positions `along` and the i64 index (at `il`, that shape, any
    /// strides) name.
    /// Assignment works in every dtype; the reductions in f32, f64, int64
    /// and uint8 (on a GPU in f32, the rest through the host).
    pub fn scatter(
        &mut self,
        along: Along<'_>,
        src: &Storage,
        ls: &Layout,
        (idx, il): (&Storage, &Layout),
        mode: ScatterMode,
    ) {
        #[allow(unreachable_patterns)]
        match (&mut *self, src, idx) {
            (Storage::Cpu(d), Storage::Cpu(s), Storage::Cpu(i)) => {
                d.scatter(along, s, ls, (i, il), mode)
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s), Storage::Cuda(i)) if d.can_scatter(mode) => {
                let dense = dense_index(i, il).unwrap_or_else(|e| fail(along.op, e));
                d.scatter(along, s, ls, dense.as_ref().unwrap_or(i), mode)
                    .unwrap_or_else(|e| fail(along.op, e))
            }
            _ => {
                let (s, i) = (src.host(), idx.host());
                self.host_mut().scatter(along, &s, ls, (&i, il), mode)
            }
        }
    }

    /// index_select's adjoint, in place: adds the dense `[outer, len, inner]`
    /// `src` into this f32 or f64 `[outer, size, inner]` storage at rows
    /// `idx` (a dense i64 storage of `len` indices below `size`; an index
    /// out of range is reported as `op`'s).
    pub fn index_add(
        &mut self,
        shape: [usize; 3],
        src: &Storage,
        idx: &Storage,
        (len, op): (usize, &'static str),
    ) {
        #[allow(unreachable_patterns)]
        match (&mut *self, src, idx) {
            (Storage::Cpu(d), Storage::Cpu(s), Storage::Cpu(i)) => {
                d.index_add(shape, s, i, (len, op))
            }
            #[cfg(any(feature = "cuda", feature = "cuda12"))]
            (Storage::Cuda(d), Storage::Cuda(s), Storage::Cuda(i)) if d.dtype == DType::F32 => d
                .index_add(shape, s, i, (len, op))
                .unwrap_or_else(|e| fail(op, e)),
            _ => {
                let (s, i) = (src.host(), idx.host());
                self.host_mut().index_add(shape, &s, &i, (len, op))
            }
        }
    }
}

/// A copy of the index at `il`, dense from offset 0, where it is not so
/// already: the GPU kernels read dense indices, the CPU's any strides (an
/// expanded index is read in place there).
#[cfg(any(feature = "cuda", feature = "cuda12"))]
fn dense_index(
    idx: &super::cuda::CudaStorage,
    il: &Layout,
) -> Result<Option<super::cuda::CudaStorage>, tapir_kernels::cuda::CudaError> {
    if il.contiguous_offset() == Some(0) {
        return Ok(None);
    }
    idx.copy(il).map(Some)
}
