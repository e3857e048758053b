//! The CUDA kernel sources (`cu/*.cu`, each prefixed with `cu/common.cuh`),
//! compiled at first use with NVRTC — no nvcc and no compute-capability
//! detection at build time — and cached per (module, architecture), in
//! memory and on disk (`disk_cache.rs`). Kernel
//! names are `<op>_<dtype>`; the lists below are the names the Rust side
//! launches, and a test checks that each one is in the compiled PTX.

pub use super::nvrtc::Compiled;
use crate::elementwise::{BINARY_ROWS, Compare, UNARY_ROWS};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

const COMMON: &str = include_str!("cu/common.cuh");

/// The float dtypes the compute kernels are instantiated for.
pub const DTYPES: &[&str] = &["f32", "f16", "bf16"];

/// The storage widths the data-movement kernels are instantiated for.
pub const WIDTHS: &[&str] = &["u8", "u16", "u32", "u64"];
/// Every dtype, as the cast, fill and compare kernels name them.
pub const ALL_DTYPES: &[&str] = &["f32", "f16", "bf16", "f64", "i64", "u8", "b8"];

/// One `.cu` file: its name, source, and the kernel names it defines.
pub struct Module {
    /// The file's name without `.cu`.
    pub name: &'static str,
    /// The CUDA source (without `common.cuh`).
    pub source: Cow<'static, str>,
    /// The kernels it defines, as launched (`<op>_<dtype>`).
    pub kernels: Vec<String>,
}

impl Module {
    /// The full source NVRTC compiles.
    pub fn full_source(&self) -> String {
        format!(
            "#line 1 \"common.cuh\"\n{COMMON}\n#line 1 \"{}.cu\"\n{}",
            self.name, self.source
        )
    }
}

/// `<op>_<dtype>` for every op and dtype.
fn per_dtype(ops: &[&str], dtypes: &[&str]) -> Vec<String> {
    ops.iter()
        .flat_map(|op| dtypes.iter().map(move |d| format!("{op}_{d}")))
        .collect()
}

/// The fused optimizer updates in `cu/optim.cu` (`UpdatePlan::op`).
const OPTIM_OPS: [&str; 10] = [
    "adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "radam", "rprop", "asgd",
];

