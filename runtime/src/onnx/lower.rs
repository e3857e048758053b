//! One recorded op to ONNX opset 17 nodes. Every op the example models use
//! has a mapping; any other op is an error naming it (never a wrong file).

use super::builder::{Builder, float, int, ints, onnx_type, scalar_proto, string, tensor_attr};
use crate::DType;
use crate::trace::{AttrLookup, Attrs};

mod indexing;
mod layout;
mod math;
mod spatial;
use layout::layout_op;

/// A shape as both traces saw it: equal sizes are static, different ones
/// follow a dynamic dim.
pub(super) type Dims = (Vec<usize>, Vec<usize>);

/// One recorded op, resolved to value names.
pub(super) struct OpView<'a> {
    pub name: &'static str,
    pub inputs: Vec<Option<String>>,
    pub in_dims: Vec<Option<Dims>>,
    pub in_dtypes: Vec<Option<DType>>,
    pub outputs: Vec<String>,
    pub out_dims: Vec<Dims>,
    pub out_dtypes: Vec<DType>,
    pub attrs: &'a Attrs,
    pub attrs_b: &'a Attrs,
}

type Lowered = Result<(), String>;

impl OpView<'_> {
    fn x(&self, i: usize) -> &str {
        self.inputs[i].as_deref().unwrap_or("")
    }
    fn int(&self, k: &str) -> i64 {
        self.attrs.int(k)
    }
    fn float(&self, k: &str) -> f64 {
        self.attrs.float(k)
    }
    fn ints(&self, k: &str) -> Vec<i64> {
        self.attrs.ints(k)
    }
    fn rank(&self, i: usize) -> i64 {
        self.in_dims[i].as_ref().map_or(0, |d| d.0.len() as i64)
    }
    /// A possibly negative dim of input `i`, made non-negative.
    fn axis(&self, d: i64, i: usize) -> i64 {
        if d < 0 { d + self.rank(i) } else { d }
    }
    fn out(&self) -> &str {
        &self.outputs[0]
    }
    fn fail(&self, why: &str) -> Lowered {
        Err(why.to_string())
    }
}

/// `x` cast to `want` when its dtype differs (ONNX ops want one type).
fn cast_to(b: &mut Builder, x: &str, have: Option<DType>, want: DType) -> String {
    match have {
        Some(h) if h != want => b.tmp("Cast", &[x], vec![int("to", onnx_type(want) as i64)]),
        _ => x.to_string(),
    }
}

