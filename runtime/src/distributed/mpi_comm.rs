//! The MPI engine: one communication thread per process owns MPI (it calls
//! `MPI_Init_thread` and every collective, so MPI sees a single thread, as
//! PyTorch's `ProcessGroupMPI` does). Callers queue jobs on it and wait on
//! their results; a job queued while backward runs proceeds beside it.

use super::{HostBuf as Buf, ReduceOp};
use crate::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::environment::Threading;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

/// What a job on the communication thread talks through.
pub(super) type Comm = SimpleCommunicator;

/// Work for the communication thread.
type Job = Box<dyn FnOnce(&Comm) + Send>;

enum Msg {
    Run(Job),
    /// Finalize MPI and end the thread.
    Finalize,
    /// `MPI_Abort`: ends every process of the job.
    Abort(i32),
}

/// A running MPI engine: this process's rank and the job's size, and the
/// queue into the communication thread.
pub(super) struct MpiComm {
    pub rank: usize,
    pub world: usize,
    queue: Mutex<Sender<Msg>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MpiComm {
    /// Starts MPI on a new communication thread.
    pub fn start() -> Result<MpiComm> {
        let (queue, jobs) = channel::<Msg>();
        let (ready_tx, ready) = channel::<Result<(usize, usize)>>();
        let thread = std::thread::Builder::new()
            .name("tapir-mpi".into())
            .spawn(move || {
                let Some((universe, _)) = mpi::initialize_with_threading(Threading::Funneled) else {
                    let _ = ready_tx.send(Err(Error::Distributed(
                        "init_process_group: MPI was already initialized in this process, and MPI cannot be \
                         started twice (destroying a process group finalizes MPI)"
                            .into(),
                    )));
                    return;
                };
                let world = universe.world();
                let _ = ready_tx.send(Ok((world.rank() as usize, world.size() as usize)));
                for msg in jobs {
                    match msg {
                        Msg::Run(job) => job(&world),
                        Msg::Finalize => break,
                        Msg::Abort(code) => world.abort(code),
                    }
                }
                drop(universe); // MPI_Finalize
            })
            .map_err(|e| Error::Distributed(format!("init_process_group: cannot start the MPI thread: {e}")))?;
        let (rank, world) = ready
            .recv()
            .map_err(|_| Error::Distributed("init_process_group: MPI failed to start".into()))??;
        Ok(MpiComm {
            rank,
            world,
            queue: Mutex::new(queue),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `job`; it runs after every job queued before it.
    pub fn submit(&self, job: impl FnOnce(&Comm) + Send + 'static) -> Result<()> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Msg::Run(Box::new(job)))
            .map_err(|_| Error::Distributed("the MPI communication thread has stopped".into()))
    }

    /// Finalizes MPI after the queued jobs and waits for the thread.
    pub fn finalize(&self) {
        let _ = self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Msg::Finalize);
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }

    /// Asks MPI to end every process of the job (a rank panicked: the others
    /// must not wait for it in a collective forever).
    pub fn abort(&self, code: i32) {
        let _ = self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Msg::Abort(code));
    }
}

fn system_op(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::Sum | ReduceOp::Avg => SystemOperation::sum(),
        ReduceOp::Product => SystemOperation::product(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
}

thread_local! {
    /// The communication thread's send buffers, one per dtype, kept between
    /// collectives: MPI reduces from a copy into the caller's buffer, and a
    /// fresh copy per bucket per step paid its page faults every time.
    static SEND: RefCell<(Vec<f32>, Vec<f64>, Vec<i64>)> = const { RefCell::new((vec![], vec![], vec![])) };
}

fn all_reduce_vec<T: Equivalence + Copy>(w: &Comm, send: &mut Vec<T>, v: &mut [T], op: ReduceOp) {
    send.clear();
    send.extend_from_slice(v);
    w.all_reduce_into(&send[..], v, system_op(op));
}

fn broadcast_vec<T: Equivalence>(w: &Comm, v: &mut [T], src: usize) {
    w.process_at_rank(src as i32).broadcast_into(v);
}

fn all_gather_vec<T: Equivalence + Copy + Default>(w: &Comm, v: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); v.len() * w.size() as usize];
    w.all_gather_into(v, &mut out[..]);
    out
}

fn reduce_scatter_vec<T: Equivalence + Copy + Default>(w: &Comm, v: &[T], op: ReduceOp) -> Vec<T> {
    let mut out = vec![T::default(); v.len() / w.size() as usize];
    w.reduce_scatter_block_into(v, &mut out[..], system_op(op));
    out
}

/// The collectives on flat buffers, run on the communication thread.
pub(super) fn all_reduce(w: &Comm, buf: &mut Buf, op: ReduceOp) {
    SEND.with_borrow_mut(|(f32s, f64s, i64s)| match buf {
        Buf::F32(v) => all_reduce_vec(w, f32s, v, op),
        Buf::F64(v) => all_reduce_vec(w, f64s, v, op),
        Buf::I64(v) => all_reduce_vec(w, i64s, v, op),
    })
}

pub(super) fn broadcast(w: &Comm, buf: &mut Buf, src: usize) {
    match buf {
        Buf::F32(v) => broadcast_vec(w, v, src),
        Buf::F64(v) => broadcast_vec(w, v, src),
        Buf::I64(v) => broadcast_vec(w, v, src),
    }
}

pub(super) fn all_gather(w: &Comm, buf: &Buf) -> Buf {
    match buf {
        Buf::F32(v) => Buf::F32(all_gather_vec(w, v)),
        Buf::F64(v) => Buf::F64(all_gather_vec(w, v)),
        Buf::I64(v) => Buf::I64(all_gather_vec(w, v)),
    }
}

pub(super) fn reduce_scatter(w: &Comm, buf: &Buf, op: ReduceOp) -> Buf {
    match buf {
        Buf::F32(v) => Buf::F32(reduce_scatter_vec(w, v, op)),
        Buf::F64(v) => Buf::F64(reduce_scatter_vec(w, v, op)),
        Buf::I64(v) => Buf::I64(reduce_scatter_vec(w, v, op)),
    }
}

/// Every rank's bytes (of any length), in rank order.
pub(super) fn all_gather_bytes(w: &Comm, bytes: &[u8]) -> Vec<Vec<u8>> {
    let lens = all_gather_vec(w, &[bytes.len() as i64]);
    let total = lens.iter().sum::<i64>() as usize;
    let mut all = vec![0u8; total];
    let counts: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
    let displs: Vec<i32> = counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect();
    {
        let mut part = mpi::datatype::PartitionMut::new(&mut all[..], counts.clone(), &displs[..]);
        w.all_gather_varcount_into(bytes, &mut part);
    }
    let mut out = vec![];
    let mut at = 0;
    for c in counts {
        out.push(all[at..at + c as usize].to_vec());
        at += c as usize;
    }
    out
}

/// `MPI_Barrier`.
pub(super) fn barrier(w: &Comm) {
    w.barrier();
}
