//! The device itself: draws and creation on the GPU, moves between
//! devices, index errors, names, mixed devices, the caching allocator, out
//! of memory, and what happens without a GPU.

use super::*;
use crate::training::batch;

/// Draws for GPU tensors are made on the GPU by the device generator: they
/// equal the CPU twin of the Philox kernel at the generator's offset, and
/// neither they nor training-mode dropout read anything back to the host.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn random_draws_and_dropout_are_made_on_the_gpu() {
    let Some(device) = gpu() else { return };
    let n = 3 * 1001;
    let like = Tensor::zeros(&[3, 1001]).to(device).unwrap();
    let ones = Tensor::ones(&[3, 1001]).to(device).unwrap();
    let dropout = Dropout::new(0.5);
    tapir::device_generator().set_state([11, 6]);
    let (before, syncs) = (tapir::cuda::host_fallbacks(), tapir::cuda::host_syncs());
    let u = Tensor::rand_like(&like);
    let z = Tensor::randn_like(&like);
    let dropped = dropout.forward(&ones);
    assert_eq!(
        tapir::cuda::host_fallbacks() - before,
        0,
        "draws on host copies"
    );
    assert_eq!(
        tapir::cuda::host_syncs() - syncs,
        0,
        "draws waited for the host"
    );
    // Each call reserves whole Philox blocks: 3003 positions take 3004.
    assert_eq!(tapir::device_generator().get_state(), [11, 6 + 3 * 3004]);
    let want = tapir_kernels::cpu::philox_uniform(11, 6, n);
    assert_eq!(u.to_vec::<f32>(), want, "uniform draws are exact");
    let want = tapir_kernels::cpu::philox_normal(11, 6 + 3004, n);
    for (i, (g, w)) in z.to_vec::<f32>().iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-6 * (1.0 + w.abs()),
            "randn_like[{i}]: GPU {g} vs CPU twin {w}"
        );
    }
    // Creation on the device: no host buffer, no copy, no wait.
    let syncs = tapir::cuda::host_syncs();
    let zeros = Tensor::zeros_on(&[5, 7], DType::BF16, device);
    let full = Tensor::full_on(&[4], 3.0, DType::I64, device);
    let r = Tensor::randn_on(&[64, 64], device);
    let (fallbacks, ints) = (
        tapir::cuda::host_fallbacks(),
        Tensor::arange_on((-5..10, 3), device),
    );
    let floats = Tensor::arange_f_on(0.1, 2.0, 0.3, device);
    assert_eq!(
        tapir::cuda::host_fallbacks(),
        fallbacks,
        "arange went through the host"
    );
    assert_eq!(
        tapir::cuda::host_syncs() - syncs,
        0,
        "creation waited for the host"
    );
    assert_eq!((ints.device(), floats.device()), (device, device));
    assert_eq!(
        ints.to_vec::<i64>(),
        Tensor::arange((-5..10, 3)).to_vec::<i64>()
    );
    assert_eq!(
        floats.to_vec::<f32>(),
        Tensor::arange_f(0.1, 2.0, 0.3).to_vec::<f32>()
    );
    assert_eq!((zeros.device(), r.device()), (device, device));
    assert_eq!(zeros.to_vec::<f32>(), vec![0.0; 35]);
    assert_eq!(full.to_vec::<i64>(), vec![3; 4]);
    let kept = dropped.to_vec::<f32>();
    assert!(
        kept.iter().all(|&v| v == 0.0 || v == 2.0),
        "dropout scales kept values by 2"
    );
    let share = kept.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
    assert!(
        (share - 0.5).abs() < 0.05,
        "dropout zeroed {share} of the values"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn moving_between_devices_keeps_values_and_gradients() {
    let Some(device) = gpu() else { return };
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::U8,
        DType::Bool,
    ] {
        let t = Tensor::from_vec(vec![0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3]).to_dtype(dtype);
        let back = t.t().to(device).unwrap().to(Device::Cpu).unwrap();
        assert_eq!(back.to_vec::<f64>(), t.t().to_vec::<f64>(), "{dtype}");
    }
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).requires_grad_(true);
    let y = &x.to(device).unwrap() * 2.0;
    y.sum().backward();
    let g = x.grad().unwrap();
    assert_eq!(g.device(), Device::Cpu);
    assert_eq!(g.to_vec::<f32>(), vec![2.0; 3]);
}

