//! CUDA graphs (`torch.cuda.CUDAGraph` with `torch.cuda.graph`): the kernels
//! a closure queues on a GPU, captured once and replayed with one launch,
//! so a replay costs no host time per op. [`compile`](crate::compile)'s
//! `mode: ReduceOverhead` and [`compile_step`](crate::compile_step) build
//! on this.
//!
//! As in PyTorch, a graph replays on the addresses it captured: it reads
//! the tensors the closure read and rewrites the tensors the closure made,
//! in place. Feed new data by copying it into the captured inputs
//! (`copy_`), and read results from the captured outputs after each
//! replay. Inside the closure a read to the host (`item`, `to_vec`), a copy
//! from the host, or a `synchronize` panics, ending the capture: a graph
//! cannot hold them. Run the work once before capturing it, so that lazy
//! set-up (kernel loading, library workspaces) is not captured. While a
//! capture runs the GPU's one stream belongs to it: work another thread
//! queues on that GPU meanwhile would be captured too.

use crate::device::Device;
use crate::error::Result;
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: not yet read from the environment; 1: on; 2: off.
static GRAPHS: AtomicU8 = AtomicU8::new(0);

/// Whether `compile`'s `mode: ReduceOverhead` and `compile_step` capture
/// CUDA graphs: on unless `TAPIR_CUDA_GRAPHS=0` is set or
/// [`set_graphs_enabled`]`(false)` was called. Off, they run as they do on
/// the CPU (replay without graphs, eager steps), with that as the reason.
/// [`CudaGraph::capture`] itself is not affected.
///
/// ```
/// use tapir_runtime::cuda;
/// // Doctests share a process: this one looks without switching.
/// if !cuda::graphs_enabled() {
///     println!("CUDA graphs are off: compiled GPU models replay without them");
/// }
/// ```
pub fn graphs_enabled() -> bool {
    match GRAPHS.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var("TAPIR_CUDA_GRAPHS").map_or(true, |v| v.trim() != "0");
            let _ = GRAPHS.compare_exchange(
                0,
                if on { 1 } else { 2 },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            GRAPHS.load(Ordering::Relaxed) == 1
        }
        v => v == 1,
    }
}

/// Turns graph capture by `compile` and `compile_step` on or off for the
/// process (signatures already decided keep their state until `reset`).
pub fn set_graphs_enabled(on: bool) {
    GRAPHS.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// A captured CUDA graph (`torch.cuda.CUDAGraph`). Dropping it returns its
/// memory pool to the caching allocator.
///
/// ```
/// use tapir_runtime::{cuda::CudaGraph, Device, Tensor};
/// let dev = Device::Cuda(0);
/// if let Ok(x) = Tensor::zeros(&[4]).to(dev) {
///     let y0 = x.add(&x).relu(); // warm-up, eager
///     let (graph, y) = CudaGraph::capture(dev, || x.add(&x).relu()).unwrap();
///     x.copy_(&Tensor::ones(&[4]).to(dev).unwrap());
///     graph.replay().unwrap();
///     assert_eq!(y.to_vec::<f32>(), vec![2.0; 4]);
///     assert_eq!(y0.to_vec::<f32>(), vec![0.0; 4]);
/// } else {
///     // No GPU: capturing is an error, never a crash.
///     assert!(CudaGraph::capture(dev, || ()).is_err());
///     assert!(CudaGraph::capture(Device::Cpu, || ()).is_err());
/// }
/// ```
pub struct CudaGraph {
    device: Device,
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    graph: tapir_kernels::cuda::CapturedGraph,
}

impl std::fmt::Debug for CudaGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaGraph({})", self.device)
    }
}

