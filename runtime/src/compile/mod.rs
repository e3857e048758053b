//! `torch.compile` for tapir: [`compile`] wraps a model so that its forward
//! is recorded once per input signature and replayed after that, with
//! chains of elementwise ops fused into one kernel each (forward and
//! backward).
//!
//! The first call with a given signature (input shapes, dtypes and devices,
//! train/eval, grad mode, autocast state, allowed attention backends) runs
//! eagerly while the op hook records the outermost ops. Later calls with
//! the same signature replay the recorded graph: the same ops on the new
//! inputs and the model's current parameters, so gradients flow to the
//! parameters exactly as in eager code. A new signature records again (up
//! to [`CompileOptions::cache_size_limit`] graphs, then eager).
//!
//! What a recorded graph cannot repeat is a *graph break*: a read of tensor
//! data on the host (`item`, `to_vec`: the forward may branch on it), a
//! tensor made outside tapir's ops (`from_vec` inside the forward), an
//! autograd node made outside ops (a checkpoint region), or an op compile
//! does not know. In-place ops replay in order (their graph is not fused).
//! A signature with a break runs
//! eagerly every call, and [`Compiled::explain`] says why;
//! `fullgraph: true` makes a break an error instead
//! ([`crate::Error::GraphBreak`]).
//!
//! Like Dynamo's guards, the signature covers what tapir can see; a forward
//! that branches on plain Rust state (a field that is not a tensor) must
//! call [`Compiled::reset`] when that state changes. Switch train/eval on
//! the compiled model (`compiled.eval()`), which records the mode.
//!
//! ```
//! use tapir_runtime::nn::{Forward, Linear, Module, Sequential, GELU};
//! use tapir_runtime::{Tensor, compile};
//! let model = compile(Sequential::new().add(Linear::new(4, 8, true)).add(GELU::default()));
//! let x = Tensor::randn(&[2, 4]);
//! let eager = model.model().forward(&x);
//! let first = model.forward(&x); // records
//! let again = model.forward(&x); // replays
//! assert_eq!(first.to_vec::<f32>(), eager.to_vec::<f32>());
//! assert_eq!(again.to_vec::<f32>(), eager.to_vec::<f32>());
//! assert_eq!(model.explain().graphs, 1);
//! ```

mod cudagraphs;
mod dynamic;
mod fuse;
mod fused;
mod graph;
mod patterns;
mod replay;
mod step;

use crate::amp::{self, DeviceType};
use crate::nn::{Forward, Module, TensorKind};
use crate::onnx::Exportable;
use crate::{DType, Device, Error, Result, Tensor, trace};
use graph::Graph;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
pub(crate) use step::in_compiled_step;
pub use step::{CompiledStep, compile_step};

/// How [`compile`] works (PyTorch's `torch.compile` arguments).
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// `default` or `reduce-overhead` (replays through CUDA graphs on a
    /// GPU; on the CPU both replay the same graph).
    pub mode: Mode,
    /// A graph break is an error ([`crate::Error::GraphBreak`]) instead of
    /// an eager fallback.
    pub fullgraph: bool,
    /// Fuse chains of elementwise ops (on devices that run fused programs:
    /// the CPU so far). Off, a replay runs the recorded ops one by one.
    pub fuse: bool,
    /// Graphs kept per compiled model (one per signature), then eager
    /// (Dynamo's `cache_size_limit`, 8).
    pub cache_size_limit: usize,
    /// Automatic dynamic shapes (PyTorch's default): when a second batch
    /// size comes, its recording and the first are merged into one graph
    /// whose batch-sized dims are symbolic, so no further batch size
    /// records again. `false`: every batch size has its own graph.
    pub dynamic: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            mode: Mode::Default,
            fullgraph: false,
            fuse: true,
            cache_size_limit: 8,
            dynamic: true,
        }
    }
}

/// `torch.compile`'s `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Record, fuse, replay.
    Default,
    /// As `Default`, and on a GPU each signature's graph is captured into
    /// a CUDA graph at its second call and replayed with one launch after
    /// that (inference under `no_grad`, no random ops; the reasons for
    /// anything else are in [`Explanation::cudagraph_skips`]).
    ReduceOverhead,
}

