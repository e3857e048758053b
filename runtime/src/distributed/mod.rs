//! Data-parallel training across processes (PyTorch's `torch.distributed`):
//! a process group on a real engine — MPI for CPU processes, launched with
//! `mpirun` — collectives on tensors, and [`DistributedDataParallel`], which
//! averages gradients in buckets while backward is still running.
//!
//! MPI needs the `distributed` cargo feature and Open MPI; without them
//! [`init_process_group`] returns an error. A program started without
//! `mpirun` is a world of one process.
//!
//! ```
//! use tapir_runtime::distributed::{self, Backend};
//! match distributed::init_process_group(Backend::Mpi) {
//!     Ok(group) => {
//!         let t = tapir_runtime::Tensor::ones(&[3]);
//!         distributed::all_reduce(&t, distributed::ReduceOp::Sum).unwrap();
//!         assert_eq!(t.to_vec::<f32>(), vec![distributed::get_world_size() as f32; 3]);
//!         group.destroy();
//!     }
//!     Err(e) => assert!(e.to_string().contains("distributed")), // built without MPI
//! }
//! ```

mod buf;
mod ddp;
#[cfg(feature = "distributed")]
mod mpi_comm;
#[cfg(not(feature = "distributed"))]
#[path = "no_mpi.rs"]
mod mpi_comm;
#[cfg(any(feature = "cuda", feature = "cuda12"))]
mod nccl_comm;
#[cfg(not(any(feature = "cuda", feature = "cuda12")))]
#[path = "no_nccl.rs"]
mod nccl_comm;
mod sync_batch_norm;

pub use ddp::{BucketTiming, DdpOptions, DistributedDataParallel, NoSyncGuard, SyncTimeline};
pub use sync_batch_norm::all_reduce_with_grad;
pub(crate) use sync_batch_norm::synced_batch_stats;

use crate::{Device, Error, Result, Tensor};
pub(crate) use buf::Buf;
use buf::HostBuf;
use mpi_comm::{Comm, MpiComm};
use nccl_comm::{Landing, NcclEngine};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// The engine a process group runs on (PyTorch's backend names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// MPI (Open MPI): CPU tensors, processes started by `mpirun`.
    Mpi,
    /// NCCL: CUDA tensors, one process per GPU (`cuda:{local rank}`). Needs
    /// the `cuda` feature; more than one process also needs `distributed`,
    /// as the ranks meet over MPI (`mpirun`) to share NCCL's id.
    Nccl,
}

/// How [`all_reduce`] and [`reduce_scatter`] combine the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise mean over ranks (floating dtypes only).
    Avg,
    /// Elementwise product.
    Product,
    /// Elementwise maximum.
    Max,
    /// Elementwise minimum.
    Min,
}

/// The default process group: who this process is, and its engines. MPI
/// carries host collectives (and is how NCCL ranks meet); NCCL, when the
/// backend is NCCL, carries every tensor collective on the GPU. A one-process
/// NCCL group built without MPI has no MPI engine.
struct Group {
    rank: usize,
    world: usize,
    mpi: Option<MpiComm>,
    nccl: Option<NcclEngine>,
}

static GROUP: RwLock<Option<Arc<Group>>> = RwLock::new(None);

fn group(op: &str) -> Result<Arc<Group>> {
    GROUP.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(|| {
        Error::Distributed(format!(
            "{op}: the default process group has not been initialized; call init_process_group first"
        ))
    })
}

/// The running process group. Dropping it (or [`ProcessGroup::destroy`])
/// finalizes the engine; dropping it while panicking aborts the whole job
/// instead, so no other rank waits forever in a collective.
#[must_use = "the process group ends when this guard is dropped"]
pub struct ProcessGroup {
    _private: (),
}

impl ProcessGroup {
    /// Ends the process group (PyTorch's `destroy_process_group`). MPI
    /// cannot start again in the same process.
    pub fn destroy(self) {}
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let Some(g) = GROUP.write().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        let Some(mpi) = &g.mpi else {
            return;
        };
        if std::thread::panicking() {
            mpi.abort(1);
        } else {
            mpi.finalize();
        }
    }
}

