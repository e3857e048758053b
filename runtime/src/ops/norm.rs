//! Layer normalisation: a fused kernel, because the composite (mean, var,
//! sub, mul, add) makes ~8 passes over the activations; its backward is the
//! closed form, checked against PyTorch and by finite differences.

use super::creation::filled_on;
use super::dense0;
use crate::storage::CpuBuffer;
use crate::{DType, Tensor};
use tapir_kernels::cpu;

impl Tensor {
    /// `F.layer_norm` over the trailing `normalized` dims, with optional
    /// elementwise affine weight and bias of that shape.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 6.0], &[2, 2]);
    /// let y = x.layer_norm(&[2], None, None, 0.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0, -1.0, 1.0]);
    /// ```
    pub fn layer_norm(
        &self,
        normalized: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        let nd = self.ndim();
        assert!(
            normalized.len() <= nd && self.shape()[nd - normalized.len()..] == *normalized,
            "layer_norm: input of shape {:?} does not end with normalized shape {normalized:?}",
            self.shape()
        );
        for (what, t) in [("weight", weight), ("bias", bias)] {
            if let Some(t) = t {
                assert_eq!(
                    t.shape(),
                    normalized,
                    "layer_norm: {what} has shape {:?}, expected {normalized:?}",
                    t.shape()
                );
                assert_eq!(
                    t.dtype(),
                    self.dtype(),
                    "layer_norm: {what} is {}, input is {}",
                    t.dtype(),
                    self.dtype()
                );
            }
        }
        assert!(
            self.dtype().is_float(),
            "layer_norm: expects a float input, got {}",
            self.dtype()
        );
        let d: usize = normalized.iter().product();
        let dtype = self.dtype();
        if self.device().is_cuda()
            && let Some(y) = self.layer_norm_gpu(normalized, weight, bias, eps, d)
        {
            return y;
        }
        // f16/bf16 normalise in f32, as PyTorch's CPU kernel accumulates in float.
        let compute = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        // Dense views (no copy when already dense); the kernels read them at their offsets.
        let dense = |t: &Tensor| t.to_dtype(compute).detach().contiguous();
        let x = dense0(self);
        let w = weight.map(dense);
        let b = bias.map(dense);
        let (y, mean, rstd) = {
            let (xs, ws, bs) = (
                x.read(),
                w.as_ref().map(|t| t.read()),
                b.as_ref().map(|t| t.read()),
            );
            let xs = xs.host();
            let ws = ws.as_ref().map(|s| s.host());
            let bs = bs.as_ref().map(|s| s.host());
            match &*xs {
                CpuBuffer::F64(_) => {
                    let f = cpu::layer_norm_rows(
                        f64s(&xs, &x),
                        d,
                        ws.as_ref().zip(w.as_ref()).map(|(s, t)| f64s(s, t)),
                        bs.as_ref().zip(b.as_ref()).map(|(s, t)| f64s(s, t)),
                        eps,
                    );
                    (
                        CpuBuffer::F64(f.y),
                        CpuBuffer::F64(f.mean),
                        CpuBuffer::F64(f.rstd),
                    )
                }
                CpuBuffer::F32(_) => {
                    let f = cpu::layer_norm_rows(
                        f32s(&xs, &x),
                        d,
                        ws.as_ref().zip(w.as_ref()).map(|(s, t)| f32s(s, t)),
                        bs.as_ref().zip(b.as_ref()).map(|(s, t)| f32s(s, t)),
                        eps,
                    );
                    (
                        CpuBuffer::F32(f.y),
                        CpuBuffer::F32(f.mean),
                        CpuBuffer::F32(f.rstd),
                    )
                }
                _ => unreachable!("computed in f32 or f64"),
            }
        };
        let out = Tensor::from_buffer_on(y, self.shape(), self.device())
            .to_dtype(dtype)
            .detach();
        let rows = self.numel() / d.max(1);
        let mean = Tensor::from_buffer_on(mean, &[rows], self.device());
        let rstd = Tensor::from_buffer_on(rstd, &[rows], self.device());
        let empty = Tensor::zeros(&[0]);
        let inputs = [self, weight.unwrap_or(&empty), bias.unwrap_or(&empty)];
        let shape = self.shape().to_vec();
        let norm_shape = normalized.to_vec();
        Tensor::record(out, "NativeLayerNormBackward0", &inputs, move || {
            move |g: &Tensor, needs: &[bool]| {
                let gc = g.to_dtype(compute).contiguous();
                let (gs, xs, ms, rs) = (gc.read(), x.read(), mean.read(), rstd.read());
                let ws = w.as_ref().map(|t| t.read());
                let ws = ws.as_ref().map(|s| s.host());
                let (gs, xs, ms, rs) = (gs.host(), xs.host(), ms.host(), rs.host());
                let (dx, dw, db) = match (&*xs, &*gs, &*ms, &*rs) {
                    (
                        CpuBuffer::F64(_),
                        CpuBuffer::F64(_),
                        CpuBuffer::F64(m),
                        CpuBuffer::F64(r),
                    ) => {
                        let (a, b, c) = cpu::layer_norm_backward_rows(
                            f64s(&xs, &x),
                            f64s(&gs, &gc),
                            d,
                            m,
                            r,
                            ws.as_ref().zip(w.as_ref()).map(|(s, t)| f64s(s, t)),
                        );
                        (CpuBuffer::F64(a), CpuBuffer::F64(b), CpuBuffer::F64(c))
                    }
                    (
                        CpuBuffer::F32(_),
                        CpuBuffer::F32(_),
                        CpuBuffer::F32(m),
                        CpuBuffer::F32(r),
                    ) => {
                        let (a, b, c) = cpu::layer_norm_backward_rows(
                            f32s(&xs, &x),
                            f32s(&gs, &gc),
                            d,
                            m,
                            r,
                            ws.as_ref().zip(w.as_ref()).map(|(s, t)| f32s(s, t)),
                        );
                        (CpuBuffer::F32(a), CpuBuffer::F32(b), CpuBuffer::F32(c))
                    }
                    _ => unreachable!("computed in f32 or f64"),
                };
                let back = |buf: CpuBuffer, s: &[usize]| {
                    Tensor::from_buffer_on(buf, s, g.device()).to_dtype(g.dtype())
                };
                vec![
                    needs[0].then(|| back(dx, &shape)),
                    needs[1].then(|| back(dw, &norm_shape)),
                    needs[2].then(|| back(db, &norm_shape)),
                ]
            }
        })
    }
}

