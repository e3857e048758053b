//! Checkpoints as safetensors: state dicts with PyTorch's keys (so files move
//! between tapir and PyTorch both ways), and full training checkpoints
//! (model, optimizer, scheduler, epoch/step, RNG). Writes are atomic; a
//! corrupt, truncated or hostile file is an error, never a panic. Every file
//! tapir writes carries a CRC-32 of each tensor's bytes and of the metadata
//! (in the safetensors metadata, so the file stays one PyTorch loads), and
//! loading checks them: flipped bytes or a damaged header are an error
//! naming what is damaged.

use crate::nn::StateDict;
use crate::{DType, Error, Result, Tensor};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn to_safetensors_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    }
}

/// Little-endian bytes of a tensor's elements in row-major order (also
/// ONNX initializers' `raw_data`).
pub(crate) fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F16 => t
            .to_vec::<half::f16>()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::BF16 => t
            .to_vec::<half::bf16>()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::U8 => t.to_vec::<u8>(),
        DType::Bool => t.to_vec::<bool>().iter().map(|&b| u8::from(b)).collect(),
    }
}

fn tensor_from_view(name: &str, v: &TensorView) -> std::result::Result<Tensor, String> {
    let shape = v.shape().to_vec();
    let d = v.data();
    macro_rules! le {
        ($t:ty, $n:expr) => {
            Tensor::from_vec(
                d.chunks_exact($n)
                    .map(|b| <$t>::from_le_bytes(b.try_into().unwrap_or([0; $n])))
                    .collect::<Vec<$t>>(),
                &shape,
            )
        };
    }
    Ok(match v.dtype() {
        Dtype::F32 => le!(f32, 4),
        Dtype::F64 => le!(f64, 8),
        Dtype::F16 => le!(half::f16, 2),
        Dtype::BF16 => le!(half::bf16, 2),
        Dtype::I64 => le!(i64, 8),
        Dtype::I32 => Tensor::from_vec(
            d.chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)
                .collect(),
            &shape,
        ),
        Dtype::U8 => Tensor::from_vec(d.to_vec(), &shape),
        Dtype::BOOL => Tensor::from_vec(d.iter().map(|&b| b != 0).collect::<Vec<bool>>(), &shape),
        other => {
            return Err(format!(
                "tensor `{name}` has dtype {other:?}, which tapir does not load"
            ));
        }
    })
}

/// The metadata key holding the CRC-32 of tensor `name`'s bytes.
fn crc_key(name: &str) -> String {
    format!("crc32.{name}")
}

/// The metadata key holding the CRC-32 of all other metadata.
const META_CRC: &str = "crc32.__metadata__";

/// CRC-32 of the metadata as written (every key but `META_CRC`, sorted).
fn metadata_crc(meta: &BTreeMap<String, String>) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for (k, v) in meta.iter().filter(|(k, _)| *k != META_CRC) {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(v.as_bytes());
        h.update(&[0]);
    }
    h.finalize()
}

/// Removes temporary files an interrupted save of `path` left behind
/// (`.NAME.tmp-PID` of a process that no longer runs).
fn remove_stale_temporaries(dir: &Path, name: &str) {
    // Without /proc there is no telling whether the writer still runs.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        let Some(pid) = file.strip_prefix(&prefix) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|p| p == std::process::id() || Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, flushed to disk, then renamed over `path`. A crash leaves
/// either the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    remove_stale_temporaries(dir, &name);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is synced.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(path, e)
    })
}

