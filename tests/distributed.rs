//! Data parallel over MPI, for real: each `#[test]` without `worker_` starts
//! this test binary under `mpirun -np N`, running one `worker_` test (ignored
//! when run plainly) in every rank, and checks how the job ended.
//!
//! Needs `--features distributed` and Open MPI (`mpirun` on the PATH).

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tapir::Tensor;
use tapir::distributed::{
    self, Backend, DdpOptions, DistributedDataParallel, ProcessGroup, ReduceOp,
};
use tapir::nn::{self, Forward, Module};
use tapir::optim::{AdamW, AdamWConfig, Optimizer};

/// What `mpirun` left: exit status, output, and how long it took.
struct Job {
    ok: bool,
    output: String,
    took: Duration,
}

/// Runs the worker test `worker` in `np` ranks; kills the job after `limit`.
fn mpirun(np: usize, worker: &str, limit: Duration) -> Job {
    mpirun_with(np, worker, limit, &[])
}

/// [`mpirun`] with extra environment variables for the ranks.
fn mpirun_with(np: usize, worker: &str, limit: Duration, env: &[(&str, String)]) -> Job {
    let exe = std::env::current_exe().expect("the test binary's path");
    let log = std::env::temp_dir().join(format!("tapir-mpi-{worker}-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("a log file in the temp dir");
    let start = Instant::now();
    let mut child = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &np.to_string(),
        ])
        .arg(&exe)
        .args([
            worker,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("TAPIR_NUM_THREADS", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start mpirun ({e}): install Open MPI (apt-get install openmpi-bin)")
        });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mpirun -np {np} {worker} still ran after {limit:?}: a rank hangs\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    Job {
        ok: status.success(),
        output,
        took: start.elapsed(),
    }
}

fn expect_success(np: usize, worker: &str) -> String {
    expect_success_with(np, worker, &[])
}

fn expect_success_with(np: usize, worker: &str, env: &[(&str, String)]) -> String {
    let job = mpirun_with(np, worker, Duration::from_secs(240), env);
    assert!(job.ok, "mpirun -np {np} {worker} failed:\n{}", job.output);
    // Every rank ran the worker (a filter typo would run nothing and pass).
    let passed = job.output.matches("1 passed").count();
    assert_eq!(
        passed, np,
        "expected {np} ranks to pass {worker}:\n{}",
        job.output
    );
    job.output
}

/// The lines the ranks printed after `tag` (rank output interleaves).
fn tagged<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.find(tag).map(|at| &l[at..]))
        .collect()
}

#[test]
fn collectives_on_two_and_four_ranks() {
    expect_success(2, "worker_collectives");
    expect_success(4, "worker_collectives");
}

#[test]
fn ddp_on_two_and_four_ranks_equals_one_process_on_the_whole_batch() {
    for np in [2, 4] {
        let out = expect_success(np, "worker_ddp_matches_full_batch");
        let lines = tagged(&out, "equivalence:");
        assert_eq!(lines.len(), np, "{out}");
        println!("{}", lines.join("\n"));
    }
}

#[test]
fn sync_batch_norm_on_two_and_four_ranks_equals_one_batch_norm_on_the_whole_batch() {
    for np in [2, 4] {
        let out = expect_success(np, "worker_sync_batch_norm");
        let lines = tagged(&out, "sync_batch_norm:");
        assert_eq!(lines.len(), np, "{out}");
        println!("{}", lines.join("\n"));
    }
}

#[test]
fn no_sync_accumulation_equals_one_big_batch() {
    expect_success(2, "worker_no_sync_accumulation");
}

