//! The forward body: IR to Rust over `Tensor` (references where an op
//! borrows, owned values where a binding takes them).

use super::{dim_isize, dim_usize, runtime_check};
use crate::analyse::ir::{CallHow, Callee, Ir, IrBlock, IrStmt, LetPat, MArg, RuntimeShape};
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

pub struct Gen {
    /// `Model::forward`, for run-time messages.
    pub what: String,
}

impl Gen {
    /// An expression of type `&Tensor`.
    fn by_ref(&self, ir: &Ir) -> TokenStream {
        match ir {
            Ir::Var(id) => quote!(&#id),
            other => {
                let v = self.value(other);
                quote!(&(#v))
            }
        }
    }

    /// A layer or model call on its arguments `refs` (each a `&Tensor`
    /// already evaluated), as the expression that makes its output.
    fn call(&self, callee: &Callee, how: &CallHow, refs: &[TokenStream]) -> TokenStream {
        let target = match callee {
            Callee::Field(f) => quote!(self.#f),
            Callee::Var(v) => quote!((*#v)),
        };
        match how {
            CallHow::Forward { checkpoint: false } => {
                quote!(::tapir::nn::Forward::forward(&#target, #(#refs),*))
            }
            CallHow::Model { checkpoint: false } => {
                quote!(#target.__tapir_forward(#(#refs),*))
            }
            CallHow::Forward { checkpoint: true } | CallHow::Model { checkpoint: true } => {
                // The layer is an `Arc` field: the recompute owns a handle.
                let xs = (0..refs.len()).map(|i| quote!(&__tapir_xs[#i]));
                let call = match how {
                    CallHow::Model { .. } => {
                        quote!(__tapir_layer.__tapir_forward(#(#xs),*))
                    }
                    _ => quote!(::tapir::nn::Forward::forward(&*__tapir_layer, #(#xs),*)),
                };
                quote!({
                    let __tapir_layer = ::std::sync::Arc::clone(&#target);
                    ::tapir::checkpoint(
                        move |__tapir_xs: &[::tapir::Tensor]| #call,
                        &[#(::core::clone::Clone::clone(#refs)),*],
                    )
                })
            }
            CallHow::WithState => {
                quote!(#target.forward(#(#refs),*, ::core::option::Option::None))
            }
            CallHow::Attention {
                key_padding_mask,
                attn_mask,
                need_weights,
                is_causal,
            } => {
                let opt = |m: &Option<Box<Ir>>| match m {
                    Some(ir) => {
                        let r = self.by_ref(ir);
                        quote!(::core::option::Option::Some(#r))
                    }
                    None => quote!(::core::option::Option::None),
                };
                let (kpm, am) = (opt(key_padding_mask), opt(attn_mask));
                let call =
                    quote!(#target.forward(#(#refs),*, #kpm, #am, #need_weights, #is_causal));
                if *need_weights {
                    quote!({ let (out, weights) = #call; (out, weights.expect("MultiheadAttention returns weights when need_weights is true")) })
                } else {
                    quote!(#call.0)
                }
            }
        }
    }

    /// An owned value (`Tensor`, a tuple, or a scalar).
    fn value(&self, ir: &Ir) -> TokenStream {
        match ir {
            Ir::Var(id) => quote!(::core::clone::Clone::clone(&#id)),
            Ir::Scalar(e) => quote!(#e),
            Ir::Call { callee, how, args } => {
                // Named for the profiler and for export errors (`fc1`, `block`).
                let label = match callee {
                    Callee::Field(f) => f.to_string(),
                    Callee::Var(v) => v.to_string(),
                };
                // Arguments are evaluated before entering the layer's scope,
                // so the ops that make them are not named as the layer's.
                let mut binds = Vec::new();
                let mut refs = Vec::new();
                for (i, arg) in args.iter().enumerate() {
                    match arg {
                        Ir::Var(id) => refs.push(quote!(&#id)),
                        other => {
                            let name = format_ident!("__tapir_arg{i}");
                            let v = self.value(other);
                            binds.push(quote!(let #name = #v;));
                            refs.push(quote!(&#name));
                        }
                    }
                }
                let call = self.call(callee, how, &refs);
                quote!({ #(#binds)* ::tapir::macro_support::in_module(#label, || #call) })
            }
            Ir::Method { recv, name, args } => {
                let r = self.by_ref(recv);
                let args = args.iter().map(|a| match a {
                    MArg::Tensor(t) => self.by_ref(t),
                    MArg::Int(v) => {
                        let lit = Literal::i64_unsuffixed(*v);
                        quote!(#lit)
                    }
                    MArg::Shape(ds) => {
                        let ds = ds.iter().map(|d| match d {
                            Some(d) => dim_isize(d),
                            None => quote!(-1isize),
                        });
                        quote!(&[#(#ds),*])
                    }
                    MArg::Ints(v) => {
                        let v = v.iter().map(|x| Literal::i64_unsuffixed(*x));
                        quote!(&[#(#v),*])
                    }
                    MArg::Size(d) => dim_usize(d),
                    MArg::Verbatim(e) => quote!(#e),
                });
                quote!(::tapir::Tensor::#name(#r, #(#args),*))
            }
            Ir::Join { stack, parts, dim } => {
                let refs = parts.iter().map(|p| self.by_ref(p));
                let f = if *stack { quote!(stack) } else { quote!(cat) };
                let d = Literal::i64_unsuffixed(*dim);
                quote!(::tapir::Tensor::#f(&[#(#refs),*], #d))
            }
            Ir::Binary {
                op,
                l,
                r,
                l_tensor,
                r_tensor,
            } => {
                let side = |ir: &Ir, tensor: bool| {
                    if tensor {
                        self.by_ref(ir)
                    } else {
                        let v = self.value(ir);
                        quote!(::tapir::macro_support::scalar(#v))
                    }
                };
                let (a, b) = (side(l, *l_tensor), side(r, *r_tensor));
                let path = match op {
                    syn::BinOp::Add(_) => quote!(::core::ops::Add::add),
                    syn::BinOp::Sub(_) => quote!(::core::ops::Sub::sub),
                    syn::BinOp::Mul(_) => quote!(::core::ops::Mul::mul),
                    _ => quote!(::core::ops::Div::div),
                };
                quote!(#path(#a, #b))
            }
            Ir::Neg(x) => {
                let r = self.by_ref(x);
                quote!(::core::ops::Neg::neg(#r))
            }
            Ir::Tuple(xs) => {
                let vs = xs.iter().map(|x| self.value(x));
                quote!((#(#vs),*))
            }
            Ir::If { cond, then, els } => {
                let t = self.block(then);
                match els {
                    Some(e) => {
                        let e = self.value(e);
                        quote!(if #cond #t else { #e })
                    }
                    None => quote!(if #cond #t),
                }
            }
            Ir::Block(b) => self.block(b),
            Ir::Unchecked { code, check } => {
                let (v, c) = self.unchecked_check(check);
                quote!({ let #v: ::tapir::Tensor = #code; #c #v })
            }
        }
    }

    /// The temporary holding an `unchecked!` value and the statements that
    /// check its shape (panicking with the model's name on a mismatch).
    fn unchecked_check(&self, check: &RuntimeShape) -> (TokenStream, TokenStream) {
        let v = quote!(__tapir_unchecked);
        let shape = RuntimeShape {
            what: self.what.clone(),
            ..check.clone()
        };
        let c = runtime_check(&shape, &v, "", &|e| quote!(::core::panic!("{}", #e)));
        (v, c)
    }

    pub fn block(&self, b: &IrBlock) -> TokenStream {
        let stmts = b.stmts.iter().map(|s| self.stmt(s));
        let tail = b.tail.as_ref().map(|t| self.value(t));
        quote!({ #(#stmts)* #tail })
    }

    fn stmt(&self, s: &IrStmt) -> TokenStream {
        match s {
            IrStmt::Let { pat, init } => {
                let tuple = matches!(pat, LetPat::Tuple(_));
                let pat = let_pattern(pat);
                // An unchecked value's fresh run-time dims must outlive the statement.
                if let (Ir::Unchecked { code, check }, false) = (init, tuple) {
                    let (v, c) = self.unchecked_check(check);
                    return quote!(let #v: ::tapir::Tensor = #code; #c let #pat = #v;);
                }
                let v = self.value(init);
                quote!(let #pat = #v;)
            }
            IrStmt::Assign { name, value } => {
                let v = self.value(value);
                quote!(#name = #v;)
            }
            IrStmt::For { var, field, body } => {
                let b = self.block(body);
                quote!(for #var in self.#field.iter() #b)
            }
            IrStmt::Expr(e) => {
                let v = self.value(e);
                quote!(let _ = #v;)
            }
        }
    }
}

/// A `let` pattern as Rust.
fn let_pattern(p: &LetPat) -> TokenStream {
    match p {
        LetPat::Name(id, true) => quote!(mut #id),
        LetPat::Name(id, false) => quote!(#id),
        LetPat::Wild => quote!(_),
        LetPat::Tuple(ps) => {
            let ps = ps.iter().map(let_pattern);
            quote!((#(#ps,)*))
        }
    }
}