/// Every module, with its kernels.
pub fn modules() -> Vec<Module> {
    let names: Vec<&str> = UNARY_ROWS
        .iter()
        .map(|r| r.name)
        .chain(BINARY_ROWS.iter().map(|r| r.name))
        .collect();
    let elementwise = per_dtype(&names, DTYPES);
    let mut copy = per_dtype(&["strided_copy", "strided_assign", "where"], WIDTHS);
    for to in ALL_DTYPES {
        copy.extend(per_dtype(&[&format!("cast_to_{to}")], ALL_DTYPES));
    }
    copy.extend(per_dtype(&["fill"], ALL_DTYPES));
    copy.extend(["arange_i64".to_string(), "arange_f32".to_string()]);
    // Comparisons, `<cmp>_<dtype>(n, Strided a, Strided b, a, b, bool* y)`.
    let compares: Vec<&str> = Compare::ALL.iter().map(|c| c.name()).collect();
    copy.extend(per_dtype(&compares, ALL_DTYPES));
    let mut index = per_dtype(&["gather", "index_select", "scatter_assign"], WIDTHS);
    index.extend(["scatter_add_f32", "index_add_f32"].map(String::from));
    index.extend(["prod", "amax", "amin"].map(|op| format!("scatter_{op}_f32")));
    // Every fused optimizer update in its four launch forms.
    let optim_ops: Vec<String> = OPTIM_OPS
        .iter()
        .flat_map(|op| ["", "_at", "_multi", "_multi_at"].map(|form| format!("{op}{form}")))
        .collect();
    let optim_ops: Vec<&str> = optim_ops.iter().map(String::as_str).collect();
    vec![
        Module {
            name: "elementwise",
            source: Cow::Owned(crate::elementwise::cuda_source(include_str!(
                "cu/elementwise.cu"
            ))),
            kernels: elementwise,
        },
        Module {
            name: "copy",
            source: Cow::Borrowed(include_str!("cu/copy.cu")),
            kernels: copy,
        },
        Module {
            name: "softmax",
            source: Cow::Borrowed(include_str!("cu/softmax.cu")),
            kernels: per_dtype(&["softmax", "log_softmax"], DTYPES),
        },
        Module {
            name: "reduce",
            source: Cow::Borrowed(include_str!("cu/reduce.cu")),
            kernels: per_dtype(
                &[
                    "sum_last",
                    "sum_first_partials",
                    "sum_first_finish",
                    "extreme_last",
                ],
                DTYPES,
            ),
        },
        Module {
            name: "order",
            source: Cow::Borrowed(include_str!("cu/order.cu")),
            kernels: per_dtype(&["cumsum_last", "sort_last"], DTYPES),
        },
        Module {
            name: "conv",
            source: Cow::Borrowed(include_str!("cu/conv.cu")),
            kernels: vec![
                "im2col_f32".to_string(),
                "col2im_f32".to_string(),
                "max_pool2d_f32".to_string(),
                "max_pool2d_backward_f32".to_string(),
            ],
        },
        Module {
            name: "norm",
            source: Cow::Borrowed(include_str!("cu/norm.cu")),
            kernels: per_dtype(
                &[
                    "layer_norm",
                    "layer_norm_backward",
                    "layer_norm_param_partials",
                    "layer_norm_param_grads",
                ],
                DTYPES,
            ),
        },
        Module {
            name: "attention",
            source: Cow::Borrowed(include_str!("cu/attention.cu")),
            kernels: per_dtype(
                &[
                    "attention_forward",
                    "attention_backward_dq",
                    "attention_backward_dkv",
                ],
                DTYPES,
            ),
        },
        Module {
            name: "optim",
            source: Cow::Borrowed(include_str!("cu/optim.cu")),
            kernels: per_dtype(&optim_ops, DTYPES),
        },
        Module {
            name: "index",
            source: Cow::Borrowed(include_str!("cu/index.cu")),
            kernels: index,
        },
        Module {
            name: "random",
            source: Cow::Borrowed(include_str!("cu/random.cu")),
            kernels: vec![
                "philox_uniform_f32".to_string(),
                "philox_normal_f32".to_string(),
            ],
        },
    ]
}