#[test]
fn rank_zero_checkpoints_and_every_rank_resumes_exactly() {
    let dir = std::env::temp_dir().join(format!("tapir-ddp-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The ranks find the folder through the environment mpirun passes on.
    let env = [("TAPIR_DDP_TEST_DIR", dir.display().to_string())];
    expect_success_with(2, "worker_checkpoint_resume", &env);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn first_bucket_is_reduced_while_backward_runs() {
    let out = expect_success(2, "worker_overlap");
    let lines = tagged(&out, "overlap:");
    assert_eq!(lines.len(), 2, "{out}");
    println!("{}", lines.join("\n"));
}

#[test]
fn unused_parameters_with_and_without_find_unused() {
    expect_success(2, "worker_unused_parameters");
}

#[test]
fn a_rank_with_another_model_is_an_error_on_every_rank() {
    let out = expect_success(2, "worker_model_mismatch");
    assert!(
        out.contains("rank 1's model differs from rank 0's"),
        "{out}"
    );
}

/// NCCL's ranks meet over MPI and share how their GPU checks went before
/// anyone joins NCCL, so a rank that cannot start it is an error on every
/// rank, not a hang. Here no rank has a GPU (or the `cuda` feature).
#[test]
fn nccl_that_cannot_start_is_an_error_on_every_rank() {
    let out = expect_success(2, "worker_nccl_cannot_start");
    let lines = tagged(&out, "nccl refused:");
    assert_eq!(lines.len(), 2, "{out}");
}

/// Runs `worker` on 2 ranks, whose rank 1 fails at step 3 saying `said`:
/// the whole job must fail, and soon (no rank may wait in a collective).
fn assert_the_job_ends(worker: &str, said: &str) {
    let job = mpirun(2, worker, Duration::from_secs(120));
    assert!(!job.ok, "the job should fail ({said}):\n{}", job.output);
    assert!(job.output.contains(said), "{}", job.output);
    assert!(job.took < Duration::from_secs(120), "took {:?}", job.took);
}

#[test]
fn a_rank_that_panics_mid_step_ends_the_whole_job() {
    assert_the_job_ends("worker_panics_mid_step", "rank 1 gives up at step 3");
}

#[test]
fn a_rank_that_dies_mid_step_ends_the_whole_job() {
    // No unwinding and no MPI_Abort: the process is gone, as after a crash
    // or an out-of-memory kill. Open MPI's launcher ends the others.
    assert_the_job_ends("worker_dies_mid_step", "rank 1 dies at step 3");
}

// ---- the workers: run in every rank by the tests above ----------------------

fn init() -> ProcessGroup {
    distributed::init_process_group(Backend::Mpi).expect("MPI starts")
}

#[test]
#[ignore = "a rank of collectives_on_two_and_four_ranks"]
fn worker_collectives() {
    let pg = init();
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    let r = rank as f32;
    let t = Tensor::from_vec(vec![r, 10.0 + r, -r], &[3]);
    distributed::all_reduce(&t, ReduceOp::Sum).unwrap();
    let s: f32 = (0..world).map(|q| q as f32).sum();
    assert_eq!(t.to_vec::<f32>(), vec![s, 10.0 * world as f32 + s, -s]);

    let t = Tensor::from_vec(vec![r, 2.0 * r], &[2]);
    distributed::all_reduce(&t, ReduceOp::Avg).unwrap();
    let mean = s / world as f32;
    assert_eq!(t.to_vec::<f32>(), vec![mean, 2.0 * mean]);
    for (op, want) in [(ReduceOp::Max, (world - 1) as i64), (ReduceOp::Min, 0)] {
        let t = Tensor::from_vec(vec![rank as i64], &[1]);
        distributed::all_reduce(&t, op).unwrap();
        assert_eq!(t.to_vec::<i64>(), vec![want]);
    }

    // async: queued work proceeds while this thread goes on
    let a = Tensor::full(&[4], 1.0);
    let work = distributed::all_reduce_async(&a, ReduceOp::Sum).unwrap();
    assert_eq!(
        a.to_vec::<f32>(),
        vec![1.0; 4],
        "the result lands at wait()"
    );
    work.wait().unwrap();
    assert_eq!(a.to_vec::<f32>(), vec![world as f32; 4]);

    let b = Tensor::from_vec(vec![r + 1.0; 2], &[2]).to_dtype(tapir::DType::F64);
    distributed::broadcast(&b, world - 1).unwrap();
    assert_eq!(b.to_vec::<f64>(), vec![world as f64; 2]);

    let g = distributed::all_gather(&Tensor::from_vec(vec![r, r], &[1, 2])).unwrap();
    assert_eq!(g.len(), world);
    for (q, t) in g.iter().enumerate() {
        assert_eq!(t.shape(), &[1, 2]);
        assert_eq!(t.to_vec::<f32>(), vec![q as f32; 2]);
    }
    // A shape that differs on one rank is an error on every rank.
    let odd = Tensor::zeros(&[if rank == 1 { 3 } else { 2 }]);
    let err = distributed::all_gather(&odd).unwrap_err().to_string();
    assert!(
        err.contains("all_gather: rank 1 passed a tensor of [3]"),
        "{err}"
    );

    // reduce_scatter: input q on every rank is [q + rank]; rank q gets the sum.
    let inputs: Vec<Tensor> = (0..world)
        .map(|q| Tensor::from_vec(vec![(q + rank) as f32], &[1]))
        .collect();
    let out = distributed::reduce_scatter(&inputs, ReduceOp::Sum).unwrap();
    assert_eq!(out.to_vec::<f32>(), vec![(world * rank) as f32 + s]);
    distributed::barrier().unwrap();

    // backward() called on a parameter itself still averages through DDP.
    let ddp =
        DistributedDataParallel::new(nn::Linear::new(2, 2, false), DdpOptions::default()).unwrap();
    let w = ddp.module().weight.clone();
    w.backward_with(&Tensor::full(&[2, 2], 1.0 + rank as f64), false);
    assert_eq!(
        w.grad().unwrap().to_vec::<f32>(),
        vec![1.0 + s / world as f32; 4]
    );
    drop(ddp);
    pg.destroy();
}

/// Largest |a - b| between two f64 tensors.
fn max_abs_difference(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max)
}

/// A BatchNorm1d(3) in f64 with weights and biases away from 1 and 0.
fn batch_norm_f64(sync: bool) -> nn::Sequential {
    let mut net = nn::Sequential::new().add(nn::BatchNorm::new_1d(3));
    net.to_dtype(tapir::DType::F64);
    let params = net.parameters();
    tapir::no_grad(|| {
        params[0].copy_(&Tensor::from_vec(vec![0.5f64, 1.5, -1.0], &[3]));
        params[1].copy_(&Tensor::from_vec(vec![0.1f64, -0.2, 0.3], &[3]));
    });
    if sync {
        assert_eq!(nn::convert_sync_batchnorm(&mut net), 1);
    }
    net
}

/// Each rank holds 2 + rank rows of one batch; its SyncBatchNorm must give
/// those rows' outputs and input gradients of one BatchNorm over the whole
/// batch, weight and bias gradients that sum over the ranks to the whole
/// batch's, and the same running statistics.
#[test]
#[ignore = "a rank of sync_batch_norm_on_two_and_four_ranks_equals_one_batch_norm_on_the_whole_batch"]
fn worker_sync_batch_norm() {
    let pg = init();
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    let sizes: Vec<usize> = (0..world).map(|r| 2 + r).collect();
    let (total, start): (usize, usize) = (sizes.iter().sum(), sizes[..rank].iter().sum());
    tapir::manual_seed(3);
    let f64 = tapir::DType::F64;
    let x_all = &(&Tensor::randn(&[total, 3, 4]) * 2.0) + 1.0;
    let (x_all, w_all) = (
        x_all.to_dtype(f64),
        Tensor::randn(&[total, 3, 4]).to_dtype(f64),
    );

    let whole = batch_norm_f64(false);
    let x_whole = x_all.detach().requires_grad_(true);
    let y_whole = whole.forward(&x_whole);
    (&y_whole * &w_all).sum().backward();

    let synced = batch_norm_f64(true);
    let x = x_all
        .narrow(0, start, sizes[rank])
        .detach()
        .requires_grad_(true);
    let y = synced.forward(&x);
    (&y * &w_all.narrow(0, start, sizes[rank])).sum().backward();

    let mine = |t: &Tensor| t.narrow(0, start, sizes[rank]);
    let out = max_abs_difference(&y, &mine(&y_whole));
    let grad = max_abs_difference(&x.grad().unwrap(), &mine(&x_whole.grad().unwrap()));
    let mut params = 0f64;
    for (p, q) in synced.parameters().iter().zip(whole.parameters()) {
        let g = p.grad().unwrap();
        distributed::all_reduce(&g, ReduceOp::Sum).unwrap();
        params = params.max(max_abs_difference(&g, &q.grad().unwrap()));
    }
    let mut stats = 0f64;
    for ((n, a), (_, b)) in synced.named_buffers().iter().zip(whole.named_buffers()) {
        if n.ends_with("running_mean") || n.ends_with("running_var") {
            stats = stats.max(max_abs_difference(a, &b));
        }
    }
    println!(
        "sync_batch_norm: rank {rank} outputs {out:.1e} input grads {grad:.1e} param grads {params:.1e} running stats {stats:.1e}"
    );
    assert!(out < 1e-12 && grad < 1e-12 && params < 1e-12 && stats < 1e-12);
    // In eval mode the running statistics, the same on every rank, are used.
    synced.eval();
    whole.eval();
    let eval = max_abs_difference(&synced.forward(&x), &mine(&whole.forward(&x_all)));
    assert!(eval < 1e-12, "eval: {eval}");
    pg.destroy();
}

/// The seed MLP (stem, residual-free Linear/LayerNorm/ReLU blocks, head).
fn seed_mlp(in_dim: usize, hidden: usize, blocks: usize, classes: usize) -> nn::Sequential {
    let mut s = nn::Sequential::new()
        .add(nn::Linear::new(in_dim, hidden, true))
        .add(nn::ReLU);
    for _ in 0..blocks {
        s = s
            .add(nn::Linear::new(hidden, hidden, true))
            .add(nn::LayerNorm::new(&[hidden], 1e-5, true))
            .add(nn::ReLU);
    }
    s.add(nn::Linear::new(hidden, classes, true))
}

/// The whole batch: the same on every rank.
fn batch(n: usize, in_dim: usize, classes: usize, seed: u64) -> (Tensor, Tensor) {
    tapir::manual_seed(seed);
    let x = Tensor::randn(&[n, in_dim]);
    let y = Tensor::randint(0, classes as i64, &[n]);
    (x, y)
}

/// Largest |a - b| over the largest |b|, over every tensor.
fn max_relative_difference(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let (x, y) = (x.to_vec::<f32>(), y.to_vec::<f32>());
            let diff = x
                .iter()
                .zip(&y)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            let scale = y.iter().map(|q| q.abs()).fold(1e-12f32, f32::max);
            (diff / scale) as f64
        })
        .fold(0.0, f64::max)
}

