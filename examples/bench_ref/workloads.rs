//! The workloads, each as PyTorch's side builds it: data, model, step.

// The same seed MLP written with `model!` (for the `macro` workload), the
// char transformer (for `transformer`), the small CNN and the fusion case.
include!("../models/seed.rs");
include!("../models/transformer.rs");
include!("../models/small_cnn.rs");
include!("../models/swish_tanh.rs");

use crate::measure::{Timing, median, record, time_loop};
use crate::{Args, default_steps, seed};
use std::time::Instant;
use tapir::nn::{SdpBackend, sdpa_kernel};
use tapir::optim::{AdamW, AdamWConfig, SGD, SgdConfig};
use tapir::prelude::*;

pub(crate) fn bench_matmul(args: &Args, variant: &str) -> String {
    // CPU: "n1024"; GPU: "<dtype>_n4096" with dtype f32, tf32 or bf16.
    let (kind, size) = variant.split_once('_').unwrap_or(("f32", variant));
    let n: usize = size[1..].parse().unwrap();
    let dev = args.device;
    let dtype = if kind == "bf16" {
        DType::BF16
    } else {
        DType::F32
    };
    if dev.is_cuda() {
        tapir::cuda::set_allow_tf32(dev, kind == "tf32").unwrap();
    }
    let g = Generator::new(args.seed);
    let make = || {
        Tensor::randn_with(&[n, n], &g)
            .to_dtype(dtype)
            .to(dev)
            .unwrap()
    };
    let (a, b) = (make(), make());
    let (warm, steps) = default_steps(&format!("matmul.{size}"));
    let scale = |x: usize| ((x as f64 * args.steps_scale).round() as usize).max(1);
    let t = time_loop(
        dev,
        || {
            std::hint::black_box(a.matmul(&b));
        },
        scale(warm),
        scale(steps),
    );
    let flop = 2.0 * (n as f64).powi(3);
    let gflops = flop * t.per_step.len() as f64 / t.total / 1e9;
    let gmed = flop / median(&t.per_step) / 1e9;
    record(
        "matmul",
        variant,
        scale(warm),
        &t,
        1.0,
        &[
            ("n", n.to_string()),
            ("dtype", format!("\"{kind}\"")),
            ("gflops", format!("{gflops:.2}")),
            ("gflops_median_step", format!("{gmed:.2}")),
        ],
    )
}

pub(crate) const N_DATA_BATCHES: usize = 8;

pub(crate) fn scaled(args: &Args, key: &str) -> (usize, usize) {
    let (w, s) = default_steps(key);
    let f = |x: usize| ((x as f64 * args.steps_scale).round() as usize).max(1);
    (f(w), f(s))
}

/// The seed MLP, by hand or (for `model_*` variants) written with `model!`,
/// on `device`; `tapir::compile`d for `*compiled` variants, with CUDA
/// graphs for `*reduce_overhead` ones.
pub(crate) fn seed_mlp(variant: &str, device: Device) -> Box<dyn Forward> {
    let mut m: Box<dyn Forward> = if variant.starts_with("model_") {
        Box::new(SeedMlp::<784, 10>::new(&Device::Cpu))
    } else {
        Box::new(seed::Mlp::seed())
    };
    m.to_device(device).expect("the bench device is usable");
    match variant.ends_with("compiled") {
        true => Box::new(tapir::compile(m)),
        false => m,
    }
}

/// The wall time of one call (the recording call of a compiled model), in
/// seconds, as the record's `first_call_s` (PyTorch reports its
/// `torch.compile` first call the same way).
pub(crate) fn first_call(device: Device, f: impl FnOnce()) -> (&'static str, String) {
    let t = Instant::now();
    f();
    if device.is_cuda() {
        tapir::cuda::synchronize(device).expect("synchronize");
    }
    ("first_call_s", format!("{:.4}", t.elapsed().as_secs_f64()))
}