/// Emits the nodes for `op`, or says why it cannot be exported.
pub(super) fn lower(b: &mut Builder, op: &OpView) -> Lowered {
    if let Some(done) = layout_op(b, op) {
        return done;
    }
    let out = op.out();
    let unary = |b: &mut Builder, onnx: &str| {
        b.node(onnx, &[op.x(0)], &[out], vec![]);
        Ok(())
    };
    match op.name {
        "relu" => unary(b, "Relu"),
        "tanh" => unary(b, "Tanh"),
        "sigmoid" => unary(b, "Sigmoid"),
        "exp" => unary(b, "Exp"),
        "log" => unary(b, "Log"),
        "sqrt" => unary(b, "Sqrt"),
        "neg" => unary(b, "Neg"),
        "abs" => unary(b, "Abs"),
        "erf" => unary(b, "Erf"),
        "sin" => unary(b, "Sin"),
        "cos" => unary(b, "Cos"),
        "tan" => unary(b, "Tan"),
        "asin" => unary(b, "Asin"),
        "acos" => unary(b, "Acos"),
        "atan" => unary(b, "Atan"),
        "sinh" => unary(b, "Sinh"),
        "cosh" => unary(b, "Cosh"),
        "asinh" => unary(b, "Asinh"),
        "acosh" => unary(b, "Acosh"),
        "atanh" => unary(b, "Atanh"),
        "expm1" | "log1p" | "log2" | "log10" | "exp2" | "logit" | "hypot" | "sinc" | "fmod"
        | "remainder" => math::lower(b, op),
        "sign" => unary(b, "Sign"),
        "reciprocal" => unary(b, "Reciprocal"),
        "logical_not" => unary(b, "Not"),
        "detach" | "contiguous" => unary(b, "Identity"),
        "dropout" if op.int("training") == 0 => unary(b, "Identity"),
        "softplus" => unary(b, "Softplus"),
        // ONNX rounds floats only; on integers these are the identity.
        "floor" | "ceil" | "round" | "trunc" if !op.out_dtypes[0].is_float() => {
            unary(b, "Identity")
        }
        "floor" => unary(b, "Floor"),
        "ceil" => unary(b, "Ceil"),
        "round" => unary(b, "Round"),
        "trunc" => {
            // No Trunc in opset 17: ceil below zero, floor elsewhere.
            let t = op.out_dtypes[0];
            let zero = b.scalar(0.0, t);
            let neg = b.tmp("Less", &[op.x(0), &zero], vec![]);
            let up = b.tmp("Ceil", &[op.x(0)], vec![]);
            let down = b.tmp("Floor", &[op.x(0)], vec![]);
            b.node("Where", &[&neg, &up, &down], &[out], vec![]);
            Ok(())
        }
        "rsqrt" => {
            let s = b.tmp("Sqrt", &[op.x(0)], vec![]);
            b.node("Reciprocal", &[&s], &[out], vec![]);
            Ok(())
        }
        "square" => {
            b.node("Mul", &[op.x(0), op.x(0)], &[out], vec![]);
            Ok(())
        }
        "silu" => {
            let s = b.tmp("Sigmoid", &[op.x(0)], vec![]);
            b.node("Mul", &[op.x(0), &s], &[out], vec![]);
            Ok(())
        }
        "leaky_relu" => {
            b.node(
                "LeakyRelu",
                &[op.x(0)],
                &[out],
                vec![float("alpha", op.float("slope"))],
            );
            Ok(())
        }
        "gelu" => gelu(b, op),
        "gelu_tanh" => gelu_tanh(b, op),
        "add" | "sub" | "mul" | "div" | "pow" | "maximum" | "minimum" | "logical_and"
        | "logical_or" | "eq" | "ne" | "lt" | "le" | "gt" | "ge" => binary(b, op),
        "where_" => {
            let t = op.out_dtypes[0];
            let x = cast_to(b, op.x(1), op.in_dtypes[1], t);
            let y = cast_to(b, op.x(2), op.in_dtypes[2], t);
            b.node("Where", &[op.x(0), &x, &y], &[out], vec![]);
            Ok(())
        }
        "masked_fill" => {
            let v = b.scalar(op.float("value"), op.out_dtypes[0]);
            b.node("Where", &[op.x(1), &v, op.x(0)], &[out], vec![]);
            Ok(())
        }
        "powf" => {
            let e = b.scalar(op.float("exponent"), op.out_dtypes[0]);
            b.node("Pow", &[op.x(0), &e], &[out], vec![]);
            Ok(())
        }
        "clamp" | "clamp_min" | "clamp_max" => {
            let t = op.out_dtypes[0];
            let lo = match op.name != "clamp_max" {
                true => b.scalar(op.float("min"), t),
                false => String::new(),
            };
            let hi = match op.name != "clamp_min" {
                true => b.scalar(op.float("max"), t),
                false => String::new(),
            };
            b.node("Clip", &[op.x(0), &lo, &hi], &[out], vec![]);
            Ok(())
        }
        "matmul" | "mm" | "bmm" => {
            b.node("MatMul", &[op.x(0), op.x(1)], &[out], vec![]);
            Ok(())
        }
        "linear" => linear(b, op),
        "layer_norm" => layer_norm(b, op),
        "add_layer_norm" => add_layer_norm(b, op),
        "softmax" | "log_softmax" => {
            let onnx = if op.name == "softmax" {
                "Softmax"
            } else {
                "LogSoftmax"
            };
            b.node(onnx, &[op.x(0)], &[out], vec![int("axis", op.int("dim"))]);
            Ok(())
        }
        "pad" => {
            // PyTorch lists (before, after) from the last dim backward;
            // ONNX every begin, then every end, from the first dim.
            let rank = op.rank(0) as usize;
            let pairs = op.ints("pads");
            let mut pads = vec![0i64; 2 * rank];
            for (k, pair) in pairs.chunks(2).enumerate() {
                let d = rank - 1 - k;
                pads[d] = pair[0];
                pads[rank + d] = pair[1];
            }
            let mode = match op.int("mode") {
                0 => "constant",
                1 => "reflect",
                2 => "edge",
                _ => return op.fail("circular padding is ONNX's `wrap`, which opset 17 lacks"),
            };
            let pads = b.vec_i64(&pads);
            let value = b.scalar(op.float("value"), op.out_dtypes[0]);
            b.node(
                "Pad",
                &[op.x(0), &pads, &value],
                &[out],
                vec![string("mode", mode)],
            );
            Ok(())
        }
        "cumsum" => {
            let x = cast_to(b, op.x(0), op.in_dtypes[0], op.out_dtypes[0]);
            let axis = b.const_i64(&[op.axis(op.int("dim"), 0)], vec![]);
            b.node("CumSum", &[&x, &axis], &[out], vec![]);
            Ok(())
        }
        "sort" | "topk" => {
            let axis = op.axis(op.int("dim"), 0);
            let k = if op.name == "topk" {
                b.vec_i64(&[op.int("k")])
            } else {
                // The whole dim, read from the shape (it may be dynamic).
                let shape = b.tmp("Shape", &[op.x(0)], vec![]);
                let (from, to) = (b.vec_i64(&[axis]), b.vec_i64(&[axis + 1]));
                b.tmp("Slice", &[&shape, &from, &to], vec![])
            };
            let largest = if op.name == "topk" {
                op.int("largest")
            } else {
                op.int("descending")
            };
            let outs: Vec<&str> = op.outputs.iter().map(|s| s.as_str()).collect();
            b.node(
                "TopK",
                &[op.x(0), &k],
                &outs,
                vec![int("axis", axis), int("largest", largest), int("sorted", 1)],
            );
            Ok(())
        }
        "conv2d" | "conv_transpose2d" | "conv3d" | "conv_transpose3d" => spatial::conv(b, op),
        "var_dims" | "std_dims" => variance(b, op),
        "interpolate" => spatial::resize(b, op),
        "max_pool2d" | "avg_pool2d" | "max_pool3d" | "avg_pool3d" => spatial::pool(b, op),
        "embedding" => {
            b.node("Gather", &[op.x(0), op.x(1)], &[out], vec![int("axis", 0)]);
            Ok(())
        }
        "gather" | "scatter" | "scatter_scalar" | "scatter_add" | "scatter_reduce"
        | "index_add" | "index_copy" | "index_fill" => indexing::lower(b, op),
        "index_select" => {
            let axis = op.axis(op.int("dim"), 0);
            b.node(
                "Gather",
                &[op.x(0), op.x(1)],
                &[out],
                vec![int("axis", axis)],
            );
            Ok(())
        }
        "to_dtype" | "half" | "float" | "bfloat16" => {
            let to = onnx_type(op.out_dtypes[0]) as i64;
            b.node("Cast", &[op.x(0)], &[out], vec![int("to", to)]);
            Ok(())
        }
        "sum" | "mean" | "sum_dims" | "sum_dim" | "mean_dims" | "mean_dim" | "amax_dim"
        | "amin_dim" | "prod" | "prod_dim" => reduce(b, op),
        "triu" | "tril" => {
            let k = b.const_i64(&[op.int("k")], vec![]);
            let upper = (op.name == "triu") as i64;
            b.node("Trilu", &[op.x(0), &k], &[out], vec![int("upper", upper)]);
            Ok(())
        }
        "causal_mask" => {
            add_causal_mask(b, op.x(0), op.out(), op.out_dtypes[0]);
            Ok(())
        }
        "scaled_dot_product_attention" => sdpa(b, op),
        "batch_norm" => batch_norm(b, op),
        "global_avg_pool2d" => {
            b.node("GlobalAveragePool", &[op.x(0)], &[out], vec![]);
            Ok(())
        }
        "zeros_like" | "ones_like" | "full_like" => {
            let v = match op.name {
                "zeros_like" => 0.0,
                "ones_like" => 1.0,
                _ => op.float("value"),
            };
            let shape = b.tmp("Shape", &[op.x(0)], vec![]);
            let value = tensor_attr("value", scalar_proto(v, op.out_dtypes[0], vec![1]));
            b.node("ConstantOfShape", &[&shape], &[out], vec![value]);
            Ok(())
        }
        name if name.ends_with('_') => op.fail("it changes a tensor in place"),
        name if name.starts_with("rand") || name.starts_with("bernoulli") => {
            op.fail("it draws random numbers")
        }
        _ => op.fail("it has no ONNX opset 17 mapping in tapir yet"),
    }
}