fn rows(t: &Tensor, rank: usize, world: usize) -> Tensor {
    let per = t.shape()[0] / world;
    t.narrow(0, rank * per, per)
}

#[test]
#[ignore = "a rank of ddp_on_two_and_four_ranks_equals_one_process_on_the_whole_batch"]
fn worker_ddp_matches_full_batch() {
    let pg = init();
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    tapir::manual_seed(100 + rank as u64); // different inits: DDP must broadcast rank 0's
    let ddp = DistributedDataParallel::new(seed_mlp(20, 32, 4, 5), DdpOptions::default()).unwrap();
    let mut alone = seed_mlp(20, 32, 4, 5);
    alone
        .load_state_dict(&ddp.module().state_dict(), true)
        .unwrap();
    let mut opt = AdamW::new(
        ddp.module().parameters(),
        AdamWConfig {
            lr: 1e-2,
            ..Default::default()
        },
    );
    let mut opt_alone = AdamW::new(
        alone.parameters(),
        AdamWConfig {
            lr: 1e-2,
            ..Default::default()
        },
    );
    // The same process in f64: how far f32 itself strays from exact
    // arithmetic over these steps.
    let mut exact = seed_mlp(20, 32, 4, 5);
    exact
        .load_state_dict(&ddp.module().state_dict(), true)
        .unwrap();
    exact.to_dtype(tapir::DType::F64);
    let mut opt_exact = AdamW::new(
        exact.parameters(),
        AdamWConfig {
            lr: 1e-2,
            ..Default::default()
        },
    );
    // Where backward accumulated each gradient: the averaged gradient must
    // land in that same memory (PyTorch's reducer copies back into `.grad`),
    // not in fresh tensors.
    let accumulated_at = Arc::new(Mutex::new(vec![0usize; ddp.module().parameters().len()]));
    for (i, p) in ddp.module().parameters().iter().enumerate() {
        let at = accumulated_at.clone();
        p.register_post_accumulate_grad_hook(move |p| {
            at.lock().unwrap()[i] = p.grad().unwrap().data_ptr();
        });
    }
    for step in 0..6 {
        let (x, y) = batch(64, 20, 5, step);
        opt.zero_grad();
        nn::cross_entropy(&ddp.forward(&rows(&x, rank, world)), &rows(&y, rank, world)).backward();
        let landed: Vec<usize> = ddp
            .module()
            .parameters()
            .iter()
            .map(|p| p.grad().unwrap().data_ptr())
            .collect();
        assert_eq!(
            landed,
            *accumulated_at.lock().unwrap(),
            "DDP wrote the averaged gradients somewhere other than where backward accumulated them"
        );
        opt.step();
        opt_alone.zero_grad();
        nn::cross_entropy(&alone.forward(&x), &y).backward();
        opt_alone.step();
        opt_exact.zero_grad();
        nn::cross_entropy(&exact.forward(&x.to_dtype(tapir::DType::F64)), &y).backward();
        opt_exact.step();
    }
    let diff = max_relative_difference(&ddp.module().parameters(), &alone.parameters());
    let f32_spread = max_relative_difference(&alone.parameters(), &exact.parameters());
    println!(
        "equivalence: rank {rank}/{world}: max relative difference to one process {diff:.2e} \
         (one f32 process against f64: {f32_spread:.2e})"
    );
    // DDP sums the gradient in another order than one process does, and
    // Adam turns the last-bit differences of near-zero gradients into
    // visible steps; the bound is 1e-6 or f32's own distance from exact
    // arithmetic over the same steps, whichever is larger.
    assert!(
        diff <= 1e-6f64.max(f32_spread),
        "DDP drifted from one-process training: {diff:e} (f32 against f64: {f32_spread:e})"
    );
    // identical across ranks, bit for bit
    for p in ddp.module().parameters() {
        let all = distributed::all_gather(&p).unwrap();
        assert!(
            all.iter()
                .all(|q| q.to_vec::<f32>() == all[0].to_vec::<f32>()),
            "ranks differ"
        );
    }
    drop(ddp);
    pg.destroy();
}