impl Tensor {
    /// LayerNorm on a GPU: the fused forward kernel, and the closed-form
    /// backward composed of tensor ops (all with GPU kernels), in f32.
    /// `None` where the dtype has no kernel (f64).
    fn layer_norm_gpu(
        &self,
        normalized: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        d: usize,
    ) -> Option<Tensor> {
        let x = dense0(self);
        // The kernel takes weight and bias together.
        let affine = match (weight, bias) {
            (None, None) => None,
            (w, b) => Some((
                w.map_or_else(|| filled_on(&[d], 1.0, self.dtype(), self.device()), dense0),
                b.map_or_else(|| filled_on(&[d], 0.0, self.dtype(), self.device()), dense0),
            )),
        };
        let (y, mean, rstd) = {
            let xs = x.read();
            let ab = affine.as_ref().map(|(w, b)| (w.read(), b.read()));
            xs.layer_norm_gpu(ab.as_ref().map(|(w, b)| (&**w, &**b)), d, eps)?
        };
        let rows = self.numel() / d.max(1);
        let out = Tensor::from_storage(y, self.shape());
        let mean = Tensor::from_storage(mean, &[rows, 1]);
        let rstd = Tensor::from_storage(rstd, &[rows, 1]);
        let empty = Tensor::zeros(&[0]);
        let inputs = [self, weight.unwrap_or(&empty), bias.unwrap_or(&empty)];
        let shape = self.shape().to_vec();
        let norm_shape: Vec<isize> = normalized.iter().map(|&s| s as isize).collect();
        let w32 = weight.map(|w| w.detach().to_dtype(DType::F32).reshape(&[1, d as isize]));
        Some(Tensor::record(
            out,
            "NativeLayerNormBackward0",
            &inputs,
            move || {
                move |g: &Tensor, needs: &[bool]| {
                    let rd = [rows as isize, d as isize];
                    let g32 = g.to_dtype(DType::F32).reshape(&rd);
                    let xhat = &(&x.to_dtype(DType::F32).reshape(&rd) - &mean) * &rstd;
                    let gw = match &w32 {
                        Some(w) => &g32 * w,
                        None => g32.clone(),
                    };
                    let inv_d = 1.0 / d as f64;
                    let dx = needs[0].then(|| {
                        let a = &gw.sum_dim(-1, true) * inv_d;
                        let b = &(&gw * &xhat).sum_dim(-1, true) * inv_d;
                        let shape: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
                        (&(&(&gw - &a) - &(&xhat * &b)) * &rstd)
                            .reshape(&shape)
                            .to_dtype(g.dtype())
                    });
                    let dw = needs[1].then(|| {
                        (&g32 * &xhat)
                            .sum_dim(0, false)
                            .reshape(&norm_shape)
                            .to_dtype(g.dtype())
                    });
                    let db = needs[2].then(|| {
                        g32.sum_dim(0, false)
                            .reshape(&norm_shape)
                            .to_dtype(g.dtype())
                    });
                    vec![dx, dw, db]
                }
            },
        ))
    }
}

/// The elements of a dense `t` inside its buffer `b`, as f64.
fn f64s<'a>(b: &'a CpuBuffer, t: &Tensor) -> &'a [f64] {
    let (o, n) = (t.layout().offset, t.numel());
    match b {
        CpuBuffer::F64(v) => &v[o..o + n],
        _ => unreachable!("cast to f64 above"),
    }
}

/// The elements of a dense `t` inside its buffer `b`, as f32.
fn f32s<'a>(b: &'a CpuBuffer, t: &Tensor) -> &'a [f32] {
    let (o, n) = (t.layout().offset, t.numel());
    match b {
        CpuBuffer::F32(v) => &v[o..o + n],
        _ => unreachable!("cast to f32 above"),
    }
}
