//! The seed's training loop, line for line as in PyTorch, on generated data:
//! a residual MLP learns a fixed random "teacher" network's labels.
//!
//! ```sh
//! cargo run --release --example seed_loop
//! cargo run --release --example seed_loop -- --compile   # tapir::compile
//! ```

#[path = "common/seed.rs"]
mod seed;

use tapir::optim::{AdamW, AdamWConfig, CosineAnnealingLR};
use tapir::prelude::*;

/// Batches of inputs and the labels a fixed random linear teacher gives them.
fn make_batches(n: usize, batch: usize, teacher: &Tensor, g: &Generator) -> Vec<(Tensor, Tensor)> {
    (0..n)
        .map(|_| {
            let x = Tensor::randn_with(&[batch, 64], g);
            let y = x.matmul(teacher).argmax(-1, false);
            (x, y)
        })
        .collect()
}

/// The seed's training loop, written by hand, on a synthetic teacher task.
#[derive(clap::Parser, Debug)]
#[command(name = "seed_loop", version)]
struct Args {
    /// Epochs to train.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(1..))]
    epochs: i64,
    /// Seed for init and data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run the model through `tapir::compile` (`torch.compile`).
    #[arg(long)]
    compile: bool,
}

fn main() {
    use clap::Parser;
    let args = Args::parse();
    manual_seed(args.seed);
    let g = Generator::new(args.seed);
    let teacher = Tensor::randn_with(&[64, 10], &g);
    let train = make_batches(40, 64, &teacher, &g);
    let val = make_batches(8, 64, &teacher, &g);

    let mlp = seed::Mlp::new(64, 128, 10, 2);
    let (plain, compiled) = match args.compile {
        true => (None, Some(tapir::compile(mlp))),
        false => (Some(mlp), None),
    };
    let model: &dyn Forward = match (&plain, &compiled) {
        (Some(m), _) => m,
        (_, Some(c)) => c,
        (None, None) => unreachable!("one of the two is built"),
    };
    println!("{}\n{} parameters", model.repr(), model.num_parameters());
    let num_epochs = args.epochs;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 3e-3,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let mut sched = CosineAnnealingLR::new(&mut opt, num_epochs, 0.0);

    for epoch in 0..num_epochs {
        model.train();
        for (x, y) in &train {
            opt.zero_grad();
            let loss = cross_entropy(&model.forward(x), y);
            loss.backward();
            clip_grad_norm_(&model.parameters(), 1.0);
            opt.step();
        }
        sched.step(&mut opt);
        model.eval();
        let (val_loss, acc) = no_grad(|| {
            let mut loss = 0.0;
            let mut correct = 0.0;
            for (x, y) in &val {
                let logits = model.forward(x);
                loss += cross_entropy(&logits, y).item::<f64>();
                correct += logits
                    .argmax(-1, false)
                    .eq(y)
                    .to_dtype(DType::F32)
                    .mean()
                    .item::<f64>();
            }
            (loss / val.len() as f64, correct / val.len() as f64)
        });
        println!(
            "epoch {epoch}: val_loss={val_loss:.4} val_acc={:.1}% lr={:.2e}",
            acc * 100.0,
            opt.lr()
        );
    }
    if let Some(c) = &compiled {
        print!("tapir::compile:\n{}", c.explain());
    }
}
