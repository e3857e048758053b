//! `gather` and the scatters as ONNX's `GatherElements` and
//! `ScatterElements`: `scatter`, `scatter_scalar`, `scatter_add`,
//! `scatter_reduce` (sum, prod and mean, with or without `self`; opset 17
//! has no max or min reduction) and the row forms `index_add`,
//! `index_copy`, `index_fill` (their 1-D index expanded along the dim).
//! Shapes are read in the graph (`Shape`), so dynamic dims stay dynamic.

use super::{Lowered, OpView};
use crate::DType;
use crate::onnx::builder::{Builder, int, scalar_proto, string, tensor_attr};

/// Writes `op` (one of the ops above) as ONNX nodes.
pub(super) fn lower(b: &mut Builder, op: &OpView) -> Lowered {
    let (x, out, t) = (op.x(0), op.out(), op.out_dtypes[0]);
    let axis = op.axis(op.int("dim"), 0);
    match op.name {
        "gather" => {
            b.node(
                "GatherElements",
                &[x, op.x(1)],
                &[out],
                vec![int("axis", axis)],
            );
        }
        "scatter" | "scatter_add" => {
            let src = index_extent(b, op, 2);
            let how = if op.name == "scatter" { "none" } else { "add" };
            scatter_to(b, [x, op.x(1), &src], axis, how, out);
        }
        "scatter_scalar" => {
            let value = filled_like(b, op.x(1), op.float("value"), t);
            scatter_to(b, [x, op.x(1), &value], axis, "none", out);
        }
        "scatter_reduce" => return reduce(b, op, axis),
        "index_add" | "index_copy" => {
            let source_shape = b_shape(b, op.x(2));
            let at = rows_index(b, op, source_shape);
            let source = if op.name == "index_add" && op.float("alpha") != 1.0 {
                let alpha = b.scalar(op.float("alpha"), t);
                b.tmp("Mul", &[op.x(2), &alpha], vec![])
            } else {
                op.x(2).to_string()
            };
            let how = if op.name == "index_add" {
                "add"
            } else {
                "none"
            };
            scatter_to(b, [x, &at, &source], axis, how, out);
        }
        "index_fill" => {
            // The rows' shape: x's with the index's length along the dim.
            let x_shape = b_shape(b, x);
            let at_dim = b.vec_i64(&[axis]);
            let len = b_shape(b, op.x(1));
            let len = if op.rank(1) == 0 {
                b.vec_i64(&[1])
            } else {
                len
            };
            let rows = b.tmp(
                "ScatterElements",
                &[&x_shape, &at_dim, &len],
                vec![int("axis", 0)],
            );
            let at = rows_index(b, op, rows.clone());
            let value = tensor_attr("value", scalar_proto(op.float("value"), t, vec![1]));
            let values = b.tmp("ConstantOfShape", &[&rows], vec![value]);
            scatter_to(b, [x, &at, &values], axis, "none", out);
        }
        _ => return op.fail("it is not an indexing op"),
    }
    Ok(())
}

/// `scatter_reduce`: sum and prod are ScatterElements reductions (after
/// the places reached are set to the identity when `self` is excluded);
/// the mean divides the sum by the count of values each place got.
fn reduce(b: &mut Builder, op: &OpView, axis: i64) -> Lowered {
    let (x, out, t) = (op.x(0), op.out(), op.out_dtypes[0]);
    let reduce = crate::ScatterReduce::ALL[op.int("reduce") as usize];
    let include_self = op.int("include_self") != 0;
    let (how, identity) = match reduce {
        crate::ScatterReduce::Sum | crate::ScatterReduce::Mean => ("add", 0.0),
        crate::ScatterReduce::Prod => ("mul", 1.0),
        other => {
            return op.fail(&format!(
                "scatter_reduce's `{}` is ScatterElements' max/min reduction, which is opset 18",
                other.name()
            ));
        }
    };
    if reduce == crate::ScatterReduce::Mean && !t.is_float() {
        return op.fail("an integer mean divides with floor, which ONNX's Div does not");
    }
    let index = op.x(1);
    let src = index_extent(b, op, 2);
    let base = if include_self {
        x.to_string()
    } else {
        let identity = filled_like(b, index, identity, t);
        let s = b.fresh("scatter_reduce_base");
        scatter_to(b, [x, index, &identity], axis, "none", &s);
        s
    };
    if reduce != crate::ScatterReduce::Mean {
        scatter_to(b, [&base, index, &src], axis, how, out);
        return Ok(());
    }
    let sum = b.fresh("scatter_reduce_sum");
    scatter_to(b, [&base, index, &src], axis, "add", &sum);
    let zero = tensor_attr("value", scalar_proto(0.0, t, vec![1]));
    let x_shape = b_shape(b, x);
    let zeros = b.tmp("ConstantOfShape", &[&x_shape], vec![zero]);
    let ones = filled_like(b, index, 1.0, t);
    let count = b.fresh("scatter_reduce_count");
    scatter_to(b, [&zeros, index, &ones], axis, "add", &count);
    let one = b.scalar(1.0, t);
    let count = if include_self {
        b.tmp("Add", &[&count, &one], vec![])
    } else {
        b.tmp("Max", &[&count, &one], vec![])
    };
    b.node("Div", &[&sum, &count], &[out], vec![]);
    Ok(())
}

fn scatter_to(b: &mut Builder, [data, index, updates]: [&str; 3], axis: i64, how: &str, out: &str) {
    let attrs = vec![int("axis", axis), string("reduction", how)];
    b.node("ScatterElements", &[data, index, updates], &[out], attrs);
}

fn b_shape(b: &mut Builder, x: &str) -> String {
    b.tmp("Shape", &[x], vec![])
}

/// A tensor of `value` shaped like `like` (an index).
fn filled_like(b: &mut Builder, like: &str, value: f64, t: DType) -> String {
    let shape = b_shape(b, like);
    let value = tensor_attr("value", scalar_proto(value, t, vec![1]));
    b.tmp("ConstantOfShape", &[&shape], vec![value])
}

/// Input `i` (a source) cut to the index's extent when their shapes
/// differ (ScatterElements wants them equal; tapir reads only that part).
fn index_extent(b: &mut Builder, op: &OpView, i: usize) -> String {
    if op.in_dims[i] == op.in_dims[1] {
        return op.x(i).to_string();
    }
    let rank = op.rank(1);
    let starts = b.vec_i64(&vec![0; rank as usize]);
    let ends = b_shape(b, op.x(1));
    let axes = b.vec_i64(&(0..rank).collect::<Vec<_>>());
    b.tmp("Slice", &[op.x(i), &starts, &ends, &axes], vec![])
}

/// A row op's 1-D index laid along the dim and expanded to `shape`.
fn rows_index(b: &mut Builder, op: &OpView, shape: String) -> String {
    let rank = op.rank(0) as usize;
    let axis = op.axis(op.int("dim"), 0) as usize;
    let mut along = vec![1i64; rank];
    along[axis] = -1;
    let along = b.vec_i64(&along);
    let column = b.tmp("Reshape", &[op.x(1), &along], vec![]);
    b.tmp("Expand", &[&column, &shape], vec![])
}
