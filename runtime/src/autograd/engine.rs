//! The backward walk: dependency counting, then nodes in reverse creation
//! order, accumulating into leaves' `.grad`.

use super::{GradHook, MultiBackwardFn};
use crate::Tensor;
use crate::tensor::Inner;
use std::cell::RefCell;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// Where an input's gradient goes.
pub(crate) enum Edge {
    /// The input needs no gradient.
    None,
    /// A leaf that requires grad: accumulate into its `.grad`.
    Leaf(Tensor),
    /// An intermediate: feed output `.1` of the node that produced it.
    Node(Arc<Node>, usize),
}

/// One recorded op: its name, its backward closure and its inputs' edges.
/// Most ops have one output; a multi-output op (`split`) has one node for
/// all its outputs, so its backward sees every output's gradient at once
/// (PyTorch's `SplitBackward0` concatenates them in one pass).
pub(crate) struct Node {
    pub name: &'static str,
    pub(crate) seq: u64,
    pub(crate) outputs: usize,
    pub edges: Vec<Edge>,
    backward: Mutex<Option<MultiBackwardFn>>,
    /// Hooks on the gradient of output `.0` (`register_hook` on a non-leaf).
    pub hooks: Mutex<Vec<(usize, GradHook)>>,
    /// Outputs whose tensors called `retain_grad`: after the hooks, a
    /// backward stores their gradient in the tensor's `.grad`.
    pub retained: Mutex<Vec<(usize, Weak<Inner>)>>,
}

impl Node {
    /// A single-output node; `backward` gets its output's gradient.
    pub fn new(
        name: &'static str,
        edges: Vec<Edge>,
        mut backward: impl FnMut(&Tensor, &[bool]) -> Vec<Option<Tensor>> + Send + 'static,
    ) -> Node {
        let one: MultiBackwardFn = Box::new(move |grads, needs| {
            let g = grads[0]
                .as_ref()
                .expect("the walk calls a node only with a gradient");
            backward(g, needs)
        });
        Node::new_many(name, edges, 1, one)
    }

    /// A node for `outputs` outputs; its backward gets each output's
    /// gradient (`None` where no consumer returned one; never all `None`).
    pub fn new_many(
        name: &'static str,
        edges: Vec<Edge>,
        outputs: usize,
        backward: MultiBackwardFn,
    ) -> Node {
        Node {
            name,
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            outputs,
            edges,
            backward: Mutex::new(Some(backward)),
            hooks: Mutex::new(Vec::new()),
            retained: Mutex::new(Vec::new()),
        }
    }
}

struct Ready(u64, Arc<Node>);
impl PartialEq for Ready {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.cmp(&o.0)
    }
}

fn key(n: &Arc<Node>) -> *const Node {
    Arc::as_ptr(n)
}

/// One running backward on this thread (a checkpoint's recompute nests a
/// second one inside the first).
struct Frame {
    /// Every leaf this backward's graph reaches, with the edges into it not
    /// yet run (its post-accumulate hooks run at zero).
    leaf_uses: HashMap<*const crate::tensor::Inner, usize>,
    /// What runs when the outermost backward has finished.
    callbacks: Vec<Box<dyn FnOnce()>>,
}

thread_local! {
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// The node whose backward closure runs now on this thread.
    static RUNNING: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// The name of the node whose backward runs now on this thread, if any
/// (errors raised inside a backward name it).
pub(crate) fn running_node() -> Option<&'static str> {
    RUNNING.with(|r| r.get())
}

/// Marks `name` as the running node until dropped (restoring the outer one:
/// a backward can run inside another's, as a checkpoint's recompute).
struct Running(Option<&'static str>);
impl Running {
    fn enter(name: &'static str) -> Running {
        Running(RUNNING.with(|r| r.replace(Some(name))))
    }
}
impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(self.0));
    }
}

/// Pops its frame however the backward ends (a panic discards the callbacks).
struct FrameGuard;
impl Drop for FrameGuard {
    fn drop(&mut self) {
        FRAMES.with(|f| f.borrow_mut().pop());
    }
}

