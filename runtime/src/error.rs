//! Run-time conditions a correct program can meet. Misuse (bad shapes, dtypes,
//! devices) panics instead, with a message naming the op and its operands.

/// tapir's error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The device cannot be used on this machine.
    #[error("device {device} is unavailable: {reason}")]
    DeviceUnavailable {
        /// The device (`cuda:0`).
        device: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A GPU ran out of memory, even after tapir emptied its block cache
    /// (PyTorch's `torch.cuda.OutOfMemoryError`).
    #[error("{device}: out of memory: tried to allocate {requested} bytes with {free} bytes free")]
    OutOfMemory {
        /// The device (`cuda:0`).
        device: String,
        /// Bytes asked for.
        requested: usize,
        /// Bytes the driver reported free.
        free: usize,
    },
    /// A CUDA failure at run time: a driver or library error.
    #[error("{device}: {message}")]
    Cuda {
        /// The device (`cuda:0`).
        device: String,
        /// What failed.
        message: String,
    },
    /// An I/O failure, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A tensor given to a model does not have the shape its `forward` declares.
    #[error("{0}")]
    Shape(String),
    /// A file or buffer that does not hold what it should.
    #[error("{0}")]
    Format(String),
    /// A distributed run-time failure: the engine is missing or stopped, or
    /// the ranks disagree (different models, different tensor sizes).
    #[error("{0}")]
    Distributed(String),
    /// A model that cannot be exported as asked (an op with no ONNX
    /// mapping, a shape that depends on a dynamic dim in an unsupported way).
    #[error("{0}")]
    Export(String),
    /// A graph break in a model compiled with `fullgraph: true`: something
    /// in its forward that a recorded graph cannot repeat.
    #[error("{0}")]
    GraphBreak(String),
}

/// `Result` with tapir's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs `f`, turning an out-of-memory failure inside it (an op panics with
/// an [`Error::OutOfMemory`] payload, as PyTorch raises `OutOfMemoryError`)
/// into `Err`; every other panic goes on unwinding. The `try_` entry points
/// (`try_forward` of `model!` models) run the model through it.
///
/// ```
/// use tapir_runtime::{Error, error::catch_out_of_memory};
/// assert_eq!(catch_out_of_memory(|| 2 + 2).unwrap(), 4);
/// let oom = Error::OutOfMemory { device: "cuda:0".into(), requested: 1 << 40, free: 1 << 30 };
/// let r: Result<(), Error> = catch_out_of_memory(|| std::panic::panic_any(oom));
/// assert!(matches!(r, Err(Error::OutOfMemory { requested, .. }) if requested == 1 << 40));
/// ```
pub fn catch_out_of_memory<T>(f: impl FnOnce() -> T) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(payload) => match payload.downcast::<Error>() {
            Ok(e) if matches!(*e, Error::OutOfMemory { .. }) => Err(*e),
            Ok(e) => std::panic::resume_unwind(e),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

/// The message of a caught panic: its text, or the tapir error it carries.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(e) = payload.downcast_ref::<Error>() {
        e.to_string()
    } else {
        "(a non-string panic)".to_string()
    }
}
