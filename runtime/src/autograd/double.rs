//! Second derivatives (`create_graph`): a backward whose closures record,
//! so its gradients can be differentiated again.
//!
//! A backward closure computes from the tensors its forward saved. Those
//! are detached handles (a saved output holding its own node would be a
//! cycle), so each remembers, weakly, where it came from: while a
//! `create_graph` backward runs, a saved handle stands for that tensor in
//! the graph being recorded. A closure built from recorded ops is then
//! differentiable for free; one that calls a fused kernel is not, and the
//! gradients it returns get a node that panics if a second backward
//! reaches it (PyTorch's "derivative not implemented"), never a silently
//! wrong derivative.

use super::engine::{Edge, Node};
use crate::Tensor;
use crate::tensor::{Inner, SharedStorage};
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Weak};

/// The backward nodes whose closures are built from recorded ops, so a
/// `create_graph` backward through them records a differentiable graph.
/// Each is checked against finite differences of its first derivative
/// (`tests/suite/double_backward.rs`).
pub const TWICE_DIFFERENTIABLE: &[&str] = &[
    "AbsBackward0",
    "AcosBackward0",
    "AcoshBackward0",
    "AddBackward0",
    "AddmmBackward0",
    "AmaxBackward0",
    "AminBackward0",
    "AsinBackward0",
    "AsinhBackward0",
    "Atan2Backward0",
    "AtanBackward0",
    "AtanhBackward0",
    "CatBackward0",
    "CeilBackward0",
    "ClampBackward1",
    "CloneBackward0",
    "Col2ImBackward0",
    "CopysignBackward0",
    "CosBackward0",
    "CoshBackward0",
    "CumsumBackward0",
    "DigammaBackward0",
    "DivBackward0",
    "ErfBackward0",
    "ErfcBackward0",
    "ErfinvBackward0",
    "Exp2Backward0",
    "ExpBackward0",
    "ExpandBackward0",
    "Expm1Backward0",
    "FloorBackward0",
    "FmodBackward0",
    "GatherBackward0",
    "GeluBackward0",
    "HardswishBackward0",
    "HypotBackward0",
    "I0Backward0",
    "Im2ColBackward0",
    "IndexAddBackward0",
    "IndexCopyBackward0",
    "IndexFillBackward0",
    "IndexSelectBackward0",
    "LeakyReluBackward0",
    "LgammaBackward0",
    "LinalgCholeskyExBackward0",
    "LinalgDetBackward0",
    "LinalgEighBackward0",
    "LinalgLuBackward0",
    "LinalgPinvBackward0",
    "LinalgQrBackward0",
    "LinalgSlogdetBackward0",
    "LinalgSolveBackward0",
    "LinalgSolveTriangularBackward0",
    "LinalgSvdBackward0",
    "LinalgVectorNormBackward0",
    "Log10Backward0",
    "Log1PBackward0",
    "Log2Backward0",
    "LogBackward0",
    "LogSoftmaxBackward0",
    "LogitBackward0",
    "LogsumexpBackward0",
    "MaxBackward0",
    "MaxPool2DWithIndicesBackward0",
    "MaximumBackward0",
    "MinBackward0",
    "MinimumBackward0",
    "MmBackward0",
    "MulBackward0",
    "NativeLayerNormBackward0",
    "NegBackward0",
    "PermuteBackward0",
    "PolygammaBackward0",
    "PowBackward0",
    "PowBackward1",
    "ReluBackward0",
    "RemainderBackward0",
    "RoundBackward0",
    "RsqrtBackward0",
    "ScaledDotProductFlashAttentionForCpuBackward0",
    "ScatterAddBackward0",
    "ScatterBackward0",
    "ScatterBackward1",
    "ScatterReduceBackward0",
    "SigmoidBackward0",
    "SignBackward0",
    "SiluBackward0",
    "SinBackward0",
    "SincBackward0",
    "SinhBackward0",
    "SliceBackward0",
    "SliceBackwardBackward0",
    "SoftmaxBackward0",
    "SortBackward0",
    "SpecialEntrBackward0",
    "SpecialErfcxBackward0",
    "SpecialI0EBackward0",
    "SpecialI1Backward0",
    "SpecialI1EBackward0",
    "SpecialLogNdtrBackward0",
    "SpecialNdtriBackward0",
    "SpecialXlog1PyBackward0",
    "SplitBackward0",
    "SqrtBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "SubBackward0",
    "SumBackward1",
    "TanBackward0",
    "TanhBackward0",
    "TopkBackward0",
    "ToCopyBackward0",
    "TransposeBackward0",
    "TruncBackward0",
    "UnbindBackward0",
    "UnfoldBackward0",
    "UnsqueezeBackward0",
    "ViewBackward0",
    "WhereBackward0",
    "XlogyBackward0",
    "ZetaBackward0",
];