/// Runs `f` when the outermost backward running on this thread finishes
/// (PyTorch's `Variable._execution_engine.queue_callback`): data parallel
/// waits for its last all-reduce there.
pub(crate) fn queue_callback(f: impl FnOnce() + 'static) {
    FRAMES.with(|frames| match frames.borrow_mut().first_mut() {
        Some(outer) => outer.callbacks.push(Box::new(f)),
        None => panic!("queue_callback: no backward is running on this thread"),
    })
}

/// Whether the outermost running backward's graph reaches the leaf `t`;
/// `None` outside backward.
pub(crate) fn reached_by_current_backward(t: &Tensor) -> Option<bool> {
    FRAMES.with(|f| {
        f.borrow()
            .first()
            .map(|outer| outer.leaf_uses.contains_key(&Arc::as_ptr(&t.0)))
    })
}

/// Runs the leaf's post-accumulate hooks (outside its lock: a hook may read
/// the gradient or touch other leaves).
fn run_post_accumulate_hooks(leaf: &Tensor) {
    let hooks: Vec<_> = leaf.0.post_accumulate_hooks.lock().unwrap().clone();
    for h in hooks {
        h(leaf);
    }
}

fn apply_hooks(hooks: &[GradHook], mut grad: Tensor) -> Tensor {
    for h in hooks {
        if let Some(g) = h(&grad) {
            grad = g;
        }
    }
    grad
}

/// Adds `grad` into `leaf`'s gradient, as PyTorch's `AccumulateGrad` under
/// a backward without `create_graph`: the first gradient is kept (or copied)
/// in the leaf's layout, later ones are added to it in place (wherever that
/// can be observed), so a handle to the gradient taken before a backward
/// sees the sum after it.
///
/// Under `create_graph` a gradient with a graph is kept with it (the sum
/// out of place), so a second backward can run through `.grad`.
pub(crate) fn accumulate_leaf(leaf: &Tensor, grad: Tensor, create_graph: bool) {
    let grad = apply_hooks(&leaf.0.hooks.lock().unwrap(), grad);
    store_grad(leaf, grad, create_graph)
}

/// [`accumulate_leaf`] after the leaf's hooks have run, then its
/// accumulation hooks (`autograd::backward` with `inputs`).
pub(crate) fn accumulate_hooked(leaf: &Tensor, grad: Tensor, create_graph: bool) {
    store_grad(leaf, grad, create_graph);
    run_post_accumulate_hooks(leaf);
}

/// Stores the gradients of `node`'s outputs whose tensors called
/// `retain_grad` into their `.grad`, as a leaf's: after every other hook
/// (PyTorch runs its retains-grad hooks last), summed over backwards, and
/// copied, since the same gradient flows on through the graph.
fn store_retained(node: &Node, grads: &[Option<Tensor>], create_graph: bool) {
    for (output, tensor) in node.retained.lock().unwrap().iter() {
        if let (Some(g), Some(inner)) = (&grads[*output], tensor.upgrade()) {
            store_grad(&Tensor(inner), g.clone(), create_graph);
        }
    }
}

/// Adds a gradient that has been through the hooks into `.grad`.
fn store_grad(leaf: &Tensor, grad: Tensor, create_graph: bool) {
    let mut slot = leaf.0.grad.lock().unwrap();
    if create_graph && grad.requires_grad() {
        return add_into(&mut slot, grad);
    }
    match slot.as_ref() {
        // Keep the incoming tensor only when nothing else holds it or its
        // buffer: gradients are updated in place (clipping, later
        // backwards), and one op may hand the same tensor to several inputs
        // (`a + b`'s backward; AccumulateGrad clones then too).
        None if Arc::strong_count(&grad.0) == 1
            && Arc::strong_count(&grad.0.storage) == 1
            && grad.is_leaf()
            && obeys_layout_contract(&grad, leaf) =>
        {
            *slot = Some(grad)
        }
        None => *slot = Some(copy_obeying_layout_contract(&grad, leaf)),
        // In place where the difference can be seen: someone else holds the
        // gradient or its buffer, or it has the leaf's strides to keep.
        // Otherwise a fresh sum is the same to every observer and costs one
        // GPU launch where an in-place add costs two.
        Some(old) if can_add_in_place(old, &grad) && (is_observed(old) || !old.is_contiguous()) => {
            old.add_(&grad);
        }
        Some(old) => *slot = Some(old + &grad),
    }
}

