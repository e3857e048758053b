//! Rewrites of recorded op patterns into the fused ops tapir already has:
//! a residual add read by a LayerNorm becomes `add_layer_norm` (one pass
//! for the sum, the statistics and the normalisation; both outputs kept),
//! and attention's `scores * scale`, causal mask and softmax become one
//! scaled softmax (one pass each way instead of three, and no mask tensor).

use super::graph::{Graph, Node, Step, Value};
use super::replay;
use crate::DType;
use crate::trace::Attr;
use std::collections::HashMap;

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

/// How many times each value is read (by nodes and as an output).
fn uses(g: &Graph) -> HashMap<(usize, usize), usize> {
    let mut n = HashMap::new();
    for v in g
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().flatten())
        .chain(&g.outputs)
    {
        if let Value::Out(k, o) = v {
            *n.entry((*k, *o)).or_default() += 1;
        }
    }
    n
}

/// The node feeding input 0 of node `j`, when only `j` reads it.
fn sole_producer(g: &Graph, uses: &HashMap<(usize, usize), usize>, j: usize) -> Option<usize> {
    match g.nodes[j].inputs.first()? {
        Some(Value::Out(k, 0)) if uses.get(&(*k, 0)) == Some(&1) => Some(*k),
        _ => None,
    }
}

/// `softmax(causal_mask(x * c), -1)` (or without the mask) for a scalar
/// constant `c`, f32 or f64, on a device with the fused kernel →
/// `scaled_softmax(x, c, causal)`. Returns how many it rewrote.
pub(crate) fn scaled_softmax(g: &mut Graph) -> usize {
    let uses = uses(g);
    let mut gone = vec![false; g.nodes.len()];
    let mut rewritten = 0;
    for j in 0..g.nodes.len() {
        let Step::Replay {
            name: "softmax",
            attrs,
            out_shapes,
            out_dtypes,
            ..
        } = &g.nodes[j].step
        else {
            continue;
        };
        let last = out_shapes[0].len() as i64 - 1;
        let dim = attrs.iter().find_map(|(k, a)| match (k, a) {
            (&"dim", Attr::Int(d)) => Some(*d),
            _ => None,
        });
        let last_dim = matches!(dim, Some(d) if d == -1 || d == last);
        if !last_dim || !matches!(out_dtypes[0], DType::F32 | DType::F64) {
            continue;
        }
        let Some(c) = sole_producer(g, &uses, j) else {
            continue;
        };
        let (mul, causal) = match name(&g.nodes[c]) {
            Some("causal_mask") => match sole_producer(g, &uses, c) {
                Some(m) => (m, true),
                None => continue,
            },
            Some("mul") => (c, false),
            _ => continue,
        };
        if name(&g.nodes[mul]) != Some("mul") || gone[mul] {
            continue;
        }
        let ins = &g.nodes[mul].inputs;
        let scalar = |v: &Option<Value>| match v {
            Some(Value::Const(t))
                if t.numel() == 1
                    && t.dtype() == out_dtypes[0]
                    && t.read().fuses_scaled_softmax() =>
            {
                Some(t.to_vec::<f64>()[0])
            }
            _ => None,
        };
        let (x, scale) = match (scalar(&ins[0]), scalar(&ins[1])) {
            (None, Some(s)) => (ins[0].clone(), s),
            (Some(s), None) => (ins[1].clone(), s),
            _ => continue,
        };
        g.nodes[j] = Node {
            step: Step::Replay {
                name: "scaled_softmax",
                run: replay::lookup("scaled_softmax").expect("scaled_softmax replays"),
                attrs: vec![
                    ("scale", Attr::Float(scale)),
                    ("is_causal", Attr::Int(causal as i64)),
                ],
                out_shapes: out_shapes.clone(),
                out_dtypes: out_dtypes.clone(),
            },
            inputs: vec![x],
        };
        gone[mul] = true;
        gone[c] = true;
        rewritten += 1;
    }
    if rewritten > 0 {
        compact(g, &gone, &[]);
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
