//! The layer table: which field types `model!` knows, their parameters (in
//! PyTorch's order and with PyTorch's names and defaults) and their shape rules.

use super::dims::{DimScope, dim_of_expr, int_lit};
use crate::shape::Dim;
use proc_macro2::Span;
use std::cell::RefCell;
use std::rc::Rc;
use syn::spanned::Spanned;
use syn::{Expr, GenericArgument, PathArguments, Type};

/// Every row of the table, as written in a field type.
pub const ROWS: &[&str] = &[
    "Linear",
    "LayerNorm",
    "RMSNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "Embedding",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "Flatten",
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "LeakyReLU",
    "Softmax",
    "MultiheadAttention",
    "Sequential",
];

/// A dimension given in the type or left as `_` to be inferred at the first call.
#[derive(Clone)]
pub enum Slot {
    Known(Dim),
    Infer(Rc<RefCell<Option<Dim>>>),
}

impl Slot {
    pub fn get(&self) -> Option<Dim> {
        match self {
            Slot::Known(d) => Some(d.clone()),
            Slot::Infer(c) => c.borrow().clone(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Act {
    ReLU,
    Gelu,
    SiLU,
    Tanh,
    Sigmoid,
    LeakyReLU,
}

#[derive(Clone)]
pub enum Kind {
    Linear {
        inp: Slot,
        out: Dim,
        bias: Option<Expr>,
    },
    LayerNorm {
        d: Slot,
        eps: Option<Expr>,
        affine: Option<Expr>,
        rms: bool,
    },
    BatchNorm {
        c: Slot,
        two_d: bool,
    },
    Dropout {
        p: Expr,
    },
    Embedding {
        n: Dim,
        d: Dim,
        padding_idx: Option<Expr>,
    },
    Conv2d {
        inp: Slot,
        out: Dim,
        k: Dim,
        stride: Dim,
        padding: Dim,
        dilation: Dim,
        groups: Dim,
        bias: Option<Expr>,
    },
    Pool {
        max: bool,
        k: Dim,
        stride: Dim,
        padding: Dim,
    },
    AdaptiveAvgPool {
        h: Dim,
        w: Dim,
    },
    Flatten {
        start: i64,
        end: i64,
    },
    Act {
        act: Act,
        arg: Option<Expr>,
    },
    Softmax {
        dim: i64,
    },
    Mha {
        e: Slot,
        heads: Dim,
        batch_first: bool,
    },
    Sequential(Vec<Layer>),
    List {
        elem: Box<Layer>,
        n: Dim,
    },
    /// Another `model!` model; its signature is looked up by name.
    Model {
        name: syn::Ident,
        args: Vec<Dim>,
        ty: Type,
    },
}

#[derive(Clone)]
pub struct Layer {
    pub kind: Kind,
    pub span: Span,
    /// The table row's name (`Linear`) or the model's name.
    pub row: String,
}

enum ArgVal {
    Infer(Span),
    Expr(Expr),
}

struct Args {
    row: &'static str,
    params: &'static [&'static str],
    vals: Vec<Option<ArgVal>>,
    span: Span,
}

impl Args {
    fn take(&mut self, name: &str) -> Option<ArgVal> {
        let i = self.params.iter().position(|p| *p == name)?;
        self.vals[i].take()
    }

    fn expr(&mut self, name: &str) -> syn::Result<Option<Expr>> {
        match self.take(name) {
            None => Ok(None),
            Some(ArgVal::Expr(e)) => Ok(Some(e)),
            Some(ArgVal::Infer(s)) => Err(syn::Error::new(
                s,
                format!("`{}`'s `{name}` cannot be inferred; write it out", self.row),
            )),
        }
    }

    fn required(&mut self, name: &str) -> syn::Result<Expr> {
        self.expr(name)?.ok_or_else(|| {
            syn::Error::new(
                self.span,
                format!(
                    "`{}` needs `{name}`: write `{}<{}>`",
                    self.row,
                    self.row,
                    self.params.join(", ")
                ),
            )
        })
    }

    fn dim(&mut self, name: &str, scope: &mut DimScope, default: Option<Dim>) -> syn::Result<Dim> {
        match (self.expr(name)?, default) {
            (Some(e), _) => dim_of_expr(&e, scope),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.missing(name)),
        }
    }

    fn slot(&mut self, name: &str, scope: &mut DimScope) -> syn::Result<Slot> {
        match self.take(name) {
            Some(ArgVal::Infer(_)) => Ok(Slot::Infer(Rc::new(RefCell::new(None)))),
            Some(ArgVal::Expr(e)) => Ok(Slot::Known(dim_of_expr(&e, scope)?)),
            None => Err(self.missing(name)),
        }
    }

    fn int(&mut self, name: &str, default: i64) -> syn::Result<i64> {
        match self.expr(name)? {
            None => Ok(default),
            Some(e) => int_lit(&e).ok_or_else(|| {
                syn::Error::new(
                    e.span(),
                    format!("`{}`'s `{name}` must be an integer literal", self.row),
                )
            }),
        }
    }

    fn bool_lit(&mut self, name: &str, default: bool) -> syn::Result<bool> {
        match self.expr(name)? {
            None => Ok(default),
            Some(Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Bool(b),
                ..
            })) => Ok(b.value),
            Some(e) => Err(syn::Error::new(
                e.span(),
                format!("`{}`'s `{name}` must be `true` or `false`", self.row),
            )),
        }
    }

