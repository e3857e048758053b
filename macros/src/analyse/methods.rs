//! The tensor methods the checker follows, with their argument kinds and
//! shape rules (PyTorch's semantics: matmul's batch broadcasting, reshape's
//! single `-1`, negative dims counting from the end).

use super::ir::MArg;
use super::rules::{Facts, flatten, normalize_dim};
use crate::shape::{Decision, Dim, Shape, product, show};

/// How one argument of a method is read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Tensor,
    /// An integer literal (a dim index).
    Int,
    /// An array of dims with at most one `-1`.
    Shape,
    /// An array of integer literals (permute).
    Ints,
    /// A dim expression passed as a size.
    Size,
    /// Any Rust expression, passed through (scalars, flags).
    Verbatim,
}

use ArgKind::*;

/// The argument kinds of a method the checker knows, or `None`.
pub fn signature(name: &str) -> Option<&'static [ArgKind]> {
    Some(match name {
        "relu" | "gelu" | "gelu_tanh" | "silu" | "tanh" | "sigmoid" | "exp" | "log" | "log1p"
        | "neg" | "abs" | "sqrt" | "rsqrt" | "sin" | "cos" | "erf" | "softplus" | "square"
        | "reciprocal" | "sign" | "contiguous" | "detach" | "clone" | "t" | "sum" | "mean"
        | "ndim" | "numel" => &[],
        "leaky_relu" | "powf" | "clamp_min" | "clamp_max" | "to_dtype" => &[Verbatim],
        "clamp" => &[Verbatim, Verbatim],
        "softmax" | "log_softmax" | "unsqueeze" | "squeeze_dim" | "size" => &[Int],
        "sum_dim" | "mean_dim" | "amax_dim" | "argmax" | "argmin" => &[Int, Verbatim],
        "reshape" | "view" => &[Shape],
        "flatten" | "transpose" => &[Int, Int],
        "permute" => &[Ints],
        "matmul" | "mm" | "bmm" => &[Tensor],
        "masked_fill" => &[Tensor, Verbatim],
        "narrow" => &[Int, Verbatim, Size],
        "select" => &[Int, Verbatim],
        _ => return None,
    })
}

/// What a method returns.
pub enum Out {
    Tensor(Shape),
    Scalar,
}

fn dim_at(call: &str, x: &Shape, d: i64, extra: usize) -> Result<usize, String> {
    normalize_dim(d, x.len() + extra).ok_or_else(|| {
        format!(
            "`{call}`: dim {d} is out of range for `{}`{{from}}",
            show(x)
        )
    })
}

/// How a call reads in messages: `.transpose(0, 2)`.
fn call_text(name: &str, args: &[MArg]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| match a {
            MArg::Int(v) => v.to_string(),
            MArg::Ints(v) => format!("{v:?}"),
            MArg::Size(d) => d.to_string(),
            MArg::Shape(ds) => {
                let s: Vec<String> = ds
                    .iter()
                    .map(|d| d.as_ref().map_or("-1".into(), Dim::to_string))
                    .collect();
                format!("[{}]", s.join(", "))
            }
            MArg::Tensor(_) | MArg::Verbatim(_) => "..".into(),
        })
        .collect();
    format!(".{name}({})", parts.join(", "))
}

