//! Each field's runtime type and the expression that builds it on the CPU
//! with PyTorch's defaults: a row builds itself; containers and models here.

use crate::analyse::layers::{Kind, Layer};
use proc_macro2::TokenStream;
use quote::quote;

use super::dim_usize;

/// The runtime type of a field.
pub fn runtime_type(l: &Layer) -> TokenStream {
    let nn = quote!(::tapir::nn);
    match &l.kind {
        Kind::Row(r) => r.runtime_type(),
        Kind::Sequential(_) => quote!(#nn::Sequential),
        Kind::List { elem, .. } => {
            let e = runtime_type(elem);
            quote!(#nn::ModuleList<#e>)
        }
        Kind::Model { ty, .. } | Kind::Custom { ty, .. } => quote!(#ty),
    }
}

/// A `#[checkpoint]` field's type: its layers behind `Arc`s (a list's
/// elements each), so a recompute can own a handle to the layer it calls.
pub fn checkpointed_type(l: &Layer) -> TokenStream {
    match &l.kind {
        Kind::List { elem, .. } => {
            let e = runtime_type(elem);
            quote!(::tapir::nn::ModuleList<::std::sync::Arc<#e>>)
        }
        _ => {
            let t = runtime_type(l);
            quote!(::std::sync::Arc<#t>)
        }
    }
}

/// The expression that builds a `#[checkpoint]` field.
pub fn checkpointed_constructor(l: &Layer) -> TokenStream {
    match &l.kind {
        Kind::List { elem, n } => {
            let (e, n) = (constructor(elem), dim_usize(n));
            quote!(::tapir::nn::ModuleList::new((0..#n).map(|_| ::std::sync::Arc::new(#e)).collect()))
        }
        _ => {
            let c = constructor(l);
            quote!(::std::sync::Arc::new(#c))
        }
    }
}

/// The expression that builds a field on the CPU with PyTorch's defaults.
pub fn constructor(l: &Layer) -> TokenStream {
    let nn = quote!(::tapir::nn);
    match &l.kind {
        Kind::Row(r) => r.constructor(),
        Kind::Sequential(ls) => {
            let parts = ls.iter().map(constructor);
            quote!(#nn::Sequential::new() #(.add(#parts))*)
        }
        Kind::List { elem, n } => {
            let (e, n) = (constructor(elem), dim_usize(n));
            quote!(#nn::ModuleList::new((0..#n).map(|_| #e).collect()))
        }
        Kind::Model { ty, .. } => quote!(<#ty>::__tapir_new_cpu()),
        Kind::Custom { init: Some(e), .. } => quote!(#e),
        Kind::Custom { ty, init: None } => quote!(<#ty as ::core::default::Default>::default()),
    }
}
