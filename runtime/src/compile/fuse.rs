//! The fusion pass: chains (trees) of elementwise f32 ops whose
//! intermediate values nothing else reads become one program each.

use super::fused::FusedKernel;
use super::graph::{Graph, Node, Step, Value};
use super::replay;
use crate::trace::{Attr, Key, OpRecord, key};
use crate::{DType, Tensor};
use std::collections::HashMap;
use std::sync::Arc;
use tapir_kernels::program::{Binary, Inst, Program, Unary};

/// One instruction of an op the pass can fuse.
#[derive(Clone, Copy)]
enum Kind {
    Unary(Unary),
    Binary(Binary),
    /// Dropout in training with this keep probability.
    Dropout(f64),
    /// `x * x` (`square`, `powf(2)`).
    Square,
    /// `gelu_tanh`: eager's composite, instruction for instruction.
    GeluTanh,
}

fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "add" => Kind::Binary(Binary::Add),
        "sub" => Kind::Binary(Binary::Sub),
        "mul" => Kind::Binary(Binary::Mul),
        "div" => Kind::Binary(Binary::Div),
        "neg" => Kind::Unary(Unary::Neg),
        "exp" => Kind::Unary(Unary::Exp),
        "log" => Kind::Unary(Unary::Log),
        "log1p" => Kind::Unary(Unary::Log1p),
        "expm1" => Kind::Unary(Unary::Expm1),
        "sqrt" => Kind::Unary(Unary::Sqrt),
        "rsqrt" => Kind::Unary(Unary::Rsqrt),
        "abs" => Kind::Unary(Unary::Abs),
        "sign" => Kind::Unary(Unary::Sign),
        "sin" => Kind::Unary(Unary::Sin),
        "cos" => Kind::Unary(Unary::Cos),
        "tanh" => Kind::Unary(Unary::Tanh),
        "erf" => Kind::Unary(Unary::Erf),
        "sigmoid" => Kind::Unary(Unary::Sigmoid),
        "relu" => Kind::Unary(Unary::Relu),
        "silu" => Kind::Unary(Unary::Silu),
        "gelu" => Kind::Unary(Unary::Gelu),
        "hardswish" => Kind::Unary(Unary::Hardswish),
        "gelu_tanh" => Kind::GeluTanh,
        _ => return None,
    })
}

/// Whether `input` reaches an output of `shape` element for element
/// (`Some(true)`), by cycling over trailing dims (`Some(false)`: a bias
/// row, a scalar), or neither.
fn reaches(input: &[usize], shape: &[usize]) -> Option<bool> {
    if input == shape {
        return Some(true);
    }
    let lead = input.iter().take_while(|&&d| d == 1).count();
    let core = &input[lead..];
    (core.len() <= shape.len() && shape[shape.len() - core.len()..] == *core).then_some(false)
}

/// Whether op `op` draws from a generator (its place in the op order then
/// matters: eager code draws in that order).
fn draws(op: &OpRecord) -> bool {
    ["rand", "bernoulli", "dropout", "normal", "uniform"]
        .iter()
        .any(|p| op.name.starts_with(p))
}

/// A training dropout on a device whose masks programs recompute.
fn dropout(op: &OpRecord) -> Option<Kind> {
    let attr = |k: &str| {
        op.attrs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, a)| a.clone())
    };
    let (Some(Attr::Float(p)), Some(Attr::Int(1))) = (attr("p"), attr("training")) else {
        return None;
    };
    let x = op.inputs.first()?.as_ref()?;
    let ok = p > 0.0 && p < 1.0 && x.read().fuses_dropout() && op.outputs[0].shape() == x.shape();
    ok.then_some(Kind::Dropout(1.0 - p))
}

/// Whether op `op` can join a fused program.
fn fusable(op: &OpRecord) -> Option<Kind> {
    let exponent = || match op.attrs.iter().find(|(n, _)| *n == "exponent") {
        Some((_, Attr::Float(e))) => Some(*e),
        _ => None,
    };
    // `powf` computes `x * x` for 2 and `sqrt(x)` for 0.5 (`pow_scalar`), so
    // those fuse with the same bits; other exponents call `powf`.
    let k = match (op.name, exponent()) {
        ("dropout", _) => dropout(op)?,
        ("square", _) | ("powf", Some(2.0)) => Kind::Square,
        ("powf", Some(0.5)) => Kind::Unary(Unary::Sqrt),
        (name, _) => kind(name)?,
    };
    let [out] = op.outputs.as_slice() else {
        return None;
    };
    let ok = out.dtype() == DType::F32
        && op.inputs.iter().all(|t| {
            t.as_ref().is_some_and(|t| {
                t.dtype() == DType::F32
                    && t.device() == out.device()
                    && reaches(t.shape(), out.shape()).is_some()
            })
        });
    ok.then_some(k)
}