/// Indices are checked on the GPU, so the host need not wait at each op:
/// a bad one is reported (a panic naming the op) where the host next reads,
/// and the device stays usable.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn an_out_of_range_index_on_the_gpu_is_reported_at_the_next_read() {
    let Some(device) = gpu() else { return };
    let on = |t: Tensor| t.to(device).unwrap();
    let panic_of = |f: &dyn Fn()| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    };
    let x = on(Tensor::from_vec(values(20, 1), &[4, 5]));
    // With CUDA_LAUNCH_BLOCKING=1 the report comes from the op itself.
    let msg = panic_of(&|| {
        let syncs = tapir::cuda::host_syncs();
        let y = x.gather(1, &on(Tensor::from_vec(vec![0i64, 7, 1, 2], &[4, 1])));
        assert_eq!(tapir::cuda::host_syncs(), syncs, "gather did not wait");
        y.to_vec::<f32>();
    });
    assert!(
        msg.starts_with("gather: index 7 is out of bounds for dim of size 5"),
        "{msg}"
    );
    let logits = on(Tensor::from_vec(values(10, 2), &[2, 5]));
    let msg = panic_of(&|| {
        let loss = cross_entropy(&logits, &on(Tensor::from_vec(vec![1i64, 9], &[2])));
        loss.item::<f32>();
    });
    assert!(
        msg.starts_with("cross_entropy: index 9 is out of bounds for dim of size 5"),
        "{msg}"
    );
    let ids = on(Tensor::from_vec(vec![4i64], &[1]));
    let msg = panic_of(&|| {
        x.embedding(&ids).to_vec::<f32>();
    });
    assert!(
        msg.starts_with("index_select: index 4 is out of bounds for dim of size 4"),
        "{msg}"
    );
    // Reported once; good indices work as before.
    let good = x.gather(1, &on(Tensor::from_vec(vec![4i64, 0, 1, 2], &[4, 1])));
    let want = Tensor::from_vec(values(20, 1), &[4, 5])
        .gather(1, &Tensor::from_vec(vec![4i64, 0, 1, 2], &[4, 1]));
    close("gather", &good, &want, 0.0, 0.0).unwrap();
}

