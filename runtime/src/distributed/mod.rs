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

mod ddp;
#[cfg(feature = "distributed")]
mod mpi_comm;
#[cfg(not(feature = "distributed"))]
#[path = "no_mpi.rs"]
mod mpi_comm;

pub use ddp::{BucketTiming, DdpOptions, DistributedDataParallel, NoSyncGuard, SyncTimeline};

use crate::{DType, Error, Result, Tensor};
use mpi_comm::{Comm, MpiComm};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// The engine a process group runs on (PyTorch's backend names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// MPI (Open MPI): CPU tensors, processes started by `mpirun`.
    Mpi,
    /// NCCL: one process per GPU. Not built yet: `init_process_group`
    /// returns an error saying so.
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

/// The default process group: who this process is, and its engine.
struct Group {
    rank: usize,
    world: usize,
    engine: MpiComm,
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
        if std::thread::panicking() {
            g.engine.abort(1);
        } else {
            g.engine.finalize();
        }
    }
}

/// Starts the default process group on `backend` (PyTorch's
/// `init_process_group`). Under `mpirun -np N` each process learns its rank
/// and the world size; started alone, it is rank 0 of 1.
pub fn init_process_group(backend: Backend) -> Result<ProcessGroup> {
    let mut slot = GROUP.write().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return Err(Error::Distributed(
            "init_process_group: the default process group is already initialized".into(),
        ));
    }
    let engine = match backend {
        Backend::Mpi => MpiComm::start()?,
        Backend::Nccl => {
            return Err(Error::Distributed(
                "init_process_group: the NCCL backend is not available in this version of tapir; use Backend::Mpi"
                    .into(),
            ));
        }
    };
    *slot = Some(Arc::new(Group {
        rank: engine.rank,
        world: engine.world,
        engine,
    }));
    Ok(ProcessGroup { _private: () })
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

/// Waits until every rank has reached the barrier.
pub fn barrier() -> Result<()> {
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
    result: Receiver<R>,
    started: Arc<OnceLock<Instant>>,
}

impl<R> Pending<R> {
    fn wait(self) -> Result<R> {
        self.result.recv().map_err(|_| {
            Error::Distributed(
                "the communication thread stopped before a collective finished".into(),
            )
        })
    }
}

fn launch<R: Send + 'static>(
    op: &str,
    job: impl FnOnce(&Comm) -> R + Send + 'static,
) -> Result<Pending<R>> {
    let g = group(op)?;
    let (tx, result) = channel();
    let started = Arc::new(OnceLock::new());
    let stamp = started.clone();
    g.engine.submit(move |w| {
        let _ = stamp.set(Instant::now());
        let _ = tx.send(job(w));
    })?;
    Ok(Pending { result, started })
}

/// A tensor's elements as the engine sends them.
pub(crate) enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

impl Buf {
    fn of(t: &Tensor, op: &str) -> Buf {
        match t.dtype() {
            DType::F32 => Buf::F32(t.to_vec()),
            DType::F64 => Buf::F64(t.to_vec()),
            DType::I64 => Buf::I64(t.to_vec()),
            d => panic!(
                "{op}: the MPI backend carries f32, f64 and i64 tensors, not {d:?}; convert with to_dtype first"
            ),
        }
    }

    /// `n` zeros of `dtype` (a gradient this rank did not produce).
    fn zeros(dtype: DType, n: usize, op: &str) -> Buf {
        match dtype {
            DType::F32 => Buf::F32(vec![0.0; n]),
            DType::F64 => Buf::F64(vec![0.0; n]),
            DType::I64 => Buf::I64(vec![0; n]),
            d => panic!("{op}: the MPI backend carries f32, f64 and i64 tensors, not {d:?}"),
        }
    }

    /// Appends `other` (same dtype).
    fn append(&mut self, other: Buf) {
        match (self, other) {
            (Buf::F32(a), Buf::F32(b)) => a.extend(b),
            (Buf::F64(a), Buf::F64(b)) => a.extend(b),
            (Buf::I64(a), Buf::I64(b)) => a.extend(b),
            _ => panic!("reduce_scatter: every input must have one dtype"),
        }
    }

    fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::F64(v) => v.len(),
            Buf::I64(v) => v.len(),
        }
    }

    fn scale(&mut self, by: f64) {
        match self {
            Buf::F32(v) => v.iter_mut().for_each(|x| *x *= by as f32),
            Buf::F64(v) => v.iter_mut().for_each(|x| *x *= by),
            Buf::I64(_) => unreachable!("Avg is refused for integer tensors"),
        }
    }

    /// Elements `range` as a tensor of `shape` on `like`'s device.
    fn tensor(
        &self,
        range: std::ops::Range<usize>,
        shape: &[usize],
        like: &Tensor,
    ) -> Result<Tensor> {
        let t = match self {
            Buf::F32(v) => Tensor::from_slice(&v[range], shape),
            Buf::F64(v) => Tensor::from_slice(&v[range], shape),
            Buf::I64(v) => Tensor::from_slice(&v[range], shape),
        };
        t.to(like.device())
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
    let mut buf = Buf::of(t, "broadcast");
    let pending = launch("broadcast", move |w| {
        mpi_comm::broadcast(w, &mut buf, src);
        buf
    })?;
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
    let pending = launch("all_gather", move |w| {
        // Agree on shapes first: a mismatch is an error on every rank, not a
        // truncated message.
        let all = mpi_comm::all_gather_bytes(w, &signature);
        let first = all.iter().position(|s| *s != all[0]);
        first.map_or_else(|| Ok(mpi_comm::all_gather(w, &buf)), |r| Err((r, all)))
    })?;
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
    let pending = launch("reduce_scatter", move |w| {
        mpi_comm::reduce_scatter(w, &buf, op)
    })?;
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
    launch(op, move |w| mpi_comm::all_gather_bytes(w, &bytes))?.wait()
}

/// A flat buffer all-reduced on the engine (a tensor's elements, or DDP's
/// bucket); `Avg` is left to the caller (MPI only sums).
fn all_reduce_buf(name: &str, mut buf: Buf, op: ReduceOp) -> Result<Pending<Buf>> {
    launch(name, move |w| {
        mpi_comm::all_reduce(w, &mut buf, op);
        buf
    })
}
