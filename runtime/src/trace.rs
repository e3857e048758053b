//! The hook at every op's entry. With nothing listening it costs one relaxed
//! atomic load; the profiler (`crate::profiler`) times what runs under it and
//! ONNX export (`crate::onnx`) records the outermost ops of a forward.
//!
//! An op is wrapped once, where it is defined: `trace::op("add", &[a, b],
//! Vec::new, || ...)`. Ops built from other ops are wrapped too, so the
//! profiler nests them and export sees the composite (a `linear`, not its
//! `matmul` and `add`), except the compositions whose parts already say it
//! all (`ops/activation.rs`, `tile`, `movedim`, `repeat_interleave`):
//! export, `compile` and its fusion see their parts.

use crate::Tensor;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};

/// How many listeners there are: a profiler, and each capturing thread.
static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// Counts a listener in (`on`) or out.
pub(crate) fn listen(on: bool) {
    if on {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
    } else {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether anything listens (the one load the fast path pays).
#[inline(always)]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// An op attribute, as ONNX export needs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
}

/// An op's attributes by name.
pub(crate) type Attrs = Vec<(&'static str, Attr)>;

/// Reading an op's attributes by name, as export and compile's replay do:
/// 0, 0.0 or empty when absent or of another kind.
pub(crate) trait AttrLookup {
    fn int(&self, k: &str) -> i64;
    fn float(&self, k: &str) -> f64;
    fn ints(&self, k: &str) -> Vec<i64>;
}

impl AttrLookup for Attrs {
    fn int(&self, k: &str) -> i64 {
        match self.iter().find(|(n, _)| *n == k) {
            Some((_, Attr::Int(v))) => *v,
            _ => 0,
        }
    }
    fn float(&self, k: &str) -> f64 {
        match self.iter().find(|(n, _)| *n == k) {
            Some((_, Attr::Float(v))) => *v,
            _ => 0.0,
        }
    }
    fn ints(&self, k: &str) -> Vec<i64> {
        match self.iter().find(|(n, _)| *n == k) {
            Some((_, Attr::Ints(v))) => v.clone(),
            _ => vec![],
        }
    }
}

/// What an op returns, as the tensors it made.
pub(crate) trait Outputs {
    fn each(&self, f: &mut dyn FnMut(&Tensor));
}

impl Outputs for Tensor {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self)
    }
}
impl Outputs for &Tensor {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self)
    }
}
impl Outputs for (Tensor, Tensor) {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        f(&self.0);
        f(&self.1)
    }
}
impl Outputs for (Tensor, Tensor, Tensor) {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        f(&self.0);
        f(&self.1);
        f(&self.2)
    }
}
impl Outputs for (Tensor, Option<Tensor>) {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        f(&self.0);
        if let Some(t) = &self.1 {
            f(t)
        }
    }
}
impl Outputs for Vec<Tensor> {
    fn each(&self, f: &mut dyn FnMut(&Tensor)) {
        self.iter().for_each(f)
    }
}

/// An op's tensor inputs in order (`None` for an absent optional one).
pub(crate) trait Inputs {
    fn each(&self, f: &mut dyn FnMut(Option<&Tensor>));
}

impl<const N: usize> Inputs for [&Tensor; N] {
    fn each(&self, f: &mut dyn FnMut(Option<&Tensor>)) {
        self.iter().for_each(|t| f(Some(t)))
    }
}
impl<const N: usize> Inputs for [Option<&Tensor>; N] {
    fn each(&self, f: &mut dyn FnMut(Option<&Tensor>)) {
        self.iter().for_each(|t| f(*t))
    }
}
impl Inputs for &[&Tensor] {
    fn each(&self, f: &mut dyn FnMut(Option<&Tensor>)) {
        self.iter().for_each(|t| f(Some(t)))
    }
}

/// The inputs of an op that takes no tensor (creation ops).
pub(crate) const NO_INPUTS: [&Tensor; 0] = [];

/// Runs the op `f` named `name` on `inputs`; `attrs` is built only when a
/// graph is being captured.
#[inline(always)]
pub(crate) fn op<R: Outputs>(
    name: &'static str,
    inputs: impl Inputs,
    attrs: impl FnOnce() -> Attrs,
    f: impl FnOnce() -> R,
) -> R {
    if !active() {
        return f();
    }
    observed_op(name, inputs, attrs, f)
}

#[inline(never)]
fn observed_op<R: Outputs>(
    name: &'static str,
    inputs: impl Inputs,
    attrs: impl FnOnce() -> Attrs,
    f: impl FnOnce() -> R,
) -> R {
    let timed = crate::profiler::enter(name, &inputs);
    let outermost = CaptureDepth::enter();
    let out = f();
    let captured = outermost.top();
    drop(outermost);
    if captured {
        record(name, &inputs, attrs(), &out);
    }
    if let Some(t) = timed {
        t.finish();
    }
    out
}

/// A non-op scope (a module call from `model!`, a `record_function`), for
/// the profiler and for naming an op's place in export errors.
pub(crate) fn module<R>(name: &str, f: impl FnOnce() -> R) -> R {
    if !active() {
        return f();
    }
    MODULE_PATH.with(|p| p.borrow_mut().push(name.to_string()));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            MODULE_PATH.with(|p| {
                p.borrow_mut().pop();
            });
        }
    }
    let _pop = Pop;
    let timed = crate::profiler::scope(format!("nn.Module: {name}"), "module");
    let out = f();
    drop(timed);
    out
}