    fn missing(&self, name: &str) -> syn::Error {
        syn::Error::new(
            self.span,
            format!(
                "`{}` needs `{name}`: its parameters are <{}>",
                self.row,
                self.params.join(", ")
            ),
        )
    }
}

fn expr_of_type(ty: &Type) -> Option<Expr> {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            syn::parse2(quote::quote!(#p)).ok()
        }
        Type::Paren(p) => expr_of_type(&p.elem),
        _ => None,
    }
}

fn bind_args(
    row: &'static str,
    params: &'static [&'static str],
    args: &PathArguments,
    span: Span,
) -> syn::Result<Args> {
    let mut out = Args {
        row,
        params,
        vals: params.iter().map(|_| None).collect(),
        span,
    };
    let list = match args {
        PathArguments::None => return Ok(out),
        PathArguments::AngleBracketed(a) => &a.args,
        PathArguments::Parenthesized(p) => {
            return Err(syn::Error::new(
                p.span(),
                format!("write `{row}<..>` with angle brackets"),
            ));
        }
    };
    let mut next = 0;
    for arg in list {
        let (name, val) = match arg {
            GenericArgument::Type(Type::Infer(i)) => (None, ArgVal::Infer(i.span())),
            GenericArgument::Type(t) => match expr_of_type(t) {
                Some(e) => (None, ArgVal::Expr(e)),
                None => {
                    return Err(syn::Error::new(
                        t.span(),
                        format!("`{row}` takes sizes and options, not a type here"),
                    ));
                }
            },
            GenericArgument::Const(e) => (None, ArgVal::Expr(e.clone())),
            GenericArgument::AssocConst(a) => {
                (Some(a.ident.clone()), ArgVal::Expr(a.value.clone()))
            }
            GenericArgument::AssocType(a) => match expr_of_type(&a.ty) {
                Some(e) => (Some(a.ident.clone()), ArgVal::Expr(e)),
                None => return Err(syn::Error::new(a.ty.span(), "expected a value")),
            },
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "expected a size or `name = value`",
                ));
            }
        };
        let i = match &name {
            Some(n) => params.iter().position(|p| n == p).ok_or_else(|| {
                syn::Error::new(
                    n.span(),
                    format!(
                        "`{row}` has no parameter `{n}`; its parameters are <{}>",
                        params.join(", ")
                    ),
                )
            })?,
            None => {
                if next >= params.len() {
                    return Err(syn::Error::new(
                        arg.span(),
                        format!(
                            "`{row}` takes at most {} parameters: <{}>",
                            params.len(),
                            params.join(", ")
                        ),
                    ));
                }
                next += 1;
                next - 1
            }
        };
        if out.vals[i].is_some() {
            return Err(syn::Error::new(
                arg.span(),
                format!("`{row}`'s `{}` is given twice", params[i]),
            ));
        }
        out.vals[i] = Some(val);
    }
    Ok(out)
}

/// Levenshtein distance, for "did you mean" hints.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The table row a misspelt name was probably meant to be.
pub fn suggest(name: &str) -> Option<&'static str> {
    let lower = name.to_lowercase();
    ROWS.iter()
        .copied()
        .map(|r| (distance(&lower, &r.to_lowercase()), r))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, r)| r)
}

