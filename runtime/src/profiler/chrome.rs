//! Chrome trace-event JSON: one complete (`"ph": "X"`) event per recorded
//! interval, on its thread's track.

use super::ProfilerEvent;
use crate::{Error, Result};
use serde_json::{Value, json};
use std::path::Path;

/// Track numbers of the GPU tracks (one per device), apart from threads'.
const GPU_TRACK: u64 = 1 << 20;

/// The trace document for `events`.
pub(super) fn document(events: &[ProfilerEvent]) -> Value {
    let pid = std::process::id();
    let mut out: Vec<Value> = events
        .iter()
        .map(|e| {
            let mut args = serde_json::Map::new();
            if !e.input_shapes.is_empty() {
                args.insert("Input Dims".into(), json!(e.input_shapes));
            }
            if e.cpu_memory != 0 {
                args.insert("CPU Mem".into(), json!(e.cpu_memory));
            }
            json!({
                "name": e.name,
                "cat": e.category,
                "ph": "X",
                "ts": e.start_us,
                "dur": e.duration_us,
                "pid": pid,
                "tid": e.thread,
                "args": args,
            })
        })
        .collect();
    // The GPU side of each op on its device's track.
    let mut devices: Vec<usize> = Vec::new();
    for e in events {
        if let Some((ts, device)) = e.cuda_start {
            devices.push(device);
            out.push(json!({
                "name": e.name, "cat": "kernel", "ph": "X", "ts": ts, "dur": e.cuda_us,
                "pid": pid, "tid": GPU_TRACK + device as u64, "args": {"device": device},
            }));
        }
    }
    devices.sort_unstable();
    devices.dedup();
    for d in devices {
        out.push(json!({
            "name": "thread_name", "ph": "M", "pid": pid, "tid": GPU_TRACK + d as u64,
            "args": {"name": format!("cuda:{d} stream")},
        }));
    }
    let mut threads: Vec<u64> = events.iter().map(|e| e.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    for t in threads {
        out.push(json!({
            "name": "thread_name", "ph": "M", "pid": pid, "tid": t,
            "args": {"name": format!("tapir thread {t}")},
        }));
    }
    json!({ "traceEvents": out, "displayTimeUnit": "ms" })
}

/// Writes the trace to a temporary file beside `path`, then renames it.
pub(super) fn write(events: &[ProfilerEvent], path: &Path) -> Result<()> {
    let text = serde_json::to_vec(&document(events)).map_err(std::io::Error::other);
    let tmp = path.with_extension("json.tmp");
    text.and_then(|t| std::fs::write(&tmp, t))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            Error::Io {
                path: path.display().to_string(),
                source,
            }
        })
}
