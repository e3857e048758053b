//! Analyse: from parsed syntax to checked models. Reads every field type
//! through the layer table, derives each model's typed signature, and walks
//! each `forward` body with the shape checker. All errors are collected.

mod body;
mod calls;
mod dims;
mod facts;
pub mod ir;
pub mod layers;
mod methods;
pub mod rows;
pub mod rules;

pub use body::Sig;
pub use facts::{AssertKind, Assertion};

use crate::parse::{Input, ModelDef, ParamType, ShapeSyntax};
use crate::shape::{Dim, Shape, SymKind, show};
use body::{Checker, Val};
use dims::{DimScope, dim_of_expr};
use ir::{IrBlock, RuntimeShape};
use layers::{Kind, Layer, parse_layer};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{GenericParam, Ident, Type};

pub enum InputKind {
    Tensor(RuntimeShape),
    Rust,
}

pub struct ModelInput {
    pub name: Ident,
    pub kind: InputKind,
}

/// A checked model, ready for code generation.
pub struct Model<'a> {
    pub def: &'a ModelDef,
    pub consts: Vec<String>,
    pub fields: Vec<(Ident, Layer)>,
    /// Fields whose type had an error: calls to them stay quiet.
    pub broken: Vec<String>,
    pub inputs: Vec<ModelInput>,
    /// Run-time dims in binding order (each becomes a local `__dim_X`).
    pub runtime_dims: Vec<String>,
    pub sig: Option<Sig>,
    pub body: Option<IrBlock>,
    pub assertions: Vec<Assertion>,
}

pub struct Analysis<'a> {
    pub models: Vec<Model<'a>>,
    pub errors: Vec<syn::Error>,
    /// A model type from another `model!` block whose signature is needed
    /// first: codegen asks that model's `macro_rules!` for it.
    pub needs_signature: Option<Ident>,
}

fn shape_of(s: &ShapeSyntax, scope: &mut DimScope, errors: &mut Vec<syn::Error>) -> Option<Shape> {
    let mut out = vec![];
    for d in &s.dims {
        match dim_of_expr(d, scope) {
            Ok(v) => out.push(v),
            Err(e) => {
                errors.push(e);
                return None;
            }
        }
    }
    Some(out)
}

/// The input patterns of a signature, binding each run-time dim where it
/// first appears alone.
fn input_patterns(
    name: &str,
    shapes: &[(Ident, Shape, proc_macro2::Span)],
    errors: &mut Vec<syn::Error>,
) -> (Vec<RuntimeShape>, Vec<String>) {
    let mut bound: Vec<String> = vec![];
    let mut out = vec![];
    for (arg, shape, span) in shapes {
        let mut dims = vec![];
        for d in shape {
            let rt = d.symbols(SymKind::Runtime);
            let fresh = match rt.as_slice() {
                [only] if *d == Dim::sym(only, SymKind::Runtime) && !bound.contains(only) => {
                    bound.push(only.clone());
                    Some(only.clone())
                }
                _ => None,
            };
            if fresh.is_none()
                && let Some(u) = rt.iter().find(|s| !bound.contains(s))
            {
                errors.push(syn::Error::new(
                    *span,
                    format!("dim `{d}` of input `{arg}` uses `{u}` before any input binds `{u}` as a whole dim"),
                ));
            }
            dims.push((d.clone(), fresh));
        }
        out.push(RuntimeShape {
            what: format!("{name}::forward"),
            pattern: show(shape),
            dims,
        });
    }
    (out, bound)
}

