//! NCCL collectives on device buffers (cudarc's `nccl` module, loaded at run
//! time like the rest of CUDA). A communicator is bound to one device and
//! queues its collectives on that device's one stream, so they run in order
//! with the kernels around them and the host never waits for them.

use super::CudaBuffer;
use super::device::{CudaDevice, CudaError, CudaResult};
use cudarc::driver::{CudaView, CudaViewMut};
use cudarc::nccl::{Comm, Id, NcclType, ReduceOp};
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
    /// NCCL forbids concurrent calls on one communicator: the lock orders them.
    comm: Mutex<Comm>,
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
        let id = Id::uninit(id.map(|b| b as std::ffi::c_char));
        let comm = Comm::from_rank(dev.stream().clone(), rank, world, id)
            .map_err(|e| dev.err("joining the NCCL communicator", e))?;
        Ok(NcclComm {
            dev: dev.clone(),
            comm: Mutex::new(comm),
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
    ) -> CudaResult<()> {
        let comm = self.comm();
        typed!(dtype, T => {
            let mut v = view_mut::<T>(buf, len);
            comm.all_reduce_in_place(&mut v, &op.nccl()).map(drop)
        })
        .map_err(|e| self.dev.err("NCCL all_reduce", e))
    }

    /// Copies rank `root`'s first `len` elements of `buf` into every rank's.
    pub fn broadcast(
        &self,
        buf: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
        root: usize,
    ) -> CudaResult<()> {
        let comm = self.comm();
        typed!(dtype, T => {
            let mut v = view_mut::<T>(buf, len);
            comm.broadcast_in_place(&mut v, root as i32).map(drop)
        })
        .map_err(|e| self.dev.err("NCCL broadcast", e))
    }

    /// Every rank's first `len` elements of `send`, in rank order, into `recv`
    /// (which holds `len * world`).
    pub fn all_gather(
        &self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        dtype: NcclDtype,
        len: usize,
    ) -> CudaResult<()> {
        let comm = self.comm();
        let world = comm.world_size();
        typed!(dtype, T => {
            let s = view::<T>(send, len);
            let mut r = view_mut::<T>(recv, len * world);
            comm.all_gather(&s, &mut r).map(drop)
        })
        .map_err(|e| self.dev.err("NCCL all_gather", e))
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
    ) -> CudaResult<()> {
        let comm = self.comm();
        let world = comm.world_size();
        typed!(dtype, T => {
            let s = view::<T>(send, len * world);
            let mut r = view_mut::<T>(recv, len);
            comm.reduce_scatter(&s, &mut r, &op.nccl()).map(drop)
        })
        .map_err(|e| self.dev.err("NCCL reduce_scatter", e))
    }
}

/// The first `len` elements of `buf` as `T`.
fn view<T: NcclType>(buf: &CudaBuffer, len: usize) -> CudaView<'_, T> {
    assert!(
        len * std::mem::size_of::<T>() <= buf.bytes(),
        "NCCL: {len} elements of {} bytes from a buffer of {}",
        std::mem::size_of::<T>(),
        buf.bytes()
    );
    // SAFETY: the view lies inside the block (checked above), and the runtime
    // passes the dtype the buffer was written as, so every element read is a
    // value of `T` (all the types here are plain data).
    unsafe { buf.block().transmute::<T>(len) }.expect("the block is large enough")
}

/// The first `len` elements of `buf` as `T`, writable.
fn view_mut<T: NcclType>(buf: &mut CudaBuffer, len: usize) -> CudaViewMut<'_, T> {
    assert!(
        len * std::mem::size_of::<T>() <= buf.bytes(),
        "NCCL: {len} elements of {} bytes into a buffer of {}",
        std::mem::size_of::<T>(),
        buf.bytes()
    );
    // SAFETY: as in `view`; the mutable borrow of `buf` makes this the only
    // view of the block while NCCL's call is queued.
    unsafe { buf.block_mut().transmute_mut::<T>(len) }.expect("the block is large enough")
}