/// `N_DATA_BATCHES` batches of standard-normal inputs of `shape` (batch
/// first) and integer labels below `classes`, on the bench device, drawn
/// in PyTorch's side's order (all inputs, then all labels).
pub(crate) fn labelled_batches(
    args: &Args,
    shape: &[usize],
    classes: i64,
) -> (Vec<Tensor>, Vec<Tensor>) {
    let g = Generator::new(args.seed);
    let dev = args.device;
    let xs = (0..N_DATA_BATCHES)
        .map(|_| Tensor::randn_with(shape, &g).to(dev).unwrap())
        .collect();
    let ys = (0..N_DATA_BATCHES)
        .map(|_| {
            Tensor::randint_with(0, classes, &shape[..1], &g)
                .to(dev)
                .unwrap()
        })
        .collect();
    (xs, ys)
}

/// Times a train `step` (returning its loss) with `key`'s step counts, then
/// runs it once more for the final loss: (timing, warm-up steps, loss).
pub(crate) fn time_train(
    args: &Args,
    key: &str,
    mut step: impl FnMut() -> Tensor,
) -> (Timing, usize, f64) {
    let (warm, steps) = scaled(args, key);
    let t = time_loop(
        args.device,
        || {
            step();
        },
        warm,
        steps,
    );
    (t, warm, step().item::<f64>())
}

