//! A character-level transformer written with `model!` (token + position
//! embeddings, pre-norm blocks with causal multi-head self-attention, a
//! linear head) learns a small text, then writes some of its own.
//!
//! ```sh
//! cargo run --release --example train_char_lm
//! ```

use tapir::optim::{Adam, AdamConfig};
use tapir::prelude::*;

include!("models/transformer.rs");

#[path = "common/sample.rs"]
mod sample;

const TEXT: &str = "the cat sat on the mat. the dog sat on the log. \
the cat saw the dog and the dog saw the cat. a cat and a dog sat on a mat. \
the dog ran to the log and the cat ran to the mat. ";

/// Bytes as token ids (the vocabulary is ASCII: 128 symbols).
const VOCAB: usize = 128;
const CTX: usize = 32;

type Model = CharLm<VOCAB, 64, 4, 2, CTX>;

/// `batch` random windows of `CTX + 1` bytes: inputs and next-byte targets.
fn windows(data: &[i64], batch: usize, g: &Generator) -> (Tensor, Tensor) {
    let starts =
        Tensor::randint_with(0, (data.len() - CTX - 1) as i64, &[batch], g).to_vec::<i64>();
    let (mut xs, mut ys) = (vec![], vec![]);
    for s in starts {
        let s = s as usize;
        xs.extend_from_slice(&data[s..s + CTX]);
        ys.extend_from_slice(&data[s + 1..s + CTX + 1]);
    }
    (
        Tensor::from_vec(xs, &[batch, CTX]),
        Tensor::from_vec(ys, &[batch, CTX]),
    )
}

/// Samples `n` bytes after `prompt`, one at a time, from the model's softmax.
fn generate(model: &Model, prompt: &str, n: usize, g: &Generator) -> String {
    model.eval();
    let mut ids: Vec<i64> = prompt.bytes().map(i64::from).collect();
    sample::extend(&mut ids, n, CTX, 1.0, g, |x, p| model.forward(x, p));
    ids.iter().map(|&b| b as u8 as char).collect()
}

/// Train a tiny character model (written with `model!`) on a built-in sentence.
#[derive(clap::Parser, Debug)]
#[command(name = "train_char_lm", version)]
struct Args {
    /// Optimizer steps.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Seed for init, batches and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() {
    use clap::Parser;
    let args = Args::parse();
    manual_seed(args.seed);
    let g = Generator::new(args.seed);
    let data: Vec<i64> = TEXT.bytes().map(i64::from).collect();
    let model = Model::new(&Device::Cpu);
    println!("parameters: {}", model.num_parameters());
    let mut opt = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..AdamConfig::default()
        },
    );
    let positions = Tensor::arange(CTX as i64);
    for step in 1..=args.steps {
        model.train();
        let (x, y) = windows(&data, 16, &g);
        opt.zero_grad();
        let logits = model.forward(&x, &positions);
        let loss = cross_entropy(&logits.reshape(&[-1, VOCAB as isize]), &y.reshape(&[-1]));
        loss.backward();
        clip_grad_norm_(&model.parameters(), 1.0);
        opt.step();
        if step % 50 == 0 {
            println!("step {step}: loss={:.4}", loss.item::<f32>());
        }
    }
    println!("sample: {}", generate(&model, "the ", 80, &g));
}
