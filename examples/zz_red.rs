use std::time::Instant;
use tapir::prelude::*;
fn t(f: impl Fn() -> Tensor) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t0 = Instant::now();
        std::hint::black_box(f());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    best * 1e3
}
fn main() {
    tapir::set_num_threads(1);
    let a = Tensor::randn(&[4096, 1024]);
    let b = Tensor::randn(&[32, 256, 14, 14]);
    let c = b.reshape(&[32, 256, 7, 2, 7, 2]);
    println!(
        "sum(0) [4096,1024]: {:.2} ms",
        t(|| a.sum_dims(&[0], false))
    );
    println!(
        "sum(1) [4096,1024]: {:.2} ms",
        t(|| a.sum_dims(&[1], false))
    );
    println!(
        "sum((0,2,3)) [32,256,14,14]: {:.2} ms",
        t(|| b.sum_dims(&[0, 2, 3], false))
    );
    println!(
        "mean((3,5)) [32,256,7,2,7,2]: {:.2} ms",
        t(|| c.mean_dims(&[3, 5], false))
    );
    println!(
        "sum(1) [32,256,14,14]: {:.2} ms",
        t(|| b.sum_dims(&[1], false))
    );
}
