//! Criterion benches of the core kernels: matmul (elements = FLOPs, so the
//! throughput column reads as FLOP/s), elementwise add and gelu (bytes moved),
//! softmax and sum.
//!
//! ```sh
//! cargo bench --bench kernels
//! ```

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tapir::prelude::*;

fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul");
    g.sample_size(10);
    for n in [256usize, 1024, 2048] {
        let a = Tensor::randn(&[n, n]);
        let b = Tensor::randn(&[n, n]);
        g.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| {
            bench.iter(|| black_box(a.matmul(&b)))
        });
    }
    g.finish();
}

fn elementwise(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    for n in [1usize << 16, 1 << 22] {
        let a = Tensor::randn(&[n]);
        let b = Tensor::randn(&[n]);
        g.throughput(Throughput::Bytes((3 * 4 * n) as u64));
        g.bench_with_input(BenchmarkId::new("add", n), &n, |bench, _| {
            bench.iter(|| black_box(&a + &b))
        });
        g.throughput(Throughput::Bytes((2 * 4 * n) as u64));
        g.bench_with_input(BenchmarkId::new("gelu", n), &n, |bench, _| {
            bench.iter(|| black_box(a.gelu()))
        });
    }
    g.finish();
}

fn rows(c: &mut Criterion) {
    let mut g = c.benchmark_group("rows");
    let x = Tensor::randn(&[256, 1024]);
    g.throughput(Throughput::Bytes((2 * 4 * x.numel()) as u64));
    g.bench_function("softmax_256x1024", |bench| {
        bench.iter(|| black_box(x.softmax(-1)))
    });
    g.throughput(Throughput::Bytes((4 * x.numel()) as u64));
    g.bench_function("sum_all_256x1024", |bench| {
        bench.iter(|| black_box(x.sum()))
    });
    g.bench_function("sum_dim0_256x1024", |bench| {
        bench.iter(|| black_box(x.sum_dim(0, false)))
    });
    g.finish();
}

criterion_group!(benches, matmul, elementwise, rows);
criterion_main!(benches);
