//! Data-parallel scaling: `bench_ref`'s `mlp` train step (the seed MLP,
//! batch 256, AdamW + clip) under `DistributedDataParallel`, each of the
//! processes on its share of the 256 rows. Rank 0 prints one JSON line,
//! with the median host milliseconds of forward, backward, the part of
//! backward spent waiting for the last buckets, and clip + optimizer.
//!
//! ```sh
//! cargo build --release --features distributed --example bench_ddp
//! target/release/examples/bench_ddp                                  # 1 process
//! mpirun --allow-run-as-root -np 2 target/release/examples/bench_ddp  # 2 processes
//! # NCCL: one process per GPU (more than one needs `cuda,distributed`)
//! cargo build --release --features cuda --example bench_ddp
//! target/release/examples/bench_ddp --backend nccl
//! ```

#[path = "common/seed.rs"]
mod seed;

use std::time::Instant;
use tapir::distributed::{self, Backend, DdpOptions, DistributedDataParallel};
use tapir::optim::{AdamW, AdamWConfig, Optimizer};
use tapir::prelude::*;

/// Samples/s of the seed MLP's train step under data parallelism.
#[derive(clap::Parser, Debug)]
#[command(name = "bench_ddp", version)]
struct Cli {
    /// CPU threads per process.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// Global batch, split evenly over the processes.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Timed steps (after 10 untimed).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Gradient bucket size in MiB.
    #[arg(long, default_value_t = 25.0)]
    bucket_cap_mb: f64,
    /// The engine: MPI (CPU processes) or NCCL (one GPU per process).
    #[arg(long, value_enum, default_value_t = Engine::Mpi)]
    backend: Engine,
}

/// `--backend`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Mpi,
    Nccl,
}

fn die(msg: &str) -> ! {
    eprintln!("bench_ddp: {msg}");
    std::process::exit(2)
}

fn main() {
    use clap::Parser;
    let cli = Cli::parse();
    let backend = match cli.backend {
        Engine::Mpi => Backend::Mpi,
        Engine::Nccl => Backend::Nccl,
    };
    let group = distributed::init_process_group(backend).unwrap_or_else(|e| die(&e.to_string()));
    let device = match cli.backend {
        Engine::Mpi => Device::Cpu,
        Engine::Nccl => distributed::nccl_device(),
    };
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    let batch = cli.batch as usize;
    if !batch.is_multiple_of(world) {
        die(&format!(
            "--batch {batch} does not split evenly over {world} processes"
        ));
    }
    set_num_threads(cli.threads as usize);
    let g = Generator::new(rank as u64);
    let on_device = |t: Tensor| t.to(device).unwrap_or_else(|e| die(&e.to_string()));
    let xs: Vec<Tensor> = (0..4)
        .map(|_| on_device(Tensor::randn_with(&[batch / world, 784], &g)))
        .collect();
    let ys: Vec<Tensor> = (0..4)
        .map(|_| on_device(Tensor::randint_with(0, 10, &[batch / world], &g)))
        .collect();
    manual_seed(0);
    let options = DdpOptions {
        bucket_cap_mb: cli.bucket_cap_mb,
        ..Default::default()
    };
    let mut model = seed::Mlp::seed();
    model
        .to_device(device)
        .unwrap_or_else(|e| die(&e.to_string()));
    let ddp = DistributedDataParallel::new(model, options).unwrap_or_else(|e| die(&e.to_string()));
    let params = ddp.module().parameters();
    let config = AdamWConfig {
        lr: 3e-4,
        weight_decay: 1e-2,
        ..Default::default()
    };
    let mut opt = AdamW::new(params.clone(), config);
    // Per timed step, host milliseconds: forward, backward (its end waits
    // for the last buckets), of which that wait, and clip + optimizer.
    let mut phases: Vec<[f64; 4]> = vec![];
    let mut step = |i: usize| {
        let t0 = Instant::now();
        opt.zero_grad();
        let loss = cross_entropy(&ddp.module().forward(&xs[i % 4]), &ys[i % 4]);
        let t1 = Instant::now();
        loss.backward();
        let t2 = Instant::now();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        let t3 = Instant::now();
        let sync_wait = ddp.last_sync_timeline().map_or(Default::default(), |t| {
            let last = t.buckets.last().map_or(t.backward_end, |b| b.finished_at);
            last.saturating_duration_since(t.backward_end)
        });
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        phases.push([ms(t1 - t0), ms(t2 - t1), ms(sync_wait), ms(t3 - t2)]);
    };
    (0..10).for_each(&mut step);
    distributed::barrier().unwrap_or_else(|e| die(&e.to_string()));
    let t0 = Instant::now();
    (0..cli.steps as usize).for_each(&mut step);
    distributed::barrier().unwrap_or_else(|e| die(&e.to_string()));
    let seconds = t0.elapsed().as_secs_f64();
    let timed = &phases[10..];
    let median = |k: usize| {
        let mut v: Vec<f64> = timed.iter().map(|p| p[k]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    if rank == 0 {
        let timeline = ddp.last_sync_timeline();
        let overlap_ms = timeline.map_or(0.0, |t| {
            t.backward_end
                .saturating_duration_since(t.buckets[0].started_at)
                .as_secs_f64()
                * 1e3
        });
        println!(
            "{{\"workload\": \"ddp_mlp\", \"backend\": \"{:?}\", \"device\": \"{device}\", \"processes\": {world}, \"threads\": {}, \"batch\": {batch}, \"steps\": {}, \
             \"seconds\": {seconds:.4}, \"samples_per_s\": {:.2}, \"buckets\": {}, \"first_bucket_lead_ms\": {overlap_ms:.3}, \
             \"forward_ms\": {:.3}, \"backward_ms\": {:.3}, \"sync_wait_ms\": {:.3}, \"optimizer_ms\": {:.3}}}",
            backend,
            cli.threads,
            cli.steps,
            (cli.steps as usize * batch) as f64 / seconds,
            ddp.buckets().len(),
            median(0),
            median(1),
            median(2),
            median(3)
        );
    }
    drop(ddp);
    group.destroy();
}
