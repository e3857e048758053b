//! The layout family's ONNX lowering: reshapes, transposes, slices,
//! splits and joins.

use super::{Dims, Lowered, OpView};
use crate::onnx::builder::{Builder, int, ints};
use crate::trace::{Attr, AttrLookup, Attrs};

/// The target shape for a Reshape from `input` to `output`: static sizes as
/// numbers, a dim that follows the input's at the same place as 0, and at
/// most one other dynamic dim as -1.
fn reshape_target(input: &Dims, output: &Dims) -> Result<Vec<i64>, String> {
    let mut inferred = false;
    let mut target = Vec::new();
    for (i, (&a, &b)) in output.0.iter().zip(&output.1).enumerate() {
        if a == b {
            target.push(a as i64);
        } else if input.0.get(i) == Some(&a) && input.1.get(i) == Some(&b) {
            target.push(0);
        } else if !inferred {
            inferred = true;
            target.push(-1);
        } else {
            return Err(format!(
                "the new shape {:?} has more than one dynamic dim that is not copied from the input {:?}",
                output.0, input.0
            ));
        }
    }
    // 0 copies the input's size; a static 0 cannot be told apart from it.
    if output.0.contains(&0) {
        return Err("a reshape to an empty dim".into());
    }
    Ok(target)
}

/// Reshapes, transposes, slices, splits and joins; `None` for other ops.
pub(super) fn layout_op(b: &mut Builder, op: &OpView) -> Option<Lowered> {
    const LAYOUT: &[&str] = &[
        "reshape",
        "view",
        "flatten",
        "flatten_all",
        "unflatten",
        "squeeze",
        "squeeze_dim",
        "unsqueeze",
        "transpose",
        "t",
        "permute",
        "narrow",
        "slice",
        "select",
        "chunk",
        "split",
        "tensor_split",
        "unbind",
        "cat",
        "stack",
        "expand",
        "broadcast_to",
        "flip",
        "roll",
        "repeat",
        "unfold",
    ];
    LAYOUT.contains(&op.name).then(|| layout(b, op))
}

