//! A character-level transformer, written with `model!`, learns the
//! Shakespeare shipped in `data/shakespeare.txt`: a progress bar, periodic
//! validation loss and samples of generated text, and checkpoints.
//!
//! ```sh
//! cargo run --release --example train_shakespeare
//! cargo run --release --example train_shakespeare -- --steps 3000 --resume
//! cargo run --release --example train_shakespeare -- --help
//! ```

#[path = "common/report.rs"]
mod report;
#[path = "common/sample.rs"]
mod sample;

use report::{die, say};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tapir::Checkpoint;
use tapir::data::{CharTokenizer, DataLoader, DataLoaderOptions, Dataset};
use tapir::optim::{AdamW, AdamWConfig, CosineAnnealingLR, LrScheduler, Optimizer};
use tapir::prelude::*;

include!("models/transformer.rs");

/// Token ids go up to 127 (the text is ASCII); embeddings 128 wide, 4 heads,
/// 4 blocks, 64 characters of context.
const VOCAB: usize = 128;
const CTX: usize = 64;
type Model = CharLm<VOCAB, 128, 4, 4, CTX>;

/// Non-overlapping windows of `CTX + 1` tokens: input and next-token targets.
struct Windows {
    tokens: Arc<Vec<i64>>,
}

impl Dataset for Windows {
    type Item = (Tensor, Tensor);
    fn len(&self) -> usize {
        (self.tokens.len() - 1) / CTX
    }
    fn get(&self, i: usize) -> (Tensor, Tensor) {
        let s = i * CTX;
        (
            Tensor::from_vec(self.tokens[s..s + CTX].to_vec(), &[CTX]),
            Tensor::from_vec(self.tokens[s + 1..s + CTX + 1].to_vec(), &[CTX]),
        )
    }
}

fn generate(model: &Model, tok: &CharTokenizer, prompt: &str, n: usize, g: &Generator) -> String {
    model.eval();
    let mut ids = tok.encode(prompt).unwrap_or_default();
    sample::extend(&mut ids, n, CTX, 0.8, g, |x, p| model.forward(x, p));
    tok.decode(&ids)
}

fn loss_on(model: &Model, batch: &(Tensor, Tensor), positions: &Tensor) -> Tensor {
    let logits = model.forward(&batch.0, positions);
    cross_entropy(
        &logits.reshape(&[-1, VOCAB as isize]),
        &batch.1.reshape(&[-1]),
    )
}

/// Train a character-level transformer (written with `model!`) on Shakespeare.
#[derive(clap::Parser, Debug)]
#[command(name = "train_shakespeare", version)]
struct Args {
    /// Optimizer steps.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Peak learning rate of AdamW (cosine decay to a tenth).
    #[arg(long, default_value_t = 1e-3, value_parser = report::positive)]
    lr: f64,
    /// Windows per batch.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Seed for init, shuffling and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the checkpoint goes.
    #[arg(long, default_value = "runs/shakespeare")]
    out: PathBuf,
    /// Steps between validation and a generated sample.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    sample_every: u64,
    /// Continue from OUT/last.safetensors.
    #[arg(long)]
    resume: bool,
    /// The text to learn (ASCII); by default the one shipped with tapir.
    #[arg(long)]
    data: Option<PathBuf>,
}

