//! The examples as a person runs them: every one answers `--help`, rejects
//! a bad flag or value with one line and exit status 2, and the main jobs
//! refuse what would lose work or never end. `cargo test` builds the
//! examples before it runs this; they are run from another folder, so the
//! shipped data must be found from the crate, not the working directory.

use std::path::PathBuf;
use std::process::{Command, Output};

const EXAMPLES: &[&str] = &[
    "train_digits",
    "finetune_digits",
    "train_shakespeare",
    "train_cnn",
    "train_char_lm",
    "seed_loop",
    "ddp_digits",
    "train_synthetic",
    "train_pinn",
    "bench_ref",
    "export_onnx",
    "bench_h2d",
];

/// The example binary `cargo test` built beside this test.
fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("own path");
    let dir = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds the examples (run the whole suite)",
        path.display()
    );
    path
}

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(example(name))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the example starts")
}

/// Runs an example that must refuse its input: exit status 2 (a usage
/// error, not a panic); returns what it said on stderr.
fn refused(name: &str, args: &[&str]) -> String {
    let o = run(name, args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
    err
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_example_answers_help_and_rejects_a_bad_flag_in_one_line() {
    for name in EXAMPLES {
        let help = run(name, &["--help"]);
        let out = text(&help.stdout);
        assert_eq!(help.status.code(), Some(0), "{name} --help: {out}");
        assert!(
            out.contains("Usage:") && out.contains("--help"),
            "{name} --help: {out}"
        );
        let bad = run(name, &["--no-such-flag"]);
        let err = text(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{name} --no-such-flag: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("unexpected argument '--no-such-flag'"),
            "{name}: {err}"
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn a_gpu_benchmark_without_a_gpu_says_so_in_one_line() {
    if tapir::cuda::is_available() {
        println!("SKIPPED: a GPU is present");
        return;
    }
    let err = refused("bench_h2d", &["--steps", "1"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("bench_h2d: device cuda:0 is unavailable"),
        "{err}"
    );
}

#[test]
fn bad_values_are_refused_before_any_work() {
    for (name, args, says) in [
        (
            "train_digits",
            &["--lr", "nan"][..],
            "not a positive number",
        ),
        ("train_digits", &["--lr=-1"][..], "not a positive number"),
        ("train_digits", &["--batch-size", "0"][..], "not in 1.."),
        ("train_digits", &["--device", "tpu"][..], "possible values"),
        (
            "train_digits",
            &["--cuda-graphs"][..],
            "--cuda-graphs needs --device cuda",
        ),
        (
            "train_shakespeare",
            &["--batch-size", "0"][..],
            "not in 1..",
        ),
        (
            "train_shakespeare",
            &["--lr", "-1"][..],
            "unexpected argument",
        ),
        ("finetune_digits", &["--epochs", "x"][..], "invalid digit"),
        (
            "train_pinn",
            &["--lr", "0"][..],
            "expected a positive number",
        ),
        ("train_pinn", &["--points", "1"][..], "not in 2..=100000"),
        (
            "bench_ref",
            &["--one", "ops.no_such_variant"][..],
            "--one ops.no_such_variant is not a workload.variant",
        ),
        (
            "bench_ref",
            &["--one", "ops"][..],
            "--one ops is not a workload.variant",
        ),
    ] {
        let err = refused(name, args);
        assert!(err.contains(says), "{name} {args:?}: {err}");
        assert!(!err.contains("panicked"), "{name} {args:?}: {err}");
    }
}

#[test]
fn train_pinn_learns_the_poisson_solution_through_second_derivatives() {
    let o = run("train_pinn", &["--steps", "500"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let errors: Vec<f64> = (out.lines())
        .filter_map(|l| l.split("max|u - sin(πx)|=").nth(1))
        .map(|e| e.trim().parse().expect("a number"))
        .collect();
    let (first, last) = (errors[0], errors[errors.len() - 1]);
    // From an untrained net (error ~1) to the exact solution within 0.5%.
    assert!(first > 0.3 && last < 5e-3, "{out}");
}

#[test]
fn ddp_digits_built_without_mpi_says_how_to_build_it() {
    let err = refused("ddp_digits", &[]);
    assert!(
        err.contains("built without MPI") && err.contains("--features distributed"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn train_digits_refuses_to_overwrite_an_earlier_run() {
    let dir = std::env::temp_dir().join(format!("tapir-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let best = dir.join("best.safetensors");
    std::fs::write(&best, b"an earlier run's checkpoint").unwrap();
    let err = refused(
        "train_digits",
        &["--out", dir.to_str().unwrap(), "--epochs", "1"],
    );
    assert!(
        err.contains("holds an earlier run") && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&best).unwrap(),
        b"an earlier run's checkpoint",
        "the earlier checkpoint is untouched"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn train_shakespeare_says_when_a_batch_is_larger_than_the_text() {
    let err = refused(
        "train_shakespeare",
        &["--batch-size", "14000", "--steps", "1"],
    );
    assert!(
        err.contains("--batch-size 14000 is larger than the"),
        "{err}"
    );
}

#[test]
fn train_digits_stops_when_the_loss_is_not_finite() {
    let dir = std::env::temp_dir().join(format!("tapir-nan-{}", std::process::id()));
    let err = refused(
        "train_digits",
        &[
            "--out",
            dir.to_str().unwrap(),
            "--epochs",
            "2",
            "--lr",
            "1e9",
        ],
    );
    assert!(
        err.contains("the training loss became NaN in epoch 1: lower --lr"),
        "{err}"
    );
    assert!(
        !dir.join("best.safetensors").exists(),
        "a non-finite model is never saved as best"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_checkpoint_stops_resume_and_says_whether_best_is_intact() {
    let dir = std::env::temp_dir().join(format!("tapir-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let first = run("train_digits", &["--out", out, "--epochs", "1"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let last = dir.join("last.safetensors");
    let mut bytes = std::fs::read(&last).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x10; // inside the last tensor's data
    std::fs::write(&last, bytes).unwrap();
    let err = refused("train_digits", &["--out", out, "--epochs", "2", "--resume"]);
    assert!(
        err.contains("cannot resume:") && err.contains("is damaged"),
        "{err}"
    );
    assert!(err.contains("best.safetensors is intact"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_refuses_other_settings_unless_allowed() {
    let dir = std::env::temp_dir().join(format!("tapir-settings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let first = run("train_digits", &["--out", out, "--epochs", "1"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let err = refused(
        "train_digits",
        &[
            "--out",
            out,
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--resume",
        ],
    );
    assert!(
        err.contains("--epochs 2 (the run used 1), --batch-size 32 (the run used 64)"),
        "{err}"
    );
    let o = run(
        "train_digits",
        &["--out", out, "--epochs", "2", "--resume", "--allow-changes"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("resumed from"),
        "{}",
        text(&o.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_digits_trains_in_mixed_precision_and_keeps_the_scaler() {
    let dir = std::env::temp_dir().join(format!("tapir-amp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let first = run(
        "train_digits",
        &["--out", out, "--epochs", "2", "--amp", "f16"],
    );
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let ck = tapir::Checkpoint::load(dir.join("last.safetensors")).unwrap();
    let scale = ck.grad_scaler.iter().find(|(k, _)| k == "scale");
    assert!(scale.is_some_and(|(_, v)| *v > 0.0), "{:?}", ck.grad_scaler);
    let err = refused(
        "train_digits",
        &["--out", out, "--epochs", "3", "--resume", "--amp", "bf16"],
    );
    assert!(err.contains("--amp bf16 (the run used f16)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The best validation accuracy a finished train_digits run printed.
fn best_accuracy(o: &Output) -> f64 {
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("best val acc"))
        .unwrap_or_else(|| panic!("no final line in:\n{out}"));
    let pct = line
        .split("best val acc ")
        .nth(1)
        .and_then(|r| r.split('%').next());
    pct.and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no accuracy in {line:?}"))
}

/// The main job under bf16 autocast reaches the accuracy it reaches in f32
/// (97.77% and 97.49% after 6 epochs here: one validation image apart).
#[test]
fn train_digits_in_bf16_reaches_the_f32_accuracy() {
    let dir = std::env::temp_dir().join(format!("tapir-bf16-acc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut best = vec![];
    for amp in [None, Some("bf16")] {
        let out = dir.join(amp.unwrap_or("f32"));
        let mut args = vec!["--out", out.to_str().unwrap(), "--epochs", "6"];
        args.extend(amp.iter().flat_map(|a| ["--amp", a]));
        let o = run("train_digits", &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        best.push(best_accuracy(&o));
    }
    let (f32_acc, bf16_acc) = (best[0], best[1]);
    assert!(f32_acc >= 95.0, "f32 reached only {f32_acc}%");
    assert!(
        bf16_acc >= f32_acc - 1.0,
        "bf16 reached {bf16_acc}% against {f32_acc}% in f32"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes an IDX file (big-endian dims, u8 data) as MNIST's are.
fn idx(path: &std::path::Path, dims: &[u32], data: &[u8]) {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

#[test]
fn bad_data_is_named_before_training() {
    let dir = std::env::temp_dir().join(format!("tapir-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let images: Vec<u8> = (0..20 * 64).map(|i| (i * 7 % 251) as u8).collect();
    let mut labels: Vec<u8> = (0..20).map(|i| i % 10).collect();
    let case = |imgs: &[u8], n: u32, labs: &[u8], says: &str| {
        idx(&dir.join("train-images-idx3-ubyte"), &[n, 8, 8], imgs);
        idx(&dir.join("train-labels-idx1-ubyte"), &[n], labs);
        let err = refused(
            "train_digits",
            &[
                "--data",
                dir.to_str().unwrap(),
                "--epochs",
                "1",
                "--overwrite",
                "--out",
                dir.join("run").to_str().unwrap(),
            ],
        );
        assert!(err.contains(says), "{err}");
    };
    labels[13] = 200;
    case(&images, 20, &labels, "label 200 (image 13) is not a class");
    labels[13] = 3;
    case(
        &images[..64],
        1,
        &labels[..1],
        "1 training images: at least 5 are needed",
    );
    case(
        &vec![7u8; 20 * 64],
        20,
        &labels,
        "every pixel of every training image has the same value",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_closed_stdout_ends_train_digits_quietly() {
    use std::io::Read;
    let dir = std::env::temp_dir().join(format!("tapir-pipe-{}", std::process::id()));
    let mut child = Command::new(example("train_digits"))
        .args(["--out", dir.to_str().unwrap(), "--epochs", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {}
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_out_that_is_a_file_is_named() {
    let file = std::env::temp_dir().join(format!("tapir-out-file-{}", std::process::id()));
    std::fs::write(&file, b"not a folder").unwrap();
    for name in ["train_digits", "train_shakespeare"] {
        let err = refused(name, &["--out", file.to_str().unwrap()]);
        assert!(
            err.contains("is a file; it names the folder for the run"),
            "{name}: {err}"
        );
    }
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn export_onnx_writes_the_trained_model_and_refuses_what_does_not_fit() {
    let dir = std::env::temp_dir().join(format!("tapir-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let first = run("train_digits", &["--out", out, "--epochs", "1"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let ckpt = dir.join("best.safetensors");
    let onnx = dir.join("digits.onnx");
    let (c, o) = (ckpt.to_str().unwrap(), onnx.to_str().unwrap());
    let done = run("export_onnx", &["--checkpoint", c, "--out", o]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    assert!(text(&done.stdout).contains("input `pixels` [B, 64]"));
    let m = tapir::onnx::read_model(&onnx).expect("a readable model");
    assert!(m.graph.unwrap().initializer.len() > 30);
    let err = refused("export_onnx", &["--checkpoint", c, "--out", o]);
    assert!(err.contains("exists; pass --overwrite"), "{err}");
    let err = refused("export_onnx", &["--checkpoint", o, "--out", "x.onnx"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_digits_profile_prints_the_table_and_writes_a_trace() {
    let dir = std::env::temp_dir().join(format!("tapir-profile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = run(
        "train_digits",
        &["--profile", "--out", dir.to_str().unwrap()],
    );
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for col in [
        "Name",
        "Self CPU %",
        "CPU Mem",
        "# of Calls",
        "linear",
        "AddmmBackward0",
    ] {
        assert!(stdout.contains(col), "no {col} in:\n{stdout}");
    }
    assert!(stdout.contains("Optimizer.step#AdamW.step"), "{stdout}");
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("trace.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(events.len() > 100);
    let waits = events
        .iter()
        .filter(|e| e["name"] == "enumerate(DataLoader)#next")
        .count();
    assert_eq!(waits, 5, "one DataLoader wait per profiled step");
    assert!(
        !dir.join("last.safetensors").exists(),
        "a profile writes no checkpoint"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_digits_profile_spans_epochs_shorter_than_the_profiled_steps() {
    // Batch 512: three steps per epoch, so the profile crosses epochs.
    let dir = std::env::temp_dir().join(format!("tapir-profile-512-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let o = run(
        "train_digits",
        &["--profile", "--batch-size", "512", "--out", out],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("profiled 5 steps"));
    assert!(dir.join("trace.json").exists());
    assert!(
        !dir.join("last.safetensors").exists(),
        "a profile writes no checkpoint"
    );
    let err = refused(
        "train_digits",
        &[
            "--profile",
            "--batch-size",
            "2000",
            "--epochs",
            "1",
            "--out",
            out,
        ],
    );
    assert!(
        err.contains("--profile needs at least 2 training steps"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
