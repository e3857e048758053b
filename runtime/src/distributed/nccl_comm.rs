//! The NCCL engine: one communicator per process on its GPU. Its
//! collectives run on a communication stream beside the compute stream (see
//! `tapir_kernels::cuda::nccl`), so DDP's bucket all-reduces overlap the
//! rest of backward; each returns a [`Landing`], and landing it makes the
//! compute stream wait for the collective before the ops that read its
//! result. The host does not wait for either, as with PyTorch's NCCL backend.

use super::ReduceOp;
use crate::device::{Device, cuda_error};
use crate::{DType, Error, Result, Tensor};
use tapir_kernels::cuda::CudaBuffer;
use tapir_kernels::cuda::nccl::{self, NcclComm, NcclDtype, NcclLanding, NcclOp};

/// A collective on the communication stream, with the buffers it reads or
/// writes: they are kept until the compute stream has waited for it (so the
/// caching allocator cannot give their blocks to a kernel meanwhile).
/// Dropping it lands it too.
pub(super) struct Landing {
    // Dropped first: the compute stream waits, then the buffers go.
    collective: NcclLanding,
    _buffers: Vec<Tensor>,
    device: Device,
}

impl Landing {
    /// Makes the compute stream wait for the collective (the host goes on).
    pub fn land(self) -> Result<()> {
        let device = self.device;
        self.collective
            .land()
            .map_err(|e| Error::Distributed(format!("NCCL: {}", cuda_error(device, e))))
    }
}

/// A GPU checked and ready to join a communicator.
pub(super) struct Prepared {
    dev: std::sync::Arc<tapir_kernels::cuda::CudaDevice>,
    device: Device,
}

/// This rank's communicator and its GPU.
pub(super) struct NcclEngine {
    comm: NcclComm,
    device: Device,
}

/// Picks this rank's GPU (`local_rank` modulo the GPUs present, as
/// `torch.cuda.set_device(local_rank)` on a one-process-per-GPU launch) and
/// checks that the GPU and NCCL can be used.
pub(super) fn prepare(local_rank: usize) -> Result<Prepared> {
    let count = crate::cuda::device_count();
    if count == 0 {
        return Err(Error::Distributed(
            "init_process_group: the NCCL backend needs a CUDA GPU and none is visible (no driver or no device)"
                .into(),
        ));
    }
    let device = Device::Cuda(local_rank % count);
    let dev =
        crate::storage::cuda::device(local_rank % count).map_err(|e| cuda_error(device, e))?;
    if !nccl::nccl_present() {
        return Err(Error::Distributed(format!(
            "init_process_group: the NCCL library (libnccl.so) was not found for {device}; install NCCL (PyTorch's \
             nvidia-nccl wheel ships it) and put its directory on LD_LIBRARY_PATH"
        )));
    }
    Ok(Prepared { dev, device })
}

/// A new NCCL unique id (made by rank 0 and shared with the others).
pub(super) fn unique_id() -> Result<[u8; 128]> {
    nccl::unique_id().map_err(|e| Error::Distributed(format!("init_process_group: {e}")))
}

impl Prepared {
    /// Joins the communicator `id` as `rank` of `world` (blocks until all have).
    pub fn join(self, rank: usize, world: usize, id: [u8; 128]) -> Result<NcclEngine> {
        let comm = NcclComm::new(&self.dev, rank, world, id).map_err(|e| {
            Error::Distributed(format!(
                "init_process_group: {}",
                cuda_error(self.device, e)
            ))
        })?;
        Ok(NcclEngine {
            comm,
            device: self.device,
        })
    }
}

fn dtype(d: DType) -> NcclDtype {
    match d {
        DType::F32 => NcclDtype::F32,
        DType::F64 => NcclDtype::F64,
        DType::F16 => NcclDtype::F16,
        DType::BF16 => NcclDtype::BF16,
        DType::I64 => NcclDtype::I64,
        DType::U8 | DType::Bool => NcclDtype::U8,
    }
}

