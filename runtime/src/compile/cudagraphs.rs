//! `mode: ReduceOverhead`: a recorded graph replayed through a CUDA graph
//! (PyTorch's cudagraphs backend), so a replay costs one launch instead of
//! one host dispatch per op.
//!
//! Per input signature, the first replay runs the graph as usual (the
//! warm-up: kernels load, the allocator caches blocks); the second captures
//! it into a CUDA graph on static copies of the inputs; every later call
//! copies its inputs into those, replays, and returns copies of the static
//! outputs (so a caller may keep results across calls, unlike PyTorch's,
//! which the next replay overwrites). The graph reads the model's
//! parameters where they were at capture: an optimizer updates them in
//! place, which the graph sees; a parameter given new memory (a loaded
//! checkpoint) makes the next call capture again.
//!
//! What is not captured, each with its reason in `explain()`:
//! inputs or parameters off a single GPU (the CPU: "cpu device", as
//! PyTorch says), a graph that records autograd (a training step goes
//! through [`compile_step`](super::compile_step) instead, whose graph holds
//! forward, backward and the optimizer), and random ops
//! (a graph would repeat the same numbers). A capture that fails (an op
//! that reads the host) runs without a graph from then on, with the reason.
//! Each captured signature keeps its own memory, so at most
//! `cache_size_limit` of them hold a graph; later ones replay without.

use super::graph::Graph;
use super::{Explanation, Signature, lock};
use crate::cuda::CudaGraph;
use crate::{Device, Tensor};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

/// One signature's CUDA graph and what it replays on.
struct Captured {
    graph: CudaGraph,
    /// The inputs' static copies, which each call overwrites.
    inputs: Vec<Tensor>,
    /// The outputs the graph rewrites at every replay.
    outputs: Vec<Tensor>,
    /// `data_ptr` of every parameter and buffer at capture.
    addresses: Vec<usize>,
}

enum State {
    /// Replayed once without a graph (the warm-up).
    Warm,
    Captured(Captured),
    /// Replays without a graph (the reason is in `explain()`).
    Skipped,
}

/// A compiled model's CUDA graphs, one per input signature.
#[derive(Default)]
pub(super) struct CudaGraphs {
    states: Mutex<HashMap<Signature, State>>,
}

impl CudaGraphs {
    pub(super) fn clear(&self) {
        lock(&self.states).clear();
    }

    /// Runs graph `g` for this call: warm-up, capture or replay; at most
    /// `limit` signatures hold a CUDA graph (each holds its own memory).
    pub(super) fn run(
        &self,
        sig: &Signature,
        g: &Graph,
        inputs: &[&Tensor],
        params: &[Tensor],
        stats: &Mutex<Explanation>,
        limit: usize,
    ) -> Vec<Tensor> {
        // Held throughout: the static inputs and outputs are shared.
        let mut states = lock(&self.states);
        // Read only where a graph is in play (not on the CPU's every call).
        let addresses = || params.iter().map(Tensor::data_ptr).collect::<Vec<_>>();
        let state = match states.get(sig) {
            None => match skip_reason(g, inputs, params) {
                Some(why) => {
                    lock(stats).cudagraph_skips.push(why);
                    State::Skipped
                }
                None => State::Warm,
            },
            Some(State::Skipped) => return g.run(inputs, params),
            Some(State::Captured(c)) if c.addresses == addresses() => {
                lock(stats).cudagraph_replays += 1;
                return replay(c, inputs);
            }
            // A parameter moved: warm up and capture again.
            Some(State::Captured(_)) => State::Warm,
            Some(State::Warm) if captured(&states) >= limit => {
                lock(stats).cudagraph_skips.push(full(limit));
                State::Skipped
            }
            Some(State::Warm) => match capture(g, inputs, params, addresses()) {
                Ok(c) => {
                    let mut stats = lock(stats);
                    stats.cuda_graphs += 1;
                    stats.cudagraph_replays += 1;
                    drop(stats);
                    let out = replay_captured(&c);
                    states.insert(sig.clone(), State::Captured(c));
                    return out;
                }
                Err(why) => {
                    lock(stats).cudagraph_skips.push(why);
                    State::Skipped
                }
            },
        };
        states.insert(sig.clone(), state);
        g.run(inputs, params)
    }
}

