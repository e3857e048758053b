//! The profiler: exact op counts for a known model, nesting, backward and
//! optimizer attribution, memory, and a Chrome trace that parses.
//!
//! The profiler is process-wide, so these tests take turns.

use std::sync::Mutex;
use tapir::nn::cross_entropy;
use tapir::optim::{AdamW, AdamWConfig, Optimizer};
use tapir::prelude::*;
use tapir::profiler::{self, ProfilerEvent, ProfilerOptions, SortBy, record_function};

include!("../examples/models/seed.rs");

static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn count(events: &[ProfilerEvent], name: &str) -> usize {
    events.iter().filter(|e| e.name == name).count()
}

/// Every event on a thread lies inside the open event one level up.
fn assert_nested(events: &[ProfilerEvent]) {
    let mut threads: Vec<u64> = events.iter().map(|e| e.thread).collect();
    threads.dedup();
    for t in threads {
        let mut open: Vec<&ProfilerEvent> = Vec::new();
        for e in events.iter().filter(|e| e.thread == t) {
            while open
                .last()
                .is_some_and(|p| e.start_us >= p.start_us + p.duration_us)
            {
                open.pop();
            }
            assert_eq!(
                e.depth,
                open.len(),
                "{} at {} us is at depth {} but {} events enclose it",
                e.name,
                e.start_us,
                e.depth,
                open.len()
            );
            if let Some(p) = open.last() {
                // One microsecond of slack: both ends are rounded instants.
                assert!(
                    e.start_us + e.duration_us <= p.start_us + p.duration_us + 1.0,
                    "{} ends after its parent {}",
                    e.name,
                    p.name
                );
            }
            assert!(e.self_us <= e.duration_us + 1e-9, "{}", e.name);
            open.push(e);
        }
    }
}

#[test]
fn seed_mlp_step_counts_ops_backward_nodes_and_the_optimizer_exactly() {
    let _a = alone();
    manual_seed(0);
    let model = SeedMlp::<32, 10>::new(&Device::Cpu);
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    let x = Tensor::randn(&[16, 32]);
    let y = Tensor::randint(0, 10, &[16]);
    let gemms = profiler::matmul_launches();
    let prof = profiler::profile(ProfilerOptions::default(), || {
        let _step = record_function("train_step");
        let loss = cross_entropy(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        opt.zero_grad();
    });
    let ev = prof.events();
    // stem + 4 blocks x 2 + head: ten Linear layers, ten GEMMs forward.
    assert_eq!(count(ev, "linear"), 10);
    assert_eq!(count(ev, "layer_norm"), 4);
    assert_eq!(count(ev, "gelu"), 4);
    assert_eq!(count(ev, "cross_entropy"), 1);
    assert_eq!(count(ev, "nn.Module: stem"), 1);
    assert_eq!(count(ev, "nn.Module: block"), 4);
    assert_eq!(count(ev, "nn.Module: head"), 1);
    assert_eq!(count(ev, "Optimizer.step#AdamW.step"), 1);
    assert_eq!(count(ev, "train_step"), 1);
    // Forward 10 GEMMs; backward 10 weight grads and 9 input grads (the
    // stem's input needs none).
    assert_eq!(profiler::matmul_launches() - gemms, 29);
    // Every backward node that ran is attributed by its name.
    let table = prof.key_averages();
    assert_eq!(table.row("AddmmBackward0").map(|r| r.calls), Some(10));
    assert_eq!(
        table.row("NativeLayerNormBackward0").map(|r| r.calls),
        Some(4)
    );
    assert_nested(ev);
    // The root scope holds everything: its total is the sum of all self times.
    let root = ev.iter().find(|e| e.name == "train_step").unwrap();
    let self_sum: f64 = ev.iter().map(|e| e.self_us).sum();
    assert!((root.duration_us - self_sum).abs() <= 1e-6 * root.duration_us + 1.0);
    assert!((table.self_cpu_time_total_us() - self_sum).abs() < 1e-6);
    let text = table.table(SortBy::CpuTimeTotal, 5);
    assert!(text.contains("Self CPU %") && text.contains("# of Calls"));
    assert_eq!(
        text.lines().nth(3).unwrap().split_whitespace().next(),
        Some("train_step")
    );
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("Self CPU time total: ")
    );
}

