//! Runs the CUDA kernels on the CPU, for tests on machines without a GPU.
//!
//! A module's source (the text NVRTC compiles, `modules.rs`) is compiled
//! with the system C++ compiler after `emu.h`, which turns each CUDA thread
//! into a fiber that yields at barriers and shuffles, and before
//! `harness.cpp`, a program that runs a [`Job`]'s launches over its buffers.
//! It is built with AddressSanitizer and UBSan: an out-of-bounds read or
//! write of global or dynamic shared memory stops the run. Each job runs
//! twice, the blocks and a block's threads in increasing and then
//! decreasing order; the two must agree bit for bit, or the kernel races
//! (within a block, or two blocks writing one element).
//!
//! What this checks that the CPU twins and NVRTC cannot: the kernels' index
//! arithmetic, shared-memory sizes and layout, barriers and warp exchanges,
//! against the launch shapes the launchers use. What it cannot: timing, the
//! driver, memory ordering between blocks (they run one after another),
//! and the GPU's own float arithmetic (`expf` here is the C library's).
//!
//! The compiled harness is cached per source hash under the system's
//! temporary directory. `TAPIR_EMULATOR_CXX` names the compiler (`c++` by
//! default; Debian's `g++` package).

mod attention;
mod conv;
mod elementwise;
mod index;
mod movement;
mod optim;
mod program;
mod random;
mod rows;

use super::modules::{Module, modules};
use cudarc::driver::LaunchConfig;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

const EMU_H: &str = include_str!("emu.h");
const HARNESS: &str = include_str!("harness.cpp");

/// A kernel argument: bytes passed by value, a job buffer (by index, from a
/// byte offset) passed as a pointer, a null pointer, or a struct by value
/// holding buffer addresses (`(byte position, buffer)` pairs the harness
/// fills in).
#[derive(Clone)]
pub(crate) enum Arg {
    Value(Vec<u8>),
    Buffer(usize, u64),
    Null,
    Addresses(Vec<u8>, Vec<(usize, usize)>),
}

/// Values a kernel takes as arguments, as their little-endian bytes.
pub(crate) trait Value {
    fn arg(&self) -> Arg;
}

macro_rules! value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn arg(&self) -> Arg {
                Arg::Value(self.to_le_bytes().to_vec())
            }
        }
    )*};
}
value!(usize, u64, i64, u32, i32, f32, f64);

/// Buffers and the launches to run over them, in order.
#[derive(Default)]
pub(crate) struct Job {
    buffers: Vec<Vec<u8>>,
    /// The launches, encoded as the harness reads them.
    launches: Vec<u8>,
    count: u32,
}

impl Job {
    /// Adds a buffer with these bytes; the result is its index.
    pub(crate) fn buffer(&mut self, bytes: Vec<u8>) -> usize {
        self.buffers.push(bytes);
        self.buffers.len() - 1
    }

    /// Adds `n` elements of `width` bytes, all ones: a NaN in every float
    /// type, so an element a kernel should write and does not shows.
    pub(crate) fn output(&mut self, n: usize, width: usize) -> usize {
        self.buffer(vec![0xff; n * width])
    }