/// Serialises named tensors (and string metadata) as safetensors bytes.
pub fn to_safetensors(
    tensors: &[(String, Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let bytes: Vec<(String, DType, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec(), tensor_bytes(t)))
        .collect();
    let mut views = vec![];
    for (n, d, s, b) in &bytes {
        let v = TensorView::new(to_safetensors_dtype(*d), s.clone(), b)
            .map_err(|e| Error::Format(format!("cannot write tensor `{n}`: {e}")))?;
        views.push((n.clone(), v));
    }
    let mut meta = metadata.clone();
    for (n, _, _, b) in &bytes {
        meta.insert(crc_key(n), format!("{:08x}", crc32fast::hash(b)));
    }
    meta.insert(META_CRC.into(), format!("{:08x}", metadata_crc(&meta)));
    let info: HashMap<String, String> = meta.into_iter().collect();
    safetensors::serialize(views, Some(info))
        .map_err(|e| Error::Format(format!("cannot serialise safetensors: {e}")))
}

/// Reads safetensors bytes: the tensors (sorted by name) and the metadata
/// (without tapir's checksums, which are checked when present: a file
/// PyTorch wrote has none).
pub fn from_safetensors(bytes: &[u8]) -> Result<(StateDict, BTreeMap<String, String>)> {
    from_safetensors_checked(bytes).map(|(sd, meta, _)| (sd, meta))
}

/// [`from_safetensors`], also saying whether the file carried checksums.
fn from_safetensors_checked(bytes: &[u8]) -> Result<(StateDict, BTreeMap<String, String>, bool)> {
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::Format(format!("not a valid safetensors file: {e}")))?;
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| Error::Format(format!("not a valid safetensors file: {e}")))?;
    let metadata: BTreeMap<String, String> = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    // Any checksum key means tapir wrote the file: then all must be there.
    let checked = metadata.keys().any(|k| k.starts_with("crc32."));
    if checked && metadata.get(META_CRC) != Some(&format!("{:08x}", metadata_crc(&metadata))) {
        return Err(Error::Format(
            "the metadata is damaged (its checksum does not match)".into(),
        ));
    }
    let mut out = vec![];
    for (name, view) in st.tensors() {
        if checked {
            let want = metadata.get(&crc_key(&name)).ok_or_else(|| {
                Error::Format(format!("tensor `{name}` has no checksum in the metadata"))
            })?;
            if *want != format!("{:08x}", crc32fast::hash(view.data())) {
                return Err(Error::Format(format!(
                    "tensor `{name}` is damaged (its checksum does not match)"
                )));
            }
        }
        let t = tensor_from_view(&name, &view).map_err(Error::Format)?;
        out.push((name, t));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let metadata = metadata
        .into_iter()
        .filter(|(k, _)| !k.starts_with("crc32."))
        .collect();
    Ok((out, metadata, checked))
}

/// Saves a state dict (`torch.save(model.state_dict(), path)` with
/// safetensors): atomically, with the keys as given.
///
/// ```
/// use tapir_runtime::nn::{Linear, Module};
/// let path = std::env::temp_dir().join("tapir_doc_linear.safetensors");
/// let a = Linear::new(3, 2, true);
/// tapir_runtime::save(&a.state_dict(), &path).unwrap();
/// let mut b = Linear::new(3, 2, true);
/// b.load_state_dict(&tapir_runtime::load(&path).unwrap(), true).unwrap();
/// assert_eq!(a.weight.to_vec::<f32>(), b.weight.to_vec::<f32>());
/// ```
pub fn save(state: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
    let bytes = to_safetensors(state, &BTreeMap::new())?;
    write_atomic(path.as_ref(), &bytes)
}

/// Loads a state dict written by [`save`] or by PyTorch's safetensors.
pub fn load(path: impl AsRef<Path>) -> Result<StateDict> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let (sd, _) =
        from_safetensors(&bytes).map_err(|e| Error::Format(format!("{}: {e}", path.display())))?;
    Ok(sd)
}

/// Everything needed to resume training exactly.
///
/// ```
/// use tapir_runtime::nn::{Linear, Module};
/// use tapir_runtime::optim::{AdamW, AdamWConfig, Optimizer};
/// use tapir_runtime::Checkpoint;
/// let model = Linear::new(4, 2, true);
/// let opt = AdamW::new(model.parameters(), AdamWConfig::default());
/// let path = std::env::temp_dir().join("tapir_doc_checkpoint.safetensors");
/// Checkpoint::new(model.state_dict(), opt.state_dict(), vec![], 3, 120).save(&path).unwrap();
/// let back = Checkpoint::load(&path).unwrap();
/// assert_eq!((back.epoch, back.step), (3, 120));
/// back.restore_rng(); // dropout and sampling continue where they left off
/// ```
#[derive(Clone, Default)]
pub struct Checkpoint {
    /// The model's `state_dict()`.
    pub model: StateDict,
    /// The optimizer's `state_dict()`.
    pub optimizer: StateDict,
    /// The scheduler's `state_dict()`.
    pub scheduler: Vec<(String, f64)>,
    /// Epochs completed.
    pub epoch: u64,
    /// Optimizer steps taken.
    pub step: u64,
    /// The default generator's state (dropout, random init).
    pub rng: [u64; 4],
    /// The device generator's `[seed, offset]` (draws made on a GPU).
    pub device_rng: [u64; 2],
    /// The `GradScaler`'s `state_dict()` when training with one (empty otherwise).
    pub grad_scaler: Vec<(String, f64)>,
    /// Anything else worth keeping (best accuracy, flags).
    pub extra: BTreeMap<String, String>,
}

const MODEL: &str = "model.";
/// The format written now: version 2 carries checksums, which loading
/// requires; version 1 files (without them) still load.
const FORMAT: &str = "tapir-checkpoint-2";
const OPTIM: &str = "optimizer.";

impl Checkpoint {
    /// Captures the default generator's state with the given parts.
    pub fn new(
        model: StateDict,
        optimizer: StateDict,
        scheduler: Vec<(String, f64)>,
        epoch: u64,
        step: u64,
    ) -> Checkpoint {
        Checkpoint {
            model,
            optimizer,
            scheduler,
            epoch,
            step,
            rng: crate::default_generator().get_state(),
            device_rng: crate::random::device_generator().get_state(),
            grad_scaler: vec![],
            extra: BTreeMap::new(),
        }
    }

