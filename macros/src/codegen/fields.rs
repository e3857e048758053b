//! Each field's runtime type and the expression that builds it on the CPU
//! with PyTorch's defaults.

use super::dim_usize;
use crate::analyse::layers::{Act, Kind, Layer};
use proc_macro2::{Literal, TokenStream};
use quote::quote;

fn or_default(e: &Option<syn::Expr>, default: TokenStream) -> TokenStream {
    match e {
        Some(e) => quote!(#e),
        None => default,
    }
}

/// The runtime type of a field.
pub fn runtime_type(l: &Layer) -> TokenStream {
    let nn = quote!(::tapir::nn);
    match &l.kind {
        Kind::Linear { .. } => quote!(#nn::Linear),
        Kind::LayerNorm { rms: false, .. } => quote!(#nn::LayerNorm),
        Kind::LayerNorm { rms: true, .. } => quote!(#nn::RMSNorm),
        Kind::BatchNorm { .. } => quote!(#nn::BatchNorm),
        Kind::Dropout { .. } => quote!(#nn::Dropout),
        Kind::Embedding { .. } => quote!(#nn::Embedding),
        Kind::Conv2d { .. } => quote!(#nn::Conv2d),
        Kind::Pool { max: true, .. } => quote!(#nn::MaxPool2d),
        Kind::Pool { max: false, .. } => quote!(#nn::AvgPool2d),
        Kind::AdaptiveAvgPool { .. } => quote!(#nn::AdaptiveAvgPool2d),
        Kind::Flatten { .. } => quote!(#nn::Flatten),
        Kind::Act { act, .. } => match act {
            Act::ReLU => quote!(#nn::ReLU),
            Act::Gelu => quote!(#nn::GELU),
            Act::SiLU => quote!(#nn::SiLU),
            Act::Tanh => quote!(#nn::Tanh),
            Act::Sigmoid => quote!(#nn::Sigmoid),
            Act::LeakyReLU => quote!(#nn::LeakyReLU),
        },
        Kind::Softmax { .. } => quote!(#nn::Softmax),
        Kind::Mha { .. } => quote!(#nn::MultiheadAttention),
        Kind::Sequential(_) => quote!(#nn::Sequential),
        Kind::List { elem, .. } => {
            let e = runtime_type(elem);
            quote!(#nn::ModuleList<#e>)
        }
        Kind::Model { ty, .. } => quote!(#ty),
    }
}

/// The expression that builds a field on the CPU with PyTorch's defaults.
pub fn constructor(l: &Layer) -> TokenStream {
    let nn = quote!(::tapir::nn);
    let slot = |s: &crate::analyse::layers::Slot| dim_usize(&s.get().unwrap_or_default());
    match &l.kind {
        Kind::Linear { inp, out, bias } => {
            let (i, o, b) = (slot(inp), dim_usize(out), or_default(bias, quote!(true)));
            quote!(#nn::Linear::new(#i, #o, #b))
        }
        Kind::LayerNorm {
            d,
            eps,
            affine,
            rms,
        } => {
            let (d, a) = (slot(d), or_default(affine, quote!(true)));
            if *rms {
                let eps = match eps {
                    Some(e) => quote!(::core::option::Option::Some(#e)),
                    None => quote!(::core::option::Option::None),
                };
                quote!(#nn::RMSNorm::new(&[#d], #eps, #a))
            } else {
                let eps = or_default(eps, quote!(1e-5));
                quote!(#nn::LayerNorm::new(&[#d], #eps, #a))
            }
        }
        Kind::BatchNorm { c, two_d } => {
            let c = slot(c);
            if *two_d {
                quote!(#nn::BatchNorm::new_2d(#c))
            } else {
                quote!(#nn::BatchNorm::new_1d(#c))
            }
        }
        Kind::Dropout { p } => quote!(#nn::Dropout::new(#p)),
        Kind::Embedding { n, d, padding_idx } => {
            let (n, d) = (dim_usize(n), dim_usize(d));
            let p = match padding_idx {
                Some(e) => quote!(::core::option::Option::Some(#e)),
                None => quote!(::core::option::Option::None),
            };
            quote!(#nn::Embedding::new(#n, #d, #p))
        }
        Kind::Conv2d {
            inp,
            out,
            k,
            stride,
            padding,
            dilation,
            groups,
            bias,
        } => {
            let (i, o, k) = (slot(inp), dim_usize(out), dim_usize(k));
            let (s, p, d, g) = (
                dim_usize(stride),
                dim_usize(padding),
                dim_usize(dilation),
                dim_usize(groups),
            );
            let b = or_default(bias, quote!(true));
            quote!(#nn::Conv2d::new(#i, #o, (#k, #k), ::tapir::Conv2dOptions { stride: (#s, #s), padding: (#p, #p), dilation: (#d, #d), groups: #g }, #b))
        }
        Kind::Pool {
            k, stride, padding, ..
        } => {
            let ty = runtime_type(l);
            let (k, s, p) = (dim_usize(k), dim_usize(stride), dim_usize(padding));
            quote!({ let mut pool = #ty::new(#k); pool.stride = (#s, #s); pool.padding = (#p, #p); pool })
        }
        Kind::AdaptiveAvgPool { h, w } => {
            let (h, w) = (dim_usize(h), dim_usize(w));
            quote!(#nn::AdaptiveAvgPool2d { output_size: (#h, #w) })
        }
        Kind::Flatten { start, end } => {
            let (s, e) = (
                Literal::i64_unsuffixed(*start),
                Literal::i64_unsuffixed(*end),
            );
            quote!(#nn::Flatten { start_dim: #s, end_dim: #e })
        }
        Kind::Act { act, arg } => match act {
            Act::Gelu => {
                let tanh = matches!(arg, Some(syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })) if s.value() == "tanh");
                quote!(#nn::GELU { tanh: #tanh })
            }
            Act::LeakyReLU => {
                let s = or_default(arg, quote!(0.01));
                quote!(#nn::LeakyReLU { negative_slope: #s })
            }
            _ => runtime_type(l),
        },
        Kind::Softmax { dim } => {
            let d = Literal::i64_unsuffixed(*dim);
            quote!(#nn::Softmax { dim: #d })
        }
        Kind::Mha {
            e,
            heads,
            batch_first,
        } => {
            let (e, h) = (slot(e), dim_usize(heads));
            quote!(#nn::MultiheadAttention::new(#e, #h, #batch_first))
        }
        Kind::Sequential(ls) => {
            let parts = ls.iter().map(constructor);
            quote!(#nn::Sequential::new() #(.add(#parts))*)
        }
        Kind::List { elem, n } => {
            let (e, n) = (constructor(elem), dim_usize(n));
            quote!(#nn::ModuleList::new((0..#n).map(|_| #e).collect()))
        }
        Kind::Model { ty, .. } => quote!(<#ty>::__tapir_new_cpu()),
    }
}
