//! Criterion benches of the core kernels: matmul in f32 and bf16 (elements = FLOPs, so the
//! throughput column reads as FLOP/s), elementwise add and gelu (bytes moved),
//! softmax and sums, the small CNN's pooling and convolutions, the char
//! transformer's attention (fused against plain ops, forward and backward),
//! and the backward of split pieces, a GRU and adaptive pooling.
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
        // bf16 (gemmkit's AVX-512 BF16 kernel where the CPU has one).
        let (a16, b16) = (a.to_dtype(DType::BF16), b.to_dtype(DType::BF16));
        g.bench_with_input(BenchmarkId::new("bf16", n), &n, |bench, _| {
            bench.iter(|| black_box(a16.matmul(&b16)))
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
    // Row sums, a sum over channels, batch-norm statistics and a mean over
    // 2 x 2 windows (the shapes of the README's reduction figures).
    let wide = Tensor::randn(&[4096, 1024]);
    let image = Tensor::randn(&[32, 256, 14, 14]);
    let windows = image.reshape(&[32, 256, 7, 2, 7, 2]);
    g.throughput(Throughput::Bytes((4 * wide.numel()) as u64));
    g.bench_function("sum_dim1_4096x1024", |bench| {
        bench.iter(|| black_box(wide.sum_dim(1, false)))
    });
    g.throughput(Throughput::Bytes((4 * image.numel()) as u64));
    g.bench_function("sum_channels_32x256x14x14", |bench| {
        bench.iter(|| black_box(image.sum_dim(1, false)))
    });
    g.bench_function("sum_0_2_3_32x256x14x14", |bench| {
        bench.iter(|| black_box(image.sum_dims(&[0, 2, 3], false)))
    });
    g.bench_function("mean_2x2_windows_32x256x14x14", |bench| {
        bench.iter(|| black_box(windows.mean_dims(&[3, 5], false)))
    });
    g.finish();
}

/// Backward passes that go through one autograd node for many views: an
/// LSTM's gates from `chunk(4)`, a GRU over 100 steps (its input gates are
/// one `unbind`), and AdaptiveAvgPool2d((7, 7)).
fn pieces_backward(c: &mut Criterion) {
    use tapir::nn::{AdaptiveAvgPool2d, Forward, GRU, RnnOptions};
    let mut g = c.benchmark_group("pieces_backward");
    g.sample_size(10);
    let gates = Tensor::randn(&[4096, 1024]).requires_grad_(true);
    g.bench_function("lstm_gates_chunk4_4096x1024", |bench| {
        bench.iter(|| {
            let p = gates.chunk(4, 1);
            let h = &(&(&p[0].sigmoid() * &p[1].tanh()) + &p[2].sigmoid()) * &p[3].tanh();
            h.sum().backward();
            gates.set_grad(None);
        })
    });
    let opts = RnnOptions::default();
    let gru = GRU::new(64, 128, opts);
    let seq = Tensor::randn(&[100, 32, 64]);
    g.bench_function("gru_64x128_seq100_b32", |bench| {
        bench.iter(|| gru.forward(&seq, None).0.sum().backward())
    });
    let pool = AdaptiveAvgPool2d {
        output_size: (7, 7),
    };
    let image = Tensor::randn(&[32, 256, 14, 14]).requires_grad_(true);
    g.bench_function("adaptive_avg_pool_7x7_32x256x14x14", |bench| {
        bench.iter(|| {
            pool.forward(&image).sum().backward();
            image.set_grad(None);
        })
    });
    g.finish();
}

/// The small CNN's layers at batch 128 (`bench_ref`'s `cnn` workload):
/// max pooling forward and the two convolutions.
fn cnn_layers(c: &mut Criterion) {
    let mut g = c.benchmark_group("cnn_b128");
    g.sample_size(10);
    set_num_threads(1);
    let x = Tensor::randn(&[128, 32, 28, 28]);
    g.bench_function("max_pool2d_32x28x28", |bench| {
        bench.iter(|| black_box(x.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))))
    });
    let img = Tensor::randn(&[128, 1, 28, 28]);
    let w1 = Tensor::randn(&[32, 1, 3, 3]);
    let opts = Conv2dOptions::default().padding(1);
    g.bench_function("conv2d_1to32", |bench| {
        bench.iter(|| black_box(img.conv2d(&w1, None, opts)))
    });
    let h = Tensor::randn(&[128, 32, 14, 14]);
    let w2 = Tensor::randn(&[64, 32, 3, 3]);
    g.bench_function("conv2d_32to64", |bench| {
        bench.iter(|| black_box(h.conv2d(&w2, None, opts)))
    });
    g.finish();
}

/// One layer of the char transformer's attention (batch 32, 4 heads, 128
/// positions, head width 64, causal): the fused kernel against the Math
/// composition, forward alone and forward + backward.
fn attention(c: &mut Criterion) {
    use tapir::nn::{SdpBackend, scaled_dot_product_attention, sdpa_kernel};
    let mut g = c.benchmark_group("attention");
    g.sample_size(20);
    let qkv = [0, 1, 2].map(|_| Tensor::randn(&[32, 4, 128, 64]).requires_grad_(true));
    let [q, k, v] = &qkv;
    for (name, backend) in [("flash", SdpBackend::Flash), ("math", SdpBackend::Math)] {
        g.bench_function(BenchmarkId::new("forward", name), |bench| {
            bench.iter(|| {
                sdpa_kernel(&[backend], || {
                    tapir::no_grad(|| {
                        black_box(scaled_dot_product_attention(q, k, v, None, 0.0, true, None))
                    })
                })
            })
        });
        g.bench_function(BenchmarkId::new("forward_backward", name), |bench| {
            bench.iter(|| {
                sdpa_kernel(&[backend], || {
                    scaled_dot_product_attention(q, k, v, None, 0.0, true, None)
                        .sum()
                        .backward();
                    qkv.iter().for_each(|t| t.set_grad(None));
                })
            })
        });
    }
    g.finish();
}

/// Dropout (p = 0.1) of a char-transformer MLP activation (32 x 128 x 1024):
/// the Philox mask against the per-element generator path it replaced
/// (`bernoulli` of a full tensor, then two multiplies).
fn dropout(c: &mut Criterion) {
    let mut g = c.benchmark_group("dropout");
    g.sample_size(10);
    let x = Tensor::randn(&[32, 128, 1024]);
    let drop = tapir::nn::Dropout::new(0.1);
    g.bench_function("philox_mask", |bench| {
        bench.iter(|| black_box(drop.forward(&x)))
    });
    g.bench_function("bernoulli", |bench| {
        bench.iter(|| {
            let keep = Tensor::full_like(&x, 0.9).bernoulli();
            black_box(&(&x * &keep) * (1.0 / 0.9))
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    matmul,
    elementwise,
    rows,
    pieces_backward,
    cnn_layers,
    attention,
    dropout
);
criterion_main!(benches);