/// Which ops fuse: each group's members, keyed by its last op.
pub(crate) struct Plan {
    groups: HashMap<usize, Vec<usize>>,
    inner: Vec<bool>,
}

impl Plan {
    /// No fusion: every op replays alone.
    pub(crate) fn none(n: usize) -> Plan {
        Plan {
            groups: HashMap::new(),
            inner: vec![false; n],
        }
    }

    /// The graph: fused groups as one node each, other ops replayed.
    pub(crate) fn emit(
        &self,
        ops: &[OpRecord],
        resolved: Vec<Vec<Option<Value>>>,
        outputs: Vec<Value>,
    ) -> Graph {
        let mut new_index = vec![usize::MAX; ops.len()];
        let mut nodes = Vec::new();
        let remap = |v: &Value, new_index: &[usize]| match v {
            Value::Out(n, o) => Value::Out(new_index[*n], *o),
            other => other.clone(),
        };
        for (k, op) in ops.iter().enumerate() {
            if self.inner[k] {
                continue;
            }
            let node = match self.groups.get(&k) {
                Some(members) if members.len() > 1 => {
                    let (kernel, ext) = program(ops, &resolved, members);
                    Node {
                        step: Step::Fused(Arc::new(kernel)),
                        inputs: ext.iter().map(|v| Some(remap(v, &new_index))).collect(),
                    }
                }
                _ => Node {
                    step: Step::Replay {
                        name: op.name,
                        run: replay::lookup(op.name).expect("checked when the graph was built"),
                        attrs: op.attrs.clone(),
                        out_shapes: op
                            .outputs
                            .iter()
                            .map(|t| replay::fixed(t.shape()))
                            .collect(),
                        out_dtypes: op.outputs.iter().map(Tensor::dtype).collect(),
                    },
                    inputs: resolved[k]
                        .iter()
                        .map(|v| v.as_ref().map(|v| remap(v, &new_index)))
                        .collect(),
                },
            };
            new_index[k] = nodes.len();
            nodes.push(node);
        }
        let outputs = outputs.iter().map(|v| remap(v, &new_index)).collect();
        Graph::from_parts(nodes, outputs)
    }
}

/// Groups fusable ops with the fusable producers whose only reader they
/// are (of the reader's shape or broadcast to it, not an output of the
/// forward).
pub(crate) fn plan(ops: &[OpRecord], resolved: &[Vec<Option<Value>>], outputs: &[Value]) -> Plan {
    let mut uses: HashMap<(usize, usize), usize> = HashMap::new();
    for v in resolved.iter().flatten().flatten().chain(outputs) {
        if let Value::Out(n, o) = v {
            *uses.entry((*n, *o)).or_default() += 1;
        }
    }
    let is_output = |n: usize| {
        outputs
            .iter()
            .any(|v| matches!(v, Value::Out(m, _) if *m == n))
    };
    let kinds: Vec<Option<Kind>> = ops.iter().map(fusable).collect();
    // Draws before op i, so a group holding a dropout can tell whether
    // another op draws between it and the group's last op (fusing would
    // then change the order of draws, and the masks, against eager code).
    let mut draws_before = vec![0usize; ops.len() + 1];
    for (i, op) in ops.iter().enumerate() {
        draws_before[i + 1] = draws_before[i] + draws(op) as usize;
    }
    let mut plan = Plan::none(ops.len());
    for k in 0..ops.len() {
        if kinds[k].is_none() {
            continue;
        }
        let mut members = vec![k];
        for v in resolved[k].iter().flatten() {
            let Value::Out(p, 0) = *v else { continue };
            let absorb = kinds[p].is_some()
                && !plan.inner[p]
                && uses.get(&(p, 0)) == Some(&1)
                && !is_output(p)
                // Elementwise ops commute with broadcasting: a producer of
                // a smaller (trailing) shape is recomputed per element.
                && reaches(ops[p].outputs[0].shape(), ops[k].outputs[0].shape()).is_some();
            if !absorb {
                continue;
            }
            let taken = plan.groups.get(&p).cloned().unwrap_or_else(|| vec![p]);
            let first_draw = taken
                .iter()
                .chain(&members)
                .filter(|&&m| draws(&ops[m]))
                .min()
                .copied();
            if let Some(d) = first_draw {
                let in_group = taken
                    .iter()
                    .chain(&members)
                    .filter(|&&m| m > d && draws(&ops[m]))
                    .count();
                if draws_before[k + 1] - draws_before[d + 1] != in_group {
                    continue;
                }
            }
            plan.inner[p] = true;
            plan.groups.remove(&p);
            members.extend(taken);
        }
        members.sort_unstable();
        plan.groups.insert(k, members);
    }
    plan
}

