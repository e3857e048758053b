//! Padding: `F.pad` in its four modes (constant, reflect, replicate,
//! circular), one recorded op "pad" composed of narrows, flips and a
//! concatenation per dim (so its gradient comes from those ops), and the
//! padding layers (`ZeroPad`, `ConstantPad`, `ReflectionPad`,
//! `ReplicationPad`, `CircularPad`, 1-D and 2-D).

use super::module::{Forward, py_float, stateless_module};
use crate::Tensor;
use crate::trace::{self, Attr};

/// How [`pad_with`] fills (`F.pad`'s `mode` and `value`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant value (`mode="constant"`).
    Constant(f64),
    /// The edge mirrored, the edge itself not repeated (`"reflect"`).
    Reflect,
    /// The edge value repeated (`"replicate"`).
    Replicate,
    /// The other end wrapped around (`"circular"`).
    Circular,
}

impl PadMode {
    fn code(self) -> i64 {
        match self {
            PadMode::Constant(_) => 0,
            PadMode::Reflect => 1,
            PadMode::Replicate => 2,
            PadMode::Circular => 3,
        }
    }

    /// The mode from its code and value (as recorded for replay).
    pub(crate) fn from_code(code: i64, value: f64) -> PadMode {
        match code {
            1 => PadMode::Reflect,
            2 => PadMode::Replicate,
            3 => PadMode::Circular,
            _ => PadMode::Constant(value),
        }
    }

