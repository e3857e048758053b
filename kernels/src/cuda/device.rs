//! One CUDA device: its context, its one stream, the kernels loaded on it, its
//! cuBLAS handle and its caching allocator. Created once per ordinal and
//! shared; everything runs in order on the one stream, so the host waits only
//! where it reads data back.

use super::allocator::Pool;
use super::checks::IndexChecks;
use super::modules::{Compiled, Module, compiled, module_of, param_sizes};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr,
    PinnedHostSlice,
};
use cudarc::nvrtc::Ptx;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

pub use super::error::{CudaError, CudaResult};
pub use crate::stats::MemoryStats;

/// Host-to-device copies up to this size go through pinned staging memory.
const STAGING_MAX: usize = 64 << 20;

/// A pinned host block for one upload, and the event after its copy.
struct Staging {
    block: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

/// A loaded kernel and its parameters' sizes in bytes (from its PTX).
type Loaded = (CudaFunction, Option<Vec<usize>>);

/// A point on a device's stream (see `CudaDevice::timing_mark`).
pub struct TimingMark {
    event: CudaEvent,
    ordinal: usize,
}

impl TimingMark {
    /// Milliseconds of GPU time from this mark to `end`, waiting for `end`.
    pub fn elapsed_ms(&self, end: &TimingMark) -> CudaResult<f32> {
        let err = |what: &str, e: cudarc::driver::DriverError| CudaError::Driver {
            device: self.ordinal,
            what: what.to_string(),
            detail: format!("{e:?}"),
        };
        end.event
            .synchronize()
            .map_err(|e| err("waiting for a timing event", e))?;
        self.event
            .elapsed_ms(&end.event)
            .map_err(|e| err("reading a timing event", e))
    }
}

/// One GPU: its context, stream, loaded kernels, cuBLAS handle and caching allocator.
pub struct CudaDevice {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The device's own architecture (`sm_90` on an H100/H200).
    arch: String,
    capability: (u32, u32),
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    /// Each loaded kernel, with its parameters' sizes from the PTX.
    functions: Mutex<HashMap<String, Loaded>>,
    blas: OnceLock<CudaResult<CudaBlas>>,
    pub(super) pool: Mutex<Pool>,
    staging: Mutex<HashMap<usize, Vec<Staging>>>,
    allow_tf32: AtomicBool,
    checks: IndexChecks,
    /// Where fused optimizer updates put their hyper-parameters, while a
    /// graph captures or prepares a step (`hyper.rs`).
    pub(super) hyper: Mutex<Option<super::hyper::HyperTable>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuda:{}", self.ordinal)
    }
}

thread_local! {
    static HOST_WAITS: Cell<u64> = const { Cell::new(0) };
}

/// How many times this thread has waited for a device's queued work
/// (`CudaDevice::synchronize`, which every read of device data calls).
pub fn host_waits() -> u64 {
    HOST_WAITS.with(Cell::get)
}

static KERNEL_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// Work items queued on any device by this process so far: each tapir
/// kernel launch (fills and strided copies included), each cuBLAS GEMM
/// and each cuDNN convolution counts one; plain memory copies (uploads,
/// reads, duplicates) do not.
pub fn kernel_launches() -> u64 {
    KERNEL_LAUNCHES.load(Ordering::Relaxed)
}

/// Counts one launch (see [`kernel_launches`]).
pub(crate) fn count_launch() {
    KERNEL_LAUNCHES.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared handle of CUDA device `ordinal`, created on first use; `Err`
/// says why it cannot be used (no driver, no such device, context failure).
pub fn device(ordinal: usize) -> CudaResult<Arc<CudaDevice>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
    let devices = DEVICES.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(d) = lock(devices).get(&ordinal) {
        return Ok(d.clone());
    }
    super::device_check(ordinal)?;
    let driver = |what: &str, e: cudarc::driver::DriverError| CudaError::Driver {
        device: ordinal,
        what: what.to_string(),
        detail: format!("{e:?}"),
    };
    let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating the context", e))?;
    // SAFETY: tapir issues all work on the device's one stream, in order, so
    // no buffer is used or freed concurrently from another stream; the events
    // cudarc would otherwise record on every launch guard nothing here.
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| driver("reading the compute capability", e))?;
    let arch = format!("sm_{major}{minor}");
    let capability = (major as u32, minor as u32);
    // A stream of its own, not the context's default (legacy NULL) stream:
    // CUDA cannot capture the legacy stream into a graph (`torch.cuda.graph`
    // captures on a side stream for the same reason). Non-blocking, so no
    // other library's work on the legacy stream orders itself against it.
    let stream = ctx
        .new_stream()
        .map_err(|e| driver("creating the compute stream", e))?;
    let dev = Arc::new(CudaDevice {
        ordinal,
        ctx,
        stream,
        arch,
        capability,
        modules: Mutex::new(HashMap::new()),
        functions: Mutex::new(HashMap::new()),
        blas: OnceLock::new(),
        pool: Mutex::new(Pool::default()),
        staging: Mutex::new(HashMap::new()),
        allow_tf32: AtomicBool::new(false),
        checks: IndexChecks::new(),
        hyper: Mutex::new(None),
    });
    Ok(lock(devices).entry(ordinal).or_insert(dev).clone())
}