/// Whether a tensor or its buffer has a holder besides this one handle.
fn is_observed(t: &Tensor) -> bool {
    Arc::strong_count(&t.0) > 1 || Arc::strong_count(&t.0.storage) > 1
}

/// PyTorch's layout contract for a leaf's gradient: the leaf's strides when
/// the leaf is dense (a permuted parameter gets a gradient permuted alike,
/// so optimizers can walk both as flat buffers), row-major otherwise.
fn obeys_layout_contract(grad: &Tensor, leaf: &Tensor) -> bool {
    // A row-major leaf (every module parameter) asks for a row-major
    // gradient, checked without sorting dims on each accumulation.
    if leaf.is_contiguous() || leaf.layout().dense_order().is_none() {
        return grad.is_contiguous();
    }
    let sized = |t: &Tensor| -> Vec<usize> {
        (t.shape().iter().zip(t.strides()))
            .filter(|&(&n, _)| n != 1)
            .map(|(_, &s)| s)
            .collect()
    };
    sized(grad) == sized(leaf)
}

/// A copy of `grad` that shares nothing, in the leaf's layout (see
/// [`obeys_layout_contract`]).
fn copy_obeying_layout_contract(grad: &Tensor, leaf: &Tensor) -> Tensor {
    match leaf.preserved_format() {
        // Row-major in the leaf's order of dims, then viewed back.
        Some((order, view)) => {
            let order: Vec<isize> = order.iter().map(|&d| d as isize).collect();
            view(grad.detach().permute(&order).contiguous_copy())
        }
        None => grad.contiguous_copy(),
    }
}

/// Whether `grad` can be added into the existing gradient `old` in place:
/// the same shape, dtype and device, and no autograd history on `old`.
fn can_add_in_place(old: &Tensor, grad: &Tensor) -> bool {
    old.shape() == grad.shape()
        && old.dtype() == grad.dtype()
        && old.device() == grad.device()
        && !old.requires_grad()
}

/// Where a backward delivers the gradients that reach its targets.
pub(crate) enum Sink {
    /// `backward()`: into every reached leaf's `.grad`.
    Accumulate,
    /// `autograd::grad`: returned for the requested inputs only.
    Capture(super::grad::Capture),
}

impl Sink {
    /// Whether a gradient must flow along `edge`.
    fn needs(&self, edge: &Edge) -> bool {
        match self {
            Sink::Accumulate => !matches!(edge, Edge::None),
            Sink::Capture(c) => c.needs(edge),
        }
    }
}

/// Backpropagates `grad` from `root` through its graph, into leaves' `.grad`.
pub(crate) fn run_backward(root: &Tensor, grad: Tensor, retain_graph: bool, create_graph: bool) {
    let mut sink = Sink::Accumulate;
    run(
        vec![(root.clone(), grad)],
        retain_graph,
        create_graph,
        &mut sink,
    );
}

