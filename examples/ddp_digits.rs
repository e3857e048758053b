//! The main job, data parallel: every process trains the seed MLP on its
//! share of each batch of the shipped digits, and `DistributedDataParallel`
//! averages the gradients across processes while backward runs. Rank 0
//! prints and writes the checkpoints.
//!
//! ```sh
//! cargo build --release --features distributed --example ddp_digits
//! mpirun -np 2 target/release/examples/ddp_digits            # 2 processes, 1 thread each
//! mpirun -np 2 target/release/examples/ddp_digits --resume --epochs 40
//! mpirun --hostfile hosts -np 8 target/release/examples/ddp_digits   # across machines
//! ```
//! As root add `--allow-run-as-root`; more processes than cores need
//! `--oversubscribe`. Without `mpirun` it is one process.

#[path = "common/digits.rs"]
mod digits;
#[path = "common/report.rs"]
mod report;

use digits::{check_data, load_data, loaders};
use report::{EpochMetrics, die, say, to_csv};
use std::path::PathBuf;
use std::time::Instant;
use tapir::data::{Dataset, DistributedSampler};
use tapir::distributed::{self, Backend, DdpOptions, DistributedDataParallel, ReduceOp};
use tapir::optim::{
    AdamW, AdamWConfig, CosineAnnealingLR, LinearLR, LrScheduler, Optimizer, SequentialLR,
};
use tapir::prelude::*;
use tapir::{Checkpoint, Result};

include!("models/seed.rs");

/// Train the seed MLP on the shipped digits with data parallelism over MPI.
#[derive(clap::Parser, Debug)]
#[command(name = "ddp_digits", version)]
struct Config {
    /// Epochs to train.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Peak learning rate of AdamW.
    #[arg(long, default_value_t = 1e-3, value_parser = report::positive)]
    lr: f64,
    /// Global batch size, split evenly across the processes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Warmup epochs, linear from lr/10.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Seed for init (rank 0's weights are broadcast), split and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// CPU threads per process.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// Gradient bucket size in MiB.
    #[arg(long, default_value_t = 25.0, value_parser = report::positive)]
    bucket_cap_mb: f64,
    /// Where rank 0 writes checkpoints and metrics.csv.
    #[arg(long, default_value = "runs/ddp_digits")]
    out: PathBuf,
    /// Continue from OUT/last.safetensors (every rank reads it).
    #[arg(long, conflicts_with = "overwrite")]
    resume: bool,
    /// Start afresh in OUT even if it holds an earlier run.
    #[arg(long)]
    overwrite: bool,
}

/// The mean of `v` over all ranks.
fn global_mean(v: f64) -> Result<f64> {
    let t = Tensor::from_vec(vec![v], &[1]).to_dtype(DType::F64);
    distributed::all_reduce(&t, ReduceOp::Avg)?;
    Ok(t.item::<f64>())
}