fn signature_of(
    def: &ModelDef,
    consts: &[String],
    errors: &mut Vec<syn::Error>,
) -> Option<(Sig, Vec<ModelInput>, Vec<String>)> {
    let f = def.forward.as_ref()?;
    let mut scope = DimScope {
        consts: consts.to_vec(),
        runtime: Some(vec![]),
        bind_new: true,
    };
    let mut shapes = vec![];
    for p in &f.params {
        match &p.ty {
            ParamType::Shape(s) => {
                shapes.push((p.name.clone(), shape_of(s, &mut scope, errors)?, s.span))
            }
            ParamType::Rust(_) => {}
        }
    }
    let before = errors.len();
    let (patterns, runtime) = input_patterns(&def.name.to_string(), &shapes, errors);
    if errors.len() > before {
        return None;
    }
    scope.bind_new = false;
    let mut outputs = vec![];
    for s in &f.ret {
        outputs.push(shape_of(s, &mut scope, errors)?);
    }
    let mut pats = patterns.into_iter();
    let inputs = f
        .params
        .iter()
        .filter_map(|p| {
            let kind = match &p.ty {
                ParamType::Shape(_) => InputKind::Tensor(pats.next()?),
                ParamType::Rust(_) => InputKind::Rust,
            };
            Some(ModelInput {
                name: p.name.clone(),
                kind,
            })
        })
        .collect();
    let sig = Sig {
        generics: consts.to_vec(),
        inputs: shapes.into_iter().map(|(_, s, _)| s).collect(),
        outputs,
        out_tuple: f.ret_is_tuple,
    };
    Some((sig, inputs, runtime))
}

fn const_generics(def: &ModelDef, errors: &mut Vec<syn::Error>) -> Vec<String> {
    let mut out = vec![];
    for p in &def.generics.params {
        match p {
            GenericParam::Const(c) if matches!(&c.ty, Type::Path(t) if t.path.is_ident("usize")) => {
                out.push(c.ident.to_string())
            }
            other => errors.push(syn::Error::new(
                other.span(),
                "a model's generic parameters are sizes: `const N: usize`",
            )),
        }
    }
    out
}

fn each_layer(l: &Layer, f: &mut dyn FnMut(&Layer)) {
    f(l);
    match &l.kind {
        Kind::Sequential(ls) => ls.iter().for_each(|x| each_layer(x, f)),
        Kind::List { elem, .. } => each_layer(elem, f),
        _ => {}
    }
}

fn unresolved(l: &Layer) -> Option<&'static str> {
    match &l.kind {
        Kind::Row(r) => r.uninferred(),
        _ => None,
    }
}

pub fn analyse(input: &Input) -> Analysis<'_> {
    let mut errors = vec![];
    let mut sigs: HashMap<String, Sig> = HashMap::new();
    for s in &input.signatures {
        let consts: Vec<String> = s.generics.iter().map(Ident::to_string).collect();
        let mut scope = DimScope {
            consts: consts.clone(),
            runtime: Some(vec![]),
            bind_new: true,
        };
        let mut errs = vec![];
        let inputs: Option<Vec<Shape>> = s
            .inputs
            .iter()
            .map(|x| shape_of(x, &mut scope, &mut errs))
            .collect();
        let outputs: Option<Vec<Shape>> = s
            .outputs
            .iter()
            .map(|x| shape_of(x, &mut scope, &mut errs))
            .collect();
        if let (Some(inputs), Some(outputs)) = (inputs, outputs) {
            let out_tuple = outputs.len() != 1;
            sigs.insert(
                s.name.to_string(),
                Sig {
                    generics: consts,
                    inputs,
                    outputs,
                    out_tuple,
                },
            );
        }
    }
    let mut models = vec![];
    let model_names: Vec<String> = input
        .models
        .iter()
        .map(|d| d.name.to_string())
        .chain(sigs.keys().cloned())
        .collect();
    for def in &input.models {
        let consts = const_generics(def, &mut errors);
        let (sig, inputs, runtime_dims) = match signature_of(def, &consts, &mut errors) {
            Some((s, i, r)) => (Some(s), i, r),
            None => (None, vec![], vec![]),
        };
        if let Some(s) = &sig {
            sigs.insert(def.name.to_string(), s.clone());
        }
        let mut fields = vec![];
        let mut broken = vec![];
        let mut scope = DimScope::consts(&consts);
        for f in &def.fields {
            if let Some(init) = &f.module {
                let kind = Kind::Custom {
                    ty: Box::new(f.ty.clone()),
                    init: init.clone(),
                };
                let row = quote::ToTokens::to_token_stream(&f.ty)
                    .to_string()
                    .replace(" ", "");
                let span = f.ty.span();
                fields.push((f.name.clone(), Layer { kind, span, row }));
                continue;
            }
            match parse_layer(&f.ty, &mut scope, &model_names) {
                Ok(l) => fields.push((f.name.clone(), l)),
                Err(e) => {
                    errors.push(e);
                    broken.push(f.name.to_string());
                }
            }
        }
        models.push(Model {
            def,
            consts,
            fields,
            broken,
            inputs,
            runtime_dims,
            sig,
            body: None,
            assertions: vec![],
        });
    }
    // A model from another block: fetch its signature before checking bodies.
    let mut needs_signature = None;
    for m in &models {
        for (_, l) in &m.fields {
            each_layer(l, &mut |x| {
                if let Kind::Model { name, .. } = &x.kind
                    && !sigs.contains_key(&name.to_string())
                    && needs_signature.is_none()
                {
                    needs_signature = Some(name.clone());
                }
            });
        }
    }
    if needs_signature.is_some() && errors.is_empty() {
        return Analysis {
            models,
            errors,
            needs_signature,
        };
    }
    for m in &mut models {
        check_body(m, &sigs, &mut errors);
    }
    Analysis {
        models,
        errors,
        needs_signature: None,
    }
}

