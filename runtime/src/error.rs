//! Run-time conditions a correct program can meet. Misuse (bad shapes, dtypes,
//! devices) panics instead, with a message naming the op and its operands.

/// tapir's error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The device cannot be used on this machine.
    #[error("device {device} is unavailable: {reason}")]
    DeviceUnavailable { device: String, reason: String },
    /// A CUDA failure at run time: out of memory, a driver or library error.
    #[error("{device}: {message}")]
    Cuda { device: String, message: String },
    /// An I/O failure, with the path involved.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A tensor given to a model does not have the shape its `forward` declares.
    #[error("{0}")]
    Shape(String),
    /// A file or buffer that does not hold what it should.
    #[error("{0}")]
    Format(String),
}

/// `Result` with tapir's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
