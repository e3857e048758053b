//! Pooling rows: `MaxPool1d/2d/3d`, `AvgPool1d/2d/3d`, `LPPool1d/2d/3d`
//! (PyTorch's output size on each spatial dim, `ceil_mode` included) and
//! the adaptive pools (the spatial dims become the output size); and the
//! padding layers, whose spatial dims grow. Batched or unbatched input.

use super::{Row, RowSpec};
use crate::analyse::dims::{DimScope, dim_of_expr};
use crate::analyse::layers::Args;
use crate::analyse::rules::{Facts, window};
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;
use syn::Expr;
use syn::spanned::Spanned;

/// The input patterns of a layer over `spatial` trailing dims.
fn pattern(spatial: usize) -> &'static str {
    match spatial {
        1 => "[N, C, L]` or `[C, L]",
        2 => "[N, C, H, W]` or `[C, H, W]",
        _ => "[N, C, D, H, W]` or `[C, D, H, W]",
    }
}

/// Checks the rank: `spatial` trailing dims after `[N, C]` or `[C]`.
fn check_rank(label: &str, x: &Shape, spatial: usize) -> Result<(), String> {
    if x.len() == spatial + 1 || x.len() == spatial + 2 {
        return Ok(());
    }
    Err(format!(
        "{label} expects input `{}`, got `{}`{{from}}",
        pattern(spatial),
        show(x)
    ))
}

/// `nn.MaxPool1d/2d`, `nn.AvgPool1d/2d` and `nn.LPPool1d/2d` (stride
/// defaults to the kernel).
struct Pool {
    max: bool,
    /// An LPPool's p (its windows are an average pool's, unpadded).
    norm_type: Option<Expr>,
    /// Whether the row wrote a stride (an LPPool prints None otherwise).
    stride_given: bool,
    spatial: usize,
    k: Dim,
    stride: Dim,
    padding: Dim,
    dilation: Dim,
    ceil_mode: bool,
    count_include_pad: Option<Expr>,
    divisor_override: Option<Expr>,
}

impl Pool {
    /// The output size along `ax`: PyTorch's formula, rounded up with
    /// `ceil_mode` unless the last window would start in the right padding.
    fn out(&self, label: &str, x: &Shape, ax: usize) -> Result<Dim, String> {
        let (k, s, p, d) = (&self.k, &self.stride, &self.padding, &self.dilation);
        if !self.ceil_mode {
            return window(label, x, ax, k, s, p, d);
        }
        let mut rounded_up = x.clone();
        rounded_up[ax] = x[ax].add(&s.sub(&Dim::lit(1)));
        let out = window(label, &rounded_up, ax, k, s, p, d)?;
        let consts = [&x[ax], k, s, p, d].map(Dim::as_const);
        match consts {
            [Some(n), Some(_), Some(s), Some(p), Some(_)] => {
                let out = out.as_const().unwrap_or(1);
                // The last window would start in the padding: dropped.
                Ok(Dim::lit(if (out - 1) * s >= n + p { out - 1 } else { out }))
            }
            [_, Some(k), Some(s), Some(p), Some(d)] if s <= d * (k - 1) + 1 - p => Ok(out),
            _ => Err(format!(
                "{label} with ceil_mode needs dim {ax} of input `{}` to be a number, or a stride of at most \
                 dilation * (kernel_size - 1) + 1 - padding (so no window starts in the padding)",
                show(x)
            )),
        }
    }
}