#[test]
fn nothing_is_recorded_outside_a_profile_and_shapes_are_kept_when_asked() {
    let _a = alone();
    let a = Tensor::ones(&[3, 4]);
    let b = Tensor::ones(&[4, 5]);
    let _ = a.matmul(&b); // before: not recorded
    let prof = profiler::profile(
        ProfilerOptions {
            record_shapes: true,
            ..Default::default()
        },
        || {
            let _ = a.matmul(&b);
        },
    );
    let _ = a.matmul(&b); // after: not recorded
    let rows = prof.key_averages_by_input_shape();
    let mm = rows.row("matmul").unwrap();
    assert_eq!(mm.calls, 1);
    assert_eq!(mm.input_shapes, vec![vec![3, 4], vec![4, 5]]);
    assert!(rows.table(SortBy::Count, 10).contains("[[3, 4], [4, 5]]"));
}

#[test]
fn memory_is_attributed_to_the_op_that_keeps_it() {
    let _a = alone();
    let mut kept = None;
    let prof = profiler::profile(
        ProfilerOptions {
            profile_memory: true,
            ..Default::default()
        },
        || {
            let _outer = record_function("outer");
            kept = Some(Tensor::zeros(&[256, 1024])); // 1 MiB of f32, kept
            let _ = Tensor::ones(&[128, 1024]).sum(); // made and freed inside
        },
    );
    assert!(kept.is_some());
    let zeros = prof.events().iter().find(|e| e.name == "zeros").unwrap();
    assert_eq!(zeros.cpu_memory, 1 << 20);
    let outer = prof.events().iter().find(|e| e.name == "outer").unwrap();
    assert_eq!(
        outer.cpu_memory,
        1 << 20,
        "the kept 1 MiB; the rest was freed"
    );
    // Its children allocated the ones and the sum; it freed them itself.
    assert_eq!(outer.self_cpu_memory, -(512 * 1024 + 4));
    let table = prof.key_averages().table(SortBy::CpuMemoryUsage, 3);
    assert!(
        table.contains("CPU Mem") && table.contains("1.00 Mb"),
        "{table}"
    );
}

#[test]
fn chrome_trace_is_trace_event_json_whose_events_nest() {
    let _a = alone();
    let w = Tensor::randn(&[8, 8]).requires_grad_(true);
    let prof = profiler::profile(ProfilerOptions::default(), || {
        let _s = record_function("step");
        w.matmul(&w).tanh().sum().backward();
    });
    let dir = std::env::temp_dir().join(format!("tapir-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    prof.export_chrome_trace(&path).unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("valid JSON");
    let events = doc["traceEvents"].as_array().unwrap();
    let complete: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), prof.events().len());
    for e in &complete {
        for k in ["name", "cat", "ts", "dur", "pid", "tid", "args"] {
            assert!(e.get(k).is_some(), "event without {k}: {e}");
        }
    }
    let find = |n: &str| complete.iter().find(|e| e["name"] == n).unwrap();
    let (step, tanh) = (find("step"), find("TanhBackward0"));
    let (s0, s1) = (step["ts"].as_f64().unwrap(), step["dur"].as_f64().unwrap());
    let t0 = tanh["ts"].as_f64().unwrap();
    assert!(s0 <= t0 && t0 + tanh["dur"].as_f64().unwrap() <= s0 + s1 + 1.0);
    assert!(events.iter().any(|e| e["ph"] == "M"), "thread names");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_profiler_is_refused_while_one_runs() {
    let _a = alone();
    let p = profiler::Profiler::start(ProfilerOptions::default());
    let again = std::panic::catch_unwind(|| profiler::Profiler::start(ProfilerOptions::default()));
    let payload = again.err().unwrap();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(msg.contains("already running"), "{msg}");
    drop(p.stop());
}
