//! The `linalg` workload, as `benches/torch_ref.py`'s `bench_linalg` builds
//! it, in f64: a Gaussian-process likelihood over 64 symmetric
//! positive-definite 64 x 64 matrices (`cholesky`, `solve_triangular`,
//! forward and backward), `eigh` of 128 symmetric 32 x 32 matrices, `svd`
//! of one 512 x 512 matrix and `solve` of one 1024 x 1024 system with 16
//! right-hand sides. Samples are matrices.

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use tapir::linalg;
use tapir::prelude::*;

/// The workload's variants.
pub(crate) const LINALG_VARIANTS: [&str; 4] =
    ["gp_b64_n64", "eigh_b128_n32", "svd_n512", "solve_n1024"];

pub(crate) fn bench_linalg(args: &Args, variant: &str) -> String {
    let g = Generator::new(args.seed);
    let dev = args.device;
    let rnd = |shape: &[usize]| {
        Tensor::randn_with(shape, &g)
            .to_dtype(DType::F64)
            .to(dev)
            .unwrap()
    };
    let eye = |n: usize| Tensor::eye(n).to_dtype(DType::F64).to(dev).unwrap();
    let (warm, steps) = scaled(args, "linalg");
    let (t, count) = match variant {
        "gp_b64_n64" => {
            let x = rnd(&[64, 64, 64]);
            let a = (&x.matmul(&x.transpose(-2, -1)) + &(&eye(64) * 64.0)).requires_grad_(true);
            let y = rnd(&[64, 64, 1]);
            let step = || {
                a.set_grad(None);
                let l = linalg::cholesky(&a, false);
                let alpha = linalg::solve_triangular(&l, &y, false, true, false);
                let logdet = l.diagonal(0, -2, -1).log().sum();
                (&(&alpha.square().sum() * 0.5) + &logdet).backward();
            };
            (time_loop(dev, step, warm, steps), 64)
        }
        "eigh_b128_n32" => {
            let x = rnd(&[128, 32, 32]);
            let a = &x + &x.transpose(-2, -1);
            let step = || {
                linalg::eigh(&a);
            };
            (time_loop(dev, step, warm, steps), 128)
        }
        "svd_n512" => {
            let a = rnd(&[512, 512]);
            let step = || {
                linalg::svd(&a, false);
            };
            (time_loop(dev, step, warm, steps), 1)
        }
        _ => {
            let a = &rnd(&[1024, 1024]) + &(&eye(1024) * 32.0);
            let b = rnd(&[1024, 16]);
            let step = || {
                linalg::solve(&a, &b);
            };
            (time_loop(dev, step, warm, steps), 1)
        }
    };
    record("linalg", variant, warm, &t, count as f64, &[])
}