impl CudaDevice {
    /// The device's ordinal (`cuda:N`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The product name the driver reports (`torch.cuda.get_device_name`).
    pub fn name(&self) -> CudaResult<String> {
        self.ctx
            .name()
            .map_err(|e| self.err("reading the device name", e))
    }

    /// Free and total device memory in bytes, as the driver sees them
    /// (`torch.cuda.mem_get_info`; blocks in tapir's cache count as used).
    pub fn mem_get_info(&self) -> CudaResult<(usize, usize)> {
        self.ctx
            .mem_get_info()
            .map_err(|e| self.err("reading free memory", e))
    }

    /// The compute capability, (major, minor) (`torch.cuda.get_device_capability`).
    pub fn capability(&self) -> (u32, u32) {
        self.capability
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn err(&self, what: &str, e: impl std::fmt::Debug) -> CudaError {
        CudaError::Driver {
            device: self.ordinal,
            what: what.to_string(),
            detail: format!("{e:?}"),
        }
    }

    /// The kernel `name` (`<op>_<dtype>`), compiled with NVRTC on first use of
    /// its module and loaded once per device, for a launch with arguments of
    /// `arg_sizes` bytes. Panics if they are not the kernel's parameters: a
    /// launcher out of step with its `.cu` source, which is a tapir bug.
    pub(crate) fn function(&self, name: &str, arg_sizes: &[usize]) -> CudaResult<CudaFunction> {
        let check = |params: &Option<Vec<usize>>| {
            if let Some(params) = params {
                assert!(
                    params.as_slice() == arg_sizes,
                    "launching {name}: the kernel's parameters (left, bytes, from its PTX) \
                     differ from the launcher's arguments (right)"
                );
            }
        };
        if let Some((f, params)) = lock(&self.functions).get(name) {
            check(params);
            return Ok(f.clone());
        }
        let m = module_of(name)
            .ok_or_else(|| CudaError::Unsupported(format!("no CUDA kernel named `{name}`")))?;
        let code = self.compiled(&m)?;
        let params = param_sizes(&code.ptx, name);
        check(&params);
        let module = {
            let mut modules = lock(&self.modules);
            match modules.get(m.name) {
                Some(loaded) => loaded.clone(),
                None => {
                    let loaded = self.load(&code, m.name)?;
                    modules.insert(m.name, loaded.clone());
                    loaded
                }
            }
        };
        let f = module
            .load_function(name)
            .map_err(|e| self.err(&format!("loading kernel {name}"), e))?;
        lock(&self.functions).insert(name.to_string(), (f.clone(), params));
        Ok(f)
    }

    /// `module` compiled for this device: for its own architecture, or, if
    /// this NVRTC does not know it (a GPU newer than the compiler), as sm_90
    /// PTX, which the driver compiles for the GPU when loading it.
    fn compiled(&self, module: &Module) -> CudaResult<Arc<Compiled>> {
        compiled(module, &self.arch).or_else(|exact| {
            compiled(module, "sm_90").map_err(|_| CudaError::Compile {
                device: self.ordinal,
                message: exact,
            })
        })
    }

    /// Loads a module's machine code, or its PTX where there is none for
    /// this device (see `nvrtc.rs` for why machine code comes first).
    fn load(&self, code: &Compiled, name: &str) -> CudaResult<Arc<CudaModule>> {
        let from_ptx = || self.ctx.load_module(Ptx::from_src(code.ptx.as_str()));
        let loaded = match &code.cubin {
            Some(cubin) => self
                .ctx
                .load_module(Ptx::from_binary(cubin.clone()))
                .or_else(|machine| from_ptx().map_err(|ptx| (machine, ptx))),
            None => from_ptx().map_err(|ptx| (ptx, ptx)),
        };
        loaded.map_err(|(machine, ptx)| {
            self.err(
                &format!("loading {name}.cu (machine code: {machine:?}; PTX)"),
                ptx,
            )
        })
    }

    /// The device's cuBLAS handle (bound to its stream), created on first use.
    pub(crate) fn blas(&self) -> CudaResult<&CudaBlas> {
        self.blas
            .get_or_init(|| {
                // SAFETY: only tries to dlopen libcublas; cudarc panics on a
                // missing library, so look before creating the handle.
                if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                    return Err(CudaError::MissingLibrary {
                        device: self.ordinal,
                        library: "cuBLAS (libcublas.so)",
                    });
                }
                CudaBlas::new(self.stream.clone()).map_err(|e| self.err("creating cuBLAS", e))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Makes this device's context current on the calling thread; cuBLAS
    /// calls need it (cudarc's own calls bind by themselves).
    pub(crate) fn bind(&self) -> CudaResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.err("binding the context", e))
    }

    /// Whether f32 matmuls may use TF32 tensor cores (PyTorch's
    /// `torch.backends.cuda.matmul.allow_tf32`; off by default, as there).
    pub fn set_allow_tf32(&self, on: bool) {
        self.allow_tf32.store(on, Ordering::Relaxed);
    }

    /// Whether f32 matmuls may use TF32.
    pub fn allow_tf32(&self) -> bool {
        self.allow_tf32.load(Ordering::Relaxed)
    }

    /// A timing event recorded on the device's stream now: the GPU side of
    /// a profiled op starts or ends here (`torch.cuda.Event(enable_timing=True)`).
    pub fn timing_mark(&self) -> CudaResult<TimingMark> {
        let event = self
            .ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| self.err("creating a timing event", e))?;
        event
            .record(&self.stream)
            .map_err(|e| self.err("recording a timing event", e))?;
        Ok(TimingMark {
            event,
            ordinal: self.ordinal,
        })
    }