fn main() {
    use clap::Parser;
    let a = Args::parse();
    let (steps, lr, batch_size, seed, out, sample_every, resume) = (
        a.steps as usize,
        a.lr,
        a.batch_size as usize,
        a.seed,
        a.out,
        a.sample_every as usize,
        a.resume,
    );
    if out.exists() && !out.is_dir() {
        die(
            "train_shakespeare",
            &format!(
                "--out {} is a file; it names the folder for the run",
                out.display()
            ),
        );
    }
    set_num_threads(2);
    let path = a.data.unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/shakespeare.txt")
    });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| die("train_shakespeare", &format!("{}: {e}", path.display())));
    let tok = CharTokenizer::from_text(&text);
    if tok.vocab_size() > VOCAB {
        die(
            "train_shakespeare",
            &format!(
                "{} distinct characters; the model takes {VOCAB}",
                tok.vocab_size()
            ),
        );
    }
    let ids = tok
        .encode(&text)
        .unwrap_or_else(|e| die("train_shakespeare", &e.to_string()));
    let split = ids.len() * 9 / 10;
    let train_ids = Arc::new(ids[..split].to_vec());
    let val_ids = Arc::new(ids[split..].to_vec());
    let opts = |shuffle| DataLoaderOptions {
        batch_size,
        shuffle,
        seed: Some(seed),
        drop_last: true,
        num_workers: 1,
        ..Default::default()
    };
    let mut train = DataLoader::new(Windows { tokens: train_ids }, opts(true));
    let mut val = DataLoader::new(Windows { tokens: val_ids }, opts(false));
    // With drop_last a batch larger than the data gives empty epochs, and
    // the step loop below would never end.
    for (what, l) in [("training", &train), ("validation", &val)] {
        if l.is_empty() {
            die(
                "train_shakespeare",
                &format!(
                    "--batch-size {batch_size} is larger than the {} windows of {CTX} characters in the {what} text",
                    l.dataset().len()
                ),
            );
        }
    }

    manual_seed(seed);
    let mut model = Model::new(&Device::Cpu);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr,
            weight_decay: 0.1,
            ..AdamWConfig::default()
        },
    );
    let mut sched = CosineAnnealingLR::new(&mut opt, steps as i64, lr * 0.1);
    std::fs::create_dir_all(&out)
        .unwrap_or_else(|e| die("train_shakespeare", &format!("{}: {e}", out.display())));
    let last = out.join("last.safetensors");
    let mut step = 0usize;
    if resume {
        let ck =
            Checkpoint::load(&last).unwrap_or_else(|e| die("train_shakespeare", &e.to_string()));
        model
            .load_state_dict(&ck.model, true)
            .unwrap_or_else(|e| die("train_shakespeare", &e.to_string()));
        opt.load_state_dict(&ck.optimizer)
            .unwrap_or_else(|e| die("train_shakespeare", &e.to_string()));
        sched.load_state_dict(&mut opt, &ck.scheduler);
        ck.restore_rng();
        step = ck.step as usize;
        train.set_epoch(ck.epoch);
        say!("resumed at step {step}");
    }
    say!(
        "{} characters, vocabulary {}, {} parameters, {} windows of {CTX} per epoch",
        text.len(),
        tok.vocab_size(),
        model.num_parameters(),
        train.len() * batch_size
    );
    let positions = Tensor::arange(CTX as i64);
    let g = Generator::new(seed + 1);
    let pb = report::epoch_bar(1, 1, steps);
    pb.set_prefix("step");
    pb.set_position(step as u64);
    let start = Instant::now();
    'outer: while step < steps {
        for batch in train.iter() {
            model.train();
            opt.zero_grad();
            let loss = loss_on(&model, &batch, &positions);
            loss.backward();
            clip_grad_norm_(&model.parameters(), 1.0);
            opt.step();
            sched.step(&mut opt);
            step += 1;
            let l = loss.item::<f32>();
            if !l.is_finite() {
                pb.finish_and_clear();
                die(
                    "train_shakespeare",
                    &format!("the training loss became {l} at step {step}: lower --lr (now {lr})"),
                );
            }
            pb.set_message(format!("loss {l:.3}"));
            pb.inc(1);
            if step.is_multiple_of(sample_every) || step == steps {
                model.eval();
                let val_loss = no_grad(|| {
                    let losses: Vec<f64> = val
                        .iter()
                        .take(8)
                        .map(|b| loss_on(&model, &b, &positions).item::<f64>())
                        .collect();
                    losses.iter().sum::<f64>() / losses.len().max(1) as f64
                });
                let sample = generate(&model, &tok, "KING LEAR.\n", 160, &g);
                let secs = start.elapsed().as_secs_f64();
                pb.suspend(|| {
                    say!("step {step}: val loss {val_loss:.3} ({secs:.0} s)\n---\n{sample}\n---")
                });
                let ck = Checkpoint::new(
                    model.state_dict(),
                    opt.state_dict(),
                    sched.state_dict(),
                    train.epoch() - 1,
                    step as u64,
                );
                ck.save(&last)
                    .unwrap_or_else(|e| die("train_shakespeare", &e.to_string()));
            }
            if step == steps {
                break 'outer;
            }
        }
    }
    pb.finish_and_clear();
    say!(
        "done: {step} steps in {:.0} s; checkpoint in {}",
        start.elapsed().as_secs_f64(),
        last.display()
    );
}
