//! `key_averages()`: events grouped by name (and input shapes), and the
//! table PyTorch prints for them.

use super::{ProfilerEvent, ProfilerOptions};
use std::collections::HashMap;
use std::fmt;

/// One row of `key_averages()`: every event of one name (and shapes).
#[derive(Clone, Debug)]
pub struct KeyAverage {
    /// The op, node or label.
    pub name: String,
    /// Input shapes (only when grouped by them).
    pub input_shapes: Vec<Vec<usize>>,
    /// How many times it ran.
    pub calls: usize,
    /// Summed time minus nested events, microseconds.
    pub self_cpu_us: f64,
    /// Summed wall time, microseconds.
    pub cpu_total_us: f64,
    /// Summed GPU time less nested ops', microseconds (with `cuda`).
    pub self_cuda_us: f64,
    /// Summed GPU time, microseconds (with `cuda`).
    pub cuda_total_us: f64,
    /// Summed CPU tensor bytes left allocated.
    pub cpu_memory: i64,
    /// The same less nested events.
    pub self_cpu_memory: i64,
}

impl KeyAverage {
    /// Mean wall time per call, microseconds.
    pub fn cpu_time_avg_us(&self) -> f64 {
        self.cpu_total_us / self.calls.max(1) as f64
    }
}

/// What to sort the table by (PyTorch's `sort_by` keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// `self_cpu_time_total`.
    SelfCpuTimeTotal,
    /// `cpu_time_total`.
    CpuTimeTotal,
    /// `count`.
    Count,
    /// `cpu_memory_usage`.
    CpuMemoryUsage,
    /// `self_cpu_memory_usage`.
    SelfCpuMemoryUsage,
}

/// The grouped rows, in first-seen order, and the profile's total self time.
#[derive(Clone, Debug)]
pub struct KeyAverages {
    rows: Vec<KeyAverage>,
    self_cpu_total_us: f64,
    self_cuda_total_us: f64,
    shapes: bool,
    memory: bool,
    cuda: bool,
}

impl KeyAverages {
    pub(super) fn new(events: &[ProfilerEvent], o: &ProfilerOptions, by_shape: bool) -> Self {
        let mut rows: Vec<KeyAverage> = Vec::new();
        let mut index: HashMap<(String, Vec<Vec<usize>>), usize> = HashMap::new();
        for e in events {
            let shapes = if by_shape {
                e.input_shapes.clone()
            } else {
                Vec::new()
            };
            let i = *index
                .entry((e.name.clone(), shapes.clone()))
                .or_insert_with(|| {
                    rows.push(KeyAverage {
                        name: e.name.clone(),
                        input_shapes: shapes,
                        calls: 0,
                        self_cpu_us: 0.0,
                        cpu_total_us: 0.0,
                        self_cuda_us: 0.0,
                        cuda_total_us: 0.0,
                        cpu_memory: 0,
                        self_cpu_memory: 0,
                    });
                    rows.len() - 1
                });
            let r = &mut rows[i];
            r.calls += 1;
            r.self_cpu_us += e.self_us;
            r.cpu_total_us += e.duration_us;
            r.self_cuda_us += e.self_cuda_us;
            r.cuda_total_us += e.cuda_us;
            r.cpu_memory += e.cpu_memory;
            r.self_cpu_memory += e.self_cpu_memory;
        }
        KeyAverages {
            self_cpu_total_us: events.iter().map(|e| e.self_us).sum(),
            self_cuda_total_us: events.iter().map(|e| e.self_cuda_us).sum(),
            rows,
            shapes: by_shape && o.record_shapes,
            memory: o.profile_memory,
            cuda: o.cuda,
        }
    }

    /// The rows, in the order their names first ran.
    pub fn rows(&self) -> &[KeyAverage] {
        &self.rows
    }

    /// The row of `name` (the first, when grouped by shapes).
    pub fn row(&self, name: &str) -> Option<&KeyAverage> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The sum of every event's self time, microseconds.
    pub fn self_cpu_time_total_us(&self) -> f64 {
        self.self_cpu_total_us
    }