fn binary(b: &mut Builder, op: &OpView) -> Lowered {
    let onnx = match op.name {
        "add" => "Add",
        "sub" => "Sub",
        "mul" => "Mul",
        "div" => "Div",
        "pow" => "Pow",
        "maximum" => "Max",
        "minimum" => "Min",
        "logical_and" => "And",
        "logical_or" => "Or",
        "eq" | "ne" => "Equal",
        "lt" => "Less",
        "le" => "LessOrEqual",
        "gt" => "Greater",
        _ => "GreaterOrEqual",
    };
    // Both operands in the promoted dtype (the output's, or for
    // comparisons the wider of the two).
    let common = match op.out_dtypes[0] {
        DType::Bool if !matches!(op.name, "logical_and" | "logical_or") => {
            // As eager: the result type, where a 0-d operand of the same
            // category does not widen.
            let operand = |i: usize| {
                let ndim = op.in_dims[i].as_ref().map_or(0, |d| d.0.len());
                (op.in_dtypes[i].unwrap_or(DType::F32), ndim)
            };
            DType::result_type_of(operand(0), operand(1))
        }
        DType::Bool => DType::Bool,
        t => t,
    };
    let x = cast_to(b, op.x(0), op.in_dtypes[0], common);
    let y = cast_to(b, op.x(1), op.in_dtypes[1], common);
    if op.name == "ne" {
        let e = b.tmp("Equal", &[&x, &y], vec![]);
        b.node("Not", &[&e], &[op.out()], vec![]);
    } else {
        b.node(onnx, &[&x, &y], &[op.out()], vec![]);
    }
    Ok(())
}

