//! `autograd::grad`: the gradients of outputs with respect to chosen
//! inputs, returned rather than accumulated into `.grad` (PyTorch's
//! `torch.autograd.grad`).

use super::engine::{Edge, Node, Sink, add_into, run};
use crate::Tensor;
use crate::tensor::Inner;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The options of [`grad_with`]: PyTorch's keyword arguments of
/// `torch.autograd.grad`, with its defaults (`GradOptions::default()`).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::{GradOptions, grad_with}};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).requires_grad_(true);
/// let y = &x * &x;
/// let v = Tensor::from_vec(vec![1.0f32, 10.0], &[2]);
/// let opts = GradOptions { grad_outputs: vec![v], ..Default::default() };
/// let g = grad_with(&[&y], &[&x], opts);
/// assert_eq!(g[0].as_ref().unwrap().to_vec::<f32>(), vec![2.0, 40.0]);
/// ```
#[derive(Clone, Default)]
pub struct GradOptions {
    /// The vector of the vector-Jacobian product, one per output (empty:
    /// ones, which only scalar outputs may take).
    pub grad_outputs: Vec<Tensor>,
    /// Keep the graph's saved tensors for another backward; `None` means
    /// the same as `create_graph`.
    pub retain_graph: Option<bool>,
    /// Record the backward itself, so the returned gradients have a graph
    /// and can be differentiated again (second derivatives, gradient
    /// penalties, Hessian-vector products).
    pub create_graph: bool,
    /// An input the outputs do not depend on gets `None` instead of a panic.
    pub allow_unused: bool,
    /// An input the outputs do not depend on gets zeros (implies
    /// `allow_unused`).
    pub materialize_grads: bool,
}

/// The gradients of the scalar `outputs`' sum with respect to each of
/// `inputs`, without touching any tensor's `.grad` (PyTorch's
/// `torch.autograd.grad(outputs, inputs)`). Frees the graph; see
/// [`grad_with`] for the options.
///
/// ```
/// use tapir_runtime::{Tensor, autograd};
/// let x = Tensor::from_vec(vec![3.0f32], &[1]).requires_grad_(true);
/// let y = (&x * &x).sum();
/// let dx = autograd::grad(&[&y], &[&x]);
/// assert_eq!(dx[0].to_vec::<f32>(), vec![6.0]);
/// assert!(x.grad().is_none());
/// ```
pub fn grad(outputs: &[&Tensor], inputs: &[&Tensor]) -> Vec<Tensor> {
    grad_with(outputs, inputs, GradOptions::default())
        .into_iter()
        .map(|g| g.expect("grad_with checks every input is used"))
        .collect()
}

/// [`grad`] with PyTorch's options. With `create_graph` the returned
/// gradients carry a graph of the backward, so a second `grad` or
/// `backward` differentiates them again:
///
/// ```
/// use tapir_runtime::{Tensor, autograd::{self, GradOptions}};
/// let x = Tensor::from_vec(vec![2.0f64], &[1]).requires_grad_(true);
/// let y = x.powf(3.0).sum(); // y = x³
/// let opts = GradOptions { create_graph: true, ..Default::default() };
/// let dy = autograd::grad_with(&[&y], &[&x], opts).remove(0).unwrap(); // 3x² = 12
/// let d2y = autograd::grad(&[&dy.sum()], &[&x]); // 6x = 12
/// assert_eq!((dy.item::<f64>(), d2y[0].item::<f64>()), (12.0, 12.0));
/// ```
///
/// Second derivatives run through the backwards of the ops listed in
/// [`TWICE_DIFFERENTIABLE`](super::TWICE_DIFFERENTIABLE); a second
/// backward that reaches the backward of any other op panics naming it,
/// rather than return a wrong derivative.
pub fn grad_with(
    outputs: &[&Tensor],
    inputs: &[&Tensor],
    opts: GradOptions,
) -> Vec<Option<Tensor>> {
    let roots = roots(
        outputs,
        &opts.grad_outputs,
        opts.create_graph,
        "autograd::grad",
    );
    for (i, x) in inputs.iter().enumerate() {
        assert!(
            x.requires_grad(),
            "autograd::grad: input {i} (shape {:?}) does not require grad, so no gradient can be taken with respect \
             to it",
            x.shape()
        );
    }
    let mut sink = Sink::Capture(Capture::new(inputs));
    let retain_graph = opts.retain_graph.unwrap_or(opts.create_graph);
    run(roots, retain_graph, opts.create_graph, &mut sink);
    let Sink::Capture(capture) = sink else {
        unreachable!("the sink was made a capture above")
    };
    let allow_unused = opts.allow_unused || opts.materialize_grads;
    (capture.into_grads().into_iter().zip(inputs).enumerate())
        .map(|(i, (g, x))| match g {
            Some(g) => Some(g),
            None if opts.materialize_grads => Some(Tensor::zeros_like(x)),
            None => {
                assert!(
                    allow_unused,
                    "autograd::grad: input {i} (shape {:?}) was not used to compute the outputs; set allow_unused \
                     (or materialize_grads) in GradOptions if this is expected",
                    x.shape()
                );
                None
            }
        })
        .collect()
}

