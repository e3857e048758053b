//! The `unary` workload: one elementwise function over 4M f32 (forward
//! only), as `benches/torch_ref.py`'s `bench_unary` builds it. Inputs: a
//! standard normal `x`, `|x| + 0.1` for the logarithms, sqrt and pow (to
//! the 1.5) and `tanh(x)` for asin. Samples are elements, so samples/s is elements per second.

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use tapir::prelude::*;

/// The workload's variants: the function's PyTorch name.
pub(crate) const UNARY_VARIANTS: [&str; 16] = [
    "exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tan", "atan", "asin", "sinh", "cosh",
    "tanh", "sigmoid", "sqrt", "pow",
];

pub(crate) fn bench_unary(args: &Args, variant: &str) -> String {
    let n = 1usize << 22;
    let g = Generator::new(args.seed);
    let x = Tensor::randn_with(&[n], &g).to(args.device).unwrap();
    let positive = &x.abs() + 0.1;
    let unit = x.tanh();
    let f = |t: &Tensor| match variant {
        "exp" => t.exp(),
        "expm1" => t.expm1(),
        "log" => positive.log(),
        "log1p" => positive.log1p(),
        "log2" => positive.log2(),
        "sin" => t.sin(),
        "cos" => t.cos(),
        "tan" => t.tan(),
        "atan" => t.atan(),
        "asin" => unit.asin(),
        "sinh" => t.sinh(),
        "cosh" => t.cosh(),
        "tanh" => t.tanh(),
        "sigmoid" => t.sigmoid(),
        "sqrt" => positive.sqrt(),
        "pow" => positive.powf(1.5),
        _ => unreachable!("unary variant {variant}"),
    };
    let step = || {
        std::hint::black_box(f(&x));
    };
    let (warm, steps) = scaled(args, "unary");
    let t = time_loop(args.device, step, warm, steps);
    record(
        "unary",
        variant,
        warm,
        &t,
        n as f64,
        &[("elements", n.to_string())],
    )
}
