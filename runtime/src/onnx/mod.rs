//! ONNX export (`torch.onnx.export(model, args, path, opset_version=17)`).
//!
//! The graph is captured by running the model's forward in eval mode under
//! `no_grad`, recording the outermost op of every call (a `linear`, not its
//! GEMM). It runs twice: with your example inputs, then with every dynamic
//! dim one or two larger and the values reordered. What differs between the
//! two runs is what varies with the input: a dim that changes becomes a
//! `dim_param`, and a constant that changes (a tensor computed outside any
//! op the exporter sees) is an error rather than a silently baked value.
//! Parameters and buffers become initializers named by their state-dict keys.
//!
//! ```
//! use tapir_runtime::{nn::{Linear, Sequential}, onnx, Tensor};
//! let model = Sequential::new().add(Linear::new(4, 3, true));
//! let path = std::env::temp_dir().join(format!("doc-{}.onnx", std::process::id()));
//! onnx::export(&model, &[&Tensor::randn(&[2, 4])], &path, onnx::ExportOptions::default()).unwrap();
//! let m = onnx::read_model(&path).unwrap();
//! let graph = m.graph.unwrap();
//! assert_eq!(graph.node[0].op_type.as_deref(), Some("Gemm"));
//! std::fs::remove_file(path).unwrap();
//! ```

mod builder;
mod lower;
pub mod proto;

use crate::nn::{Forward, Module, Sequential};
use crate::trace::{self, Key, OpRecord, key};
use crate::{DType, Error, Result, Tensor};
use builder::{Builder, onnx_type};
use lower::{Dims, OpView};
use prost::Message;
use proto::*;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What `export` writes (`torch.onnx.export`'s keyword arguments).
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The operator set; tapir writes opset 17.
    pub opset_version: i64,
    /// Names of the graph inputs, in order (default `input_0`, `input_1`, ..).
    pub input_names: Vec<String>,
    /// Names of the graph outputs (default `output_0`, ..).
    pub output_names: Vec<String>,
    /// Per input or output name, dims that may vary and their symbolic
    /// names (`{"input_0": {0: "batch"}}`). `model!` models have theirs
    /// already: the run-time dims of their `forward` signature (`B`, `T`).
    pub dynamic_axes: BTreeMap<String, BTreeMap<usize, String>>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            opset_version: 17,
            input_names: Vec::new(),
            output_names: Vec::new(),
            dynamic_axes: BTreeMap::new(),
        }
    }
}

/// A model `export` can run: its forward over a list of inputs, and which
/// input dims are symbolic. `model!` implements it for every model whose
/// forward takes only tensors.
pub trait Exportable: Module {
    /// Runs the forward on `inputs`, in the forward's order.
    fn export_forward(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>>;
    /// Per input, per dim: its symbolic name when it may vary.
    fn dynamic_dims(&self) -> Vec<Vec<Option<&'static str>>> {
        Vec::new()
    }
}

impl Exportable for Sequential {
    fn export_forward(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        crate::macro_support::export_arity("Sequential::forward", inputs.len(), 1)?;
        Ok(vec![self.forward(inputs[0])])
    }
}

/// Reads an ONNX file back (for checks; `onnx.load`).
pub fn read_model(path: impl AsRef<Path>) -> Result<ModelProto> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    ModelProto::decode(bytes.as_slice())
        .map_err(|e| Error::Format(format!("{}: not an ONNX model: {e}", path.display())))
}

fn fail(msg: String) -> Error {
    Error::Export(format!("onnx::export: {msg}"))
}

