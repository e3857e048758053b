//! Checkpoints: safetensors round trips, strict and non-strict loading,
//! atomic saves (a writer killed mid-save), PyTorch interop both ways, and
//! corrupt or hostile files. Exact resume is in `tests/resume.rs`.

use std::path::{Path, PathBuf};
use tapir::nn::Module;
use tapir::prelude::*;
use tapir::{Checkpoint, checkpoint};

model! {
    /// The interop model (scripts/gen_interop.py defines the same in PyTorch).
    pub struct Tiny {
        fc1: Linear<8, 16>,
        bn: BatchNorm1d<16>,
        norm: LayerNorm<16>,
        fc2: Linear<16, 4>,
    }
    fn forward(&self, x: [B, 8]) -> [B, 4] {
        self.fc2(self.norm(self.bn(self.fc1(x))).relu())
    }
}

/// A file in this process's scratch folder (`sub` keeps tests apart).
fn scratch(name: &str) -> PathBuf {
    let (sub, name) = name.split_once('/').unwrap_or(("main", name));
    let dir = std::env::temp_dir()
        .join(format!("tapir-ckpt-{}", std::process::id()))
        .join(sub);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn every_dtype_round_trips() {
    let sd = vec![
        ("a.f32".to_string(), Tensor::randn(&[3, 2])),
        (
            "b.f64".to_string(),
            Tensor::randn(&[4]).to_dtype(DType::F64),
        ),
        (
            "c.f16".to_string(),
            Tensor::randn(&[2, 2]).to_dtype(DType::F16),
        ),
        (
            "d.bf16".to_string(),
            Tensor::randn(&[5]).to_dtype(DType::BF16),
        ),
        ("e.i64".to_string(), Tensor::arange(6).reshape(&[2, 3])),
        (
            "f.u8".to_string(),
            Tensor::from_vec(vec![0u8, 7, 255], &[3]),
        ),
        (
            "g.bool".to_string(),
            Tensor::from_vec(vec![true, false], &[2]),
        ),
        ("h.scalar".to_string(), Tensor::scalar(3i64)),
    ];
    let path = scratch("dtypes.safetensors");
    tapir::save(&sd, &path).unwrap();
    let back = tapir::load(&path).unwrap();
    assert_eq!(back.len(), sd.len());
    for ((k, a), (k2, b)) in sd.iter().zip(&back) {
        assert_eq!(k, k2);
        assert_eq!((a.dtype(), a.shape()), (b.dtype(), b.shape()), "{k}");
        assert_eq!(
            a.to_dtype(DType::F64).to_vec::<f64>(),
            b.to_dtype(DType::F64).to_vec::<f64>(),
            "{k}"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "a successful save leaves no temporary file"
    );
}

#[test]
fn strict_loading_reports_everything_and_non_strict_loads_what_matches() {
    let src = Tiny::new(&Device::Cpu);
    let mut sd = src.state_dict();
    sd.retain(|(k, _)| k != "fc2.bias");
    sd.push(("extra.weight".into(), Tensor::zeros(&[1])));
    for (k, t) in sd.iter_mut() {
        if k == "norm.weight" {
            *t = Tensor::zeros(&[3]);
        }
    }
    let path = scratch("partial.safetensors");
    tapir::save(&sd, &path).unwrap();
    let loaded = tapir::load(&path).unwrap();
    let mut dst = Tiny::new(&Device::Cpu);
    let before = dst.fc1.weight.to_vec::<f32>();
    let err = dst.load_state_dict(&loaded, true).unwrap_err().to_string();
    assert!(err.contains("missing keys: fc2.bias"), "{err}");
    assert!(err.contains("unexpected keys: extra.weight"), "{err}");
    assert!(
        err.contains("norm.weight: checkpoint [3] vs model [16]"),
        "{err}"
    );
    assert_eq!(
        dst.fc1.weight.to_vec::<f32>(),
        before,
        "strict loading loads nothing on error"
    );
    let report = dst.load_state_dict(&loaded, false).unwrap();
    assert_eq!(report.missing, ["fc2.bias"]);
    assert_eq!(report.unexpected, ["extra.weight"]);
    assert_eq!(
        dst.fc1.weight.to_vec::<f32>(),
        src.fc1.weight.to_vec::<f32>()
    );
}

/// A child process (spawned by the next test) that saves two alternating
/// 8 MB states to one path until it is killed.
#[test]
#[ignore]
fn atomic_writer_child() {
    let Ok(path) = std::env::var("TAPIR_ATOMIC_PATH") else {
        return;
    };
    let states: Vec<Vec<(String, Tensor)>> = [1.0f64, 2.0]
        .iter()
        .map(|v| vec![("w".to_string(), Tensor::full(&[2_000_000], *v))])
        .collect();
    for i in 0.. {
        tapir::save(&states[i % 2], &path).unwrap();
    }
}

#[test]
fn a_writer_killed_mid_save_leaves_a_whole_file() {
    let path = scratch("atomic/atomic.safetensors");
    tapir::save(&[("w".to_string(), Tensor::full(&[2_000_000], 1.0))], &path).unwrap();
    for round in 0..6 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "atomic_writer_child", "--ignored", "--nocapture"])
            .env("TAPIR_ATOMIC_PATH", &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(40 + 53 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let sd = tapir::load(&path).expect("the file is always a whole checkpoint");
        let v = sd[0].1.to_vec::<f32>();
        assert_eq!(v.len(), 2_000_000);
        assert!(v.iter().all(|x| *x == v[0]) && (v[0] == 1.0 || v[0] == 2.0));
    }
}

fn interop(name: &str) -> PathBuf {
    Path::new("tests/goldens/interop").join(name)
}

/// Writes the tapir-side fixture that scripts/gen_interop.py loads in PyTorch.
#[test]
#[ignore]
fn write_tapir_interop_fixture() {
    manual_seed(123);
    let m = Tiny::new(&Device::Cpu);
    tapir::save(&m.state_dict(), interop("tapir_tiny.safetensors")).unwrap();
}

#[test]
fn pytorch_state_dicts_load_and_give_pytorch_outputs() {
    let mut m = Tiny::new(&Device::Cpu);
    let report = m
        .load_state_dict(
            &tapir::load(interop("torch_tiny.safetensors")).unwrap(),
            true,
        )
        .unwrap();
    assert!(report.is_clean());
    m.eval();
    let io = tapir::load(interop("torch_tiny_io.safetensors")).unwrap();
    let get = |k: &str| io.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let y = m.forward(&get("input"));
    let want = get("output");
    let diff = (&y - &want).abs().max().item::<f32>();
    assert!(diff < 1e-5, "max |tapir - PyTorch| = {diff}");
    assert_eq!(
        m.bn.num_batches_tracked.as_ref().unwrap().item::<i64>(),
        3,
        "int64 buffers load too"
    );
}

#[test]
fn tapir_files_load_in_pytorch() {
    // PyTorch loaded tests/goldens/interop/tapir_tiny.safetensors (strictly)
    // and recorded its output on the same input.
    let mut m = Tiny::new(&Device::Cpu);
    m.load_state_dict(
        &tapir::load(interop("tapir_tiny.safetensors")).unwrap(),
        true,
    )
    .unwrap();
    m.eval();
    let io = tapir::load(interop("tapir_tiny_torch_output.safetensors")).unwrap();
    let get = |k: &str| io.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let diff = (&m.forward(&get("input")) - &get("output"))
        .abs()
        .max()
        .item::<f32>();
    assert!(diff < 1e-5, "max |tapir - PyTorch| = {diff}");
}

#[test]
fn corrupt_truncated_and_hostile_files_are_errors() {
    let m = Tiny::new(&Device::Cpu);
    let c = Checkpoint::new(
        m.state_dict(),
        vec![],
        vec![("last_epoch".into(), 3.0)],
        1,
        2,
    );
    let path = scratch("good.safetensors");
    c.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(Checkpoint::from_bytes(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(
            checkpoint::from_safetensors(&bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    // A flipped bit anywhere, header or tensor data, is an error (the
    // checksums cover every tensor and the metadata); never a panic.
    let g = Generator::new(1);
    let spots = Tensor::randint_with(0, bytes.len() as i64, &[3000], &g).to_vec::<i64>();
    for (i, &at) in spots.iter().enumerate() {
        let mut b = bytes.clone();
        b[at as usize] ^= 1 << (i % 8);
        assert!(
            Checkpoint::from_bytes(&b).is_err(),
            "bit {} of byte {at} flipped and the checkpoint still loaded",
            i % 8
        );
    }
    // A header length of 2^64 - 1, and a header whose tensor claims a huge shape.
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    assert!(checkpoint::from_safetensors(&huge).is_err());
    let header = br#"{"w":{"dtype":"F32","shape":[4294967295,4294967295],"data_offsets":[0,4]}}"#;
    let mut hostile = (header.len() as u64).to_le_bytes().to_vec();
    hostile.extend_from_slice(header);
    hostile.extend_from_slice(&[0; 4]);
    assert!(checkpoint::from_safetensors(&hostile).is_err());
    std::fs::write(&path, b"not a checkpoint").unwrap();
    let err = Checkpoint::load(&path).err().unwrap().to_string();
    assert!(err.contains("not a valid safetensors file"), "{err}");
    let missing = Checkpoint::load(scratch("nope.safetensors"))
        .err()
        .unwrap()
        .to_string();
    assert!(missing.contains("nope.safetensors: "), "{missing}");
}

/// The damage a checksum catches and a plain safetensors file would not: a
/// renamed metadata key (the run's history silently gone) and flipped bytes
/// inside a tensor. Each is an error naming what is damaged.
#[test]
fn damaged_checkpoints_are_errors_naming_the_damage() {
    let m = Tiny::new(&Device::Cpu);
    let mut c = Checkpoint::new(
        m.state_dict(),
        vec![],
        vec![("last_epoch".into(), 3.0)],
        1,
        2,
    );
    c.extra
        .insert("history".into(), "epoch,loss\n1,0.5\n".into());
    let path = scratch("damage.safetensors");
    c.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(13)
        .position(|w| w == b"extra.history")
        .expect("the key is in the header");
    let mut renamed = bytes.clone();
    renamed[at + 1] = b'X';
    let err = Checkpoint::from_bytes(&renamed).err().unwrap().to_string();
    assert!(err.contains("the metadata is damaged"), "{err}");
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    assert!(last > 8 + header, "the last byte is tensor data");
    let err = Checkpoint::from_bytes(&flipped).err().unwrap().to_string();
    assert!(
        err.contains("is damaged (its checksum does not match)"),
        "{err}"
    );
    assert!(err.starts_with("tensor `model."), "{err}");
    // A checkpoint with its required metadata missing is an error, not a default.
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("format".to_string(), "tapir-checkpoint-1".to_string());
    meta.insert("epoch".to_string(), "1".to_string());
    meta.insert("step".to_string(), "2".to_string());
    meta.insert("rng".to_string(), "1,2,3,4".to_string());
    let b = checkpoint::to_safetensors(&[], &meta).unwrap();
    let err = Checkpoint::from_bytes(&b).err().unwrap().to_string();
    assert!(err.contains("the `scheduler` metadata is missing"), "{err}");
    // A scaler's state, when there is one, comes back exactly; garbled, it is an error.
    meta.insert("scheduler".to_string(), String::new());
    meta.insert("grad_scaler".to_string(), "scale=oops".to_string());
    let b = checkpoint::to_safetensors(&[], &meta).unwrap();
    let err = Checkpoint::from_bytes(&b).err().unwrap().to_string();
    assert!(err.contains("bad `grad_scaler`"), "{err}");
    // Written before the device generator existed: its stream starts over.
    meta.remove("grad_scaler");
    let b = checkpoint::to_safetensors(&[], &meta).unwrap();
    assert_eq!(Checkpoint::from_bytes(&b).unwrap().device_rng, [0, 0]);
    meta.insert("device_rng".to_string(), "5".to_string());
    let b = checkpoint::to_safetensors(&[], &meta).unwrap();
    let err = Checkpoint::from_bytes(&b).err().unwrap().to_string();
    assert!(err.contains("bad `device_rng`"), "{err}");
}

/// The device generator's seed and offset travel with the checkpoint, so
/// dropout on a GPU resumes where it left off.
#[test]
fn checkpoints_keep_the_device_generator() {
    let mut c = Checkpoint::new(vec![], vec![], vec![], 1, 2);
    c.device_rng = [0xdead_beef_0000_0001, 12_345_678_901];
    let path = scratch("device_rng/last.safetensors");
    c.save(&path).unwrap();
    assert_eq!(Checkpoint::load(&path).unwrap().device_rng, c.device_rng);
}

#[test]
fn checkpoints_keep_the_grad_scaler() {
    let mut scaler = tapir::amp::GradScaler::new(tapir::amp::GradScalerConfig {
        init_scale: 512.0,
        growth_interval: 7,
        ..Default::default()
    });
    let mut c = Checkpoint::new(vec![], vec![], vec![], 1, 2);
    c.grad_scaler = scaler.state_dict();
    let path = scratch("scaler/last.safetensors");
    c.save(&path).unwrap();
    let back = Checkpoint::load(&path).unwrap();
    assert_eq!(back.grad_scaler, c.grad_scaler);
    scaler.load_state_dict(&back.grad_scaler).unwrap();
    assert_eq!(scaler.get_scale(), 512.0);
    let plain = Checkpoint::new(vec![], vec![], vec![], 1, 2);
    plain.save(&path).unwrap();
    assert!(Checkpoint::load(&path).unwrap().grad_scaler.is_empty());
}

/// An interrupted save leaves `.NAME.tmp-PID`; the next save of that path
/// removes it once its process is gone.
#[test]
fn stale_temporary_files_are_removed_by_the_next_save() {
    let path = scratch("stale/model.safetensors");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // No process has pid 4000000000 (above any Linux pid_max).
    let stale = path
        .parent()
        .unwrap()
        .join(".model.safetensors.tmp-4000000000");
    std::fs::write(&stale, b"half a checkpoint").unwrap();
    tapir::save(&[("w".to_string(), Tensor::ones(&[2]))], &path).unwrap();
    assert!(!stale.exists(), "the stale temporary is gone");
    assert_eq!(
        tapir::load(&path).unwrap()[0].1.to_vec::<f32>(),
        vec![1.0, 1.0]
    );
}
