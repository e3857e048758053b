//! `torch.nn`'s activation modules with parameters, each a call of the
//! tensor method of the same name (`runtime/src/ops/activation.rs`), with
//! PyTorch's field names, defaults and repr (the parameterless ones are
//! unit structs in `layers.rs`).
//!
//! ```
//! use tapir_runtime::nn::{ELU, Forward, Hardtanh, Module};
//! use tapir_runtime::Tensor;
//! let x = Tensor::from_vec(vec![-2.0f32, 0.5, 2.0], &[3]);
//! assert_eq!(Hardtanh::default().forward(&x).to_vec::<f32>(), vec![-1.0, 0.5, 1.0]);
//! assert_eq!(ELU::default().repr(), "ELU(alpha=1.0)");
//! ```

use super::module::{Forward, Module, TensorKind};
use crate::Tensor;

/// Declares an activation module: its fields with PyTorch's defaults, its
/// forward and its repr.
macro_rules! activation_module {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($field:ident: $ty:ty = $default:expr),* }
            => |$s:ident, $x:ident| $forward:expr, repr |$r:ident| $repr:expr;
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            $(#[doc = concat!("PyTorch's `", stringify!($field), "`.")] pub $field: $ty,)*
        }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default),* }
            }
        }
        impl Forward for $name {
            fn forward(&self, $x: &Tensor) -> Tensor {
                let $s = self;
                $forward
            }
        }
        impl Module for $name {
            fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
            fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
            fn repr(&self) -> String {
                let $r = self;
                $repr
            }
        }
        crate::display_as_repr!($name);
    )*};
}

activation_module! {
    /// `nn.ELU(alpha=1.0)`.
    ELU { alpha: f64 = 1.0 } => |s, x| x.elu(s.alpha), repr |s| format!("ELU(alpha={:?})", s.alpha);
    /// `nn.CELU(alpha=1.0)`.
    CELU { alpha: f64 = 1.0 } => |s, x| x.celu(s.alpha), repr |s| format!("CELU(alpha={:?})", s.alpha);
    /// `nn.Hardtanh(min_val=-1.0, max_val=1.0)`.
    Hardtanh { min_val: f64 = -1.0, max_val: f64 = 1.0 } => |s, x| x.hardtanh(s.min_val, s.max_val),
        repr |s| format!("Hardtanh(min_val={:?}, max_val={:?})", s.min_val, s.max_val);
    /// `nn.Hardshrink(lambd=0.5)`.
    Hardshrink { lambd: f64 = 0.5 } => |s, x| x.hardshrink(s.lambd), repr |s| format!("Hardshrink({:?})", s.lambd);
    /// `nn.Softshrink(lambd=0.5)`.
    Softshrink { lambd: f64 = 0.5 } => |s, x| x.softshrink(s.lambd), repr |s| format!("Softshrink({:?})", s.lambd);
    /// `nn.Threshold(threshold, value)` (PyTorch has no defaults; these are 0 and 0).
    Threshold { threshold: f64 = 0.0, value: f64 = 0.0 } => |s, x| x.threshold(s.threshold, s.value),
        repr |s| format!("Threshold(threshold={:?}, value={:?})", s.threshold, s.value);
    /// `nn.GLU(dim=-1)`.
    GLU { dim: isize = -1 } => |s, x| x.glu(s.dim), repr |s| format!("GLU(dim={})", s.dim);
}