/// Applies the rule of method `name` to receiver shape `x`; `tensors` are the
/// shapes of the tensor arguments in order.
pub fn apply(
    name: &str,
    x: &Shape,
    args: &[MArg],
    tensors: &[Shape],
    facts: &mut dyn Facts,
) -> Result<Out, String> {
    let int = |i: usize| match args.get(i) {
        Some(MArg::Int(v)) => *v,
        _ => 0,
    };
    let call = call_text(name, args);
    let name_text = call.as_str();
    let mut y = x.clone();
    match name {
        "ndim" | "numel" | "size" => {
            if name == "size" {
                dim_at(name_text, x, int(0), 0)?;
            }
            return Ok(Out::Scalar);
        }
        "sum" | "mean" => y = vec![],
        "softmax" | "log_softmax" => {
            dim_at(name_text, x, int(0), 0)?;
        }
        "unsqueeze" => {
            let d = dim_at(name_text, x, int(0), 1)?;
            y.insert(d, Dim::lit(1));
        }
        "squeeze_dim" => {
            let d = dim_at(name_text, x, int(0), 0)?;
            facts.equal(&x[d], &Dim::lit(1), &|| {
                format!(
                    "`.squeeze_dim({})` needs size 1 in dim {d}, got `{}`{{from}}",
                    int(0),
                    show(x)
                )
            })?;
            y.remove(d);
        }
        "sum_dim" | "mean_dim" | "amax_dim" | "argmax" | "argmin" => {
            let d = dim_at(name_text, x, int(0), 0)?;
            let keep = matches!(args.get(1), Some(MArg::Verbatim(syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }))) if b.value);
            if keep {
                y[d] = Dim::lit(1);
            } else {
                y.remove(d);
            }
        }
        "t" => {
            if x.len() > 2 {
                return Err(format!(
                    "`.t()` expects at most 2 dims, got `{}`{{from}}",
                    show(x)
                ));
            }
            y.reverse();
        }
        "transpose" => {
            let a = dim_at(name_text, x, int(0), 0)?;
            let b = dim_at(name_text, x, int(1), 0)?;
            y.swap(a, b);
        }
        "flatten" => {
            let s = dim_at(name_text, x, int(0), 0)?;
            let e = dim_at(name_text, x, int(1), 0)?;
            if s > e {
                return Err(format!(
                    "`.flatten({}, {})`: start dim is after end dim{{from}}",
                    int(0),
                    int(1)
                ));
            }
            y = flatten(x, s, e);
        }
        "permute" => {
            let Some(MArg::Ints(p)) = args.first() else {
                return Err("permute takes `[dims]`".into());
            };
            let mut seen = vec![false; x.len()];
            let mut out = vec![];
            for d in p {
                match normalize_dim(*d, x.len()) {
                    Some(i) if p.len() == x.len() && !seen[i] => {
                        seen[i] = true;
                        out.push(x[i].clone());
                    }
                    _ => {
                        return Err(format!(
                            "`.permute({p:?})` is not a permutation of the {} dims of `{}`{{from}}",
                            x.len(),
                            show(x)
                        ));
                    }
                }
            }
            y = out;
        }
        "reshape" | "view" => {
            let Some(MArg::Shape(dims)) = args.first() else {
                return Err("reshape takes `[dims]`".into());
            };
            y = reshape(name, x, dims, facts)?;
        }
        "narrow" => {
            let d = dim_at(name_text, x, int(0), 0)?;
            if let Some(MArg::Size(len)) = args.get(2) {
                if let (Some(l), Some(n)) = (len.as_const(), x[d].as_const())
                    && l > n
                {
                    return Err(format!(
                        "`.narrow({}, .., {l})` is longer than dim {d} of `{}`{{from}}",
                        int(0),
                        show(x)
                    ));
                }
                y[d] = len.clone();
            }
        }
        "select" => {
            let d = dim_at(name_text, x, int(0), 0)?;
            y.remove(d);
        }
        "matmul" | "mm" | "bmm" => {
            let other = tensors.first().cloned().unwrap_or_default();
            let ranks_ok = match name {
                "mm" => x.len() == 2 && other.len() == 2,
                "bmm" => x.len() == 3 && other.len() == 3,
                _ => !x.is_empty() && !other.is_empty(),
            };
            if !ranks_ok {
                return Err(format!(
                    "`.{name}` cannot multiply `{}` by `{}`{{from}}",
                    show(x),
                    show(&other)
                ));
            }
            y = matmul(x, &other, facts)?;
        }
        "masked_fill" => {
            let mask = tensors.first().cloned().unwrap_or_default();
            let b = broadcast(x, &mask, facts)?;
            if b.len() != x.len() {
                return Err(format!(
                    "`.masked_fill`: mask `{}` does not broadcast to `{}`{{from}}",
                    show(&mask),
                    show(x)
                ));
            }
        }
        _ => {}
    }
    Ok(Out::Tensor(y))
}