/// Exports `model` traced on `inputs` to `path` (written beside it, read
/// back and checked, then renamed into place).
pub fn export<M: Exportable + ?Sized>(
    model: &M,
    inputs: &[&Tensor],
    path: impl AsRef<Path>,
    options: ExportOptions,
) -> Result<()> {
    if options.opset_version != 17 {
        return Err(fail(format!(
            "opset_version {} was asked for; tapir writes opset 17",
            options.opset_version
        )));
    }
    let names = io_names(&options.input_names, inputs.len(), "input")?;
    let dynamic = dynamic_dims(model, inputs, &names, &options)?;
    let was_training = model.is_training();
    model.eval();
    let traced = crate::no_grad(|| -> Result<_> {
        let a = trace::capture(|| model.export_forward(inputs));
        let varied = vary(inputs, &dynamic);
        let varied_refs: Vec<&Tensor> = varied.iter().collect();
        let b = trace::capture(|| model.export_forward(&varied_refs));
        Ok((a.0?, a.1, varied, b.0?, b.1))
    });
    if was_training {
        model.train();
    }
    let (out_a, cap_a, varied, out_b, cap_b) = traced?;
    let graph = Trace {
        model,
        inputs: (inputs.iter().map(|t| (*t).clone()).collect(), varied),
        ops: (&cap_a.ops, &cap_b.ops),
        outputs: (out_a, out_b),
    }
    .build(&names, &dynamic, &options)?;
    let model_proto = ModelProto {
        ir_version: Some(8),
        producer_name: Some("tapir".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        doc_string: None,
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
    };
    write_verified(&model_proto, path.as_ref())
}

fn io_names(given: &[String], n: usize, what: &str) -> Result<Vec<String>> {
    match given.len() {
        0 => Ok((0..n).map(|i| format!("{what}_{i}")).collect()),
        k if k == n => Ok(given.to_vec()),
        k => Err(fail(format!("{k} {what}_names for {n} {what}s"))),
    }
}

/// Per input, per dim: its symbolic name when it may vary.
fn dynamic_dims<M: Exportable + ?Sized>(
    model: &M,
    inputs: &[&Tensor],
    names: &[String],
    options: &ExportOptions,
) -> Result<Vec<Vec<Option<String>>>> {
    let declared = model.dynamic_dims();
    let mut dims: Vec<Vec<Option<String>>> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (0..t.ndim())
                .map(|d| {
                    declared
                        .get(i)
                        .and_then(|v| v.get(d).copied().flatten())
                        .map(str::to_string)
                })
                .collect()
        })
        .collect();
    for (name, axes) in &options.dynamic_axes {
        let Some(i) = names.iter().position(|n| n == name) else {
            continue; // an output's names are used when the outputs are typed
        };
        for (&d, sym) in axes {
            let slot = dims[i].get_mut(d).ok_or_else(|| {
                fail(format!(
                    "dynamic_axes names dim {d} of `{name}`, which has shape {:?}",
                    inputs[i].shape()
                ))
            })?;
            *slot = Some(sym.clone());
        }
    }
    Ok(dims)
}

/// The second run's inputs: every symbolic dim grown (by 1 for the first
/// symbol, 2 for the second, ..) by repeating its entries, then every value
/// moved to the mirrored position, so a computed constant shows itself.
fn vary(inputs: &[&Tensor], dynamic: &[Vec<Option<String>>]) -> Vec<Tensor> {
    let mut symbols: Vec<&String> = dynamic.iter().flatten().flatten().collect();
    symbols.sort();
    symbols.dedup();
    inputs
        .iter()
        .zip(dynamic)
        .map(|(t, dims)| {
            let mut x = (*t).clone();
            for (d, sym) in dims.iter().enumerate() {
                let Some(sym) = sym else { continue };
                let grow = 1 + symbols.iter().position(|s| *s == sym).unwrap_or(0);
                let n = x.shape()[d];
                let idx: Vec<i64> = (0..n + grow).map(|i| (i % n.max(1)) as i64).collect();
                x = x.index_select(d as isize, &Tensor::from_vec(idx, &[n + grow]));
            }
            let n = x.numel();
            let rev: Vec<i64> = (0..n as i64).rev().collect();
            let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
            x.flatten_all()
                .index_select(0, &Tensor::from_vec(rev, &[n]))
                .reshape(&shape)
        })
        .collect()
}

