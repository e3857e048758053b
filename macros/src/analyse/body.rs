//! Walks a `forward` body: binds every tensor to a symbolic shape, applies the
//! layer and method rules, and records errors (all of them, each spanned at
//! its token) and deferred assertions. Produces the IR that codegen emits.

use super::dims::{DimScope, dim_of_expr};
use super::facts::{Assertion, FactSink};
use super::ir::{Callee, Ir, IrBlock, IrStmt, LetPat, RuntimeShape};
use super::layers::{Kind, Layer};
use super::methods;
use crate::parse::ShapeSyntax;
use crate::shape::{Dim, Shape, SymKind, show};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Ident, Pat, Stmt};

/// A model's typed forward signature, as other models see it.
#[derive(Clone)]
pub struct Sig {
    pub generics: Vec<String>,
    pub inputs: Vec<Shape>,
    pub outputs: Vec<Shape>,
    pub out_tuple: bool,
}

#[derive(Clone)]
pub enum Val {
    /// A tensor: its shape and where it came from (for messages).
    Tensor(Shape, String),
    Tuple(Vec<Val>),
    Scalar,
    /// A layer value (a loop variable over an array of layers).
    Layer(Box<Layer>, String),
    /// The result of an expression that already has an error: stays quiet.
    Poison,
}

pub(super) struct Binding {
    pub(super) val: Val,
    pub(super) mutable: bool,
}

pub struct Checker<'a> {
    pub fields: &'a [(Ident, Layer)],
    pub sigs: &'a HashMap<String, Sig>,
    pub scope: DimScope,
    env: Vec<HashMap<String, Binding>>,
    pub errors: Vec<syn::Error>,
    pub assertions: Vec<Assertion>,
    /// Fields whose type had an error (already reported).
    pub broken: Vec<String>,
    /// `#[checkpoint]` fields: their calls are recomputed in backward.
    pub checkpointed: Vec<String>,
}

pub(super) fn from(origin: &str) -> String {
    if origin.is_empty() {
        String::new()
    } else {
        format!(" from {origin}")
    }
}

impl<'a> Checker<'a> {
    pub fn new(
        fields: &'a [(Ident, Layer)],
        sigs: &'a HashMap<String, Sig>,
        scope: DimScope,
    ) -> Self {
        Checker {
            fields,
            sigs,
            scope,
            env: vec![HashMap::new()],
            errors: vec![],
            assertions: vec![],
            broken: vec![],
            checkpointed: vec![],
        }
    }

    pub fn bind_input(&mut self, name: &Ident, val: Val) {
        self.env[0].insert(
            name.to_string(),
            Binding {
                val,
                mutable: false,
            },
        );
    }

    pub(super) fn error(&mut self, span: Span, msg: impl Into<String>) -> (Val, Ir) {
        self.errors.push(syn::Error::new(span, msg.into()));
        (Val::Poison, Ir::Tuple(vec![]))
    }