fn train(c: &Config) -> Result<()> {
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    let per_rank = c.batch_size as usize / world;
    if per_rank * world != c.batch_size as usize {
        return Err(tapir::Error::Format(format!(
            "--batch-size {} does not split evenly over {world} processes",
            c.batch_size
        )));
    }
    let (train_set, val_set) = load_data(None)?;
    check_data(&train_set, val_set.as_ref()).map_err(tapir::Error::Format)?;
    let (train, mut val) = loaders(c.seed, per_rank, 0, false, train_set, val_set);
    // Each rank reads its own shard of every epoch's shuffled order.
    let n = train.dataset().len();
    let mut train =
        train.with_sampler(DistributedSampler::new(n, world, rank, true, c.seed, false));

    manual_seed(c.seed + rank as u64); // different on purpose: DDP broadcasts rank 0's
    let mut model = SeedMlp::<64, 10>::try_new(&Device::Cpu)?;
    let (last_path, best_path) = (
        c.out.join("last.safetensors"),
        c.out.join("best.safetensors"),
    );
    let resumed = match c.resume {
        true => Some(Checkpoint::load(&last_path)?),
        false => None,
    };
    if let Some(ck) = &resumed {
        model.load_state_dict(&ck.model, true)?;
    }
    let opts = DdpOptions {
        bucket_cap_mb: c.bucket_cap_mb,
        ..Default::default()
    };
    let ddp = DistributedDataParallel::new(model, opts)?;
    let steps_per_epoch = train.len();
    let total = (c.epochs as usize * steps_per_epoch) as i64;
    let warmup = ((c.warmup * steps_per_epoch) as i64).min(total - 1).max(1);
    let config = AdamWConfig {
        lr: c.lr,
        weight_decay: 1e-2,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(ddp.module().parameters(), config);
    let warm = LinearLR::new(&mut opt, 0.1, 1.0, warmup);
    let cosine = CosineAnnealingLR::new(&mut opt, total - warmup, c.lr * 1e-2);
    let mut sched = SequentialLR::new(
        &mut opt,
        vec![Box::new(warm), Box::new(cosine)],
        vec![warmup],
    );
    let (mut first_epoch, mut best, mut history) = (1, 0.0, vec![]);
    if let Some(ck) = &resumed {
        opt.load_state_dict(&ck.optimizer)?;
        sched.load_state_dict(&mut opt, &ck.scheduler);
        first_epoch = ck.epoch as usize + 1;
        best = ck
            .extra
            .get("best_val_acc")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        history = report::from_csv(ck.extra.get("history").map_or("", String::as_str));
    }
    if rank == 0 {
        say!(
            "{world} processes x {} threads, {per_rank} samples each per step; {} buckets; {} parameters",
            c.threads,
            ddp.buckets().len(),
            ddp.module().num_parameters()
        );
    }
    let start = Instant::now();
    for epoch in first_epoch..=c.epochs as usize {
        let t0 = Instant::now();
        train.set_epoch(epoch as u64);
        ddp.module().train();
        let (mut loss_sum, mut seen) = (0.0, 0);
        for batch in train.iter() {
            let (x, y) = (batch[0].flatten(1, -1), &batch[1]);
            opt.zero_grad();
            let loss = cross_entropy(&ddp.module().forward(&x), y);
            loss.backward(); // gradients are averaged across ranks when this returns
            clip_grad_norm_(&ddp.module().parameters(), 1.0);
            opt.step();
            sched.step(&mut opt);
            loss_sum += loss.item::<f64>() * y.size(0) as f64;
            seen += y.size(0);
        }
        let train_loss = global_mean(loss_sum / seen.max(1) as f64)?;
        // Every rank holds the same weights: each scores the whole validation set.
        ddp.module().eval();
        let (mut val_loss, mut correct, mut n) = (0.0, 0usize, 0usize);
        no_grad(|| {
            for batch in val.iter() {
                let (x, y) = (batch[0].flatten(1, -1), &batch[1]);
                let logits = ddp.module().forward(&x);
                val_loss += cross_entropy(&logits, y).item::<f64>() * y.size(0) as f64;
                correct += logits.argmax(-1, false).eq(y).count_nonzero();
                n += y.size(0);
            }
        });
        let m = EpochMetrics {
            epoch,
            train_loss,
            val_loss: val_loss / n.max(1) as f64,
            val_acc: correct as f64 / n.max(1) as f64,
            lr: sched.get_last_lr()[0],
        };
        history.push(m.clone());
        if rank == 0 {
            say!(
                "epoch {epoch:>3}/{}: train_loss {:.4}  val_loss {:.4}  val_acc {:.2}%  ({:.1} s)",
                c.epochs,
                m.train_loss,
                m.val_loss,
                100.0 * m.val_acc,
                t0.elapsed().as_secs_f64()
            );
            let mut ck = Checkpoint::new(
                ddp.module().state_dict(),
                opt.state_dict(),
                sched.state_dict(),
                epoch as u64,
                (epoch * steps_per_epoch) as u64,
            );
            ck.extra.insert("history".into(), to_csv(&history));
            if m.val_acc > best {
                best = m.val_acc;
                ck.extra.insert("best_val_acc".into(), best.to_string());
                ck.save(&best_path)?;
            }
            ck.extra.insert("best_val_acc".into(), best.to_string());
            ck.save(&last_path)?;
            tapir::checkpoint::write_atomic(
                &c.out.join("metrics.csv"),
                to_csv(&history).as_bytes(),
            )?;
        }
        best = best.max(m.val_acc);
        // No rank starts the next epoch (or exits) before the checkpoint is on disk.
        distributed::barrier()?;
    }
    if rank == 0 {
        say!(
            "done in {:.1} s: best val acc {:.2}%; checkpoints and metrics.csv are in {}",
            start.elapsed().as_secs_f64(),
            best * 100.0,
            c.out.display()
        );
    }
    Ok(())
}

fn main() {
    use clap::Parser;
    let c = Config::parse();
    let group = distributed::init_process_group(Backend::Mpi)
        .unwrap_or_else(|e| die("ddp_digits", &e.to_string()));
    let rank = distributed::get_rank();
    set_num_threads(c.threads as usize);
    if rank == 0 {
        let earlier = ["best.safetensors", "last.safetensors", "metrics.csv"]
            .iter()
            .any(|f| c.out.join(f).exists());
        let problem = if c.out.exists() && !c.out.is_dir() {
            Some(format!(
                "--out {} is a file; it names the folder for the run",
                c.out.display()
            ))
        } else if earlier && !c.resume && !c.overwrite {
            Some(format!(
                "{} holds an earlier run; pass --resume to continue it, --overwrite to replace it, or --out DIR",
                c.out.display()
            ))
        } else {
            std::fs::create_dir_all(&c.out)
                .err()
                .map(|e| format!("{}: {e}", c.out.display()))
        };
        if let Some(p) = problem {
            // Every rank is told, so none waits for rank 0 in a collective.
            eprintln!("ddp_digits: {p}");
            let _ = distributed::broadcast(&Tensor::from_vec(vec![1i64], &[1]), 0);
            group.destroy();
            std::process::exit(2);
        }
        let _ = distributed::broadcast(&Tensor::from_vec(vec![0i64], &[1]), 0);
    } else {
        let verdict = Tensor::from_vec(vec![0i64], &[1]);
        distributed::broadcast(&verdict, 0).unwrap_or_else(|e| die("ddp_digits", &e.to_string()));
        if verdict.item::<i64>() != 0 {
            group.destroy();
            std::process::exit(2);
        }
    }
    if let Err(e) = train(&c) {
        die("ddp_digits", &format!("rank {rank}: {e}"));
    }
    group.destroy();
}