/// Where a recorded op's input comes from.
#[derive(Clone)]
enum Source {
    Input(usize),
    Param(String),
    Value(usize, usize),
    Const(Tensor),
}

/// The two runs of one export.
struct Trace<'a, M: ?Sized> {
    model: &'a M,
    inputs: (Vec<Tensor>, Vec<Tensor>),
    ops: (&'a [OpRecord], &'a [OpRecord]),
    outputs: (Vec<Tensor>, Vec<Tensor>),
}

/// Every tensor of one run the graph can name.
fn sources(
    params: &[(String, Tensor)],
    inputs: &[Tensor],
    ops: &[OpRecord],
) -> HashMap<Key, Source> {
    let mut m = HashMap::new();
    for (n, p) in params {
        m.insert(key(p), Source::Param(n.clone()));
    }
    for (i, t) in inputs.iter().enumerate() {
        m.insert(key(t), Source::Input(i));
    }
    for (k, op) in ops.iter().enumerate() {
        for (o, t) in op.outputs.iter().enumerate() {
            m.entry(key(t)).or_insert(Source::Value(k, o));
        }
    }
    m
}

fn resolve(m: &HashMap<Key, Source>, t: &Tensor) -> Source {
    m.get(&key(t))
        .cloned()
        .unwrap_or_else(|| Source::Const(t.clone()))
}

fn same_values(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape()
        && a.dtype() == b.dtype()
        && a.to_dtype(DType::F64).to_vec::<f64>() == b.to_dtype(DType::F64).to_vec::<f64>()
}

impl<M: Exportable + ?Sized> Trace<'_, M> {
    fn build(
        &self,
        input_names: &[String],
        dynamic: &[Vec<Option<String>>],
        options: &ExportOptions,
    ) -> Result<GraphProto> {
        let mut params = self.model.named_parameters();
        params.extend(self.model.named_buffers());
        let (ops_a, ops_b) = self.ops;
        same_ops(ops_a, ops_b)?;
        let src = (
            sources(&params, &self.inputs.0, ops_a),
            sources(&params, &self.inputs.1, ops_b),
        );
        let mut b = Builder::default();
        let mut naming = Naming {
            input_names,
            ops: ops_a,
            params: params.iter().map(|(n, t)| (n.as_str(), t)).collect(),
            used: BTreeMap::new(),
        };
        for (k, (a, bo)) in ops_a.iter().zip(ops_b).enumerate() {
            let view = op_view(&mut naming, &mut b, &src, k, a, bo)?;
            if is_constant_op(a.name) {
                let all_same = a
                    .outputs
                    .iter()
                    .zip(&bo.outputs)
                    .all(|(x, y)| same_values(x, y));
                if !all_same {
                    return Err(fail(format!(
                        "`{}` (op #{k}{}) makes a tensor whose size or values change with the inputs; use the `_like` form or build it from the inputs",
                        a.name,
                        a.in_module()
                    )));
                }
                for (o, t) in a.outputs.iter().enumerate() {
                    b.inits.push(tensor_proto(&view.outputs[o], t));
                }
                continue;
            }
            lower::lower(&mut b, &view).map_err(|why| {
                fail(format!(
                    "cannot export `{}` (op #{k}{}): {why}",
                    view.name,
                    a.in_module()
                ))
            })?;
        }
        let output = self.graph_outputs(&mut naming, &mut b, &src.0, dynamic, options)?;
        let input = self
            .inputs
            .0
            .iter()
            .zip(&self.inputs.1)
            .enumerate()
            .map(|(i, (ta, tb))| {
                let dims = (ta.shape().to_vec(), tb.shape().to_vec());
                value_info(&input_names[i], ta.dtype(), &dims, |d| {
                    dynamic[i][d]
                        .clone()
                        .unwrap_or_else(|| format!("{}_dim{d}", input_names[i]))
                })
            })
            .collect();
        let mut initializer: Vec<TensorProto> = naming
            .used
            .iter()
            .map(|(n, t)| tensor_proto(n, t))
            .collect();
        initializer.append(&mut b.inits);
        Ok(GraphProto {
            node: b.nodes,
            name: Some("tapir".into()),
            initializer,
            input,
            output,
        })
    }

    /// The forward's outputs under their names, typed, with dims that
    /// follow an input's symbol named after it.
    fn graph_outputs(
        &self,
        naming: &mut Naming,
        b: &mut Builder,
        src: &HashMap<Key, Source>,
        dynamic: &[Vec<Option<String>>],
        options: &ExportOptions,
    ) -> Result<Vec<ValueInfoProto>> {
        let out_names = io_names(&options.output_names, self.outputs.0.len(), "output")?;
        let mut infos = Vec::new();
        for (i, (ta, tb)) in self.outputs.0.iter().zip(&self.outputs.1).enumerate() {
            let n = naming.name(b, &resolve(src, ta));
            b.node("Identity", &[&n], &[&out_names[i]], vec![]);
            let dims = (ta.shape().to_vec(), tb.shape().to_vec());
            let declared = options.dynamic_axes.get(&out_names[i]);
            infos.push(value_info(&out_names[i], ta.dtype(), &dims, |d| {
                declared
                    .and_then(|m| m.get(&d).cloned())
                    .or_else(|| symbol_for(&self.inputs, dynamic, dims.0[d], dims.1[d]))
                    .unwrap_or_else(|| format!("{}_dim{d}", out_names[i]))
            }));
        }
        Ok(infos)
    }
}