/// What compile did with a model (`torch._dynamo.explain`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Explanation {
    /// Recorded graphs (signatures that replay).
    pub graphs: usize,
    /// Graphs generalised over the batch size (automatic dynamic shapes).
    pub dynamic_graphs: usize,
    /// Signatures that run eagerly, each with why.
    pub graph_breaks: Vec<String>,
    /// Nodes over all graphs (a fused kernel counts once).
    pub nodes: usize,
    /// Fused kernels over all graphs, each as the ops it stands for.
    pub fused: Vec<Vec<&'static str>>,
    /// Op patterns replaced by one of tapir's fused ops, over all graphs.
    pub rewrites: Vec<String>,
    /// Calls that replayed a graph.
    pub replays: u64,
    /// Calls that ran eagerly (recording calls included).
    pub eager_calls: u64,
    /// Seconds spent turning recordings into graphs.
    pub compile_seconds: f64,
    /// CUDA graphs captured (`mode: ReduceOverhead`).
    pub cuda_graphs: usize,
    /// Calls that replayed a CUDA graph.
    pub cudagraph_replays: u64,
    /// Signatures that replay without a CUDA graph under
    /// `mode: ReduceOverhead`, each with why (PyTorch's "skipping
    /// cudagraphs due to ...").
    pub cudagraph_skips: Vec<String>,
}

impl std::fmt::Display for Explanation {
    /// As `torch._dynamo.explain` prints: counts, then each break's reason
    /// and each fused kernel's ops.
    ///
    /// ```
    /// let e = tapir_runtime::compile::Explanation::default();
    /// assert!(e.to_string().starts_with("Graph Count: 0"));
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "Graph Count: {}", self.graphs)?;
        writeln!(f, "Graph Break Count: {}", self.graph_breaks.len())?;
        writeln!(f, "Node Count: {}", self.nodes)?;
        writeln!(f, "Dynamic Graphs: {}", self.dynamic_graphs)?;
        writeln!(
            f,
            "Calls: {} replayed, {} eager (recording included)",
            self.replays, self.eager_calls
        )?;
        writeln!(f, "Compile Time: {:.4} s", self.compile_seconds)?;
        if self.cuda_graphs > 0 || !self.cudagraph_skips.is_empty() {
            writeln!(
                f,
                "CUDA Graphs: {} captured, {} replays",
                self.cuda_graphs, self.cudagraph_replays
            )?;
            for why in &self.cudagraph_skips {
                writeln!(f, "  {why}")?;
            }
        }
        if !self.graph_breaks.is_empty() {
            writeln!(f, "Break Reasons:")?;
            for (i, why) in self.graph_breaks.iter().enumerate() {
                writeln!(f, "  {}. {why}", i + 1)?;
            }
        }
        if !self.fused.is_empty() {
            writeln!(f, "Fused Kernels:")?;
            for ops in &self.fused {
                writeln!(f, "  {}", ops.join(" + "))?;
            }
        }
        if !self.rewrites.is_empty() {
            writeln!(f, "Rewrites:")?;
            for r in &self.rewrites {
                writeln!(f, "  {r}")?;
            }
        }
        Ok(())
    }
}

/// How many fused kernels compiled graphs have launched in this process:
/// (forward, backward).
///
/// ```
/// use tapir_runtime::compile::{compile, fused_launches};
/// use tapir_runtime::nn::{Forward, Sequential, Tanh, Sigmoid};
/// use tapir_runtime::Tensor;
/// // tanh then sigmoid: a chain of two, one fused kernel once recorded.
/// let model = compile(Sequential::new().add(Tanh).add(Sigmoid));
/// let x = Tensor::randn(&[4, 3]);
/// model.forward(&x); // records
/// let (before, _) = fused_launches();
/// model.forward(&x); // replays
/// assert!(fused_launches().0 > before);
/// ```
pub fn fused_launches() -> (u64, u64) {
    fused::launches()
}

/// One input signature: what a graph is specialised to.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Signature {
    inputs: Vec<(Vec<usize>, DType, Device, bool)>,
    training: bool,
    grad: bool,
    autocast: [(bool, DType); 2],
    sdpa: (bool, bool),
}

