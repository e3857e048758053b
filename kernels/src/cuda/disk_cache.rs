//! Compiled kernels kept on disk between runs, so a program starts without
//! recompiling every module with NVRTC (seconds per run otherwise), as
//! PyTorch keeps its NVRTC-compiled kernels under `~/.cache/torch`.
//!
//! One file per (source, architecture, options, NVRTC version), named by a
//! hash of them, so a changed kernel or compiler never meets a stale file.
//! Files are written atomically (a temporary file, then a rename) and carry
//! a checksum. A file that is missing, truncated or corrupt is ignored and
//! rewritten: it is a cache, never a source of truth. `TAPIR_CACHE_DIR` moves it (default
//! `$XDG_CACHE_HOME/tapir` or `~/.cache/tapir`); `TAPIR_CACHE_DIR=` (empty)
//! turns it off.

use super::nvrtc::Compiled;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TAPIRK01";

/// The kernel cache folder, if there is one to use (none in this crate's
/// unit tests, which must not write to the home folder).
pub fn dir() -> Option<PathBuf> {
    if cfg!(test) {
        return None;
    }
    let base = match std::env::var_os("TAPIR_CACHE_DIR") {
        Some(d) if d.is_empty() => return None,
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join("tapir"),
            _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache/tapir"),
        },
    };
    Some(base.join("kernels"))
}

/// The file name for one compilation: 64-bit FNV-1a over everything that
/// decides its output (stable across runs and Rust versions).
pub fn file_name(module: &str, arch: &str, key_parts: &[&str]) -> String {
    let parts = [module, arch].into_iter().chain(key_parts.iter().copied());
    // 0xff never occurs in UTF-8, so it separates the parts unambiguously.
    let h = fnv1a(parts.flat_map(|p| p.bytes().chain([0xff])));
    format!("{module}-{arch}-{h:016x}.bin")
}

fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The compilation stored at `path`, or `None` if it is absent or unreadable.
pub fn load(path: &Path) -> Option<Compiled> {
    let bytes = std::fs::read(path).ok()?;
    // The content, then its checksum: damage anywhere is caught here.
    let (content, sum) = bytes.split_last_chunk::<8>()?;
    if fnv1a(content.iter().copied()) != u64::from_le_bytes(*sum) {
        return None;
    }
    let rest = content.strip_prefix(MAGIC.as_slice())?;
    let (ptx, rest) = take(rest)?;
    let (cubin, rest) = take(rest)?;
    if !rest.is_empty() || cubin.is_empty() {
        return None;
    }
    Some(Compiled {
        ptx: String::from_utf8(ptx.to_vec()).ok()?,
        cubin: Some(cubin.to_vec()),
    })
}

/// A length-prefixed field (little-endian u64), bounds-checked.
fn take(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = b.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

/// Stores a compilation at `path` atomically; failures are ignored (the
/// next run compiles again).
pub fn store(path: &Path, c: &Compiled) {
    let Some(cubin) = &c.cubin else { return };
    let Some(folder) = path.parent() else { return };
    let mut bytes = Vec::with_capacity(24 + c.ptx.len() + cubin.len());
    bytes.extend_from_slice(MAGIC);
    for field in [c.ptx.as_bytes(), cubin.as_slice()] {
        bytes.extend_from_slice(&(field.len() as u64).to_le_bytes());
        bytes.extend_from_slice(field);
    }
    let sum = fnv1a(bytes.iter().copied());
    bytes.extend_from_slice(&sum.to_le_bytes());
    let tmp = folder.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kernel"),
        std::process::id()
    ));
    let written = std::fs::create_dir_all(folder)
        .and_then(|()| std::fs::write(&tmp, &bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_compilation_loads_back_and_damage_is_ignored() {
        let folder = std::env::temp_dir().join(format!("tapir-kcache-{}", std::process::id()));
        let path = folder.join(file_name("m", "sm_90", &["src", "13.5"]));
        let c = Compiled {
            ptx: ".entry k(".into(),
            cubin: Some(b"\x7fELF machine code".to_vec()),
        };
        assert!(load(&path).is_none(), "nothing stored yet");
        store(&path, &c);
        let back = load(&path).expect("stored");
        assert_eq!(
            (back.ptx.as_str(), back.cubin.as_deref()),
            (c.ptx.as_str(), c.cubin.as_deref())
        );
        // Truncated anywhere, or with a length pointing past the end: ignored.
        let bytes = std::fs::read(&path).unwrap();
        for cut in [0, 5, 8, 12, 16, 20, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(load(&path).is_none(), "truncated at {cut}");
        }
        let mut huge = bytes.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&path, &huge).unwrap();
        assert!(load(&path).is_none(), "length past the end");
        let mut flipped = bytes.clone();
        flipped[30] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(load(&path).is_none(), "a flipped bit");
        std::fs::write(&path, &bytes).unwrap();
        assert!(load(&path).is_some(), "the intact file still loads");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn file_names_change_with_every_part_of_the_key() {
        let a = file_name("copy", "sm_90", &["src", "13.5", "--std=c++17"]);
        assert!(a.starts_with("copy-sm_90-") && a.ends_with(".bin"), "{a}");
        assert_eq!(
            a,
            file_name("copy", "sm_90", &["src", "13.5", "--std=c++17"])
        );
        for other in [
            file_name("copy", "sm_80", &["src", "13.5", "--std=c++17"]),
            file_name("copy", "sm_90", &["src2", "13.5", "--std=c++17"]),
            file_name("copy", "sm_90", &["src", "13.0", "--std=c++17"]),
            file_name("copy", "sm_90", &["sr", "c13.5", "--std=c++17"]),
        ] {
            assert_ne!(a, other);
        }
    }
}
