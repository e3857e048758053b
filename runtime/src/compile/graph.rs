//! A compiled graph: the outermost ops one forward ran, resolved to where
//! their inputs come from, with chains of elementwise ops fused; and its
//! replay on new inputs.

use super::fused::FusedKernel;
use super::replay::{self, Args, Dim, Replay};
use super::{fuse, patterns};
use crate::trace::{Attrs, Capture, Key, key};
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
#[derive(Clone)]
pub(crate) enum Step {
    /// A recorded op, called again.
    Replay {
        name: &'static str,
        run: Replay,
        attrs: Attrs,
        out_shapes: Vec<Vec<Dim>>,
        out_dtypes: Vec<DType>,
    },
    /// A chain of elementwise ops as one kernel.
    Fused(Arc<FusedKernel>),
}

#[derive(Clone)]
pub(crate) struct Node {
    pub step: Step,
    pub inputs: Vec<Option<Value>>,
}

impl Node {
    /// How many tensors the node makes.
    fn outputs(&self) -> usize {
        match &self.step {
            Step::Replay { out_shapes, .. } => out_shapes.len(),
            Step::Fused(_) => 1,
        }
    }
}

/// A forward, recorded and ready to replay.
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    pub outputs: Vec<Value>,
    /// Per node, the values whose last use it is (freed after it runs, so a
    /// replay holds no more than eager code would).
    last_use: Vec<Vec<(usize, usize)>>,
    /// Where node `n`'s outputs start in a run's flat list of values.
    base: Vec<usize>,
    /// How many values a run makes.
    n_values: usize,
    /// For a graph generalised over the batch: the input whose dim 0 is the
    /// batch size (`Dim::Batch` dims are multiples of it).
    pub batch_input: Option<usize>,
    /// The pattern rewrites made, as "add + layer_norm -> add_layer_norm".
    pub rewrites: Vec<String>,
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
            if replay::lookup(op.name).is_none() {
                return Err(format!(
                    "the op `{}`{}, which compile cannot replay yet",
                    op.name,
                    op.in_module()
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
        // A fused kernel runs at its last op's place: an in-place op in
        // between could change what it reads, so such graphs replay unfused.
        let in_place = cap
            .ops
            .iter()
            .any(|op| op.name.ends_with('_') && op.name != "where_");
        let fuse_chains = fuse_chains && !in_place;
        let plan = match fuse_chains {
            true => fuse::plan(&cap.ops, &resolved, &outs),
            false => fuse::Plan::none(cap.ops.len()),
        };
        let mut g = plan.emit(&cap.ops, resolved, outs);
        if fuse_chains {
            let n = patterns::add_layer_norm(&mut g);
            g.rewrites
                .extend((0..n).map(|_| "add + layer_norm -> add_layer_norm".to_string()));
            let n = patterns::scaled_softmax(&mut g);
            g.rewrites.extend(
                (0..n).map(|_| "mul + causal_mask + softmax -> scaled_softmax".to_string()),
            );
        }
        g.finish();
        Ok(g)
    }

    pub(crate) fn from_parts(nodes: Vec<Node>, outputs: Vec<Value>) -> Graph {
        Graph {
            nodes,
            outputs,
            last_use: Vec::new(),
            base: Vec::new(),
            n_values: 0,
            batch_input: None,
            rewrites: Vec::new(),
        }
    }

    /// Works out when values die and where they live in a run.
    pub(crate) fn finish(&mut self) {
        self.last_use = self.last_uses();
        self.base.clear();
        let mut at = 0;
        for node in &self.nodes {
            self.base.push(at);
            at += node.outputs();
        }
        self.n_values = at;
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
        // Every node's outputs in one flat list (node `n`'s from
        // `base[n]`), and one scratch list of inputs reused by every node:
        // a batch-1 forward is short enough for per-node allocations to show.
        let mut vals: Vec<Option<Tensor>> = Vec::with_capacity(self.n_values);
        let mut ins: Vec<Option<Tensor>> = Vec::new();
        let batch = self.batch_input.map_or(0, |i| inputs[i].shape()[0]);
        let get = |v: &Value, vals: &[Option<Tensor>]| -> Tensor {
            match v {
                Value::Input(i) => inputs[*i].clone(),
                Value::Param(i) => params[*i].clone(),
                Value::Const(t) => t.clone(),
                Value::Out(n, o) => vals[self.base[*n] + o]
                    .clone()
                    .expect("compile: a value was used after its last use"),
            }
        };
        for (k, node) in self.nodes.iter().enumerate() {
            ins.clear();
            ins.extend(
                node.inputs
                    .iter()
                    .map(|v| v.as_ref().map(|v| get(v, &vals))),
            );
            match &node.step {
                Step::Replay {
                    run,
                    attrs,
                    out_shapes,
                    out_dtypes,
                    ..
                } => {
                    let outs = run(&Args {
                        inputs: &ins,
                        attrs,
                        out_shapes,
                        out_dtypes,
                        batch,
                    });
                    ins.clear();
                    vals.extend(outs.into_iter().map(Some));
                }
                Step::Fused(kernel) => {
                    let dense: Vec<Tensor> = ins.drain(..).flatten().collect();
                    vals.push(Some(kernel.run(&dense)));
                }
            }
            for &(n, o) in &self.last_use[k] {
                vals[self.base[n] + o] = None;
            }
        }
        self.outputs.iter().map(|v| get(v, &vals)).collect()
    }

    /// The first op that draws random numbers, if any: a CUDA graph would
    /// bake in the generator's position and repeat the same numbers.
    pub(crate) fn random_op(&self) -> Option<&'static str> {
        use crate::trace::AttrLookup;
        self.nodes.iter().find_map(|n| match &n.step {
            Step::Replay { name, attrs, .. } => match *name {
                "dropout" => (attrs.int("training") != 0).then_some(*name),
                "rand_like" | "randn_like" | "rand" | "randn" | "rand_on" | "randn_on"
                | "bernoulli" | "uniform_" | "normal_" => Some(*name),
                _ => None,
            },
            Step::Fused(k) => k.ops.iter().copied().find(|op| *op == "dropout"),
        })
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