/// Starts the default process group on `backend` (PyTorch's
/// `init_process_group`). Under `mpirun -np N` each process learns its rank
/// and the world size; started alone, it is rank 0 of 1. With
/// [`Backend::Nccl`] each process takes the GPU of its local rank (Open MPI's
/// `OMPI_COMM_WORLD_LOCAL_RANK`, or `LOCAL_RANK`), see [`nccl_device`].
pub fn init_process_group(backend: Backend) -> Result<ProcessGroup> {
    let mut slot = GROUP.write().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return Err(Error::Distributed(
            "init_process_group: the default process group is already initialized".into(),
        ));
    }
    let group = match backend {
        Backend::Mpi => {
            let mpi = MpiComm::start()?;
            Group {
                rank: mpi.rank,
                world: mpi.world,
                mpi: Some(mpi),
                nccl: None,
            }
        }
        Backend::Nccl => start_nccl()?,
    };
    *slot = Some(Arc::new(group));
    Ok(ProcessGroup { _private: () })
}

/// Processes the launcher started, from its environment (1 when none says).
fn launched_world_size() -> usize {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
        .unwrap_or(1)
}

/// The NCCL group: ranks from MPI (when built with it), every rank's GPU
/// checked and the outcome shared before anyone joins NCCL (so one rank
/// without a GPU is an error on all, not a hang), then rank 0's NCCL id
/// shared and the communicator joined.
fn start_nccl() -> Result<Group> {
    let mpi = match is_mpi_available() {
        true => Some(MpiComm::start()?),
        false if launched_world_size() > 1 => {
            return Err(Error::Distributed(format!(
                "init_process_group: {} processes were launched, and NCCL's ranks meet over MPI, which this build \
                 lacks; build with `--features cuda,distributed`",
                launched_world_size()
            )));
        }
        false => None,
    };
    let (rank, world) = mpi.as_ref().map_or((0, 1), |m| (m.rank, m.world));
    let local_rank = ["OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
        .unwrap_or(rank);
    let gpu = nccl_comm::prepare(local_rank);
    let mine = match (&gpu, rank) {
        (Err(e), _) => Err(Error::Distributed(e.to_string())),
        (Ok(_), 0) => unique_id_message(),
        (Ok(_), _) => Ok(vec![b'+']),
    };
    let id = share_outcome(&mpi, rank, mine);
    let joined = gpu.and_then(|gpu| gpu.join(rank, world, id?));
    match joined {
        Ok(engine) => Ok(Group {
            rank,
            world,
            mpi,
            nccl: Some(engine),
        }),
        Err(e) => {
            if let Some(m) = &mpi {
                m.finalize();
            }
            Err(e)
        }
    }
}

/// Rank 0's message: `+` and NCCL's id, or `-` and why it failed.
fn unique_id_message() -> Result<Vec<u8>> {
    nccl_comm::unique_id().map(|id| [&b"+"[..], &id].concat())
}

/// Every rank's outcome so far (`+...` or `-why`) gathered on all ranks:
/// the first failure becomes every rank's error; otherwise rank 0's NCCL id.
fn share_outcome(mpi: &Option<MpiComm>, rank: usize, mine: Result<Vec<u8>>) -> Result<[u8; 128]> {
    let mine = mine.unwrap_or_else(|e| [&b"-"[..], e.to_string().as_bytes()].concat());
    let all = match mpi {
        Some(m) => {
            let (tx, rx) = channel();
            m.submit(move |w| {
                let _ = tx.send(mpi_comm::all_gather_bytes(w, &mine));
            })?;
            rx.recv()
                .map_err(|_| Error::Distributed("init_process_group: MPI stopped".into()))?
        }
        None => vec![mine],
    };
    if let Some((r, why)) = all
        .iter()
        .enumerate()
        .find(|(_, m)| m.first() == Some(&b'-'))
    {
        let why = String::from_utf8_lossy(&why[1..]);
        return Err(match r == rank {
            true => Error::Distributed(why.into_owned()),
            false => Error::Distributed(format!(
                "init_process_group: rank {r} could not start NCCL: {why}"
            )),
        });
    }
    all[0][1..].try_into().map_err(|_| {
        Error::Distributed("init_process_group: rank 0 sent a malformed NCCL id".into())
    })
}

/// Whether a default process group is running.
pub fn is_initialized() -> bool {
    GROUP.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Whether this build has MPI (the `distributed` feature).
pub fn is_mpi_available() -> bool {
    cfg!(feature = "distributed")
}

/// This process's rank in the default group.
///
/// # Panics
/// When no process group has been initialized.
pub fn get_rank() -> usize {
    group("get_rank").unwrap_or_else(|e| panic!("{e}")).rank
}

/// The number of processes in the default group.
///
/// # Panics
/// When no process group has been initialized.
pub fn get_world_size() -> usize {
    group("get_world_size")
        .unwrap_or_else(|e| panic!("{e}"))
        .world
}

/// Waits until every rank has reached the barrier. Under NCCL, as in
/// PyTorch, it all-reduces one element on the GPU and waits for it.
pub fn barrier() -> Result<()> {
    let g = group("barrier")?;
    if let Some(nccl) = &g.nccl {
        let one = Tensor::zeros_on(&[1], crate::DType::F32, nccl.device());
        nccl.all_reduce("barrier", &one, ReduceOp::Sum)?.land()?;
        return crate::cuda::synchronize(nccl.device());
    }
    launch("barrier", mpi_comm::barrier)?.wait()
}

/// A collective in flight (PyTorch's `Work`): [`Work::wait`] blocks until it
/// has finished and writes its result where the collective says.
#[must_use = "a collective's result lands only when it is waited on"]
pub struct Work<T = ()> {
    started: Arc<OnceLock<Instant>>,
    finish: Box<dyn FnOnce() -> Result<T> + Send>,
}

impl<T> Work<T> {
    /// Blocks until the collective has finished; returns its result.
    pub fn wait(self) -> Result<T> {
        (self.finish)()
    }

    /// When the engine began this collective (None while it is queued).
    pub fn started_at(&self) -> Option<Instant> {
        self.started.get().copied()
    }
}

/// A job queued on the engine, with its result still to come.
struct Pending<R> {
    /// Under NCCL: the collective the compute stream has yet to wait for.
    /// Declared first, so that dropping a `Pending` lands it before its
    /// buffers go.
    landing: Option<Landing>,
    result: Receiver<R>,
    started: Arc<OnceLock<Instant>>,
}

impl<R> Pending<R> {
    fn wait(mut self) -> Result<R> {
        if let Some(landing) = self.landing.take() {
            landing.land()?;
        }
        self.result.recv().map_err(|_| {
            Error::Distributed(
                "the communication thread stopped before a collective finished".into(),
            )
        })
    }
}

/// Queues `job` on the MPI engine.
fn launch<R: Send + 'static>(
    op: &str,
    job: impl FnOnce(&Comm) -> R + Send + 'static,
) -> Result<Pending<R>> {
    let g = group(op)?;
    let mpi = g.mpi.as_ref().ok_or_else(|| {
        Error::Distributed(format!(
            "{op}: this NCCL process group has no MPI engine for host data (built without `distributed`)"
        ))
    })?;
    let (tx, result) = channel();
    let started = Arc::new(OnceLock::new());
    let stamp = started.clone();
    mpi.submit(move |w| {
        let _ = stamp.set(Instant::now());
        let _ = tx.send(job(w));
    })?;
    Ok(Pending {
        landing: None,
        result,
        started,
    })
}

/// Runs a collective on the NCCL engine: it is queued on the communication
/// stream at once; waiting on the `Pending` lands it on the compute stream.
fn on_nccl<R>(
    op: &str,
    job: impl FnOnce(&NcclEngine, usize) -> Result<(R, Landing)>,
) -> Result<Pending<R>> {
    let g = group(op)?;
    let nccl = g
        .nccl
        .as_ref()
        .expect("device buffers exist only under NCCL");
    let (value, landing) = job(nccl, g.world)?;
    let mut pending = ready(value);
    pending.landing = Some(landing);
    Ok(pending)
}

/// Whether the running group carries tensors on NCCL.
fn uses_nccl() -> bool {
    GROUP
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|g| g.nccl.is_some())
}

