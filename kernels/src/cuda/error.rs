//! What can go wrong on a GPU at run time, as one typed error: the runtime
//! turns out-of-memory into its own `Error::OutOfMemory` and the rest into
//! one sentence naming the device.

/// A CUDA failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    /// The driver library (libcuda.so) could not be loaded.
    #[error("the CUDA driver library (libcuda.so) was not found")]
    NoDriver,
    /// The ordinal names no device.
    #[error("only {count} CUDA device(s) present")]
    NoSuchDevice {
        /// Devices present.
        count: usize,
    },
    /// A CUDA library other than the driver could not be loaded.
    #[error("cuda:{device}: the {library} library was not found")]
    MissingLibrary {
        /// The device's ordinal.
        device: usize,
        /// Which library (`libcublas.so`).
        library: &'static str,
    },
    /// The caching allocator could not get a block even after emptying its cache.
    #[error(
        "CUDA out of memory on cuda:{device}: tried to allocate {requested} bytes with {free} bytes \
         free on the device ({allocated} allocated by tensors, {reserved} reserved by tapir)"
    )]
    OutOfMemory {
        /// The device's ordinal.
        device: usize,
        /// Bytes asked for (rounded to the allocator's block size).
        requested: usize,
        /// Bytes the driver reports free.
        free: usize,
        /// Bytes held by live tensors.
        allocated: usize,
        /// Bytes obtained from the driver, cached blocks included.
        reserved: usize,
    },
    /// A kernel failed to compile with NVRTC (the message carries its log).
    #[error("cuda:{device}: {message}")]
    Compile {
        /// The device's ordinal.
        device: usize,
        /// NVRTC's message and log.
        message: String,
    },
    /// A driver or library call failed.
    #[error("cuda:{device}: {what}: {detail}")]
    Driver {
        /// The device's ordinal.
        device: usize,
        /// What tapir was doing.
        what: String,
        /// The driver's or library's own error.
        detail: String,
    },
    /// A size beyond what a CUDA library takes.
    #[error("{0}")]
    Unsupported(String),
}

/// `Result` with a [`CudaError`].
pub type CudaResult<T> = Result<T, CudaError>;
