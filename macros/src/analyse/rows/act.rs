//! Activations: same shape out as in.

use super::{Row, RowSpec};
use crate::analyse::rules::Facts;
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use std::rc::Rc;
use syn::Expr;
use syn::spanned::Spanned;

/// A parameterless activation, built as `::tapir::nn::<name>`.
struct Plain(&'static str);

impl Row for Plain {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        let ty = syn::Ident::new(self.0, Span::call_site());
        quote!(::tapir::nn::#ty)
    }
    fn constructor(&self) -> TokenStream {
        self.runtime_type()
    }
}

macro_rules! plain {
    ($konst:ident, $name:literal, [$($alias:literal),*]) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[$($alias),*],
            params: &[],
            parse: |_, _| Ok(Rc::new(Plain($name))),
        };
    };
}

plain!(RELU, "ReLU", ["Relu"]);
plain!(SILU, "SiLU", ["Silu"]);
plain!(TANH, "Tanh", []);
plain!(SIGMOID, "Sigmoid", []);
plain!(HARDSWISH, "Hardswish", []);
plain!(SELU, "SELU", ["Selu"]);
plain!(MISH, "Mish", []);
plain!(RELU6, "ReLU6", ["Relu6"]);
plain!(HARDSIGMOID, "Hardsigmoid", []);
plain!(LOG_SIGMOID, "LogSigmoid", []);
plain!(SOFTSIGN, "Softsign", []);
plain!(SOFTPLUS, "Softplus", []);
plain!(TANHSHRINK, "Tanhshrink", []);

/// An activation whose parameters are all floats with PyTorch's defaults,
/// built as `::tapir::nn::<name> { param: value, .. }`.
struct Scalars {
    name: &'static str,
    params: &'static [(&'static str, f64)],
    values: Vec<Option<Expr>>,
}

impl Row for Scalars {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        let ty = syn::Ident::new(self.name, Span::call_site());
        quote!(::tapir::nn::#ty)
    }
    fn constructor(&self) -> TokenStream {
        let ty = self.runtime_type();
        let fields = self.params.iter().zip(&self.values).map(|((p, d), v)| {
            let field = syn::Ident::new(p, Span::call_site());
            match v {
                Some(e) => quote!(#field: (#e) as f64),
                None => quote!(#field: #d),
            }
        });
        quote!(#ty { #(#fields),* })
    }
}

macro_rules! scalars {
    ($konst:ident, $name:literal, [$(($p:literal, $d:expr)),+]) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &[$($p),+],
            parse: |a, _| {
                const PARAMS: &[(&str, f64)] = &[$(($p, $d)),+];
                let values = PARAMS
                    .iter()
                    .map(|(p, _)| a.expr(p))
                    .collect::<syn::Result<Vec<_>>>()?;
                Ok(Rc::new(Scalars { name: $name, params: PARAMS, values }))
            },
        };
    };
}

scalars!(ELU, "ELU", [("alpha", 1.0)]);
scalars!(CELU, "CELU", [("alpha", 1.0)]);
scalars!(HARDTANH, "Hardtanh", [("min_val", -1.0), ("max_val", 1.0)]);
scalars!(HARDSHRINK, "Hardshrink", [("lambd", 0.5)]);
scalars!(SOFTSHRINK, "Softshrink", [("lambd", 0.5)]);

/// `nn.GELU`, exact or with the tanh approximation.
struct Gelu {
    tanh: bool,
}

impl Row for Gelu {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::GELU)
    }
    fn constructor(&self) -> TokenStream {
        let tanh = self.tanh;
        quote!(::tapir::nn::GELU { tanh: #tanh })
    }
}

pub const GELU: RowSpec = RowSpec {
    name: "GELU",
    aliases: &["Gelu"],
    params: &["approximate"],
    parse: |a, _| {
        let tanh = match a.expr("approximate")? {
            None => false,
            Some(Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) if s.value() == "tanh" || s.value() == "none" => s.value() == "tanh",
            Some(e) => {
                return Err(syn::Error::new(
                    e.span(),
                    "GELU's `approximate` is \"none\" or \"tanh\"",
                ));
            }
        };
        Ok(Rc::new(Gelu { tanh }))
    },
};

/// `nn.LeakyReLU` (negative_slope 0.01).
struct LeakyRelu {
    slope: Option<Expr>,
}

impl Row for LeakyRelu {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::LeakyReLU)
    }
    fn constructor(&self) -> TokenStream {
        let s = match &self.slope {
            Some(e) => quote!(#e),
            None => quote!(0.01),
        };
        quote!(::tapir::nn::LeakyReLU { negative_slope: #s })
    }
}

pub const LEAKY_RELU: RowSpec = RowSpec {
    name: "LeakyReLU",
    aliases: &[],
    params: &["negative_slope"],
    parse: |a, _| {
        Ok(Rc::new(LeakyRelu {
            slope: a.expr("negative_slope")?,
        }))
    },
};

/// `nn.PReLU(num_parameters=1, init=0.25)`: same shape; one slope per
/// channel (dim 1, or dim 0 of a 1-D input) unless there is one in all.
struct Prelu {
    n: Dim,
    init: Option<Expr>,
}

impl Row for Prelu {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        if self.n.as_const() == Some(1) {
            return Ok(x.clone());
        }
        let Some(channels) = x.get(if x.len() >= 2 { 1 } else { 0 }) else {
            return Err(format!(
                "{label} with {} slopes expects a channel dim, got a scalar{{from}}",
                self.n
            ));
        };
        let n = &self.n;
        facts.equal(channels, n, &|| {
            format!(
                "{label} has {n} slopes but input `{}` has {channels} channels{{from}}",
                show(x)
            )
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::PReLU)
    }
    fn constructor(&self) -> TokenStream {
        let n = dim_usize(&self.n);
        let init = match &self.init {
            Some(e) => quote!((#e) as f64),
            None => quote!(0.25),
        };
        quote!(::tapir::nn::PReLU::new(#n, #init))
    }
}

pub const PRELU: RowSpec = RowSpec {
    name: "PReLU",
    aliases: &[],
    params: &["num_parameters", "init"],
    parse: |a, scope| {
        Ok(Rc::new(Prelu {
            n: a.dim("num_parameters", scope, Some(Dim::lit(1)))?,
            init: a.expr("init")?,
        }))
    },
};

/// `nn.Softmax2d`: a softmax over the channels of `[N, C, H, W]` or `[C, H, W]`.
struct Softmax2d;

impl Row for Softmax2d {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        if x.len() == 3 || x.len() == 4 {
            return Ok(x.clone());
        }
        Err(format!(
            "{label} expects input `[N, C, H, W]` or `[C, H, W]`, got `{}`{{from}}",
            show(x)
        ))
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::Softmax2d)
    }
    fn constructor(&self) -> TokenStream {
        self.runtime_type()
    }
}

pub const SOFTMAX2D: RowSpec = RowSpec {
    name: "Softmax2d",
    aliases: &[],
    params: &[],
    parse: |_, _| Ok(Rc::new(Softmax2d)),
};
