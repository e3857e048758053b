//! NCCL collectives on device buffers (cudarc's `nccl` module, loaded at run
//! time like the rest of CUDA). A communicator runs on a stream of its own
//! beside the device's compute stream, as PyTorch's NCCL backend does, so a
//! bucket's all-reduce runs while backward's kernels go on:
//!
//! - a collective first makes its stream wait for the compute stream's work
//!   so far (which wrote its inputs);
//! - it returns an [`NcclLanding`]; landing it makes the compute stream wait
//!   for the collective before the ops queued after that (which read its
//!   result). The host never waits.
//!
//! The buffers stay with the caller until it lands the collective (dropping
//! the landing lands it), so the caching allocator, which reuses blocks in
//! compute-stream order, never hands a block NCCL still uses to a kernel.

use super::CudaBuffer;
use super::device::{CudaDevice, CudaError, CudaResult};
use cudarc::driver::{CudaEvent, CudaStream};
use cudarc::nccl::{Comm, Id, ReduceOp};
use half::{bf16, f16};
use std::sync::{Arc, Mutex};

/// Runs `$body` with `$t` bound to the Rust type of `$dtype`.
macro_rules! typed {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            NcclDtype::F32 => {
                type $t = f32;
                $body
            }
            NcclDtype::F64 => {
                type $t = f64;
                $body
            }
            NcclDtype::F16 => {
                type $t = f16;
                $body
            }
            NcclDtype::BF16 => {
                type $t = bf16;
                $body
            }
            NcclDtype::I64 => {
                type $t = i64;
                $body
            }
            NcclDtype::U8 => {
                type $t = u8;
                $body
            }
        }
    };
}

/// The element types NCCL carries (the runtime's float and integer dtypes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NcclDtype {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit integer.
    I64,
    /// Bytes (u8 and bool tensors).
    U8,
}

/// How a reduction combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NcclOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Mean over ranks (NCCL's own `ncclAvg`).
    Avg,
}

impl NcclOp {
    fn nccl(self) -> ReduceOp {
        match self {
            NcclOp::Sum => ReduceOp::Sum,
            NcclOp::Prod => ReduceOp::Prod,
            NcclOp::Max => ReduceOp::Max,
            NcclOp::Min => ReduceOp::Min,
            NcclOp::Avg => ReduceOp::Avg,
        }
    }
}

/// Whether the NCCL library (libnccl.so) can be loaded.
pub fn nccl_present() -> bool {
    // SAFETY: only tries to dlopen libnccl; no preconditions.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// A new NCCL unique id (rank 0 makes it; every rank passes it to
/// [`NcclComm::new`]), as the 128 bytes the ranks exchange.
///
/// ```
/// use tapir_kernels::cuda::nccl;
/// // Without libnccl this is an error naming the library, not a panic.
/// if !nccl::nccl_present() {
///     assert!(nccl::unique_id().unwrap_err().to_string().contains("libnccl"));
/// }
/// ```
pub fn unique_id() -> CudaResult<[u8; 128]> {
    if !nccl_present() {
        return Err(CudaError::MissingLibrary {
            device: 0,
            library: "NCCL (libnccl.so)",
        });
    }
    let id = Id::new().map_err(|e| CudaError::Driver {
        device: 0,
        what: "making the NCCL unique id".into(),
        detail: format!("{e:?}"),
    })?;
    Ok(id.internal().map(|c| c as u8))
}

/// One rank's NCCL communicator on one device.
pub struct NcclComm {
    dev: Arc<CudaDevice>,
    /// The communication stream the collectives run on.
    stream: Arc<CudaStream>,
    /// NCCL forbids concurrent calls on one communicator: the lock orders them.
    comm: Mutex<Comm>,
}

/// A collective queued on the communication stream whose result the
/// compute stream has not waited for yet. [`land`](NcclLanding::land)
/// makes it wait (on the GPU; the host goes on); dropping it does the same.
#[must_use = "the compute stream must wait for the collective before reading its result"]
pub struct NcclLanding {
    dev: Arc<CudaDevice>,
    /// Recorded on the communication stream after the collective.
    done: Option<CudaEvent>,
}

impl NcclLanding {
    /// Makes the device's compute stream wait for the collective.
    pub fn land(mut self) -> CudaResult<()> {
        self.wait()
    }

    fn wait(&mut self) -> CudaResult<()> {
        match self.done.take() {
            Some(done) => self
                .dev
                .stream()
                .wait(&done)
                .map_err(|e| self.dev.err("waiting for an NCCL collective", e)),
            None => Ok(()),
        }
    }
}

impl Drop for NcclLanding {
    fn drop(&mut self) {
        // Best effort: an error here means the context is gone.
        let _ = self.wait();
    }
}

// SAFETY: an NCCL communicator is a handle that any thread may use, one call
// at a time (NCCL's thread-safety rules); every use goes through the mutex.
// Its stream is the device's, which tapir already shares across threads.
unsafe impl Send for NcclComm {}
// SAFETY: as for Send: shared access only reaches the communicator through
// the mutex.
unsafe impl Sync for NcclComm {}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclComm({:?})", self.dev)
    }
}