/// Generated modules by kernel name: the module's name and its source.
type Generated = Mutex<HashMap<String, (&'static str, Arc<str>)>>;

/// Modules generated at run time (`compile`'s fused programs), by kernel
/// name: each defines one kernel named after its source's hash.
fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Makes kernel `name` with CUDA `source` (a fused program's) known to
/// [`module_of`], so it compiles, caches and launches as any other; the
/// same name again is a no-op.
pub fn register_generated(name: &str, source: impl FnOnce() -> String) {
    let mut g = generated().lock().unwrap_or_else(|e| e.into_inner());
    if !g.contains_key(name) {
        // A module name lives as long as the process, as the static ones
        // do; one leaked string per distinct program.
        let module_name: &'static str = Box::leak(name.to_string().into_boxed_str());
        g.insert(name.to_string(), (module_name, source().into()));
    }
}

/// The module that defines kernel `name`.
pub fn module_of(name: &str) -> Option<Module> {
    if let Some((module, source)) = generated()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
    {
        return Some(Module {
            name: module,
            source: Cow::Owned(source.to_string()),
            kernels: vec![name.to_string()],
        });
    }
    modules()
        .into_iter()
        .find(|m| m.kernels.iter().any(|k| k == name))
}

/// Compiles a module for `arch` (a real architecture such as `"sm_90"`):
/// PTX and CUBIN (see `nvrtc.rs`); a failure carries NVRTC's log. Checks
/// that NVRTC can be loaded first (cudarc panics otherwise).
pub fn compile(module: &Module, arch: &str) -> Result<Compiled, String> {
    if !super::nvrtc_present() {
        return Err("NVRTC (libnvrtc.so) was not found".into());
    }
    let name = format!("{}.cu", module.name);
    super::nvrtc::compile(&module.full_source(), &name, arch, OPTIONS)
}

const OPTIONS: &[&str] = &["--std=c++17"];

type Cache = Mutex<HashMap<(&'static str, String), Arc<Compiled>>>;

/// A module's compilation from the disk cache (see `disk_cache.rs`), or
/// compiled now and stored there.
fn from_disk_or_compile(
    module: &Module,
    arch: &str,
    dir: Option<std::path::PathBuf>,
) -> Result<Compiled, String> {
    let Some(dir) = dir else {
        return compile(module, arch);
    };
    if !super::nvrtc_present() {
        return Err("NVRTC (libnvrtc.so) was not found".into());
    }
    let source = module.full_source();
    let version = super::nvrtc::version();
    let mut key: Vec<&str> = vec![&source, &version];
    key.extend(OPTIONS);
    let path = dir.join(super::disk_cache::file_name(module.name, arch, &key));
    if let Some(c) = super::disk_cache::load(&path) {
        return Ok(c);
    }
    let c = compile(module, arch)?;
    super::disk_cache::store(&path, &c);
    Ok(c)
}

/// [`compile`] once per (module, architecture) and process, through the
/// disk cache; later calls reuse it.
pub fn compiled(module: &Module, arch: &str) -> Result<Arc<Compiled>, String> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (module.name, arch.to_string());
    if let Some(p) = cache.lock().map_err(|_| "kernel cache poisoned")?.get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(from_disk_or_compile(
        module,
        arch,
        super::disk_cache::dir(),
    )?);
    cache
        .lock()
        .map_err(|_| "kernel cache poisoned")?
        .insert(key, p.clone());
    Ok(p)
}

/// The byte size of each parameter of kernel `name` as `ptx` declares
/// them, in order; `None` if the kernel or a parameter cannot be read.
/// Launches check their arguments against it (`CudaDevice::function`), so a
/// launcher out of step with its `.cu` signature fails with a message
/// instead of handing the kernel garbage.
pub fn param_sizes(ptx: &str, name: &str) -> Option<Vec<usize>> {
    let header = &ptx[ptx.find(&format!(".entry {name}("))?..];
    let header = &header[..header.find(')')?];
    header.lines().skip(1).map(param_size).collect()
}

/// `.param .u64 k_param_0,` -> 8; `.param .align 8 .b8 k_param_1[136]` -> 136.
fn param_size(line: &str) -> Option<usize> {
    let line = line.trim().trim_end_matches(',');
    let rest = line.strip_prefix(".param")?;
    if let (Some(open), Some(body)) = (line.rfind('['), line.strip_suffix(']')) {
        return body[open + 1..].parse().ok();
    }
    Some(match rest.split_whitespace().next()? {
        ".u64" | ".s64" | ".b64" | ".f64" => 8,
        ".u32" | ".s32" | ".b32" | ".f32" => 4,
        ".u16" | ".s16" | ".b16" | ".f16" => 2,
        ".u8" | ".s8" | ".b8" => 1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel compiles to PTX and machine code for sm_80 and sm_90 and
    /// is in the PTX under the name Rust launches, with readable parameters. Needs only NVRTC (`pip install
    /// nvidia-cuda-nvrtc`), no GPU; skipped with a message where it is absent.
    #[test]
    fn every_kernel_compiles_for_sm80_and_sm90() {
        if !crate::cuda::nvrtc_present() {
            println!(
                "SKIPPED: NVRTC not found (install the nvidia-cuda-nvrtc wheel and put its lib dir on LD_LIBRARY_PATH)"
            );
            return;
        }
        let mut count = 0;
        for m in modules() {
            for arch in ["sm_80", "sm_90"] {
                let c = compile(&m, arch).unwrap_or_else(|e| panic!("{e}"));
                let ptx = &c.ptx;
                let cubin = c.cubin.as_deref().unwrap_or_default();
                assert!(
                    cubin.starts_with(b"\x7fELF"),
                    "{} for {arch}: no CUBIN (machine code) beside the PTX",
                    m.name
                );
                assert!(
                    ptx.contains(&format!(".target {arch}")),
                    "{} for {arch}",
                    m.name
                );
                for k in &m.kernels {
                    assert!(
                        ptx.contains(&format!(".entry {k}(")),
                        "kernel {k} missing from {}.cu",
                        m.name
                    );
                    let sizes = param_sizes(ptx, k);
                    assert!(
                        sizes.as_ref().is_some_and(|s| !s.is_empty()),
                        "parameters of {k} unreadable: {sizes:?}"
                    );
                    count += 1;
                }
            }
        }
        println!(
            "compiled {} kernels for each of 2 architectures with NVRTC",
            count / 2
        );
        let elementwise = 3 * (UNARY_ROWS.len() + BINARY_ROWS.len());
        let copy = 3 * 4 + 7 * 7 + 7 + 2 + 6 * 7;
        // gather, index_select and scatter_assign by width; scatter_add,
        // index_add and scatter prod, amax, amin in f32.
        let index = 3 * 4 + 2 + 3;
        assert_eq!(
            count,
            // conv 4 (im2col, col2im, max pool and its backward); random 2
            // (philox uniform, normal); per float dtype: softmax 2, rows 4
            // (sums of the last dim, the two stages of sums of the first,
            // extremes), layer norm 4 (forward, dx, the two stages of dw
            // and db), optimizers 4 each (one tensor or many, by value and
            // `_at`), attention 3, order 2 (running sums, sorts).
            2 * (elementwise
                + copy
                + index
                + 4
                + 2
                + 3 * (2 + 4 + 4 + 4 * OPTIM_OPS.len() + 3 + 2))
        );
    }

    /// A fused program using every instruction, and its backward, compile
    /// as generated kernels with one 8-byte parameter per size and pointer.
    #[test]
    fn generated_program_kernels_compile() {
        use crate::program::{Binary, Inst, Program, Unary};
        if !crate::cuda::nvrtc_present() {
            println!("SKIPPED: NVRTC not found");
            return;
        }
        // The derivative rows come in through the backward.
        let unary: Vec<Unary> = Unary::ALL
            .iter()
            .filter(|u| !u.is_derivative())
            .copied()
            .collect();
        let mut insts = vec![
            Inst::Input(0),
            Inst::Input(1),
            Inst::Const(f32::NEG_INFINITY),
        ];
        for (k, u) in unary.iter().enumerate() {
            insts.push(Inst::Unary(*u, insts.len() - 1));
            let b = [Binary::Add, Binary::Sub, Binary::Mul, Binary::Div][k % 4];
            insts.push(Inst::Binary(b, insts.len() - 1, 1));
        }
        insts.push(Inst::Binary(Binary::Add, insts.len() - 1, 2));
        let p = Program {
            n_inputs: 2,
            outputs: vec![insts.len() - 1],
            insts,
        };
        for prog in [p.clone(), p.backward(&[true, true])] {
            let name = prog.cuda_name();
            register_generated(&name, || prog.cuda_source(&name));
            let m = module_of(&name).expect("registered");
            let c = compile(&m, "sm_90").unwrap_or_else(|e| panic!("{e}"));
            let sizes = param_sizes(&c.ptx, &name).expect("readable parameters");
            let want = 1 + 2 * prog.n_inputs + prog.outputs.len();
            assert_eq!(sizes, vec![8; want], "{name}");
        }
    }

    #[test]
    fn compile_errors_carry_the_nvrtc_log() {
        if !crate::cuda::nvrtc_present() {
            println!("SKIPPED: NVRTC not found");
            return;
        }
        let bad = Module {
            name: "broken",
            source: Cow::Borrowed("extern \"C\" __global__ void k_f32() { undefined_fn(); }"),
            kernels: vec![],
        };
        let err = compile(&bad, "sm_80").unwrap_err();
        assert!(
            err.starts_with("NVRTC could not compile broken.cu for sm_80:"),
            "{err}"
        );
        assert!(err.contains("undefined_fn"), "{err}");
    }

    /// What the launchers' argument check compares with: a pointer is 8
    /// bytes, a `Strided` view 136, each hyper-parameter struct its C size
    /// (which the launcher's `#[repr(C)]` mirror must equal).
    #[test]
    fn kernel_parameters_are_read_from_the_ptx() {
        if !crate::cuda::nvrtc_present() {
            println!("SKIPPED: NVRTC not found");
            return;
        }
        let sizes = |k: &str| {
            let c = compiled(&module_of(k).unwrap(), "sm_80").unwrap();
            param_sizes(&c.ptx, k).unwrap()
        };
        assert_eq!(sizes("adam_f32"), [8, 8, 8, 8, 8, 8, 36]);
        assert_eq!(sizes("sgd_bf16"), [8, 8, 8, 8, 28]);
        assert_eq!(sizes("rmsprop_f16"), [8, 8, 8, 8, 8, 8, 24]);
        assert_eq!(sizes("adam_multi_bf16"), [768, 36]);
        assert_eq!(sizes("adagrad_f32"), [8, 8, 8, 8, 16]);
        assert_eq!(sizes("adadelta_at_f16"), [8, 8, 8, 8, 8, 8]);
        assert_eq!(sizes("adamax_bf16"), [8, 8, 8, 8, 8, 24]);
        assert_eq!(sizes("nadam_f32"), [8, 8, 8, 8, 8, 40]);
        assert_eq!(sizes("radam_multi_f16"), [768, 48]);
        assert_eq!(sizes("rprop_f32"), [8, 8, 8, 8, 8, 28]);
        assert_eq!(sizes("asgd_at_bf16"), [8, 8, 8, 8, 8]);
        assert_eq!(sizes("sgd_multi_at_f32"), [768, 8]);
        assert_eq!(sizes("gather_u32"), [8, 136, 8, 8, 8, 8, 8, 8, 8, 8, 8]);
        assert_eq!(sizes("exp_f32"), [8, 136, 4, 4, 8, 8]);
        assert_eq!(sizes("add_scaled_f32"), [8, 136, 136, 4, 8, 8, 8]);
        assert_eq!(sizes("layer_norm_backward_bf16"), [8; 7]);
        assert_eq!(sizes("layer_norm_param_partials_f16"), [8; 9]);
        assert_eq!(sizes("layer_norm_param_grads_bf16"), [8; 6]);
        assert_eq!(sizes("sum_first_partials_f32"), [8; 5]);
        assert_eq!(sizes("sum_first_finish_f16"), [8; 4]);
        // Sizes, scale, causal, the 200-byte `AttnViews`, then addresses.
        let attention =
            |buffers: usize| [[8; 4].as_slice(), &[4, 4, 200], &vec![8; buffers]].concat();
        assert_eq!(sizes("attention_forward_bf16"), attention(5));
        assert_eq!(sizes("attention_backward_dq_f32"), attention(8));
        assert_eq!(sizes("attention_backward_dkv_f16"), attention(8));
        assert_eq!(param_size(".param .align 8 .b8 k_param_1[136],"), Some(136));
        assert_eq!(param_size(".param .f32 k_param_2"), Some(4));
        assert_eq!(param_size("ld.param.u64 %rd1, [k_param_0];"), None);
    }

    #[test]
    fn a_second_process_loads_the_kernels_from_the_disk_cache() {
        if !crate::cuda::nvrtc_present() {
            println!("SKIPPED: NVRTC not found");
            return;
        }
        let dir = std::env::temp_dir().join(format!("tapir-kdisk-{}", std::process::id()));
        let m = &modules()[4];
        let first = from_disk_or_compile(m, "sm_80", Some(dir.clone())).unwrap();
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "one file per compilation");
        let second = from_disk_or_compile(m, "sm_80", Some(dir.clone())).unwrap();
        assert_eq!((&first.ptx, &first.cubin), (&second.ptx, &second.cubin));
        // What is read is the file: a marked one comes back as it is.
        let marked = Compiled {
            ptx: format!("{}// marked", first.ptx),
            cubin: first.cubin,
        };
        super::super::disk_cache::store(&files[0], &marked);
        let third = from_disk_or_compile(m, "sm_80", Some(dir.clone())).unwrap();
        assert!(third.ptx.ends_with("// marked"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn compiled_ptx_is_cached() {
        if !crate::cuda::nvrtc_present() {
            println!("SKIPPED: NVRTC not found");
            return;
        }
        let m = &modules()[1];
        let (a, b) = (compiled(m, "sm_80").unwrap(), compiled(m, "sm_80").unwrap());
        assert!(Arc::ptr_eq(&a, &b));
    }
}