/// Backpropagates each root's gradient through the graph they share, in
/// one walk, delivering into `sink`.
pub(crate) fn run(
    roots: Vec<(Tensor, Tensor)>,
    retain_graph: bool,
    create_graph: bool,
    sink: &mut Sink,
) {
    // Backward closures record only when the caller asks for a graph of the
    // backward itself (`create_graph`).
    let _mode = super::grad_mode::GradModeGuard::set(create_graph);
    let _double = create_graph.then(super::double::Differentiating::enter);
    let mut node_roots = Vec::new();
    let mut leaf_uses: HashMap<*const crate::tensor::Inner, usize> = HashMap::new();
    let mut leaf_roots = Vec::new();
    for (root, grad) in roots {
        match root.0.grad_fn.clone() {
            Some(node) => node_roots.push((node, root.0.output_nr, grad)),
            None => {
                *leaf_uses.entry(Arc::as_ptr(&root.0)).or_insert(0) += 1;
                leaf_roots.push((root, grad));
            }
        }
    }

    // Count, for every node reachable from the roots, how many edges feed
    // it, and for every leaf how many edges reach it (its hooks run at zero).
    let mut deps: HashMap<*const Node, usize> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    let mut seen: HashSet<*const Node> = HashSet::new();
    for (n, _, _) in &node_roots {
        if seen.insert(key(n)) {
            stack.push(n.clone());
        }
    }
    // `grad` prunes to the nodes that lead to its inputs; `backward` runs all.
    let capturing = matches!(sink, Sink::Capture(_));
    let mut reachable = Vec::new();
    while let Some(n) = stack.pop() {
        for e in &n.edges {
            match e {
                Edge::Node(m, _) => {
                    *deps.entry(key(m)).or_insert(0) += 1;
                    if seen.insert(key(m)) {
                        stack.push(m.clone());
                    }
                }
                Edge::Leaf(t) => *leaf_uses.entry(Arc::as_ptr(&t.0)).or_insert(0) += 1,
                Edge::None => {}
            }
        }
        if capturing {
            reachable.push(n);
        }
    }
    if let Sink::Capture(c) = sink {
        c.find_needed(reachable);
    }
    in_frame(leaf_uses, || {
        for (leaf, grad) in leaf_roots {
            deliver_to_leaf(&leaf, grad, sink, create_graph);
            count_leaf_use(&leaf, sink);
        }
        walk(node_roots, retain_graph, create_graph, &mut deps, sink)
    });
}

/// A gradient arriving at a leaf: accumulated into `.grad` or captured.
fn deliver_to_leaf(leaf: &Tensor, grad: Tensor, sink: &mut Sink, create_graph: bool) {
    match sink {
        Sink::Accumulate => accumulate_leaf(leaf, grad, create_graph),
        Sink::Capture(c) => c.take_leaf(leaf, apply_hooks(&leaf.0.hooks.lock().unwrap(), grad)),
    }
}

/// One edge into `leaf` has run; at the last, its accumulation hooks run
/// (`autograd::grad` accumulates nothing, so none run then).
fn count_leaf_use(leaf: &Tensor, sink: &Sink) {
    let last_use = FRAMES.with(|f| {
        let mut frames = f.borrow_mut();
        let frame = frames.last_mut().expect("walk runs in its frame");
        let uses = frame
            .leaf_uses
            .get_mut(&Arc::as_ptr(&leaf.0))
            .expect("counted above");
        *uses -= 1;
        *uses == 0
    });
    if last_use && matches!(sink, Sink::Accumulate) {
        run_post_accumulate_hooks(leaf);
    }
}

/// Adds `g` into a gradient slot (the first one is kept as it is).
pub(crate) fn add_into(slot: &mut Option<Tensor>, g: Tensor) {
    *slot = Some(match slot.take() {
        None => g,
        Some(prev) => &prev + &g,
    });
}

/// Calls `n`'s backward closure on its outputs' gradients `gs`.
fn run_node(
    n: &Arc<Node>,
    gs: &[Option<Tensor>],
    needs: &[bool],
    retain_graph: bool,
    create_graph: bool,
) -> Vec<Option<Tensor>> {
    let mut slot = n.backward.lock().unwrap();
    let f = slot.as_mut().unwrap_or_else(|| {
        panic!(
            "backward: trying to backward through the graph a second time (the saved tensors of {} were freed by \
             the first backward); pass retain_graph = true to the first backward if you need to backward through \
             it again",
            n.name
        )
    });
    let timed = crate::profiler::scope(n.name, "autograd");
    let running = Running::enter(n.name);
    let out = f(gs, needs);
    drop((running, timed));
    if !retain_graph {
        *slot = None; // release saved activations now
    }
    if create_graph {
        super::double::guard_once_differentiable(n, gs, out)
    } else {
        out
    }
}