    /// Writes the checkpoint atomically to one safetensors file: tensors under
    /// `model.` and `optimizer.`, the rest in the metadata.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut tensors: Vec<(String, Tensor)> = self
            .model
            .iter()
            .map(|(k, t)| (format!("{MODEL}{k}"), t.clone()))
            .collect();
        tensors.extend(
            self.optimizer
                .iter()
                .map(|(k, t)| (format!("{OPTIM}{k}"), t.clone())),
        );
        let mut meta = BTreeMap::new();
        meta.insert("format".into(), FORMAT.into());
        meta.insert("epoch".into(), self.epoch.to_string());
        meta.insert("step".into(), self.step.to_string());
        meta.insert(
            "rng".into(),
            self.rng
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        meta.insert(
            "device_rng".into(),
            format!("{},{}", self.device_rng[0], self.device_rng[1]),
        );
        // `{:?}` of an f64 round-trips exactly.
        let sched: Vec<String> = self
            .scheduler
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        meta.insert("scheduler".into(), sched.join(";"));
        if !self.grad_scaler.is_empty() {
            meta.insert("grad_scaler".into(), pairs(&self.grad_scaler));
        }
        for (k, v) in &self.extra {
            meta.insert(format!("extra.{k}"), v.clone());
        }
        write_atomic(path.as_ref(), &to_safetensors(&tensors, &meta)?)
    }

    /// Reads a checkpoint written by [`Checkpoint::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
        Checkpoint::from_bytes(&bytes)
            .map_err(|e| Error::Format(format!("{}: {e}", path.display())))
    }

    /// A checkpoint from the bytes of a checkpoint file (checked as `load` checks a file).
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint> {
        let (tensors, meta, checked) = from_safetensors_checked(bytes)?;
        let bad = |what: &str| Error::Format(format!("not a tapir checkpoint: {what}"));
        match meta.get("format").map(String::as_str) {
            Some(FORMAT) if !checked => return Err(bad("its checksums are missing")),
            Some(FORMAT) | Some("tapir-checkpoint-1") => {}
            _ => return Err(bad("the `format` metadata is missing")),
        }
        let num = |k: &str| -> Result<u64> {
            meta.get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(&format!("bad `{k}`")))
        };
        let rng: Vec<u64> = meta
            .get("rng")
            .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        let rng: [u64; 4] = rng.try_into().map_err(|_| bad("bad `rng`"))?;
        // Absent in checkpoints written before the device generator; present, it must parse.
        let device_rng: [u64; 2] = match meta.get("device_rng") {
            None => [0, 0],
            Some(s) => s
                .split(',')
                .map(|x| x.parse().ok())
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.try_into().ok())
                .ok_or_else(|| bad("bad `device_rng`"))?,
        };
        let mut scheduler = vec![];
        let sched = meta
            .get("scheduler")
            .ok_or_else(|| bad("the `scheduler` metadata is missing"))?;
        for part in sched.split(';').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| bad("bad `scheduler`"))?;
            scheduler.push((
                k.to_string(),
                v.parse().map_err(|_| bad("bad `scheduler`"))?,
            ));
        }
        // Absent when the run had no scaler; present, it must parse.
        let grad_scaler = match meta.get("grad_scaler") {
            None => vec![],
            Some(s) => parse_pairs(s).ok_or_else(|| bad("bad `grad_scaler`"))?,
        };
        let (mut model, mut optimizer) = (vec![], vec![]);
        for (k, t) in tensors {
            if let Some(n) = k.strip_prefix(MODEL) {
                model.push((n.to_string(), t));
            } else if let Some(n) = k.strip_prefix(OPTIM) {
                optimizer.push((n.to_string(), t));
            }
        }
        let extra = meta
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("extra.").map(|k| (k.to_string(), v.clone())))
            .collect();
        Ok(Checkpoint {
            model,
            optimizer,
            scheduler,
            epoch: num("epoch")?,
            step: num("step")?,
            rng,
            device_rng,
            grad_scaler,
            extra,
        })
    }

    /// Restores the default generator's and the device generator's state
    /// saved in the checkpoint.
    pub fn restore_rng(&self) {
        crate::default_generator().set_state(self.rng);
        crate::random::device_generator().set_state(self.device_rng);
    }
}

/// `k=v;k=v` with each f64 written by `{:?}`, which round-trips exactly.
fn pairs(kv: &[(String, f64)]) -> String {
    kv.iter()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// The inverse of [`pairs`]; `None` on a malformed part.
fn parse_pairs(s: &str) -> Option<Vec<(String, f64)>> {
    s.split(';')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}
