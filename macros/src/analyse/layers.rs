//! Field types: a row of the layer table (`rows/`), `Sequential<(..)>`, an
//! array `[Layer; N]` (a ModuleList) or another model; and the binding of a
//! row's written arguments to its parameters.

use super::dims::{DimScope, dim_of_expr, int_lit};
use super::rows::{Row, TABLE, find};
use crate::shape::Dim;
use proc_macro2::Span;
use std::cell::RefCell;
use std::rc::Rc;
use syn::spanned::Spanned;
use syn::{Expr, GenericArgument, PathArguments, Type};

/// The names of the table's rows (`model!(@layer_table)`), with `Sequential`.
pub fn row_names() -> Vec<&'static str> {
    TABLE.iter().map(|r| r.name).chain(["Sequential"]).collect()
}

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

#[derive(Clone)]
pub enum Kind {
    /// A row of the layer table.
    Row(Rc<dyn Row>),
    Sequential(Vec<Layer>),
    List {
        elem: Box<Layer>,
        n: Dim,
    },
    /// A hand-written module (`#[module(init)]`): built by `init`, called
    /// through `unchecked!` since its shapes are unknown here.
    Custom {
        ty: Box<Type>,
        init: Option<syn::Expr>,
    },
    /// Another `model!` model; its signature is looked up by name.
    Model {
        name: syn::Ident,
        args: Vec<Dim>,
        ty: Box<Type>,
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

/// A row's written arguments, bound to its parameters by position or name.
pub struct Args {
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

    pub fn expr(&mut self, name: &str) -> syn::Result<Option<Expr>> {
        match self.take(name) {
            None => Ok(None),
            Some(ArgVal::Expr(e)) => Ok(Some(e)),
            Some(ArgVal::Infer(s)) => Err(syn::Error::new(
                s,
                format!("`{}`'s `{name}` cannot be inferred; write it out", self.row),
            )),
        }
    }

    pub fn required(&mut self, name: &str) -> syn::Result<Expr> {
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

    pub fn dim(
        &mut self,
        name: &str,
        scope: &mut DimScope,
        default: Option<Dim>,
    ) -> syn::Result<Dim> {
        match (self.expr(name)?, default) {
            (Some(e), _) => dim_of_expr(&e, scope),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.missing(name)),
        }
    }

    pub fn slot(&mut self, name: &str, scope: &mut DimScope) -> syn::Result<Slot> {
        match self.take(name) {
            Some(ArgVal::Infer(_)) => Ok(Slot::Infer(Rc::new(RefCell::new(None)))),
            Some(ArgVal::Expr(e)) => Ok(Slot::Known(dim_of_expr(&e, scope)?)),
            None => Err(self.missing(name)),
        }
    }

    pub fn int(&mut self, name: &str, default: i64) -> syn::Result<i64> {
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

    pub fn bool_lit(&mut self, name: &str, default: bool) -> syn::Result<bool> {
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
    row_names()
        .into_iter()
        .map(|r| (distance(&lower, &r.to_lowercase()), r))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, r)| r)
}

/// Reads a field type: a table row, a `Sequential<(..)>`, an array `[L; N]`
/// (a ModuleList) or another model (`models`: the names known to be models).
pub fn parse_layer(ty: &Type, scope: &mut DimScope, models: &[String]) -> syn::Result<Layer> {
    let span = ty.span();
    let path = match ty {
        Type::Array(a) => {
            let elem = parse_layer(&a.elem, scope, models)?;
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
        Type::Paren(p) => return parse_layer(&p.elem, scope, models),
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
    if let Some(spec) = find(&name) {
        let mut a = bind_args(spec.name, spec.params, args, span)?;
        return Ok(Layer {
            kind: Kind::Row((spec.parse)(&mut a, scope)?),
            span,
            row: spec.name.to_string(),
        });
    }
    let kind = match name.as_str() {
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
                layers.push(parse_layer(t, scope, models)?);
            }
            Kind::Sequential(layers)
        }
        _ => {
            // A model of this block (or one whose signature is known) is
            // not a misspelt row, however close its name is to one.
            if let Some(s) = suggest(&name).filter(|_| !models.contains(&name)) {
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
                ty: Box::new(ty.clone()),
            }
        }
    };
    Ok(Layer {
        kind,
        span,
        row: name,
    })
}