    /// Waits for all work queued on the device, then reports an
    /// out-of-range index an indexing kernel found meanwhile (a panic, see
    /// `checks.rs`).
    pub fn synchronize(&self) -> CudaResult<()> {
        self.refuse_in_capture("waiting for the device")?;
        HOST_WAITS.with(|w| w.set(w.get() + 1));
        self.stream
            .synchronize()
            .map_err(|e| self.err("synchronize", e))?;
        self.report_index_errors()
    }

    /// A fresh event on this device (no timing), for ordering host work
    /// after a queued copy.
    pub(crate) fn new_event(&self) -> CudaResult<CudaEvent> {
        self.ctx
            .new_event(None)
            .map_err(|e| self.err("creating an event", e))
    }

    pub(crate) fn checks(&self) -> &IndexChecks {
        &self.checks
    }

    /// Copies `data` into the start of `dst` without making the host wait for
    /// queued GPU work (a copy from pageable memory would): the bytes go to a
    /// pinned staging block, from which the copy runs in stream order, as
    /// PyTorch's `pin_memory` + `non_blocking=True`. Blocks are kept per size
    /// and reused once their copy has run; copies over 64 MiB go direct.
    pub(crate) fn copy_htod<T: DeviceRepr>(
        &self,
        data: &[T],
        dst: &mut CudaSlice<u8>,
    ) -> CudaResult<()> {
        self.refuse_in_capture("a host-to-device copy")?;
        let n = std::mem::size_of_val(data);
        // SAFETY: T is plain data (DeviceRepr), so each of its bytes is a
        // valid u8, and the view covers exactly `data`'s memory.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), n) };
        let mut dst = dst.slice_mut(0..n);
        if n > STAGING_MAX {
            return self
                .stream
                .memcpy_htod(bytes, &mut dst)
                .map_err(|e| self.err("host-to-device copy", e));
        }
        let reused = lock(&self.staging).get_mut(&n).and_then(Vec::pop);
        let mut st = match reused {
            Some(st) => {
                // The block's previous copy must have read it before we write.
                st.copied
                    .synchronize()
                    .map_err(|e| self.err("staging reuse", e))?;
                st
            }
            None => Staging {
                // SAFETY: uninitialised pinned memory, written in full below
                // before any copy reads it.
                block: unsafe { self.ctx.alloc_pinned::<u8>(n) }
                    .map_err(|e| self.err("pinned host allocation", e))?,
                copied: self
                    .ctx
                    .new_event(None)
                    .map_err(|e| self.err("creating an event", e))?,
            },
        };
        st.block
            .as_mut_slice()
            .map_err(|e| self.err("pinned host block", e))?
            .copy_from_slice(bytes);
        self.stream
            .memcpy_htod(&st.block, &mut dst)
            .map_err(|e| self.err("host-to-device copy", e))?;
        st.copied
            .record(&self.stream)
            .map_err(|e| self.err("recording an event", e))?;
        lock(&self.staging).entry(n).or_default().push(st);
        Ok(())
    }

    /// A new buffer holding `data`.
    pub fn upload<T: DeviceRepr>(self: &Arc<Self>, data: &[T]) -> CudaResult<super::CudaBuffer> {
        let mut buf = self.alloc(std::mem::size_of_val(data))?;
        buf.write(data)?;
        Ok(buf)
    }
}
