//! The NCCL backend of `tapir::distributed`. Without a GPU (or without the
//! `cuda` feature) starting it must be an error that says why; on a GPU
//! (`cargo test --features cuda --test nccl -- --include-ignored`, which
//! `scripts/gpu-check.sh` runs) a one-process NCCL group runs every
//! collective and `DistributedDataParallel` on the GPU, with no host round
//! trip. Two NCCL ranks need two GPUs (NCCL does not put two ranks on one
//! GPU); the multi-rank logic is the MPI backend's, tested in
//! `tests/distributed.rs`.

use tapir::distributed::{self, Backend, DdpOptions, DistributedDataParallel, ReduceOp};
use tapir::nn::*;
use tapir::optim::*;
use tapir::prelude::*;

include!("../examples/models/seed.rs");

#[test]
fn starting_nccl_without_a_gpu_is_an_error_that_says_why() {
    if Device::cuda(0).is_ok() {
        println!("SKIPPED: a GPU is present");
        return;
    }
    let err = distributed::init_process_group(Backend::Nccl)
        .err()
        .expect("NCCL cannot start without a GPU")
        .to_string();
    let why = match cfg!(feature = "cuda") {
        true => "needs a CUDA GPU",
        false => "--features cuda",
    };
    assert!(err.contains("NCCL") && err.contains(why), "{err}");
    assert!(
        !distributed::is_initialized(),
        "a failed start leaves no group"
    );
}

/// Deterministic values in about [-1, 1].
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 97) % 2001) as f32 - 1000.0) / 1000.0)
        .collect()
}

/// `steps` AdamW steps of the seed MLP on `device`, through DDP or not: the
/// parameters afterwards.
fn train(device: Device, steps: usize, ddp: bool) -> Vec<Vec<f32>> {
    manual_seed(3);
    let model = SeedMlp::<24, 6>::new(&device);
    let model: Box<dyn Forward> = match ddp {
        true => Box::new(DistributedDataParallel::new(model, DdpOptions::default()).unwrap()),
        false => Box::new(model),
    };
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    for k in 0..steps {
        let x = Tensor::from_vec(values(16 * 24, k as u64), &[16, 24])
            .to(device)
            .unwrap();
        let y = Tensor::from_vec((0..16).map(|i| (i + k as i64) % 6).collect(), &[16])
            .to(device)
            .unwrap();
        opt.zero_grad();
        cross_entropy(&model.forward(&x), &y).backward();
        opt.step();
    }
    model
        .parameters()
        .iter()
        .map(|p| p.to_vec::<f32>())
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU and NCCL: scripts/gpu-check.sh runs it"]
fn one_nccl_rank_runs_every_collective_and_ddp_on_the_gpu() {
    if Device::cuda(0).is_err() {
        println!("SKIPPED: no GPU");
        return;
    }
    let group = distributed::init_process_group(Backend::Nccl).expect("NCCL starts on one GPU");
    let device = distributed::nccl_device();
    assert_eq!(
        (distributed::get_rank(), distributed::get_world_size()),
        (0, 1)
    );
    let t = Tensor::from_vec(vec![1.5f32, -2.0, 4.0], &[3])
        .to(device)
        .unwrap();
    let (fallbacks, syncs) = (tapir::cuda::host_fallbacks(), tapir::cuda::host_syncs());
    for op in [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Product,
    ] {
        distributed::all_reduce(&t, op).unwrap();
    }
    distributed::broadcast(&t, 0).unwrap();
    let gathered = distributed::all_gather(&t).unwrap();
    let scattered = distributed::reduce_scatter(std::slice::from_ref(&t), ReduceOp::Sum).unwrap();
    let half = Tensor::from_vec(vec![0.5f32; 4], &[2, 2])
        .to_dtype(DType::BF16)
        .to(device)
        .unwrap();
    distributed::all_reduce(&half, ReduceOp::Sum).unwrap();
    assert_eq!(
        (
            tapir::cuda::host_fallbacks() - fallbacks,
            tapir::cuda::host_syncs() - syncs
        ),
        (0, 0),
        "collectives stay on the GPU and the host does not wait for them"
    );
    assert_eq!(
        t.to_vec::<f32>(),
        [1.5, -2.0, 4.0],
        "a world of one keeps its values"
    );
    assert_eq!(gathered.len(), 1);
    assert_eq!(gathered[0].to_vec::<f32>(), [1.5, -2.0, 4.0]);
    assert_eq!(scattered.to_vec::<f32>(), [1.5, -2.0, 4.0]);
    assert_eq!(half.to_dtype(DType::F32).to_vec::<f32>(), [0.5; 4]);
    distributed::barrier().unwrap();

    // A CPU tensor is refused with a sentence naming both devices.
    let cpu =
        std::panic::catch_unwind(|| distributed::all_reduce(&Tensor::ones(&[2]), ReduceOp::Sum));
    let msg = cpu.unwrap_err();
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("NCCL") && msg.contains("cpu") && msg.contains("cuda:0"),
        "{msg}"
    );

    // DDP on one rank averages over one rank: the same steps as no DDP,
    // bit for bit, and nothing ran on the host.
    let fallbacks = tapir::cuda::host_fallbacks();
    let with_ddp = train(device, 3, true);
    assert_eq!(
        tapir::cuda::host_fallbacks(),
        fallbacks,
        "DDP's buckets stay on the GPU"
    );
    let alone = train(device, 3, false);
    assert_eq!(with_ddp, alone, "DDP over one NCCL rank changes nothing");
    group.destroy();
    assert!(!distributed::is_initialized());
}