/// The options of [`backward`]: PyTorch's keyword arguments of
/// `torch.autograd.backward` (and `Tensor.backward`), with its defaults.
#[derive(Clone, Default)]
pub struct BackwardOptions {
    /// The gradient of each tensor (empty: ones, for scalars only).
    pub grad_tensors: Vec<Tensor>,
    /// Keep the graph's saved tensors; `None` means the same as `create_graph`.
    pub retain_graph: Option<bool>,
    /// Record the backward, so the accumulated `.grad`s carry a graph (a
    /// penalty on gradients can then be backpropagated in turn).
    pub create_graph: bool,
    /// Accumulate into these tensors' `.grad` only (empty: every leaf the
    /// graph reaches).
    pub inputs: Vec<Tensor>,
}

/// Backpropagates from `tensors` into the `.grad` of leaves
/// (PyTorch's `torch.autograd.backward`); `Tensor::backward` is this for
/// one scalar.
///
/// ```
/// use tapir_runtime::{Tensor, autograd::{self, BackwardOptions}};
/// let w = Tensor::from_vec(vec![3.0f64], &[1]).requires_grad_(true);
/// let loss = (&w * &w).sum(); // w²
/// autograd::backward(&[&loss], BackwardOptions { create_graph: true, ..Default::default() });
/// let g = w.grad().unwrap(); // 2w, with a graph
/// assert_eq!(g.item::<f64>(), 6.0);
/// w.set_grad(None);
/// g.sum().backward(); // d(2w)/dw
/// assert_eq!(w.grad().unwrap().item::<f64>(), 2.0);
/// ```
pub fn backward(tensors: &[&Tensor], opts: BackwardOptions) {
    let roots = roots(
        tensors,
        &opts.grad_tensors,
        opts.create_graph,
        "autograd::backward",
    );
    let retain_graph = opts.retain_graph.unwrap_or(opts.create_graph);
    if opts.inputs.is_empty() {
        return run(
            roots,
            retain_graph,
            opts.create_graph,
            &mut Sink::Accumulate,
        );
    }
    let inputs: Vec<&Tensor> = opts.inputs.iter().collect();
    let mut sink = Sink::Capture(Capture::new(&inputs));
    run(roots, retain_graph, opts.create_graph, &mut sink);
    let Sink::Capture(capture) = sink else {
        unreachable!("the sink was made a capture above")
    };
    for (x, g) in inputs.iter().zip(capture.into_grads()) {
        if let Some(g) = g {
            super::engine::accumulate_hooked(x, g, opts.create_graph);
        }
    }
}

/// Pairs every output with the gradient it starts with (`given`, or ones
/// for a scalar), for `op`.
fn roots(
    outputs: &[&Tensor],
    given: &[Tensor],
    create_graph: bool,
    op: &str,
) -> Vec<(Tensor, Tensor)> {
    assert!(
        given.is_empty() || given.len() == outputs.len(),
        "{op}: got {} outputs but {} output gradients; pass one per output, or none for scalar outputs",
        outputs.len(),
        given.len()
    );
    (outputs.iter().enumerate())
        .map(|(i, y)| {
            assert!(
                y.requires_grad(),
                "{op}: output {i} (shape {:?}) does not require grad and has no grad_fn",
                y.shape()
            );
            let g = match given.get(i) {
                Some(g) => {
                    assert!(
                        g.shape() == y.shape() && g.device() == y.device(),
                        "{op}: the gradient of output {i} has shape {:?} on {} but the output has shape {:?} on {}",
                        g.shape(),
                        g.device(),
                        y.shape(),
                        y.device()
                    );
                    let g = if g.dtype() == y.dtype() {
                        g.clone()
                    } else {
                        g.to_dtype(y.dtype())
                    };
                    if create_graph { g } else { g.detach() }
                }
                None => {
                    assert!(
                        y.numel() == 1,
                        "{op}: a gradient can be implicitly created only for scalar outputs; output {i} has shape \
                         {:?}, so pass its gradient",
                        y.shape()
                    );
                    crate::ops::creation::ones_like(y)
                }
            };
            ((*y).clone(), g)
        })
        .collect()
}

/// What `autograd::grad` collects during the walk: the gradient reaching
/// each requested input, and nothing else.
pub(crate) struct Capture {
    /// Requested leaves, by identity, to their slot.
    leaves: HashMap<*const Inner, usize>,
    /// Requested non-leaves: (the node that made them, which output).
    outputs: HashMap<(*const Node, usize), usize>,
    /// Each input's slot (the same tensor asked for twice shares one).
    slot_of_input: Vec<usize>,
    /// Nodes from which a requested input can be reached.
    needed: HashSet<*const Node>,
    got: Vec<Option<Tensor>>,
}

