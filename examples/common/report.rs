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

/// Draws the loss curves and the validation accuracy side by side as a PNG.
pub fn plot(history: &[EpochMetrics], path: &Path, title: &str) -> Result<(), String> {
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let err = |e: &dyn std::fmt::Display| format!("{}: cannot draw the plot: {e}", path.display());
    let root = BitMapBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(500);
    let n = history.len().max(2) as f64;
    let max_loss = history
        .iter()
        .flat_map(|m| [m.train_loss, m.val_loss])
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let mut chart = ChartBuilder::on(&left)
        .caption(format!("{title}: loss"), ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(1.0..n, 0.0..max_loss * 1.05)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("cross entropy")
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
        chart
            .draw_series(LineSeries::new(
                history.iter().map(|m| (m.epoch as f64, f(m))),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    let mut acc = ChartBuilder::on(&right)
        .caption(format!("{title}: validation accuracy"), ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(1.0..n, 0.0..100.0)
        .map_err(|e| err(&e))?;
    acc.configure_mesh()
        .x_desc("epoch")
        .y_desc("%")
        .draw()
        .map_err(|e| err(&e))?;
    acc.draw_series(LineSeries::new(
        history.iter().map(|m| (m.epoch as f64, 100.0 * m.val_acc)),
        GREEN.stroke_width(2),
    ))
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

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
