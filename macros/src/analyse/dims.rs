//! Reading dimensions out of syntax: `256`, `D`, `IN * 2`, `{D / H}`, `B`.

use crate::shape::{Dim, SymKind};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Lit};

/// The names a dimension may use.
#[derive(Clone, Default)]
pub struct DimScope {
    /// The struct's `const N: usize` parameters.
    pub consts: Vec<String>,
    /// Run-time dims bound so far (in `forward`); `None` outside `forward`.
    pub runtime: Option<Vec<String>>,
    /// Whether an unknown capitalised name introduces a new run-time dim
    /// (true only in `forward`'s input shapes).
    pub bind_new: bool,
}

impl DimScope {
    pub fn consts(consts: &[String]) -> DimScope {
        DimScope {
            consts: consts.to_vec(),
            ..DimScope::default()
        }
    }

    fn lookup(&mut self, name: &str, span: proc_macro2::Span) -> syn::Result<Dim> {
        if self.consts.iter().any(|c| c == name) {
            return Ok(Dim::sym(name, SymKind::Const));
        }
        if let Some(rt) = &mut self.runtime {
            if rt.iter().any(|c| c == name) {
                return Ok(Dim::sym(name, SymKind::Runtime));
            }
            if self.bind_new {
                rt.push(name.to_string());
                return Ok(Dim::sym(name, SymKind::Runtime));
            }
            return Err(syn::Error::new(
                span,
                format!(
                    "unknown dimension `{name}`: dims are numbers, the struct's const generics{} or dims named in `forward`'s inputs{}",
                    list(&self.consts),
                    list(rt)
                ),
            ));
        }
        Err(syn::Error::new(
            span,
            format!(
                "unknown dimension `{name}`: a layer's sizes are numbers or the struct's const generics{}",
                list(&self.consts)
            ),
        ))
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

/// An integer literal's value.
pub fn int_lit(e: &Expr) -> Option<i64> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => i.base10_parse().ok(),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => int_lit(&u.expr).map(|v| -v),
        Expr::Paren(p) => int_lit(&p.expr),
        Expr::Group(g) => int_lit(&g.expr),
        _ => None,
    }
}

/// A dimension expression: integers, names, `+ - * /` (floor) and `%`-free parens.
pub fn dim_of_expr(e: &Expr, scope: &mut DimScope) -> syn::Result<Dim> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => {
                let v: i64 = i.base10_parse()?;
                Ok(Dim::lit(v))
            }
            _ => Err(syn::Error::new(l.span(), "a dimension is a whole number")),
        },
        Expr::Path(p) => match p.path.get_ident() {
            Some(id) => scope.lookup(&id.to_string(), id.span()),
            None => Err(syn::Error::new(
                p.span(),
                "a dimension is a number or a single name",
            )),
        },
        Expr::Paren(p) => dim_of_expr(&p.expr, scope),
        Expr::Group(g) => dim_of_expr(&g.expr, scope),
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(inner, None) => dim_of_expr(inner, scope),
            _ => Err(syn::Error::new(
                b.span(),
                "a dimension block holds one expression",
            )),
        },
        Expr::Binary(b) => {
            let l = dim_of_expr(&b.left, scope)?;
            let r = dim_of_expr(&b.right, scope)?;
            match b.op {
                BinOp::Add(_) => Ok(l.add(&r)),
                BinOp::Sub(_) => Ok(l.sub(&r)),
                BinOp::Mul(_) => Ok(l.mul(&r)),
                BinOp::Div(_) => l
                    .floor_div(&r)
                    .ok_or_else(|| syn::Error::new(b.span(), "division by zero in a dimension")),
                _ => Err(syn::Error::new(
                    b.op.span(),
                    "dimensions support `+`, `-`, `*` and `/` only",
                )),
            }
        }
        _ => Err(syn::Error::new(
            e.span(),
            "a dimension is a number, a const generic, a named dim or arithmetic on them",
        )),
    }
}