/// How many signatures hold a captured graph.
fn captured<K>(states: &HashMap<K, State>) -> usize {
    states
        .values()
        .filter(|s| matches!(s, State::Captured(_)))
        .count()
}

/// The reason a signature past the limit runs without a graph.
pub(super) fn full(limit: usize) -> String {
    format!(
        "skipping CUDA graphs: {limit} signatures already hold one (each keeps its own memory; \
         inputs of many shapes: pad them to a few sizes)"
    )
}

/// Why work on `inputs` with `params` cannot go into one CUDA graph, if
/// it cannot: graphs turned off, no tensor input, the CPU, or more than one
/// device.
pub(super) fn device_reason(inputs: &[&Tensor], params: &[Tensor]) -> Option<String> {
    let skip = |why: String| Some(format!("skipping CUDA graphs: {why}"));
    if !crate::cuda::graphs_enabled() {
        return skip(
            "they are off (tapir::cuda::set_graphs_enabled(false) or TAPIR_CUDA_GRAPHS=0)".into(),
        );
    }
    let Some(first) = inputs.first() else {
        return skip("no tensor input".into());
    };
    let device = first.device();
    if device == Device::Cpu {
        return skip("cpu device (input 0 is on the CPU; CUDA graphs capture GPU work)".into());
    }
    let on_device = inputs.iter().map(|t| ("input", t.device()));
    let params_on = params.iter().map(|t| ("parameter or buffer", t.device()));
    if let Some((what, d)) = on_device.chain(params_on).find(|(_, d)| *d != device) {
        return skip(format!(
            "a {what} is on {d} while input 0 is on {device} (one GPU per graph)"
        ));
    }
    None
}

/// Why this call's graph is not captured, if it is not.
fn skip_reason(g: &Graph, inputs: &[&Tensor], params: &[Tensor]) -> Option<String> {
    if let Some(why) = device_reason(inputs, params) {
        return Some(why);
    }
    let skip = |why: String| Some(format!("skipping CUDA graphs: {why}"));
    let needs_grad =
        inputs.iter().any(|t| t.requires_grad()) || params.iter().any(Tensor::requires_grad);
    if crate::is_grad_enabled() && needs_grad {
        return skip(
            "the forward records autograd (grad mode is on and tensors require grad): \
             run inference under no_grad, and put training steps through \
             tapir::compile_step, which captures forward, backward and the optimizer"
                .into(),
        );
    }
    if let Some(op) = g.random_op() {
        return skip(format!(
            "the random op `{op}` would repeat the same numbers at every replay"
        ));
    }
    None
}

/// Captures `g` on static copies of `inputs` (nothing runs yet).
fn capture(
    g: &Graph,
    inputs: &[&Tensor],
    params: &[Tensor],
    addresses: Vec<usize>,
) -> Result<Captured, String> {
    let device = inputs[0].device();
    let statics: Vec<Tensor> = inputs
        .iter()
        .map(|x| x.detach().contiguous_copy())
        .collect();
    let refs: Vec<&Tensor> = statics.iter().collect();
    let work = || catch_unwind(AssertUnwindSafe(|| g.run(&refs, params)));
    match CudaGraph::capture(device, work) {
        Ok((graph, Ok(outputs))) => Ok(Captured {
            graph,
            inputs: statics,
            outputs,
            addresses,
        }),
        Ok((_, Err(panic))) => Err(format!(
            "skipping CUDA graphs: an op could not be captured: {}",
            crate::error::panic_message(&*panic)
        )),
        Err(e) => Err(format!("skipping CUDA graphs: the capture failed: {e}")),
    }
}

/// Copies `inputs` into the static ones and replays.
fn replay(c: &Captured, inputs: &[&Tensor]) -> Vec<Tensor> {
    for (s, x) in c.inputs.iter().zip(inputs) {
        s.copy_(x);
    }
    replay_captured(c)
}

/// Replays on the static inputs as they are; copies of the outputs.
fn replay_captured(c: &Captured) -> Vec<Tensor> {
    c.graph
        .replay()
        .unwrap_or_else(|e| panic!("compile (reduce-overhead): {e}"));
    c.outputs.iter().map(Tensor::contiguous_copy).collect()
}
