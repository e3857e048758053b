//! tapir's side of `../shared/bench/torch_ref.py`: the same workloads, step
//! counts and JSON fields, one line per (workload, variant), each variant in
//! a fresh child process so peak RSS is per variant.
//!
//! ```sh
//! cargo run --release --example bench_ref -- --threads 2 --workloads matmul
//! ```
//! Workloads: `matmul` (n1024, n2048), `mlp` (train_b256), `transformer`
//! (manual_attn: the char transformer, attention from plain ops; sdpa: the
//! same model with the fused attention kernel, CPU only so far) and
//! `inference` (b1_latency, b256_throughput) and `cnn` (train_b128: the
//! small CNN, SGD momentum 0.9). `macro`
//! (tapir only) runs the `mlp` and `inference` steps on the seed MLP written
//! by hand and written with `model!`, to show the macro costs nothing.
//! Variants ending in `compiled` run the same step through `tapir::compile`;
//! `fusion` (tapir only) times a linear layer with a five-op elementwise
//! tail, eager and compiled (the tail fused into one kernel each way).
//!
//! `--device cuda` runs them on GPU 0 against `benches/torch_ref.py --device
//! cuda` (same workloads; matmul becomes f32/tf32/bf16 at n4096), waiting for
//! the GPU at the end of every timed step.

#[path = "common/seed.rs"]
mod seed;

// The same seed MLP written with `model!` (for the `macro` workload), and
// the char transformer (for `transformer`).
include!("models/seed.rs");
include!("models/transformer.rs");
include!("models/small_cnn.rs");

use std::time::Instant;
use tapir::nn::{SdpBackend, sdpa_kernel};
use tapir::optim::{AdamW, AdamWConfig, SGD, SgdConfig};
use tapir::prelude::*;

/// tapir's side of the PyTorch comparison (`benches/torch_ref.py`): one
/// JSON line per workload variant.
#[derive(clap::Parser, Debug)]
#[command(name = "bench_ref", version)]
struct Cli {
    /// CPU threads for every kernel.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// Comma-separated: matmul, mlp, transformer, inference, cnn, macro.
    #[arg(long, default_value = "matmul", value_delimiter = ',')]
    workloads: Vec<String>,
    /// Multiplies every step count (0.3 for a quick run).
    #[arg(long, default_value_t = 1.0)]
    steps_scale: f64,
    /// Seed for data and init.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Runs one `workload.variant` in this process (what each child does).
    #[arg(long, hide = true)]
    one: Option<String>,
    /// cpu, or cuda (GPU 0; needs the `cuda` feature).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "cuda:0"])]
    device: String,
    /// Run the mlp and transformer forward under autocast to bf16 or f16
    /// (PyTorch's side: `benches/torch_amp_ref.py`).
    #[arg(long, value_parser = ["bf16", "f16"])]
    amp: Option<String>,
    /// Also profile the timed steps and print the op table on stderr (the
    /// JSON lines on stdout are then measured with the profiler on).
    #[arg(long)]
    profile: bool,
}

struct Args {
    threads: usize,
    workloads: Vec<String>,
    steps_scale: f64,
    seed: u64,
    one: Option<String>,
    device: Device,
    amp: Option<DType>,
    profile: bool,
}

impl Args {
    /// `f` under the autocast region `--amp` asks for (none without it).
    fn autocast<R>(&self, f: impl FnOnce() -> R) -> R {
        let device_type = tapir::amp::DeviceType::from(self.device);
        tapir::amp::autocast(device_type, self.amp, self.amp.is_some(), f)
    }

    /// The record's `amp` field.
    fn amp_field(&self) -> (&'static str, String) {
        let name = match self.amp {
            Some(DType::F16) => "\"f16\"",
            Some(_) => "\"bf16\"",
            None => "null",
        };
        ("amp", name.to_string())
    }
}

fn parse() -> Result<Args, String> {
    use clap::Parser;
    let c = Cli::parse();
    if !(c.steps_scale.is_finite() && c.steps_scale > 0.0) {
        return Err(format!(
            "--steps-scale {} is not a positive number",
            c.steps_scale
        ));
    }
    Ok(Args {
        threads: c.threads as usize,
        workloads: c.workloads,
        steps_scale: c.steps_scale,
        seed: c.seed,
        one: c.one,
        device: match c.device.as_str() {
            "cpu" => Device::Cpu,
            _ => Device::cuda(0).map_err(|e| format!("--device: {e}"))?,
        },
        amp: c.amp.as_deref().map(|a| match a {
            "f16" => DType::F16,
            _ => DType::BF16,
        }),
        profile: c.profile,
    })
}

