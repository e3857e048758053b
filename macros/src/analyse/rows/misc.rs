//! Dropout, Flatten, Softmax, Identity and the pixel shuffles.

use super::{Row, RowSpec};
use crate::analyse::dims::int_lit;
use crate::analyse::rules::{Facts, flatten, normalize_dim};
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::{Literal, TokenStream};
use quote::quote;
use std::rc::Rc;
use syn::Expr;
use syn::spanned::Spanned;

/// `nn.Dropout(p)`: same shape.
struct Dropout {
    p: Expr,
}

impl Row for Dropout {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::Dropout)
    }
    fn constructor(&self) -> TokenStream {
        let p = &self.p;
        quote!(::tapir::nn::Dropout::new(#p))
    }
}

pub const DROPOUT: RowSpec = RowSpec {
    name: "Dropout",
    aliases: &[],
    params: &["p"],
    parse: |a, _| {
        let p = a.expr("p")?.unwrap_or_else(|| syn::parse_quote!(0.5));
        if let Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Float(f),
            ..
        }) = &p
        {
            let v: f64 = f.base10_parse()?;
            if !(0.0..=1.0).contains(&v) {
                return Err(syn::Error::new(
                    f.span(),
                    format!("Dropout probability must be between 0 and 1, got {v}"),
                ));
            }
        }
        Ok(Rc::new(Dropout { p }))
    },
};

/// `nn.Flatten(start_dim=1, end_dim=-1)`.
struct Flatten {
    start: i64,
    end: i64,
}