    /// Runs a rule with facts recorded at `span`; fills `{from}` in errors.
    pub(super) fn rule<T>(
        &mut self,
        span: Span,
        origin: &str,
        f: impl FnOnce(&mut FactSink) -> Result<T, String>,
    ) -> Option<T> {
        let before = self.assertions.len();
        let mut sink = FactSink {
            assertions: &mut self.assertions,
            span,
        };
        let result = f(&mut sink);
        for a in &mut self.assertions[before..] {
            a.msg = a.msg.replace("{from}", &from(origin));
        }
        match result {
            Ok(v) => Some(v),
            Err(msg) => {
                self.errors
                    .push(syn::Error::new(span, msg.replace("{from}", &from(origin))));
                None
            }
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<&Binding> {
        self.env.iter().rev().find_map(|s| s.get(name))
    }

    pub(super) fn field(&self, name: &Ident) -> Option<&'a Layer> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, l)| l)
    }

    pub fn block(&mut self, b: &syn::Block) -> (Val, IrBlock) {
        self.env.push(HashMap::new());
        let mut out = IrBlock::default();
        let mut val = Val::Tuple(vec![]);
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                Stmt::Local(local) => {
                    if let Some(st) = self.local(local) {
                        out.stmts.push(st);
                    }
                }
                Stmt::Expr(e, semi) => {
                    if let Expr::Assign(a) = e {
                        if let Some(st) = self.assign(a) {
                            out.stmts.push(st);
                        }
                    } else if let Expr::ForLoop(f) = e {
                        if let Some(st) = self.for_loop(f) {
                            out.stmts.push(st);
                        }
                    } else if semi.is_none() && i + 1 == n {
                        let (v, ir) = self.expr(e);
                        val = v;
                        out.tail = Some(Box::new(ir));
                    } else {
                        let (_, ir) = self.expr(e);
                        out.stmts.push(IrStmt::Expr(ir));
                    }
                }
                Stmt::Macro(m) => {
                    let e = Expr::Macro(syn::ExprMacro {
                        attrs: m.attrs.clone(),
                        mac: m.mac.clone(),
                    });
                    let (v, ir) = self.expr(&e);
                    if m.semi_token.is_none() && i + 1 == n {
                        val = v;
                        out.tail = Some(Box::new(ir));
                    } else {
                        out.stmts.push(IrStmt::Expr(ir));
                    }
                }
                Stmt::Item(item) => {
                    self.error(
                        item.span(),
                        "items (fn, struct, use) cannot be declared inside `forward`",
                    );
                }
            }
        }
        self.env.pop();
        (val, out)
    }

    fn local(&mut self, l: &syn::Local) -> Option<IrStmt> {
        let Some(init) = &l.init else {
            self.error(
                l.span(),
                "a `let` in `forward` needs a value: `let h = ..;`",
            );
            return None;
        };
        if let Some((_, e)) = &init.diverge {
            self.error(e.span(), "`let .. else` is not supported in `forward`");
            return None;
        }
        let (val, ir) = self.expr(&init.expr);
        let mut pat = &l.pat;
        if let Pat::Type(t) = pat {
            if !matches!(val, Val::Scalar | Val::Poison) {
                self.error(
                    t.ty.span(),
                    "annotate a tensor's shape with `unchecked!(expr => [..])`, not a type",
                );
                return None;
            }
            pat = &t.pat;
        }
        let pat = self.bind(pat, val)?;
        Some(IrStmt::Let { pat, init: ir })
    }

    /// Binds the names of `pat` (plain names, `_`, and tuples of them,
    /// nested) to the parts of `val`.
    fn bind(&mut self, pat: &Pat, val: Val) -> Option<LetPat> {
        match pat {
            Pat::Ident(id) if id.by_ref.is_none() && id.subpat.is_none() => {
                let mutable = id.mutability.is_some();
                self.env
                    .last_mut()?
                    .insert(id.ident.to_string(), Binding { val, mutable });
                Some(LetPat::Name(id.ident.clone(), mutable))
            }
            Pat::Wild(_) => Some(LetPat::Wild),
            Pat::Tuple(t) => {
                let n = t.elems.len();
                let vals = match val {
                    Val::Tuple(vs) if vs.len() == n => vs,
                    Val::Poison | Val::Scalar => vec![val; n],
                    other => {
                        self.error(
                            pat.span(),
                            format!(
                                "this pattern takes {n} values, but the right side gives {}",
                                describe(&other)
                            ),
                        );
                        vec![Val::Poison; n]
                    }
                };
                let parts = t
                    .elems
                    .iter()
                    .zip(vals)
                    .map(|(p, v)| self.bind(p, v))
                    .collect::<Option<Vec<_>>>()?;
                Some(LetPat::Tuple(parts))
            }
            other => {
                self.error(
                    other.span(),
                    "`forward` binds plain names, `_` or tuples of them",
                );
                Some(LetPat::Wild)
            }
        }
    }

    fn assign(&mut self, a: &syn::ExprAssign) -> Option<IrStmt> {
        let Expr::Path(p) = &*a.left else {
            self.error(a.left.span(), "`forward` assigns to plain names only");
            return None;
        };
        let name = p.path.get_ident()?.clone();
        let (val, ir) = self.expr(&a.right);
        let Some(b) = self.lookup(&name.to_string()) else {
            self.error(
                name.span(),
                format!("`{name}` is not bound; write `let {name} = ..` first"),
            );
            return None;
        };
        if !b.mutable {
            self.error(
                name.span(),
                format!("`{name}` is not mutable; declare it with `let mut {name}`"),
            );
            return None;
        }
        if let (Val::Tensor(old, _), Val::Tensor(new, origin)) = (&b.val, &val) {
            let (old, new, origin) = (old.clone(), new.clone(), origin.clone());
            let msg = || {
                format!(
                    "`{name}` has shape `{}`, but this assigns `{}`{{from}}; bind the new shape with `let` instead",
                    show(&old),
                    show(&new)
                )
            };
            if self
                .rule(a.right.span(), &origin, |f| {
                    methods::same_shape(&new, &old, f, &msg)
                })
                .is_none()
            {
                self.set_var(&name.to_string(), Val::Poison);
                return None;
            }
            // Later errors name the latest producer of the value.
            self.set_var(&name.to_string(), Val::Tensor(old, origin));
        }
        Some(IrStmt::Assign { name, value: ir })
    }

    fn set_var(&mut self, name: &str, val: Val) {
        if let Some(b) = self.env.iter_mut().rev().find_map(|s| s.get_mut(name)) {
            b.val = val;
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Option<IrStmt> {
        let Pat::Ident(var) = &*f.pat else {
            self.error(
                f.pat.span(),
                "loop over layers with `for layer in &self.field`",
            );
            return None;
        };
        let field = match &*f.expr {
            Expr::Reference(r) => self_field(&r.expr),
            Expr::MethodCall(m) if m.method == "iter" && m.args.is_empty() => {
                self_field(&m.receiver)
            }
            _ => None,
        };
        let Some(field) = field else {
            self.error(
                f.expr.span(),
                "`forward` loops over an array of layers: `for layer in &self.field`",
            );
            return None;
        };
        let Some(layer) = self.field(&field) else {
            if !self.broken.contains(&field.to_string()) {
                self.error(field.span(), format!("no field `{field}` in this model"));
            }
            return None;
        };
        let Kind::List { elem, .. } = &layer.kind else {
            self.error(
                field.span(),
                format!("`self.{field}` is a {}, not an array of layers", layer.row),
            );
            return None;
        };
        self.env.push(HashMap::new());
        let label = format!("`self.{field}`");
        self.env.last_mut()?.insert(
            var.ident.to_string(),
            Binding {
                val: Val::Layer(elem.clone(), label),
                mutable: false,
            },
        );
        let (_, body) = self.block(&f.body);
        self.env.pop();
        Some(IrStmt::For {
            var: var.ident.clone(),
            field,
            body,
        })
    }

    pub fn expr(&mut self, e: &Expr) -> (Val, Ir) {
        match e {
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident()
                    && let Some(b) = self.lookup(&id.to_string())
                {
                    let ir = match &b.val {
                        Val::Scalar => Ir::Scalar(e.clone()),
                        _ => Ir::Var(id.clone()),
                    };
                    return (b.val.clone(), ir);
                }
                (Val::Scalar, Ir::Scalar(e.clone()))
            }
            Expr::Lit(_) | Expr::Cast(_) => (Val::Scalar, Ir::Scalar(e.clone())),
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Reference(r) if r.mutability.is_none() => self.expr(&r.expr),
            Expr::Binary(b) => self.binary(b, e),
            Expr::Unary(u) => {
                let (v, ir) = self.expr(&u.expr);
                match (&u.op, &v) {
                    (syn::UnOp::Neg(_), Val::Tensor(..)) => (v, Ir::Neg(Box::new(ir))),
                    (_, Val::Scalar | Val::Poison) => (v, Ir::Scalar(e.clone())),
                    _ => self.error(u.span(), "only `-` applies to a tensor here"),
                }
            }
            Expr::Tuple(t) => {
                let (vals, irs): (Vec<_>, Vec<_>) = t.elems.iter().map(|x| self.expr(x)).unzip();
                (Val::Tuple(vals), Ir::Tuple(irs))
            }
            Expr::Block(b) => {
                let (v, ir) = self.block(&b.block);
                (v, Ir::Block(Box::new(ir)))
            }
            Expr::If(i) => self.if_expr(i),
            Expr::MethodCall(m) => self.method_call(m, e),
            Expr::Call(c) => self.call(c),
            Expr::Macro(m) if m.mac.path.is_ident("unchecked") => self.unchecked(m),
            Expr::Field(f) if self_field(e).is_some() => {
                self.error(f.span(), "call the layer: `self.field(x)`")
            }
            _ => self.error(e.span(), "the shape checker cannot follow this expression; wrap it as `unchecked!(expr => [shape])`"),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary, e: &Expr) -> (Val, Ir) {
        let (lv, li) = self.expr(&b.left);
        let (rv, ri) = self.expr(&b.right);
        let arith = matches!(
            b.op,
            BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_)
        );
        let (lt, rt) = (matches!(lv, Val::Tensor(..)), matches!(rv, Val::Tensor(..)));
        if matches!(lv, Val::Poison) || matches!(rv, Val::Poison) {
            return (Val::Poison, Ir::Tuple(vec![]));
        }
        if !lt && !rt {
            if matches!(lv, Val::Scalar) && matches!(rv, Val::Scalar) {
                return (Val::Scalar, Ir::Scalar(e.clone()));
            }
            return self.error(b.span(), "this operator does not apply to layers or tuples");
        }
        if !arith {
            return self.error(
                b.op.span(),
                "tensors combine with `+`, `-`, `*` and `/` here; comparisons need `unchecked!`",
            );
        }
        let shape = match (&lv, &rv) {
            (Val::Tensor(a, oa), Val::Tensor(c, oc)) => {
                let (a, c, oa) = (a.clone(), c.clone(), format!("{oa} and {oc}"));
                match self.rule(b.op.span(), &oa, |f| methods::broadcast(&a, &c, f)) {
                    Some(s) => s,
                    None => return (Val::Poison, Ir::Tuple(vec![])),
                }
            }
            (Val::Tensor(a, _), Val::Scalar) | (Val::Scalar, Val::Tensor(a, _)) => a.clone(),
            _ => return self.error(b.span(), "a tensor combines with tensors and numbers"),
        };
        let op_name = format!("the `{}`", quote::ToTokens::to_token_stream(&b.op));
        (
            Val::Tensor(shape, op_name),
            Ir::Binary {
                op: b.op,
                l: Box::new(li),
                r: Box::new(ri),
                l_tensor: lt,
                r_tensor: rt,
            },
        )
    }

    fn if_expr(&mut self, i: &syn::ExprIf) -> (Val, Ir) {
        let (cv, _) = self.expr(&i.cond);
        if !matches!(cv, Val::Scalar | Val::Poison) {
            return self.error(i.cond.span(), "an `if` condition is a bool, not a tensor");
        }
        let (tv, then) = self.block(&i.then_branch);
        let (ev, els) = match &i.else_branch {
            Some((_, e)) => {
                let (v, ir) = self.expr(e);
                (Some(v), Some(Box::new(ir)))
            }
            None => (None, None),
        };
        if let (Some(ev), Some((_, else_expr))) = (&ev, &i.else_branch) {
            self.agree(&tv, ev, else_expr.span());
        }
        let val = match ev {
            Some(_) => tv,
            None => Val::Tuple(vec![]),
        };
        (
            val,
            Ir::If {
                cond: (*i.cond).clone(),
                then: Box::new(then),
                els,
            },
        )
    }

    /// Both branches of an `if` must give the same shapes.
    fn agree(&mut self, a: &Val, b: &Val, span: Span) {
        match (a, b) {
            (Val::Tensor(x, _), Val::Tensor(y, oy)) => {
                let (x, y, oy) = (x.clone(), y.clone(), oy.clone());
                let msg = || {
                    format!(
                        "the branches of this `if` disagree: `{}` and `{}`{{from}}",
                        show(&x),
                        show(&y)
                    )
                };
                self.rule(span, &oy, |f| methods::same_shape(&y, &x, f, &msg));
            }
            (Val::Tuple(xs), Val::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys) {
                    self.agree(x, y, span);
                }
            }
            (Val::Poison, _) | (_, Val::Poison) | (Val::Scalar, Val::Scalar) => {}
            _ => {
                self.error(
                    span,
                    format!(
                        "the branches of this `if` disagree: {} and {}",
                        describe(a),
                        describe(b)
                    ),
                );
            }
        }
    }

    fn unchecked(&mut self, m: &syn::ExprMacro) -> (Val, Ir) {
        let parsed = m.mac.parse_body_with(|input: syn::parse::ParseStream| {
            let code: Expr = input.parse()?;
            input.parse::<syn::Token![=>]>()?;
            let shape: ShapeSyntax = input.parse()?;
            Ok((code, shape))
        });
        let (code, shape) = match parsed {
            Ok(v) => v,
            Err(e) => {
                return self.error(e.span(), format!("write `unchecked!(expr => [dims])`: {e}"));
            }
        };
        let before = self.scope.runtime.clone().unwrap_or_default();
        self.scope.bind_new = true;
        let mut dims = vec![];
        for d in &shape.dims {
            match dim_of_expr(d, &mut self.scope) {
                Ok(v) => {
                    let fresh = v
                        .symbols(SymKind::Runtime)
                        .into_iter()
                        .find(|s| !before.contains(s) && v == Dim::sym(s, SymKind::Runtime));
                    dims.push((v, fresh));
                }
                Err(e) => self.errors.push(e),
            }
        }
        self.scope.bind_new = false;
        let shape_val: Shape = dims.iter().map(|(d, _)| d.clone()).collect();
        let pattern = show(&shape_val);
        let check = RuntimeShape {
            what: "unchecked!".into(),
            pattern,
            dims,
        };
        (
            Val::Tensor(shape_val, "`unchecked!`".into()),
            Ir::Unchecked { code, check },
        )
    }

    fn call(&mut self, c: &syn::ExprCall) -> (Val, Ir) {
        let Expr::Path(p) = &*c.func else {
            return self.error(c.func.span(), "the shape checker cannot follow this call; wrap it as `unchecked!(expr => [shape])`");
        };
        let Some(id) = p.path.get_ident() else {
            return self.error(p.span(), "the shape checker cannot follow this call; wrap it as `unchecked!(expr => [shape])`");
        };
        let name = id.to_string();
        if let Some(Binding {
            val: Val::Layer(layer, label),
            ..
        }) = self.lookup(&name)
        {
            let (layer, label) = (layer.clone(), label.clone());
            let args: Vec<&Expr> = c.args.iter().collect();
            let field = label
                .trim_matches('`')
                .trim_start_matches("self.")
                .to_string();
            return self.layer_call(
                &layer,
                Callee::Var(id.clone()),
                &label,
                &field,
                &args,
                id.span(),
            );
        }
        if name == "cat" || name == "stack" {
            return self.join(c, name == "stack");
        }
        self.error(id.span(), format!("unknown function `{name}`: `forward` calls layers (`self.field(x)`), tensor methods, `cat` and `stack`; wrap other code as `unchecked!(expr => [shape])`"))
    }
}

