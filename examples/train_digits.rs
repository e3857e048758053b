//! The main job: the seed-style MLP, written with `model!`, learns the
//! handwritten digits shipped in `data/` (1797 8x8 images, 10 classes).
//! AdamW with warmup + cosine, gradient clipping, a progress bar, per-epoch
//! validation, last and best checkpoints, loss/accuracy curves as PNG and CSV,
//! and `--resume`.
//!
//! ```sh
//! cargo run --release --example train_digits
//! cargo run --release --example train_digits -- --epochs 40 --resume --allow-changes
//! cargo run --release --example train_digits -- --data ~/mnist   # real MNIST IDX files
//! cargo run --release --example train_digits -- --help
//! ```

#[path = "common/digits.rs"]
mod digits;
#[path = "common/report.rs"]
mod report;

use digits::{Loader, check_data, load_data, loaders};
use report::{EpochMetrics, die, epoch_bar, from_csv, plot, say, to_csv};
use std::path::PathBuf;
use std::time::Instant;
use tapir::amp::{self, DeviceType, GradScaler, GradScalerConfig};
use tapir::optim::{
    AdamW, AdamWConfig, CosineAnnealingLR, LinearLR, LrScheduler, Optimizer, SequentialLR,
};
use tapir::prelude::*;
use tapir::profiler::{Profile, Profiler, ProfilerOptions, SortBy};
use tapir::{Checkpoint, Result};

include!("models/seed.rs");

/// Train the seed MLP (written with `model!`) on handwritten digits.
#[derive(clap::Parser, Debug)]
#[command(name = "train_digits", version)]
struct Config {
    /// Epochs to train.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Peak learning rate of AdamW.
    #[arg(long, default_value_t = 1e-3, value_parser = report::positive)]
    lr: f64,
    /// Batch size.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Warmup epochs, linear from lr/10.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Seed for init, split and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where checkpoints, metrics.csv and curves.png go (a new run needs an
    /// empty or new folder: see --resume and --overwrite).
    #[arg(long, default_value = "runs/digits")]
    out: PathBuf,
    /// DataLoader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// An IDX dataset on disk (train-images-idx3-ubyte[.gz],
    /// train-labels-idx1-ubyte[.gz], optional t10k-* for validation), e.g.
    /// MNIST; by default the digits shipped with tapir.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Continue from OUT/last.safetensors.
    #[arg(long, conflicts_with = "overwrite")]
    resume: bool,
    /// Start afresh in OUT even if it holds an earlier run's checkpoints.
    #[arg(long)]
    overwrite: bool,
    /// With --resume: accept epochs, lr, batch size, warmup or seed other
    /// than the run's (the learning-rate schedule then changes shape).
    #[arg(long, requires = "resume")]
    allow_changes: bool,
    /// cpu, or cuda (GPU 0; needs the `cuda` feature).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "cuda:0"])]
    device: String,
    /// Mixed precision: autocast to bf16 or f16 (f16 adds a GradScaler);
    /// the weights and the optimizer stay f32.
    #[arg(long, value_parser = ["bf16", "f16"])]
    amp: Option<String>,
    /// Profile five training steps (after one warm-up step), print the
    /// table of op times and write OUT/trace.json (Chrome trace format),
    /// then stop without writing checkpoints.
    #[arg(long, conflicts_with = "resume")]
    profile: bool,
    /// Capture each training step (forward, backward, clipping and the
    /// AdamW update) into one CUDA graph with `tapir::compile_step`, and
    /// replay it (needs --device cuda; not with --amp f16, whose loss
    /// scaler reads the GPU at every step).
    #[arg(long)]
    cuda_graphs: bool,
}

/// The settings a run's schedule and data order depend on, as stored in its
/// checkpoints: `name=value` pairs.
fn run_settings(c: &Config) -> Vec<(&'static str, String)> {
    vec![
        ("epochs", c.epochs.to_string()),
        ("lr", format!("{:?}", c.lr)),
        ("batch-size", c.batch_size.to_string()),
        ("warmup", c.warmup.to_string()),
        ("seed", c.seed.to_string()),
        ("amp", c.amp.clone().unwrap_or_else(|| "none".into())),
    ]
}

