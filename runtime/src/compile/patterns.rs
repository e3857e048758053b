//! Rewrites of recorded op patterns into the fused ops tapir already has:
//! a residual add read by a LayerNorm becomes `add_layer_norm` (one pass
//! for the sum, the statistics and the normalisation; both outputs kept).

use super::graph::{Graph, Node, Step, Value};
use super::replay;

/// Node `k`'s op name when it replays a recorded op.
fn name(node: &Node) -> Option<&'static str> {
    match &node.step {
        Step::Replay { name, .. } => Some(name),
        Step::Fused(_) => None,
    }
}

/// Whether `v` exists before node `k` runs.
fn before(v: &Option<Value>, k: usize) -> bool {
    !matches!(v, Some(Value::Out(n, _)) if *n >= k)
}

/// `s = a + b; y = layer_norm(s, ..)` → `(s, y) = add_layer_norm(a, b, ..)`,
/// at the add's place. Returns how many pairs it rewrote.
pub(crate) fn add_layer_norm(g: &mut Graph) -> usize {
    let mut gone = vec![false; g.nodes.len()];
    let mut moved: Vec<(usize, usize)> = Vec::new(); // (layer_norm node, add node)
    for j in 0..g.nodes.len() {
        if name(&g.nodes[j]) != Some("layer_norm") {
            continue;
        }
        let Some(Some(Value::Out(k, 0))) = g.nodes[j].inputs.first().cloned() else {
            continue;
        };
        let affine_ready = g.nodes[j].inputs[1..].iter().all(|v| before(v, k));
        if gone[k] || name(&g.nodes[k]) != Some("add") || !affine_ready {
            continue;
        }
        let (
            Step::Replay {
                out_shapes: add_shapes,
                out_dtypes: add_dtypes,
                ..
            },
            Step::Replay {
                attrs,
                out_shapes,
                out_dtypes,
                ..
            },
        ) = (&g.nodes[k].step, &g.nodes[j].step)
        else {
            continue;
        };
        let step = Step::Replay {
            name: "add_layer_norm",
            run: replay::lookup("add_layer_norm").expect("add_layer_norm replays"),
            attrs: attrs.clone(),
            out_shapes: vec![add_shapes[0].clone(), out_shapes[0].clone()],
            out_dtypes: vec![add_dtypes[0], out_dtypes[0]],
        };
        let mut inputs = g.nodes[k].inputs.clone();
        inputs.extend(g.nodes[j].inputs[1..].iter().cloned());
        g.nodes[k] = Node { step, inputs };
        gone[j] = true;
        moved.push((j, k));
    }
    let rewritten = moved.len();
    if rewritten > 0 {
        compact(g, &gone, &moved);
    }
    rewritten
}

/// Drops the `gone` nodes: a use of a moved node's output 0 becomes output
/// 1 of the node it moved into; every other index shifts down.
fn compact(g: &mut Graph, gone: &[bool], moved: &[(usize, usize)]) {
    let mut new_index = vec![usize::MAX; g.nodes.len()];
    let mut next = 0;
    for (k, &dead) in gone.iter().enumerate() {
        if !dead {
            new_index[k] = next;
            next += 1;
        }
    }
    let map = |v: &Value| match v {
        Value::Out(n, o) => match moved.iter().find(|(j, _)| j == n) {
            Some((_, k)) => Value::Out(new_index[*k], 1),
            None => Value::Out(new_index[*n], *o),
        },
        other => other.clone(),
    };
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes
        .into_iter()
        .zip(gone)
        .filter(|(_, dead)| !**dead)
        .map(|(mut node, _)| {
            node.inputs = node.inputs.iter().map(|v| v.as_ref().map(map)).collect();
            node
        })
        .collect();
    g.outputs = g.outputs.iter().map(map).collect();
}