impl NcclComm {
    /// Joins the communicator `id` as `rank` of `world` on `dev`; blocks
    /// until every rank has joined (NCCL's `ncclCommInitRank`).
    pub fn new(
        dev: &Arc<CudaDevice>,
        rank: usize,
        world: usize,
        id: [u8; 128],
    ) -> CudaResult<Self> {
        if !nccl_present() {
            return Err(CudaError::MissingLibrary {
                device: dev.ordinal(),
                library: "NCCL (libnccl.so)",
            });
        }
        dev.bind()?;
        let stream = dev
            .stream()
            .fork()
            .map_err(|e| dev.err("creating the NCCL stream", e))?;
        let id = Id::uninit(id.map(|b| b as std::ffi::c_char));
        let comm = Comm::from_rank(stream.clone(), rank, world, id)
            .map_err(|e| dev.err("joining the NCCL communicator", e))?;
        Ok(NcclComm {
            dev: dev.clone(),
            stream,
            comm: Mutex::new(comm),
        })
    }

    /// Runs `call` on the communication stream after the compute stream's
    /// work so far; the landing of its result.
    fn on_stream(
        &self,
        what: &str,
        call: impl FnOnce(&Comm) -> Result<(), cudarc::nccl::result::NcclError>,
    ) -> CudaResult<NcclLanding> {
        let comm = self.comm();
        self.stream
            .join(self.dev.stream())
            .map_err(|e| self.dev.err("ordering an NCCL collective", e))?;
        call(&comm).map_err(|e| self.dev.err(what, e))?;
        let done = self
            .stream
            .record_event(None)
            .map_err(|e| self.dev.err("recording an NCCL collective", e))?;
        Ok(NcclLanding {
            dev: self.dev.clone(),
            done: Some(done),
        })
    }

    /// The device the communicator runs on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    fn comm(&self) -> std::sync::MutexGuard<'_, Comm> {
        self.comm.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reduces the first `len` elements of `buf` across ranks, in place.
    pub fn all_reduce(
        &self,
        buf: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
        op: NcclOp,
    ) -> CudaResult<NcclLanding> {
        self.on_stream("NCCL all_reduce", |comm| {
            typed!(dtype, T => {
                let mut v = buf.typed_mut::<T>(len);
                comm.all_reduce_in_place(&mut v, &op.nccl()).map(drop)
            })
        })
    }

    /// Copies rank `root`'s first `len` elements of `buf` into every rank's.
    pub fn broadcast(
        &self,
        buf: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
        root: usize,
    ) -> CudaResult<NcclLanding> {
        self.on_stream("NCCL broadcast", |comm| {
            typed!(dtype, T => {
                let mut v = buf.typed_mut::<T>(len);
                comm.broadcast_in_place(&mut v, root as i32).map(drop)
            })
        })
    }

    /// Every rank's first `len` elements of `send`, in rank order, into `recv`
    /// (which holds `len * world`).
    pub fn all_gather(
        &self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
    ) -> CudaResult<NcclLanding> {
        self.on_stream("NCCL all_gather", |comm| {
            let world = comm.world_size();
            typed!(dtype, T => {
                let s = send.typed::<T>(len);
                let mut r = recv.typed_mut::<T>(len * world);
                comm.all_gather(&s, &mut r).map(drop)
            })
        })
    }

    /// Reduces `send` (`len * world` elements) across ranks and leaves block
    /// `rank` of the result (`len` elements) in `recv`.
    pub fn reduce_scatter(
        &self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
        op: NcclOp,
    ) -> CudaResult<NcclLanding> {
        self.on_stream("NCCL reduce_scatter", |comm| {
            let world = comm.world_size();
            typed!(dtype, T => {
                let s = send.typed::<T>(len * world);
                let mut r = recv.typed_mut::<T>(len);
                comm.reduce_scatter(&s, &mut r, &op.nccl()).map(drop)
            })
        })
    }
}
