//! Fine-tuning: loads the digits checkpoint written by `train_digits`,
//! freezes the stem and the residual blocks, puts a fresh head on, and
//! retrains only the head (only its parameters reach the optimizer, and no
//! gradient is computed for the frozen layers).
//!
//! ```sh
//! cargo run --release --example train_digits      # writes runs/digits/best.safetensors
//! cargo run --release --example finetune_digits
//! ```

#[path = "common/digits.rs"]
mod digits;
#[path = "common/report.rs"]
mod report;

use digits::{load_data, loaders};
use report::{die, say};
use std::path::PathBuf;
use tapir::Checkpoint;
use tapir::nn::Linear;
use tapir::optim::{Adam, AdamConfig};
use tapir::prelude::*;

include!("models/seed.rs");

fn accuracy(model: &SeedMlp<64, 10>, loader: &mut digits::Loader) -> f64 {
    model.eval();
    let (mut correct, mut n) = (0, 0);
    no_grad(|| {
        for b in loader.iter() {
            let pred = model.forward(&b[0].flatten(1, -1)).argmax(-1, false);
            correct += pred.eq(&b[1]).count_nonzero();
            n += b[1].size(0);
        }
    });
    correct as f64 / n.max(1) as f64
}

/// Fine-tune the head of the digits model `train_digits` saved.
#[derive(clap::Parser, Debug)]
#[command(name = "finetune_digits", version)]
struct Args {
    /// The checkpoint to start from.
    #[arg(long, default_value = "runs/digits/best.safetensors")]
    checkpoint: PathBuf,
    /// Epochs of head training.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Learning rate of Adam.
    #[arg(long, default_value_t = 1e-3, value_parser = report::positive)]
    lr: f64,
}

fn main() {
    use clap::Parser;
    let a = Args::parse();
    let (ckpt, epochs, lr) = (a.checkpoint, a.epochs as usize, a.lr);
    let ck = Checkpoint::load(&ckpt).unwrap_or_else(|e| {
        die(
            "finetune_digits",
            &format!("{e} (run `cargo run --release --example train_digits` first)"),
        )
    });
    manual_seed(1);
    let mut model = SeedMlp::<64, 10>::new(&Device::Cpu);
    model
        .load_state_dict(&ck.model, true)
        .unwrap_or_else(|e| die("finetune_digits", &e.to_string()));
    let (train, val) = load_data(None).unwrap_or_else(|e| die("finetune_digits", &e.to_string()));
    let (mut train, mut val) = loaders(0, 64, 2, false, train, val);
    say!(
        "loaded {}: val acc {:.2}%",
        ckpt.display(),
        100.0 * accuracy(&model, &mut val)
    );

    // Freeze everything, then replace the head (a new head is trainable).
    model.requires_grad_(false);
    model.head = Linear::new(256, 10, true);
    say!(
        "fresh head: val acc {:.2}%",
        100.0 * accuracy(&model, &mut val)
    );
    let trainable = model
        .parameters()
        .into_iter()
        .filter(|p| p.requires_grad())
        .count();
    say!(
        "trainable tensors: {trainable} (head.weight, head.bias) of {}",
        model.parameters().len()
    );
    let mut opt = Adam::new(
        model.head.parameters(),
        AdamConfig {
            lr,
            ..AdamConfig::default()
        },
    );
    let frozen_before = model.stem.weight.to_vec::<f32>();
    for epoch in 1..=epochs {
        model.train();
        for b in train.iter() {
            opt.zero_grad();
            let loss = cross_entropy(&model.forward(&b[0].flatten(1, -1)), &b[1]);
            loss.backward();
            opt.step();
        }
        say!(
            "epoch {epoch}/{epochs}: val acc {:.2}%",
            100.0 * accuracy(&model, &mut val)
        );
    }
    assert_eq!(
        model.stem.weight.to_vec::<f32>(),
        frozen_before,
        "the frozen stem did not move"
    );
    assert!(
        model.stem.weight.grad().is_none(),
        "no gradient was computed for the frozen stem"
    );
    say!("the stem and the blocks stayed frozen; only the head was trained");
}