/// The GPU this rank's NCCL communicator runs on (PyTorch's
/// `torch.cuda.current_device()` after `set_device(local_rank)`): put the
/// model and its batches there.
///
/// ```
/// use tapir_runtime::Device;
/// use tapir_runtime::distributed::{self, Backend};
/// // Without a GPU (or the `cuda` feature) NCCL does not start.
/// if let Ok(group) = distributed::init_process_group(Backend::Nccl) {
///     assert!(matches!(distributed::nccl_device(), Device::Cuda(_)));
///     group.destroy();
/// }
/// ```
///
/// # Panics
/// When no process group has been initialized, or it is not NCCL's.
pub fn nccl_device() -> Device {
    nccl_device_for("nccl_device")
}

/// [`nccl_device`], with `op` named in the panic.
fn nccl_device_for(op: &str) -> Device {
    let g = group(op).unwrap_or_else(|e| panic!("{e}"));
    match &g.nccl {
        Some(n) => n.device(),
        None => {
            panic!("{op}: the default process group runs MPI, not NCCL; it has no GPU of its own")
        }
    }
}

fn check_avg(t: &Tensor, op: ReduceOp, name: &str) {
    assert!(
        op != ReduceOp::Avg || t.dtype().is_float(),
        "{name}: ReduceOp::Avg needs a floating tensor, got {:?}",
        t.dtype()
    );
}

