//! Exports the digits model `train_digits` saved to ONNX (opset 17), with
//! a symbolic batch dim, for onnxruntime or any other ONNX runtime.
//!
//! ```sh
//! cargo run --release --example train_digits      # writes runs/digits/best.safetensors
//! cargo run --release --example export_onnx -- --checkpoint runs/digits/best.safetensors --out digits.onnx
//! ```

#[path = "common/report.rs"]
mod report;

use report::{die, say};
use std::path::PathBuf;
use tapir::Checkpoint;
use tapir::onnx::{self, ExportOptions};
use tapir::prelude::*;

include!("models/seed.rs");

/// Export the digits model (the seed MLP on 8x8 images) to ONNX.
#[derive(clap::Parser, Debug)]
#[command(name = "export_onnx", version)]
struct Args {
    /// The checkpoint `train_digits` wrote.
    #[arg(long, default_value = "runs/digits/best.safetensors")]
    checkpoint: PathBuf,
    /// The ONNX file to write.
    #[arg(long, default_value = "digits.onnx")]
    out: PathBuf,
    /// Replace OUT if it exists.
    #[arg(long)]
    overwrite: bool,
}

fn main() {
    use clap::Parser;
    let a = Args::parse();
    let name = "export_onnx";
    if a.out.exists() && !a.overwrite {
        die(
            name,
            &format!("{} exists; pass --overwrite to replace it", a.out.display()),
        );
    }
    let ck = Checkpoint::load(&a.checkpoint).unwrap_or_else(|e| {
        die(
            name,
            &format!("{e} (run `cargo run --release --example train_digits` first)"),
        )
    });
    let mut model = SeedMlp::<64, 10>::new(&Device::Cpu);
    if let Err(e) = model.load_state_dict(&ck.model, true) {
        die(
            name,
            &format!(
                "{}: not a checkpoint of the digits model: {e}",
                a.checkpoint.display()
            ),
        );
    }
    let options = ExportOptions {
        input_names: vec!["pixels".into()],
        output_names: vec!["logits".into()],
        ..Default::default()
    };
    let example = Tensor::zeros(&[1, 64]);
    if let Err(e) = onnx::export(&model, &[&example], &a.out, options) {
        die(name, &e.to_string());
    }
    let m = onnx::read_model(&a.out).unwrap_or_else(|e| die(name, &e.to_string()));
    let nodes = m.graph.map_or(0, |g| g.node.len());
    say!(
        "wrote {} (opset 17, {nodes} nodes, input `pixels` [B, 64], output `logits` [B, 10])",
        a.out.display()
    );
}
