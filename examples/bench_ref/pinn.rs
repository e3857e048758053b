//! The `pinn` workload: a physics-informed MLP's training step, as
//! `benches/torch_ref.py`'s `bench_pinn` builds it (the `train_pinn`
//! example's loop). 1 -> 32 -> 32 -> 1 with tanh on 64 collocation points:
//! `u''` from two nested `create_graph` grads, the residual of
//! `u'' = -π² sin(πx)` plus the boundary loss, backward, an Adam step.

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use std::f64::consts::PI;
use tapir::autograd::{self, GradOptions};
use tapir::nn::{Linear, Sequential, Tanh};
use tapir::optim::{Adam, AdamConfig};
use tapir::prelude::*;

/// The workload's variants.
pub(crate) const PINN_VARIANTS: [&str; 1] = ["train_n64"];

pub(crate) fn bench_pinn(args: &Args, variant: &str) -> String {
    let (n, dev) = (64usize, args.device);
    manual_seed(args.seed);
    let mut model = Sequential::new()
        .add(Linear::new(1, 32, true))
        .add(Tanh)
        .add(Linear::new(32, 32, true))
        .add(Tanh)
        .add(Linear::new(32, 1, true));
    model
        .to_device(dev)
        .expect("the device holds a 1 K-parameter model");
    let mut opt = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 5e-3,
            ..AdamConfig::default()
        },
    );
    let on = |t: Tensor| t.to(dev).expect("the device holds the points");
    let x = on(Tensor::linspace(-1.0, 1.0, n).reshape(&[n as isize, 1])).requires_grad_(true);
    let forcing = &(&x.detach() * PI).sin() * -(PI * PI);
    let boundary = on(Tensor::from_vec(vec![-1.0f32, 1.0], &[2, 1]));
    let opts = || GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let first = |g: Vec<Option<Tensor>>| g.into_iter().next().flatten().expect("u depends on x");
    let step = || {
        opt.zero_grad();
        let u = model.forward(&x);
        let ux = first(autograd::grad_with(&[&u.sum()], &[&x], opts()));
        let uxx = first(autograd::grad_with(&[&ux.sum()], &[&x], opts()));
        let residual = (&uxx - &forcing).powf(2.0).mean();
        let loss = &residual + &model.forward(&boundary).powf(2.0).mean();
        loss.backward();
        opt.step();
    };
    let (warm, steps) = scaled(args, "pinn");
    let t = time_loop(dev, step, warm, steps);
    record(
        "pinn",
        variant,
        warm,
        &t,
        n as f64,
        &[("points", n.to_string())],
    )
}