/// Writes `buf` into `t` in place.
fn write_back(t: &Tensor, buf: &Buf) -> Result<()> {
    let src = buf.tensor(0..buf.len(), t.shape(), t)?;
    crate::no_grad(|| {
        t.copy_(&src);
    });
    Ok(())
}

/// Combines `t` across all ranks with `op`, in place on every rank.
pub fn all_reduce(t: &Tensor, op: ReduceOp) -> Result<()> {
    all_reduce_async(t, op)?.wait()
}

/// [`all_reduce`] without waiting: the result lands in `t` at `wait()`.
pub fn all_reduce_async(t: &Tensor, op: ReduceOp) -> Result<Work> {
    check_avg(t, op, "all_reduce");
    let pending = all_reduce_buf("all_reduce", Buf::of(t, "all_reduce"), op)?;
    let t = t.clone();
    Ok(Work {
        started: pending.started.clone(),
        finish: Box::new(move || {
            let world = group("all_reduce")?.world;
            let mut buf = pending.wait()?;
            if op == ReduceOp::Avg {
                buf.scale(1.0 / world as f64);
            }
            write_back(&t, &buf)
        }),
    })
}

/// Copies rank `src`'s `t` into `t` on every rank.
pub fn broadcast(t: &Tensor, src: usize) -> Result<()> {
    broadcast_async(t, src)?.wait()
}

/// [`broadcast`] without waiting.
pub fn broadcast_async(t: &Tensor, src: usize) -> Result<Work> {
    let world = group("broadcast")?.world;
    assert!(
        src < world,
        "broadcast: source rank {src} is not below the world size {world}"
    );
    let pending = broadcast_buf("broadcast", Buf::of(t, "broadcast"), src)?;
    let t = t.clone();
    Ok(Work {
        started: pending.started.clone(),
        finish: Box::new(move || write_back(&t, &pending.wait()?)),
    })
}

/// Every rank's `t`, in rank order. Every rank must pass the same shape.
pub fn all_gather(t: &Tensor) -> Result<Vec<Tensor>> {
    all_gather_async(t)?.wait()
}

/// [`all_gather`] without waiting.
pub fn all_gather_async(t: &Tensor) -> Result<Work<Vec<Tensor>>> {
    let buf = Buf::of(t, "all_gather");
    let shape = t.shape().to_vec();
    let signature = format!("{shape:?} {:?}", t.dtype()).into_bytes();
    // Agree on shapes first: a mismatch is an error on every rank, not a
    // truncated message.
    let mismatch = |all: Vec<Vec<u8>>| all.iter().position(|s| *s != all[0]).map(|r| (r, all));
    let pending = match buf {
        Buf::Host(h) => launch("all_gather", move |w| {
            let all = mpi_comm::all_gather_bytes(w, &signature);
            mismatch(all).map_or_else(|| Ok(Buf::Host(mpi_comm::all_gather(w, &h))), Err)
        })?,
        Buf::Device(d) => match mismatch(all_gather_bytes("all_gather", signature)?) {
            Some(bad) => ready(Err(bad)),
            None => on_nccl("all_gather", |n, world| {
                let (out, landing) = n.all_gather("all_gather", &d, world)?;
                Ok((Ok(Buf::Device(out)), landing))
            })?,
        },
    };
    let like = t.clone();
    Ok(Work {
        started: pending.started.clone(),
        finish: Box::new(move || {
            let gathered = pending.wait()?.map_err(|(r, all)| {
                Error::Distributed(format!(
                    "all_gather: rank {r} passed a tensor of {} but rank 0 passed {}; every rank must pass the same \
                     shape and dtype",
                    String::from_utf8_lossy(&all[r]),
                    String::from_utf8_lossy(&all[0])
                ))
            })?;
            let n = like.numel();
            (0..gathered.len() / n.max(1))
                .map(|r| gathered.tensor(r * n..(r + 1) * n, &shape, &like))
                .collect()
        }),
    })
}

