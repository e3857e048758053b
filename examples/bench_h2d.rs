//! Time the training thread spends in `batch.to(device)` with and without
//! `pin_memory`: a DataLoader with worker threads delivers image batches
//! (`[batch, 3, 64, 64]` f32 and labels, 12 MiB at batch 256) and the loop
//! moves each to the GPU and reduces it there. Prints one JSON line per mode.
//!
//! ```sh
//! cargo build --release --features cuda --example bench_h2d
//! target/release/examples/bench_h2d --steps 100
//! ```

use std::time::Instant;
use tapir::data::{DataLoader, DataLoaderOptions, TensorDataset};
use tapir::prelude::*;

/// Host-to-device copy time per step, pageable against pinned batches.
#[derive(clap::Parser, Debug)]
#[command(name = "bench_h2d", version)]
struct Cli {
    /// Samples per batch.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Timed steps per mode (after 5 untimed).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Loader worker threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    workers: u64,
    /// Threads for tapir's own CPU kernels.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
}

fn die(msg: &str) -> ! {
    eprintln!("bench_h2d: {msg}");
    std::process::exit(2)
}

/// Milliseconds per step in `.to()`, and per step in all.
fn run(cli: &Cli, device: Device, pin_memory: bool) -> (f64, f64) {
    let batch = cli.batch as usize;
    // Enough distinct samples that batches are not all the same memory.
    let n = batch * 8;
    let images = Tensor::rand(&[n, 3, 64, 64]);
    let labels = Tensor::randint(0, 10, &[n]);
    let opts = DataLoaderOptions {
        batch_size: batch,
        shuffle: true,
        drop_last: true,
        num_workers: cli.workers as usize,
        pin_memory,
        seed: Some(0),
        ..Default::default()
    };
    let mut loader = DataLoader::new(TensorDataset::new(vec![images, labels]), opts);
    let warmup = 5;
    let total = warmup + cli.steps as usize;
    let (mut in_to, mut step, mut done) = (0.0, 0.0, 0);
    let mut acc = Tensor::zeros(&[])
        .to(device)
        .unwrap_or_else(|e| die(&e.to_string()));
    while done < total {
        let mut started = Instant::now();
        for b in loader.iter() {
            if done == warmup {
                tapir::cuda::synchronize(device).unwrap_or_else(|e| die(&e.to_string()));
                (in_to, step) = (0.0, 0.0);
                started = Instant::now();
            }
            let t0 = Instant::now();
            let x = b[0].to(device).unwrap_or_else(|e| die(&e.to_string()));
            let y = b[1].to(device).unwrap_or_else(|e| die(&e.to_string()));
            in_to += t0.elapsed().as_secs_f64();
            acc = acc.add(&x.mean()).add(&y.to_dtype(DType::F32).mean());
            done += 1;
            if done == total {
                break;
            }
        }
        tapir::cuda::synchronize(device).unwrap_or_else(|e| die(&e.to_string()));
        step += started.elapsed().as_secs_f64();
    }
    let _ = acc.item::<f32>();
    let steps = cli.steps as f64;
    (in_to * 1e3 / steps, step * 1e3 / steps)
}

fn main() {
    use clap::Parser;
    let cli = Cli::parse();
    set_num_threads(cli.threads as usize);
    let device = Device::cuda(0).unwrap_or_else(|e| die(&e.to_string()));
    let mib = (cli.batch as f64) * (3.0 * 64.0 * 64.0 * 4.0 + 8.0) / (1 << 20) as f64;
    for pin_memory in [false, true] {
        let (to_ms, step_ms) = run(&cli, device, pin_memory);
        println!(
            "{{\"workload\":\"h2d\",\"variant\":\"{}\",\"batch\":{},\"mib_per_batch\":{mib:.2},\
             \"to_ms_per_step\":{to_ms:.4},\"step_ms\":{step_ms:.4},\"gib_per_s_in_to\":{:.3}}}",
            if pin_memory { "pin_memory" } else { "pageable" },
            cli.batch,
            mib / 1024.0 / (to_ms / 1e3),
        );
    }
}
