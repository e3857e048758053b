//! A compiled graph: the outermost ops one forward ran, resolved to where
//! their inputs come from, with chains of elementwise ops fused; and its
//! replay on new inputs.

use super::fused::FusedKernel;
use super::replay::{self, Args, Replay};
use super::{fuse, patterns};
use crate::trace::{Attrs, Capture, OpRecord};
use crate::{DType, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

/// Where a node's input comes from.
#[derive(Clone)]
pub(crate) enum Value {
    /// The forward's input `i`.
    Input(usize),
    /// The model's parameter or buffer `i`, in `visit` order.
    Param(usize),
    /// A tensor that existed before the forward (held by the graph).
    Const(Tensor),
    /// Output `o` of node `n`.
    Out(usize, usize),
}

/// What a node runs.
pub(crate) enum Step {
    /// A recorded op, called again.
    Replay {
        name: &'static str,
        run: Replay,
        attrs: Attrs,
        out_shapes: Vec<Vec<usize>>,
        out_dtypes: Vec<DType>,
    },
    /// A chain of elementwise ops as one kernel.
    Fused(Arc<FusedKernel>),
}

pub(crate) struct Node {
    pub step: Step,
    pub inputs: Vec<Option<Value>>,
}

/// A forward, recorded and ready to replay.
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    pub outputs: Vec<Value>,
    /// Per node, the values whose last use it is (freed after it runs, so a
    /// replay holds no more than eager code would).
    last_use: Vec<Vec<(usize, usize)>>,
    /// The pattern rewrites made, as "add + layer_norm -> add_layer_norm".
    pub rewrites: Vec<String>,
}

type Key = *const crate::tensor::Inner;

pub(crate) fn key(t: &Tensor) -> Key {
    Arc::as_ptr(&t.0)
}

fn place(op: &OpRecord) -> String {
    match op.place.is_empty() {
        true => String::new(),
        false => format!(" in `{}`", op.place),
    }
}

impl Graph {
    /// The graph of one captured forward on `inputs`, with `params` the
    /// model's parameters and buffers and `outputs` what the forward
    /// returned; `Err` says why it cannot be replayed (a graph break).
    pub(crate) fn build(
        cap: &Capture,
        inputs: &[&Tensor],
        params: &[Tensor],
        outputs: &[Tensor],
        fuse_chains: bool,
    ) -> Result<Graph, String> {
        if let Some(why) = cap.breaks.first() {
            return Err(why.clone());
        }
        let mut sources: HashMap<Key, Value> = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            sources.insert(key(p), Value::Param(i));
        }
        for (i, t) in inputs.iter().enumerate() {
            sources.insert(key(t), Value::Input(i));
        }
        let mut resolved: Vec<Vec<Option<Value>>> = Vec::with_capacity(cap.ops.len());
        for (k, op) in cap.ops.iter().enumerate() {
            if op.name.ends_with('_') && op.name != "where_" {
                return Err(format!(
                    "the in-place op `{}`{} (compile replays no in-place ops yet)",
                    op.name,
                    place(op)
                ));
            }
            if replay::lookup(op.name).is_none() {
                return Err(format!(
                    "the op `{}`{}, which compile cannot replay yet",
                    op.name,
                    place(op)
                ));
            }
            resolved.push(
                op.inputs
                    .iter()
                    .map(|t| {
                        t.as_ref().map(|t| {
                            sources
                                .get(&key(t))
                                .cloned()
                                .unwrap_or_else(|| Value::Const(t.clone()))
                        })
                    })
                    .collect(),
            );
            for (o, t) in op.outputs.iter().enumerate() {
                sources.entry(key(t)).or_insert(Value::Out(k, o));
            }
        }
        let outs = outputs
            .iter()
            .map(|t| match sources.get(&key(t)) {
                Some(v) => Ok(v.clone()),
                None => Err(format!(
                    "output {} of the forward (shape {:?}) was not made by a recorded op",
                    outputs.iter().position(|o| key(o) == key(t)).unwrap_or(0),
                    t.shape()
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let plan = match fuse_chains {
            true => fuse::plan(&cap.ops, &resolved, &outs),
            false => fuse::Plan::none(cap.ops.len()),
        };
        let mut g = plan.emit(&cap.ops, resolved, outs);
        if fuse_chains {
            let n = patterns::add_layer_norm(&mut g);
            g.rewrites
                .extend((0..n).map(|_| "add + layer_norm -> add_layer_norm".to_string()));
        }
        g.last_use = g.last_uses();
        Ok(g)
    }

    pub(crate) fn from_parts(nodes: Vec<Node>, outputs: Vec<Value>) -> Graph {
        Graph {
            nodes,
            outputs,
            last_use: Vec::new(),
            rewrites: Vec::new(),
        }
    }

    fn last_uses(&self) -> Vec<Vec<(usize, usize)>> {
        let mut last: HashMap<(usize, usize), usize> = HashMap::new();
        for (k, node) in self.nodes.iter().enumerate() {
            for v in node.inputs.iter().flatten() {
                if let Value::Out(n, o) = v {
                    last.insert((*n, *o), k);
                }
            }
        }
        for v in &self.outputs {
            if let Value::Out(n, o) = v {
                last.remove(&(*n, *o));
            }
        }
        let mut per_node = vec![Vec::new(); self.nodes.len()];
        for (value, k) in last {
            per_node[k].push(value);
        }
        per_node
    }

    /// Runs the graph on `inputs` with the model's current `params`.
    pub(crate) fn run(&self, inputs: &[&Tensor], params: &[Tensor]) -> Vec<Tensor> {
        let mut vals: Vec<Vec<Option<Tensor>>> = Vec::with_capacity(self.nodes.len());
        let get = |v: &Value, vals: &[Vec<Option<Tensor>>]| -> Tensor {
            match v {
                Value::Input(i) => inputs[*i].clone(),
                Value::Param(i) => params[*i].clone(),
                Value::Const(t) => t.clone(),
                Value::Out(n, o) => vals[*n][*o]
                    .clone()
                    .expect("compile: a value was used after its last use"),
            }
        };
        for (k, node) in self.nodes.iter().enumerate() {
            let ins: Vec<Option<Tensor>> = node
                .inputs
                .iter()
                .map(|v| v.as_ref().map(|v| get(v, &vals)))
                .collect();
            let outs = match &node.step {
                Step::Replay {
                    run,
                    attrs,
                    out_shapes,
                    out_dtypes,
                    ..
                } => run(&Args {
                    inputs: ins,
                    attrs,
                    out_shapes,
                    out_dtypes,
                }),
                Step::Fused(kernel) => {
                    let ins: Vec<Tensor> = ins.into_iter().flatten().collect();
                    vec![kernel.run(&ins)]
                }
            };
            vals.push(outs.into_iter().map(Some).collect());
            for &(n, o) in &self.last_use[k] {
                vals[n][o] = None;
            }
        }
        self.outputs.iter().map(|v| get(v, &vals)).collect()
    }

    /// The ops of each node, for `explain`: a replayed op's name, or the
    /// names a fused kernel stands for.
    pub(crate) fn describe(&self) -> Vec<Vec<&'static str>> {
        self.nodes
            .iter()
            .map(|n| match &n.step {
                Step::Replay { name, .. } => vec![*name],
                Step::Fused(k) => k.ops.clone(),
            })
            .collect()
    }
}