/// Runs one backward's `body` in its frame; the outermost then runs the
/// queued callbacks.
fn in_frame(leaf_uses: HashMap<*const crate::tensor::Inner, usize>, body: impl FnOnce()) {
    FRAMES.with(|f| {
        f.borrow_mut().push(Frame {
            leaf_uses,
            callbacks: vec![],
        })
    });
    let frame = FrameGuard;
    body();
    // The outermost backward runs the queued callbacks (which may queue more).
    if FRAMES.with(|f| f.borrow().len() == 1) {
        loop {
            let queued = FRAMES.with(|f| std::mem::take(&mut f.borrow_mut()[0].callbacks));
            if queued.is_empty() {
                break;
            }
            queued.into_iter().for_each(|c| c());
        }
    }
    drop(frame);
}

/// Runs the nodes from the roots in reverse creation order, each once all
/// its consumers have fed it.
fn walk(
    roots: Vec<(Arc<Node>, usize, Tensor)>,
    retain_graph: bool,
    create_graph: bool,
    deps: &mut HashMap<*const Node, usize>,
    sink: &mut Sink,
) {
    // Per node, the summed gradient of each of its outputs so far.
    let mut grads: HashMap<*const Node, Vec<Option<Tensor>>> = HashMap::new();
    let mut ready = BinaryHeap::new();
    let mut root_nodes: Vec<Arc<Node>> = Vec::new();
    for (node, output, grad) in roots {
        let slots = grads
            .entry(key(&node))
            .or_insert_with(|| vec![None; node.outputs]);
        add_into(&mut slots[output], grad);
        if !root_nodes.iter().any(|r| Arc::ptr_eq(r, &node)) {
            root_nodes.push(node);
        }
    }
    // A root that another root feeds waits for it.
    for node in root_nodes {
        if deps.get(&key(&node)).copied().unwrap_or(0) == 0 {
            ready.push(Ready(node.seq, node));
        }
    }
    while let Some(Ready(_, n)) = ready.pop() {
        let needs: Vec<bool> = n.edges.iter().map(|e| sink.needs(e)).collect();
        // A node whose every consumer returned no gradient propagates none.
        let input_grads = match grads.remove(&key(&n)) {
            Some(mut gs) => {
                for (output, hook) in n.hooks.lock().unwrap().iter() {
                    if let Some(g) = gs[*output].as_ref().and_then(hook) {
                        gs[*output] = Some(g);
                    }
                }
                match sink {
                    Sink::Capture(c) => c.take_outputs(&n, &gs),
                    Sink::Accumulate => store_retained(&n, &gs, create_graph),
                }
                if needs.iter().any(|&x| x) {
                    run_node(&n, &gs, &needs, retain_graph, create_graph)
                } else {
                    vec![None; n.edges.len()]
                }
            }
            None => vec![None; n.edges.len()],
        };
        assert!(
            input_grads.len() == n.edges.len(),
            "{}: backward returned the wrong number of gradients",
            n.name
        );
        for (e, ig) in n.edges.iter().zip(input_grads) {
            match e {
                Edge::None => {}
                Edge::Leaf(t) => {
                    if let Some(ig) = ig {
                        debug_assert!(ig.shape() == t.shape(), "{}: gradient shape", n.name);
                        deliver_to_leaf(t, ig, sink, create_graph);
                    }
                    count_leaf_use(t, sink);
                }
                Edge::Node(m, output) => {
                    let k = key(m);
                    if let Some(ig) = ig {
                        let slots = grads.entry(k).or_insert_with(|| vec![None; m.outputs]);
                        add_into(&mut slots[*output], ig);
                    }
                    let d = deps.get_mut(&k).expect("counted above");
                    *d -= 1;
                    if *d == 0 {
                        ready.push(Ready(m.seq, m.clone()));
                    }
                }
            }
        }
    }
}
