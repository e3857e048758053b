//! Generate: the struct, `new`, the typed `forward` / `try_forward`, the
//! `Module` impl (PyTorch's parameter names and repr), deferred shape
//! assertions, and the `macro_rules!` that tells later blocks the signature.

mod body;
mod checks;
mod fields;

use crate::analyse::ir::RuntimeShape;
use crate::analyse::layers::Layer;
use crate::analyse::{InputKind, Model};
use crate::parse::{ModelDef, ParamType};
use crate::shape::{Atom, Dim, SymKind};
use body::Gen;
use fields::{checkpointed_constructor, checkpointed_type, constructor, runtime_type};
use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, format_ident, quote};
use syn::Ident;

/// A dim as an `i64` expression (const generics by name, run-time dims as `__dim_X`).
pub(crate) fn dim_i64(d: &Dim) -> TokenStream {
    if let Some(v) = d.as_const() {
        let lit = Literal::i64_suffixed(v);
        return quote!(#lit);
    }
    let mut sum: Option<TokenStream> = None;
    for (mono, coef) in d.terms() {
        let mut factors = vec![];
        let mag = coef.unsigned_abs() as i64;
        if mag != 1 || mono.is_empty() {
            let lit = Literal::i64_suffixed(mag);
            factors.push(quote!(#lit));
        }
        for a in mono {
            factors.push(match a {
                Atom::Sym(n, SymKind::Const) => {
                    let id = Ident::new(n, Span::call_site());
                    quote!((#id as i64))
                }
                Atom::Sym(n, SymKind::Runtime) => {
                    let id = format_ident!("__dim_{}", n);
                    quote!((#id as i64))
                }
                Atom::FloorDiv(n, q) => {
                    let (n, q) = (dim_i64(n), dim_i64(q));
                    quote!((#n).div_euclid(#q))
                }
            });
        }
        let mut prod = factors.remove(0);
        for f in factors {
            prod = quote!(#prod * #f);
        }
        sum = Some(match (sum, *coef < 0) {
            (None, false) => prod,
            (None, true) => quote!(-(#prod)),
            (Some(s), false) => quote!(#s + #prod),
            (Some(s), true) => quote!(#s - #prod),
        });
    }
    let sum = sum.unwrap_or_else(|| quote!(0i64));
    quote!((#sum))
}

pub fn dim_usize(d: &Dim) -> TokenStream {
    if let Some(v) = d.as_const().filter(|v| *v >= 0) {
        let lit = Literal::usize_suffixed(v as usize);
        return quote!(#lit);
    }
    if let Some((mono, 1)) = d.terms().next().map(|(m, c)| (m, *c))
        && d.terms().count() == 1
        && let [Atom::Sym(n, kind)] = mono.as_slice()
    {
        return match kind {
            SymKind::Const => Ident::new(n, Span::call_site()).into_token_stream(),
            SymKind::Runtime => format_ident!("__dim_{}", n).into_token_stream(),
        };
    }
    let e = dim_i64(d);
    quote!((#e as usize))
}

pub(crate) fn dim_isize(d: &Dim) -> TokenStream {
    let e = dim_i64(d);
    quote!((#e as isize))
}

/// Straight-line shape checks of `value` against a pattern; `fail` turns
/// (expected pattern, what) into the failing statement.
pub(crate) fn runtime_check(
    rs: &RuntimeShape,
    value: &TokenStream,
    arg: &str,
    fail: &dyn Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    let rank = rs.dims.len();
    let (what, pattern) = (&rs.what, &rs.pattern);
    // The pattern with every dim known here as its value (`[B, IN]` -> `[B, 20]`).
    let values = rs.dims.iter().map(|(d, fresh)| match fresh {
        Some(name) => quote!(::std::string::String::from(#name)),
        None => {
            let v = dim_usize(d);
            quote!(::std::string::ToString::to_string(&(#v)))
        }
    });
    let expected = quote!(::std::vec![#(#values),*]);
    // An empty `arg` is an `unchecked!` value; `what` is then the model's forward.
    let err = if arg.is_empty() {
        quote!(::tapir::macro_support::unchecked_error(#what, #pattern, #expected, #value.shape()))
    } else {
        quote!(::tapir::macro_support::shape_error(#what, #arg, #pattern, #expected, #value.shape()))
    };
    let on_fail = fail(err);
    let mut out = quote! {
        if #value.ndim() != #rank { #on_fail }
    };
    for (i, (d, fresh)) in rs.dims.iter().enumerate() {
        match fresh {
            Some(name) => {
                let id = format_ident!("__dim_{}", name);
                out.extend(quote!(let #id: usize = #value.shape()[#i];));
            }
            None => {
                let want = dim_usize(d);
                out.extend(quote!(if #value.shape()[#i] != #want { #on_fail }));
            }
        }
    }
    out
}

/// The `forward` signature pieces: parameters and the return type.
fn fn_params(def: &ModelDef) -> (Vec<TokenStream>, Vec<TokenStream>, TokenStream) {
    let Some(f) = &def.forward else {
        return (vec![], vec![], quote!(::tapir::Tensor));
    };
    let mut params = vec![];
    let mut names = vec![];
    for p in &f.params {
        let n = &p.name;
        names.push(quote!(#n));
        params.push(match &p.ty {
            ParamType::Shape(_) => quote!(#n: &::tapir::Tensor),
            ParamType::Rust(t) => quote!(#n: #t),
        });
    }
    let ret = if f.ret_is_tuple {
        let ts = f.ret.iter().map(|_| quote!(::tapir::Tensor));
        quote!((#(#ts),*))
    } else {
        quote!(::tapir::Tensor)
    };
    (params, names, ret)
}

/// The `macro_rules!` a later `model!` block calls to learn this signature.
pub fn signature_macro(def: &ModelDef) -> TokenStream {
    let Some(f) = &def.forward else {
        return quote!();
    };
    let name = &def.name;
    let generics = def.generics.params.iter().filter_map(|p| match p {
        syn::GenericParam::Const(c) => Some(c.ident.clone()),
        _ => None,
    });
    let shape = |s: &crate::parse::ShapeSyntax| {
        let d = &s.dims;
        quote!([#(#d),*])
    };
    let inputs = f.params.iter().filter_map(|p| match &p.ty {
        ParamType::Shape(s) => Some(shape(s)),
        ParamType::Rust(_) => None,
    });
    let outputs = f.ret.iter().map(shape);
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros, non_snake_case)]
        macro_rules! #name {
            (@tapir_signature $($rest:tt)*) => {
                ::tapir::model! { @signature #name [#(#generics)*] (#(#inputs),*) -> (#(#outputs),*); $($rest)* }
            };
        }
    }
}

fn common_impls(
    def: &ModelDef,
    fields: &[(Ident, TokenStream)],
    forward_single: bool,
) -> TokenStream {
    let name = &def.name;
    let name_str = name.to_string();
    let (impl_g, ty_g, where_c) = def.generics.split_for_impl();
    let fnames: Vec<&Ident> = fields.iter().map(|(n, _)| n).collect();
    let fstrs: Vec<String> = fnames.iter().map(|n| n.to_string()).collect();
    let forward_impl = forward_single.then(|| {
        quote! {
            impl #impl_g ::tapir::nn::Forward for #name #ty_g #where_c {
                fn forward(&self, x: &::tapir::Tensor) -> ::tapir::Tensor {
                    #name::forward(self, x)
                }
            }
        }
    });
    quote! {
        impl #impl_g ::tapir::nn::Module for #name #ty_g #where_c {
            fn visit_children<'__a>(&'__a self, f: &mut dyn FnMut(&str, &'__a dyn ::tapir::nn::Module)) {
                #(f(#fstrs, &self.#fnames);)*
                let _ = f;
            }
            fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn ::tapir::nn::Module)) {
                #(f(#fstrs, &mut self.#fnames);)*
                let _ = f;
            }
            fn repr(&self) -> ::std::string::String {
                ::tapir::nn::repr_children(#name_str, &[#((#fstrs, &self.#fnames as &dyn ::tapir::nn::Module)),*])
            }
            fn set_training(&self, on: bool) {
                self.__tapir_training.set(on);
                #(::tapir::nn::Module::set_training(&self.#fnames, on);)*
            }
            fn is_training(&self) -> bool {
                self.__tapir_training.get()
            }
        }
        impl #impl_g ::core::fmt::Display for #name #ty_g #where_c {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(&::tapir::nn::Module::repr(self))
            }
        }
        #forward_impl
    }
}

fn struct_def(def: &ModelDef, fields: &[(Ident, TokenStream)]) -> TokenStream {
    let (attrs, vis, name, generics) = (&def.attrs, &def.vis, &def.name, &def.generics);
    let where_c = &generics.where_clause;
    let fdefs = fields.iter().map(|(n, ty)| {
        let f = def.fields.iter().find(|f| f.name == *n);
        let (fa, fv) = match f {
            Some(f) => (f.attrs.as_slice(), Some(&f.vis)),
            None => (&[][..], None),
        };
        quote!(#(#fa)* #fv #n: #ty,)
    });
    quote! {
        #(#attrs)*
        #vis struct #name #generics #where_c {
            #(#fdefs)*
            #[doc(hidden)]
            __tapir_training: ::tapir::nn::TrainingFlag,
        }
    }
}

fn is_single(def: &ModelDef) -> bool {
    def.forward.as_ref().is_some_and(|f| {
        !f.ret_is_tuple && f.params.len() == 1 && matches!(f.params[0].ty, ParamType::Shape(_))
    })
}

/// A model whose analysis failed: the same public items with bodies that
/// cannot run, so that code using the model reports no further errors.
pub fn stub(def: &ModelDef, fields: &[(Ident, Layer)]) -> TokenStream {
    // Keep only the size parameters, so a rejected type parameter adds no errors.
    let only_consts;
    let def = if def
        .generics
        .params
        .iter()
        .all(|p| matches!(p, syn::GenericParam::Const(_)))
    {
        def
    } else {
        let mut generics = def.generics.clone();
        generics.params = def
            .generics
            .params
            .iter()
            .filter(|p| matches!(p, syn::GenericParam::Const(_)))
            .cloned()
            .collect();
        only_consts = ModelDef {
            attrs: def.attrs.clone(),
            vis: def.vis.clone(),
            name: def.name.clone(),
            generics,
            fields: vec![],
            forward: None,
        };
        &only_consts
    };
    let fields: Vec<(Ident, TokenStream)> = fields
        .iter()
        .map(|(n, l)| (n.clone(), field_type(def, n, l)))
        .collect();
    let name = &def.name;
    let (impl_g, ty_g, where_c) = def.generics.split_for_impl();
    let (params, _, ret) = fn_params(def);
    let s = struct_def(def, &fields);
    let common = common_impls(def, &fields, is_single(def));
    let sig = signature_macro(def);
    quote! {
        #s
        #[allow(unused_variables, unreachable_code, dead_code)]
        impl #impl_g #name #ty_g #where_c {
            #[doc(hidden)]
            pub const __TAPIR_SHAPE_CHECKS: () = ();
            pub fn new(device: &::tapir::Device) -> Self { ::core::unreachable!() }
            pub fn try_new(device: &::tapir::Device) -> ::tapir::Result<Self> { ::core::unreachable!() }
            #[doc(hidden)]
            pub fn __tapir_new_cpu() -> Self { ::core::unreachable!() }
            pub fn forward(&self, #(#params),*) -> #ret { ::core::unreachable!() }
            pub fn try_forward(&self, #(#params),*) -> ::tapir::Result<#ret> { ::core::unreachable!() }
            #[doc(hidden)]
            pub fn __tapir_forward(&self, #(#params),*) -> #ret { ::core::unreachable!() }
        }
        #common
        #sig
    }
}

pub fn model(m: &Model) -> TokenStream {
    let def = m.def;
    let Some(body) = &m.body else {
        return stub(def, &m.fields);
    };
    let name = &def.name;
    let (impl_g, ty_g, where_c) = def.generics.split_for_impl();
    let fields: Vec<(Ident, TokenStream)> = m
        .fields
        .iter()
        .map(|(n, l)| (n.clone(), field_type(def, n, l)))
        .collect();
    let ctors = m.fields.iter().map(|(n, l)| {
        let c = match is_checkpointed(def, n) {
            true => checkpointed_constructor(l),
            false => constructor(l),
        };
        quote!(#n: #c)
    });
    let (asserts, child_checks) = checks::shape_checks(m);
    let (params, names, ret) = fn_params(def);
    let f = def.forward.as_ref();
    let fwd_attrs = f.map(|f| f.attrs.as_slice()).unwrap_or_default();
    let what = format!("{name}::forward");
    let mut boundary = quote!();
    let mut rebind = quote!();
    let mut owned = quote!();
    for inp in &m.inputs {
        let n = &inp.name;
        if let InputKind::Tensor(rs) = &inp.kind {
            let arg = n.to_string();
            boundary.extend(runtime_check(
                rs,
                &quote!(#n),
                &arg,
                &|e| quote!(return ::core::result::Result::Err(#e);),
            ));
            for (i, (_, fresh)) in rs.dims.iter().enumerate() {
                if let Some(s) = fresh {
                    let id = format_ident!("__dim_{}", s);
                    rebind.extend(quote!(let #id: usize = #n.shape()[#i];));
                }
            }
            owned.extend(quote!(let #n: ::tapir::Tensor = ::core::clone::Clone::clone(#n);));
        }
    }
    let _ = what;
    let body = Gen {
        what: format!("{name}::forward"),
    }
    .block(body);
    let s = struct_def(def, &fields);
    let common = common_impls(def, &fields, is_single(def));
    let export = exportable_impl(m);
    let sig = signature_macro(def);
    quote! {
        #s
        #child_checks
        impl #impl_g #name #ty_g #where_c {
            #[doc(hidden)]
            pub const __TAPIR_SHAPE_CHECKS: () = { #asserts };

            /// Builds the model on `device` with PyTorch's default initialisation.
            /// Panics when the device cannot be used; see `try_new`.
            pub fn new(device: &::tapir::Device) -> Self {
                match Self::try_new(device) {
                    ::core::result::Result::Ok(m) => m,
                    ::core::result::Result::Err(e) => ::core::panic!("{}", e),
                }
            }

            /// Builds the model on `device`, or says why the device cannot be used.
            pub fn try_new(device: &::tapir::Device) -> ::tapir::Result<Self> {
                let mut m = Self::__tapir_new_cpu();
                if *device != ::tapir::Device::Cpu {
                    ::tapir::nn::Module::to_device(&mut m, *device)?;
                }
                ::core::result::Result::Ok(m)
            }

            #[doc(hidden)]
            pub fn __tapir_new_cpu() -> Self {
                let () = Self::__TAPIR_SHAPE_CHECKS;
                Self { #(#ctors,)* __tapir_training: ::core::default::Default::default() }
            }

            #(#fwd_attrs)*
            /// Panics with the same message `try_forward` returns when an
            /// input does not have the declared shape (reported at the caller).
            #[track_caller]
            pub fn forward(&self, #(#params),*) -> #ret {
                match self.try_forward(#(#names),*) {
                    ::core::result::Result::Ok(v) => v,
                    ::core::result::Result::Err(e) => ::tapir::macro_support::forward_failed(e),
                }
            }

            /// Checks the inputs' shapes against the declared ones once, then
            /// runs `forward`; running out of GPU memory inside it is an
            /// `Err(Error::OutOfMemory)`, as PyTorch raises `OutOfMemoryError`.
            #[allow(non_snake_case, unused_variables)]
            pub fn try_forward(&self, #(#params),*) -> ::tapir::Result<#ret> {
                #boundary
                ::tapir::error::catch_out_of_memory(|| self.__tapir_forward(#(#names),*))
            }

            #[doc(hidden)]
            #[allow(non_snake_case, unused_variables, unused_mut, clippy::let_and_return)]
            pub fn __tapir_forward(&self, #(#params),*) -> #ret {
                let () = Self::__TAPIR_SHAPE_CHECKS;
                // For `self.is_training()` and `layer.forward(..)` inside `unchecked!`.
                #[allow(unused_imports)]
                use ::tapir::nn::{Forward as _, Module as _};
                #rebind
                #owned
                #body
            }
        }
        #common
        #export
        #sig
    }
}

/// `onnx::Exportable`: the forward over a slice of inputs, and which input
/// dims are run-time symbols (exported as `dim_param`s). Only for forwards
/// whose every parameter is a tensor.
fn exportable_impl(m: &Model) -> TokenStream {
    let def = m.def;
    let Some(f) = &def.forward else {
        return quote!();
    };
    let mut dims = Vec::new();
    for inp in &m.inputs {
        match &inp.kind {
            InputKind::Tensor(rs) => {
                let names = rs.dims.iter().map(|(d, _)| match d.as_runtime_sym() {
                    Some(s) => quote!(::core::option::Option::Some(#s)),
                    None => quote!(::core::option::Option::None),
                });
                dims.push(quote!(::std::vec![#(#names),*]));
            }
            InputKind::Rust => return quote!(),
        }
    }
    let name = &def.name;
    let what = format!("{name}::forward");
    let n = dims.len();
    let args = (0..n).map(|i| quote!(inputs[#i]));
    let outs = match f.ret_is_tuple {
        true => {
            let idx = (0..f.ret.len()).map(syn::Index::from);
            quote!(::std::vec![#(out.#idx),*])
        }
        false => quote!(::std::vec![out]),
    };
    let (impl_g, ty_g, where_c) = def.generics.split_for_impl();
    quote! {
        impl #impl_g ::tapir::onnx::Exportable for #name #ty_g #where_c {
            fn export_forward(
                &self,
                inputs: &[&::tapir::Tensor],
            ) -> ::tapir::Result<::std::vec::Vec<::tapir::Tensor>> {
                ::tapir::macro_support::export_arity(#what, inputs.len(), #n)?;
                let out = self.try_forward(#(#args),*)?;
                ::core::result::Result::Ok(#outs)
            }
            fn dynamic_dims(&self) -> ::std::vec::Vec<::std::vec::Vec<::core::option::Option<&'static str>>> {
                ::std::vec![#(#dims),*]
            }
        }
    }
}

/// Whether the field `name` is marked `#[checkpoint]`.
fn is_checkpointed(def: &ModelDef, name: &Ident) -> bool {
    def.fields.iter().any(|f| f.name == *name && f.checkpoint)
}

/// A field's type in the generated struct.
fn field_type(def: &ModelDef, name: &Ident, l: &Layer) -> TokenStream {
    match is_checkpointed(def, name) {
        true => checkpointed_type(l),
        false => runtime_type(l),
    }
}