/// `0.5 x (1 + erf(x / √2))` (the Gelu op is opset 20).
fn gelu(b: &mut Builder, op: &OpView) -> Lowered {
    let t = op.out_dtypes[0];
    let (x, out) = (op.x(0), op.out());
    let sqrt2 = b.scalar(std::f64::consts::SQRT_2, t);
    let (one, half) = (b.scalar(1.0, t), b.scalar(0.5, t));
    let d = b.tmp("Div", &[x, &sqrt2], vec![]);
    let e = b.tmp("Erf", &[&d], vec![]);
    let p = b.tmp("Add", &[&e, &one], vec![]);
    let m = b.tmp("Mul", &[x, &p], vec![]);
    b.node("Mul", &[&m, &half], &[out], vec![]);
    Ok(())
}

/// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
fn gelu_tanh(b: &mut Builder, op: &OpView) -> Lowered {
    let t = op.out_dtypes[0];
    let (x, out) = (op.x(0), op.out());
    let c = b.scalar((2.0 / std::f64::consts::PI).sqrt(), t);
    let k = b.scalar(0.044715, t);
    let (one, half, three) = (b.scalar(1.0, t), b.scalar(0.5, t), b.scalar(3.0, t));
    let x3 = b.tmp("Pow", &[x, &three], vec![]);
    let kx3 = b.tmp("Mul", &[&x3, &k], vec![]);
    let s = b.tmp("Add", &[x, &kx3], vec![]);
    let cs = b.tmp("Mul", &[&s, &c], vec![]);
    let th = b.tmp("Tanh", &[&cs], vec![]);
    let p = b.tmp("Add", &[&th, &one], vec![]);
    let m = b.tmp("Mul", &[x, &p], vec![]);
    b.node("Mul", &[&m, &half], &[out], vec![]);
    Ok(())
}

/// Gemm for 2-D inputs; MatMul with the transposed weight plus Add above.
fn linear(b: &mut Builder, op: &OpView) -> Lowered {
    let (x, w, out) = (op.x(0), op.x(1), op.out());
    let bias = op.inputs.get(2).and_then(|v| v.as_deref());
    if op.rank(0) == 2 {
        let mut ins = vec![x, w];
        ins.extend(bias);
        b.node("Gemm", &ins, &[out], vec![int("transB", 1)]);
        return Ok(());
    }
    let wt = b.tmp("Transpose", &[w], vec![ints("perm", &[1, 0])]);
    match bias {
        Some(bias) => {
            let m = b.tmp("MatMul", &[x, &wt], vec![]);
            b.node("Add", &[&m, bias], &[out], vec![]);
        }
        None => b.node("MatMul", &[x, &wt], &[out], vec![]),
    }
    Ok(())
}

/// A constant of `dims` filled with `v` in `dtype`.
fn filled(b: &mut Builder, v: f64, dtype: DType, dims: Vec<i64>) -> String {
    let numel: i64 = dims.iter().product();
    let name = b.fresh("const");
    let mut p = scalar_proto(v, dtype, dims);
    let one = p.raw_data.take().unwrap_or_default();
    p.raw_data = Some(one.repeat(numel as usize));
    p.name = Some(name.clone());
    b.inits.push(p);
    name
}