/// `kernel_launches` counts what each op queues: one kernel for an
/// elementwise op, one GEMM for a matmul, two stages for a bias-style sum
/// over the leading dim, nothing for a view, and one multi-tensor launch
/// for an optimizer step of several parameters.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn kernel_launches_count_what_each_op_queues() {
    let Some(device) = gpu() else { return };
    let a = Tensor::ones(&[64, 32]).to(device).unwrap();
    let b = Tensor::ones(&[32, 16]).to(device).unwrap();
    let count = |f: &dyn Fn() -> Tensor| {
        let before = tapir::cuda::kernel_launches();
        let _keep = f();
        tapir::cuda::kernel_launches() - before
    };
    assert_eq!(count(&|| &a * &a), 1, "an elementwise op");
    assert_eq!(count(&|| a.matmul(&b)), 1, "a matmul is one GEMM");
    assert_eq!(
        count(&|| a.sum_dim(0, false)),
        2,
        "column sums in two stages"
    );
    assert_eq!(count(&|| a.t()), 0, "a view queues nothing");
    // An AdamW step of three parameters is one multi-tensor launch (after
    // the first step, which also creates the state with fills).
    let ps: Vec<Tensor> = [&[4usize, 5][..], &[3], &[7]]
        .iter()
        .map(|s| Tensor::ones(s).to(device).unwrap().requires_grad_(true))
        .collect();
    for p in &ps {
        p.set_grad(Some(Tensor::ones(p.shape()).to(device).unwrap()));
    }
    let mut opt = tapir::optim::AdamW::new(ps.clone(), Default::default());
    opt.step();
    let before = tapir::cuda::kernel_launches();
    opt.step();
    assert_eq!(
        tapir::cuda::kernel_launches() - before,
        1,
        "an optimizer step of three tensors"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn the_gpu_names_itself() {
    let Some(device) = gpu() else { return };
    let name = tapir::cuda::get_device_name(device).unwrap();
    let (major, _) = tapir::cuda::get_device_capability(device).unwrap();
    println!("{device}: {name}, compute capability {major}.x");
    assert!(!name.is_empty());
    assert!(
        major >= 7,
        "tapir's kernels need compute capability 7.0 or newer"
    );
    let (free, total) = tapir::cuda::mem_get_info(device).unwrap();
    assert!(0 < free && free <= total, "free {free} of {total} bytes");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn mixing_devices_in_one_op_names_both() {
    let Some(device) = gpu() else { return };
    let a = Tensor::ones(&[2, 2]);
    let b = Tensor::ones(&[2, 2]).to(device).unwrap();
    let err = std::panic::catch_unwind(|| &a + &b).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("add") && msg.contains("cpu and cuda:0"),
        "{msg}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn the_caching_allocator_reuses_blocks_and_reports_them() {
    let Some(device) = gpu() else { return };
    tapir::cuda::empty_cache(device).unwrap();
    let base = tapir::cuda::memory_allocated(device).unwrap();
    let t = Tensor::zeros(&[1024, 1024]).to(device).unwrap();
    let held = tapir::cuda::memory_allocated(device).unwrap();
    assert_eq!(held - base, 4 << 20, "4 MiB of f32");
    drop(t);
    assert_eq!(tapir::cuda::memory_allocated(device).unwrap(), base);
    let reserved = tapir::cuda::memory_reserved(device).unwrap();
    assert!(reserved >= 4 << 20, "the freed block stays cached");
    let again = Tensor::zeros(&[1024, 1024]).to(device).unwrap();
    assert_eq!(
        tapir::cuda::memory_reserved(device).unwrap(),
        reserved,
        "the cached block is reused, not a new one"
    );
    drop(again);
    assert!(tapir::cuda::max_memory_allocated(device).unwrap() >= base + (4 << 20));
    tapir::cuda::empty_cache(device).unwrap();
    assert!(tapir::cuda::memory_reserved(device).unwrap() < reserved);
}

#[test]
fn without_a_gpu_every_cuda_entry_point_is_an_error() {
    if Device::cuda(0).is_ok() {
        println!("SKIPPED: a GPU is present");
        return;
    }
    assert!(!tapir::cuda::is_available());
    assert_eq!(tapir::cuda::device_count(), 0);
    let e = tapir::cuda::memory_allocated(Device::Cuda(0)).unwrap_err();
    assert!(
        e.to_string().starts_with("device cuda:0 is unavailable"),
        "{e}"
    );
    assert!(Tensor::ones(&[2]).to(Device::Cuda(0)).is_err());
    assert!(SeedMlp::<4, 2>::try_new(&Device::Cuda(0)).is_err());
    assert!(tapir::cuda::get_device_name(Device::Cuda(0)).is_err());
    assert!(tapir::cuda::get_device_capability(Device::Cuda(0)).is_err());
    assert!(tapir::cuda::mem_get_info(Device::Cuda(0)).is_err());
    assert!(tapir::cuda::get_device_name(Device::Cpu).is_err());
    assert_eq!(Device::cuda_if_available(), Device::Cpu);
}

/// Asking for more than the GPU has is `Err(Error::OutOfMemory)` from a
/// `try_` entry point, naming the device and the bytes, and the device
/// works afterwards (PyTorch's `torch.cuda.OutOfMemoryError`).
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn running_out_of_gpu_memory_is_an_error_naming_the_bytes() {
    let Some(device) = gpu() else { return };
    let x = Tensor::ones(&[1, 1])
        .to(device)
        .unwrap()
        .expand(&[1 << 20, 1 << 20]);
    match tapir::error::catch_out_of_memory(|| x.contiguous()) {
        Err(Error::OutOfMemory {
            device: d,
            requested,
            free,
        }) => {
            assert_eq!(d, "cuda:0");
            assert!(requested >= 4 << 40, "asked for {requested} bytes");
            assert!(free < requested, "{free} bytes free");
        }
        Err(e) => panic!("expected out of memory, got {e}"),
        Ok(_) => panic!("a 4 TiB tensor fit on the GPU"),
    }
    let y = Tensor::ones(&[3]).to(device).unwrap();
    assert_eq!(y.sum().item::<f32>(), 3.0);
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn autocast_on_the_gpu_follows_the_cuda_lists_and_the_scaler_steps() {
    use tapir::amp::{self, DeviceType, GradScaler, GradScalerConfig};
    let Some(device) = gpu() else { return };
    let (x, y) = batch(1);
    let cpu = SeedMlp::<48, 10>::new(&Device::Cpu);
    let mut model = SeedMlp::<48, 10>::new(&Device::Cpu);
    model.load_state_dict(&cpu.state_dict(), true).unwrap();
    model.to_device(device).unwrap();
    let (xd, yd) = (x.to(device).unwrap(), y.to(device).unwrap());
    let (logits, probs, loss) = amp::autocast(DeviceType::Cuda, None, true, || {
        let logits = model.forward(&xd);
        (
            logits.clone(),
            logits.softmax(-1),
            cross_entropy(&logits, &yd),
        )
    });
    // f16 matmuls; softmax and the loss in f32 on CUDA (CPU autocast keeps softmax in bf16).
    assert_eq!(
        (logits.dtype(), probs.dtype(), loss.dtype()),
        (DType::F16, DType::F32, DType::F32)
    );
    let want = cpu.forward(&x);
    close(
        "f16 logits",
        &logits.to_dtype(DType::F32),
        &want,
        2e-2,
        2e-2,
    )
    .unwrap();
    let mut opt = tapir::optim::SGD::new(model.parameters(), Default::default());
    let mut scaler = GradScaler::new(GradScalerConfig::default());
    scaler.scale(&loss).backward();
    assert!(scaler.step(&mut opt), "finite gradients step");
    scaler.update();
    for p in model.parameters() {
        assert_eq!(
            (p.dtype(), p.grad().unwrap().dtype()),
            (DType::F32, DType::F32)
        );
    }
}

/// The profiler's GPU side: ops on CUDA tensors get CUDA-event times, the
/// table gets PyTorch's CUDA columns and the trace a `cuda:0 stream` track.
#[test]
fn profiler_times_gpu_ops_with_cuda_events() {
    use tapir::profiler::{self, ProfilerOptions, SortBy};
    let Some(dev) = gpu() else { return };
    let a = Tensor::randn(&[1024, 1024]).to(dev).unwrap();
    let _ = a.matmul(&a); // warm-up: cuBLAS handle, kernels
    tapir::cuda::synchronize(dev).unwrap();
    let prof = profiler::profile(
        ProfilerOptions {
            cuda: true,
            ..Default::default()
        },
        || {
            let y = a.matmul(&a).relu();
            let _ = y.sum().item::<f32>();
        },
    );
    let mm = prof.events().iter().find(|e| e.name == "matmul").unwrap();
    // 2 GFLOP: more than a microsecond, and less than the op's wall time
    // plus the wait for it at `item`.
    assert!(mm.cuda_us > 1.0, "matmul GPU time {} us", mm.cuda_us);
    assert!(mm.cuda_start.is_some_and(|(_, d)| d == 0));
    let table = prof.key_averages().table(SortBy::SelfCpuTimeTotal, 10);
    assert!(
        table.contains("Self CUDA") && table.contains("Self CUDA time total"),
        "{table}"
    );
    println!("{table}");
    let path = std::env::temp_dir().join(format!("gpu-trace-{}.json", std::process::id()));
    prof.export_chrome_trace(&path).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["cat"] == "kernel" && e["name"] == "matmul")
    );
    assert!(events.iter().any(|e| e["args"]["name"] == "cuda:0 stream"));
    std::fs::remove_file(path).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn compiled_chains_fuse_into_one_generated_kernel_on_the_gpu() {
    let Some(device) = gpu() else { return };
    let run = |device: Device| {
        manual_seed(5);
        let mut lin = Linear::new(33, 65, true);
        lin.to_device(device).unwrap();
        let model = tapir::compile(SwishTanh(lin));
        let x = Tensor::from_vec(values(7 * 33, 3), &[7, 33])
            .to(device)
            .unwrap();
        model.forward(&x); // records
        let before = tapir::compile::fused_launches();
        let fallbacks = tapir::cuda::host_fallbacks();
        let y = model.forward(&x);
        y.square().sum().backward();
        let after = tapir::compile::fused_launches();
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (1, 1),
            "{device}: one fused kernel forward and one backward"
        );
        if device.is_cuda() {
            assert_eq!(
                tapir::cuda::host_fallbacks(),
                fallbacks,
                "ran on host copies"
            );
        }
        assert_eq!(model.explain().fused.len(), 1, "{:?}", model.explain());
        let w = model.model().0.weight.grad().unwrap();
        (y.to(Device::Cpu).unwrap(), w.to(Device::Cpu).unwrap())
    };
    let (gpu_y, gpu_w) = run(device);
    let (cpu_y, cpu_w) = run(Device::Cpu);
    close("fused forward", &gpu_y, &cpu_y, 1e-6, 1e-5).unwrap();
    close("fused backward (weight grad)", &gpu_w, &cpu_w, 1e-5, 1e-4).unwrap();
}
