//! Sequence layers: GRU and LSTM (which return their final states too) and
//! TransformerEncoderLayer.

use super::{Outputs, Row, RowSpec};
use crate::analyse::layers::Slot;
use crate::analyse::rules::{Facts, fill_slot};
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;
use syn::Expr;
use syn::spanned::Spanned;

fn or_default(e: &Option<Expr>, default: TokenStream) -> TokenStream {
    match e {
        Some(e) => quote!(#e),
        None => default,
    }
}

/// `nn.RNN` / `nn.GRU` / `nn.LSTM`.
struct Recurrent {
    /// "RNN", "GRU" or "LSTM".
    layer: &'static str,
    /// An RNN's `nonlinearity="relu"`.
    relu: bool,
    lstm: bool,
    inp: Slot,
    hidden: Dim,
    layers: Dim,
    bias: Option<Expr>,
    batch_first: bool,
    dropout: Option<Expr>,
    bidirectional: bool,
    /// An LSTM's `proj_size` (0: none).
    proj: Dim,
}

impl Recurrent {
    /// The width of `h`: the projection's, if any.
    fn h_width(&self) -> Dim {
        match self.proj.as_const() {
            Some(0) => self.hidden.clone(),
            _ => self.proj.clone(),
        }
    }

    fn pattern(&self, width: &str) -> String {
        match self.batch_first {
            true => format!("[N, L, {width}]` or `[L, {width}]"),
            false => format!("[L, N, {width}]` or `[L, {width}]"),
        }
    }
}

impl Row for Recurrent {
    fn apply(&self, label: &str, _: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        let state = if self.lstm { "(h_n, c_n)" } else { "h_n" };
        Err(format!(
            "{label} returns `(output, {state})`: call it on its own line, not inside a Sequential"
        ))
    }
    fn multi_output(&self) -> bool {
        true
    }
    fn outputs(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Outputs, String> {
        if x.len() != 3 && x.len() != 2 {
            return Err(format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                self.pattern("input_size"),
                show(x)
            ));
        }
        let want = fill_slot(&self.inp, &x[x.len() - 1], "input_size", label)?;
        facts.equal(&x[x.len() - 1], &want, &|| {
            format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                self.pattern(&want.to_string()),
                show(x)
            )
        })?;
        let dirs = Dim::lit(if self.bidirectional { 2 } else { 1 });
        let mut out = x.clone();
        *out.last_mut().expect("rank checked") = dirs.mul(&self.h_width());
        let batch = match (x.len(), self.batch_first) {
            (2, _) => None,
            (_, true) => Some(x[0].clone()),
            (_, false) => Some(x[1].clone()),
        };
        let state = |width: Dim| -> Shape {
            [Some(self.layers.mul(&dirs)), batch.clone(), Some(width)]
                .into_iter()
                .flatten()
                .collect()
        };
        let h = Outputs::Tensor(state(self.h_width()));
        let state = match self.lstm {
            true => Outputs::Tuple(vec![h, Outputs::Tensor(state(self.hidden.clone()))]),
            false => h,
        };
        Ok(Outputs::Tuple(vec![Outputs::Tensor(out), state]))
    }
    fn runtime_type(&self) -> TokenStream {
        let ty = quote::format_ident!("{}", self.layer);
        quote!(::tapir::nn::#ty)
    }
    fn constructor(&self) -> TokenStream {
        let ty = self.runtime_type();
        let relu = self.relu.then(|| quote!(.relu()));
        let (i, h) = (
            dim_usize(&self.inp.get().unwrap_or_default()),
            dim_usize(&self.hidden),
        );
        let layers = dim_usize(&self.layers);
        let bias = or_default(&self.bias, quote!(true));
        let dropout = or_default(&self.dropout, quote!(0.0));
        let (bf, bi) = (self.batch_first, self.bidirectional);
        let proj = dim_usize(&self.proj);
        quote!(#ty::new(#i, #h, ::tapir::nn::RnnOptions { num_layers: #layers, bias: #bias, batch_first: #bf, dropout: #dropout, bidirectional: #bi, proj_size: #proj }) #relu)
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.inp.get().is_none().then_some("input_size")
    }
}

const RECURRENT_PARAMS: &[&str] = &[
    "input_size",
    "hidden_size",
    "num_layers",
    "bias",
    "batch_first",
    "dropout",
    "bidirectional",
];

macro_rules! recurrent {
    ($konst:ident, $name:literal, $lstm:literal, $params:expr) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: $params,
            parse: |a, scope| {
                let relu = match $name {
                    "RNN" => nonlinearity_is_relu(a.expr("nonlinearity")?)?,
                    _ => false,
                };
                Ok(Rc::new(Recurrent {
                    layer: $name,
                    relu,
                    lstm: $lstm,
                    inp: a.slot("input_size", scope)?,
                    hidden: a.dim("hidden_size", scope, None)?,
                    layers: a.dim("num_layers", scope, Some(Dim::lit(1)))?,
                    bias: a.expr("bias")?,
                    batch_first: a.bool_lit("batch_first", false)?,
                    dropout: a.expr("dropout")?,
                    bidirectional: a.bool_lit("bidirectional", false)?,
                    proj: match $lstm {
                        true => a.dim("proj_size", scope, Some(Dim::lit(0)))?,
                        false => Dim::lit(0),
                    },
                }))
            },
        };
    };
}

