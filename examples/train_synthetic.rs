//! A first run with no data files: a residual MLP written with
//! `model!` learns to classify three noisy spirals generated in-process, with
//! the PyTorch-style loop — AdamW, cosine schedule, gradient clipping,
//! train/eval, no_grad validation.
//!
//! ```sh
//! cargo run --release --example train_synthetic
//! ```

use tapir::optim::{AdamW, AdamWConfig, CosineAnnealingLR};
use tapir::prelude::*;

// `ResBlock<D>`: x + Seq(Linear, LayerNorm, GELU, Linear)(x), the seed's block.
// `#[macro_use]` keeps its signature visible to the `model!` below.
#[macro_use]
#[allow(dead_code)] // the file's SeedMlp is not used here
mod seed_models {
    include!("models/seed.rs");
}
use seed_models::ResBlock;

model! {
    /// Points in the plane -> one of three spirals.
    pub struct SpiralNet<const HIDDEN: usize> {
        stem: Linear<2, HIDDEN>,
        blocks: [ResBlock<HIDDEN>; 2],
        head: Linear<HIDDEN, 3>,
    }
    fn forward(&self, x: [B, 2]) -> [B, 3] {
        let mut h = self.stem(x);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }
}

/// Three interleaved spirals, `n` points each: inputs `[3n, 2]`, labels `[3n]`.
fn spirals(n: usize, g: &Generator) -> (Tensor, Tensor) {
    let noise = Tensor::randn_with(&[3 * n, 2], g).to_vec::<f32>();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for class in 0..3 {
        for i in 0..n {
            let r = i as f32 / n as f32;
            let theta = class as f32 * 2.094 + r * 4.0;
            let k = class * n + i;
            xs.push(r * theta.sin() + 0.08 * noise[2 * k]);
            xs.push(r * theta.cos() + 0.08 * noise[2 * k + 1]);
            ys.push(class as i64);
        }
    }
    (
        Tensor::from_vec(xs, &[3 * n, 2]),
        Tensor::from_vec(ys, &[3 * n]),
    )
}

/// Train a `model!` MLP on two interleaved spirals.
#[derive(clap::Parser, Debug)]
#[command(name = "train_synthetic", version)]
struct Args {
    /// Epochs to train.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(i64).range(1..))]
    epochs: i64,
    /// Seed for init and data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() {
    use clap::Parser;
    let args = Args::parse();
    manual_seed(args.seed);
    let g = Generator::new(args.seed);
    let (x, y) = spirals(300, &g);
    let (x_val, y_val) = spirals(100, &Generator::new(args.seed + 1));

    let model = SpiralNet::<64>::new(&Device::Cpu);
    println!("{model}");
    let (epochs, batch) = (args.epochs, 64);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 1e-2,
            weight_decay: 1e-4,
            ..AdamWConfig::default()
        },
    );
    let mut sched = CosineAnnealingLR::new(&mut opt, epochs, 1e-4);
    let n = x.size(0);

    for epoch in 0..epochs {
        model.train();
        let perm = Tensor::randint_with(0, n as i64, &[n], &g); // sampled with replacement
        for start in (0..n).step_by(batch) {
            let idx = perm.narrow(0, start, batch.min(n - start));
            let (xb, yb) = (x.index_select(0, &idx), y.index_select(0, &idx));
            opt.zero_grad();
            let loss = cross_entropy(&model.forward(&xb), &yb);
            loss.backward();
            clip_grad_norm_(&model.parameters(), 1.0);
            opt.step();
        }
        sched.step(&mut opt);
        if epoch % 10 == 9 || epoch == 0 {
            model.eval();
            let (val_loss, acc) = no_grad(|| {
                let logits = model.forward(&x_val);
                let acc = logits
                    .argmax(-1, false)
                    .eq(&y_val)
                    .to_dtype(DType::F32)
                    .mean();
                (
                    cross_entropy(&logits, &y_val).item::<f32>(),
                    acc.item::<f32>(),
                )
            });
            println!(
                "epoch {:>2}: val_loss={val_loss:.4} val_acc={:.1}%",
                epoch + 1,
                acc * 100.0
            );
        }
    }
}