impl Signature {
    /// This signature with dim 0 of the `batched` inputs a wildcard, if
    /// they all have one batch size.
    fn wildcard(&self, batched: &[bool]) -> Option<Signature> {
        let mut sizes = self
            .inputs
            .iter()
            .zip(batched)
            .filter(|(_, b)| **b)
            .map(|((shape, ..), _)| shape.first().copied());
        let first = sizes.next()??;
        if !sizes.all(|s| s == Some(first)) || batched.len() != self.inputs.len() {
            return None;
        }
        let mut w = self.clone();
        for (input, &b) in w.inputs.iter_mut().zip(batched) {
            if b {
                input.0[0] = usize::MAX;
            }
        }
        Some(w)
    }

    /// Which inputs' dim 0 differs between `self` and `other` when that is
    /// all that differs (and it is one batch size on each side).
    fn batch_difference(&self, other: &Signature) -> Option<Vec<bool>> {
        let rest_same = self.training == other.training
            && self.grad == other.grad
            && self.autocast == other.autocast
            && self.sdpa == other.sdpa
            && self.inputs.len() == other.inputs.len();
        if !rest_same {
            return None;
        }
        let mut batched = Vec::new();
        for (a, b) in self.inputs.iter().zip(&other.inputs) {
            let same_but_dim0 = (&a.1, &a.2, a.3) == (&b.1, &b.2, b.3)
                && a.0.len() == b.0.len()
                && !a.0.is_empty()
                && a.0[1..] == b.0[1..];
            if !same_but_dim0 && a.0 != b.0 {
                return None;
            }
            batched.push(a.0 != b.0);
        }
        (batched.contains(&true)
            && self.wildcard(&batched).is_some()
            && other.wildcard(&batched).is_some())
        .then_some(batched)
    }

    fn of(inputs: &[&Tensor], training: bool) -> Signature {
        let region = |d| (amp::is_autocast_enabled(d), amp::get_autocast_dtype(d));
        Signature {
            inputs: inputs
                .iter()
                .map(|t| (t.shape().to_vec(), t.dtype(), t.device(), t.requires_grad()))
                .collect(),
            training,
            grad: crate::is_grad_enabled(),
            autocast: [region(DeviceType::Cpu), region(DeviceType::Cuda)],
            sdpa: crate::nn::allowed_backends(),
        }
    }
}

#[derive(Clone)]
enum Entry {
    Graph(Arc<Graph>),
    Eager(String),
}

/// A model whose forward is recorded and replayed (what [`compile`]
/// returns; PyTorch's `OptimizedModule`). It is a [`Module`] with the
/// model's parameters, so optimizers and checkpoints take it as they take
/// the model.
pub struct Compiled<M> {
    model: M,
    options: CompileOptions,
    /// The mode last set through this wrapper (0: never, 1: train, 2:
    /// eval): containers report a mode from their first child, which may
    /// have none, so the wrapper keeps its own.
    mode: AtomicU8,
    cache: Mutex<HashMap<Signature, Entry>>,
    stats: Mutex<Explanation>,
    /// The model's parameters and buffers, gathered once: they can only be
    /// replaced through `visit_mut` or `model_mut`, which reset all this.
    tensors: Mutex<Option<Arc<Vec<Tensor>>>>,
    /// Which inputs have a symbolic batch dim, per generalised graph.
    batched: Mutex<Vec<Vec<bool>>>,
    /// CUDA graphs per signature (`mode: ReduceOverhead`).
    cudagraphs: cudagraphs::CudaGraphs,
}

/// `torch.compile(model)` with the default options.
///
/// ```
/// use tapir_runtime::nn::{Forward, Linear};
/// use tapir_runtime::{Tensor, compile};
/// let model = compile(Linear::new(3, 2, true));
/// assert_eq!(model.forward(&Tensor::ones(&[5, 3])).shape(), &[5, 2]);
/// ```
pub fn compile<M: Module>(model: M) -> Compiled<M> {
    compile_with(model, CompileOptions::default())
}

/// `torch.compile(model, mode=.., fullgraph=..)`.
///
/// ```
/// use tapir_runtime::compile::{CompileOptions, compile_with};
/// use tapir_runtime::nn::Linear;
/// let opts = CompileOptions { fullgraph: true, ..CompileOptions::default() };
/// let model = compile_with(Linear::new(3, 2, true), opts);
/// assert_eq!(model.explain().graphs, 0);
/// ```
pub fn compile_with<M: Module>(model: M, options: CompileOptions) -> Compiled<M> {
    Compiled {
        model,
        options,
        mode: AtomicU8::new(0),
        cache: Mutex::new(HashMap::new()),
        stats: Mutex::new(Explanation::default()),
        tensors: Mutex::new(None),
        batched: Mutex::new(Vec::new()),
        cudagraphs: cudagraphs::CudaGraphs::default(),
    }
}

