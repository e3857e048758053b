//! Linear and the normalisation layers: rules on the last dim or on channels.

use super::{Row, RowSpec};
use crate::analyse::layers::Slot;
use crate::analyse::rules::{Facts, fill_slot, last_dim, rank_at_least};
use crate::codegen::dim_usize;
use crate::shape::{Dim, Shape, show};
use proc_macro2::TokenStream;
use quote::quote;
use std::rc::Rc;
use syn::Expr;

fn slot_usize(s: &Slot) -> TokenStream {
    dim_usize(&s.get().unwrap_or_default())
}

fn or_default(e: &Option<Expr>, default: TokenStream) -> TokenStream {
    match e {
        Some(e) => quote!(#e),
        None => default,
    }
}

/// `nn.Linear`: `[.., in_features]` -> `[.., out_features]`.
struct Linear {
    inp: Slot,
    out: Dim,
    bias: Option<Expr>,
}

impl Row for Linear {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        rank_at_least(label, x, 1, "[.., in_features]")?;
        let want = fill_slot(&self.inp, &x[x.len() - 1], "in_features", label)?;
        last_dim(label, x, &want, facts)?;
        let mut y = x.clone();
        *y.last_mut().expect("rank checked") = self.out.clone();
        Ok(y)
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::Linear)
    }
    fn constructor(&self) -> TokenStream {
        let (i, o) = (slot_usize(&self.inp), dim_usize(&self.out));
        let b = or_default(&self.bias, quote!(true));
        quote!(::tapir::nn::Linear::new(#i, #o, #b))
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.inp.get().is_none().then_some("in_features")
    }
}

pub const LINEAR: RowSpec = RowSpec {
    name: "Linear",
    aliases: &[],
    params: &["in_features", "out_features", "bias"],
    parse: |a, scope| {
        Ok(Rc::new(Linear {
            inp: a.slot("in_features", scope)?,
            out: a.dim("out_features", scope, None)?,
            bias: a.expr("bias")?,
        }))
    },
};

/// `nn.LayerNorm` and `nn.RMSNorm` over the last dim.
struct Norm {
    d: Slot,
    eps: Option<Expr>,
    affine: Option<Expr>,
    rms: bool,
}

impl Row for Norm {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        rank_at_least(label, x, 1, "[.., normalized_shape]")?;
        let want = fill_slot(&self.d, &x[x.len() - 1], "normalized_shape", label)?;
        last_dim(label, x, &want, facts)?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        match self.rms {
            false => quote!(::tapir::nn::LayerNorm),
            true => quote!(::tapir::nn::RMSNorm),
        }
    }
    fn constructor(&self) -> TokenStream {
        let (d, a) = (slot_usize(&self.d), or_default(&self.affine, quote!(true)));
        if self.rms {
            let eps = match &self.eps {
                Some(e) => quote!(::core::option::Option::Some(#e)),
                None => quote!(::core::option::Option::None),
            };
            quote!(::tapir::nn::RMSNorm::new(&[#d], #eps, #a))
        } else {
            let eps = or_default(&self.eps, quote!(1e-5));
            quote!(::tapir::nn::LayerNorm::new(&[#d], #eps, #a))
        }
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.d.get().is_none().then_some("normalized_shape")
    }
}

macro_rules! norm {
    ($konst:ident, $name:literal, $rms:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: &["normalized_shape", "eps", "elementwise_affine"],
            parse: |a, scope| {
                Ok(Rc::new(Norm {
                    d: a.slot("normalized_shape", scope)?,
                    eps: a.expr("eps")?,
                    affine: a.expr("elementwise_affine")?,
                    rms: $rms,
                }))
            },
        };
    };
}

norm!(LAYER_NORM, "LayerNorm", false);
norm!(RMS_NORM, "RMSNorm", true);

/// `nn.BatchNorm1d` / `2d` / `3d`: channels in dim 1; PyTorch's keyword
/// arguments become the runtime type's builders of the same names.
struct BatchNorm {
    c: Slot,
    dims: usize,
    kwargs: [(&'static str, Option<Expr>); 4],
}

impl Row for BatchNorm {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let (pattern, ok_rank) = match self.dims {
            1 => ("[N, C] or [N, C, L]", x.len() == 2 || x.len() == 3),
            2 => ("[N, C, H, W]", x.len() == 4),
            _ => ("[N, C, D, H, W]", x.len() == 5),
        };
        if !ok_rank {
            return Err(format!(
                "{label} expects input `{pattern}`, got `{}`{{from}}",
                show(x)
            ));
        }
        let want = fill_slot(&self.c, &x[1], "num_features", label)?;
        facts.equal(&x[1], &want, &|| {
            format!(
                "{label} expects {want} channels in dim 1, got `{}`{{from}}",
                show(x)
            )
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::BatchNorm)
    }
    fn constructor(&self) -> TokenStream {
        let c = slot_usize(&self.c);
        let new = quote::format_ident!("new_{}d", self.dims);
        let kwargs = builders(&self.kwargs);
        quote!(::tapir::nn::BatchNorm::#new(#c) #kwargs)
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.c.get().is_none().then_some("num_features")
    }
}

/// `.name(value)` for each keyword argument given.
fn builders(kwargs: &[(&'static str, Option<Expr>)]) -> TokenStream {
    kwargs
        .iter()
        .filter_map(|(name, e)| {
            let method = quote::format_ident!("{name}");
            e.as_ref().map(|e| quote!(.#method(#e)))
        })
        .collect()
}

/// The batch and instance norms' parameters, as PyTorch's `_NormBase`.
const RUNNING_NORM_PARAMS: &[&str] = &[
    "num_features",
    "eps",
    "momentum",
    "affine",
    "track_running_stats",
];

macro_rules! batch_norm {
    ($konst:ident, $name:literal, $dims:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: RUNNING_NORM_PARAMS,
            parse: |a, scope| {
                Ok(Rc::new(BatchNorm {
                    c: a.slot("num_features", scope)?,
                    dims: $dims,
                    kwargs: [
                        ("eps", a.expr("eps")?),
                        ("momentum", a.expr("momentum")?),
                        ("affine", a.expr("affine")?),
                        ("track_running_stats", a.expr("track_running_stats")?),
                    ],
                }))
            },
        };
    };
}

batch_norm!(BATCH_NORM_1D, "BatchNorm1d", 1);
batch_norm!(BATCH_NORM_2D, "BatchNorm2d", 2);
batch_norm!(BATCH_NORM_3D, "BatchNorm3d", 3);

/// `nn.GroupNorm`: channels in dim 1, divided into groups.
struct GroupNorm {
    groups: Dim,
    c: Slot,
    eps: Option<Expr>,
    affine: Option<Expr>,
}

impl Row for GroupNorm {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        rank_at_least(label, x, 2, "[N, C, *]")?;
        let want = fill_slot(&self.c, &x[1], "num_channels", label)?;
        facts.equal(&x[1], &want, &|| {
            format!(
                "{label} expects {want} channels in dim 1, got `{}`{{from}}",
                show(x)
            )
        })?;
        let groups = &self.groups;
        facts.divides(&want, groups, &|| {
            format!("{label}: num_channels {want} is not divisible by num_groups {groups}")
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::GroupNorm)
    }
    fn constructor(&self) -> TokenStream {
        let (g, c) = (dim_usize(&self.groups), slot_usize(&self.c));
        let eps = or_default(&self.eps, quote!(1e-5));
        let affine = or_default(&self.affine, quote!(true));
        quote!(::tapir::nn::GroupNorm::new(#g, #c, #eps, #affine))
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.c.get().is_none().then_some("num_channels")
    }
}

pub const GROUP_NORM: RowSpec = RowSpec {
    name: "GroupNorm",
    aliases: &[],
    params: &["num_groups", "num_channels", "eps", "affine"],
    parse: |a, scope| {
        Ok(Rc::new(GroupNorm {
            groups: a.dim("num_groups", scope, None)?,
            c: a.slot("num_channels", scope)?,
            eps: a.expr("eps")?,
            affine: a.expr("affine")?,
        }))
    },
};

/// `nn.InstanceNorm1d` / `2d` / `3d`: batched or unbatched,
/// channels just before the spatial dims; `momentum` and
/// `track_running_stats` become the runtime type's builders.
struct InstanceNorm {
    c: Slot,
    eps: Option<Expr>,
    affine: Option<Expr>,
    /// Spatial dims: 1, 2 or 3.
    spatial: usize,
    kwargs: [(&'static str, Option<Expr>); 2],
}

impl Row for InstanceNorm {
    fn apply(&self, label: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let spatial = self.spatial;
        let pattern = match spatial {
            1 => "[N, C, L] or [C, L]",
            2 => "[N, C, H, W] or [C, H, W]",
            _ => "[N, C, D, H, W] or [C, D, H, W]",
        };
        if x.len() != spatial + 2 && x.len() != spatial + 1 {
            return Err(format!(
                "{label} expects input `{pattern}`, got `{}`{{from}}",
                show(x)
            ));
        }
        let at = x.len() - spatial - 1;
        let want = fill_slot(&self.c, &x[at], "num_features", label)?;
        facts.equal(&x[at], &want, &|| {
            format!(
                "{label} expects {want} channels in dim {at}, got `{}`{{from}}",
                show(x)
            )
        })?;
        Ok(x.clone())
    }
    fn runtime_type(&self) -> TokenStream {
        quote!(::tapir::nn::InstanceNorm)
    }
    fn constructor(&self) -> TokenStream {
        let c = slot_usize(&self.c);
        let eps = or_default(&self.eps, quote!(1e-5));
        let affine = or_default(&self.affine, quote!(false));
        let kwargs = builders(&self.kwargs);
        let new = quote::format_ident!("new_{}d", self.spatial);
        quote!(::tapir::nn::InstanceNorm::#new(#c, #eps, #affine) #kwargs)
    }
    fn uninferred(&self) -> Option<&'static str> {
        self.c.get().is_none().then_some("num_features")
    }
}

macro_rules! instance_norm {
    ($konst:ident, $name:literal, $spatial:literal) => {
        pub const $konst: RowSpec = RowSpec {
            name: $name,
            aliases: &[],
            params: RUNNING_NORM_PARAMS,
            parse: |a, scope| {
                let (eps, momentum) = (a.expr("eps")?, a.expr("momentum")?);
                Ok(Rc::new(InstanceNorm {
                    c: a.slot("num_features", scope)?,
                    eps,
                    affine: a.expr("affine")?,
                    spatial: $spatial,
                    kwargs: [
                        ("momentum", momentum),
                        ("track_running_stats", a.expr("track_running_stats")?),
                    ],
                }))
            },
        };
    };
}

instance_norm!(INSTANCE_NORM_1D, "InstanceNorm1d", 1);
instance_norm!(INSTANCE_NORM_2D, "InstanceNorm2d", 2);
instance_norm!(INSTANCE_NORM_3D, "InstanceNorm3d", 3);
