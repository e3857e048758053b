//! `nn.MultiheadAttention`: its parameters and construction; its call rule
//! (query, key, value and options) is the checker's, in `calls.rs`.

use super::{Row, RowSpec};
use crate::analyse::layers::Slot;
use crate::analyse::rules::Facts;
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;

/// The parsed row.
pub struct Attention {
    /// `embed_dim` (may be inferred from the first call).
    pub e: Slot,
    /// `num_heads`.
    pub heads: Dim,
    /// Inputs are `[N, L, E]` rather than `[L, N, E]`.
    pub batch_first: bool,
}

impl Row for Attention {
    fn apply(&self, label: &str, _: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Err(format!("{label} is not a one-input layer"))
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::MultiheadAttention)
    }
    fn constructor(&self) -> TokenStream {
        let (e, h) = (
            dim_usize(&self.e.get().unwrap_or_default()),
            dim_usize(&self.heads),
        );
        let batch_first = self.batch_first;
        quote!(::tapir::nn::MultiheadAttention::new(#e, #h, #batch_first))
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.e.get().is_none().then_some("embed_dim")
    }
    fn attention(&self) -> Option<&Attention> {
        Some(self)
    }
}

pub const MULTIHEAD_ATTENTION: RowSpec = RowSpec {
    name: "MultiheadAttention",
    aliases: &[],
    params: &["embed_dim", "num_heads", "batch_first"],
    parse: |a, scope| {
        Ok(Rc::new(Attention {
            e: a.slot("embed_dim", scope)?,
            heads: a.dim("num_heads", scope, None)?,
            batch_first: a.bool_lit("batch_first", false)?,
        }))
    },
};
