//! The compile-time shape checks of a model with const generics: each
//! relation the macro could not decide becomes an `if !cond { panic!(..) }`
//! in an associated const, whose message names the instantiation and its
//! values (`.. (in `Encoder<E = 64, H = 5>`)`); a model holding generic
//! models evaluates theirs too, so a bad instantiation written in a
//! non-generic model fails `cargo check`, at that field.

use super::dim_i64;
use crate::analyse::layers::{Kind, Layer};
use crate::analyse::{AssertKind, Model};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{GenericParam, Ident};

/// The statements of `__TAPIR_SHAPE_CHECKS`, and the free `const _` items
/// that force the children's checks when the model itself is not generic.
pub fn shape_checks(m: &Model) -> (TokenStream, TokenStream) {
    let def = &m.def;
    let inst = instantiation(&def.name, &def.generics);
    let mut inner = TokenStream::new();
    for a in &m.assertions {
        let cond = match &a.kind {
            AssertKind::Equal(x, y) => {
                let (x, y) = (dim_i64(x), dim_i64(y));
                quote!(#x == #y)
            }
            AssertKind::Divides(n, d) => {
                let (n, d) = (dim_i64(n), dim_i64(d));
                quote!(#d != 0 && #n % #d == 0)
            }
        };
        let msg = &a.msg;
        inner.extend(quote_spanned!(a.span=>
            if !(#cond) {
                ::core::panic!("{}", ::tapir::macro_support::ConstMessage::new().push(#msg) #inst .as_str());
            }
        ));
    }
    let mut children = vec![];
    for (_, layer) in &m.fields {
        model_types(layer, &mut children);
    }
    let generic = !def.generics.params.is_empty();
    let mut outer = TokenStream::new();
    for (ty, span) in children {
        if generic {
            inner.extend(quote_spanned!(span=> let () = <#ty>::__TAPIR_SHAPE_CHECKS;));
        } else {
            outer.extend(quote_spanned!(span=> const _: () = <#ty>::__TAPIR_SHAPE_CHECKS;));
        }
    }
    (inner, outer)
}

/// ` .push(" (in `Encoder<").push("E = ").push_int(E as i128) .. .push(">`)")`.
fn instantiation(name: &Ident, generics: &syn::Generics) -> TokenStream {
    let mut parts = quote!(.push(concat!(" (in `", stringify!(#name), "<")));
    for (i, p) in generics.params.iter().enumerate() {
        if let GenericParam::Const(c) = p {
            let id = &c.ident;
            let sep = if i == 0 { "" } else { ", " };
            let label = format!("{sep}{id} = ");
            parts.extend(quote!(.push(#label).push_int(#id as i128)));
        }
    }
    parts.extend(quote!(.push(">`)")));
    parts
}

/// The types of the `model!` models among a field's layers (inside arrays
/// and Sequentials too), with the span of where they are written.
fn model_types(layer: &Layer, out: &mut Vec<(syn::Type, Span)>) {
    match &layer.kind {
        Kind::Model { ty, .. } => out.push(((**ty).clone(), ty.span())),
        Kind::List { elem, .. } => model_types(elem, out),
        Kind::Sequential(ls) => ls.iter().for_each(|l| model_types(l, out)),
        Kind::Row(_) | Kind::Custom { .. } => {}
    }
}