/// `model.compile()` on any module.
///
/// ```
/// use tapir_runtime::compile::ModuleCompile;
/// use tapir_runtime::nn::Linear;
/// let model = Linear::new(3, 2, true).compile();
/// assert_eq!(model.model().in_features, 3);
/// ```
pub trait ModuleCompile: Module + Sized {
    /// This module, compiled with the default options.
    fn compile(self) -> Compiled<Self> {
        compile(self)
    }
}

impl<M: Module + Sized> ModuleCompile for M {}

impl<M: Module> Compiled<M> {
    /// The model itself (its eager forward).
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The model, mutably; recorded graphs are dropped (its tensors may be
    /// replaced).
    pub fn model_mut(&mut self) -> &mut M {
        self.reset();
        &mut self.model
    }

    /// The model, unwrapped.
    pub fn into_inner(self) -> M {
        self.model
    }

    /// Drops every recorded graph and break (`torch._dynamo.reset`).
    pub fn reset(&self) {
        lock(&self.cache).clear();
        *lock(&self.stats) = Explanation::default();
        *lock(&self.tensors) = None;
        lock(&self.batched).clear();
        self.cudagraphs.clear();
    }

    /// What compile did so far.
    pub fn explain(&self) -> Explanation {
        lock(&self.stats).clone()
    }

    /// The model's parameters and buffers, in `visit` order (visiting
    /// builds every dotted name, which a replay should not pay for).
    fn tensors(&self) -> Arc<Vec<Tensor>> {
        lock(&self.tensors)
            .get_or_insert_with(|| {
                let mut v = Vec::new();
                self.model.visit(&mut |_, t, _| v.push(t.clone()));
                Arc::new(v)
            })
            .clone()
    }

    /// Runs `forward(model, inputs)` compiled: replays the graph of this
    /// call's signature, or records one (running eagerly).
    pub fn call(
        &self,
        inputs: &[&Tensor],
        forward: impl FnOnce(&M, &[&Tensor]) -> Vec<Tensor>,
    ) -> Result<Vec<Tensor>> {
        if trace::capturing() {
            // Inside another capture (export, an outer compiled model):
            // eager, so the outer recording sees the ops.
            return Ok(forward(&self.model, inputs));
        }
        let tensors = self.tensors();
        let sig = Signature::of(inputs, self.is_training());
        let entry = self.lookup(&sig);
        match entry {
            Some(Entry::Graph(g)) => {
                lock(&self.stats).replays += 1;
                if self.options.mode == Mode::ReduceOverhead {
                    let limit = self.options.cache_size_limit;
                    let stats = &self.stats;
                    return Ok(self
                        .cudagraphs
                        .run(&sig, &g, inputs, &tensors, stats, limit));
                }
                return Ok(g.run(inputs, &tensors));
            }
            Some(Entry::Eager(why)) => return self.eager(inputs, forward, &why),
            None => {}
        }
        if lock(&self.cache).len() >= self.options.cache_size_limit {
            let why = format!(
                "cache_size_limit ({}) reached: {} signatures were recorded already",
                self.options.cache_size_limit, self.options.cache_size_limit
            );
            return self.eager(inputs, forward, &why);
        }
        let (out, cap) = trace::capture(|| forward(&self.model, inputs));
        let t0 = Instant::now();
        let built = Graph::build(&cap, inputs, &tensors, &out, self.options.fuse);
        drop(cap);
        let mut stats = lock(&self.stats);
        stats.compile_seconds += t0.elapsed().as_secs_f64();
        stats.eager_calls += 1;
        let entry = match built {
            Ok(g) => {
                stats.graphs += 1;
                stats.nodes += g.nodes.len();
                stats
                    .fused
                    .extend(g.describe().into_iter().filter(|d| d.len() > 1));
                stats.rewrites.extend(g.rewrites.iter().cloned());
                Entry::Graph(Arc::new(g))
            }
            Err(why) => {
                stats.graph_breaks.push(why.clone());
                Entry::Eager(why)
            }
        };
        drop(stats);
        if let (true, Entry::Graph(g1)) = (self.options.dynamic, &entry)
            && let Some((wild, g)) = self.generalise(&sig, g1)
        {
            let mut stats = lock(&self.stats);
            stats.dynamic_graphs += 1;
            stats.graphs += 1;
            stats.nodes += g.nodes.len();
            drop(stats);
            lock(&self.cache).insert(wild, Entry::Graph(Arc::new(g)));
        }
        lock(&self.cache).insert(sig, entry.clone());
        match entry {
            Entry::Eager(why) if self.options.fullgraph => Err(self.break_error(&why)),
            _ => Ok(out),
        }
    }

    /// The entry for `sig`, or for it with a symbolic batch dim.
    fn lookup(&self, sig: &Signature) -> Option<Entry> {
        let cache = lock(&self.cache);
        if let Some(e) = cache.get(sig) {
            return Some(e.clone());
        }
        lock(&self.batched)
            .iter()
            .filter_map(|b| sig.wildcard(b))
            .find_map(|w| cache.get(&w).cloned())
    }

    /// After recording `g1` for `sig`: a graph for every batch size, when
    /// a static graph of another batch size differs from it only there.
    fn generalise(&self, sig: &Signature, g1: &Graph) -> Option<(Signature, Graph)> {
        let cache = lock(&self.cache);
        cache.iter().find_map(|(sig0, e)| {
            let Entry::Graph(g0) = e else { return None };
            let batched = sig0
                .batch_difference(sig)
                .filter(|_| g0.batch_input.is_none())?;
            let input = batched.iter().position(|&b| b)?;
            let (b0, b1) = (sig0.inputs[input].0[0], sig.inputs[input].0[0]);
            let g = dynamic::generalise(g0, b0, g1, b1, input)?;
            lock(&self.batched).push(batched.clone());
            Some((sig.wildcard(&batched)?, g))
        })
    }

    fn eager(
        &self,
        inputs: &[&Tensor],
        forward: impl FnOnce(&M, &[&Tensor]) -> Vec<Tensor>,
        why: &str,
    ) -> Result<Vec<Tensor>> {
        if self.options.fullgraph {
            return Err(self.break_error(why));
        }
        lock(&self.stats).eager_calls += 1;
        Ok(forward(&self.model, inputs))
    }

    fn break_error(&self, why: &str) -> Error {
        Error::GraphBreak(format!(
            "compile (fullgraph=true): the forward of {} has a graph break: {why}",
            self.model.repr().lines().next().unwrap_or("the model")
        ))
    }
}

impl<M: Forward> Compiled<M> {
    /// The compiled forward; `Err` only for a graph break under
    /// `fullgraph: true`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut out = self.call(&[x], |m, xs| vec![m.forward(xs[0])])?;
        Ok(out.remove(0))
    }
}