/// An RNN's `nonlinearity`: "tanh" (the default) or "relu".
fn nonlinearity_is_relu(e: Option<Expr>) -> syn::Result<bool> {
    match &e {
        None => Ok(false),
        Some(Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) if s.value() == "tanh" || s.value() == "relu" => Ok(s.value() == "relu"),
        Some(e) => Err(syn::Error::new(
            e.span(),
            "RNN's `nonlinearity` is \"tanh\" or \"relu\"",
        )),
    }
}

/// `nn.RNN`'s parameters: the others', with `nonlinearity` after `num_layers`.
const RNN_PARAMS: &[&str] = &[
    "input_size",
    "hidden_size",
    "num_layers",
    "nonlinearity",
    "bias",
    "batch_first",
    "dropout",
    "bidirectional",
];

recurrent!(RNN, "RNN", false, RNN_PARAMS);
recurrent!(GRU, "GRU", false, RECURRENT_PARAMS);
/// `nn.LSTM`'s parameters: the others', and `proj_size` last.
const LSTM_PARAMS: &[&str] = &[
    "input_size",
    "hidden_size",
    "num_layers",
    "bias",
    "batch_first",
    "dropout",
    "bidirectional",
    "proj_size",
];

recurrent!(LSTM, "LSTM", true, LSTM_PARAMS);

/// `nn.TransformerEncoderLayer`: `[L, N, E]` (or `[N, L, E]`) to the same shape.
struct EncoderLayer {
    d_model: Slot,
    nhead: Dim,
    ff: Dim,
    dropout: Option<Expr>,
    gelu: bool,
    eps: Option<Expr>,
    batch_first: bool,
    norm_first: bool,
    bias: Option<Expr>,
}

impl Row for EncoderLayer {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let pattern = |e: &str| match self.batch_first {
            true => format!("[N, L, {e}]"),
            false => format!("[L, N, {e}]"),
        };
        if x.len() != 3 {
            return Err(format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                pattern("d_model"),
                show(x)
            ));
        }
        let want = fill_slot(&self.d_model, &x[2], "d_model", label)?;
        facts.equal(&x[2], &want, &|| {
            format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                pattern(&want.to_string()),
                show(x)
            )
        })?;
        let heads = &self.nhead;
        facts.divides(&want, heads, &|| {
            format!("{label}: d_model {want} is not divisible by nhead {heads}")
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::TransformerEncoderLayer)
    }
    fn constructor(&self) -> TokenStream {
        let (e, h, ff) = (
            dim_usize(&self.d_model.get().unwrap_or_default()),
            dim_usize(&self.nhead),
            dim_usize(&self.ff),
        );
        let dropout = or_default(&self.dropout, quote!(0.1));
        let eps = or_default(&self.eps, quote!(1e-5));
        let bias = or_default(&self.bias, quote!(true));
        let act = match self.gelu {
            true => quote!(::tapir::nn::Activation::Gelu),
            false => quote!(::tapir::nn::Activation::Relu),
        };
        let (bf, nf) = (self.batch_first, self.norm_first);
        quote!(::tapir::nn::TransformerEncoderLayer::new(#e, #h, ::tapir::nn::TransformerEncoderLayerOptions {
            dim_feedforward: #ff, dropout: #dropout, activation: #act, layer_norm_eps: #eps,
            batch_first: #bf, norm_first: #nf, bias: #bias,
        }))
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.d_model.get().is_none().then_some("d_model")
    }
}

pub const TRANSFORMER_ENCODER_LAYER: RowSpec = RowSpec {
    name: "TransformerEncoderLayer",
    aliases: &[],
    params: &[
        "d_model",
        "nhead",
        "dim_feedforward",
        "dropout",
        "activation",
        "layer_norm_eps",
        "batch_first",
        "norm_first",
        "bias",
    ],
    parse: |a, scope| {
        let gelu = match a.expr("activation")? {
            None => false,
            Some(Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) if s.value() == "relu" || s.value() == "gelu" => s.value() == "gelu",
            Some(e) => {
                return Err(syn::Error::new(
                    e.span(),
                    "TransformerEncoderLayer's `activation` is \"relu\" or \"gelu\"",
                ));
            }
        };
        Ok(Rc::new(EncoderLayer {
            d_model: a.slot("d_model", scope)?,
            nhead: a.dim("nhead", scope, None)?,
            ff: a.dim("dim_feedforward", scope, Some(Dim::lit(2048)))?,
            dropout: a.expr("dropout")?,
            gelu,
            eps: a.expr("layer_norm_eps")?,
            batch_first: a.bool_lit("batch_first", false)?,
            norm_first: a.bool_lit("norm_first", false)?,
            bias: a.expr("bias")?,
        }))
    },
};
