//! A physics-informed network: an MLP `u(x)` learns the solution of the
//! 1-D Poisson problem `u'' = -π² sin(πx)` on `[-1, 1]` with `u(±1) = 0`
//! from the equation alone, no data. The loss is built from `u''`, two
//! nested `autograd::grad` calls with `create_graph` (PyTorch's
//! `torch.autograd.grad(..., create_graph=True)`), so each step
//! backpropagates through a second derivative. The exact solution is
//! `sin(πx)`; the example prints the error against it.
//!
//! ```sh
//! cargo run --release --example train_pinn
//! ```

use std::f64::consts::PI;
use tapir::autograd::{self, GradOptions};
use tapir::optim::{Adam, AdamConfig};
use tapir::prelude::*;

model! {
    /// x -> u(x).
    pub struct Pinn<const H: usize> {
        net: Sequential<(Linear<1, H>, Tanh, Linear<H, H>, Tanh, Linear<H, 1>)>,
    }
    fn forward(&self, x: [B, 1]) -> [B, 1] {
        self.net(x)
    }
}

/// Solve u'' = -π² sin(πx), u(±1) = 0, with a physics-informed MLP.
#[derive(clap::Parser, Debug)]
#[command(name = "train_pinn", version)]
struct Args {
    /// Optimizer steps.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Collocation points where the equation is enforced.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    points: u64,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 5e-3, value_parser = positive)]
    lr: f64,
    /// Seed for the initial weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a positive number, got {s:?}")),
    }
}

/// `u''` at `x` (which requires grad), with the graph kept for the loss.
fn second_derivative(model: &Pinn<32>, x: &Tensor) -> Tensor {
    let keep = |g: Vec<Option<Tensor>>| g.into_iter().next().flatten().expect("u depends on x");
    let opts = || GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let u = model.forward(x);
    let ux = keep(autograd::grad_with(&[&u.sum()], &[x], opts()));
    keep(autograd::grad_with(&[&ux.sum()], &[x], opts()))
}

fn main() {
    use clap::Parser;
    let args = Args::parse();
    manual_seed(args.seed);
    let n = args.points as usize;
    let x = Tensor::linspace(-1.0, 1.0, n)
        .reshape(&[n as isize, 1])
        .requires_grad_(true);
    let forcing = &(&x.detach() * PI).sin() * -(PI * PI);
    let boundary = Tensor::from_vec(vec![-1.0f32, 1.0], &[2, 1]);
    let test_x = Tensor::linspace(-1.0, 1.0, 401).reshape(&[401, 1]);
    let exact = (&test_x * PI).sin();

    let model = Pinn::<32>::new(&Device::Cpu);
    println!("{model}");
    let mut opt = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: args.lr,
            ..AdamConfig::default()
        },
    );
    for step in 1..=args.steps {
        opt.zero_grad();
        let residual = (&second_derivative(&model, &x) - &forcing).powf(2.0).mean();
        let edges = model.forward(&boundary).powf(2.0).mean();
        let loss = &residual + &edges;
        loss.backward();
        opt.step();
        if step % 250 == 0 || step == 1 || step == args.steps {
            let err = no_grad(|| (&model.forward(&test_x) - &exact).abs().amax_dim(0, false));
            println!(
                "step {step:>5}: residual={:.3e} boundary={:.3e} max|u - sin(πx)|={:.3e}",
                residual.item::<f32>(),
                edges.item::<f32>(),
                err.item::<f32>()
            );
        }
    }
}