#[test]
#[ignore = "a rank of no_sync_accumulation_equals_one_big_batch"]
fn worker_no_sync_accumulation() {
    let pg = init();
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    let ddp = DistributedDataParallel::new(seed_mlp(12, 16, 2, 3), DdpOptions::default()).unwrap();
    let mut alone = seed_mlp(12, 16, 2, 3);
    alone
        .load_state_dict(&ddp.module().state_dict(), true)
        .unwrap();
    let (x, y) = batch(32, 12, 3, 7);
    let (mx, my) = (rows(&x, rank, world), rows(&y, rank, world));
    let half = mx.shape()[0] / 2;
    {
        let _local = ddp.no_sync();
        (nn::cross_entropy(&ddp.forward(&mx.narrow(0, 0, half)), &my.narrow(0, 0, half)) * 0.5)
            .backward();
    }
    let local: Vec<Vec<f32>> = ddp
        .module()
        .parameters()
        .iter()
        .map(|p| p.grad().unwrap().to_vec())
        .collect();
    (nn::cross_entropy(
        &ddp.forward(&mx.narrow(0, half, half)),
        &my.narrow(0, half, half),
    ) * 0.5)
        .backward();
    nn::cross_entropy(&alone.forward(&x), &y).backward();
    let grads = |m: &nn::Sequential| {
        m.parameters()
            .iter()
            .map(|p| p.grad().unwrap())
            .collect::<Vec<_>>()
    };
    let diff = max_relative_difference(&grads(ddp.module()), &grads(&alone));
    println!("rank {rank}: no_sync accumulation vs one batch {diff:.2e}");
    assert!(diff <= 1e-6, "{diff:e}");
    // Under no_sync nothing was averaged: the local gradient differs from the global one.
    let global: Vec<Vec<f32>> = grads(ddp.module()).iter().map(|g| g.to_vec()).collect();
    assert_ne!(local, global);
    drop(ddp);
    pg.destroy();
}

