//! Training on the GPU against the CPU: the seed MLP (with its f64
//! yardstick), a char transformer, checkpoints across devices, and the fused
//! optimizers in every configuration and float dtype.

use super::*;

pub(crate) fn batch(k: usize) -> (Tensor, Tensor) {
    let (b, d) = (32, 48);
    let x = Tensor::from_vec(values(b * d, k as u64 + 5), &[b, d]);
    let y = Tensor::from_vec((0..b).map(|i| ((i * 7 + k) % 10) as i64).collect(), &[b]);
    (x, y)
}

/// `make()` right after `manual_seed(seed)`, with no other test of this
/// binary drawing from the default generator in between.
fn seeded<T>(seed: u64, make: impl FnOnce() -> T) -> T {
    static DRAWS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = DRAWS.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(seed);
    make()
}

/// 10 steps of AdamW + clipping + cosine on `device` in `dtype`, from the
/// same initial values on every call: the losses and the model.
pub(crate) fn train(device: Device, dtype: DType) -> (Vec<f64>, SeedMlp<48, 10>) {
    let mut model = seeded(7, || SeedMlp::<48, 10>::new(&device));
    model.to_dtype(dtype);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 1e-3,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let mut sched = CosineAnnealingLR::new(&mut opt, 10, 0.0);
    let mut losses = vec![];
    // One batch, so the loss must fall as the model fits it.
    let (x, y) = batch(0);
    let (x, y) = (x.to_dtype(dtype).to(device).unwrap(), y.to(device).unwrap());
    for _ in 0..10 {
        opt.zero_grad();
        let loss = cross_entropy(&model.forward(&x), &y);
        loss.backward();
        clip_grad_norm_(&model.parameters(), 1.0);
        opt.step();
        sched.step(&mut opt);
        losses.push(loss.item::<f64>());
    }
    (losses, model)
}

/// Per parameter tensor, the largest |a - b| over the largest |b|; the
/// largest of those, and the element where it is, with both values.
fn max_relative_difference(a: &SeedMlp<48, 10>, b: &SeedMlp<48, 10>) -> (f64, String) {
    let mut worst = (0.0, String::new());
    for ((name, x), (_, y)) in a.named_parameters().iter().zip(b.named_parameters()) {
        let (x, y) = (x.to_vec::<f64>(), y.to_vec::<f64>());
        let scale = y.iter().map(|v| v.abs()).fold(1e-12, f64::max);
        for (k, (p, q)) in x.iter().zip(&y).enumerate() {
            let d = (p - q).abs() / scale;
            if d > worst.0 {
                worst = (d, format!("{name}[{k}] ({p:e} against {q:e})"));
            }
        }
    }
    worst
}

/// How far f32 training strays from the same training in f64 on the CPU:
/// the yardstick of the GPU test's bound. Adam divides by `sqrt(v) + eps`,
/// so a gradient near eps turns its last-bit rounding into a visible step.
#[test]
fn the_seed_mlps_f32_run_stays_near_its_f64_run() {
    let (losses, cpu) = train(Device::Cpu, DType::F32);
    let (exact_losses, exact) = train(Device::Cpu, DType::F64);
    let (spread, at) = max_relative_difference(&cpu, &exact);
    println!("f32 against f64 over 10 steps: {spread:.2e} of the tensor's scale, at {at}");
    for (a, b) in losses.iter().zip(&exact_losses) {
        assert!((a - b).abs() <= 1e-5 * b.abs(), "loss {a} vs f64 {b}");
    }
    assert!(spread > 0.0 && spread < 1e-2, "{spread:e} at {at}");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn seed_mlp_trains_on_the_gpu_as_on_the_cpu_without_host_round_trips() {
    let Some(device) = gpu() else { return };
    let (want, cpu_model) = train(Device::Cpu, DType::F32);
    let (_, exact) = train(Device::Cpu, DType::F64);
    let (before, syncs) = (tapir::cuda::host_fallbacks(), tapir::cuda::host_syncs());
    let (got, gpu_model) = train(device, DType::F32);
    let trips = tapir::cuda::host_fallbacks() - before;
    let syncs = tapir::cuda::host_syncs() - syncs;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs(),
            "step {k}: GPU loss {g} vs CPU {w}"
        );
    }
    assert!(want[9] < want[0], "the loss falls: {want:?}");
    for (n, a) in gpu_model.named_parameters() {
        assert_eq!(a.device(), device, "{n}");
    }
    // The GPU's f32 and the CPU's f32 sum in different orders, and each
    // strays from exact arithmetic; the first GPU run differed from the CPU
    // by 3e-3 relative at one weight. The bound: the GPU run's own distance
    // from the f64 run is at most twice the CPU f32 run's (cuBLAS runs
    // without TF32 unless `set_allow_tf32` opts in).
    let (cpu_spread, cpu_at) = max_relative_difference(&cpu_model, &exact);
    let (gpu_spread, gpu_at) = max_relative_difference(&gpu_model, &exact);
    let (apart, apart_at) = max_relative_difference(&gpu_model, &cpu_model);
    println!(
        "against f64: CPU f32 {cpu_spread:.2e} (at {cpu_at}), GPU f32 {gpu_spread:.2e} \
         (at {gpu_at}); GPU against CPU {apart:.2e} (at {apart_at})"
    );
    assert!(
        gpu_spread <= 2.0 * cpu_spread,
        "the GPU strays {gpu_spread:e} from f64 (at {gpu_at}); the CPU's f32 {cpu_spread:e}"
    );
    assert_eq!(
        trips, 0,
        "ops ran on host copies during GPU training (ops without a CUDA kernel)"
    );
    // The host waits for the GPU only where it reads each step's loss.
    if !launch_blocking() {
        assert_eq!(syncs, 10, "host waits in 10 steps");
    }
}