fn layout(b: &mut Builder, op: &OpView) -> Lowered {
    let out = op.out();
    match op.name {
        "reshape" | "view" | "flatten" | "flatten_all" | "unflatten" | "squeeze"
        | "squeeze_dim" | "unsqueeze" => {
            let input = op.in_dims[0].as_ref().ok_or("no input")?;
            let target = reshape_target(input, &op.out_dims[0])?;
            let shape = b.vec_i64(&target);
            b.node("Reshape", &[op.x(0), &shape], &[out], vec![]);
            Ok(())
        }
        "transpose" | "t" | "permute" => {
            let n = op.rank(0);
            let perm: Vec<i64> = match op.name {
                "permute" => op.ints("perm").iter().map(|&d| op.axis(d, 0)).collect(),
                _ => {
                    let d = match op.name {
                        "t" => vec![0, n - 1],
                        _ => op.ints("dims"),
                    };
                    let (x, y) = (op.axis(d[0], 0), op.axis(d[1], 0));
                    let mut p: Vec<i64> = (0..n).collect();
                    p.swap(x as usize, y as usize);
                    p
                }
            };
            b.node("Transpose", &[op.x(0)], &[out], vec![ints("perm", &perm)]);
            Ok(())
        }
        "narrow" | "slice" => slice(b, op),
        "select" => {
            let axis = op.axis(op.int("dim"), 0);
            let idx = b.const_i64(&[op.int("index")], vec![]);
            b.node("Gather", &[op.x(0), &idx], &[out], vec![int("axis", axis)]);
            Ok(())
        }
        "chunk" | "split" | "tensor_split" => {
            let axis = op.axis(op.int("dim"), 0) as usize;
            let sizes: Vec<i64> = op.out_dims.iter().map(|d| d.0[axis] as i64).collect();
            if op.out_dims.iter().any(|d| d.0[axis] != d.1[axis]) {
                return op.fail("splitting along a dynamic dim");
            }
            let split = b.vec_i64(&sizes);
            let outs: Vec<&str> = op.outputs.iter().map(|s| s.as_str()).collect();
            b.node(
                "Split",
                &[op.x(0), &split],
                &outs,
                vec![int("axis", axis as i64)],
            );
            Ok(())
        }
        "unbind" => {
            // Split into pieces of one, then drop the axis from each.
            let axis = op.axis(op.int("dim"), 0);
            let input = op.in_dims[0].as_ref().ok_or("no input")?;
            if input.0[axis as usize] != input.1[axis as usize] {
                return op.fail("unbinding a dynamic dim");
            }
            let n = op.outputs.len();
            let ones = b.vec_i64(&vec![1; n]);
            let parts: Vec<String> = (0..n).map(|_| b.fresh("unbind")).collect();
            let refs: Vec<&str> = parts.iter().map(|s| s.as_str()).collect();
            b.node("Split", &[op.x(0), &ones], &refs, vec![int("axis", axis)]);
            let ax = b.vec_i64(&[axis]);
            for (part, out) in parts.iter().zip(&op.outputs) {
                b.node("Squeeze", &[part, &ax], &[out], vec![]);
            }
            Ok(())
        }
        "cat" => {
            let axis = op.axis(op.int("dim"), 0);
            let xs: Vec<&str> = (0..op.inputs.len()).map(|i| op.x(i)).collect();
            b.node("Concat", &xs, &[out], vec![int("axis", axis)]);
            Ok(())
        }
        "stack" => {
            let d = op.int("dim");
            let axis = if d < 0 { d + op.rank(0) + 1 } else { d };
            let ax = b.vec_i64(&[axis]);
            let xs: Vec<String> = (0..op.inputs.len())
                .map(|i| b.tmp("Unsqueeze", &[op.x(i), &ax], vec![]))
                .collect();
            let xs: Vec<&str> = xs.iter().map(|s| s.as_str()).collect();
            b.node("Concat", &xs, &[out], vec![int("axis", axis)]);
            Ok(())
        }
        "expand" | "broadcast_to" => {
            let input = op.in_dims[0].as_ref().ok_or("no input")?;
            let o = &op.out_dims[0];
            let lead = o.0.len() - input.0.len();
            let mut target = Vec::new();
            for i in 0..o.0.len() {
                let same = i >= lead && input.0[i - lead] == o.0[i] && input.1[i - lead] == o.1[i];
                if same {
                    target.push(1);
                } else if o.0[i] == o.1[i] {
                    target.push(o.0[i] as i64);
                } else {
                    return op.fail("expanding a size-1 dim to a dynamic size");
                }
            }
            let shape = b.vec_i64(&target);
            b.node("Expand", &[op.x(0), &shape], &[out], vec![]);
            Ok(())
        }
        "flip" => {
            let axes: Vec<i64> = op.ints("dims").iter().map(|&d| op.axis(d, 0)).collect();
            if axes.is_empty() {
                b.node("Identity", &[op.x(0)], &[out], vec![]);
                return Ok(());
            }
            let k = axes.len();
            let starts = b.vec_i64(&vec![-1; k]);
            let ends = b.vec_i64(&vec![i64::MIN; k]);
            let axes = b.vec_i64(&axes);
            let steps = b.vec_i64(&vec![-1; k]);
            b.node(
                "Slice",
                &[op.x(0), &starts, &ends, &axes, &steps],
                &[out],
                vec![],
            );
            Ok(())
        }
        "roll" => roll(b, op),
        "unfold" => unfold(b, op),
        "repeat" => {
            let repeats = op.ints("repeats");
            let lead = repeats.len() as i64 - op.rank(0);
            let x = if lead > 0 {
                let axes = b.vec_i64(&(0..lead).collect::<Vec<_>>());
                b.tmp("Unsqueeze", &[op.x(0), &axes], vec![])
            } else {
                op.x(0).to_string()
            };
            let reps = b.vec_i64(&repeats);
            b.node("Tile", &[&x, &reps], &[out], vec![]);
            Ok(())
        }
        _ => op.fail("not a layout op"),
    }
}

