//! [`compile_step`]: a training step's forward and backward, and optionally
//! its optimizer step, through one CUDA graph (PyTorch's whole-network
//! capture, `torch.cuda.graph` around `loss.backward()` and `opt.step()`).
//!
//! Per input signature, the first call runs the closure eagerly (the
//! warm-up: kernels load, the optimizer makes its state); the second
//! captures it on static copies of the inputs, with every gradient `None`
//! (so the captured backward writes fresh gradients, as after
//! `zero_grad()`), and replays it; later calls copy the inputs in and
//! replay. After each replay the parameters' gradients are the graph's own
//! tensors, rewritten by the next replay, and the outputs are copies.
//!
//! The optimizer never goes inside the closure: its learning rate, step
//! count and schedule are host values that a graph would freeze, so an
//! optimizer step there panics. Either call it after
//! [`run`](CompiledStep::run) (eagerly), or hand it to
//! [`run_with_optimizer`](CompiledStep::run_with_optimizer), which captures
//! its fused updates into the same graph with their hyper-parameters read
//! from a device table: before each replay the optimizer steps on the host
//! without launching anything, writing exactly what an eager step would
//! compute (step counts, bias corrections, a scheduler's learning rate),
//! and one upload puts it where the graph reads it (PyTorch's
//! `capturable=True`, computed on the host instead). A call whose gradients were
//! not zeroed accumulates, as eager code does, by running eagerly; so does
//! everything a graph cannot hold (the CPU, random ops, host reads), each
//! with its reason in [`CompiledStep::explain`].

use super::{Explanation, Signature};
use crate::cuda::{CudaGraph, StepTable};
use crate::optim::Optimizer;
use crate::{Tensor, default_generator, device_generator};
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Signatures that may hold a captured graph at once (each keeps its own
/// memory); later ones run eagerly (Dynamo's `cache_size_limit`, 8).
const MAX_GRAPHS: usize = 8;

thread_local! {
    static IN_STEP: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside a [`compile_step`] closure (optimizers
/// refuse to step there).
pub(crate) fn in_compiled_step() -> bool {
    IN_STEP.with(Cell::get)
}

/// Runs `f` marked as inside a compiled step.
fn marked<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_STEP.with(|s| s.set(self.0));
        }
    }
    let _reset = Reset(IN_STEP.with(|s| s.replace(true)));
    f()
}

/// One signature's captured step.
struct Captured {
    graph: CudaGraph,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    /// Each parameter's gradient as the graph writes it.
    grads: Vec<Option<Tensor>>,
    addresses: Vec<usize>,
    /// The optimizer step's hyper-parameter rows, when it was captured too.
    table: Option<StepTable>,
}

enum State {
    Warm,
    Captured(Box<Captured>),
    Skipped,
}

/// A training step compiled by [`compile_step`].
pub struct CompiledStep<F> {
    step: F,
    params: Vec<Tensor>,
    /// Per input signature, and whether the optimizer is in the graph.
    states: HashMap<(Signature, bool), State>,
    stats: Explanation,
}

/// Compiles `step`, a closure that runs the forward and `backward()` of a
/// training step on its inputs and returns what the caller reads (the
/// loss), for the model parameters `params`. On a GPU its second call per
/// input signature captures it into a CUDA graph that later calls replay;
/// elsewhere every call runs it eagerly. Call `zero_grad()` before each
/// call, and the optimizer after [`run`](CompiledStep::run), or through
/// [`run_with_optimizer`](CompiledStep::run_with_optimizer) to capture it
/// too (then gradient clipping goes inside the closure).
///
/// ```
/// use tapir_runtime::nn::{Forward, Linear, Module, cross_entropy};
/// use tapir_runtime::optim::{Optimizer, SGD, SgdConfig};
/// use tapir_runtime::{Tensor, compile::compile_step};
/// let model = Linear::new(4, 3, true);
/// let mut opt = SGD::new(model.parameters(), SgdConfig { lr: 0.1, ..Default::default() });
/// let mut step = compile_step(model.parameters(), |xs| {
///     let loss = cross_entropy(&model.forward(xs[0]), xs[1]);
///     loss.backward();
///     vec![loss]
/// });
/// let (x, y) = (Tensor::randn(&[8, 4]), Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2, 0, 1], &[8]));
/// for _ in 0..3 {
///     opt.zero_grad();
///     let loss = step.run(&[&x, &y]).remove(0);
///     opt.step();
///     assert!(loss.item::<f32>().is_finite());
/// }
/// // On the CPU every call ran eagerly, and explain() says why.
/// assert!(step.explain().cudagraph_skips[0].contains("cpu device"));
/// ```
pub fn compile_step<F>(params: Vec<Tensor>, step: F) -> CompiledStep<F>
where
    F: FnMut(&[&Tensor]) -> Vec<Tensor>,
{
    CompiledStep {
        step,
        params,
        states: HashMap::new(),
        stats: Explanation::default(),
    }
}

