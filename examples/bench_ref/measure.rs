//! Timing a step and the JSON line each variant prints (the fields of
//! PyTorch's side).

use std::time::Instant;
use tapir::prelude::*;

/// Resident memory when the process started, before any workload data
/// (PyTorch's side reports it after `import torch`, as `baseline_rss_mib`).
pub(crate) fn baseline_rss_mib() -> f64 {
    static AT_START: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *AT_START.get_or_init(|| proc_field("/proc/self/status", "VmRSS:").unwrap_or(0.0) / 1024.0)
}

pub(crate) fn proc_field(path: &str, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(path).ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU seconds of this process.
pub(crate) fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

pub(crate) struct Timing {
    pub total: f64,
    pub per_step: Vec<f64>,
    pub cpu: f64,
    pub device: Device,
    /// GPU kernels queued by the timed steps (`tapir::cuda::kernel_launches`).
    pub launches: u64,
}

/// Times `steps` calls after `warm` untimed ones; on a GPU each step ends
/// when the GPU has finished it (as `torch.cuda.synchronize()` in PyTorch's side).
/// `--profile`: the timed steps run under the profiler (set once in `main`).
pub(crate) static PROFILE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub(crate) fn time_loop(
    device: Device,
    mut step: impl FnMut(),
    warm: usize,
    steps: usize,
) -> Timing {
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
    let launches0 = tapir::cuda::kernel_launches();
    let mut per_step = Vec::with_capacity(steps);
    for _ in 0..steps {
        let s = Instant::now();
        step();
        sync();
        per_step.push(s.elapsed().as_secs_f64());
    }
    let total = t0.elapsed().as_secs_f64();
    let launches = tapir::cuda::kernel_launches() - launches0;
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
        launches,
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

pub(crate) fn record(
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
        fields.push(format!(
            "\"gpu_launches_per_step\": {:.1}",
            t.launches as f64 / steps.max(1) as f64
        ));
    }
    // Each variant runs in a child process of its own, so this peak is the
    // variant's (PyTorch's side: torch.cuda.max_memory_allocated()).
    if let Ok(peak) = tapir::cuda::max_memory_allocated(t.device) {
        fields.push(format!(
            "\"peak_gpu_mib\": {:.1}",
            peak as f64 / (1 << 20) as f64
        ));
    }
    fields.push(format!("\"tapir\": \"{}\"", env!("CARGO_PKG_VERSION")));
    format!("{{{}}}", fields.join(", "))
}