/// `steps` AdamW steps of `ddp` on this rank's rows of batches `from..`.
fn train_steps(
    ddp: &DistributedDataParallel<nn::Sequential>,
    opt: &mut AdamW,
    from: u64,
    steps: u64,
) {
    let (rank, world) = (distributed::get_rank(), distributed::get_world_size());
    for step in from..from + steps {
        let (x, y) = batch(32, 10, 4, step);
        opt.zero_grad();
        nn::cross_entropy(&ddp.forward(&rows(&x, rank, world)), &rows(&y, rank, world)).backward();
        opt.step();
    }
}

#[test]
#[ignore = "a rank of rank_zero_checkpoints_and_every_rank_resumes_exactly"]
fn worker_checkpoint_resume() {
    let pg = init();
    let rank = distributed::get_rank();
    let path = std::path::PathBuf::from(std::env::var("TAPIR_DDP_TEST_DIR").unwrap())
        .join("last.safetensors");
    let config = || AdamWConfig {
        lr: 1e-2,
        ..Default::default()
    };
    tapir::manual_seed(5);
    let ddp = DistributedDataParallel::new(seed_mlp(10, 16, 2, 4), DdpOptions::default()).unwrap();
    let mut opt = AdamW::new(ddp.module().parameters(), config());
    train_steps(&ddp, &mut opt, 0, 4);
    if rank == 0 {
        tapir::Checkpoint::new(ddp.module().state_dict(), opt.state_dict(), vec![], 0, 4)
            .save(&path)
            .unwrap();
    }
    distributed::barrier().unwrap(); // nobody reads before rank 0 has written
    train_steps(&ddp, &mut opt, 4, 3);
    let straight: Vec<Vec<f32>> = ddp
        .module()
        .parameters()
        .iter()
        .map(|p| p.to_vec())
        .collect();
    drop(ddp);

    tapir::manual_seed(99 + rank as u64); // a fresh process would start elsewhere
    let mut model = seed_mlp(10, 16, 2, 4);
    let ck = tapir::Checkpoint::load(&path).unwrap();
    model.load_state_dict(&ck.model, true).unwrap();
    let ddp = DistributedDataParallel::new(model, DdpOptions::default()).unwrap();
    let mut opt = AdamW::new(ddp.module().parameters(), config());
    opt.load_state_dict(&ck.optimizer).unwrap();
    train_steps(&ddp, &mut opt, 4, 3);
    let resumed: Vec<Vec<f32>> = ddp
        .module()
        .parameters()
        .iter()
        .map(|p| p.to_vec())
        .collect();
    assert!(
        straight == resumed,
        "resumed training differs from training straight through"
    );
    drop(ddp);
    pg.destroy();
}