impl Row for Pool {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        check_rank(label, x, self.spatial)?;
        let mut y = x.clone();
        let first = x.len() - self.spatial;
        for (ax, out) in y.iter_mut().enumerate().skip(first) {
            *out = self.out(label, x, ax)?;
        }
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        match (self.max, self.spatial) {
            _ if self.norm_type.is_some() => match self.spatial {
                1 => quote!(::tapir::nn::LPPool1d),
                2 => quote!(::tapir::nn::LPPool2d),
                _ => quote!(::tapir::nn::LPPool3d),
            },
            (true, 1) => quote!(::tapir::nn::MaxPool1d),
            (true, 2) => quote!(::tapir::nn::MaxPool2d),
            (true, _) => quote!(::tapir::nn::MaxPool3d),
            (false, 1) => quote!(::tapir::nn::AvgPool1d),
            (false, 2) => quote!(::tapir::nn::AvgPool2d),
            (false, _) => quote!(::tapir::nn::AvgPool3d),
        }
    }
    fn constructor(&self) -> TokenStream {
        let ty = self.runtime_type();
        let [k, s, p, d] = [&self.k, &self.stride, &self.padding, &self.dilation].map(dim_usize);
        let pair = |v: &TokenStream| match self.spatial {
            1 => quote!(#v),
            2 => quote!((#v, #v)),
            _ => quote!((#v, #v, #v)),
        };
        let (s, p, d) = (pair(&s), pair(&p), pair(&d));
        let ceil = self.ceil_mode;
        if let Some(norm) = &self.norm_type {
            let stride = match self.stride_given {
                true => quote!(pool.stride = ::core::option::Option::Some(#s);),
                false => quote!(),
            };
            return quote!({ let mut pool = #ty::new(#norm as f64, #k); #stride pool.ceil_mode = #ceil; pool });
        }
        let mut fields = quote!(pool.stride = #s; pool.padding = #p; pool.ceil_mode = #ceil;);
        if self.max {
            fields.extend(quote!(pool.dilation = #d;));
        }
        if let Some(e) = &self.count_include_pad {
            fields.extend(quote!(pool.count_include_pad = #e;));
        }
        if let Some(e) = &self.divisor_override {
            fields.extend(quote!(pool.divisor_override = ::core::option::Option::Some(#e);));
        }
        quote!({ let mut pool = #ty::new(#k); #fields pool })
    }
}

/// Parses a pooling row's arguments (`max`: a max pool's dilation and
/// return_indices; `spatial` 2: average pooling's divisor_override).
fn parse_pool(
    a: &mut Args,
    scope: &mut DimScope,
    max: bool,
    spatial: usize,
) -> syn::Result<Rc<dyn Row>> {
    let k = a.dim("kernel_size", scope, None)?;
    let (stride, stride_given) = stride_arg(a, scope, &k)?;
    let padding = a.dim("padding", scope, Some(Dim::lit(0)))?;
    let dilation = match max {
        true => a.dim("dilation", scope, Some(Dim::lit(1)))?,
        false => Dim::lit(1),
    };
    if let Some(e) = if max { a.expr("return_indices")? } else { None }
        && !is_false(&e)
    {
        return Err(syn::Error::new(
            e.span(),
            "a model! pooling row returns no indices; declare the pool as a hand-written field and call its `forward_with_indices`",
        ));
    }
    Ok(Rc::new(Pool {
        max,
        norm_type: None,
        stride_given,
        spatial,
        k,
        stride,
        padding,
        dilation,
        ceil_mode: a.bool_lit("ceil_mode", false)?,
        count_include_pad: if max {
            None
        } else {
            a.expr("count_include_pad")?
        },
        divisor_override: if max || spatial == 1 {
            None
        } else {
            a.expr("divisor_override")?
        },
    }))
}

/// The stride (the kernel when not written) and whether it was written.
fn stride_arg(a: &mut Args, scope: &mut DimScope, k: &Dim) -> syn::Result<(Dim, bool)> {
    Ok(match a.expr("stride")? {
        Some(e) => (dim_of_expr(&e, scope)?, true),
        None => (k.clone(), false),
    })
}

fn is_false(e: &Expr) -> bool {
    matches!(e, Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) if !b.value)
}

const MAX_POOL_PARAMS: &[&str] = &[
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "return_indices",
    "ceil_mode",
];

pub const MAX_POOL1D: RowSpec = RowSpec {
    name: "MaxPool1d",
    aliases: &[],
    params: MAX_POOL_PARAMS,
    parse: |a, scope| parse_pool(a, scope, true, 1),
};

pub const MAX_POOL2D: RowSpec = RowSpec {
    name: "MaxPool2d",
    aliases: &[],
    params: MAX_POOL_PARAMS,
    parse: |a, scope| parse_pool(a, scope, true, 2),
};

pub const MAX_POOL3D: RowSpec = RowSpec {
    name: "MaxPool3d",
    aliases: &[],
    params: MAX_POOL_PARAMS,
    parse: |a, scope| parse_pool(a, scope, true, 3),
};

pub const AVG_POOL1D: RowSpec = RowSpec {
    name: "AvgPool1d",
    aliases: &[],
    params: &[
        "kernel_size",
        "stride",
        "padding",
        "ceil_mode",
        "count_include_pad",
    ],
    parse: |a, scope| parse_pool(a, scope, false, 1),
};

pub const AVG_POOL2D: RowSpec = RowSpec {
    name: "AvgPool2d",
    aliases: &[],
    params: &[
        "kernel_size",
        "stride",
        "padding",
        "ceil_mode",
        "count_include_pad",
        "divisor_override",
    ],
    parse: |a, scope| parse_pool(a, scope, false, 2),
};

pub const AVG_POOL3D: RowSpec = RowSpec {
    name: "AvgPool3d",
    aliases: &[],
    params: &[
        "kernel_size",
        "stride",
        "padding",
        "ceil_mode",
        "count_include_pad",
        "divisor_override",
    ],
    parse: |a, scope| parse_pool(a, scope, false, 3),
};

/// `nn.LPPool1d/2d(norm_type, kernel_size, stride=None, ceil_mode=False)`.
fn parse_lp_pool(a: &mut Args, scope: &mut DimScope, spatial: usize) -> syn::Result<Rc<dyn Row>> {
    let norm_type = a.required("norm_type")?;
    let k = a.dim("kernel_size", scope, None)?;
    let (stride, stride_given) = stride_arg(a, scope, &k)?;
    Ok(Rc::new(Pool {
        max: false,
        norm_type: Some(norm_type),
        stride_given,
        spatial,
        k,
        stride,
        padding: Dim::lit(0),
        dilation: Dim::lit(1),
        ceil_mode: a.bool_lit("ceil_mode", false)?,
        count_include_pad: None,
        divisor_override: None,
    }))
}

const LP_POOL_PARAMS: &[&str] = &["norm_type", "kernel_size", "stride", "ceil_mode"];

pub const LP_POOL1D: RowSpec = RowSpec {
    name: "LPPool1d",
    aliases: &[],
    params: LP_POOL_PARAMS,
    parse: |a, scope| parse_lp_pool(a, scope, 1),
};

pub const LP_POOL2D: RowSpec = RowSpec {
    name: "LPPool2d",
    aliases: &[],
    params: LP_POOL_PARAMS,
    parse: |a, scope| parse_lp_pool(a, scope, 2),
};

pub const LP_POOL3D: RowSpec = RowSpec {
    name: "LPPool3d",
    aliases: &[],
    params: LP_POOL_PARAMS,
    parse: |a, scope| parse_lp_pool(a, scope, 3),
};

/// `nn.AdaptiveAvgPool1d/2d/3d`, `nn.AdaptiveMaxPool1d/2d/3d`: the spatial
/// dims become the output size.
struct AdaptivePool {
    max: bool,
    /// The output size, one per spatial dim.
    size: Vec<Dim>,
}

impl Row for AdaptivePool {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        let spatial = self.size.len();
        check_rank(label, x, spatial)?;
        let mut y = x.clone();
        y[x.len() - spatial..].clone_from_slice(&self.size);
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        match (self.max, self.size.len()) {
            (true, 1) => quote!(::tapir::nn::AdaptiveMaxPool1d),
            (true, 2) => quote!(::tapir::nn::AdaptiveMaxPool2d),
            (true, _) => quote!(::tapir::nn::AdaptiveMaxPool3d),
            (false, 1) => quote!(::tapir::nn::AdaptiveAvgPool1d),
            (false, 2) => quote!(::tapir::nn::AdaptiveAvgPool2d),
            (false, _) => quote!(::tapir::nn::AdaptiveAvgPool3d),
        }
    }
    fn constructor(&self) -> TokenStream {
        let ty = self.runtime_type();
        let size: Vec<TokenStream> = self.size.iter().map(dim_usize).collect();
        match size.as_slice() {
            [l] => quote!(#ty { output_size: #l }),
            [h, w] => quote!(#ty { output_size: (#h, #w) }),
            [d, h, w] => quote!(#ty { output_size: (#d, #h, #w) }),
            _ => quote!(::core::compile_error!("adaptive pools are 1-D, 2-D or 3-D")),
        }
    }
}

macro_rules! adaptive_pool {
    ($konst:ident, $name:literal, $max:literal, 1) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["output_size"],
            parse: |a, scope| {
                let size = vec![a.dim("output_size", scope, None)?];
                Ok(Rc::new(AdaptivePool { max: $max, size }))
            },
        };
    };
    ($konst:ident, $name:literal, $max:literal, 2) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["output_size", "output_width"],
            parse: |a, scope| {
                let h = a.dim("output_size", scope, None)?;
                let w = a.dim("output_width", scope, Some(h.clone()))?;
                Ok(Rc::new(AdaptivePool {
                    max: $max,
                    size: vec![h, w],
                }))
            },
        };
    };
}

/// The 3-D adaptive pools: a cube of `output_size`, or `output_height`
/// and `output_width` given apart.
macro_rules! adaptive_pool3d {
    ($konst:ident, $name:literal, $max:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["output_size", "output_height", "output_width"],
            parse: |a, scope| {
                let d = a.dim("output_size", scope, None)?;
                let h = a.dim("output_height", scope, Some(d.clone()))?;
                let w = a.dim("output_width", scope, Some(d.clone()))?;
                Ok(Rc::new(AdaptivePool {
                    max: $max,
                    size: vec![d, h, w],
                }))
            },
        };
    };
}

adaptive_pool3d!(ADAPTIVE_AVG_POOL3D, "AdaptiveAvgPool3d", false);
adaptive_pool3d!(ADAPTIVE_MAX_POOL3D, "AdaptiveMaxPool3d", true);
adaptive_pool!(ADAPTIVE_AVG_POOL1D, "AdaptiveAvgPool1d", false, 1);
adaptive_pool!(ADAPTIVE_AVG_POOL2D, "AdaptiveAvgPool2d", false, 2);
adaptive_pool!(ADAPTIVE_MAX_POOL1D, "AdaptiveMaxPool1d", true, 1);
adaptive_pool!(ADAPTIVE_MAX_POOL2D, "AdaptiveMaxPool2d", true, 2);

/// `nn.ZeroPad1d/2d/3d`, `nn.ReflectionPad1d/2d/3d`,
/// `nn.ReplicationPad1d/2d/3d`, `nn.CircularPad1d/2d/3d` with one padding
/// for every side: the last one, two or three dims grow by twice it.
struct Pad {
    layer: &'static str,
    spatial: usize,
    padding: Dim,
    /// `nn.ConstantPad1d/2d`'s fill (None for the other layers).
    value: Option<Expr>,
}

impl Row for Pad {
    fn apply(&self, label: &str, x: &Shape, _: &mut dyn Facts) -> Result<Shape, String> {
        check_rank(label, x, self.spatial)?;
        let grow = self.padding.mul(&Dim::lit(2));
        let mut y = x.clone();
        let first = x.len() - self.spatial;
        for d in y.iter_mut().skip(first) {
            *d = d.add(&grow);
        }
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        if self.value.is_some() {
            return quote!(::tapir::nn::ConstantPad);
        }
        let ty = quote::format_ident!("{}", self.layer);
        quote!(::tapir::nn::#ty)
    }
    fn constructor(&self) -> TokenStream {
        let p = dim_usize(&self.padding);
        if let Some(v) = &self.value {
            let sides = 2 * self.spatial;
            return quote!(::tapir::nn::ConstantPad { padding: vec![#p; #sides], value: (#v) as f64 });
        }
        let ty = self.runtime_type();
        quote!(#ty::new(#p))
    }
}

macro_rules! padding_rows {
    ($($konst:ident, $name:literal, $spatial:literal;)*) => {$(
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["padding"],
            parse: |a, scope| {
                Ok(Rc::new(Pad {
                    layer: $name,
                    spatial: $spatial,
                    padding: a.dim("padding", scope, None)?,
                    value: None,
                }))
            },
        };
    )*};
}

padding_rows! {
    ZERO_PAD1D, "ZeroPad1d", 1;
    ZERO_PAD2D, "ZeroPad2d", 2;
    REFLECTION_PAD1D, "ReflectionPad1d", 1;
    REFLECTION_PAD2D, "ReflectionPad2d", 2;
    REPLICATION_PAD1D, "ReplicationPad1d", 1;
    REPLICATION_PAD2D, "ReplicationPad2d", 2;
    CIRCULAR_PAD1D, "CircularPad1d", 1;
    CIRCULAR_PAD2D, "CircularPad2d", 2;
    ZERO_PAD3D, "ZeroPad3d", 3;
    REFLECTION_PAD3D, "ReflectionPad3d", 3;
    REPLICATION_PAD3D, "ReplicationPad3d", 3;
    CIRCULAR_PAD3D, "CircularPad3d", 3;
}

/// `nn.ConstantPad1d/2d/3d(padding, value)`: as the other padding rows,
/// filled with `value`.
macro_rules! constant_pad_rows {
    ($($konst:ident, $name:literal, $spatial:literal;)*) => {$(
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["padding", "value"],
            parse: |a, scope| {
                let padding = a.dim("padding", scope, None)?;
                Ok(Rc::new(Pad {
                    layer: $name,
                    spatial: $spatial,
                    padding,
                    value: Some(a.required("value")?),
                }))
            },
        };
    )*};
}

constant_pad_rows! {
    CONSTANT_PAD1D, "ConstantPad1d", 1;
    CONSTANT_PAD2D, "ConstantPad2d", 2;
    CONSTANT_PAD3D, "ConstantPad3d", 3;
}