fn variants(workload: &str, device: Device) -> Option<&'static [&'static str]> {
    match workload {
        "matmul" if device.is_cuda() => Some(&["f32_n4096", "tf32_n4096", "bf16_n4096"]),
        "matmul" => Some(&["n1024", "n2048"]),
        "transformer" => Some(&[
            "manual_attn",
            "manual_attn_compiled",
            "sdpa",
            "sdpa_compiled",
        ]),
        "mlp" => Some(&["train_b256", "compiled"]),
        "cnn" => Some(&["train_b128", "compiled"]),
        "inference" => Some(&[
            "b1_latency",
            "b256_throughput",
            "b1_latency_compiled",
            "b256_throughput_compiled",
        ]),
        "fusion" => Some(&["eager", "compiled"]),
        "macro" => Some(&[
            "hand_train_b256",
            "model_train_b256",
            "hand_b1_latency",
            "model_b1_latency",
        ]),
        _ => None,
    }
}

fn default_steps(key: &str) -> (usize, usize) {
    match key {
        "matmul.n1024" => (5, 50),
        "matmul.n2048" => (2, 10),
        "matmul.n4096" => (3, 20),
        "transformer" => (2, 8),
        "mlp" => (10, 100),
        "cnn" => (5, 40),
        "inference.b1" => (200, 2000),
        "inference.b256" => (10, 200),
        "fusion" => (5, 50),
        _ => unreachable!(),
    }
}

/// Resident memory when the process started, before any workload data
/// (PyTorch's side reports it after `import torch`, as `baseline_rss_mib`).
fn baseline_rss_mib() -> f64 {
    static AT_START: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *AT_START.get_or_init(|| proc_field("/proc/self/status", "VmRSS:").unwrap_or(0.0) / 1024.0)
}