    /// Adds a launch of kernel `name`.
    pub(crate) fn launch(&mut self, name: &str, cfg: LaunchConfig, args: &[Arg]) {
        self.count += 1;
        let out = &mut self.launches;
        let u32s = |out: &mut Vec<u8>, xs: &[u32]| {
            xs.iter().for_each(|x| out.extend(x.to_le_bytes()));
        };
        u32s(out, &[name.len() as u32]);
        out.extend(name.as_bytes());
        let (g, b) = (cfg.grid_dim, cfg.block_dim);
        u32s(out, &[g.0, g.1, g.2, b.0, b.1, b.2, cfg.shared_mem_bytes]);
        u32s(out, &[args.len() as u32]);
        for a in args {
            match a {
                Arg::Value(bytes) => {
                    out.push(0);
                    u32s(out, &[bytes.len() as u32]);
                    out.extend(bytes);
                }
                Arg::Buffer(index, offset) => {
                    out.push(1);
                    u32s(out, &[*index as u32]);
                    out.extend(offset.to_le_bytes());
                }
                Arg::Null => out.push(2),
                Arg::Addresses(bytes, patches) => {
                    out.push(3);
                    u32s(out, &[bytes.len() as u32]);
                    out.extend(bytes);
                    u32s(out, &[patches.len() as u32]);
                    for &(at, buffer) in patches {
                        u32s(out, &[at as u32, buffer as u32]);
                    }
                }
            }
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = (self.buffers.len() as u32).to_le_bytes().to_vec();
        for b in &self.buffers {
            out.extend((b.len() as u64).to_le_bytes());
            out.extend(b);
        }
        out.extend(self.count.to_le_bytes());
        out.extend(&self.launches);
        out
    }
}

/// A module's kernels, compiled for the CPU.
pub(crate) struct Emulator {
    exe: PathBuf,
}

/// `extern __shared__ T name[];` (dynamic shared memory) as a pointer to
/// the emulator's block of the launch's size.
fn dynamic_shared(source: &str) -> String {
    const EXTERN: &str = "extern __shared__ ";
    let mut out = String::new();
    let mut rest = source;
    while let Some(at) = rest.find(EXTERN) {
        out.push_str(&rest[..at]);
        let decl = &rest[at + EXTERN.len()..];
        let end = decl
            .find("[];")
            .expect("extern __shared__ arrays end in `[];`");
        let (ty, name) = decl[..end].rsplit_once(' ').expect("a type and a name");
        out.push_str(&format!("{ty} *{name} = ({ty} *)emu::dynamic_shared();"));
        rest = &decl[end + 3..];
    }
    out.push_str(rest);
    out
}

/// The whole program for `module`: emulation header, kernels, the table of
/// kernels by name, harness.
fn program(module: &Module) -> String {
    let table: String = module
        .kernels
        .iter()
        .map(|k| {
            format!(
                "    {{\"{k}\", [](void **a) {{ emu::invoke(&{k}, a); }}, \
                 [] {{ return emu::params_of(&{k}); }}}},\n"
            )
        })
        .collect();
    format!(
        "{EMU_H}\n{}\nnamespace emu {{\nconst Kernel kernels[] = {{\n{table}}};\n}}\n{HARNESS}",
        dynamic_shared(&module.full_source())
    )
}

impl Emulator {
    /// Module `name` compiled for the emulator (cached), or why it could not be.
    pub(crate) fn module(name: &str) -> Result<Emulator, String> {
        let module = modules()
            .into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("no CUDA module named {name}"))?;
        Self::build(&module)
    }