/// The flags of this invocation that differ from the stored run's.
fn changed_settings(c: &Config, stored: &str) -> Vec<String> {
    let stored: Vec<(&str, &str)> = stored
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    run_settings(c)
        .into_iter()
        .filter_map(|(k, v)| match stored.iter().find(|(sk, _)| *sk == k) {
            Some((_, sv)) if *sv == v => None,
            Some((_, sv)) => Some(format!("--{k} {v} (the run used {sv})")),
            // Runs from before a setting existed used its default.
            None if v == "none" => None,
            None => Some(format!("--{k} {v} (the run did not record it)")),
        })
        .collect()
}

/// What a new run would overwrite in `out`.
fn earlier_run(out: &std::path::Path) -> Option<PathBuf> {
    ["best.safetensors", "last.safetensors", "metrics.csv"]
        .iter()
        .map(|f| out.join(f))
        .find(|p| p.exists())
}

fn run<const IN: usize>(c: &Config, dev: Device, mut train: Loader, mut val: Loader) -> Result<()> {
    manual_seed(c.seed);
    let mut model = SeedMlp::<IN, 10>::try_new(&dev)?;
    let steps_per_epoch = train.len();
    let epochs = c.epochs as usize;
    let total = (epochs * steps_per_epoch) as i64;
    let warmup = ((c.warmup * steps_per_epoch) as i64).min(total - 1).max(1);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: c.lr,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let (device_type, amp_dtype) = (
        DeviceType::from(dev),
        c.amp.as_deref().map(|a| match a {
            "f16" => DType::F16,
            _ => DType::BF16,
        }),
    );
    // Loss scaling is for f16's narrow range; bf16 has f32's exponent.
    let mut scaler = GradScaler::new(GradScalerConfig {
        enabled: amp_dtype == Some(DType::F16),
        ..Default::default()
    });
    let warm = LinearLR::new(&mut opt, 0.1, 1.0, warmup);
    let cosine = CosineAnnealingLR::new(&mut opt, total - warmup, c.lr * 1e-2);
    let mut sched = SequentialLR::new(
        &mut opt,
        vec![Box::new(warm), Box::new(cosine)],
        vec![warmup],
    );
    std::fs::create_dir_all(&c.out).map_err(|source| tapir::Error::Io {
        path: c.out.display().to_string(),
        source,
    })?;
    let (last_path, best_path) = (
        c.out.join("last.safetensors"),
        c.out.join("best.safetensors"),
    );
    let mut history = vec![];
    let mut first_epoch = 1;
    let mut best = 0.0;
    if c.resume {
        let ck = Checkpoint::load(&last_path).map_err(|e| {
            let best = match Checkpoint::load(&best_path) {
                Ok(_) => format!(
                    "{} is intact: copy it over {} to resume from the best epoch",
                    best_path.display(),
                    last_path.display()
                ),
                Err(b) => format!("the best checkpoint cannot be used either ({b})"),
            };
            tapir::Error::Format(format!("cannot resume: {e}; {best}"))
        })?;
        model.load_state_dict(&ck.model, true)?;
        opt.load_state_dict(&ck.optimizer)?;
        sched.load_state_dict(&mut opt, &ck.scheduler);
        ck.restore_rng();
        if scaler.is_enabled() && !ck.grad_scaler.is_empty() {
            scaler.load_state_dict(&ck.grad_scaler)?;
        }
        let stored = ck.extra.get("settings").map(String::as_str).unwrap_or("");
        let changed = changed_settings(c, stored);
        if !changed.is_empty() && !c.allow_changes {
            return Err(tapir::Error::Format(format!(
                "--resume with other settings than the run's: {}; pass --allow-changes to resume with them anyway",
                changed.join(", ")
            )));
        }
        let Some(h) = ck.extra.get("history") else {
            return Err(tapir::Error::Format(format!(
                "{}: the checkpoint has no `history`; it was not written by train_digits",
                last_path.display()
            )));
        };
        history = from_csv(h);
        best = ck
            .extra
            .get("best_val_acc")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        first_epoch = ck.epoch as usize + 1;
        train.set_epoch(ck.epoch);
        say!(
            "resumed from {} at epoch {} (best val acc {:.2}%)",
            last_path.display(),
            ck.epoch,
            best * 100.0
        );
    }
    say!(
        "{model}\nparameters: {}, train batches per epoch: {steps_per_epoch}",
        model.num_parameters()
    );
    let params = model.parameters();
    let mut graphed = tapir::compile_step(model.parameters(), |xy| {
        let loss = amp::autocast(device_type, amp_dtype, amp_dtype.is_some(), || {
            cross_entropy(&model.forward(xy[0]), xy[1])
        });
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        vec![loss]
    });
    let start = Instant::now();
    // `--profile` counts steps across epochs: an epoch may be shorter than
    // the warm-up plus the profiled steps.
    let (mut profiling, mut steps_done) = (None, 0usize);
    for epoch in first_epoch..=epochs {
        let t0 = Instant::now();
        model.train();
        let pb = epoch_bar(epoch, epochs, steps_per_epoch);
        let mut loss_sum = 0.0;
        let mut seen = 0;
        for batch in train.iter() {
            let step = steps_done;
            steps_done += 1;
            if c.profile && step == PROFILE_FROM {
                profiling = Some(Profiler::start(ProfilerOptions {
                    record_shapes: true,
                    profile_memory: true,
                    cuda: dev != Device::Cpu,
                }));
            }
            if let Some(p) = profiling.take_if(|_| step == PROFILE_FROM + PROFILE_STEPS) {
                pb.finish_and_clear();
                return report_profile(p.stop(), &c.out, PROFILE_STEPS);
            }
            let (x, y) = (batch[0].flatten(1, -1).to(dev)?, &batch[1].to(dev)?);
            opt.zero_grad();
            let loss = match c.cuda_graphs {
                true => graphed.run_with_optimizer(&[&x, y], &mut opt).remove(0),
                false => {
                    let loss = amp::autocast(device_type, amp_dtype, amp_dtype.is_some(), || {
                        cross_entropy(&model.forward(&x), y)
                    });
                    scaler.scale(&loss).backward();
                    scaler.unscale_(&mut opt);
                    clip_grad_norm_(&params, 1.0);
                    scaler.step(&mut opt);
                    scaler.update();
                    loss
                }
            };
            sched.step(&mut opt);
            let l = loss.item::<f64>();
            if !l.is_finite() {
                pb.finish_and_clear();
                let kept = match last_path.exists() {
                    true => format!("{} is the last finite checkpoint", last_path.display()),
                    false => "no checkpoint was written".to_string(),
                };
                return Err(tapir::Error::Format(format!(
                    "the training loss became {l} in epoch {epoch}: lower --lr (now {}); {kept}",
                    c.lr
                )));
            }
            loss_sum += l * y.size(0) as f64;
            seen += y.size(0);
            pb.set_message(format!("loss {l:.4}"));
            pb.inc(1);
        }
        pb.finish_and_clear();
        if c.profile {
            continue; // a profile times training steps only, and saves nothing
        }
        model.eval();
        let (mut val_loss, mut correct, mut n) = (0.0, 0usize, 0usize);
        no_grad(|| {
            for batch in val.iter() {
                let (x, y) = (
                    batch[0].flatten(1, -1).to(dev).expect("device in use"),
                    &batch[1].to(dev).expect("device in use"),
                );
                let logits = amp::autocast(device_type, amp_dtype, amp_dtype.is_some(), || {
                    model.forward(&x)
                });
                val_loss += cross_entropy(&logits, y).item::<f64>() * y.size(0) as f64;
                correct += logits.argmax(-1, false).eq(y).count_nonzero();
                n += y.size(0);
            }
        });
        let m = EpochMetrics {
            epoch,
            train_loss: loss_sum / seen.max(1) as f64,
            val_loss: val_loss / n.max(1) as f64,
            val_acc: correct as f64 / n.max(1) as f64,
            lr: sched.get_last_lr()[0],
        };
        say!(
            "epoch {epoch:>3}/{}: train_loss {:.4}  val_loss {:.4}  val_acc {:.2}%  lr {:.2e}  ({:.1} s)",
            epochs,
            m.train_loss,
            m.val_loss,
            100.0 * m.val_acc,
            m.lr,
            t0.elapsed().as_secs_f64()
        );
        history.push(m.clone());
        let mut ck = Checkpoint::new(
            model.state_dict(),
            opt.state_dict(),
            sched.state_dict(),
            epoch as u64,
            (epoch * steps_per_epoch) as u64,
        );
        ck.extra.insert("history".into(), to_csv(&history));
        if scaler.is_enabled() {
            ck.grad_scaler = scaler.state_dict();
        }
        let settings: Vec<String> = run_settings(c)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        ck.extra.insert("settings".into(), settings.join(","));
        if m.val_acc > best {
            best = m.val_acc;
            ck.extra.insert("best_val_acc".into(), best.to_string());
            ck.save(&best_path)?;
        }
        ck.extra.insert("best_val_acc".into(), best.to_string());
        ck.save(&last_path)?;
        tapir::checkpoint::write_atomic(&c.out.join("metrics.csv"), to_csv(&history).as_bytes())?;
        plot(&history, &c.out.join("curves.png"), "digits").map_err(tapir::Error::Format)?;
    }
    if c.profile {
        // The run ended before the profiled steps did.
        return match profiling.take() {
            Some(p) => report_profile(p.stop(), &c.out, steps_done - PROFILE_FROM),
            None => Err(tapir::Error::Format(format!(
                "--profile needs at least {} training steps; this run has {steps_done} (lower --batch-size or raise --epochs)",
                PROFILE_FROM + 1
            ))),
        };
    }
    if c.cuda_graphs {
        let e = graphed.explain();
        say!(
            "CUDA graphs: {} captured, {} replays, {} eager steps{}",
            e.cuda_graphs,
            e.cudagraph_replays,
            e.eager_calls,
            e.cudagraph_skips
                .iter()
                .map(|w| format!("; {w}"))
                .collect::<String>()
        );
    }
    say!(
        "done in {:.1} s: best val acc {:.2}%; checkpoints, metrics.csv and curves.png are in {}",
        start.elapsed().as_secs_f64(),
        best * 100.0,
        c.out.display()
    );
    Ok(())
}

