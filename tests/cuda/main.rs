//! The CUDA backend against the CPU, its oracle. The GPU tests need a GPU and
//! the `cuda` feature (`cargo test --features cuda --test cuda`); without one
//! each prints SKIPPED and passes, and only the no-GPU behaviour is checked.
//! The golden suites (goldens, nn_goldens, training) run on a GPU too, with
//! `TAPIR_TEST_DEVICE=cuda:0`: `scripts/gpu-check.sh` does both.

#[path = "../common/mod.rs"]
mod common;

use common::close;
use tapir::Error;
use tapir::nn::*;
use tapir::optim::*;
use tapir::prelude::*;

include!("../../examples/models/seed.rs");
include!("../../examples/models/transformer.rs");
include!("../../examples/models/swish_tanh.rs");

fn gpu() -> Option<Device> {
    // The CPU comparisons hold f32 accuracy: no TF32 in cuDNN convolutions.
    tapir::cuda::cudnn::set_allow_tf32(false);
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            println!("SKIPPED: {e}");
            None
        }
    }
}

/// `CUDA_LAUNCH_BLOCKING=1` makes indexing ops wait to check their indices.
fn launch_blocking() -> bool {
    std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v == "1")
}

/// Deterministic values in about [-2, 2].
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 97) % 4001) as f32 / 1000.0) - 2.0)
        .collect()
}

mod attention;
mod device;
mod graphs;
mod ops;
mod training;