    /// `module` compiled for the emulator (cached by its source's hash).
    pub(crate) fn build(module: &Module) -> Result<Emulator, String> {
        let source = program(module);
        let mut h = std::hash::DefaultHasher::new();
        source.hash(&mut h);
        let dir = std::env::temp_dir().join("tapir-cuda-emulator");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let exe = dir.join(format!("{}-{:016x}", module.name, h.finish()));
        if exe.exists() {
            return Ok(Emulator { exe });
        }
        // Built under a name of this process's, then renamed: tests that
        // build the same module at once never see half a file.
        let tmp = dir.join(format!("{}-{}.tmp", module.name, std::process::id()));
        let src = tmp.with_extension("cpp");
        std::fs::write(&src, &source).map_err(|e| format!("{}: {e}", src.display()))?;
        let cxx = std::env::var("TAPIR_EMULATOR_CXX").unwrap_or_else(|_| "c++".into());
        let out = Command::new(&cxx)
            .args(["-std=c++17", "-O1", "-g", "-w", "-fno-omit-frame-pointer"])
            .args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"])
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            .output()
            .map_err(|e| format!("the C++ compiler `{cxx}` did not run ({e}); install g++"))?;
        if !out.status.success() {
            return Err(format!(
                "{cxx} failed on module {} ({}):\n{}",
                module.name,
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::fs::rename(&tmp, &exe).map_err(|e| format!("{}: {e}", exe.display()))?;
        let _ = std::fs::remove_file(&src);
        remove_older_builds(&dir, module.name, &exe);
        Ok(Emulator { exe })
    }

    /// Runs `job`'s launches, blocks and threads in increasing then
    /// decreasing order: the buffers after them, or what went wrong (a
    /// sanitizer report, a deadlock, an argument the kernel does not take,
    /// a race).
    pub(crate) fn run(&self, job: &Job) -> Result<Vec<Vec<u8>>, String> {
        let dir = std::env::temp_dir().join("tapir-cuda-emulator");
        let stem = format!(
            "job-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        );
        let stem: String = stem
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-')
            .collect();
        let input = dir.join(format!("{stem}.in"));
        std::fs::write(&input, job.encode()).map_err(|e| format!("{}: {e}", input.display()))?;
        let results = self.run_both_orders(&input, &dir, &stem);
        let _ = std::fs::remove_file(&input);
        let results = results?;
        if results[0] != results[1] {
            return Err("the buffers differ between thread orders: the kernels race".into());
        }
        let mut at = 0;
        Ok(job
            .buffers
            .iter()
            .map(|b| {
                at += b.len();
                results[0][at - b.len()..at].to_vec()
            })
            .collect())
    }

    fn run_both_orders(
        &self,
        input: &std::path::Path,
        dir: &std::path::Path,
        stem: &str,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut results = Vec::new();
        for order in ["forward", "reverse"] {
            let output = dir.join(format!("{stem}.{order}"));
            let out = Command::new(&self.exe)
                .arg(input)
                .arg(&output)
                .arg(order)
                .env("ASAN_OPTIONS", "detect_leaks=0")
                .output()
                .map_err(|e| format!("{}: {e}", self.exe.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "the emulated kernels failed ({order} thread order): {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let bytes = std::fs::read(&output).map_err(|e| format!("{}: {e}", output.display()))?;
            let _ = std::fs::remove_file(&output);
            results.push(bytes);
        }
        Ok(results)
    }
}

/// Removes the builds of module `name` from other versions of its source
/// (a few MB each) made over a day ago, keeping `keep` (a newer one may
/// belong to another checkout's tests running now).
fn remove_older_builds(dir: &std::path::Path, name: &str, keep: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let file = e.file_name().to_string_lossy().into_owned();
        let hash = file.strip_prefix(name).and_then(|r| r.strip_prefix('-'));
        let is_build =
            hash.is_some_and(|h| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()));
        let day_old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|a| a.as_secs() > 24 * 3600));
        if is_build && day_old && path != keep {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// f32 values as bytes of `dtype` (`f32`, `f16`, `bf16`).
pub(crate) fn bytes_as(x: &[f32], dtype: &str) -> Vec<u8> {
    match dtype {
        "f32" => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        "f16" => x
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect(),
        "bf16" => x
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect(),
        other => panic!("no emulator conversion for {other}"),
    }
}

/// Bytes of `dtype` as f32 values.
pub(crate) fn floats_from(b: &[u8], dtype: &str) -> Vec<f32> {
    match dtype {
        "f32" => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        "f16" => b
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        "bf16" => b
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => panic!("no emulator conversion for {other}"),
    }
}

#[test]
fn the_emulator_reports_a_race_a_deadlock_and_an_overrun() {
    let module = |source: &str, kernel: &str| Module {
        name: "emulator_self_test",
        source: std::borrow::Cow::Owned(source.to_string()),
        kernels: vec![kernel.to_string()],
    };
    let one_block = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (64, 1, 1),
        shared_mem_bytes: 64 * 4,
    };
    let run = |source: &str| {
        let emu = Emulator::build(&module(source, "k")).unwrap();
        let mut job = Job::default();
        let y = job.output(64, 4);
        job.launch("k", one_block, &[Arg::Buffer(y, 0)]);
        emu.run(&job)
    };
    // Correct: a block-wide reversal through shared memory, with a barrier.
    let good = r#"extern "C" __global__ void k(float *y) {
        extern __shared__ float s[];
        s[threadIdx.x] = threadIdx.x;
        __syncthreads();
        float v = s[63 - threadIdx.x];
        y[threadIdx.x] = v + __shfl_xor_sync(0xffffffffu, v, 1);
    }"#;
    let out = floats_from(&run(good).unwrap()[0], "f32");
    let want: Vec<f32> = (0..64)
        .map(|t| (63 - t) as f32 + (63 - (t ^ 1)) as f32)
        .collect();
    assert_eq!(out, want);
    let race = good.replace("__syncthreads();", "");
    assert!(
        run(&race).unwrap_err().contains("race"),
        "a missing barrier"
    );
    let deadlock = good.replace("__syncthreads();", "if (threadIdx.x < 16) __syncthreads();");
    let err = run(&deadlock).unwrap_err();
    assert!(err.contains("deadlock") || err.contains("exited"), "{err}");
    let overrun = good.replace("s[63 - threadIdx.x]", "s[64 + threadIdx.x]");
    let err = run(&overrun).unwrap_err();
    assert!(err.contains("heap-buffer-overflow"), "{err}");
    // Two blocks that write the same elements: the last one wins.
    let emu = Emulator::build(&module(
        r#"extern "C" __global__ void k(float *y) { y[threadIdx.x] = blockIdx.x; }"#,
        "k",
    ))
    .unwrap();
    let mut job = Job::default();
    let y = job.output(64, 4);
    let two_blocks = LaunchConfig {
        grid_dim: (2, 1, 1),
        ..one_block
    };
    job.launch("k", two_blocks, &[Arg::Buffer(y, 0)]);
    assert!(emu.run(&job).unwrap_err().contains("race"), "blocks racing");
}