fn proc_field(path: &str, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(path).ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

struct Timing {
    total: f64,
    per_step: Vec<f64>,
    cpu: f64,
    device: Device,
}

/// Times `steps` calls after `warm` untimed ones; on a GPU each step ends
/// when the GPU has finished it (as `torch.cuda.synchronize()` in PyTorch's side).
/// `--profile`: the timed steps run under the profiler (set once in `main`).
static PROFILE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn time_loop(device: Device, mut step: impl FnMut(), warm: usize, steps: usize) -> Timing {
    let sync = || {
        if device.is_cuda() {
            tapir::cuda::synchronize(device).expect("synchronize");
        }
    };
    for _ in 0..warm {
        step();
    }
    sync();
    let profiler = PROFILE.load(std::sync::atomic::Ordering::Relaxed).then(|| {
        tapir::profiler::Profiler::start(tapir::profiler::ProfilerOptions {
            cuda: device.is_cuda(),
            ..Default::default()
        })
    });
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let mut per_step = Vec::with_capacity(steps);
    for _ in 0..steps {
        let s = Instant::now();
        step();
        sync();
        per_step.push(s.elapsed().as_secs_f64());
    }
    let total = t0.elapsed().as_secs_f64();
    if let Some(p) = profiler {
        let table = p.stop().key_averages();
        eprint!(
            "{}",
            table.table(tapir::profiler::SortBy::SelfCpuTimeTotal, 25)
        );
    }
    Timing {
        total,
        per_step,
        cpu: cpu_seconds() - c0,
        device,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

fn record(
    workload: &str,
    variant: &str,
    warm: usize,
    t: &Timing,
    samples_per_step: f64,
    extra: &[(&str, String)],
) -> String {
    let steps = t.per_step.len();
    let sps = steps as f64 / t.total;
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string));
    let mut fields = vec![
        format!("\"workload\": \"{workload}\""),
        format!("\"variant\": \"{variant}\""),
        format!("\"threads\": {}", tapir::get_num_threads()),
        format!("\"warmup\": {warm}"),
        format!("\"steps\": {steps}"),
        format!("\"seconds\": {:.4}", t.total),
        format!("\"steps_per_s\": {:.3}", sps),
        format!("\"samples_per_s\": {:.2}", sps * samples_per_step),
        format!("\"step_ms_median\": {:.4}", median(&t.per_step) * 1e3),
    ];
    fields.extend(extra.iter().map(|(k, v)| format!("\"{k}\": {v}")));
    fields.push(format!("\"cpu_util\": {:.2}", t.cpu / t.total));
    fields.push(format!(
        "\"loadavg_1m\": {}",
        load.unwrap_or_else(|| "null".into())
    ));
    fields.push(format!(
        "\"peak_rss_mib\": {:.1}",
        proc_field("/proc/self/status", "VmHWM:").unwrap_or(0.0) / 1024.0
    ));
    fields.push(format!("\"baseline_rss_mib\": {:.1}", baseline_rss_mib()));
    fields.push(format!("\"device\": \"{}\"", t.device));
    if let Ok(name) = tapir::cuda::get_device_name(t.device) {
        fields.push(format!("\"gpu\": \"{name}\""));
    }
    fields.push(format!("\"tapir\": \"{}\"", env!("CARGO_PKG_VERSION")));
    format!("{{{}}}", fields.join(", "))
}

fn bench_matmul(args: &Args, variant: &str) -> String {
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

const N_DATA_BATCHES: usize = 8;

fn scaled(args: &Args, key: &str) -> (usize, usize) {
    let (w, s) = default_steps(key);
    let f = |x: usize| ((x as f64 * args.steps_scale).round() as usize).max(1);
    (f(w), f(s))
}

/// The seed MLP, by hand or (for `model_*` variants) written with `model!`,
/// on `device`; `tapir::compile`d for `*compiled` variants.
fn seed_mlp(variant: &str, device: Device) -> Box<dyn Forward> {
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
fn first_call(device: Device, f: impl FnOnce()) -> (&'static str, String) {
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
fn labelled_batches(args: &Args, shape: &[usize], classes: i64) -> (Vec<Tensor>, Vec<Tensor>) {
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
fn time_train(args: &Args, key: &str, mut step: impl FnMut() -> Tensor) -> (Timing, usize, f64) {
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
/// clip_grad_norm_(1.0), AdamW(3e-4, wd 1e-2); batch 256.
fn bench_mlp(args: &Args, variant: &str) -> String {
    let (batch, classes) = (256, 10);
    let dev = args.device;
    let (xs, ys) = labelled_batches(args, &[batch, 784], classes);
    manual_seed(args.seed);
    let model = seed_mlp(variant, dev);
    let params = model.parameters();
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
    record(
        if matches!(variant, "train_b256" | "compiled") {
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
fn bench_inference(args: &Args, variant: &str) -> String {
    manual_seed(args.seed);
    let dev = args.device;
    let model = seed_mlp(variant, dev);
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
fn bench_transformer(args: &Args, variant: &str) -> String {
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
    // `sdpa_compiled`: `sdpa` through `tapir::compile`.
    let backends: &[SdpBackend] = match variant {
        "sdpa" | "sdpa_compiled" => &[SdpBackend::Flash, SdpBackend::Math],
        _ => &[SdpBackend::Math],
    };
    let compiled = variant.ends_with("_compiled");
    let mut it = 0;
    let mut step = || {
        let (x, y) = &data[it % N_DATA_BATCHES];
        it += 1;
        opt.zero_grad();
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
fn bench_cnn(args: &Args, variant: &str) -> String {
    let batch = 128;
    let dev = args.device;
    let (xs, ys) = labelled_batches(args, &[batch, 1, 28, 28], 10);
    manual_seed(args.seed);
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

/// `h * sigmoid(h) + tanh(h) * 0.5` over `h = x W + b`: a linear layer and
/// a five-op elementwise tail, the case `tapir::compile`'s fusion is for.
struct SwishTanh(tapir::nn::Linear);

impl Module for SwishTanh {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, tapir::nn::TensorKind)) {
        self.0.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, tapir::nn::TensorKind)) {
        self.0.visit_mut(f)
    }
    fn repr(&self) -> String {
        "SwishTanh".into()
    }
}

impl Forward for SwishTanh {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        &(&h * &h.sigmoid()) + &(&h.tanh() * 0.5)
    }
}

/// tapir only: `SwishTanh(Linear(256, 1024))` on batch 2048, forward and
/// backward of the mean square, eager against `tapir::compile` (whose
/// tail is one fused kernel each way).
fn bench_fusion(args: &Args, variant: &str) -> String {
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

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_ref: {e}");
            std::process::exit(2);
        }
    };
    PROFILE.store(args.profile, std::sync::atomic::Ordering::Relaxed);
    baseline_rss_mib();
    set_num_threads(args.threads);
    if let Some(one) = &args.one {
        let (w, v) = one.split_once('.').expect("--one takes workload.variant");
        let line = match w {
            "matmul" => bench_matmul(&args, v),
            "mlp" => bench_mlp(&args, v),
            "transformer" => bench_transformer(&args, v),
            "cnn" => bench_cnn(&args, v),
            "inference" => bench_inference(&args, v),
            "fusion" => bench_fusion(&args, v),
            "macro" if v.contains("train") => bench_mlp(&args, v),
            "macro" => bench_inference(&args, v),
            _ => unreachable!(),
        };
        println!("{line}");
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    for w in &args.workloads {
        let Some(vs) = variants(w, args.device) else {
            eprintln!("bench_ref: workload {w} is not implemented yet; skipping");
            continue;
        };
        for v in vs {
            let out = std::process::Command::new(&exe)
                .args([
                    "--threads",
                    &args.threads.to_string(),
                    "--steps-scale",
                    &args.steps_scale.to_string(),
                ])
                .args([
                    "--seed",
                    &args.seed.to_string(),
                    "--one",
                    &format!("{w}.{v}"),
                    "--device",
                    if args.device.is_cuda() { "cuda" } else { "cpu" },
                ])
                .args(match args.amp {
                    Some(DType::F16) => vec!["--amp", "f16"],
                    Some(_) => vec!["--amp", "bf16"],
                    None => vec![],
                })
                .args(args.profile.then_some("--profile"))
                .output()
                .expect("spawn bench child");
            print!("{}", String::from_utf8_lossy(&out.stdout));
            if args.profile {
                eprint!("{w}.{v}:\n{}", String::from_utf8_lossy(&out.stderr));
            }
            if !out.status.success() {
                eprintln!(
                    "bench_ref: {w}.{v} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}