/// Both runs must have run the same ops in the same order.
fn same_ops(ops_a: &[OpRecord], ops_b: &[OpRecord]) -> Result<()> {
    if ops_a.len() == ops_b.len() && ops_a.iter().zip(ops_b).all(|(a, b)| a.name == b.name) {
        return Ok(());
    }
    let k = ops_a.iter().zip(ops_b).position(|(a, b)| a.name != b.name);
    let at = k.map_or(String::new(), |k| {
        format!(
            " (op #{k}: `{}`{} became `{}`)",
            ops_a[k].name,
            ops_a[k].in_module(),
            ops_b[k].name
        )
    });
    Err(fail(format!(
        "the forward ran different ops for inputs of another size{at}: data-dependent control flow cannot be exported"
    )))
}

/// Graph names for sources, and the parameters the graph uses.
struct Naming<'a> {
    input_names: &'a [String],
    ops: &'a [OpRecord],
    params: HashMap<&'a str, &'a Tensor>,
    used: BTreeMap<String, Tensor>,
}

impl Naming<'_> {
    fn name(&mut self, b: &mut Builder, s: &Source) -> String {
        match s {
            Source::Input(i) => self.input_names[*i].clone(),
            Source::Param(n) => {
                self.used.insert(n.clone(), self.params[n.as_str()].clone());
                n.clone()
            }
            Source::Value(k, o) => value_name(self.ops, *k, *o),
            Source::Const(t) => {
                let n = b.fresh("const");
                b.inits.push(tensor_proto(&n, t));
                n
            }
        }
    }
}

