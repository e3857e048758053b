//! `tapir::compile`: compiled models compute what eager ones do (outputs,
//! gradients, ten-step trajectories on the seed MLP, the CNN and the char
//! transformer), fuse elementwise chains, record again on a new signature,
//! fall back on graph breaks and refuse them under `fullgraph`.
//!
//! A binary of its own: models draw their init from the global generator,
//! and the dropout tests replay it, so the tests take one lock. `training`:
//! compiled models train as eager ones; `fusion`: fused kernels and
//! rewrites; `breaks`: graph breaks, in-place ops, fresh draws; `modes`:
//! `reduce-overhead` and `compile_step` off a GPU.

/// `Module` for a test model `Name(Linear)` whose forward is its own:
/// the linear layer's parameters, under the model's name.
macro_rules! module_of_linear {
    ($name:ident) => {
        impl Module for $name {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
                self.0.visit(f)
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
                self.0.visit_mut(f)
            }
            fn repr(&self) -> String {
                stringify!($name).into()
            }
        }
    };
}

mod breaks;
mod fusion;
mod modes;
mod training;

#[path = "../../examples/common/seed.rs"]
mod seed;

include!("../../examples/models/transformer.rs");
include!("../../examples/models/small_cnn.rs");

use std::sync::{Mutex, MutexGuard};
use tapir::compile::{CompileOptions, Explanation, compile_with, fused_launches};
use tapir::nn::{
    CrossEntropyOptions, Dropout, Forward, Linear, Module, Reduction, Sequential, TensorKind,
    cross_entropy, cross_entropy_with,
};
use tapir::optim::{
    AdamW, AdamWConfig, LrScheduler, Optimizer, SGD, SgdConfig, StepLR, clip_grad_norm_,
};
use tapir::{Error, Generator, Tensor, compile, manual_seed};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Largest `|a - b| / max(|b|, 1e-3)` over two same-shaped tensors.
fn rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape(), "shapes differ");
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1e-3))
        .fold(0.0, f64::max)
}

fn grads(m: &dyn Module) -> Vec<(String, Tensor)> {
    m.named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.grad().expect("every parameter has a gradient")))
        .collect()
}

/// The largest difference between `a` and `b` relative to `b`'s largest
/// magnitude (at least 1e-3): a normwise comparison, for gradients. A
/// parameter's gradient sums a term per sample, so an element whose terms
/// cancel keeps the absolute error of the others but not their relative
/// precision (an element 40 times smaller than the largest, off by one
/// ulp of the largest, was 2e-6 off by `rel_diff`).
fn normwise_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape(), "shapes differ");
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    let scale = b.iter().fold(1e-3, |m: f64, y| m.max(y.abs()));
    let worst = a
        .iter()
        .zip(&b)
        .fold(0.0, |m: f64, (x, y)| m.max((x - y).abs()));
    worst / scale
}

/// Backpropagates `loss` of each model's output, then checks that every
/// gradient of `compiled` is within `tol` of `eager`'s, relative to the
/// gradient's largest element ([`normwise_diff`]; `0.0`: bit for bit);
/// `what` names the case in the message.
fn assert_same_grads(
    (eager, out_e): (&dyn Module, &Tensor),
    (compiled, out_c): (&dyn Module, &Tensor),
    loss: impl Fn(&Tensor) -> Tensor,
    tol: f64,
    what: &str,
) {
    for (m, out) in [(eager, out_e), (compiled, out_c)] {
        m.zero_grad();
        loss(out).backward();
    }
    for ((name, a), (_, b)) in grads(eager).iter().zip(&grads(compiled)) {
        if tol == 0.0 {
            assert_eq!(
                a.to_vec::<f32>(),
                b.to_vec::<f32>(),
                "{what}: grad of {name}"
            );
        } else {
            let d = normwise_diff(b, a);
            assert!(d <= tol, "{what}: grad of {name} differs by {d}");
        }
    }
}

/// Two copies of one model: `make` runs twice from the same seed.
fn twins<M: Module>(make: impl Fn() -> M) -> (M, M) {
    manual_seed(7);
    let a = make();
    manual_seed(7);
    let b = make();
    (a, b)
}