/// NCCL's reduction for `op`; `Avg` sums, as on MPI: the caller divides.
fn op(op: ReduceOp) -> NcclOp {
    match op {
        ReduceOp::Sum | ReduceOp::Avg => NcclOp::Sum,
        ReduceOp::Product => NcclOp::Prod,
        ReduceOp::Max => NcclOp::Max,
        ReduceOp::Min => NcclOp::Min,
    }
}

/// Runs `f` on the device buffer of `t`, a contiguous tensor of its own
/// (a [`super::Buf::Device`]).
fn with_buffer<R>(t: &Tensor, f: impl FnOnce(&mut CudaBuffer) -> R) -> R {
    assert!(
        t.is_contiguous() && t.layout().offset == 0,
        "NCCL works on whole contiguous buffers"
    );
    let mut storage = t.write();
    f(storage
        .cuda_buffer_mut()
        .expect("a Buf::Device lives on the GPU"))
}

impl NcclEngine {
    /// The GPU this rank's communicator runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    fn fail(&self, name: &str, e: tapir_kernels::cuda::CudaError) -> Error {
        Error::Distributed(format!("{name}: {}", cuda_error(self.device, e)))
    }

    fn landing(&self, collective: NcclLanding, buffers: &[&Tensor]) -> Landing {
        Landing {
            collective,
            _buffers: buffers.iter().map(|t| (*t).clone()).collect(),
            device: self.device,
        }
    }

    /// Reduces `flat` across ranks, in place.
    pub fn all_reduce(&self, name: &str, flat: &Tensor, how: ReduceOp) -> Result<Landing> {
        let (d, n) = (dtype(flat.dtype()), flat.numel());
        let done = with_buffer(flat, |b| self.comm.all_reduce(b, d, n, op(how)))
            .map_err(|e| self.fail(name, e))?;
        Ok(self.landing(done, &[flat]))
    }

    /// Copies rank `root`'s `flat` into every rank's.
    pub fn broadcast(&self, name: &str, flat: &Tensor, root: usize) -> Result<Landing> {
        let (d, n) = (dtype(flat.dtype()), flat.numel());
        let done = with_buffer(flat, |b| self.comm.broadcast(b, d, n, root))
            .map_err(|e| self.fail(name, e))?;
        Ok(self.landing(done, &[flat]))
    }

    /// Every rank's `flat`, in rank order, as one tensor of `world * n`.
    pub fn all_gather(&self, name: &str, flat: &Tensor, world: usize) -> Result<(Tensor, Landing)> {
        let (d, n) = (dtype(flat.dtype()), flat.numel());
        let out = Tensor::zeros_on(&[n * world], flat.dtype(), self.device);
        let send = flat.read();
        let send = send.cuda_buffer().expect("a Buf::Device lives on the GPU");
        let mut recv = out.write();
        let recv_buf = recv.cuda_buffer_mut().expect("made on the GPU");
        let done = self
            .comm
            .all_gather(send, recv_buf, d, n)
            .map_err(|e| self.fail(name, e))?;
        drop(recv);
        let landing = self.landing(done, &[flat, &out]);
        Ok((out, landing))
    }

    /// `flat` (`world` blocks) reduced across ranks; this rank's block.
    pub fn reduce_scatter(
        &self,
        name: &str,
        flat: &Tensor,
        world: usize,
        how: ReduceOp,
    ) -> Result<(Tensor, Landing)> {
        let (d, n) = (dtype(flat.dtype()), flat.numel() / world);
        let out = Tensor::zeros_on(&[n], flat.dtype(), self.device);
        let send = flat.read();
        let send = send.cuda_buffer().expect("a Buf::Device lives on the GPU");
        let mut recv = out.write();
        let recv_buf = recv.cuda_buffer_mut().expect("made on the GPU");
        let done = self
            .comm
            .reduce_scatter(send, recv_buf, d, n, op(how))
            .map_err(|e| self.fail(name, e))?;
        drop(recv);
        let landing = self.landing(done, &[flat, &out]);
        Ok((out, landing))
    }
}