impl Checker<'_> {
    /// The body's value against the declared output shape.
    pub fn check_output(&mut self, v: &Val, want: &Shape, declared: &str, span: Span) {
        match v {
            Val::Tensor(s, origin) => {
                let (s, origin) = (s.clone(), origin.clone());
                let msg = || {
                    format!(
                        "`forward` is declared to return `{declared}, but the body gives `{}`{{from}}",
                        show(&s)
                    )
                };
                self.rule(span, &origin, |f| methods::same_shape(&s, want, f, &msg));
            }
            Val::Poison => {}
            other => {
                let d = describe(other);
                self.error(
                    span,
                    format!("`forward` is declared to return `{declared}, but the body gives {d}"),
                );
            }
        }
    }
}

pub(super) fn f_equal(
    f: &mut FactSink,
    got: &Dim,
    want: &Dim,
    msg: &dyn Fn() -> String,
) -> Result<(), String> {
    super::rules::Facts::equal(f, got, want, msg)
}

impl FactSink<'_> {
    pub(super) fn divides_dyn(
        &mut self,
        n: &Dim,
        d: &Dim,
        msg: &dyn Fn() -> String,
    ) -> Result<(), String> {
        super::rules::Facts::divides(self, n, d, msg)
    }
}

pub(super) fn describe(v: &Val) -> String {
    match v {
        Val::Tensor(s, _) => format!("a tensor `{}`", show(s)),
        Val::Tuple(vs) => format!("a tuple of {}", vs.len()),
        Val::Scalar => "a number".into(),
        Val::Layer(l, _) => format!("a {} layer", l.row),
        Val::Poison => "a value with an error".into(),
    }
}

pub(super) fn is_self(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.path.is_ident("self"))
}

/// `self.name` -> `name`.
fn self_field(e: &Expr) -> Option<Ident> {
    match e {
        Expr::Field(f) if is_self(&f.base) => match &f.member {
            syn::Member::Named(n) => Some(n.clone()),
            syn::Member::Unnamed(_) => None,
        },
        Expr::Paren(p) => self_field(&p.expr),
        _ => None,
    }
}
