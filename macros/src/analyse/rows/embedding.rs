//! `Embedding` (ids of any shape gain a trailing `embedding_dim`) and
//! `EmbeddingBag` (a `[bags, n]` grid of ids becomes `[bags, embedding_dim]`).

use super::{Row, RowSpec};
use crate::analyse::dims::DimScope;
use crate::analyse::layers::Args;
use crate::analyse::rules::Facts;
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;
use syn::Expr;
use syn::spanned::Spanned;

/// `nn.Embedding` and `nn.EmbeddingBag` (`bag`: the mode's tokens).
struct Embedding {
    n: Dim,
    d: Dim,
    padding_idx: Option<Expr>,
    max_norm: Option<Expr>,
    norm_type: Option<Expr>,
    scale_grad_by_freq: Option<Expr>,
    /// `::tapir::nn::BagMode::..` for a bag; None for a plain embedding.
    bag: Option<TokenStream>,
    include_last_offset: Option<Expr>,
}

impl Row for Embedding {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        if self.bag.is_none() {
            let mut y = x.clone();
            y.push(self.d.clone());
            return Ok(y);
        }
        if x.len() != 2 {
            return Err(format!(
                "{label} expects input `[bags, n]` (one bag of ids per row), got `{}`{{from}}; \
                 for 1-D ids with offsets call `EmbeddingBag::forward_bags`",
                show(x)
            ));
        }
        Ok(vec![x[0].clone(), self.d.clone()])
    }
    fn runtime_type(&self) -> TokenStream {
        match self.bag {
            None => quote!(::tapir::nn::Embedding),
            Some(_) => quote!(::tapir::nn::EmbeddingBag),
        }
    }
    fn constructor(&self) -> TokenStream {
        let (n, d) = (dim_usize(&self.n), dim_usize(&self.d));
        let p = match &self.padding_idx {
            Some(e) => quote!(::core::option::Option::Some(#e)),
            None => quote!(::core::option::Option::None),
        };
        let mut built = match &self.bag {
            None => quote!(::tapir::nn::Embedding::new(#n, #d, #p)),
            Some(mode) => quote!(::tapir::nn::EmbeddingBag::new(#n, #d, #mode, #p)),
        };
        if let Some(e) = &self.max_norm {
            built.extend(quote!(.max_norm(#e)));
        }
        if let Some(e) = &self.norm_type {
            built.extend(quote!(.norm_type(#e)));
        }
        if let Some(e) = &self.scale_grad_by_freq {
            built.extend(quote!(.scale_grad_by_freq(#e)));
        }
        if let Some(e) = &self.include_last_offset {
            built.extend(quote!(.include_last_offset(#e)));
        }
        built
    }
}

/// Refuses PyTorch's `sparse` unless false: tapir's gradients are dense.
fn refuse_sparse(a: &mut Args, row: &str) -> syn::Result<()> {
    if let Some(e) = a.expr("sparse")?
        && !matches!(&e, Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) if !b.value)
    {
        return Err(syn::Error::new(
            e.span(),
            format!("{row}'s `sparse` is not supported: tapir's gradients are dense"),
        ));
    }
    Ok(())
}

/// Parses an `Embedding` (or, with `bag`, an `EmbeddingBag`) row.
fn parse_table(a: &mut Args, scope: &mut DimScope, bag: bool) -> syn::Result<Rc<dyn Row>> {
    refuse_sparse(a, if bag { "EmbeddingBag" } else { "Embedding" })?;
    Ok(Rc::new(Embedding {
        n: a.dim("num_embeddings", scope, None)?,
        d: a.dim("embedding_dim", scope, None)?,
        padding_idx: a.expr("padding_idx")?,
        max_norm: a.expr("max_norm")?,
        norm_type: a.expr("norm_type")?,
        scale_grad_by_freq: a.expr("scale_grad_by_freq")?,
        bag: if bag {
            Some(bag_mode(a.expr("mode")?)?)
        } else {
            None
        },
        include_last_offset: if bag {
            a.expr("include_last_offset")?
        } else {
            None
        },
    }))
}

pub const EMBEDDING: RowSpec = RowSpec {
    name: "Embedding",
    aliases: &[],
    params: &[
        "num_embeddings",
        "embedding_dim",
        "padding_idx",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "sparse",
    ],
    parse: |a, scope| parse_table(a, scope, false),
};

/// `mode="sum" | "mean" | "max"` as the runtime's `BagMode`.
fn bag_mode(e: Option<Expr>) -> syn::Result<TokenStream> {
    let Some(e) = e else {
        return Ok(quote!(::tapir::nn::BagMode::Mean));
    };
    if let Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = &e
    {
        match s.value().as_str() {
            "sum" => return Ok(quote!(::tapir::nn::BagMode::Sum)),
            "mean" => return Ok(quote!(::tapir::nn::BagMode::Mean)),
            "max" => return Ok(quote!(::tapir::nn::BagMode::Max)),
            _ => {}
        }
    }
    Err(syn::Error::new(
        e.span(),
        "EmbeddingBag's `mode` is \"sum\", \"mean\" or \"max\"",
    ))
}

pub const EMBEDDING_BAG: RowSpec = RowSpec {
    name: "EmbeddingBag",
    aliases: &[],
    params: &[
        "num_embeddings",
        "embedding_dim",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "mode",
        "sparse",
        "include_last_offset",
        "padding_idx",
    ],
    parse: |a, scope| parse_table(a, scope, true),
};