/// The module path at this point of the forward (`blocks.attn`), or "".
pub(crate) fn module_path() -> String {
    MODULE_PATH.with(|p| p.borrow().join("."))
}

/// One outermost op of a captured forward.
pub(crate) struct OpRecord {
    pub name: &'static str,
    pub inputs: Vec<Option<Tensor>>,
    pub attrs: Attrs,
    pub outputs: Vec<Tensor>,
    /// Where in the model it ran (for error messages).
    pub place: String,
}

impl OpRecord {
    /// " in `blocks.0.attn`" where the op ran inside a module, else "" (for
    /// messages naming the op).
    pub fn in_module(&self) -> String {
        match self.place.is_empty() {
            true => String::new(),
            false => format!(" in `{}`", self.place),
        }
    }
}

/// A tensor's identity in a capture: which handle it is (views and
/// clones that share data but not the handle differ).
pub(crate) type Key = *const crate::tensor::Inner;

/// `t`'s [`Key`].
pub(crate) fn key(t: &Tensor) -> Key {
    std::sync::Arc::as_ptr(&t.0)
}

/// What one capture saw: its outermost ops in order, and what it saw
/// happen outside any op that a recorded graph could not repeat.
#[derive(Default)]
pub(crate) struct Capture {
    pub ops: Vec<OpRecord>,
    /// Host reads and tensors made outside tapir's ops, each as a sentence.
    pub breaks: Vec<String>,
}

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    static CAPTURING: RefCell<Option<Capture>> = const { RefCell::new(None) };
    static MODULE_PATH: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Counts op nesting on this thread while it captures; `top` says whether
/// the op is an outermost one.
struct CaptureDepth(Option<usize>);

impl CaptureDepth {
    fn enter() -> CaptureDepth {
        if !CAPTURING.with(|c| c.borrow().is_some()) {
            return CaptureDepth(None);
        }
        CaptureDepth(Some(DEPTH.with(|d| {
            let v = d.get();
            d.set(v + 1);
            v
        })))
    }
    fn top(&self) -> bool {
        self.0 == Some(0)
    }
}

impl Drop for CaptureDepth {
    fn drop(&mut self) {
        if let Some(v) = self.0 {
            DEPTH.with(|d| d.set(v));
        }
    }
}

fn record<R: Outputs>(name: &'static str, inputs: &dyn Inputs, attrs: Attrs, out: &R) {
    let mut outputs = Vec::new();
    out.each(&mut |t| outputs.push(t.clone()));
    let place = module_path();
    CAPTURING.with(|c| {
        if let Some(cap) = c.borrow_mut().as_mut() {
            cap.ops.push(OpRecord {
                name,
                inputs: {
                    let mut v = Vec::new();
                    inputs.each(&mut |t| v.push(t.cloned()));
                    v
                },
                attrs,
                outputs,
                place,
            });
        }
    });
}

/// Notes, while this thread captures, a read of tensor data to the host
/// outside any op (`item`, `to_vec`): what the forward does next may depend
/// on the values, which a recorded graph cannot see.
pub(crate) fn host_read(what: &'static str) {
    if !active() || DEPTH.with(|d| d.get()) != 0 {
        return;
    }
    note_break(|| format!("a host read (`{what}`){}", place_suffix()));
}

/// Notes, while this thread captures, a tensor of `numel` elements made
/// outside any op (`from_vec`, a storage wrapped by hand): a graph would
/// replay it as a constant. One-element tensors are the scalars of
/// `x * 2.0` and are constants indeed.
pub(crate) fn made_outside_ops(numel: usize) {
    if numel <= 1 || DEPTH.with(|d| d.get()) != 0 {
        return;
    }
    note_break(|| {
        format!(
            "a tensor of {numel} elements made outside tapir's ops{} (a constant to a recorded graph)",
            place_suffix()
        )
    });
}

/// Notes, while this thread captures, an autograd node recorded outside
/// any op (a checkpoint region's): the tensor it makes is new to the
/// recording, which would replay it as a constant.
pub(crate) fn node_outside_ops(name: &'static str) {
    if DEPTH.with(|d| d.get()) != 0 {
        return;
    }
    note_break(|| {
        format!(
            "an autograd node (`{name}`) made outside tapir's ops{}: compile cannot replay it yet",
            place_suffix()
        )
    });
}

fn place_suffix() -> String {
    match module_path() {
        p if p.is_empty() => String::new(),
        p => format!(" in `{p}`"),
    }
}

fn note_break(why: impl FnOnce() -> String) {
    CAPTURING.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut()
            && let Some(cap) = c.as_mut()
        {
            cap.breaks.push(why());
        }
    });
}

/// Whether this thread is capturing now (a compiled module inside a
/// capture runs eagerly, so the outer capture sees its ops).
pub(crate) fn capturing() -> bool {
    CAPTURING.with(|c| c.try_borrow().map_or(true, |c| c.is_some()))
}

/// Runs `f` on this thread recording its outermost ops.
pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Capture) {
    CAPTURING.with(|c| *c.borrow_mut() = Some(Capture::default()));
    listen(true);
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            listen(false);
            DEPTH.with(|d| d.set(0));
            CAPTURING.with(|c| c.borrow_mut().take());
        }
    }
    let end = End;
    let out = f();
    let cap = CAPTURING
        .with(|c| c.borrow_mut().take())
        .unwrap_or_default();
    drop(end);
    (out, cap)
}
