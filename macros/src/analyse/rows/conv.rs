//! Sliding windows over `[N, C, L]`, `[N, C, H, W]` and `[N, C, D, H, W]`:
//! Conv1d/2d/3d and ConvTranspose1d/2d/3d (PyTorch's output-size formulas
//! on each spatial dim; pooling is `pool.rs`).

use super::{Row, RowSpec};
use crate::analyse::layers::Slot;
use crate::analyse::rules::{Facts, fill_slot, window};
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;
use syn::Expr;

/// `nn.Conv1d`, or `nn.Conv2d` / `nn.Conv3d` with square / cubic kernels.
struct Conv {
    /// 1 (`[N, C, L]`), 2 (`[N, C, H, W]`) or 3 (`[N, C, D, H, W]`).
    spatial: usize,
    inp: Slot,
    out: Dim,
    k: Dim,
    stride: Dim,
    padding: Dim,
    dilation: Dim,
    groups: Dim,
    bias: Option<Expr>,
    /// `::tapir::nn::PadMode::..` for a `padding_mode` other than zeros.
    padding_mode: Option<TokenStream>,
}

impl Conv {
    fn pattern(&self, channels: &str) -> String {
        match self.spatial {
            1 => format!("[N, {channels}, L]"),
            2 => format!("[N, {channels}, H, W]"),
            _ => format!("[N, {channels}, D, H, W]"),
        }
    }
}