/// Eval-mode BatchNorm (running statistics) as BatchNormalization.
fn batch_norm(b: &mut Builder, op: &OpView) -> Lowered {
    if op.inputs.get(1).is_none_or(|v| v.is_none()) {
        return op.fail(
            "BatchNorm without running statistics (track_running_stats false) normalises by each batch's statistics, which BatchNormalization cannot",
        );
    }
    if op.int("training") != 0 {
        return op.fail("BatchNorm in training mode uses batch statistics; call eval() first");
    }
    let c = op.in_dims[0].as_ref().ok_or("no input")?.0[1] as i64;
    let t = op.out_dtypes[0];
    let scale = match op.inputs.get(3).and_then(|v| v.clone()) {
        Some(w) => w,
        None => filled(b, 1.0, t, vec![c]),
    };
    let bias = match op.inputs.get(4).and_then(|v| v.clone()) {
        Some(v) => v,
        None => filled(b, 0.0, t, vec![c]),
    };
    b.node(
        "BatchNormalization",
        &[op.x(0), &scale, &bias, op.x(1), op.x(2)],
        &[op.out()],
        vec![float("epsilon", op.float("eps"))],
    );
    Ok(())
}

fn layer_norm(b: &mut Builder, op: &OpView) -> Lowered {
    let affine = (
        op.inputs.get(1).cloned().flatten(),
        op.inputs.get(2).cloned().flatten(),
    );
    layer_norm_node(b, op, op.x(0), affine, op.out())
}

/// The fused residual add and LayerNorm as its two nodes: Add to the first
/// output, LayerNormalization of it to the second.
fn add_layer_norm(b: &mut Builder, op: &OpView) -> Lowered {
    let sum = op.outputs[0].clone();
    b.node("Add", &[op.x(0), op.x(1)], &[&sum], vec![]);
    let affine = (
        op.inputs.get(2).cloned().flatten(),
        op.inputs.get(3).cloned().flatten(),
    );
    layer_norm_node(b, op, &sum, affine, &op.outputs[1])
}

/// LayerNormalization of `x` (shaped as the op's first input) over the op's
/// trailing `axes`, with the given scale and bias or ones and zeros.
fn layer_norm_node(
    b: &mut Builder,
    op: &OpView,
    x: &str,
    (scale, bias): (Option<String>, Option<String>),
    out: &str,
) -> Lowered {
    let n = op.int("axes");
    let input = op.in_dims[0].as_ref().ok_or("no input")?;
    let norm: Vec<i64> = input.0[input.0.len() - n as usize..]
        .iter()
        .map(|&d| d as i64)
        .collect();
    let t = op.out_dtypes[0];
    let scale = scale.unwrap_or_else(|| filled(b, 1.0, t, norm.clone()));
    let bias = bias.unwrap_or_else(|| filled(b, 0.0, t, norm.clone()));
    b.node(
        "LayerNormalization",
        &[x, &scale, &bias],
        &[out],
        vec![int("axis", -n), float("epsilon", op.float("eps"))],
    );
    Ok(())
}

fn reduce(b: &mut Builder, op: &OpView) -> Lowered {
    let all = matches!(op.name, "sum" | "mean" | "prod");
    let axes: Vec<i64> = match op.name {
        "amax_dim" | "amin_dim" | "prod_dim" => vec![op.axis(op.int("dim"), 0)],
        _ => op.ints("dims").iter().map(|&d| op.axis(d, 0)).collect(),
    };
    let keep = int("keepdims", if all { 0 } else { op.int("keepdim") });
    let out = op.out();
    match op.name {
        // ReduceSum takes its axes as an input from opset 13.
        "sum" | "sum_dims" | "sum_dim" => {
            let mut ins = vec![op.x(0).to_string()];
            if !all {
                ins.push(b.vec_i64(&axes));
            }
            let ins: Vec<&str> = ins.iter().map(|s| s.as_str()).collect();
            b.node("ReduceSum", &ins, &[out], vec![keep]);
        }
        // The others still take an attribute in opset 17.
        _ => {
            // `prod` multiplies bools and bytes as int64, as it returns them.
            let mut x = op.x(0).to_string();
            if op.in_dtypes[0] != Some(op.out_dtypes[0]) {
                let to = onnx_type(op.out_dtypes[0]) as i64;
                x = b.tmp("Cast", &[&x], vec![int("to", to)]);
            }
            let onnx = match op.name {
                "amax_dim" => "ReduceMax",
                "amin_dim" => "ReduceMin",
                "prod" | "prod_dim" => "ReduceProd",
                _ => "ReduceMean",
            };
            let mut attrs = vec![keep];
            if !all {
                attrs.push(ints("axes", &axes));
            }
            b.node(onnx, &[&x], &[out], attrs);
        }
    }
    Ok(())
}

