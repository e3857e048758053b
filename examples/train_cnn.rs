//! A CNN written with `model!` (conv -> pool -> conv -> pool -> flatten ->
//! linear; the flattened size is computed by the macro) learns to tell
//! horizontal, vertical and diagonal strokes apart in generated 28x28 images.
//!
//! ```sh
//! cargo run --release --example train_cnn
//! ```

use tapir::optim::{Adam, AdamConfig};
use tapir::prelude::*;

include!("models/cnn.rs");

/// `n` noisy 28x28 images of a stroke (class 0 horizontal, 1 vertical, 2 diagonal).
fn strokes(n: usize, g: &Generator) -> (Tensor, Tensor) {
    let u = Tensor::rand_with(&[n, 3], g).to_vec::<f32>();
    let noise = Tensor::randn_with(&[n, 28 * 28], g).to_vec::<f32>();
    let mut pixels = vec![0f32; n * 28 * 28];
    let mut labels = vec![];
    for i in 0..n {
        let class = (u[3 * i] * 3.0) as usize % 3;
        let at = 4 + (u[3 * i + 1] * 20.0) as usize; // where the stroke sits
        let len = 10 + (u[3 * i + 2] * 10.0) as usize;
        for k in 0..len.min(24) {
            let (r, c) = match class {
                0 => (at, 2 + k),
                1 => (2 + k, at),
                _ => (2 + k, 2 + k),
            };
            pixels[i * 784 + r * 28 + c] = 1.0;
        }
        for (p, z) in pixels[i * 784..(i + 1) * 784]
            .iter_mut()
            .zip(&noise[i * 784..])
        {
            *p += 0.3 * z;
        }
        labels.push(class as i64);
    }
    (
        Tensor::from_vec(pixels, &[n, 1, 28, 28]),
        Tensor::from_vec(labels, &[n]),
    )
}

/// Train a small CNN (written with `model!`) on generated stroke images.
#[derive(clap::Parser, Debug)]
#[command(name = "train_cnn", version)]
struct Args {
    /// Epochs to train.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Seed for init and data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() {
    use clap::Parser;
    let args = Args::parse();
    manual_seed(args.seed);
    let (x, y) = strokes(768, &Generator::new(args.seed));
    let (x_val, y_val) = strokes(256, &Generator::new(args.seed + 1));
    let model = Cnn::<3>::new(&Device::Cpu);
    println!("{model}\nparameters: {}", model.num_parameters());
    let mut opt = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 1e-3,
            ..AdamConfig::default()
        },
    );
    let batch = 32;
    for epoch in 0..args.epochs {
        model.train();
        let mut total = 0.0;
        for start in (0..x.size(0)).step_by(batch) {
            let (xb, yb) = (x.narrow(0, start, batch), y.narrow(0, start, batch));
            opt.zero_grad();
            let loss = cross_entropy(&model.forward(&xb), &yb);
            loss.backward();
            opt.step();
            total += loss.item::<f64>();
        }
        model.eval();
        let acc = no_grad(|| {
            let pred = model.forward(&x_val).argmax(-1, false);
            pred.eq(&y_val).to_dtype(DType::F32).mean().item::<f32>()
        });
        let steps = x.size(0) / batch;
        println!(
            "epoch {}: train_loss={:.4} val_acc={:.1}%",
            epoch + 1,
            total / steps as f64,
            acc * 100.0
        );
    }
}