/// 5 AdamW steps of a small char transformer (causal attention, layer
/// norm, GELU, embeddings) on `device`: the losses.
pub(crate) fn train_char_lm(device: Device) -> Vec<f64> {
    const V: usize = 16;
    const CTX: usize = 12;
    let model = seeded(11, || CharLm::<V, 32, 4, 2, CTX>::new(&device));
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    let ids: Vec<i64> = (0..4 * (CTX + 1))
        .map(|i| ((i * 5 + 3) % V) as i64)
        .collect();
    let data = Tensor::from_vec(ids, &[4, CTX + 1]);
    let x = data.narrow(1, 0, CTX).contiguous().to(device).unwrap();
    let y = data
        .narrow(1, 1, CTX)
        .contiguous()
        .reshape(&[-1])
        .to(device)
        .unwrap();
    let positions = Tensor::arange(CTX as i64).to(device).unwrap();
    (0..5)
        .map(|_| {
            opt.zero_grad();
            let logits = model.forward(&x, &positions).reshape(&[-1, V as isize]);
            let loss = cross_entropy(&logits, &y);
            loss.backward();
            clip_grad_norm_(&model.parameters(), 1.0);
            opt.step();
            loss.item::<f64>()
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn a_char_transformer_trains_on_the_gpu_as_on_the_cpu_without_host_round_trips() {
    let Some(device) = gpu() else { return };
    let want = train_char_lm(Device::Cpu);
    let (before, syncs) = (tapir::cuda::host_fallbacks(), tapir::cuda::host_syncs());
    let got = train_char_lm(device);
    let trips = tapir::cuda::host_fallbacks() - before;
    let syncs = tapir::cuda::host_syncs() - syncs;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs(),
            "step {k}: GPU loss {g} vs CPU {w}"
        );
    }
    assert_eq!(trips, 0, "ops ran on host copies during GPU training");
    // Embedding and cross entropy check their indices on the device, so
    // the host waits only where it reads each step's loss.
    if !launch_blocking() {
        assert_eq!(syncs, 5, "host waits in 5 steps");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn a_gpu_checkpoint_loads_on_the_cpu_and_back() {
    let Some(device) = gpu() else { return };
    let (_, model) = train(device, DType::F32);
    let dir = std::env::temp_dir().join(format!("tapir-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gpu.safetensors");
    tapir::save(&model.state_dict(), &path).unwrap();
    let mut cpu = SeedMlp::<48, 10>::new(&Device::Cpu);
    cpu.load_state_dict(&tapir::load(&path).unwrap(), true)
        .unwrap();
    let (x, _) = batch(3);
    let want = cpu.forward(&x);
    let got = model.forward(&x.to(device).unwrap());
    close("logits", &got, &want, 1e-4, 1e-4).unwrap();
    // A CPU checkpoint loads into a model on the GPU (copy_ crosses devices).
    let mut back = SeedMlp::<48, 10>::new(&device);
    back.load_state_dict(&cpu.state_dict(), true).unwrap();
    assert_eq!(back.head.weight.device(), device);
    close(
        "reloaded",
        &back.forward(&x.to(device).unwrap()),
        &want,
        1e-4,
        1e-4,
    )
    .unwrap();
    std::fs::remove_dir_all(dir).ok();
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn optimizer_state_from_a_cpu_checkpoint_resumes_on_the_gpu() {
    let Some(device) = gpu() else { return };
    let (x, y) = batch(1);
    let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
    let step = |m: &SeedMlp<48, 10>, opt: &mut AdamW| {
        opt.zero_grad();
        cross_entropy(&m.forward(&x), &y).backward();
        opt.step();
    };
    let cfg = AdamWConfig::default();
    manual_seed(3);
    let a = SeedMlp::<48, 10>::new(&device);
    let mut opt_a = AdamW::new(a.parameters(), cfg);
    for _ in 0..3 {
        step(&a, &mut opt_a);
    }
    // Through the CPU, as a checkpoint file would be.
    let cpu = |sd: Vec<(String, Tensor)>| -> Vec<(String, Tensor)> {
        sd.into_iter()
            .map(|(k, t)| (k, t.to(Device::Cpu).unwrap()))
            .collect()
    };
    let (model_sd, opt_sd) = (cpu(a.state_dict()), cpu(opt_a.state_dict()));
    let mut b = SeedMlp::<48, 10>::new(&device);
    b.load_state_dict(&model_sd, true).unwrap();
    let mut opt_b = AdamW::new(b.parameters(), cfg);
    opt_b.load_state_dict(&opt_sd).unwrap();
    for _ in 0..3 {
        step(&a, &mut opt_a);
        step(&b, &mut opt_b);
    }
    for ((n, p), (_, q)) in a.named_parameters().iter().zip(b.named_parameters()) {
        close(n, &q, p, 0.0, 0.0).unwrap();
    }
}

/// SGD, Adam, AdamW and RMSprop in every configuration the fused kernels
/// cover, for f32, f16 and bf16 parameters: three steps on `device` against
/// three on the CPU, each run from its own fresh parameter. Every case that
/// differs is reported, not just the first.
fn optimizer_cases_agree(device: Device) -> Result<(), String> {
    type Make = fn(Vec<Tensor>) -> Box<dyn Optimizer>;
    let makers: [(&str, Make); 7] = [
        ("sgd", |ps| {
            Box::new(SGD::new(
                ps,
                SgdConfig {
                    lr: 0.1,
                    ..Default::default()
                },
            ))
        }),
        ("sgd nesterov wd", |ps| {
            let c = SgdConfig {
                lr: 0.05,
                momentum: 0.8,
                nesterov: true,
                weight_decay: 0.1,
                ..Default::default()
            };
            Box::new(SGD::new(ps, c))
        }),
        ("sgd damped maximize", |ps| {
            let c = SgdConfig {
                lr: 0.1,
                momentum: 0.5,
                dampening: 0.2,
                maximize: true,
                ..Default::default()
            };
            Box::new(SGD::new(ps, c))
        }),
        ("adam amsgrad wd", |ps| {
            let c = AdamConfig {
                lr: 0.01,
                amsgrad: true,
                weight_decay: 0.1,
                ..AdamConfig::default()
            };
            Box::new(Adam::new(ps, c))
        }),
        ("rmsprop", |ps| {
            Box::new(RMSprop::new(ps, RMSpropConfig::default()))
        }),
        ("rmsprop centered momentum wd", |ps| {
            let c = RMSpropConfig {
                momentum: 0.9,
                centered: true,
                weight_decay: 0.1,
                ..Default::default()
            };
            Box::new(RMSprop::new(ps, c))
        }),
        ("adamw maximize", |ps| {
            let c = AdamWConfig {
                lr: 0.01,
                maximize: true,
                ..AdamWConfig::default()
            };
            Box::new(AdamW::new(ps, c))
        }),
    ];
    let mut failures = vec![];
    for (dtype, tol) in [(DType::F32, 1e-6), (DType::F16, 1e-3), (DType::BF16, 8e-3)] {
        for (name, make) in makers {
            // Fresh parameters per run: `.to()` onto the device a tensor is
            // already on returns that tensor (as in PyTorch), so a shared
            // start would be stepped by both runs. Three of them, of
            // different sizes, so one step updates several tensors at once
            // (one multi-tensor launch on a GPU).
            let on = |d: Device| {
                let shapes: [&[usize]; 3] = [&[20, 15], &[7], &[3, 11]];
                let ps: Vec<Tensor> = shapes
                    .iter()
                    .enumerate()
                    .map(|(j, s)| {
                        let n = s.iter().product();
                        let p0 = Tensor::from_vec(values(n, 1 + 10 * j as u64), s);
                        p0.to_dtype(dtype).to(d).unwrap().requires_grad_(true)
                    })
                    .collect();
                let mut opt = make(ps.clone());
                for k in 0..3 {
                    for (j, (p, s)) in ps.iter().zip(shapes).enumerate() {
                        let n = s.iter().product();
                        let g = Tensor::from_vec(values(n, 2 + k + 10 * j as u64), s);
                        p.set_grad(Some(g.to_dtype(dtype).to(d).unwrap()));
                    }
                    opt.step();
                }
                let flat: Vec<Tensor> = ps.iter().map(|p| p.reshape(&[-1])).collect();
                let refs: Vec<&Tensor> = flat.iter().collect();
                Tensor::cat(&refs, 0)
                    .to(Device::Cpu)
                    .unwrap()
                    .to_dtype(DType::F64)
            };
            let (want, got) = (on(Device::Cpu), on(device));
            if let Err(e) = close(&format!("{name} ({dtype})"), &got, &want, tol, tol) {
                failures.push(e);
            }
        }
    }
    match failures.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} of 21 cases differ:\n{}",
            failures.len(),
            failures.join("\n")
        )),
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn fused_optimizers_step_on_the_gpu_in_every_float_dtype() {
    let Some(device) = gpu() else { return };
    let before = tapir::cuda::host_fallbacks();
    optimizer_cases_agree(device).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tapir::cuda::host_fallbacks() - before, 0, "host copies");
}

/// The GPU optimizer test's own logic, run CPU against CPU: a test that
/// reuses a parameter across its two runs fails here, without a GPU.
#[test]
fn optimizer_cases_agree_cpu_against_cpu() {
    optimizer_cases_agree(Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
}
