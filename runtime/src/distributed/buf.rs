//! The flat buffers collectives carry: a host copy of a tensor's elements
//! for MPI, or, under NCCL, a fresh contiguous tensor on the GPU that NCCL
//! works on in place (no host round trip).

use crate::{DType, Result, Tensor};

/// A tensor's elements as MPI sends them.
pub(crate) enum HostBuf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// What a collective works on.
pub(crate) enum Buf {
    /// Elements copied to the host (the MPI engine).
    Host(HostBuf),
    /// A 1-D contiguous tensor of its own on the NCCL engine's GPU.
    Device(Tensor),
}

impl HostBuf {
    fn of(t: &Tensor, op: &str) -> HostBuf {
        match t.dtype() {
            DType::F32 => HostBuf::F32(t.to_vec()),
            DType::F64 => HostBuf::F64(t.to_vec()),
            DType::I64 => HostBuf::I64(t.to_vec()),
            d => panic!(
                "{op}: the MPI backend carries f32, f64 and i64 tensors, not {d:?}; convert with to_dtype first"
            ),
        }
    }

    /// `n` zeros of `dtype`: a bucket's buffer, made once and reused at
    /// every step (fresh pages each step cost more than the copies).
    pub(crate) fn zeros(dtype: DType, n: usize, op: &str) -> HostBuf {
        match dtype {
            DType::F32 => HostBuf::F32(vec![0.0; n]),
            DType::F64 => HostBuf::F64(vec![0.0; n]),
            DType::I64 => HostBuf::I64(vec![0; n]),
            d => panic!(
                "{op}: the MPI backend carries f32, f64 and i64 tensors, not {d:?}; convert with to_dtype first"
            ),
        }
    }

    /// Copies `t`'s elements over `self[at..at + n]`, or zeros where `t` is
    /// `None` (a gradient this rank did not produce).
    pub(crate) fn fill(&mut self, at: usize, n: usize, t: Option<&Tensor>) {
        match (self, t) {
            (HostBuf::F32(v), Some(t)) => t.read_into(&mut v[at..at + n]),
            (HostBuf::F64(v), Some(t)) => t.read_into(&mut v[at..at + n]),
            (HostBuf::I64(v), Some(t)) => t.read_into(&mut v[at..at + n]),
            (HostBuf::F32(v), None) => v[at..at + n].fill(0.0),
            (HostBuf::F64(v), None) => v[at..at + n].fill(0.0),
            (HostBuf::I64(v), None) => v[at..at + n].fill(0),
        }
    }

    /// Writes `self[range] · scale` over `t` in place (`false` where `t` is
    /// not a dense CPU tensor of this dtype: then nothing is written).
    pub(crate) fn write_to(&self, range: std::ops::Range<usize>, t: &Tensor, scale: f64) -> bool {
        match self {
            HostBuf::F32(v) => t.write_scaled(&v[range], scale),
            HostBuf::F64(v) => t.write_scaled(&v[range], scale),
            HostBuf::I64(v) => t.write_scaled(&v[range], scale),
        }
    }

    pub(crate) fn dtype(&self) -> DType {
        match self {
            HostBuf::F32(_) => DType::F32,
            HostBuf::F64(_) => DType::F64,
            HostBuf::I64(_) => DType::I64,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            HostBuf::F32(v) => v.len(),
            HostBuf::F64(v) => v.len(),
            HostBuf::I64(v) => v.len(),
        }
    }
}

impl Buf {
    /// `t`'s elements, where the running engine takes them: on the GPU when
    /// the group runs NCCL (which carries only CUDA tensors), else on the host.
    pub(crate) fn of(t: &Tensor, op: &str) -> Buf {
        if !super::uses_nccl() {
            return Buf::Host(HostBuf::of(t, op));
        }
        let device = super::nccl_device_for(op);
        assert!(
            t.device() == device,
            "{op}: the NCCL process group runs on {device} but the tensor is on {}; NCCL carries tensors on the \
             group's GPU (move it with .to(), or use Backend::Mpi for CPU tensors)",
            t.device()
        );
        Buf::Device(t.detach().contiguous_copy().reshape(&[-1]))
    }

    /// `like.numel()` zeros of `like`'s dtype (a gradient this rank did not produce).
    pub(crate) fn zeros(like: &Tensor, op: &str) -> Buf {
        Buf::of(
            &Tensor::zeros_on(&[like.numel()], like.dtype(), like.device()),
            op,
        )
    }

    /// Appends `other` (same dtype, same engine).
    pub(crate) fn append(&mut self, other: Buf) {
        match (self, other) {
            (Buf::Host(HostBuf::F32(a)), Buf::Host(HostBuf::F32(b))) => a.extend(b),
            (Buf::Host(HostBuf::F64(a)), Buf::Host(HostBuf::F64(b))) => a.extend(b),
            (Buf::Host(HostBuf::I64(a)), Buf::Host(HostBuf::I64(b))) => a.extend(b),
            (Buf::Device(a), Buf::Device(b)) if a.dtype() == b.dtype() => {
                *a = Tensor::cat(&[&*a, &b], 0);
            }
            _ => panic!("reduce_scatter: every input must have one dtype"),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Buf::Host(h) => h.len(),
            Buf::Device(t) => t.numel(),
        }
    }

    pub(crate) fn scale(&mut self, by: f64) {
        match self {
            Buf::Host(HostBuf::F32(v)) => v.iter_mut().for_each(|x| *x *= by as f32),
            Buf::Host(HostBuf::F64(v)) => v.iter_mut().for_each(|x| *x *= by),
            Buf::Host(HostBuf::I64(_)) => unreachable!("Avg is refused for integer tensors"),
            Buf::Device(t) => {
                crate::no_grad(|| {
                    t.mul_scalar_(by);
                });
            }
        }
    }

    /// Elements `range` as a tensor of `shape` on `like`'s device.
    pub(crate) fn tensor(
        &self,
        range: std::ops::Range<usize>,
        shape: &[usize],
        like: &Tensor,
    ) -> Result<Tensor> {
        let t = match self {
            Buf::Host(HostBuf::F32(v)) => Tensor::from_slice(&v[range], shape),
            Buf::Host(HostBuf::F64(v)) => Tensor::from_slice(&v[range], shape),
            Buf::Host(HostBuf::I64(v)) => Tensor::from_slice(&v[range], shape),
            Buf::Device(t) => {
                // A tensor of its own, not a view into the bucket: optimizers
                // and in-place accumulation then see an ordinary gradient.
                // The whole buffer already is one (a collective's result).
                let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
                let piece = match range.len() == t.numel() {
                    true => t.clone(),
                    false => t.narrow(0, range.start, range.len()).contiguous_copy(),
                };
                return Ok(piece.reshape(&shape));
            }
        };
        t.to(like.device())
    }
}