#[test]
#[ignore = "a rank of first_bucket_is_reduced_while_backward_runs"]
fn worker_overlap() {
    let pg = init();
    let opts = DdpOptions {
        bucket_cap_mb: 0.25,
        ..Default::default()
    };
    let ddp = DistributedDataParallel::new(seed_mlp(256, 256, 8, 10), opts).unwrap();
    assert!(ddp.buckets().len() >= 4, "{:?}", ddp.buckets());
    let last = ddp.module().named_parameters().pop().unwrap().0;
    assert_eq!(
        ddp.buckets()[0][0],
        last,
        "the last parameter (backward's first) comes first"
    );
    let (x, y) = batch(512, 256, 10, 1);
    for _ in 0..3 {
        ddp.module().zero_grad();
        nn::cross_entropy(&ddp.forward(&x), &y).backward();
    }
    let t = ddp.last_sync_timeline().unwrap();
    let first = &t.buckets[0];
    let before = t
        .buckets
        .iter()
        .filter(|b| b.started_at < t.backward_end)
        .count();
    println!(
        "overlap: first bucket started {:?} before backward ended; {before} of {} buckets started during backward",
        t.backward_end.duration_since(first.started_at),
        t.buckets.len()
    );
    assert!(
        first.started_at < t.backward_end,
        "the first all-reduce waited for the end of backward"
    );
    drop(ddp);
    pg.destroy();
}