fn check_body(m: &mut Model, sigs: &HashMap<String, Sig>, errors: &mut Vec<syn::Error>) {
    let (Some(f), Some(sig)) = (m.def.forward.as_ref(), m.sig.as_ref()) else {
        return;
    };
    let scope = DimScope {
        consts: m.consts.clone(),
        runtime: Some(m.runtime_dims.clone()),
        bind_new: false,
    };
    let mut checker = Checker::new(&m.fields, sigs, scope);
    checker.broken = m.broken.clone();
    checker.checkpointed = m
        .def
        .fields
        .iter()
        .filter(|f| f.checkpoint)
        .map(|f| f.name.to_string())
        .collect();
    let mut shapes = sig.inputs.iter();
    for p in &f.params {
        let val = match &p.ty {
            ParamType::Shape(_) => match shapes.next() {
                Some(s) => Val::Tensor(s.clone(), format!("input `{}`", p.name)),
                None => Val::Poison,
            },
            ParamType::Rust(_) => Val::Scalar,
        };
        checker.bind_input(&p.name, val);
    }
    let (val, body) = checker.block(&f.body);
    let tail_span = match f.body.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => e.span(),
        _ => f.body.brace_token.span.close(),
    };
    let outs: Vec<Val> = if sig.out_tuple {
        match val {
            Val::Tuple(vs) => vs,
            Val::Poison => vec![],
            other => vec![other],
        }
    } else {
        vec![val]
    };
    let declared: Vec<String> = sig.outputs.iter().map(|s| show(s)).collect();
    let declared = if sig.out_tuple {
        format!("({})", declared.join(", "))
    } else {
        declared.join("")
    };
    if !outs.iter().any(|v| matches!(v, Val::Poison)) {
        if outs.len() != sig.outputs.len() {
            checker.errors.push(syn::Error::new(tail_span, format!("`forward` is declared to return `{declared}`, but its body ends with {} value(s)", outs.len())));
        } else {
            for (i, (v, want)) in outs.iter().zip(&sig.outputs).enumerate() {
                // In a tuple, name the one output that differs.
                let declared = if sig.out_tuple {
                    format!("{}` as output {i}", show(want))
                } else {
                    format!("{}`", show(want))
                };
                checker.check_output(v, want, &declared, tail_span);
            }
        }
    }
    errors.append(&mut checker.errors);
    m.assertions = checker.assertions;
    for (name, l) in &m.fields {
        each_layer(l, &mut |x| {
            if let Some(what) = unresolved(x) {
                errors.push(syn::Error::new(x.span, format!("cannot infer `{what}` of `{name}`: `forward` never calls it, so write the size out")));
            }
        });
    }
    m.body = Some(body);
}