/// Op `k` as both runs saw it, its inputs named; an input that differs in
/// kind between the runs (or a constant whose value differs) is an error.
fn op_view<'a>(
    naming: &mut Naming,
    b: &mut Builder,
    src: &(HashMap<Key, Source>, HashMap<Key, Source>),
    k: usize,
    a: &'a OpRecord,
    bo: &'a OpRecord,
) -> Result<OpView<'a>> {
    let (mut inputs, mut in_dims, mut in_dtypes) = (Vec::new(), Vec::new(), Vec::new());
    for (j, (ta, tb)) in a.inputs.iter().zip(&bo.inputs).enumerate() {
        let (Some(ta), Some(tb)) = (ta, tb) else {
            inputs.push(None);
            in_dims.push(None);
            in_dtypes.push(None);
            continue;
        };
        let (sa, sb) = (resolve(&src.0, ta), resolve(&src.1, tb));
        let agree = match (&sa, &sb) {
            (Source::Input(x), Source::Input(y)) => x == y,
            (Source::Param(x), Source::Param(y)) => x == y,
            (Source::Value(x, p), Source::Value(y, q)) => (x, p) == (y, q),
            (Source::Const(x), Source::Const(y)) => same_values(x, y),
            _ => false,
        };
        if !agree {
            return Err(fail(format!(
                "input {j} of `{}` (op #{k}{}) is a tensor of shape {:?} that changes with the model's inputs but does not come from an op tapir records; build it from the inputs with tensor ops",
                a.name,
                a.in_module(),
                ta.shape()
            )));
        }
        inputs.push(Some(naming.name(b, &sa)));
        in_dims.push(Some((ta.shape().to_vec(), tb.shape().to_vec())));
        in_dtypes.push(Some(ta.dtype()));
    }
    Ok(OpView {
        name: a.name,
        inputs,
        in_dims,
        in_dtypes,
        outputs: (0..a.outputs.len())
            .map(|o| value_name(naming.ops, k, o))
            .collect(),
        out_dims: a
            .outputs
            .iter()
            .zip(&bo.outputs)
            .map(|(x, y)| (x.shape().to_vec(), y.shape().to_vec()))
            .collect(),
        out_dtypes: a.outputs.iter().map(|t| t.dtype()).collect(),
        attrs: &a.attrs,
        attrs_b: &bo.attrs,
    })
}

/// The graph's name for output `o` of op `k`.
fn value_name(ops: &[OpRecord], k: usize, o: usize) -> String {
    match o {
        0 => format!("{}_{k}", ops[k].name),
        _ => format!("{}_{k}:{o}", ops[k].name),
    }
}

/// Ops whose outputs are constants (checked equal in both runs).
fn is_constant_op(name: &str) -> bool {
    matches!(
        name,
        "zeros"
            | "ones"
            | "full"
            | "full_dtype"
            | "arange"
            | "arange_step"
            | "arange_f"
            | "linspace"
            | "eye"
    )
}

/// The input symbol whose sizes in the two runs were `a` and `b`.
fn symbol_for(
    inputs: &(Vec<Tensor>, Vec<Tensor>),
    dynamic: &[Vec<Option<String>>],
    a: usize,
    b: usize,
) -> Option<String> {
    for (i, (ta, tb)) in inputs.0.iter().zip(&inputs.1).enumerate() {
        for (d, sym) in dynamic[i].iter().enumerate() {
            if ta.shape()[d] == a && tb.shape()[d] == b {
                return sym.clone();
            }
        }
    }
    None
}

fn value_info(
    name: &str,
    dtype: DType,
    dims: &Dims,
    sym: impl Fn(usize) -> String,
) -> ValueInfoProto {
    let dim = (0..dims.0.len())
        .map(|d| match dims.0[d] == dims.1[d] {
            true => Dimension {
                dim_value: Some(dims.0[d] as i64),
                dim_param: None,
            },
            false => Dimension {
                dim_value: None,
                dim_param: Some(sym(d)),
            },
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(onnx_type(dtype)),
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
    }
}

/// A tensor's values as an initializer (little-endian `raw_data`).
fn tensor_proto(name: &str, t: &Tensor) -> TensorProto {
    let raw = crate::checkpoint::tensor_bytes(t);
    TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(onnx_type(t.dtype())),
        name: Some(name.into()),
        raw_data: Some(raw),
    }
}

/// Writes beside `path`, reads the file back and decodes it, then renames.
fn write_verified(m: &ModelProto, path: &Path) -> Result<()> {
    let bytes = m.encode_to_vec();
    let tmp = path.with_extension("onnx.tmp");
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::write(&tmp, &bytes).map_err(io)?;
    let back = std::fs::read(&tmp).map_err(io)?;
    if back != bytes || ModelProto::decode(back.as_slice()).ok().as_ref() != Some(m) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Format(format!(
            "{}: the written model did not read back intact",
            tmp.display()
        )));
    }
    std::fs::rename(&tmp, path).map_err(io)
}