impl Capture {
    fn new(inputs: &[&Tensor]) -> Capture {
        let mut c = Capture {
            leaves: HashMap::new(),
            outputs: HashMap::new(),
            slot_of_input: Vec::new(),
            needed: HashSet::new(),
            got: Vec::new(),
        };
        for x in inputs {
            let next = c.got.len();
            let slot = match &x.0.grad_fn {
                Some(n) => *c
                    .outputs
                    .entry((Arc::as_ptr(n), x.0.output_nr))
                    .or_insert(next),
                None => *c.leaves.entry(Arc::as_ptr(&x.0)).or_insert(next),
            };
            if slot == next {
                c.got.push(None);
            }
            c.slot_of_input.push(slot);
        }
        c
    }

    /// Whether a gradient must flow along `edge` to reach a requested input.
    pub(crate) fn needs(&self, edge: &Edge) -> bool {
        match edge {
            Edge::None => false,
            Edge::Leaf(t) => self.leaves.contains_key(&Arc::as_ptr(&t.0)),
            Edge::Node(m, o) => {
                self.needed.contains(&Arc::as_ptr(m))
                    || self.outputs.contains_key(&(Arc::as_ptr(m), *o))
            }
        }
    }

    /// Marks the nodes of `reachable` from which a requested input can be
    /// reached. A node's inputs are older than it, so one pass in creation
    /// order settles each node after everything it feeds from.
    pub(crate) fn find_needed(&mut self, mut reachable: Vec<Arc<Node>>) {
        reachable.sort_by_key(|n| n.seq);
        for n in reachable {
            if n.edges.iter().any(|e| self.needs(e)) {
                self.needed.insert(Arc::as_ptr(&n));
            }
        }
    }

    /// Keeps the gradient of a requested leaf.
    pub(crate) fn take_leaf(&mut self, leaf: &Tensor, g: Tensor) {
        if let Some(&slot) = self.leaves.get(&Arc::as_ptr(&leaf.0)) {
            add_into(&mut self.got[slot], g);
        }
    }

    /// Keeps the gradients of `n`'s outputs that were requested.
    pub(crate) fn take_outputs(&mut self, n: &Arc<Node>, gs: &[Option<Tensor>]) {
        for (o, g) in gs.iter().enumerate() {
            if let (Some(&slot), Some(g)) = (self.outputs.get(&(Arc::as_ptr(n), o)), g) {
                add_into(&mut self.got[slot], g.clone());
            }
        }
    }

    fn into_grads(self) -> Vec<Option<Tensor>> {
        (self.slot_of_input.iter())
            .map(|&s| self.got[s].clone())
            .collect()
    }
}

/// `Tensor::backward`: [`backward`] for one tensor, as PyTorch's method.
impl Tensor {
    /// Backpropagates from this scalar, accumulating into leaves' `.grad` and
    /// freeing the graph's saved tensors.
    pub fn backward(&self) {
        assert!(
            self.numel() == 1,
            "backward: grad can be implicitly created only for scalar outputs; this tensor has shape {:?} — pass a \
             gradient with backward_with",
            self.shape()
        );
        self.backward_with(&crate::ops::creation::ones_like(self), false);
    }

    /// Backpropagates `grad` (same shape as `self`); `retain_graph` keeps the
    /// saved tensors so backward can run through the graph again.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::ones(&[2]).requires_grad_(true);
    /// let y = &x * 3.0;
    /// y.backward_with(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]), false);
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![3.0, 6.0]);
    /// ```
    pub fn backward_with(&self, grad: &Tensor, retain_graph: bool) {
        assert!(
            self.requires_grad(),
            "backward: this tensor does not require grad and has no grad_fn (was it computed under no_grad, or from \
             tensors that do not require grad?)"
        );
        assert!(
            grad.shape() == self.shape(),
            "backward: gradient shape {:?} differs from output shape {:?}",
            grad.shape(),
            self.shape()
        );
        super::engine::run_backward(self, grad.detach(), retain_graph, false);
    }

    /// Keeps this non-leaf's gradient in its `.grad` at every backward, as
    /// a leaf's is kept (PyTorch's `retain_grad`): summed over backwards,
    /// stored after every hook on the tensor has run. A no-op on leaves,
    /// which keep theirs anyway; `autograd::grad` stores none.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).requires_grad_(true);
    /// let y = &x * 3.0;
    /// y.retain_grad();
    /// (&y * &y).sum().backward();
    /// assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![6.0, 12.0]);
    /// assert!(y.retains_grad() && !x.retains_grad());
    /// ```
    #[track_caller]
    pub fn retain_grad(&self) {
        assert!(
            self.requires_grad(),
            "retain_grad: the tensor of shape {:?} does not require grad, so no gradient reaches it",
            self.shape()
        );
        let Some(node) = &self.0.grad_fn else {
            return;
        };
        if !self.retains_grad() {
            let me = (self.0.output_nr, Arc::downgrade(&self.0));
            node.retained.lock().unwrap().push(me);
        }
    }

    /// Whether [`Tensor::retain_grad`] was called on this non-leaf (false
    /// for leaves, as PyTorch's `retains_grad`).
    pub fn retains_grad(&self) -> bool {
        self.0.grad_fn.as_ref().is_some_and(|node| {
            (node.retained.lock().unwrap().iter()).any(|(o, t)| {
                *o == self.0.output_nr && std::ptr::eq(t.as_ptr(), Arc::as_ptr(&self.0))
            })
        })
    }
}