/// The seed MLP train step: zero_grad, forward, cross entropy, backward,
/// clip_grad_norm_(1.0), AdamW(3e-4, wd 1e-2); batch 256. For
/// `train_b256_reduce_overhead` the whole step goes through
/// `tapir::compile_step` (one CUDA graph on a GPU, the optimizer included).
pub(crate) fn bench_mlp(args: &Args, variant: &str) -> String {
    let (batch, classes) = (256, 10);
    let dev = args.device;
    let (xs, ys) = labelled_batches(args, &[batch, 784], classes);
    manual_seed(args.seed);
    let graphed = variant.ends_with("reduce_overhead");
    let model = seed_mlp(if graphed { "train_b256" } else { variant }, dev);
    let params = model.parameters();
    let mut whole_step = tapir::compile_step(params.clone(), |xy| {
        let loss = args.autocast(|| cross_entropy(&model.forward(xy[0]), xy[1]));
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        vec![loss]
    });
    let mut opt = AdamW::new(
        params.clone(),
        AdamWConfig {
            lr: 3e-4,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let mut it = 0;
    let mut step = || {
        let i = it % N_DATA_BATCHES;
        it += 1;
        opt.zero_grad();
        if graphed {
            return whole_step
                .run_with_optimizer(&[&xs[i], &ys[i]], &mut opt)
                .remove(0);
        }
        let loss = args.autocast(|| cross_entropy(&model.forward(&xs[i]), &ys[i]));
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        loss
    };
    let first = first_call(dev, || {
        step();
    });
    let (t, warm, final_loss) = time_train(args, "mlp", step);
    if graphed {
        eprint!("{}", whole_step.explain());
    }
    record(
        if matches!(
            variant,
            "train_b256" | "compiled" | "train_b256_reduce_overhead"
        ) {
            "mlp"
        } else {
            "macro"
        },
        variant,
        warm,
        &t,
        batch as f64,
        &[
            ("batch", batch.to_string()),
            ("params", model.num_parameters().to_string()),
            ("final_loss", format!("{final_loss:.4}")),
            args.amp_field(),
            first,
        ],
    )
}

/// The seed MLP forward in eval mode under no_grad: batch-1 latency per call,
/// and batch-256 throughput.
pub(crate) fn bench_inference(args: &Args, variant: &str) -> String {
    manual_seed(args.seed);
    if variant.ends_with("reduce_overhead") {
        // Compiled with CUDA graphs; its explain() goes to stderr, so a GPU
        // run shows whether the graph was captured.
        let options = tapir::compile::CompileOptions {
            mode: tapir::compile::Mode::ReduceOverhead,
            ..Default::default()
        };
        let model = tapir::compile::compile_with(seed_mlp("eager", args.device), options);
        let line = time_inference(args, variant, &model);
        eprint!("{}", model.explain());
        return line;
    }
    time_inference(args, variant, &*seed_mlp(variant, args.device))
}

/// [`bench_inference`]'s timing of `model`.
fn time_inference(args: &Args, variant: &str, model: &dyn Forward) -> String {
    let dev = args.device;
    model.eval();
    let g = Generator::new(args.seed);
    let _guard = NoGradGuard::new();
    if variant.contains("b1_latency") {
        let x = Tensor::randn_with(&[1, 784], &g).to(dev).unwrap();
        let first = first_call(dev, || {
            model.forward(&x);
        });
        let (warm, steps) = scaled(args, "inference.b1");
        let t = time_loop(
            dev,
            || {
                std::hint::black_box(model.forward(&x));
            },
            warm,
            steps,
        );
        let mut us: Vec<f64> = t.per_step.iter().map(|s| s * 1e6).collect();
        us.sort_by(|a, b| a.total_cmp(b));
        let pick = |q: f64| us[(q * (us.len() - 1) as f64) as usize];
        return record(
            if variant.starts_with("b1_latency") {
                "inference"
            } else {
                "macro"
            },
            variant,
            warm,
            &t,
            1.0,
            &[
                ("batch", "1".into()),
                ("latency_us_median", format!("{:.2}", median(&us))),
                ("latency_us_p10", format!("{:.2}", pick(0.10))),
                ("latency_us_p90", format!("{:.2}", pick(0.90))),
                first,
            ],
        );
    }
    let x = Tensor::randn_with(&[256, 784], &g).to(dev).unwrap();
    let first = first_call(dev, || {
        model.forward(&x);
    });
    let (warm, steps) = scaled(args, "inference.b256");
    let t = time_loop(
        dev,
        || {
            std::hint::black_box(model.forward(&x));
        },
        warm,
        steps,
    );
    record(
        "inference",
        variant,
        warm,
        &t,
        256.0,
        &[("batch", "256".into()), first],
    )
}

/// The char transformer train step (PyTorch's `CharTransformer`, manual
/// attention): 4 pre-norm blocks of width 256, 4 heads, context 128, vocab
/// 128; next-token cross entropy over all positions, clip_grad_norm_(1.0),
/// AdamW(3e-4, wd 1e-2); batch 32.
pub(crate) fn bench_transformer(args: &Args, variant: &str) -> String {
    const V: usize = 128;
    const CTX: usize = 128;
    let batch = 32;
    let dev = args.device;
    let g = Generator::new(args.seed);
    let data: Vec<(Tensor, Tensor)> = (0..N_DATA_BATCHES)
        .map(|_| {
            let d = Tensor::randint_with(0, V as i64, &[batch, CTX + 1], &g);
            let x = d.narrow(1, 0, CTX).contiguous().to(dev).unwrap();
            let y = d
                .narrow(1, 1, CTX)
                .contiguous()
                .reshape(&[-1])
                .to(dev)
                .unwrap();
            (x, y)
        })
        .collect();
    manual_seed(args.seed);
    let model = tapir::compile(CharLm::<V, 256, 4, 4, CTX>::new(&dev));
    let positions = Tensor::arange(CTX as i64).to(dev).unwrap();
    let params = model.parameters();
    let mut opt = AdamW::new(
        params.clone(),
        AdamWConfig {
            lr: 3e-4,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    // `manual_attn` is PyTorch's attention from plain ops: the Math backend
    // (q kᵀ, scale, mask, softmax, · v). `sdpa` lets the fused kernel run.
    // `sdpa_compiled`: `sdpa` through `tapir::compile`; on a GPU,
    // `sdpa_reduce_overhead`: that whole step in one CUDA graph.
    let backends: &[SdpBackend] = match variant.starts_with("sdpa") {
        true => &[SdpBackend::Flash, SdpBackend::Math],
        false => &[SdpBackend::Math],
    };
    let graphed = variant.ends_with("_reduce_overhead");
    let compiled = variant.ends_with("_compiled") || graphed;
    let mut whole_step = tapir::compile_step(params.clone(), |xy| {
        let loss = args.autocast(|| {
            sdpa_kernel(backends, || {
                let logits = model
                    .forward_inputs(&[xy[0], &positions])
                    .unwrap()
                    .remove(0);
                cross_entropy(&logits.reshape(&[-1, V as isize]), xy[1])
            })
        });
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        vec![loss]
    });
    let mut it = 0;
    let mut step = || {
        let (x, y) = &data[it % N_DATA_BATCHES];
        it += 1;
        opt.zero_grad();
        if graphed {
            whole_step.run_with_optimizer(&[x, y], &mut opt);
            return;
        }
        let loss = args.autocast(|| {
            sdpa_kernel(backends, || {
                let logits = match compiled {
                    true => model.forward_inputs(&[x, &positions]).unwrap().remove(0),
                    false => model.model().forward(x, &positions),
                };
                cross_entropy(&logits.reshape(&[-1, V as isize]), y)
            })
        });
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
    };
    let first = first_call(dev, &mut step);
    let (warm, steps) = scaled(args, "transformer");
    let t = time_loop(dev, &mut step, warm, steps);
    if graphed {
        eprint!("{}", whole_step.explain());
    }
    let sps = t.per_step.len() as f64 / t.total;
    record(
        "transformer",
        variant,
        warm,
        &t,
        batch as f64,
        &[
            ("batch", batch.to_string()),
            ("context", CTX.to_string()),
            ("params", model.num_parameters().to_string()),
            ("tokens_per_s", format!("{:.1}", sps * (batch * CTX) as f64)),
            args.amp_field(),
            first,
        ],
    )
}

/// The small CNN train step (PyTorch's `SmallCNN`): zero_grad, forward,
/// cross entropy, backward, SGD(lr 0.01, momentum 0.9); batch 128.
pub(crate) fn bench_cnn(args: &Args, variant: &str) -> String {
    let batch = 128;
    let dev = args.device;
    let (xs, ys) = labelled_batches(args, &[batch, 1, 28, 28], 10);
    manual_seed(args.seed);
    if variant == "infer_b128" {
        return time_cnn_inference(args, &SmallCnn::new(&dev), &xs);
    }
    let model: Box<dyn Forward> = match variant {
        "compiled" => Box::new(tapir::compile(SmallCnn::new(&dev))),
        _ => Box::new(SmallCnn::new(&dev)),
    };
    let mut opt = SGD::new(
        model.parameters(),
        SgdConfig {
            lr: 0.01,
            momentum: 0.9,
            ..SgdConfig::default()
        },
    );
    let mut it = 0;
    let mut step = || {
        let i = it % N_DATA_BATCHES;
        it += 1;
        opt.zero_grad();
        let loss = args.autocast(|| cross_entropy(&model.forward(&xs[i]), &ys[i]));
        loss.backward();
        opt.step();
        loss
    };
    let first = first_call(dev, || {
        step();
    });
    let (t, warm, final_loss) = time_train(args, "cnn", step);
    record(
        "cnn",
        variant,
        warm,
        &t,
        batch as f64,
        &[
            ("batch", batch.to_string()),
            ("params", model.num_parameters().to_string()),
            ("final_loss", format!("{final_loss:.4}")),
            args.amp_field(),
            first,
        ],
    )
}

/// The small CNN's forward in eval mode under `no_grad`, batch 128 (the
/// convolutions take the tiled inference kernel).
fn time_cnn_inference(args: &Args, model: &SmallCnn, xs: &[Tensor]) -> String {
    model.eval();
    let _guard = NoGradGuard::new();
    let mut it = 0;
    let mut step = || {
        std::hint::black_box(model.forward(&xs[it % N_DATA_BATCHES]));
        it += 1;
    };
    let first = first_call(args.device, &mut step);
    let (warm, steps) = scaled(args, "cnn");
    let t = time_loop(args.device, step, warm, steps);
    let batch = xs[0].shape()[0];
    record(
        "cnn",
        "infer_b128",
        warm,
        &t,
        batch as f64,
        &[("batch", batch.to_string()), first],
    )
}

/// The `conv` workload's layers: (batch, in channels, size, out channels,
/// kernel), padding `kernel / 2`, as `benches/torch_ref.py`'s `CONV_LAYERS`.
fn conv_layer(variant: &str) -> (usize, usize, usize, usize, usize) {
    match variant {
        "c48_h32_b64" => (64, 48, 32, 32, 3),
        "c64_h56_b32" => (32, 64, 56, 64, 3),
        "c64_h56_b1" => (1, 64, 56, 64, 3),
        "c256_h14_b8" => (8, 256, 14, 256, 3),
        "c64_h56_1x1_b32" => (32, 64, 56, 128, 1),
        _ => unreachable!("bench_ref lists only these conv variants"),
    }
}

/// The `conv` workload's variants.
pub(crate) const CONV_VARIANTS: [&str; 5] = [
    "c48_h32_b64",
    "c64_h56_b32",
    "c64_h56_b1",
    "c256_h14_b8",
    "c64_h56_1x1_b32",
];

/// One conv2d forward (with bias) under `no_grad`: the tiled inference
/// kernel on the CPU.
pub(crate) fn bench_conv(args: &Args, variant: &str) -> String {
    let (n, c, size, oc, k) = conv_layer(variant);
    let g = Generator::new(args.seed);
    let dev = args.device;
    let x = Tensor::randn_with(&[n, c, size, size], &g).to(dev).unwrap();
    let w = Tensor::randn_with(&[oc, c, k, k], &g).to(dev).unwrap();
    let b = Tensor::randn_with(&[oc], &g).to(dev).unwrap();
    let opts = Conv2dOptions::default().padding(k / 2);
    let _guard = NoGradGuard::new();
    let step = || {
        std::hint::black_box(x.conv2d(&w, Some(&b), opts));
    };
    let (warm, steps) = scaled(args, "conv");
    let t = time_loop(dev, step, warm, steps);
    let flop = 2.0 * (n * oc * size * size * c * k * k) as f64;
    record(
        "conv",
        variant,
        warm,
        &t,
        n as f64,
        &[
            ("batch", n.to_string()),
            (
                "gflops_median_step",
                format!("{:.2}", flop / median(&t.per_step) / 1e9),
            ),
        ],
    )
}

/// tapir only: `SwishTanh(Linear(256, 1024))` on batch 2048, forward and
/// backward of the mean square, eager against `tapir::compile` (whose
/// tail is one fused kernel each way).
pub(crate) fn bench_fusion(args: &Args, variant: &str) -> String {
    let g = Generator::new(args.seed);
    let x = Tensor::randn_with(&[2048, 256], &g)
        .to(args.device)
        .unwrap();
    manual_seed(args.seed);
    let mut lin = tapir::nn::Linear::new(256, 1024, true);
    lin.to_device(args.device).unwrap();
    let model: Box<dyn Forward> = match variant {
        "compiled" => Box::new(tapir::compile(SwishTanh(lin))),
        _ => Box::new(SwishTanh(lin)),
    };
    let step = || {
        model.zero_grad();
        let loss = model.forward(&x).square().mean();
        loss.backward();
        loss
    };
    let first = first_call(args.device, || {
        step();
    });
    let (t, warm, final_loss) = time_train(args, "fusion", step);
    record(
        "fusion",
        variant,
        warm,
        &t,
        2048.0,
        &[("final_loss", format!("{final_loss:.6}")), first],
    )
}