impl<F> CompiledStep<F>
where
    F: FnMut(&[&Tensor]) -> Vec<Tensor>,
{
    /// Runs the step on `inputs`: eagerly, capturing, or replaying its
    /// CUDA graph. Returns the closure's outputs (copies when replayed).
    pub fn run(&mut self, inputs: &[&Tensor]) -> Vec<Tensor> {
        self.run_inner(inputs, None)
    }

    /// [`run`](Self::run), then `opt.step()`, both in the graph when one is
    /// captured. `opt` must step exactly the parameters given to
    /// [`compile_step`]; between calls a scheduler may change its learning
    /// rate as usual.
    ///
    /// ```
    /// use tapir_runtime::nn::{Forward, Linear, Module};
    /// use tapir_runtime::optim::{AdamW, AdamWConfig, LrScheduler, Optimizer, StepLR, clip_grad_norm_};
    /// use tapir_runtime::{Tensor, compile_step};
    /// let model = Linear::new(3, 1, true);
    /// let params = model.parameters();
    /// let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    /// let mut sched = StepLR::new(&mut opt, 10, 0.5);
    /// let mut step = compile_step(model.parameters(), |xs| {
    ///     let loss = model.forward(xs[0]).square().mean();
    ///     loss.backward();
    ///     clip_grad_norm_(&params, 1.0); // inside: it runs before the update
    ///     vec![loss]
    /// });
    /// let x = Tensor::ones(&[4, 3]);
    /// let w0 = model.weight.to_vec::<f32>();
    /// for _ in 0..3 {
    ///     opt.zero_grad();
    ///     step.run_with_optimizer(&[&x], &mut opt);
    ///     sched.step(&mut opt);
    /// }
    /// assert_ne!(model.weight.to_vec::<f32>(), w0); // AdamW stepped three times
    /// ```
    pub fn run_with_optimizer(
        &mut self,
        inputs: &[&Tensor],
        opt: &mut dyn Optimizer,
    ) -> Vec<Tensor> {
        self.run_inner(inputs, Some(opt))
    }

    fn run_inner<'o>(
        &mut self,
        inputs: &[&Tensor],
        mut opt: Option<&mut (dyn Optimizer + 'o)>,
    ) -> Vec<Tensor> {
        let sig = (Signature::of(inputs, false), opt.is_some());
        // Read only where a graph is in play (not on the CPU's every call).
        let zeroed = |params: &[Tensor]| params.iter().all(|p| p.grad().is_none());
        let addresses = |params: &[Tensor]| params.iter().map(Tensor::data_ptr).collect::<Vec<_>>();
        let state = self.states.remove(&sig);
        let (state, out) = match state {
            None => match super::cudagraphs::device_reason(inputs, &self.params) {
                Some(why) => {
                    self.note(why);
                    (State::Skipped, self.eager(inputs, opt))
                }
                None => (State::Warm, self.eager(inputs, opt)),
            },
            Some(State::Skipped) => (State::Skipped, self.eager(inputs, opt)),
            Some(s) if !zeroed(&self.params) => {
                self.note(
                    "a call whose gradients were not zeroed (set to None) runs eagerly: \
                     it accumulates, as eager code does"
                        .into(),
                );
                (s, self.eager(inputs, opt))
            }
            Some(State::Captured(mut c)) if c.addresses == addresses(&self.params) => {
                let out = self.replay(&mut c, inputs, opt);
                (State::Captured(c), out)
            }
            // A parameter has new memory: warm up and capture again.
            Some(State::Captured(_)) => (State::Warm, self.eager(inputs, opt)),
            Some(State::Warm) if self.graphs() >= MAX_GRAPHS => {
                self.note(super::cudagraphs::full(MAX_GRAPHS));
                (State::Skipped, self.eager(inputs, opt))
            }
            Some(State::Warm) => {
                match self.capture(inputs, addresses(&self.params), opt.as_deref_mut()) {
                    Ok(c) => {
                        let mut c = Box::new(c);
                        self.stats.cuda_graphs += 1;
                        let out = self.replay_captured(&mut c);
                        (State::Captured(c), out)
                    }
                    Err(why) => {
                        self.note(why);
                        (State::Skipped, self.eager(inputs, opt))
                    }
                }
            }
        };
        self.states.insert(sig, state);
        out
    }

    /// How many signatures hold a captured graph.
    fn graphs(&self) -> usize {
        self.states
            .values()
            .filter(|s| matches!(s, State::Captured(_)))
            .count()
    }

    /// Drops every captured graph (call it after replacing the optimizer's
    /// state or parameter groups); the next calls warm up and capture anew.
    pub fn reset(&mut self) {
        self.states.clear();
    }

    /// What happened so far: CUDA graphs captured and replayed, eager
    /// calls, and why calls ran eagerly.
    pub fn explain(&self) -> Explanation {
        self.stats.clone()
    }

    fn note(&mut self, why: String) {
        if !self.stats.cudagraph_skips.contains(&why) {
            self.stats.cudagraph_skips.push(why);
        }
    }

    fn eager<'o>(
        &mut self,
        inputs: &[&Tensor],
        opt: Option<&mut (dyn Optimizer + 'o)>,
    ) -> Vec<Tensor> {
        self.stats.eager_calls += 1;
        let step = &mut self.step;
        let out = marked(|| step(inputs));
        if let Some(opt) = opt {
            opt.step();
        }
        out
    }

    /// Captures the step (and `opt`'s step, through a hyper table) on
    /// static copies of `inputs`; nothing runs yet. On failure the
    /// host-side effects are undone: the gradients the capture attached,
    /// the generators' draws and the optimizer's step counts.
    fn capture<'o>(
        &mut self,
        inputs: &[&Tensor],
        addresses: Vec<usize>,
        mut opt: Option<&mut (dyn Optimizer + 'o)>,
    ) -> Result<Captured, String> {
        let device = inputs[0].device();
        let skip = |why: String| format!("skipping CUDA graphs: {why}");
        let mut table = match opt {
            Some(_) => Some(
                StepTable::new(device, 2 * self.params.len() + 16)
                    .map_err(|e| skip(e.to_string()))?,
            ),
            None => None,
        };
        let snapshot = opt.as_deref().map(|o| o.state_dict());
        let statics: Vec<Tensor> = inputs
            .iter()
            .map(|x| x.detach().contiguous_copy())
            .collect();
        let refs: Vec<&Tensor> = statics.iter().collect();
        let generators = (
            default_generator().get_state(),
            device_generator().get_state(),
        );
        let step = &mut self.step;
        let work = || {
            catch_unwind(AssertUnwindSafe(|| {
                let out = marked(|| step(&refs));
                if let (Some(opt), Some(table)) = (opt.as_deref_mut(), table.as_mut()) {
                    table.route(false, || opt.step());
                }
                out
            }))
        };
        let captured = CudaGraph::capture(device, work);
        let drew = generators
            != (
                default_generator().get_state(),
                device_generator().get_state(),
            );
        let failure = match captured {
            Ok((graph, Ok(outputs))) if !drew => {
                let grads = self.params.iter().map(Tensor::grad).collect();
                return Ok(Captured {
                    graph,
                    inputs: statics,
                    outputs: outputs.iter().map(Tensor::detach).collect(),
                    grads,
                    addresses,
                    table,
                });
            }
            Ok((_, Ok(_))) => {
                "the step draws random numbers, which a graph would repeat at every replay".into()
            }
            Ok((_, Err(panic))) => format!(
                "an op could not be captured: {}",
                crate::error::panic_message(&*panic)
            ),
            Err(e) => format!("the capture failed: {e}"),
        };
        default_generator().set_state(generators.0);
        device_generator().set_state(generators.1);
        for p in &self.params {
            p.set_grad(None);
        }
        if let (Some(opt), Some(snapshot)) = (opt, snapshot) {
            opt.load_state_dict(&snapshot)
                .unwrap_or_else(|e| panic!("compile_step: restoring the optimizer: {e}"));
        }
        Err(skip(failure))
    }

    /// Copies `inputs` into the static ones, steps `opt` on the host into
    /// the graph's table, and replays.
    fn replay<'o>(
        &mut self,
        c: &mut Captured,
        inputs: &[&Tensor],
        opt: Option<&mut (dyn Optimizer + 'o)>,
    ) -> Vec<Tensor> {
        for (s, x) in c.inputs.iter().zip(inputs) {
            s.copy_(x);
        }
        // The optimizer finds the graph's gradients, as after eager backward.
        self.attach(c);
        if let (Some(opt), Some(table)) = (opt, c.table.as_mut()) {
            let (written, captured) = table.route(true, || opt.step());
            assert!(
                written == captured,
                "compile_step: the optimizer made {written} updates where the captured graph \
                 has {captured} (its parameters changed since the capture: reset the step)"
            );
        }
        self.replay_captured(c)
    }

    fn attach(&self, c: &Captured) {
        for (p, g) in self.params.iter().zip(&c.grads) {
            p.set_grad(g.clone());
        }
    }

    /// Replays, uploading the optimizer's rows first (the parameters hold
    /// the graph's gradients already: attached, or set by the capture).
    fn replay_captured(&mut self, c: &mut Captured) -> Vec<Tensor> {
        if let Some(table) = c.table.as_mut() {
            table
                .upload()
                .unwrap_or_else(|e| panic!("compile_step: {e}"));
        }
        c.graph
            .replay()
            .unwrap_or_else(|e| panic!("compile_step: {e}"));
        self.stats.cudagraph_replays += 1;
        c.outputs.iter().map(Tensor::contiguous_copy).collect()
    }
}