    /// The table as PyTorch prints it, sorted descending by `sort_by`, with
    /// at most `row_limit` rows.
    pub fn table(&self, sort_by: SortBy, row_limit: usize) -> String {
        let mut rows: Vec<&KeyAverage> = self.rows.iter().collect();
        let key = |r: &KeyAverage| match sort_by {
            SortBy::SelfCpuTimeTotal => r.self_cpu_us,
            SortBy::CpuTimeTotal => r.cpu_total_us,
            SortBy::Count => r.calls as f64,
            SortBy::CpuMemoryUsage => r.cpu_memory as f64,
            SortBy::SelfCpuMemoryUsage => r.self_cpu_memory as f64,
        };
        rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
        rows.truncate(row_limit);
        let name_w = rows
            .iter()
            .map(|r| r.name.chars().count())
            .max()
            .unwrap_or(4)
            .clamp(4, 55);
        let mut head = vec![
            "Self CPU %",
            "Self CPU",
            "CPU total %",
            "CPU total",
            "CPU time avg",
        ];
        if self.cuda {
            head.extend(["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]);
        }
        if self.memory {
            head.extend(["CPU Mem", "Self CPU Mem"]);
        }
        head.push("# of Calls");
        let total = self.self_cpu_total_us.max(f64::MIN_POSITIVE);
        let mut lines = Vec::new();
        let mut line = format!("{:<name_w$}", "Name");
        head.iter().for_each(|h| line += &format!("  {h:>12}"));
        if self.shapes {
            line += "  Input Shapes";
        }
        let rule = "-".repeat(line.len());
        lines.extend([rule.clone(), line, rule.clone()]);
        for r in rows {
            let name: String = match r.name.chars().count() > name_w {
                true => r.name.chars().take(name_w - 3).collect::<String>() + "...",
                false => r.name.clone(),
            };
            let mut cells = vec![
                format!("{:.2}%", 100.0 * r.self_cpu_us / total),
                time(r.self_cpu_us),
                format!("{:.2}%", 100.0 * r.cpu_total_us / total),
                time(r.cpu_total_us),
                time(r.cpu_time_avg_us()),
            ];
            if self.cuda {
                let cuda_total = self.self_cuda_total_us.max(f64::MIN_POSITIVE);
                cells.extend([
                    time(r.self_cuda_us),
                    format!("{:.2}%", 100.0 * r.self_cuda_us / cuda_total),
                    time(r.cuda_total_us),
                    time(r.cuda_total_us / r.calls.max(1) as f64),
                ]);
            }
            if self.memory {
                cells.extend([bytes(r.cpu_memory), bytes(r.self_cpu_memory)]);
            }
            cells.push(r.calls.to_string());
            let mut line = format!("{name:<name_w$}");
            cells.iter().for_each(|c| line += &format!("  {c:>12}"));
            if self.shapes {
                line += &format!("  {:?}", r.input_shapes);
            }
            lines.push(line);
        }
        lines.push(rule);
        lines.push(format!(
            "Self CPU time total: {}",
            time(self.self_cpu_total_us)
        ));
        if self.cuda {
            lines.push(format!(
                "Self CUDA time total: {}",
                time(self.self_cuda_total_us)
            ));
        }
        lines.join("\n") + "\n"
    }
}

impl fmt::Display for KeyAverages {
    /// The table sorted by self CPU time, every row.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.table(SortBy::SelfCpuTimeTotal, usize::MAX))
    }
}

/// PyTorch's time format: `812.000us`, `1.234ms`, `2.500s`.
fn time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{us:.3}us")
    }
}

/// PyTorch's memory format: `512 b`, `4.00 Kb`, `-1.50 Mb`.
fn bytes(b: i64) -> String {
    let a = b.unsigned_abs() as f64;
    if a >= (1u64 << 30) as f64 {
        format!("{:.2} Gb", b as f64 / (1u64 << 30) as f64)
    } else if a >= (1 << 20) as f64 {
        format!("{:.2} Mb", b as f64 / (1 << 20) as f64)
    } else if a >= 1024.0 {
        format!("{:.2} Kb", b as f64 / 1024.0)
    } else {
        format!("{b} b")
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, time};

    #[test]
    fn formats_like_pytorch() {
        assert_eq!(time(812.0), "812.000us");
        assert_eq!(time(1234.0), "1.234ms");
        assert_eq!(time(2.5e6), "2.500s");
        assert_eq!(bytes(512), "512 b");
        assert_eq!(bytes(4096), "4.00 Kb");
        assert_eq!(bytes(-3 << 19), "-1.50 Mb");
    }
}
