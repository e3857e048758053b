//! The CPU buffer's windowed kernels: im2col and col2im, the tiled
//! convolution forward, and max pooling with its backward.

use super::cpu::{CpuBuffer, contiguous};
use tapir_kernels::{Conv2dGeometry, ConvSpec, Layout, cpu};

impl CpuBuffer {
    /// im2col of the `[n, c, h, w]` view.
    pub fn im2col(&self, l: &Layout, g: &Conv2dGeometry, pad: f64) -> CpuBuffer {
        match self {
            CpuBuffer::F64(v) => CpuBuffer::F64(cpu::im2col(&contiguous(v, l), g, pad)),
            CpuBuffer::F32(v) => CpuBuffer::F32(cpu::im2col(&contiguous(v, l), g, pad as f32)),
            other => {
                let v: Vec<f32> = other.to_vec(l);
                CpuBuffer::F32(cpu::im2col(&v, g, pad as f32)).into_dtype(other.dtype())
            }
        }
    }

    /// The tiled convolution forward of the `[n, c, h, w]` view by weight
    /// `w` (`+ bias`), in f32 and f64 (`None` for other dtypes).
    pub fn conv2d_forward(
        &self,
        l: &Layout,
        (w, lw): (&CpuBuffer, &Layout),
        bias: Option<(&CpuBuffer, &Layout)>,
        s: &ConvSpec,
    ) -> Option<CpuBuffer> {
        fn run<T: tapir_kernels::Float>(
            (x, l): (&[T], &Layout),
            (w, lw): (&[T], &Layout),
            bias: Option<(&[T], &Layout)>,
            s: &ConvSpec,
        ) -> Vec<T> {
            let b = bias.map(|(b, lb)| contiguous(b, lb));
            let (x, w) = (contiguous(x, l), contiguous(w, lw));
            cpu::conv2d_forward(&x, &w, b.as_deref(), s)
        }
        use CpuBuffer::{F32, F64};
        Some(match (self, w, bias) {
            (F32(x), F32(w), None) => F32(run((x, l), (w, lw), None, s)),
            (F32(x), F32(w), Some((F32(b), lb))) => F32(run((x, l), (w, lw), Some((b, lb)), s)),
            (F64(x), F64(w), None) => F64(run((x, l), (w, lw), None, s)),
            (F64(x), F64(w), Some((F64(b), lb))) => F64(run((x, l), (w, lw), Some((b, lb)), s)),
            _ => return None,
        })
    }

    /// col2im of the `[n, c*kh*kw, oh*ow]` view.
    pub fn col2im(&self, l: &Layout, g: &Conv2dGeometry) -> CpuBuffer {
        match self {
            CpuBuffer::F64(v) => CpuBuffer::F64(cpu::col2im(&contiguous(v, l), g)),
            CpuBuffer::F32(v) => CpuBuffer::F32(cpu::col2im(&contiguous(v, l), g)),
            other => {
                let v: Vec<f32> = other.to_vec(l);
                CpuBuffer::F32(cpu::col2im(&v, g)).into_dtype(other.dtype())
            }
        }
    }

    /// Max pooling of the `[n, c, h, w]` view: maxima and flat plane argmaxes
    /// (half types compare in f32, which is exact).
    pub fn max_pool2d(&self, l: &Layout, g: &Conv2dGeometry) -> (CpuBuffer, Vec<i64>) {
        match self {
            CpuBuffer::F64(v) => {
                let (v, i) = cpu::max_pool2d(&contiguous(v, l), g);
                (CpuBuffer::F64(v), i)
            }
            CpuBuffer::F32(v) => {
                let (v, i) = cpu::max_pool2d(&contiguous(v, l), g);
                (CpuBuffer::F32(v), i)
            }
            other => {
                let x: Vec<f32> = other.to_vec(l);
                let (v, i) = cpu::max_pool2d(&x, g);
                (CpuBuffer::F32(v).into_dtype(other.dtype()), i)
            }
        }
    }

    /// The gradient of `max_pool2d` from the `[n, c, oh, ow]` gradient view
    /// and the forward's dense i64 indices.
    pub fn max_pool2d_backward(
        &self,
        l: &Layout,
        idx: &CpuBuffer,
        g: &Conv2dGeometry,
    ) -> CpuBuffer {
        let CpuBuffer::I64(idx) = idx else {
            unreachable!("max_pool2d indices are i64")
        };
        let (planes, plane) = (g.n * g.c, g.h * g.w);
        match self {
            CpuBuffer::F64(v) => CpuBuffer::F64(cpu::max_pool2d_backward(
                &contiguous(v, l),
                idx,
                planes,
                plane,
            )),
            CpuBuffer::F32(v) => CpuBuffer::F32(cpu::max_pool2d_backward(
                &contiguous(v, l),
                idx,
                planes,
                plane,
            )),
            other => {
                let gv: Vec<f32> = other.to_vec(l);
                CpuBuffer::F32(cpu::max_pool2d_backward(&gv, idx, planes, plane))
                    .into_dtype(other.dtype())
            }
        }
    }
}