impl<M: Exportable> Compiled<M> {
    /// The compiled forward of a model with several inputs (every `model!`
    /// model whose forward takes tensors), in the forward's order.
    pub fn forward_inputs(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let mut failure = None;
        let out = self.call(inputs, |m, xs| {
            m.export_forward(xs).unwrap_or_else(|e| {
                failure = Some(e);
                Vec::new()
            })
        });
        match failure {
            Some(e) => Err(e),
            None => out,
        }
    }
}

impl<M: Forward> Forward for Compiled<M> {
    /// Panics with the break under `fullgraph: true` (use `try_forward`
    /// to get it as an error).
    fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl<M: Module> Module for Compiled<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.model.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.reset();
        self.model.visit_mut(f)
    }
    /// The model's children: a compiled model names its modules as the
    /// model does (its tensors too), so walks and `apply` see through it.
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        self.model.visit_children(f)
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        self.reset();
        self.model.visit_children_mut(f)
    }
    fn module_any(&self) -> &dyn std::any::Any {
        self.model.module_any()
    }
    fn module_any_mut(&mut self) -> &mut dyn std::any::Any {
        self.reset();
        self.model.module_any_mut()
    }
    fn repr(&self) -> String {
        let inner = self.model.repr().replace('\n', "\n  ");
        format!("OptimizedModule(\n  (_orig_mod): {inner}\n)")
    }
    fn set_training(&self, on: bool) {
        self.mode.store(if on { 1 } else { 2 }, Ordering::Relaxed);
        self.model.set_training(on)
    }
    fn is_training(&self) -> bool {
        match self.mode.load(Ordering::Relaxed) {
            0 => self.model.is_training(),
            m => m == 1,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