/// roll: per dim, the last `s` elements (a Slice) joined before the rest;
/// with no dims, the same on the flattened tensor, reshaped back.
fn roll(b: &mut Builder, op: &OpView) -> Lowered {
    let input = op.in_dims[0].as_ref().ok_or("no input")?;
    let mut dims: Vec<i64> = op.ints("dims").iter().map(|&d| op.axis(d, 0)).collect();
    let (mut size_a, mut size_b): (Vec<usize>, Vec<usize>) = (input.0.clone(), input.1.clone());
    let mut x = op.x(0).to_string();
    if dims.is_empty() {
        let flat = b.vec_i64(&[-1]);
        x = b.tmp("Reshape", &[&x, &flat], vec![]);
        dims = vec![0];
        size_a = vec![size_a.iter().product()];
        size_b = vec![size_b.iter().product()];
    }
    for (k, &axis) in dims.iter().enumerate() {
        let shift = |sizes: &[usize], attrs: &Attrs| {
            let n = sizes[axis as usize] as i64;
            let s = attrs.ints("shifts").get(k).copied().unwrap_or(0);
            if n == 0 { 0 } else { s.rem_euclid(n) }
        };
        let (s, s_b) = (shift(&size_a, op.attrs), shift(&size_b, op.attrs_b));
        if s != s_b {
            return op.fail("its shift wraps around a dynamic dim differently per size");
        }
        if s == 0 {
            continue;
        }
        let axes = b.vec_i64(&[axis]);
        let (tail_start, tail_end) = (b.vec_i64(&[-s]), b.vec_i64(&[i64::MAX]));
        let tail = b.tmp("Slice", &[&x, &tail_start, &tail_end, &axes], vec![]);
        let (head_start, head_end) = (b.vec_i64(&[0]), b.vec_i64(&[-s]));
        let head = b.tmp("Slice", &[&x, &head_start, &head_end, &axes], vec![]);
        x = b.tmp("Concat", &[&tail, &head], vec![int("axis", axis)]);
    }
    if op.ints("dims").is_empty() {
        let shape = b.tmp("Shape", &[op.x(0)], vec![]);
        b.node("Reshape", &[&x, &shape], &[op.out()], vec![]);
    } else {
        b.node("Identity", &[&x], &[op.out()], vec![]);
    }
    Ok(())
}

/// narrow / slice: one axis; an end at the dim's full size stays "to the
/// end" when the dim is dynamic.
fn slice(b: &mut Builder, op: &OpView) -> Lowered {
    let axis = op.axis(op.int("dim"), 0);
    let input = op.in_dims[0].as_ref().ok_or("no input")?;
    let (size_a, size_b) = (input.0[axis as usize] as i64, input.1[axis as usize] as i64);
    let end_of = |attrs: &Attrs, size: i64| -> i64 {
        match attrs.iter().find(|(n, _)| *n == "end") {
            Some((_, Attr::Int(e))) if *e < 0 => e + size,
            Some((_, Attr::Int(e))) => (*e).min(size),
            _ => size,
        }
    };
    let (end_a, end_b) = (end_of(op.attrs, size_a), end_of(op.attrs_b, size_b));
    let start_of = |attrs: &Attrs, size: i64| match attrs.iter().find(|(n, _)| *n == "start") {
        Some((_, Attr::Int(s))) if *s < 0 => s + size,
        Some((_, Attr::Int(s))) => *s,
        _ => 0,
    };
    let (start_a, start_b) = (start_of(op.attrs, size_a), start_of(op.attrs_b, size_b));
    if start_a != start_b {
        return op.fail("its start depends on a dynamic dim");
    }
    let end = if end_a == size_a && end_b == size_b {
        i64::MAX
    } else if end_a == end_b {
        end_a
    } else {
        return op.fail("its end depends on a dynamic dim");
    };
    let starts = b.vec_i64(&[start_a]);
    let ends = b.vec_i64(&[end]);
    let axes = b.vec_i64(&[axis]);
    let steps = b.vec_i64(&[op.int("step").max(1)]);
    b.node(
        "Slice",
        &[op.x(0), &starts, &ends, &axes, &steps],
        &[op.out()],
        vec![],
    );
    Ok(())
}

/// `unfold` as a Gather of every window's positions (a `[windows, size]`
/// index, which puts both dims where the input's was), then a Transpose
/// moving `size` last.
fn unfold(b: &mut Builder, op: &OpView) -> Lowered {
    let input = op.in_dims[0].as_ref().ok_or("no input")?;
    if input.0.is_empty() {
        return op.fail("unfolding a 0-d tensor");
    }
    let axis = op.axis(op.int("dim"), 0) as usize;
    if input.0[axis] != input.1[axis] {
        return op.fail("unfolding a dynamic dim");
    }
    let (size, step) = (op.int("size"), op.int("step"));
    let windows = op.out_dims[0].0[axis] as i64;
    let at: Vec<i64> = (0..windows)
        .flat_map(|w| (0..size).map(move |j| w * step + j))
        .collect();
    let at = b.const_i64(&at, vec![windows, size]);
    let gathered = b.tmp("Gather", &[op.x(0), &at], vec![int("axis", axis as i64)]);
    let n = input.0.len() + 1;
    let perm: Vec<i64> = (0..n)
        .filter(|&d| d != axis + 1)
        .chain([axis + 1])
        .map(|d| d as i64)
        .collect();
    b.node(
        "Transpose",
        &[&gathered],
        &[op.out()],
        vec![ints("perm", &perm)],
    );
    Ok(())
}