impl Row for Conv {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        if x.len() != 2 + self.spatial {
            return Err(format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                self.pattern("C"),
                show(x)
            ));
        }
        let want = fill_slot(&self.inp, &x[1], "in_channels", label)?;
        facts.equal(&x[1], &want, &|| {
            format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                self.pattern(&want.to_string()),
                show(x)
            )
        })?;
        let groups = &self.groups;
        for (what, n) in [("in_channels", &want), ("out_channels", &self.out)] {
            facts.divides(n, groups, &|| {
                format!("{label}: {what} {n} is not divisible by groups {groups}")
            })?;
        }
        let mut y = x.clone();
        y[1] = self.out.clone();
        for (ax, out) in y.iter_mut().enumerate().skip(2) {
            *out = window(
                label,
                x,
                ax,
                &self.k,
                &self.stride,
                &self.padding,
                &self.dilation,
            )?;
        }
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        match self.spatial {
            1 => quote!(::tapir::nn::Conv1d),
            2 => quote!(::tapir::nn::Conv2d),
            _ => quote!(::tapir::nn::Conv3d),
        }
    }
    fn constructor(&self) -> TokenStream {
        let i = dim_usize(&self.inp.get().unwrap_or_default());
        let (o, k) = (dim_usize(&self.out), dim_usize(&self.k));
        let (s, p, d, g) = (
            dim_usize(&self.stride),
            dim_usize(&self.padding),
            dim_usize(&self.dilation),
            dim_usize(&self.groups),
        );
        let b = match &self.bias {
            Some(e) => quote!(#e),
            None => quote!(true),
        };
        let mode = self
            .padding_mode
            .as_ref()
            .map(|m| quote!(.padding_mode(#m)));
        match self.spatial {
            1 => {
                quote!(::tapir::nn::Conv1d::new(#i, #o, #k, ::tapir::nn::Conv1dOptions { stride: #s, padding: #p, dilation: #d, groups: #g }, #b) #mode)
            }
            2 => {
                quote!(::tapir::nn::Conv2d::new(#i, #o, (#k, #k), ::tapir::Conv2dOptions { stride: (#s, #s), padding: (#p, #p), dilation: (#d, #d), groups: #g }, #b) #mode)
            }
            _ => {
                quote!(::tapir::nn::Conv3d::new(#i, #o, (#k, #k, #k), ::tapir::nn::Conv3dOptions { stride: (#s, #s, #s), padding: (#p, #p, #p), dilation: (#d, #d, #d), groups: #g }, #b) #mode)
            }
        }
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.inp.get().is_none().then_some("in_channels")
    }
}

macro_rules! conv {
    ($konst:ident, $name:literal, $spatial:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &[
                "in_channels",
                "out_channels",
                "kernel_size",
                "stride",
                "padding",
                "dilation",
                "groups",
                "bias",
                "padding_mode",
            ],
            parse: |a, scope| {
                let padding_mode = padding_mode(a.expr("padding_mode")?, $name)?;
                Ok(Rc::new(Conv {
                    spatial: $spatial,
                    inp: a.slot("in_channels", scope)?,
                    out: a.dim("out_channels", scope, None)?,
                    k: a.dim("kernel_size", scope, None)?,
                    stride: a.dim("stride", scope, Some(Dim::lit(1)))?,
                    padding: a.dim("padding", scope, Some(Dim::lit(0)))?,
                    dilation: a.dim("dilation", scope, Some(Dim::lit(1)))?,
                    groups: a.dim("groups", scope, Some(Dim::lit(1)))?,
                    bias: a.expr("bias")?,
                    padding_mode,
                }))
            },
        };
    };
}

/// A convolution's `padding_mode` string as the runtime's `PadMode`
/// (`None` for zeros, the default).
fn padding_mode(e: Option<Expr>, row: &str) -> syn::Result<Option<TokenStream>> {
    let Some(e) = e else { return Ok(None) };
    if let Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = &e
    {
        match s.value().as_str() {
            "zeros" => return Ok(None),
            "reflect" => return Ok(Some(quote!(::tapir::nn::PadMode::Reflect))),
            "replicate" => return Ok(Some(quote!(::tapir::nn::PadMode::Replicate))),
            "circular" => return Ok(Some(quote!(::tapir::nn::PadMode::Circular))),
            _ => {}
        }
    }
    Err(syn::Error::new(
        syn::spanned::Spanned::span(&e),
        format!("{row}'s `padding_mode` is \"zeros\", \"reflect\", \"replicate\" or \"circular\""),
    ))
}

conv!(CONV1D, "Conv1d", 1);
conv!(CONV2D, "Conv2d", 2);
conv!(CONV3D, "Conv3d", 3);

/// `nn.ConvTranspose1d/2d/3d` with square / cubic kernels: each spatial
/// dim becomes `(n - 1) s - 2p + d (k - 1) + output_padding + 1`.
struct ConvTranspose {
    /// 1 (`[N, C, L]` or `[C, L]`), 2 (`[N, C, H, W]`) or 3
    /// (`[N, C, D, H, W]`).
    spatial: usize,
    inp: Slot,
    out: Dim,
    k: Dim,
    stride: Dim,
    padding: Dim,
    output_padding: Dim,
    groups: Dim,
    bias: Option<Expr>,
    dilation: Dim,
}

impl Row for ConvTranspose {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let one_d = self.spatial == 1;
        let ok = x.len() == self.spatial + 2 || (one_d && x.len() == 2);
        let pattern = |c: &str| match self.spatial {
            1 => format!("[N, {c}, L]` or `[{c}, L]"),
            2 => format!("[N, {c}, H, W]"),
            _ => format!("[N, {c}, D, H, W]"),
        };
        if !ok {
            return Err(format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                pattern("C"),
                show(x)
            ));
        }
        let channels = x.len() - self.spatial - 1;
        let want = fill_slot(&self.inp, &x[channels], "in_channels", label)?;
        facts.equal(&x[channels], &want, &|| {
            format!(
                "{label} expects input `{}`, got `{}`{{from}}",
                pattern(&want.to_string()),
                show(x)
            )
        })?;
        let groups = &self.groups;
        for (what, n) in [("in_channels", &want), ("out_channels", &self.out)] {
            facts.divides(n, groups, &|| {
                format!("{label}: {what} {n} is not divisible by groups {groups}")
            })?;
        }
        let (op, s, d) = (&self.output_padding, &self.stride, &self.dilation);
        if let (Some(o), Some(s), Some(d)) = (op.as_const(), s.as_const(), d.as_const())
            && o >= s
            && o >= d
        {
            return Err(format!(
                "{label}: output_padding {o} must be smaller than either stride {s} or dilation {d}"
            ));
        }
        let one = Dim::lit(1);
        let mut y = x.clone();
        y[channels] = self.out.clone();
        for (ax, out) in y.iter_mut().enumerate().skip(channels + 1) {
            let grown = x[ax].sub(&one).mul(s).add(&d.mul(&self.k.sub(&one)));
            *out = grown.sub(&self.padding.mul(&Dim::lit(2))).add(op).add(&one);
            if let Some(v) = out.as_const()
                && v < 1
            {
                return Err(format!(
                    "{label} leaves nothing of dim {ax} of input `{}`{{from}}: the padding is larger than the output",
                    show(x)
                ));
            }
        }
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        match self.spatial {
            1 => quote!(::tapir::nn::ConvTranspose1d),
            2 => quote!(::tapir::nn::ConvTranspose2d),
            _ => quote!(::tapir::nn::ConvTranspose3d),
        }
    }
    fn constructor(&self) -> TokenStream {
        let i = dim_usize(&self.inp.get().unwrap_or_default());
        let (o, k) = (dim_usize(&self.out), dim_usize(&self.k));
        let (s, p, op, g, d) = (
            dim_usize(&self.stride),
            dim_usize(&self.padding),
            dim_usize(&self.output_padding),
            dim_usize(&self.groups),
            dim_usize(&self.dilation),
        );
        let b = match &self.bias {
            Some(e) => quote!(#e),
            None => quote!(true),
        };
        match self.spatial {
            1 => {
                quote!(::tapir::nn::ConvTranspose1d::new(#i, #o, #k, ::tapir::nn::Conv1dOptions { stride: #s, padding: #p, dilation: #d, groups: #g }, #op, #b))
            }
            2 => {
                quote!(::tapir::nn::ConvTranspose2d::new(#i, #o, (#k, #k), ::tapir::Conv2dOptions { stride: (#s, #s), padding: (#p, #p), dilation: (#d, #d), groups: #g }, (#op, #op), #b))
            }
            _ => {
                quote!(::tapir::nn::ConvTranspose3d::new(#i, #o, (#k, #k, #k), ::tapir::nn::Conv3dOptions { stride: (#s, #s, #s), padding: (#p, #p, #p), dilation: (#d, #d, #d), groups: #g }, (#op, #op, #op), #b))
            }
        }
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.inp.get().is_none().then_some("in_channels")
    }
}

macro_rules! conv_transpose {
    ($konst:ident, $name:literal, $spatial:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &[
                "in_channels",
                "out_channels",
                "kernel_size",
                "stride",
                "padding",
                "output_padding",
                "groups",
                "bias",
                "dilation",
            ],
            parse: |a, scope| {
                Ok(Rc::new(ConvTranspose {
                    spatial: $spatial,
                    inp: a.slot("in_channels", scope)?,
                    out: a.dim("out_channels", scope, None)?,
                    k: a.dim("kernel_size", scope, None)?,
                    stride: a.dim("stride", scope, Some(Dim::lit(1)))?,
                    padding: a.dim("padding", scope, Some(Dim::lit(0)))?,
                    output_padding: a.dim("output_padding", scope, Some(Dim::lit(0)))?,
                    groups: a.dim("groups", scope, Some(Dim::lit(1)))?,
                    bias: a.expr("bias")?,
                    dilation: a.dim("dilation", scope, Some(Dim::lit(1)))?,
                }))
            },
        };
    };
}

conv_transpose!(CONV_TRANSPOSE1D, "ConvTranspose1d", 1);
conv_transpose!(CONV_TRANSPOSE2D, "ConvTranspose2d", 2);
conv_transpose!(CONV_TRANSPOSE3D, "ConvTranspose3d", 3);