thread_local! {
    /// How many `create_graph` backwards run on this thread now.
    static DIFFERENTIATING: Cell<usize> = const { Cell::new(0) };
    /// The node whose backward closure is being made, and its outputs'
    /// buffers: what a closure saves from them is that node's output.
    static SAVING: RefCell<Vec<(Weak<Node>, Vec<*const SharedStorage>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `make` (an op's closure maker) knowing that buffers `outputs` are
/// `node`'s outputs, in order.
pub(crate) fn saving_outputs_of<R>(
    node: &Weak<Node>,
    outputs: &[*const SharedStorage],
    make: impl FnOnce() -> R,
) -> R {
    SAVING.with(|s| s.borrow_mut().push((node.clone(), outputs.to_vec())));
    // Popped however `make` ends.
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SAVING.with(|s| s.borrow_mut().pop());
        }
    }
    let _pop = Pop;
    make()
}

/// Marks a `create_graph` backward as running until dropped.
pub(crate) struct Differentiating;

impl Differentiating {
    pub(crate) fn enter() -> Differentiating {
        DIFFERENTIATING.with(|d| d.set(d.get() + 1));
        Differentiating
    }
}

impl Drop for Differentiating {
    fn drop(&mut self) {
        DIFFERENTIATING.with(|d| d.set(d.get() - 1));
    }
}

/// Whether saved handles stand for their origins now: a `create_graph`
/// backward runs and grad mode is on (a `no_grad` inside a closure still
/// records nothing).
pub(crate) fn differentiating() -> bool {
    DIFFERENTIATING.with(|d| d.get() > 0) && super::is_grad_enabled()
}

/// Where a saved handle's data came from in the graph, held weakly.
#[derive(Clone)]
pub(crate) enum SavedOrigin {
    /// A leaf that requires grad.
    Leaf(Weak<Inner>),
    /// Output `.1` of a node.
    Output(Weak<Node>, usize),
}

/// The origin a handle saved from `t` remembers: `t` itself when it takes
/// part in autograd, or what `t` stands for when it is a saved handle.
pub(crate) fn origin_of(t: &Tensor) -> Option<SavedOrigin> {
    match (&t.0.grad_fn, &t.0.saved_origin) {
        (Some(n), _) => Some(SavedOrigin::Output(Arc::downgrade(n), t.0.output_nr)),
        (None, Some(origin)) if differentiating() => Some(origin.clone()),
        (None, _) if t.0.requires_grad.load(std::sync::atomic::Ordering::Relaxed) => {
            Some(SavedOrigin::Leaf(Arc::downgrade(&t.0)))
        }
        // An output of the node being recorded, saved by its closure maker.
        (None, None) => SAVING.with(|s| {
            let s = s.borrow();
            let (node, outputs) = s.last()?;
            let o = outputs
                .iter()
                .position(|&p| p == Arc::as_ptr(&t.0.storage))?;
            Some(SavedOrigin::Output(node.clone(), o))
        }),
        _ => None,
    }
}

/// The edge a saved handle's origin gives an op recorded on it now
/// (`Edge::None` once the origin is gone).
pub(crate) fn origin_edge(origin: &SavedOrigin) -> Edge {
    match origin {
        SavedOrigin::Leaf(leaf) => leaf.upgrade().map_or(Edge::None, |l| Edge::Leaf(Tensor(l))),
        SavedOrigin::Output(node, o) => node.upgrade().map_or(Edge::None, |n| Edge::Node(n, *o)),
    }
}

/// Under `create_graph`: `out` as `n`'s backward returned it when `n` is
/// [`TWICE_DIFFERENTIABLE`]; otherwise each gradient hangs from a node that
/// panics if a second backward reaches it. That node's edges are the
/// incoming gradients' and `n`'s own inputs', everything the true second
/// derivative could depend on.
pub(crate) fn guard_once_differentiable(
    n: &Arc<Node>,
    gs: &[Option<Tensor>],
    out: Vec<Option<Tensor>>,
) -> Vec<Option<Tensor>> {
    if TWICE_DIFFERENTIABLE.contains(&n.name) {
        return out;
    }
    let incoming: Vec<&Tensor> = gs.iter().flatten().collect();
    let make_edges = || {
        let mut edges = Tensor::edges(&incoming);
        edges.extend(n.edges.iter().map(|e| match e {
            Edge::None => Edge::None,
            Edge::Leaf(t) => Edge::Leaf(t.clone()),
            Edge::Node(m, o) => Edge::Node(m.clone(), *o),
        }));
        edges
    };
    let name = n.name;
    out.into_iter()
        .map(|g| {
            g.map(|g| {
                let node = Arc::new(Node::new("NotTwiceDifferentiable", make_edges(), move |_, _| {
                    panic!(
                        "backward: a second derivative runs through {name}, whose backward tapir cannot differentiate \
                         yet (autograd::TWICE_DIFFERENTIABLE lists the ones it can)"
                    )
                }));
                Tensor::with_node(g.detach(), &node, 0)
            })
        })
        .collect()
}
