//! Automatic dynamic shapes, as PyTorch's: the first call with a batch size
//! records a graph for that size; when a second size comes, the two
//! recordings are compared, and if they differ only in dims that are the
//! same multiple of the batch size in both, one graph with those dims
//! symbolic serves every batch size from then on.

use super::graph::{Graph, Node, Step, Value};
use super::replay::Dim;
use crate::Tensor;
use crate::trace::key;

/// One dim seen as `a` at batch `b0` and `b` at batch `b1`.
fn unify_dim(a: usize, b: usize, b0: usize, b1: usize) -> Option<Dim> {
    if a == b {
        return Some(Dim::Fixed(a));
    }
    let same_multiple =
        b0 > 0 && b1 > 0 && a.is_multiple_of(b0) && b.is_multiple_of(b1) && a / b0 == b / b1;
    same_multiple.then_some(Dim::Batch(a / b0))
}

fn unify_shape(a: &[Dim], b: &[Dim], b0: usize, b1: usize) -> Option<Vec<Dim>> {
    if a.len() != b.len() {
        return None;
    }
    a.iter()
        .zip(b)
        .map(|pair| match pair {
            (Dim::Fixed(x), Dim::Fixed(y)) => unify_dim(*x, *y, b0, b1),
            _ => None,
        })
        .collect()
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Input(x), Value::Input(y)) | (Value::Param(x), Value::Param(y)) => x == y,
        (Value::Out(n, o), Value::Out(m, p)) => (n, o) == (m, p),
        (Value::Const(x), Value::Const(y)) => key(x) == key(y) || same_small_constant(x, y),
        _ => false,
    }
}

/// Whether two constants made afresh in each call (the scalar of `x * 2.0`,
/// a small table built in the forward) hold the same values: then the two
/// recordings use the same constant. Larger ones count as the same only
/// when they are one tensor.
fn same_small_constant(x: &Tensor, y: &Tensor) -> bool {
    const SMALL: usize = 64;
    // Every dtype but i64 converts to f64 exactly.
    let bits = |t: &Tensor| -> Vec<u64> {
        match t.dtype() {
            crate::DType::I64 => t.to_vec::<i64>().iter().map(|&v| v as u64).collect(),
            _ => t.to_vec::<f64>().iter().map(|v| v.to_bits()).collect(),
        }
    };
    x.numel() <= SMALL
        && (x.shape(), x.dtype(), x.device()) == (y.shape(), y.dtype(), y.device())
        && bits(x) == bits(y)
}

fn same_inputs(a: &[Option<Value>], b: &[Option<Value>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Some(x), Some(y)) => same_value(x, y),
            (None, None) => true,
            _ => false,
        })
}

fn unify_node(a: &Node, b: &Node, b0: usize, b1: usize) -> Option<Node> {
    if !same_inputs(&a.inputs, &b.inputs) {
        return None;
    }
    let step = match (&a.step, &b.step) {
        (
            Step::Replay {
                name,
                run,
                attrs,
                out_shapes,
                out_dtypes,
            },
            Step::Replay {
                name: name_b,
                attrs: attrs_b,
                out_shapes: shapes_b,
                out_dtypes: dtypes_b,
                ..
            },
        ) => {
            if name != name_b || attrs != attrs_b || out_dtypes != dtypes_b {
                return None;
            }
            let shapes = out_shapes
                .iter()
                .zip(shapes_b)
                .map(|(x, y)| unify_shape(x, y, b0, b1))
                .collect::<Option<Vec<_>>>()?;
            Step::Replay {
                name,
                run: *run,
                attrs: attrs.clone(),
                out_shapes: shapes,
                out_dtypes: out_dtypes.clone(),
            }
        }
        (Step::Fused(x), Step::Fused(y)) if x.program == y.program => Step::Fused(x.clone()),
        _ => return None,
    };
    Some(Node {
        step,
        inputs: a.inputs.clone(),
    })
}

/// The graph of `g0` (recorded at batch `b0`) and `g1` (at `b1`, another
/// size) with batch-dependent dims symbolic, the batch read from dim 0 of
/// input `batch_input`; `None` when they differ otherwise.
pub(crate) fn generalise(
    g0: &Graph,
    b0: usize,
    g1: &Graph,
    b1: usize,
    batch_input: usize,
) -> Option<Graph> {
    let same_outputs = g0.outputs.len() == g1.outputs.len()
        && g0
            .outputs
            .iter()
            .zip(&g1.outputs)
            .all(|(x, y)| same_value(x, y));
    if b0 == b1 || g0.nodes.len() != g1.nodes.len() || !same_outputs {
        return None;
    }
    let nodes = g0
        .nodes
        .iter()
        .zip(&g1.nodes)
        .map(|(a, b)| unify_node(a, b, b0, b1))
        .collect::<Option<Vec<_>>>()?;
    let mut g = Graph::from_parts(nodes, g0.outputs.clone());
    g.rewrites = g0.rewrites.clone();
    g.batch_input = Some(batch_input);
    g.finish();
    Some(g)
}