    fn name(self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// Pads the last dims with `value` (`F.pad(x, pad, mode="constant")`):
/// `pad` lists `(before, after)` pairs from the last dim backward; a
/// negative amount crops.
///
/// ```
/// use tapir_runtime::{nn::pad, Tensor};
/// let x = Tensor::ones(&[1, 2]);
/// let y = pad(&x, &[1, 2], 0.0);
/// assert_eq!(y.to_vec::<f32>(), vec![0.0, 1.0, 1.0, 0.0, 0.0]);
/// assert_eq!(pad(&x, &[0, 0, 1, 0], 5.0).shape(), &[2, 2]);
/// ```
pub fn pad(x: &Tensor, pad: &[i64], value: f64) -> Tensor {
    pad_with(x, pad, PadMode::Constant(value))
}

/// `F.pad(x, pad, mode)`: `pad` lists `(before, after)` pairs from the
/// last dim backward. Reflect, replicate and circular padding, as in
/// PyTorch, take non-negative amounts for at most the last three dims and
/// leave the first dim alone; reflect pads less than the dim's size,
/// circular at most its size.
///
/// ```
/// use tapir_runtime::{nn::{pad_with, PadMode}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[1, 3]);
/// let at = |m| pad_with(&x, &[2, 1], m).to_vec::<f32>();
/// assert_eq!(at(PadMode::Reflect), vec![3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
/// assert_eq!(at(PadMode::Replicate), vec![1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
/// assert_eq!(at(PadMode::Circular), vec![2.0, 3.0, 1.0, 2.0, 3.0, 1.0]);
/// ```
pub fn pad_with(x: &Tensor, pad: &[i64], mode: PadMode) -> Tensor {
    let value = match mode {
        PadMode::Constant(v) => v,
        _ => 0.0,
    };
    let attrs = || {
        vec![
            ("pads", Attr::Ints(pad.to_vec())),
            ("value", Attr::Float(value)),
            ("mode", Attr::Int(mode.code())),
        ]
    };
    trace::op("pad", [x], attrs, || {
        assert!(
            pad.len().is_multiple_of(2) && pad.len() / 2 <= x.ndim(),
            "pad: {} pad sizes for a tensor of shape {:?}; give (before, after) pairs for at most {} dims",
            pad.len(),
            x.shape(),
            x.ndim()
        );
        if !matches!(mode, PadMode::Constant(_)) {
            assert!(
                pad.len() / 2 < x.ndim() && pad.len() <= 6 && pad.iter().all(|&p| p >= 0),
                "pad: {} padding takes non-negative (before, after) pairs for at most 3 dims and not the first, got {pad:?} for shape {:?}",
                mode.name(),
                x.shape()
            );
        }
        let mut out = x.clone();
        for (k, pair) in pad.chunks(2).enumerate() {
            let d = x.ndim() - 1 - k;
            out = pad_dim(&out, d, pair[0], pair[1], mode);
        }
        out
    })
}

/// One dim of [`pad_with`]: crop first (negative amounts), then join the fill.
fn pad_dim(x: &Tensor, d: usize, before: i64, after: i64, mode: PadMode) -> Tensor {
    let n = x.shape()[d] as i64;
    let (cut_before, cut_after) = ((-before).max(0), (-after).max(0));
    assert!(
        cut_before + cut_after <= n,
        "pad: cropping {cut_before} + {cut_after} from dim {d} of shape {:?} leaves less than nothing",
        x.shape()
    );
    let dim = d as isize;
    let kept = x.narrow(
        dim,
        cut_before as usize,
        (n - cut_before - cut_after) as usize,
    );
    let n = kept.shape()[d];
    let limit = match mode {
        PadMode::Reflect => n.saturating_sub(1),
        PadMode::Circular => n,
        _ => usize::MAX,
    };
    let (head, tail) = (before.max(0) as usize, after.max(0) as usize);
    assert!(
        head <= limit && tail <= limit,
        "pad: {} padding of ({before}, {after}) is too large for dim {d} of size {n} in shape {:?}",
        mode.name(),
        x.shape()
    );
    let fill = |amount: usize, at_end: bool| -> Tensor {
        match mode {
            PadMode::Constant(value) => {
                let mut shape = kept.shape().to_vec();
                shape[d] = amount;
                Tensor::full_on(&shape, value, kept.dtype(), kept.device())
            }
            PadMode::Reflect if at_end => kept.narrow(dim, n - 1 - amount, amount).flip(&[dim]),
            PadMode::Reflect => kept.narrow(dim, 1, amount).flip(&[dim]),
            PadMode::Replicate => {
                let mut shape = kept.shape().to_vec();
                shape[d] = amount;
                kept.narrow(dim, if at_end { n - 1 } else { 0 }, 1)
                    .expand(&shape)
            }
            PadMode::Circular if at_end => kept.narrow(dim, 0, amount),
            PadMode::Circular => kept.narrow(dim, n - amount, amount),
        }
    };
    let (head, tail) = (
        (head > 0).then(|| fill(head, false)),
        (tail > 0).then(|| fill(tail, true)),
    );
    let parts: Vec<&Tensor> = head.iter().chain([&kept]).chain(tail.iter()).collect();
    if parts.len() == 1 {
        return kept.contiguous();
    }
    Tensor::cat(&parts, dim)
}

macro_rules! padding_layer {
    ($($(#[$doc:meta])* $name:ident, $sides:literal, $mode:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            /// `(left, right)`, `(left, right, top, bottom)` or `(left,
            /// right, top, bottom, front, back)`, as PyTorch's tuple.
            pub padding: [usize; $sides],
        }

        impl $name {
            /// The same amount on every side (PyTorch's int argument).
            pub fn new(padding: usize) -> $name {
                $name { padding: [padding; $sides] }
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Tensor {
                let pads: Vec<i64> = self.padding.iter().map(|&p| p as i64).collect();
                pad_with(x, &pads, $mode)
            }
        }
    )*};
}

padding_layer! {
    /// `nn.ZeroPad1d`: zeros before and after the last dim.
    ZeroPad1d, 2, PadMode::Constant(0.0);
    /// `nn.ZeroPad2d`: zeros around the last two dims.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Forward, ZeroPad2d}, Tensor};
    /// let pad = ZeroPad2d { padding: [1, 0, 2, 0] };
    /// assert_eq!(pad.forward(&Tensor::ones(&[1, 3, 3])).shape(), &[1, 5, 4]);
    /// ```
    ZeroPad2d, 4, PadMode::Constant(0.0);
    /// `nn.ReflectionPad1d`: the last dim mirrored at its ends.
    ReflectionPad1d, 2, PadMode::Reflect;
    /// `nn.ReflectionPad2d`: the last two dims mirrored at their edges.
    ReflectionPad2d, 4, PadMode::Reflect;
    /// `nn.ReplicationPad1d`: the last dim's end values repeated.
    ReplicationPad1d, 2, PadMode::Replicate;
    /// `nn.ReplicationPad2d`: the last two dims' edge values repeated.
    ReplicationPad2d, 4, PadMode::Replicate;
    /// `nn.CircularPad1d`: the last dim wrapped around.
    CircularPad1d, 2, PadMode::Circular;
    /// `nn.CircularPad2d`: the last two dims wrapped around.
    CircularPad2d, 4, PadMode::Circular;
    /// `nn.ZeroPad3d`: zeros around the last three dims.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Forward, Module, ZeroPad3d}, Tensor};
    /// let pad = ZeroPad3d { padding: [1, 0, 0, 0, 2, 1] };
    /// assert_eq!(pad.forward(&Tensor::ones(&[1, 2, 3, 3])).shape(), &[1, 5, 3, 4]);
    /// assert_eq!(pad.repr(), "ZeroPad3d((1, 0, 0, 0, 2, 1))");
    /// ```
    ZeroPad3d, 6, PadMode::Constant(0.0);
    /// `nn.ReflectionPad3d`: the last three dims mirrored at their faces.
    ReflectionPad3d, 6, PadMode::Reflect;
    /// `nn.ReplicationPad3d`: the last three dims' face values repeated.
    ReplicationPad3d, 6, PadMode::Replicate;
    /// `nn.CircularPad3d`: the last three dims wrapped around.
    CircularPad3d, 6, PadMode::Circular;
}

/// `nn.ConstantPad1d` / `2d` / `3d` by the length of `padding` (2, 4 or
/// 6): `value` around the last one, two or three dims.
///
/// ```
/// use tapir_runtime::{nn::{ConstantPad, Forward}, Tensor};
/// let pad = ConstantPad { padding: vec![1, 1], value: 3.5 };
/// assert_eq!(pad.forward(&Tensor::zeros(&[1, 1])).to_vec::<f32>(), vec![3.5, 0.0, 3.5]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantPad {
    /// `(left, right)`, `(left, right, top, bottom)` or `(left, right,
    /// top, bottom, front, back)`.
    pub padding: Vec<usize>,
    /// The fill.
    pub value: f64,
}

impl Forward for ConstantPad {
    fn forward(&self, x: &Tensor) -> Tensor {
        let pads: Vec<i64> = self.padding.iter().map(|&p| p as i64).collect();
        pad(x, &pads, self.value)
    }
}

/// PyTorch's tuple of padding amounts.
fn tuple(p: &[usize]) -> String {
    let parts: Vec<String> = p.iter().map(|v| v.to_string()).collect();
    format!("({})", parts.join(", "))
}

stateless_module! {
    ZeroPad1d => |s| format!("ZeroPad1d({})", tuple(&s.padding));
    ZeroPad2d => |s| format!("ZeroPad2d({})", tuple(&s.padding));
    ReflectionPad1d => |s| format!("ReflectionPad1d({})", tuple(&s.padding));
    ReflectionPad2d => |s| format!("ReflectionPad2d({})", tuple(&s.padding));
    ReplicationPad1d => |s| format!("ReplicationPad1d({})", tuple(&s.padding));
    ReplicationPad2d => |s| format!("ReplicationPad2d({})", tuple(&s.padding));
    CircularPad1d => |s| format!("CircularPad1d({})", tuple(&s.padding));
    CircularPad2d => |s| format!("CircularPad2d({})", tuple(&s.padding));
    ZeroPad3d => |s| format!("ZeroPad3d({})", tuple(&s.padding));
    ReflectionPad3d => |s| format!("ReflectionPad3d({})", tuple(&s.padding));
    ReplicationPad3d => |s| format!("ReplicationPad3d({})", tuple(&s.padding));
    CircularPad3d => |s| format!("CircularPad3d({})", tuple(&s.padding));
    ConstantPad => |s| format!(
        "ConstantPad{}d(padding={}, value={})",
        s.padding.len() / 2,
        tuple(&s.padding),
        py_float(s.value)
    );
}