fn reshape(
    name: &str,
    x: &Shape,
    dims: &[Option<Dim>],
    facts: &mut dyn Facts,
) -> Result<Shape, String> {
    let total = product(x);
    let shown: Vec<String> = dims
        .iter()
        .map(|d| d.as_ref().map_or("-1".into(), Dim::to_string))
        .collect();
    let target = format!("[{}]", shown.join(", "));
    let known: Vec<Dim> = dims.iter().flatten().cloned().collect();
    let known_prod = product(&known);
    match dims.iter().filter(|d| d.is_none()).count() {
        0 => {
            facts.equal(&known_prod, &total, &|| {
                format!(
                    "`.{name}({target})` needs {known_prod} elements, but `{}` has {total}{{from}}",
                    show(x)
                )
            })?;
            Ok(known)
        }
        1 => {
            facts.divides(&total, &known_prod, &|| {
                format!("`.{name}({target})`: {total} elements of `{}` do not split into multiples of {known_prod}{{from}}", show(x))
            })?;
            let (n, d) = total.cancel(&known_prod);
            let inferred = n
                .exact_div(&d)
                .or_else(|| n.floor_div(&d))
                .ok_or_else(|| format!("`.{name}({target})` divides by zero"))?;
            Ok(dims
                .iter()
                .map(|d| d.clone().unwrap_or_else(|| inferred.clone()))
                .collect())
        }
        _ => Err(format!("`.{name}({target})`: only one dim can be -1")),
    }
}

/// PyTorch's broadcasting: align from the right; a literal 1 stretches.
pub fn broadcast(a: &Shape, b: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
    let n = a.len().max(b.len());
    let mut out = vec![];
    for i in 0..n {
        let da = (i + a.len()).checked_sub(n).map(|j| &a[j]);
        let db = (i + b.len()).checked_sub(n).map(|j| &b[j]);
        out.push(match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) => {
                if y.as_const() == Some(1) {
                    x.clone()
                } else if x.as_const() == Some(1) {
                    y.clone()
                } else {
                    let (sa, sb) = (show(a), show(b));
                    facts.equal(x, y, &|| {
                        format!("cannot broadcast `{sa}` with `{sb}`: {x} vs {y}{{from}}")
                    })?;
                    x.clone()
                }
            }
            (None, None) => Dim::lit(1),
        });
    }
    Ok(out)
}

/// `torch.matmul`'s shape rule.
fn matmul(a: &Shape, b: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
    let (sa, sb) = (show(a), show(b));
    let inner_a = &a[a.len() - 1];
    let inner_b = if b.len() == 1 { &b[0] } else { &b[b.len() - 2] };
    // `q @ k` for `q @ k.T`: the plain mistake comes first, before any
    // run-time-dim hint could suggest `unchecked!`.
    if inner_a.decide_eq(inner_b) != Decision::Equal && a.len() >= 2 && b.len() >= 2 {
        let (last_b, rows_a) = (&b[b.len() - 1], &a[a.len() - 2]);
        let side = if inner_a.decide_eq(last_b) == Decision::Equal {
            Some("right")
        } else if rows_a.decide_eq(inner_b) == Decision::Equal {
            Some("left")
        } else {
            None
        };
        if let Some(side) = side {
            return Err(format!(
                "matmul of `{sa}` and `{sb}`: inner dims differ ({inner_a} vs {inner_b}); did you mean to transpose the {side} side (`.transpose(-2, -1)`)?{{from}}"
            ));
        }
    }
    facts.equal(inner_a, inner_b, &|| {
        format!("matmul of `{sa}` and `{sb}`: inner dims differ ({inner_a} vs {inner_b}){{from}}")
    })?;
    let batch_a: Shape = if a.len() > 2 {
        a[..a.len() - 2].to_vec()
    } else {
        vec![]
    };
    let batch_b: Shape = if b.len() > 2 {
        b[..b.len() - 2].to_vec()
    } else {
        vec![]
    };
    let mut out = broadcast(&batch_a, &batch_b, facts)?;
    if a.len() >= 2 {
        out.push(a[a.len() - 2].clone());
    }
    if b.len() >= 2 {
        out.push(b[b.len() - 1].clone());
    }
    Ok(out)
}

/// Whether two shapes agree (same rank, each dim equal or deferred).
pub fn same_shape(
    a: &Shape,
    b: &Shape,
    facts: &mut dyn Facts,
    msg: &dyn Fn() -> String,
) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(msg());
    }
    for (x, y) in a.iter().zip(b) {
        if x.decide_eq(y) != Decision::Equal {
            facts.equal(x, y, msg)?;
        }
    }
    Ok(())
}
