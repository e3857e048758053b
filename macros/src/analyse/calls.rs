//! The checker's calls: layers (one input), other models (through their
//! signatures), multi-head attention, and `cat`/`stack`.

use super::body::{Checker, Val, describe, f_equal, from, is_self};
use super::dims::dim_of_expr;
use super::dims::int_lit;
use super::ir::MArg;
use super::ir::{CallHow, Callee, Ir};
use super::layers::{Kind, Layer};
use super::methods::{self, ArgKind, Out};
use super::rows::{Attention, Outputs};
use crate::shape::{Dim, Shape, SymKind, show};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{Expr, Ident};

impl Checker<'_> {
    fn quiet_error(&mut self, span: Span, msg: String) -> Option<Val> {
        self.error(span, msg);
        None
    }

    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall, e: &Expr) -> (Val, Ir) {
        // self.field(args): a layer call; self.is_training(): a flag.
        if is_self(&m.receiver) {
            if m.method == "is_training" && m.args.is_empty() {
                return (
                    Val::Scalar,
                    Ir::Scalar(syn::parse_quote!(::tapir::nn::Module::is_training(self))),
                );
            }
            if self.broken.contains(&m.method.to_string()) {
                return (Val::Poison, Ir::Tuple(vec![]));
            }
            let Some(layer) = self.field(&m.method) else {
                return self.error(
                    m.method.span(),
                    format!("no field `{}` in this model", m.method),
                );
            };
            let args: Vec<&Expr> = m.args.iter().collect();
            return self.layer_call(
                layer,
                Callee::Field(m.method.clone()),
                &format!("`self.{}`", m.method),
                &m.method.to_string(),
                &args,
                m.method.span(),
            );
        }
        let (rv, ri) = self.expr(&m.receiver);
        let x = match rv {
            Val::Tensor(x, _) => x,
            Val::Scalar => return (Val::Scalar, Ir::Scalar(e.clone())),
            Val::Poison => return (Val::Poison, ri),
            other => {
                return self.error(
                    m.receiver.span(),
                    format!("`.{}` is called on {}", m.method, describe(&other)),
                );
            }
        };
        let name = m.method.to_string();
        let Some(kinds) = methods::signature(&name) else {
            return self.error(m.method.span(), format!("the shape checker does not know the tensor method `.{name}()`; wrap the call as `unchecked!(expr => [shape])`"));
        };
        if kinds.len() != m.args.len() {
            return self.error(
                m.method.span(),
                format!(
                    "`.{name}` takes {} argument(s), got {}",
                    kinds.len(),
                    m.args.len()
                ),
            );
        }
        let mut args = vec![];
        let mut tensors = vec![];
        for (k, a) in kinds.iter().zip(&m.args) {
            match self.method_arg(*k, a) {
                Some((arg, shape)) => {
                    tensors.extend(shape);
                    args.push(arg);
                }
                None => return (Val::Poison, Ir::Tuple(vec![])),
            }
        }
        let origin = format!("`.{name}(..)`");
        match self.rule(m.method.span(), "", |f| {
            methods::apply(&name, &x, &args, &tensors, f)
        }) {
            Some(Out::Tensor(y)) => (
                Val::Tensor(y, origin),
                Ir::Method {
                    recv: Box::new(ri),
                    name: m.method.clone(),
                    args,
                },
            ),
            Some(Out::Scalar) => (Val::Scalar, Ir::Scalar(e.clone())),
            None => (Val::Poison, Ir::Tuple(vec![])),
        }
    }

    fn method_arg(&mut self, kind: ArgKind, a: &Expr) -> Option<(MArg, Option<Shape>)> {
        match kind {
            ArgKind::Tensor => match self.expr(a) {
                (Val::Tensor(s, _), ir) => Some((MArg::Tensor(ir), Some(s))),
                (Val::Poison, _) => None,
                _ => {
                    self.error(a.span(), "expected a tensor here");
                    None
                }
            },
            ArgKind::Int => match int_lit(a) {
                Some(v) => Some((MArg::Int(v), None)),
                None => {
                    self.error(
                        a.span(),
                        "a dim index here is an integer literal (negative counts from the end)",
                    );
                    None
                }
            },
            ArgKind::Ints | ArgKind::Shape => {
                let Expr::Array(arr) = a else {
                    self.error(a.span(), "write the dims as an array: `[B, -1]`");
                    return None;
                };
                if kind == ArgKind::Ints {
                    let v: Option<Vec<i64>> = arr.elems.iter().map(int_lit).collect();
                    return match v {
                        Some(v) => Some((MArg::Ints(v), None)),
                        None => {
                            self.error(a.span(), "permute takes integer literals: `[0, 2, 1]`");
                            None
                        }
                    };
                }
                let mut dims = vec![];
                for d in &arr.elems {
                    if int_lit(d) == Some(-1) {
                        dims.push(None);
                        continue;
                    }
                    match dim_of_expr(d, &mut self.scope) {
                        Ok(v) => dims.push(Some(v)),
                        Err(e) => {
                            self.errors.push(e);
                            return None;
                        }
                    }
                }
                Some((MArg::Shape(dims), None))
            }
            ArgKind::Size => match dim_of_expr(a, &mut self.scope) {
                Ok(v) => Some((MArg::Size(v), None)),
                Err(e) => {
                    self.errors.push(e);
                    None
                }
            },
            ArgKind::Verbatim => Some((MArg::Verbatim(a.clone()), None)),
        }
    }

    pub(super) fn join(&mut self, c: &syn::ExprCall, stack: bool) -> (Val, Ir) {
        let what = if stack { "stack" } else { "cat" };
        let (Some(Expr::Array(arr)), Some(dim), 2) = (c.args.first(), c.args.get(1), c.args.len())
        else {
            return self.error(c.span(), format!("write `{what}([a, b, ..], dim)`"));
        };
        let Some(d) = int_lit(dim) else {
            return self.error(dim.span(), format!("`{what}`'s dim is an integer literal"));
        };
        let mut parts = vec![];
        let mut shapes: Vec<Shape> = vec![];
        for x in &arr.elems {
            match self.expr(x) {
                (Val::Tensor(s, _), ir) => {
                    shapes.push(s);
                    parts.push(ir);
                }
                (Val::Poison, _) => return (Val::Poison, Ir::Tuple(vec![])),
                _ => return self.error(x.span(), format!("`{what}` joins tensors")),
            }
        }
        let Some(first) = shapes.first().cloned() else {
            return self.error(arr.span(), format!("`{what}` needs at least one tensor"));
        };
        let rank = first.len() + usize::from(stack);
        let Some(axis) = super::rules::normalize_dim(d, rank) else {
            return self.error(
                dim.span(),
                format!("`{what}`: dim {d} is out of range for `{}`", show(&first)),
            );
        };
        let shapes2 = shapes.clone();
        let out = self.rule(c.span(), "", |f| {
            let mut out = first.clone();
            for s in &shapes2[1..] {
                let msg = || {
                    format!(
                        "`{what}` needs matching shapes except in dim {axis}: `{}` and `{}`",
                        show(&first),
                        show(s)
                    )
                };
                if s.len() != first.len() {
                    return Err(msg());
                }
                for (i, (a, b)) in first.iter().zip(s).enumerate() {
                    if i == axis && !stack {
                        out[axis] = out[axis].add(b);
                    } else {
                        f_equal(f, b, a, &msg)?;
                    }
                }
            }
            if stack {
                out.insert(axis, Dim::lit(shapes2.len() as i64));
            }
            Ok(out)
        });
        match out {
            Some(s) => (
                Val::Tensor(s, format!("`{what}`")),
                Ir::Join {
                    stack,
                    parts,
                    dim: d,
                },
            ),
            None => (Val::Poison, Ir::Tuple(vec![])),
        }
    }

    pub(super) fn layer_call(
        &mut self,
        layer: &Layer,
        callee: Callee,
        label: &str,
        field: &str,
        args: &[&Expr],
        span: Span,
    ) -> (Val, Ir) {
        let mut tensors = vec![];
        let mut irs = vec![];
        let mut opts = vec![];
        for a in args {
            if let Expr::Assign(asg) = a {
                opts.push(asg);
                continue;
            }
            match self.expr(a) {
                (Val::Tensor(s, o), ir) => {
                    tensors.push((s, o, a.span()));
                    irs.push(ir);
                }
                (Val::Poison, _) => return (Val::Poison, Ir::Tuple(vec![])),
                (other, _) => {
                    return self.error(
                        a.span(),
                        format!(
                            "{} takes tensors, got {}",
                            layer.label(field),
                            describe(&other)
                        ),
                    );
                }
            }
        }
        match &layer.kind {
            Kind::Row(r) if r.attention().is_some() => {
                return self
                    .attention(layer, callee, field, tensors, irs, &opts, span)
                    .unwrap_or((Val::Poison, Ir::Tuple(vec![])));
            }
            Kind::Model {
                name, args: margs, ..
            } => {
                return self
                    .model_call(name, margs, callee, label, field, tensors, irs, span)
                    .unwrap_or((Val::Poison, Ir::Tuple(vec![])));
            }
            Kind::List { .. } => {
                return self.error(span, format!("`self.{field}` is an array of layers: loop over it with `for layer in &self.{field}`"));
            }
            Kind::Custom { .. } => {
                return self.error(span, format!("`self.{field}` is a hand-written module, whose shapes the checker does not know: call it as `unchecked!(::tapir::nn::Forward::forward(&self.{field}, &x) => [..])` with the shape it returns"));
            }
            _ => {}
        }
        if let Some(o) = opts.first() {
            return self.error(o.span(), format!("{} takes no options", layer.label(field)));
        }
        if tensors.len() != 1 {
            return self.error(
                span,
                format!(
                    "{} takes one input, got {}",
                    layer.label(field),
                    tensors.len()
                ),
            );
        }
        let (x, origin, _) = tensors.remove(0);
        let poison = (Val::Poison, Ir::Tuple(vec![]));
        if let Kind::Row(r) = &layer.kind
            && r.multi_output()
        {
            let label = layer.label(field);
            let Some(out) = self.rule(span, &origin, |f| r.outputs(&label, &x, f)) else {
                return poison;
            };
            let ir = Ir::Call {
                callee,
                how: CallHow::WithState,
                args: irs,
            };
            return (value_of(out, &format!("`self.{field}`")), ir);
        }
        let ir = Ir::Call {
            callee,
            how: CallHow::Forward {
                checkpoint: self.checkpointed.iter().any(|f| f == field),
            },
            args: irs,
        };
        // A Sequential applies its layers in turn (models through their signatures).
        let steps: Vec<(String, &Layer)> = match &layer.kind {
            Kind::Sequential(ls) => ls
                .iter()
                .enumerate()
                .map(|(i, l)| (format!("{field}.{i}"), l))
                .collect(),
            _ => vec![(field.to_string(), layer)],
        };
        let (mut shape, mut from_) = (x, origin);
        for (name, step) in steps {
            let next = match &step.kind {
                Kind::Model {
                    name: model, args, ..
                } => {
                    match self.apply_model(model, args, label, &name, &[(shape, from_, span)], span)
                    {
                        Some(Val::Tensor(s, _)) => s,
                        Some(_) => {
                            return self.error(
                                span,
                                format!("{} `{name}` must return one tensor", step.row),
                            );
                        }
                        None => return poison,
                    }
                }
                _ => match self.rule(span, &from_, |f| step.apply(&name, &shape, f)) {
                    Some(s) => s,
                    None => return poison,
                },
            };
            shape = next;
            from_ = label.to_string();
        }
        (Val::Tensor(shape, label.to_string()), ir)
    }

    /// A call into another model, checked against its signature.
    pub(super) fn apply_model(
        &mut self,
        name: &Ident,
        margs: &[Dim],
        label: &str,
        field: &str,
        tensors: &[(Shape, String, Span)],
        span: Span,
    ) -> Option<Val> {
        let Some(sig) = self.sigs.get(&name.to_string()).cloned() else {
            return self.quiet_error(
                name.span(),
                format!("`{name}` is not a layer or a model that `model!` has seen"),
            );
        };
        if sig.generics.len() != margs.len() {
            return self.quiet_error(
                span,
                format!(
                    "`{name}` takes {} size parameter(s), got {}",
                    sig.generics.len(),
                    margs.len()
                ),
            );
        }
        if sig.inputs.len() != tensors.len() {
            return self.quiet_error(
                span,
                format!(
                    "{name} `{field}` takes {} input(s), got {}",
                    sig.inputs.len(),
                    tensors.len()
                ),
            );
        }
        let consts: HashMap<String, Dim> = sig
            .generics
            .iter()
            .cloned()
            .zip(margs.iter().cloned())
            .collect();
        let mut bound: HashMap<String, Dim> = HashMap::new();
        for (pattern, (x, origin, _)) in sig.inputs.iter().zip(tensors) {
            let expected: Shape = pattern
                .iter()
                .map(|d| {
                    d.substitute(&|n, k| {
                        if *k == SymKind::Const {
                            consts.get(n).cloned()
                        } else {
                            None
                        }
                    })
                })
                .collect();
            let shown = show(&expected);
            if expected.len() != x.len() {
                return self.quiet_error(
                    span,
                    format!(
                        "{name} `{field}` expects input `{shown}`, got `{}`{}",
                        show(x),
                        from(origin)
                    ),
                );
            }
            for (want, got) in expected.iter().zip(x) {
                let rt = want.symbols(SymKind::Runtime);
                if let [only] = rt.as_slice()
                    && *want == Dim::sym(only, SymKind::Runtime)
                    && !bound.contains_key(only)
                {
                    bound.insert(only.clone(), got.clone());
                    continue;
                }
                let want = want.substitute(&|n, k| {
                    if *k == SymKind::Runtime {
                        bound.get(n).cloned()
                    } else {
                        None
                    }
                });
                let msg = || {
                    format!(
                        "{name} `{field}` expects input `{shown}`, got `{}`{{from}}",
                        show(x)
                    )
                };
                self.rule(span, origin, |f| f_equal(f, got, &want, &msg))?;
            }
        }
        let subst = |d: &Dim| {
            d.substitute(&|n, k| match k {
                SymKind::Const => consts.get(n).cloned(),
                SymKind::Runtime => bound.get(n).cloned(),
            })
        };
        let outs: Vec<Val> = sig
            .outputs
            .iter()
            .map(|s| Val::Tensor(s.iter().map(subst).collect(), label.to_string()))
            .collect();
        let val = if sig.out_tuple {
            Val::Tuple(outs)
        } else {
            outs.into_iter().next().unwrap_or(Val::Poison)
        };
        Some(val)
    }

    #[allow(clippy::too_many_arguments)]
    fn model_call(
        &mut self,
        name: &Ident,
        margs: &[Dim],
        callee: Callee,
        label: &str,
        field: &str,
        tensors: Vec<(Shape, String, Span)>,
        irs: Vec<Ir>,
        span: Span,
    ) -> Option<(Val, Ir)> {
        let val = self.apply_model(name, margs, label, field, &tensors, span)?;
        let how = CallHow::Model {
            checkpoint: self.checkpointed.iter().any(|f| f == field),
        };
        Some((
            val,
            Ir::Call {
                callee,
                how,
                args: irs,
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        layer: &Layer,
        callee: Callee,
        field: &str,
        tensors: Vec<(Shape, String, Span)>,
        irs: Vec<Ir>,
        opts: &[&syn::ExprAssign],
        span: Span,
    ) -> Option<(Val, Ir)> {
        let Attention {
            e,
            heads,
            batch_first,
        } = match &layer.kind {
            Kind::Row(r) => r.attention(),
            _ => None,
        }?;
        let label = layer.label(field);
        if tensors.len() != 3 {
            return Some(self.error(
                span,
                format!(
                    "{label} takes (query, key, value), got {} input(s)",
                    tensors.len()
                ),
            ));
        }
        let (mut need_weights, mut is_causal, mut kpm, mut am) =
            (true, syn::parse_quote!(false), None, None);
        let mut kpm_shape = None;
        for o in opts {
            let key = match &*o.left {
                Expr::Path(p) => p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default(),
                _ => String::new(),
            };
            match key.as_str() {
                "need_weights" => match &*o.right {
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => need_weights = b.value,
                    other => return Some(self.error(other.span(), "`need_weights` is `true` or `false`")),
                },
                "is_causal" => is_causal = (*o.right).clone(),
                "key_padding_mask" | "attn_mask" => match self.expr(&o.right) {
                    (Val::Tensor(s, _), ir) => {
                        if key == "attn_mask" {
                            am = Some(Box::new(ir));
                        } else {
                            kpm_shape = Some((s, o.right.span()));
                            kpm = Some(Box::new(ir));
                        }
                    }
                    (Val::Poison, _) => return None,
                    _ => return Some(self.error(o.right.span(), format!("`{key}` is a tensor"))),
                },
                _ => return Some(self.error(o.left.span(), format!("{label} options are need_weights, is_causal, key_padding_mask and attn_mask"))),
            }
        }
        let (bi, li) = if *batch_first { (0, 1) } else { (1, 0) };
        let pattern = if *batch_first {
            "[B, L, E]"
        } else {
            "[L, B, E]"
        };
        let mut embed = e.get();
        let mut shapes = vec![];
        for ((x, origin, sp), role) in tensors.into_iter().zip(["query", "key", "value"]) {
            if x.len() != 3 {
                return Some(self.error(
                    sp,
                    format!(
                        "{label} expects {role} `{pattern}`, got `{}`{}",
                        show(&x),
                        from(&origin)
                    ),
                ));
            }
            let want = match &embed {
                Some(d) => d.clone(),
                None => {
                    let filled = self.rule(sp, &origin, |_| {
                        super::rules::fill_slot(e, &x[2], "embed_dim", &label)
                    })?;
                    embed = Some(filled.clone());
                    filled
                }
            };
            let msg = || {
                format!(
                    "{label} expects {role} `[.., {want}]`, got `{}`{{from}}",
                    show(&x)
                )
            };
            self.rule(sp, &origin, |f| f_equal(f, &x[2], &want, &msg))?;
            shapes.push(x);
        }
        let embed = embed.unwrap_or_default();
        let heads2 = heads.clone();
        self.rule(span, "", |f| {
            f.divides_dyn(&embed, &heads2, &|| {
                format!("{label}: embed_dim {embed} is not divisible by num_heads {heads2}")
            })
        })?;
        let (q, k, v) = (&shapes[0], &shapes[1], &shapes[2]);
        let (qs, ks, vs) = (show(q), show(k), show(v));
        let msg = || {
            format!(
                "{label}: query `{qs}`, key `{ks}` and value `{vs}` disagree on batch size or key length"
            )
        };
        self.rule(span, "", |f| {
            f_equal(f, &k[bi], &q[bi], &msg)?;
            f_equal(f, &v[bi], &q[bi], &msg)?;
            f_equal(f, &v[li], &k[li], &msg)
        })?;
        if let Some((m, sp)) = kpm_shape {
            let want = vec![q[bi].clone(), k[li].clone()];
            let ms = show(&m);
            let msg = || {
                format!(
                    "{label} expects key_padding_mask `{}`, got `{ms}`",
                    show(&want)
                )
            };
            self.rule(sp, "", |f| methods::same_shape(&m, &want, f, &msg))?;
        }
        let out = Val::Tensor(q.clone(), format!("`self.{field}`"));
        let how = CallHow::Attention {
            key_padding_mask: kpm,
            attn_mask: am,
            need_weights,
            is_causal,
        };
        let val = if need_weights {
            let w = Val::Tensor(
                vec![q[bi].clone(), q[li].clone(), k[li].clone()],
                format!("`self.{field}`"),
            );
            Val::Tuple(vec![out, w])
        } else {
            out
        };
        Some((
            val,
            Ir::Call {
                callee,
                how,
                args: irs,
            },
        ))
    }
}

/// The value a multi-output layer call gives, every tensor from `origin`.
fn value_of(out: Outputs, origin: &str) -> Val {
    match out {
        Outputs::Tensor(s) => Val::Tensor(s, origin.to_string()),
        Outputs::Tuple(xs) => Val::Tuple(xs.into_iter().map(|x| value_of(x, origin)).collect()),
    }
}