/// Two heads; only the first is used.
struct TwoHeads {
    used: nn::Linear,
    unused: nn::Linear,
}

impl Module for TwoHeads {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, nn::TensorKind)) {
        nn::visit_child("used", &self.used, f);
        nn::visit_child("unused", &self.unused, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, nn::TensorKind)) {
        nn::visit_child_mut("used", &mut self.used, f);
        nn::visit_child_mut("unused", &mut self.unused, f);
    }
    fn repr(&self) -> String {
        "TwoHeads".into()
    }
}

impl Forward for TwoHeads {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.used.forward(x)
    }
}

#[test]
#[ignore = "a rank of unused_parameters_with_and_without_find_unused"]
fn worker_unused_parameters() {
    let pg = init();
    let rank = distributed::get_rank();
    for find_unused_parameters in [false, true] {
        let model = TwoHeads {
            used: nn::Linear::new(3, 2, true),
            unused: nn::Linear::new(3, 2, true),
        };
        let opts = DdpOptions {
            find_unused_parameters,
            bucket_cap_mb: 1e-6,
            ..Default::default()
        };
        let ddp = DistributedDataParallel::new(model, opts).unwrap();
        for _ in 0..2 {
            ddp.module().zero_grad();
            let x = Tensor::full(&[2, 3], 1.0 + rank as f64);
            ddp.forward(&x).sum().backward();
            // d(sum)/dW = sum of x rows; the mean over ranks of 2 * (1 + rank)
            let g = ddp.module().used.weight.grad().unwrap().to_vec::<f32>();
            assert_eq!(
                g,
                vec![3.0; 6],
                "find_unused_parameters = {find_unused_parameters}"
            );
            let z = ddp.module().unused.weight.grad().unwrap().to_vec::<f32>();
            assert_eq!(z, vec![0.0; 6]);
        }
    }
    pg.destroy();
}

#[test]
#[ignore = "a rank of a_rank_with_another_model_is_an_error_on_every_rank"]
fn worker_model_mismatch() {
    let pg = init();
    let rank = distributed::get_rank();
    let out = if rank == 1 { 3 } else { 2 };
    let err = DistributedDataParallel::new(nn::Linear::new(4, out, true), DdpOptions::default())
        .err()
        .unwrap();
    let msg = err.to_string();
    println!("rank {rank}: {msg}");
    assert!(
        msg.contains("parameter `weight` of shape [3, 4]") && msg.contains("[2, 4]"),
        "{msg}"
    );
    pg.destroy();
}

#[test]
#[ignore = "a rank of nccl_that_cannot_start_is_an_error_on_every_rank"]
fn worker_nccl_cannot_start() {
    let err = distributed::init_process_group(Backend::Nccl)
        .err()
        .expect("no GPU here");
    let msg = err.to_string();
    assert!(msg.contains("NCCL"), "{msg}");
    assert!(!distributed::is_initialized());
    println!("nccl refused: {msg}");
}

/// DDP steps on every rank until rank 1 calls `fail` at step 3; rank 0
/// goes on into the next all-reduce, which rank 1 never joins.
fn fail_mid_step(fail: impl Fn()) {
    let _pg = init();
    let rank = distributed::get_rank();
    let ddp = DistributedDataParallel::new(seed_mlp(8, 8, 1, 2), DdpOptions::default()).unwrap();
    let (x, y) = batch(16, 8, 2, 0);
    for step in 0.. {
        if rank == 1 && step == 3 {
            fail();
        }
        nn::cross_entropy(&ddp.forward(&x), &y).backward();
    }
}

#[test]
#[ignore = "a rank of a_rank_that_dies_mid_step_ends_the_whole_job"]
fn worker_dies_mid_step() {
    fail_mid_step(|| {
        eprintln!("rank 1 dies at step 3");
        std::process::abort();
    });
}

#[test]
#[ignore = "a rank of a_rank_that_panics_mid_step_ends_the_whole_job"]
fn worker_panics_mid_step() {
    fail_mid_step(|| panic!("rank 1 gives up at step 3"));
}
