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
//! small CNN, SGD momentum 0.9; infer_b128: its forward under `no_grad`),
//! `conv` (one conv2d forward under `no_grad`, ResNet-like layers). `macro`
//! (tapir only) runs the `mlp` and `inference` steps on the seed MLP written
//! by hand and written with `model!`, to show the macro costs nothing.
//! Variants ending in `compiled` run the same step through `tapir::compile`;
//! on a GPU, `inference`, `mlp` and `transformer` add `*_reduce_overhead`
//! (compile's CUDA graphs, and `compile_step` for the train steps, against
//! `torch.compile(mode="reduce-overhead")`);
//! `fusion` (tapir only) times a linear layer with a five-op elementwise
//! tail, eager and compiled (the tail fused into one kernel each way).
//! `ops` times one op over a 2048 x 2048 matrix (copies of views, draws,
//! sort, topk, nonzero, reductions along a dim; `ops.rs` lists them).
//!
//! `--device cuda` runs them on GPU 0 against `benches/torch_ref.py --device
//! cuda` (same workloads; matmul becomes f32/tf32/bf16 at n4096), waiting for
//! the GPU at the end of every timed step.

//!
//! `main.rs` has the flags and runs each variant in a child process,
//! `measure.rs` times a step and writes the JSON line, `workloads.rs` builds
//! each workload.

#[path = "../common/seed.rs"]
mod seed;

mod linalg;
mod lm_head;
mod measure;
mod ops;
mod pinn;
mod scatter;
mod unary;
mod workloads;

use measure::{PROFILE, baseline_rss_mib};
use tapir::prelude::*;
use workloads::{
    CONV_VARIANTS, bench_cnn, bench_conv, bench_fusion, bench_inference, bench_matmul, bench_mlp,
    bench_transformer,
};

/// tapir's side of the PyTorch comparison (`benches/torch_ref.py`): one
/// JSON line per workload variant.
#[derive(clap::Parser, Debug)]
#[command(name = "bench_ref", version)]
struct Cli {
    /// CPU threads for every kernel.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// Comma-separated: matmul, mlp, transformer, inference, cnn, conv, scatter, lm_head, linalg, pinn, unary, ops, macro.
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
    let device = match c.device.as_str() {
        "cpu" => Device::Cpu,
        _ => Device::cuda(0).map_err(|e| format!("--device: {e}"))?,
    };
    if let Some(one) = &c.one {
        // Checked here, so a mistyped variant is one line and exit status
        // 2, not a panic in the workload's dispatch.
        let known = one
            .split_once('.')
            .and_then(|(w, v)| variants(w, device).map(|vs| vs.contains(&v)));
        if known != Some(true) {
            return Err(format!(
                "--one {one} is not a workload.variant this build runs on {} (the workloads \
                 and their variants: --help, and `variants` in examples/bench_ref/main.rs)",
                c.device
            ));
        }
    }
    Ok(Args {
        threads: c.threads as usize,
        workloads: c.workloads,
        steps_scale: c.steps_scale,
        seed: c.seed,
        one: c.one,
        device,
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
        "transformer" if device.is_cuda() => Some(&[
            "manual_attn",
            "manual_attn_compiled",
            "sdpa",
            "sdpa_compiled",
            "sdpa_reduce_overhead",
        ]),
        "transformer" => Some(&[
            "manual_attn",
            "manual_attn_compiled",
            "sdpa",
            "sdpa_compiled",
        ]),
        "mlp" if device.is_cuda() => {
            Some(&["train_b256", "compiled", "train_b256_reduce_overhead"])
        }
        "mlp" => Some(&["train_b256", "compiled"]),
        "cnn" => Some(&["train_b128", "compiled", "infer_b128"]),
        "conv" => Some(&CONV_VARIANTS),
        "scatter" => Some(&scatter::SCATTER_VARIANTS),
        "unary" => Some(&unary::UNARY_VARIANTS),
        "ops" => Some(&ops::OPS_VARIANTS),
        "lm_head" => Some(&lm_head::LM_HEAD_VARIANTS),
        "pinn" => Some(&pinn::PINN_VARIANTS),
        "linalg" => Some(&linalg::LINALG_VARIANTS),
        "inference" if device.is_cuda() => Some(&[
            "b1_latency",
            "b256_throughput",
            "b1_latency_compiled",
            "b256_throughput_compiled",
            "b1_latency_reduce_overhead",
            "b256_throughput_reduce_overhead",
        ]),
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
        "conv" => (3, 20),
        "scatter" => (3, 20),
        "unary" => (3, 30),
        "ops" => (3, 20),
        "lm_head" => (2, 8),
        "pinn" => (20, 500),
        "linalg" => (2, 10),
        "inference.b1" => (200, 2000),
        "inference.b256" => (10, 200),
        "fusion" => (5, 50),
        _ => unreachable!(),
    }
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
        let Some((w, v)) = one.split_once('.') else {
            unreachable!("`parse` checked --one")
        };
        let line = match w {
            "matmul" => bench_matmul(&args, v),
            "mlp" => bench_mlp(&args, v),
            "transformer" => bench_transformer(&args, v),
            "cnn" => bench_cnn(&args, v),
            "conv" => bench_conv(&args, v),
            "scatter" => scatter::bench_scatter(&args, v),
            "unary" => unary::bench_unary(&args, v),
            "ops" => ops::bench_ops(&args, v),
            "lm_head" => lm_head::bench_lm_head(&args, v),
            "pinn" => pinn::bench_pinn(&args, v),
            "linalg" => linalg::bench_linalg(&args, v),
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