/// Reads a field type: a table row, a `Sequential<(..)>`, an array `[L; N]`
/// (a ModuleList) or another model.
pub fn parse_layer(ty: &Type, scope: &mut DimScope) -> syn::Result<Layer> {
    let span = ty.span();
    let path = match ty {
        Type::Array(a) => {
            let elem = parse_layer(&a.elem, scope)?;
            let n = dim_of_expr(&a.len, scope)?;
            return Ok(Layer {
                kind: Kind::List {
                    elem: Box::new(elem),
                    n,
                },
                span,
                row: "ModuleList".into(),
            });
        }
        Type::Paren(p) => return parse_layer(&p.elem, scope),
        Type::Path(p) if p.qself.is_none() => &p.path,
        _ => {
            return Err(syn::Error::new(
                span,
                "a field is a layer (`Linear<IN, OUT>`), `Sequential<(..)>`, an array `[Layer; N]` or another model",
            ));
        }
    };
    let Some(seg) = path.segments.last() else {
        return Err(syn::Error::new(span, "expected a layer type"));
    };
    let name = seg.ident.to_string();
    let args = &seg.arguments;
    let bind = |row, params| bind_args(row, params, args, span);
    let kind = match name.as_str() {
        "Linear" => {
            let mut a = bind("Linear", &["in_features", "out_features", "bias"])?;
            Kind::Linear {
                inp: a.slot("in_features", scope)?,
                out: a.dim("out_features", scope, None)?,
                bias: a.expr("bias")?,
            }
        }
        "LayerNorm" | "RMSNorm" => {
            let row = if name == "LayerNorm" {
                "LayerNorm"
            } else {
                "RMSNorm"
            };
            let mut a = bind(row, &["normalized_shape", "eps", "elementwise_affine"])?;
            Kind::LayerNorm {
                d: a.slot("normalized_shape", scope)?,
                eps: a.expr("eps")?,
                affine: a.expr("elementwise_affine")?,
                rms: row == "RMSNorm",
            }
        }
        "BatchNorm1d" | "BatchNorm2d" => {
            let two_d = name == "BatchNorm2d";
            let mut a = bind(
                if two_d { "BatchNorm2d" } else { "BatchNorm1d" },
                &["num_features"],
            )?;
            Kind::BatchNorm {
                c: a.slot("num_features", scope)?,
                two_d,
            }
        }
        "Dropout" => {
            let mut a = bind("Dropout", &["p"])?;
            let p = a.expr("p")?.unwrap_or_else(|| syn::parse_quote!(0.5));
            if let Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Float(f),
                ..
            }) = &p
            {
                let v: f64 = f.base10_parse()?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(syn::Error::new(
                        f.span(),
                        format!("Dropout probability must be between 0 and 1, got {v}"),
                    ));
                }
            }
            Kind::Dropout { p }
        }
        "Embedding" => {
            let mut a = bind(
                "Embedding",
                &["num_embeddings", "embedding_dim", "padding_idx"],
            )?;
            Kind::Embedding {
                n: a.dim("num_embeddings", scope, None)?,
                d: a.dim("embedding_dim", scope, None)?,
                padding_idx: a.expr("padding_idx")?,
            }
        }
        "Conv2d" => {
            let mut a = bind(
                "Conv2d",
                &[
                    "in_channels",
                    "out_channels",
                    "kernel_size",
                    "stride",
                    "padding",
                    "dilation",
                    "groups",
                    "bias",
                ],
            )?;
            Kind::Conv2d {
                inp: a.slot("in_channels", scope)?,
                out: a.dim("out_channels", scope, None)?,
                k: a.dim("kernel_size", scope, None)?,
                stride: a.dim("stride", scope, Some(Dim::lit(1)))?,
                padding: a.dim("padding", scope, Some(Dim::lit(0)))?,
                dilation: a.dim("dilation", scope, Some(Dim::lit(1)))?,
                groups: a.dim("groups", scope, Some(Dim::lit(1)))?,
                bias: a.expr("bias")?,
            }
        }
        "MaxPool2d" | "AvgPool2d" => {
            let max = name == "MaxPool2d";
            let mut a = bind(
                if max { "MaxPool2d" } else { "AvgPool2d" },
                &["kernel_size", "stride", "padding"],
            )?;
            let k = a.dim("kernel_size", scope, None)?;
            let stride = a.dim("stride", scope, Some(k.clone()))?;
            Kind::Pool {
                max,
                k,
                stride,
                padding: a.dim("padding", scope, Some(Dim::lit(0)))?,
            }
        }
        "AdaptiveAvgPool2d" => {
            let mut a = bind("AdaptiveAvgPool2d", &["output_size", "output_width"])?;
            let h = a.dim("output_size", scope, None)?;
            let w = a.dim("output_width", scope, Some(h.clone()))?;
            Kind::AdaptiveAvgPool { h, w }
        }
        "Flatten" => {
            let mut a = bind("Flatten", &["start_dim", "end_dim"])?;
            Kind::Flatten {
                start: a.int("start_dim", 1)?,
                end: a.int("end_dim", -1)?,
            }
        }
        "ReLU" | "Relu" | "SiLU" | "Silu" | "Tanh" | "Sigmoid" => {
            let act = match name.as_str() {
                "ReLU" | "Relu" => Act::ReLU,
                "SiLU" | "Silu" => Act::SiLU,
                "Tanh" => Act::Tanh,
                _ => Act::Sigmoid,
            };
            bind(
                ROWS.iter()
                    .find(|r| r.eq_ignore_ascii_case(&name))
                    .copied()
                    .unwrap_or("ReLU"),
                &[],
            )?;
            Kind::Act { act, arg: None }
        }
        "GELU" | "Gelu" => {
            let mut a = bind("GELU", &["approximate"])?;
            let arg = a.expr("approximate")?;
            if let Some(e) = &arg {
                match e {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) if s.value() == "tanh" || s.value() == "none" => {}
                    _ => {
                        return Err(syn::Error::new(
                            e.span(),
                            "GELU's `approximate` is \"none\" or \"tanh\"",
                        ));
                    }
                }
            }
            Kind::Act {
                act: Act::Gelu,
                arg,
            }
        }
        "LeakyReLU" => {
            let mut a = bind("LeakyReLU", &["negative_slope"])?;
            Kind::Act {
                act: Act::LeakyReLU,
                arg: a.expr("negative_slope")?,
            }
        }
        "Softmax" => {
            let mut a = bind("Softmax", &["dim"])?;
            let dim = a.required("dim")?;
            let dim = int_lit(&dim).ok_or_else(|| {
                syn::Error::new(dim.span(), "Softmax's `dim` must be an integer literal")
            })?;
            Kind::Softmax { dim }
        }
        "MultiheadAttention" => {
            let mut a = bind(
                "MultiheadAttention",
                &["embed_dim", "num_heads", "batch_first"],
            )?;
            Kind::Mha {
                e: a.slot("embed_dim", scope)?,
                heads: a.dim("num_heads", scope, None)?,
                batch_first: a.bool_lit("batch_first", false)?,
            }
        }
        "Sequential" => {
            let elems = match args {
                PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                    GenericArgument::Type(Type::Tuple(t)) => t.elems.iter().collect::<Vec<_>>(),
                    GenericArgument::Type(t) => vec![t],
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "write `Sequential<(Layer, Layer, ..)>`",
                        ));
                    }
                },
                _ => {
                    return Err(syn::Error::new(
                        span,
                        "write `Sequential<(Layer, Layer, ..)>`",
                    ));
                }
            };
            let mut layers = vec![];
            for t in elems {
                layers.push(parse_layer(t, scope)?);
            }
            Kind::Sequential(layers)
        }
        _ => {
            if let Some(s) = suggest(&name) {
                return Err(syn::Error::new(
                    seg.ident.span(),
                    format!("unknown layer `{name}`; did you mean `{s}`?"),
                ));
            }
            let mut dims = vec![];
            if let PathArguments::AngleBracketed(a) = args {
                for g in &a.args {
                    let e = match g {
                        GenericArgument::Const(e) => e.clone(),
                        GenericArgument::Type(t) => expr_of_type(t).ok_or_else(|| {
                            syn::Error::new(t.span(), "a model's parameters are sizes")
                        })?,
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "a model's parameters are sizes",
                            ));
                        }
                    };
                    dims.push(dim_of_expr(&e, scope)?);
                }
            }
            Kind::Model {
                name: seg.ident.clone(),
                args: dims,
                ty: ty.clone(),
            }
        }
    };
    Ok(Layer {
        kind,
        span,
        row: if let Some(r) = ROWS.iter().find(|r| r.eq_ignore_ascii_case(&name)) {
            r.to_string()
        } else {
            name
        },
    })
}