/// `var_dims` / `std_dims` as their formula (opset 17 has no variance):
/// the mean square about the mean, times `n / (n - correction)` when there
/// is a correction, for which the reduced dims must be static.
fn variance(b: &mut Builder, op: &OpView) -> Lowered {
    let (shape, other) = op.in_dims[0].as_ref().ok_or("no input shape")?;
    let mut axes: Vec<i64> = op.ints("dims").iter().map(|&d| op.axis(d, 0)).collect();
    if axes.is_empty() {
        axes = (0..op.rank(0)).collect();
    }
    let correction = op.int("correction");
    let mut n = 1usize;
    for &ax in &axes {
        if correction != 0 && shape[ax as usize] != other[ax as usize] {
            return op.fail("its correction needs the count of a dynamic dim");
        }
        n *= shape[ax as usize];
    }
    let along = ints("axes", &axes);
    let mean = b.tmp(
        "ReduceMean",
        &[op.x(0)],
        vec![int("keepdims", 1), along.clone()],
    );
    let centered = b.tmp("Sub", &[op.x(0), &mean], vec![]);
    let squares = b.tmp("Mul", &[&centered, &centered], vec![]);
    let keep = int("keepdims", op.int("keepdim"));
    let var_out = match op.name {
        "var_dims" => op.out().to_string(),
        _ => b.fresh("var"),
    };
    if correction == 0 {
        b.node("ReduceMean", &[&squares], &[&var_out], vec![keep, along]);
    } else {
        let mean_square = b.tmp("ReduceMean", &[&squares], vec![keep, along]);
        let denom = (n as f64 - correction as f64).max(0.0);
        let scale = b.scalar(n as f64 / denom, op.out_dtypes[0]);
        b.node("Mul", &[&mean_square, &scale], &[&var_out], vec![]);
    }
    if op.name == "std_dims" {
        b.node("Sqrt", &[&var_out], &[op.out()], vec![]);
    }
    Ok(())
}

/// Scores `[.., L, S]` plus a `[L, S]` mask of -inf above the diagonal,
/// built from the scores' own shape so L and S may vary.
fn add_causal_mask(b: &mut Builder, scores: &str, out: &str, t: DType) {
    let shape = b.tmp("Shape", &[scores], vec![]);
    let (starts, ends) = (b.vec_i64(&[-2]), b.vec_i64(&[i64::MAX]));
    let ls = b.tmp("Slice", &[&shape, &starts, &ends], vec![]);
    let value = tensor_attr("value", scalar_proto(f64::NEG_INFINITY, t, vec![1]));
    let full = b.tmp("ConstantOfShape", &[&ls], vec![value]);
    let one = b.const_i64(&[1], vec![]);
    let mask = b.tmp("Trilu", &[&full, &one], vec![int("upper", 1)]);
    b.node("Add", &[scores, &mask], &[out], vec![]);
}

/// The fused attention as its composition: `softmax(q kᵀ · scale [+ causal
/// mask]) v` (opset 17 has no attention op).
fn sdpa(b: &mut Builder, op: &OpView) -> Lowered {
    let t = op.out_dtypes[0];
    let n = op.rank(1);
    let mut perm: Vec<i64> = (0..n).collect();
    perm.swap(n as usize - 2, n as usize - 1);
    let kt = b.tmp("Transpose", &[op.x(1)], vec![ints("perm", &perm)]);
    let qk = b.tmp("MatMul", &[op.x(0), &kt], vec![]);
    let scale = b.scalar(op.float("scale"), t);
    let mut scores = b.tmp("Mul", &[&qk, &scale], vec![]);
    if op.int("is_causal") != 0 {
        let masked = b.fresh("masked_scores");
        add_causal_mask(b, &scores, &masked, t);
        scores = masked;
    }
    let p = b.tmp("Softmax", &[&scores], vec![int("axis", -1)]);
    b.node("MatMul", &[&p, op.x(2)], &[op.out()], vec![]);
    Ok(())
}