/// The program of one group (members in op order, the last its output) and
/// the values its inputs come from.
fn program(
    ops: &[OpRecord],
    resolved: &[Vec<Option<Value>>],
    members: &[usize],
) -> (FusedKernel, Vec<Value>) {
    let mut insts: Vec<Inst> = Vec::new();
    let mut reg: HashMap<usize, usize> = HashMap::new();
    let mut ext: Vec<Value> = Vec::new();
    let mut ext_reg: HashMap<Key, usize> = HashMap::new();
    let mut seeds = 0;
    for &m in members {
        let mut operand = |i: usize, insts: &mut Vec<Inst>| -> usize {
            let value = resolved[m][i]
                .as_ref()
                .expect("fusable ops have every input");
            let tensor = ops[m].inputs[i]
                .as_ref()
                .expect("fusable ops have every input");
            match value {
                Value::Out(p, 0) if reg.contains_key(p) => reg[p],
                Value::Const(t) if t.numel() == 1 => {
                    insts.push(Inst::Const(t.to_vec::<f32>()[0]));
                    insts.len() - 1
                }
                _ => *ext_reg.entry(key(tensor)).or_insert_with(|| {
                    ext.push(value.clone());
                    insts.push(Inst::Input(ext.len() - 1));
                    insts.len() - 1
                }),
            }
        };
        let inst = match fusable(&ops[m]).expect("members are fusable") {
            Kind::Unary(u) => Inst::Unary(u, operand(0, &mut insts)),
            Kind::Binary(b) => {
                let x = operand(0, &mut insts);
                let y = operand(1, &mut insts);
                Inst::Binary(b, x, y)
            }
            Kind::Square => {
                let x = operand(0, &mut insts);
                Inst::Binary(Binary::Mul, x, x)
            }
            Kind::GeluTanh => {
                let x = operand(0, &mut insts);
                gelu_tanh(&mut insts, x)
            }
            Kind::Dropout(keep) => {
                let x = operand(0, &mut insts);
                seeds += 1;
                Inst::Dropout {
                    x,
                    keep,
                    seed: seeds - 1,
                }
            }
        };
        insts.push(inst);
        reg.insert(m, insts.len() - 1);
    }
    let last = *members.last().expect("a group has members");
    let program = Program {
        n_inputs: ext.len(),
        insts,
        outputs: vec![reg[&last]],
    };
    let names = members.iter().map(|&m| ops[m].name).collect();
    (FusedKernel::new(program, names), ext)
}

/// Pushes `Tensor::gelu_tanh`'s composite on `x` in eager's order, the
/// same rows and f32 constants, so the fused forward keeps eager's bits:
/// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x·x·x)))`. Returns its last
/// instruction, for the caller to push.
fn gelu_tanh(insts: &mut Vec<Inst>, x: usize) -> Inst {
    let mut push = |i: Inst| {
        insts.push(i);
        insts.len() - 1
    };
    let x2 = push(Inst::Binary(Binary::Mul, x, x));
    let x3 = push(Inst::Binary(Binary::Mul, x2, x));
    // Eager's f64 scalars become f32 the same way (`as f32`).
    let (kappa, beta): (f64, f64) = (0.044715, (2.0 / std::f64::consts::PI).sqrt());
    let c = push(Inst::Const(kappa as f32));
    let t = push(Inst::Binary(Binary::Mul, x3, c));
    let s = push(Inst::Binary(Binary::Add, x, t));
    let k = push(Inst::Const(beta as f32));
    let inner = push(Inst::Binary(Binary::Mul, s, k));
    let th = push(Inst::Unary(Unary::Tanh, inner));
    let one = push(Inst::Const(1.0));
    let p = push(Inst::Binary(Binary::Add, th, one));
    let half = push(Inst::Const(0.5));
    let h = push(Inst::Binary(Binary::Mul, x, half));
    Inst::Binary(Binary::Mul, h, p)
}