/// `--profile`: the first step warms up, the next ones are profiled.
const PROFILE_FROM: usize = 1;
const PROFILE_STEPS: usize = 5;

/// Prints the profile's table and writes its Chrome trace into `out`.
fn report_profile(prof: Profile, out: &std::path::Path, steps: usize) -> Result<()> {
    say!(
        "{}",
        prof.key_averages().table(SortBy::SelfCpuTimeTotal, 25)
    );
    std::fs::create_dir_all(out).map_err(|source| tapir::Error::Io {
        path: out.display().to_string(),
        source,
    })?;
    let trace = out.join("trace.json");
    prof.export_chrome_trace(&trace)?;
    say!(
        "profiled {steps} steps; open {} in https://ui.perfetto.dev",
        trace.display()
    );
    Ok(())
}

fn main() {
    use clap::Parser;
    let c = Config::parse();
    let dev = match c.device.as_str() {
        "cpu" => Device::Cpu,
        _ => Device::cuda(0).unwrap_or_else(|e| die("train_digits", &format!("--device: {e}"))),
    };
    if c.cuda_graphs && (dev == Device::Cpu || c.amp.as_deref() == Some("f16")) {
        die(
            "train_digits",
            "--cuda-graphs needs --device cuda and no --amp f16 (CUDA graphs capture GPU work; \
             f16's loss scaler reads the GPU at every step)",
        );
    }
    if c.out.exists() && !c.out.is_dir() {
        die(
            "train_digits",
            &format!(
                "--out {} is a file; it names the folder for the run",
                c.out.display()
            ),
        );
    }
    if !c.resume
        && !c.overwrite
        && !c.profile
        && let Some(p) = earlier_run(&c.out)
    {
        die(
            "train_digits",
            &format!(
                "{} holds an earlier run ({}); pass --resume to continue it, --overwrite to replace it, or --out DIR",
                c.out.display(),
                p.display()
            ),
        );
    }
    set_num_threads(2);
    let (train, val) =
        load_data(c.data.as_deref()).unwrap_or_else(|e| die("train_digits", &e.to_string()));
    if let Err(e) = check_data(&train, val.as_ref()) {
        let from = c
            .data
            .as_deref()
            .map_or("the shipped digits".into(), |d| d.display().to_string());
        die("train_digits", &format!("{from}: {e}"));
    }
    let pixels: usize = train.images.shape()[1..].iter().product();
    // Batches bound for a GPU are pinned, so their copies skip the staging copy.
    let pin = dev.is_cuda();
    let (tl, vl) = loaders(c.seed, c.batch_size as usize, c.workers, pin, train, val);
    let result = match pixels {
        64 => run::<64>(&c, dev, tl, vl),
        784 => run::<784>(&c, dev, tl, vl),
        other => die(
            "train_digits",
            &format!(
                "images of {other} pixels: this example is built for 8x8 (digits) and 28x28 (MNIST)"
            ),
        ),
    };
    if let Err(e) = result {
        die("train_digits", &e.to_string());
    }
}