impl Row for Flatten {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        let (start, end) = (self.start, self.end);
        match (normalize_dim(start, x.len()), normalize_dim(end, x.len())) {
            (Some(s), Some(e)) if s <= e => Ok(flatten(x, s, e)),
            _ => Err(format!(
                "{label}: dims {start}..={end} are out of range for input `{}`{{from}}",
                show(x)
            )),
        }
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::Flatten)
    }
    fn constructor(&self) -> TokenStream {
        let (s, e) = (
            Literal::i64_unsuffixed(self.start),
            Literal::i64_unsuffixed(self.end),
        );
        quote!(::tapir::nn::Flatten { start_dim: #s, end_dim: #e })
    }
}

pub const FLATTEN: RowSpec = RowSpec {
    name: "Flatten",
    aliases: &[],
    params: &["start_dim", "end_dim"],
    parse: |a, _| {
        Ok(Rc::new(Flatten {
            start: a.int("start_dim", 1)?,
            end: a.int("end_dim", -1)?,
        }))
    },
};

/// `nn.Softmax(dim)`, `nn.LogSoftmax(dim)`, `nn.Softmin(dim)`.
struct Softmax {
    name: &'static str,
    dim: i64,
}

impl Row for Softmax {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        let dim = self.dim;
        normalize_dim(dim, x.len()).ok_or_else(|| {
            format!(
                "{label}: dim {dim} is out of range for input `{}`{{from}}",
                show(x)
            )
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        let ty = quote::format_ident!("{}", self.name);
        quote!(::tapir::nn::#ty)
    }
    fn constructor(&self) -> TokenStream {
        let (ty, d) = (self.runtime_type(), Literal::i64_unsuffixed(self.dim));
        quote!(#ty { dim: #d })
    }
}

macro_rules! softmax {
    ($($konst:ident, $name:literal;)*) => {$(
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["dim"],
            parse: |a, _| {
                let dim = a.required("dim")?;
                let dim = int_lit(&dim).ok_or_else(|| {
                    syn::Error::new(dim.span(), concat!($name, "'s `dim` must be an integer literal"))
                })?;
                Ok(Rc::new(Softmax { name: $name, dim }))
            },
        };
    )*};
}

softmax! {
    SOFTMAX, "Softmax";
    LOG_SOFTMAX, "LogSoftmax";
    SOFTMIN, "Softmin";
}

/// `nn.Identity`: same shape.
struct Identity;

impl Row for Identity {
    fn apply(&self, _: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::Identity)
    }
    fn constructor(&self) -> TokenStream {
        quote!(::tapir::nn::Identity)
    }
}

pub const IDENTITY: RowSpec = RowSpec {
    name: "Identity",
    aliases: &[],
    params: &[],
    parse: |_, _| Ok(Rc::new(Identity)),
};

/// `nn.PixelShuffle(r)`: `[*, C r², H, W]` -> `[*, C, H r, W r]`;
/// `nn.PixelUnshuffle(r)` the other way.
struct PixelShuffle {
    r: Dim,
    up: bool,
}

impl Row for PixelShuffle {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let n = x.len();
        if n < 3 {
            return Err(format!(
                "{label} expects input `[*, C, H, W]`, got `{}`{{from}}",
                show(x)
            ));
        }
        let r = &self.r;
        let divide = |d: &Dim, by: &Dim| d.exact_div(by).or_else(|| d.floor_div(by));
        let mut y = x.clone();
        if self.up {
            let r2 = r.mul(r);
            let c = &x[n - 3];
            facts.divides(c, &r2, &|| {
                format!("{label}: {c} channels are not divisible by upscale_factor² = {r2}")
            })?;
            y[n - 3] = divide(c, &r2).ok_or_else(|| format!("{label}: factor 0"))?;
            y[n - 2] = x[n - 2].mul(r);
            y[n - 1] = x[n - 1].mul(r);
        } else {
            for ax in [n - 2, n - 1] {
                let d = &x[ax];
                facts.divides(d, r, &|| {
                    format!("{label}: dim {ax} ({d}) is not divisible by downscale_factor {r}")
                })?;
                y[ax] = divide(d, r).ok_or_else(|| format!("{label}: factor 0"))?;
            }
            y[n - 3] = x[n - 3].mul(r).mul(r);
        }
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        match self.up {
            true => quote!(::tapir::nn::PixelShuffle),
            false => quote!(::tapir::nn::PixelUnshuffle),
        }
    }
    fn constructor(&self) -> TokenStream {
        let r = dim_usize(&self.r);
        match self.up {
            true => quote!(::tapir::nn::PixelShuffle { upscale_factor: #r }),
            false => quote!(::tapir::nn::PixelUnshuffle { downscale_factor: #r }),
        }
    }
}

pub const PIXEL_SHUFFLE: RowSpec = RowSpec {
    name: "PixelShuffle",
    aliases: &[],
    params: &["upscale_factor"],
    parse: |a, scope| {
        Ok(Rc::new(PixelShuffle {
            r: a.dim("upscale_factor", scope, None)?,
            up: true,
        }))
    },
};

pub const PIXEL_UNSHUFFLE: RowSpec = RowSpec {
    name: "PixelUnshuffle",
    aliases: &[],
    params: &["downscale_factor"],
    parse: |a, scope| {
        Ok(Rc::new(PixelShuffle {
            r: a.dim("downscale_factor", scope, None)?,
            up: false,
        }))
    },
};

/// `nn.ChannelShuffle(groups)`: `[N, C, *]`, same shape; C must divide by groups.
struct ChannelShuffle {
    groups: Dim,
}

impl Row for ChannelShuffle {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        if x.len() < 3 {
            return Err(format!(
                "{label} expects input `[N, C, *]`, got `{}`{{from}}",
                show(x)
            ));
        }
        let (c, g) = (&x[1], &self.groups);
        facts.divides(c, g, &|| {
            format!("{label}: {c} channels are not divisible by groups = {g}")
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::ChannelShuffle)
    }
    fn constructor(&self) -> TokenStream {
        let g = dim_usize(&self.groups);
        quote!(::tapir::nn::ChannelShuffle { groups: #g })
    }
}

pub const CHANNEL_SHUFFLE: RowSpec = RowSpec {
    name: "ChannelShuffle",
    aliases: &[],
    params: &["groups"],
    parse: |a, scope| {
        Ok(Rc::new(ChannelShuffle {
            groups: a.dim("groups", scope, None)?,
        }))
    },
};

/// `nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)`: `[N, C, *]`, same shape.
struct LocalResponseNorm {
    size: Dim,
    /// alpha, beta and k as written (PyTorch's defaults otherwise).
    scalars: [Option<Expr>; 3],
}

impl Row for LocalResponseNorm {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        if x.len() < 3 {
            return Err(format!(
                "{label} expects input `[N, C, *]`, got `{}`{{from}}",
                show(x)
            ));
        }
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::LocalResponseNorm)
    }
    fn constructor(&self) -> TokenStream {
        let size = dim_usize(&self.size);
        let [alpha, beta, k] =
            [(0, quote!(1e-4)), (1, quote!(0.75)), (2, quote!(1.0))].map(|(i, d)| {
                match &self.scalars[i] {
                    Some(e) => quote!((#e) as f64),
                    None => d,
                }
            });
        quote!(::tapir::nn::LocalResponseNorm { size: #size, alpha: #alpha, beta: #beta, k: #k })
    }
}

pub const LOCAL_RESPONSE_NORM: RowSpec = RowSpec {
    name: "LocalResponseNorm",
    aliases: &[],
    params: &["size", "alpha", "beta", "k"],
    parse: |a, scope| {
        Ok(Rc::new(LocalResponseNorm {
            size: a.dim("size", scope, None)?,
            scalars: [a.expr("alpha")?, a.expr("beta")?, a.expr("k")?],
        }))
    },
};