/// Reduces `inputs[r]` over all ranks with `op` and returns rank `r`'s
/// result on rank `r` (one input per rank, all of one shape).
pub fn reduce_scatter(inputs: &[Tensor], op: ReduceOp) -> Result<Tensor> {
    reduce_scatter_async(inputs, op)?.wait()
}

/// [`reduce_scatter`] without waiting.
pub fn reduce_scatter_async(inputs: &[Tensor], op: ReduceOp) -> Result<Work<Tensor>> {
    let world = group("reduce_scatter")?.world;
    assert!(
        inputs.len() == world && inputs.iter().all(|t| t.shape() == inputs[0].shape()),
        "reduce_scatter: needs one input per rank ({world}) of one shape, got shapes {:?}",
        inputs
            .iter()
            .map(|t| t.shape().to_vec())
            .collect::<Vec<_>>()
    );
    check_avg(&inputs[0], op, "reduce_scatter");
    let mut buf = Buf::of(&inputs[0], "reduce_scatter");
    for t in &inputs[1..] {
        buf.append(Buf::of(t, "reduce_scatter"));
    }
    let pending = match buf {
        Buf::Host(h) => launch("reduce_scatter", move |w| {
            Buf::Host(mpi_comm::reduce_scatter(w, &h, op))
        })?,
        Buf::Device(d) => on_nccl("reduce_scatter", |n, world| {
            let (out, landing) = n.reduce_scatter("reduce_scatter", &d, world, op)?;
            Ok((Buf::Device(out), landing))
        })?,
    };
    let like = inputs[0].clone();
    Ok(Work {
        started: pending.started.clone(),
        finish: Box::new(move || {
            let mut out = pending.wait()?;
            if op == ReduceOp::Avg {
                out.scale(1.0 / world as f64);
            }
            out.tensor(0..out.len(), like.shape(), &like)
        }),
    })
}

/// Every rank's `bytes`, in rank order (DDP's model check).
fn all_gather_bytes(op: &str, bytes: Vec<u8>) -> Result<Vec<Vec<u8>>> {
    if group(op)?.mpi.is_none() {
        return Ok(vec![bytes]); // one NCCL process built without MPI
    }
    launch(op, move |w| mpi_comm::all_gather_bytes(w, &bytes))?.wait()
}

/// A result that is already there.
fn ready<R>(value: R) -> Pending<R> {
    let (tx, result) = channel();
    let _ = tx.send(value);
    Pending {
        landing: None,
        result,
        started: Arc::new(OnceLock::from(Instant::now())),
    }
}

/// A flat buffer all-reduced on its engine (a tensor's elements, or DDP's
/// bucket); `Avg` sums, and the caller divides.
fn all_reduce_buf(name: &str, buf: Buf, op: ReduceOp) -> Result<Pending<Buf>> {
    match buf {
        Buf::Host(mut h) => launch(name, move |w| {
            mpi_comm::all_reduce(w, &mut h, op);
            Buf::Host(h)
        }),
        Buf::Device(d) => on_nccl(name, |n, _| {
            let landing = n.all_reduce(name, &d, op)?;
            Ok((Buf::Device(d), landing))
        }),
    }
}

/// Rank `src`'s buffer on every rank.
fn broadcast_buf(name: &str, buf: Buf, src: usize) -> Result<Pending<Buf>> {
    match buf {
        Buf::Host(mut h) => launch(name, move |w| {
            mpi_comm::broadcast(w, &mut h, src);
            Buf::Host(h)
        }),
        Buf::Device(d) => on_nccl(name, |n, _| {
            let landing = n.broadcast(name, &d, src)?;
            Ok((Buf::Device(d), landing))
        }),
    }
}
