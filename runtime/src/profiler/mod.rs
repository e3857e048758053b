//! Where the time goes (`torch.profiler`): every forward op, every backward
//! node, the optimizer step, time blocked on the DataLoader and your own
//! `record_function` scopes, as a table of totals and as a Chrome trace.
//!
//! ```
//! use tapir_runtime::{profiler::{self, ProfilerOptions, SortBy}, Tensor};
//! let w = Tensor::randn(&[8, 4]).requires_grad_(true);
//! let prof = profiler::profile(ProfilerOptions { record_shapes: true, ..Default::default() }, || {
//!     let _step = profiler::record_function("step");
//!     Tensor::randn(&[2, 8]).matmul(&w).relu().sum().backward();
//! });
//! let table = prof.key_averages();
//! assert_eq!(table.row("matmul").unwrap().calls, 1);
//! assert!(table.row("MmBackward0").is_some());
//! println!("{}", table.table(SortBy::SelfCpuTimeTotal, 10));
//! ```
//!
//! With no profiler running each op pays one relaxed atomic load.

mod chrome;
mod gpu;
mod table;

pub use table::{KeyAverage, KeyAverages, SortBy};
pub use tapir_kernels::stats::matmul_launches;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What to record besides op times (`torch.profiler.profile`'s flags).
#[derive(Clone, Debug, Default)]
pub struct ProfilerOptions {
    /// Record each op's input shapes (the table's `Input Shapes`).
    pub record_shapes: bool,
    /// Record the CPU tensor memory each op leaves allocated (`CPU Mem`).
    pub profile_memory: bool,
    /// Time ops on CUDA tensors on the GPU too: CUDA events on the device's
    /// stream at each op's start and end (`Self CUDA`, `CUDA total`, and a
    /// GPU track in the trace).
    pub cuda: bool,
}

/// One recorded interval.
#[derive(Clone, Debug)]
pub struct ProfilerEvent {
    /// The op (`matmul`), backward node (`MmBackward0`) or scope label.
    pub name: String,
    /// What kind of thing it is: `op`, `autograd`, `user`, `module`, `optimizer` or `dataloader`.
    pub category: &'static str,
    /// Microseconds from the profiler's start.
    pub start_us: f64,
    /// Wall time, microseconds.
    pub duration_us: f64,
    /// Wall time minus the time of the events nested directly inside.
    pub self_us: f64,
    /// A small number per OS thread (1 is the first thread seen).
    pub thread: u64,
    /// How many events enclose this one on its thread.
    pub depth: usize,
    /// The inputs' shapes, when `record_shapes`.
    pub input_shapes: Vec<Vec<usize>>,
    /// CPU tensor bytes allocated minus freed inside it (with `profile_memory`).
    pub cpu_memory: i64,
    /// The same, less what nested events account for.
    pub self_cpu_memory: i64,
    /// GPU time between the op's start and end on its device's stream
    /// (with `cuda`, for ops on CUDA tensors), µs.
    pub cuda_us: f64,
    /// The same, less the GPU time of the ops nested inside.
    pub self_cuda_us: f64,
    /// Where its GPU interval starts on the timeline, µs, and on which device.
    pub cuda_start: Option<(f64, usize)>,
}

struct Session {
    options: ProfilerOptions,
    start: Instant,
    events: Mutex<Vec<(ProfilerEvent, Option<gpu::Pending>)>>,
    gpu_bases: gpu::Bases,
}

static PROFILING: AtomicBool = AtomicBool::new(false);
static SESSION: Mutex<Option<Arc<Session>>> = Mutex::new(None);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// Per thread: its number, and the open events' (child time, child memory).
struct ThreadState {
    id: u64,
    open: Vec<(f64, i64)>,
}

thread_local! {
    static THREAD: RefCell<ThreadState> = RefCell::new(ThreadState {
        id: NEXT_THREAD.fetch_add(1, Ordering::Relaxed),
        open: Vec::new(),
    });
}

fn session() -> Option<Arc<Session>> {
    if !PROFILING.load(Ordering::Relaxed) {
        return None;
    }
    SESSION.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// An open event; it is recorded when dropped.
#[must_use = "the event ends when this is dropped"]
pub struct RecordFunction(Option<Open>);

struct Open {
    session: Arc<Session>,
    name: Cow<'static, str>,
    category: &'static str,
    start: Instant,
    shapes: Vec<Vec<usize>>,
    mem_start: usize,
    gpu: Option<gpu::Started>,
}

fn cpu_allocated() -> usize {
    crate::storage::cpu_memory().0
}

fn open(
    name: Cow<'static, str>,
    category: &'static str,
    inputs: &dyn crate::trace::Inputs,
) -> Option<Open> {
    let session = session()?;
    let mut shapes = Vec::new();
    if session.options.record_shapes {
        inputs.each(&mut |t| shapes.push(t.map_or(Vec::new(), |t| t.shape().to_vec())));
    }
    let mem_start = match session.options.profile_memory {
        true => cpu_allocated(),
        false => 0,
    };
    THREAD.with(|t| t.borrow_mut().open.push((0.0, 0)));
    let start = Instant::now();
    let gpu = match session.options.cuda {
        true => {
            let now_us = (start - session.start).as_secs_f64() * 1e6;
            gpu::begin(inputs, &session.gpu_bases, now_us)
        }
        false => None,
    };
    Some(Open {
        session,
        name,
        category,
        start,
        shapes,
        mem_start,
        gpu,
    })
}

impl Drop for RecordFunction {
    fn drop(&mut self) {
        let Some(o) = self.0.take() else { return };
        let end = Instant::now();
        let duration_us = (end - o.start).as_secs_f64() * 1e6;
        let start_us = (o.start - o.session.start).as_secs_f64() * 1e6;
        let cpu_memory = match o.session.options.profile_memory {
            true => cpu_allocated() as i64 - o.mem_start as i64,
            false => 0,
        };
        let (thread, depth, child_us, child_mem) = THREAD.with(|t| {
            let mut t = t.borrow_mut();
            let (child_us, child_mem) = t.open.pop().unwrap_or((0.0, 0));
            if let Some(parent) = t.open.last_mut() {
                parent.0 += duration_us;
                parent.1 += cpu_memory;
            }
            (t.id, t.open.len(), child_us, child_mem)
        });
        let event = ProfilerEvent {
            name: o.name.into_owned(),
            category: o.category,
            start_us,
            duration_us,
            self_us: (duration_us - child_us).max(0.0),
            thread,
            depth,
            input_shapes: o.shapes,
            cpu_memory,
            self_cpu_memory: cpu_memory - child_mem,
            cuda_us: 0.0,
            self_cuda_us: 0.0,
            cuda_start: None,
        };
        let pending = o.gpu.and_then(gpu::end);
        o.session
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((event, pending));
    }
}

/// Opens an op's event (from `trace::op`).
pub(crate) fn enter(
    name: &'static str,
    inputs: &dyn crate::trace::Inputs,
) -> Option<RecordFunction> {
    open(Cow::Borrowed(name), "op", inputs).map(|o| RecordFunction(Some(o)))
}

/// Opens a labelled event of a given category (backward nodes, modules,
/// the optimizer step, DataLoader waits); nothing when not profiling.
pub(crate) fn scope(label: impl Into<Cow<'static, str>>, category: &'static str) -> RecordFunction {
    if !PROFILING.load(Ordering::Relaxed) {
        return RecordFunction(None);
    }
    RecordFunction(open(label.into(), category, &crate::trace::NO_INPUTS))
}

impl RecordFunction {
    /// Ends the event now (dropping it does the same).
    pub fn finish(self) {}
}

/// Labels a stretch of your code in the profile (`torch.profiler.record_function`):
/// it lasts until the returned guard drops, and the ops inside nest under it.
///
/// ```
/// use tapir_runtime::profiler::{profile, record_function, ProfilerOptions};
/// let prof = profile(ProfilerOptions::default(), || {
///     let _load = record_function("load");
/// });
/// assert_eq!(prof.events()[0].name, "load");
/// ```
pub fn record_function(label: &str) -> RecordFunction {
    if !PROFILING.load(Ordering::Relaxed) {
        return RecordFunction(None);
    }
    scope(label.to_string(), "user")
}

/// A running profiler; `stop` returns what it recorded.
pub struct Profiler {
    session: Arc<Session>,
}

impl Profiler {
    /// Starts recording on every thread. Panics if a profiler is already running.
    pub fn start(options: ProfilerOptions) -> Profiler {
        let mut slot = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            slot.is_none(),
            "profiler::Profiler::start: a profiler is already running; stop it first"
        );
        let session = Arc::new(Session {
            options,
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
            gpu_bases: gpu::Bases::default(),
        });
        *slot = Some(session.clone());
        PROFILING.store(true, Ordering::SeqCst);
        crate::trace::listen(true);
        Profiler { session }
    }

    /// Stops recording and returns the events, ordered by start time.
    pub fn stop(self) -> Profile {
        let session = self.session.clone();
        drop(self);
        let recorded =
            std::mem::take(&mut *session.events.lock().unwrap_or_else(|e| e.into_inner()));
        let mut events: Vec<ProfilerEvent> = recorded
            .into_iter()
            .map(|(mut e, pending)| {
                if let Some((start, dur, device)) =
                    pending.and_then(|p| gpu::resolve(&p, &session.gpu_bases))
                {
                    (e.cuda_us, e.self_cuda_us, e.cuda_start) = (dur, dur, Some((start, device)));
                }
                e
            })
            .collect();
        events.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        subtract_nested_cuda(&mut events);
        Profile {
            events,
            options: session.options.clone(),
        }
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        PROFILING.store(false, Ordering::SeqCst);
        crate::trace::listen(false);
        *SESSION.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Self CUDA time: each event's GPU time less its direct children's (the
/// events on its thread that start inside it, one level deeper).
fn subtract_nested_cuda(events: &mut [ProfilerEvent]) {
    let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
    for i in 0..events.len() {
        let stack = open.entry(events[i].thread).or_default();
        stack.truncate(events[i].depth);
        if let Some(&parent) = stack.last() {
            events[parent].self_cuda_us -= events[i].cuda_us;
        }
        stack.push(i);
    }
}

/// Profiles `f` (`with torch.profiler.profile(...) as prof:`).
pub fn profile(options: ProfilerOptions, f: impl FnOnce()) -> Profile {
    let p = Profiler::start(options);
    f();
    p.stop()
}

/// What a profiler recorded.
pub struct Profile {
    events: Vec<ProfilerEvent>,
    options: ProfilerOptions,
}

impl Profile {
    /// Every event, by start time.
    pub fn events(&self) -> &[ProfilerEvent] {
        &self.events
    }

    /// Totals per event name (`prof.key_averages()`).
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(&self.events, &self.options, false)
    }

    /// Totals per event name and input shapes
    /// (`key_averages(group_by_input_shape=True)`; needs `record_shapes`).
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(&self.events, &self.options, true)
    }

    /// Writes the events as Chrome trace-event JSON (Perfetto, `chrome://tracing`).
    /// The file is written beside `path` and renamed into place.
    pub fn export_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> crate::Result<()> {
        chrome::write(&self.events, path.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::{ProfilerEvent, subtract_nested_cuda};

    fn event(name: &str, thread: u64, depth: usize, cuda_us: f64) -> ProfilerEvent {
        ProfilerEvent {
            name: name.into(),
            category: "op",
            start_us: 0.0,
            duration_us: 0.0,
            self_us: 0.0,
            thread,
            depth,
            input_shapes: vec![],
            cpu_memory: 0,
            self_cpu_memory: 0,
            cuda_us,
            self_cuda_us: cuda_us,
            cuda_start: None,
        }
    }

    #[test]
    fn self_cuda_time_excludes_direct_children_only() {
        // linear(10) > [addmm(6) > [copy(1)], add(3)]; another thread's op apart.
        let mut ev = vec![
            event("linear", 1, 0, 10.0),
            event("addmm", 1, 1, 6.0),
            event("other", 2, 0, 4.0),
            event("copy", 1, 2, 1.0),
            event("add", 1, 1, 3.0),
        ];
        subtract_nested_cuda(&mut ev);
        let selfs: Vec<f64> = ev.iter().map(|e| e.self_cuda_us).collect();
        assert_eq!(selfs, vec![1.0, 5.0, 4.0, 1.0, 3.0]);
    }
}