impl CudaGraph {
    /// Captures the work `work` queues on `device` (`with
    /// torch.cuda.graph(g): out = work()`), returning the graph and
    /// `work`'s value. Nothing captured has run yet: call
    /// [`replay`](Self::replay). `Err` where there is no such GPU or the
    /// driver refuses the capture; a panic inside `work` ends the capture
    /// and continues.
    pub fn capture<T>(device: Device, work: impl FnOnce() -> T) -> Result<(CudaGraph, T)> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Device::Cuda(i) = device {
            let dev = crate::storage::cuda::device(i)
                .map_err(|e| crate::device::cuda_error(device, e))?;
            let (graph, out) = dev
                .capture(work)
                .map_err(|e| crate::device::cuda_error(device, e))?;
            return Ok((CudaGraph { device, graph }, out));
        }
        let _ = work;
        Err(crate::device::unavailable(
            device,
            match device {
                Device::Cpu => "CUDA graphs capture GPU work, and this is the CPU",
                Device::Cuda(_) => "tapir was built without the `cuda` feature",
            },
        ))
    }

    /// Runs the captured work again (`g.replay()`), queued on the device's
    /// stream like any op: reading an output waits for it.
    pub fn replay(&self) -> Result<()> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return self
            .graph
            .replay()
            .map_err(|e| crate::device::cuda_error(self.device, e));
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        unreachable!("a CudaGraph exists only with the `cuda` feature")
    }

    /// The GPU the graph runs on.
    pub fn device(&self) -> Device {
        self.device
    }
}

/// The hyper-parameter rows of an optimizer step inside a CUDA graph
/// (`tapir_kernels::cuda::HyperTable`): while one is active, the device's
/// fused optimizer updates read their learning rate and step constants from
/// device memory that the host rewrites before each replay.
pub(crate) struct StepTable {
    #[cfg_attr(not(any(feature = "cuda", feature = "cuda12")), allow(dead_code))]
    device: Device,
    #[cfg(any(feature = "cuda", feature = "cuda12"))]
    table: Option<tapir_kernels::cuda::HyperTable>,
}

impl StepTable {
    /// A table of `rows` updates on `device` (made outside any capture).
    pub(crate) fn new(device: Device, rows: usize) -> Result<StepTable> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        if let Device::Cuda(i) = device {
            let err = |e| crate::device::cuda_error(device, e);
            let dev = crate::storage::cuda::device(i).map_err(err)?;
            let table = tapir_kernels::cuda::HyperTable::new(&dev, rows).map_err(err)?;
            return Ok(StepTable {
                device,
                table: Some(table),
            });
        }
        let _ = rows;
        Err(crate::device::unavailable(
            device,
            "optimizer steps go into CUDA graphs only on a GPU",
        ))
    }

    /// Runs `step` (an optimizer's `step()`) with its fused updates routed
    /// through the table: launched to read it when `prepare` is false (while
    /// capturing), only written when it is true (before a replay). Returns
    /// the rows written and the rows the capture wrote.
    pub(crate) fn route(&mut self, prepare: bool, step: impl FnOnce()) -> (usize, usize) {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        {
            use tapir_kernels::cuda::TableMode;
            let Device::Cuda(i) = self.device else {
                unreachable!("a StepTable lives on a GPU")
            };
            let dev = crate::storage::cuda::device(i)
                .unwrap_or_else(|e| crate::storage::cuda::fail("optimizer step", e));
            let table = self
                .table
                .take()
                .expect("the table is back after each route");
            let mode = if prepare {
                TableMode::Prepare
            } else {
                TableMode::Capture
            };
            dev.set_hyper_table(table, mode);
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(step));
            let table = dev.take_hyper_table().expect("set above");
            let counts = (table.written(), table.captured());
            self.table = Some(table);
            if let Err(panic) = out {
                std::panic::resume_unwind(panic);
            }
            counts
        }
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        {
            let _ = (prepare, step);
            unreachable!("a StepTable exists only with the `cuda` feature")
        }
    }

    /// Copies the rows to the device, queued before the next replay.
    pub(crate) fn upload(&mut self) -> Result<()> {
        #[cfg(any(feature = "cuda", feature = "cuda12"))]
        return self
            .table
            .as_mut()
            .expect("the table is back after each route")
            .upload()
            .map_err(|e| crate::device::cuda_error(self.device, e));
        #[cfg(not(any(feature = "cuda", feature = "cuda12")))]
        unreachable!("a StepTable exists only with the `cuda` feature")
    }
}
