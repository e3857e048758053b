//! What the training examples share: a progress bar, the per-epoch metrics
//! (printed, written as CSV, drawn as a PNG) and flag checks.
#![allow(dead_code)] // each example uses a different part

use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use std::path::Path;

/// One epoch's numbers.
#[derive(Clone, Debug)]
pub struct EpochMetrics {
    pub epoch: usize,
    pub train_loss: f64,
    pub val_loss: f64,
    pub val_acc: f64,
    pub lr: f64,
}

const CSV_HEADER: &str = "epoch,train_loss,val_loss,val_acc,lr";

pub fn to_csv(history: &[EpochMetrics]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for m in history {
        s.push_str(&format!(
            "{},{:.6},{:.6},{:.6},{:.6e}\n",
            m.epoch, m.train_loss, m.val_loss, m.val_acc, m.lr
        ));
    }
    s
}

/// Reads back what [`to_csv`] wrote (kept in checkpoints for `--resume`).
pub fn from_csv(text: &str) -> Vec<EpochMetrics> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let v: Vec<f64> = l.split(',').filter_map(|x| x.parse().ok()).collect();
            (v.len() == 5).then(|| EpochMetrics {
                epoch: v[0] as usize,
                train_loss: v[1],
                val_loss: v[2],
                val_acc: v[3],
                lr: v[4],
            })
        })
        .collect()
}

/// A bar over one epoch's batches showing the running loss and it/s.
pub fn epoch_bar(epoch: usize, epochs: usize, batches: usize) -> ProgressBar {
    let pb = ProgressBar::new(batches as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos}/{len} {msg} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_prefix(format!("epoch {epoch}/{epochs}"));
    pb
}

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The runs of consecutive finite points: a NaN or infinite value is a gap
/// in the curve, never a point at 0.
fn segments(points: impl Iterator<Item = (f64, f64)>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![vec![]];
    for (x, y) in points {
        if y.is_finite() && y > 0.0 {
            out.last_mut().expect("one run at least").push((x, y));
        } else if !out.last().expect("one run at least").is_empty() {
            out.push(vec![]);
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Draws the loss curves (log scale) and the validation accuracy (scaled to
/// its range) side by side as a PNG; epochs are whole numbers on both.
pub fn plot(history: &[EpochMetrics], path: &Path, title: &str) -> Result<(), String> {
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let err = |e: &dyn std::fmt::Display| format!("{}: cannot draw the plot: {e}", path.display());
    let root = BitMapBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(500);
    let n = history.len().max(2) as f64;
    let epoch_label = |x: &f64| format!("{x:.0}");
    let ticks = history.len().clamp(2, 10);
    let losses: Vec<f64> = history
        .iter()
        .flat_map(|m| [m.train_loss, m.val_loss])
        .filter(|l| l.is_finite() && *l > 0.0)
        .collect();
    let lo = losses
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .min(1.0);
    let hi = losses.iter().copied().fold(0.0f64, f64::max).max(lo * 10.0);
    let mut chart = ChartBuilder::on(&left)
        .caption(format!("{title}: loss"), ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(1.0..n, (lo * 0.8..hi * 1.25).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("cross entropy (log scale)")
        .x_labels(ticks)
        .x_label_formatter(&epoch_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (name, color, f) in [
        (
            "train",
            BLUE,
            (|m: &EpochMetrics| m.train_loss) as fn(&EpochMetrics) -> f64,
        ),
        ("validation", RED, |m: &EpochMetrics| m.val_loss),
    ] {
        for (k, seg) in segments(history.iter().map(|m| (m.epoch as f64, f(m))))
            .into_iter()
            .enumerate()
        {
            let drawn = chart
                .draw_series(LineSeries::new(seg, color.stroke_width(2)))
                .map_err(|e| err(&e))?;
            if k == 0 {
                drawn
                    .label(name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    let accs: Vec<f64> = history
        .iter()
        .map(|m| 100.0 * m.val_acc)
        .filter(|a| a.is_finite())
        .collect();
    let acc_lo = accs.iter().copied().fold(100.0f64, f64::min);
    let acc_lo = (acc_lo - (100.0 - acc_lo) * 0.2 - 0.5).floor().max(0.0);
    let mut acc = ChartBuilder::on(&right)
        .caption(format!("{title}: validation accuracy"), ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(1.0..n, acc_lo..100.0)
        .map_err(|e| err(&e))?;
    acc.configure_mesh()
        .x_desc("epoch")
        .y_desc("%")
        .x_labels(ticks)
        .x_label_formatter(&epoch_label)
        .draw()
        .map_err(|e| err(&e))?;
    for seg in segments(history.iter().map(|m| (m.epoch as f64, 100.0 * m.val_acc))) {
        acc.draw_series(LineSeries::new(seg, GREEN.stroke_width(2)))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// `println!` for a command-line tool: when stdout is closed (`| head -2`)
/// the program ends quietly instead of panicking on a broken pipe.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}
pub(crate) use say;

/// A finite number above zero, as a clap value parser (`--lr`).
pub fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive number")),
        Err(e) => Err(e.to_string()),
    }
}

/// Prints `program: message` and exits with status 2.
pub fn die(program: &str, msg: &str) -> ! {
    eprintln!("{program}: {msg}");
    std::process::exit(2)
}
