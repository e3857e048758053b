//! Each CUDA kernel against its CPU twin (the oracle), on a real GPU. Without
//! one (no driver, no device) every test prints SKIPPED and passes; the GPU
//! check script (`scripts/gpu-check.sh`) runs them where a GPU is lent.

use super::modules::{compile, modules};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use std::sync::Arc;

/// The device's stream and a function loader, or `None` (SKIPPED) without a GPU.
fn gpu() -> Option<(Arc<CudaContext>, Arc<CudaStream>)> {
    if let Err(why) = super::device_check(0) {
        println!("SKIPPED: no CUDA device ({why})");
        return None;
    }
    let ctx = CudaContext::new(0).ok()?;
    let stream = ctx.default_stream();
    Some((ctx, stream))
}

fn function(ctx: &Arc<CudaContext>, module: &str, name: &str) -> CudaFunction {
    let m = modules()
        .into_iter()
        .find(|m| m.name == module)
        .expect("module");
    let (major, _) = ctx.compute_capability().expect("compute capability");
    let arch = if major >= 9 { "sm_90" } else { "sm_80" };
    let ptx = compile(&m, arch).unwrap_or_else(|e| panic!("{e}"));
    let module = ctx.load_module(Ptx::from_src(ptx)).expect("load module");
    module
        .load_function(name)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// The CPU formula a unary kernel must match.
type CpuTwin = Box<dyn Fn(f32) -> f32>;

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: GPU {g} vs CPU {w}"
        );
    }
}

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 2000) as f32 / 500.0) - 2.0
        })
        .collect()
}

#[test]
fn unary_and_binary_f32_match_the_cpu_with_broadcasting() {
    let Some((ctx, stream)) = gpu() else { return };
    let (rows, cols) = (33, 70);
    let n = rows * cols;
    let a = inputs(n, 1);
    let b = inputs(cols, 7); // broadcast along rows (stride 0)
    let shape = stream.clone_htod(&[rows, cols]).unwrap();
    let st_a = stream.clone_htod(&[cols as i64, 1]).unwrap();
    let st_b = stream.clone_htod(&[0i64, 1]).unwrap();
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let cfg = LaunchConfig::for_num_elems(n as u32);
    let erf = |x: f32| crate::float::Float::erf(x);
    let unary: Vec<(&str, CpuTwin)> = vec![
        ("neg", Box::new(|v: f32| -v)),
        ("exp", Box::new(f32::exp)),
        ("abs", Box::new(f32::abs)),
        ("relu", Box::new(|v: f32| v.max(0.0))),
        ("tanh", Box::new(f32::tanh)),
        ("sigmoid", Box::new(|v: f32| 1.0 / (1.0 + (-v).exp()))),
        ("silu", Box::new(|v: f32| v / (1.0 + (-v).exp()))),
        (
            "gelu",
            Box::new(move |v: f32| 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2))),
        ),
    ];
    for (op, f) in unary {
        let k = function(&ctx, "elementwise", &format!("{op}_f32"));
        let mut y = stream.alloc_zeros::<f32>(n).unwrap();
        let mut l = stream.launch_builder(&k);
        l.arg(&n)
            .arg(&2i32)
            .arg(&shape)
            .arg(&st_a)
            .arg(&da)
            .arg(&mut y);
        // SAFETY: the argument list matches `<op>_f32(size_t, int, const size_t*,
        // const long long*, const float*, float*)`; every buffer holds n (or 2) elements.
        unsafe { l.launch(cfg) }.unwrap();
        let got = stream.clone_dtoh(&y).unwrap();
        close(op, &got, &a.iter().map(|&v| f(v)).collect::<Vec<_>>(), 1e-5);
    }
    for (op, f) in [
        ("add", (|u, v| u + v) as fn(f32, f32) -> f32),
        ("sub", |u, v| u - v),
        ("mul", |u, v| u * v),
        ("div", |u, v| u / v),
        ("maximum", f32::max),
        ("minimum", f32::min),
    ] {
        let k = function(&ctx, "elementwise", &format!("{op}_f32"));
        let mut y = stream.alloc_zeros::<f32>(n).unwrap();
        let mut l = stream.launch_builder(&k);
        l.arg(&n)
            .arg(&2i32)
            .arg(&shape)
            .arg(&st_a)
            .arg(&st_b)
            .arg(&da)
            .arg(&db)
            .arg(&mut y);
        // SAFETY: matches `<op>_f32(size_t, int, const size_t*, const long long*,
        // const long long*, const float*, const float*, float*)`; `b` is read with stride 0 on dim 0.
        unsafe { l.launch(cfg) }.unwrap();
        let got = stream.clone_dtoh(&y).unwrap();
        let want: Vec<f32> = (0..n).map(|i| f(a[i], b[i % cols])).collect();
        close(op, &got, &want, 1e-6);
    }
}

#[test]
fn half_types_round_trip_through_f32_arithmetic() {
    let Some((ctx, stream)) = gpu() else { return };
    let n = 1000;
    let a = inputs(n, 3);
    for (dtype, to_bits, from_bits) in [
        (
            "f16",
            (|v: f32| half::f16::from_f32(v).to_bits()) as fn(f32) -> u16,
            (|b: u16| half::f16::from_bits(b).to_f32()) as fn(u16) -> f32,
        ),
        (
            "bf16",
            |v: f32| half::bf16::from_f32(v).to_bits(),
            |b: u16| half::bf16::from_bits(b).to_f32(),
        ),
    ] {
        let bits: Vec<u16> = a.iter().map(|&v| to_bits(v)).collect();
        let k = function(&ctx, "elementwise", &format!("add_{dtype}"));
        let shape = stream.clone_htod(&[n]).unwrap();
        let st = stream.clone_htod(&[1i64]).unwrap();
        let d = stream.clone_htod(&bits).unwrap();
        let mut y = stream.alloc_zeros::<u16>(n).unwrap();
        let mut l = stream.launch_builder(&k);
        l.arg(&n)
            .arg(&1i32)
            .arg(&shape)
            .arg(&st)
            .arg(&st)
            .arg(&d)
            .arg(&d)
            .arg(&mut y);
        // SAFETY: matches `add_<dtype>` with 16-bit storage for both inputs and the output.
        unsafe { l.launch(LaunchConfig::for_num_elems(n as u32)) }.unwrap();
        let got: Vec<f32> = stream
            .clone_dtoh(&y)
            .unwrap()
            .into_iter()
            .map(from_bits)
            .collect();
        // The CPU twin: round the f32 sum to the same type (the half crate rounds to nearest even).
        let want: Vec<f32> = bits
            .iter()
            .map(|&b| from_bits(to_bits(from_bits(b) * 2.0)))
            .collect();
        close(dtype, &got, &want, 0.0);
    }
}

#[test]
fn row_kernels_match_their_cpu_twins() {
    let Some((ctx, stream)) = gpu() else { return };
    let (rows, d) = (17, 300);
    let x = inputs(rows * d, 5);
    let dx = stream.clone_htod(&x).unwrap();
    let per_row = LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 256 * 4,
    };
    for (name, want) in [
        ("softmax_f32", crate::cpu::softmax_rows(&x, d)),
        ("log_softmax_f32", crate::cpu::log_softmax_rows(&x, d)),
    ] {
        let k = function(&ctx, "softmax", name);
        let mut y = stream.alloc_zeros::<f32>(rows * d).unwrap();
        let mut l = stream.launch_builder(&k);
        l.arg(&d).arg(&dx).arg(&mut y);
        // SAFETY: `softmax_f32(size_t n, const float*, float*)`, one block per row of n.
        unsafe { l.launch(per_row) }.unwrap();
        close(name, &stream.clone_dtoh(&y).unwrap(), &want, 1e-5);
    }
    let k = function(&ctx, "reduce", "sum_last_f32");
    let mut y = stream.alloc_zeros::<f32>(rows).unwrap();
    let mut l = stream.launch_builder(&k);
    l.arg(&d).arg(&dx).arg(&mut y);
    // SAFETY: `sum_last_f32(size_t n, const float*, float*)`, one output per row.
    unsafe { l.launch(per_row) }.unwrap();
    let sums: Vec<f32> = x.chunks(d).map(|r| r.iter().sum()).collect();
    close("sum_last", &stream.clone_dtoh(&y).unwrap(), &sums, 1e-4);

    let (w, b) = (inputs(d, 11), inputs(d, 13));
    let cpu = crate::cpu::layer_norm_rows(&x, d, Some(&w), Some(&b), 1e-5);
    let k = function(&ctx, "norm", "layer_norm_f32");
    let (dw, db) = (
        stream.clone_htod(&w).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let mut y = stream.alloc_zeros::<f32>(rows * d).unwrap();
    let mut mean = stream.alloc_zeros::<f32>(rows).unwrap();
    let mut rstd = stream.alloc_zeros::<f32>(rows).unwrap();
    let mut l = stream.launch_builder(&k);
    l.arg(&d)
        .arg(&1e-5f32)
        .arg(&dx)
        .arg(&dw)
        .arg(&db)
        .arg(&mut y)
        .arg(&mut mean)
        .arg(&mut rstd);
    // SAFETY: matches `layer_norm_f32(size_t, float, x, w, b, y, mean, rstd)` with rows x d buffers.
    unsafe { l.launch(per_row) }.unwrap();
    close("layer_norm", &stream.clone_dtoh(&y).unwrap(), &cpu.y, 1e-4);
    close(
        "layer_norm mean",
        &stream.clone_dtoh(&mean).unwrap(),
        &cpu.mean,
        1e-5,
    );
    close(
        "layer_norm rstd",
        &stream.clone_dtoh(&rstd).unwrap(),
        &cpu.rstd,
        1e-4,
    );
}

#[test]
fn adam_and_embedding_match_their_cpu_twins() {
    let Some((ctx, stream)) = gpu() else { return };
    let n = 5000;
    let (mut p, g) = (inputs(n, 17), inputs(n, 19));
    let (mut m, mut v) = (vec![0.0f32; n], vec![0.0f32; n]);
    let (dp0, dg) = (
        stream.clone_htod(&p).unwrap(),
        stream.clone_htod(&g).unwrap(),
    );
    let mut dp = dp0;
    let (mut dm, mut dv) = (
        stream.alloc_zeros::<f32>(n).unwrap(),
        stream.alloc_zeros::<f32>(n).unwrap(),
    );
    let k = function(&ctx, "optim", "adam_f32");
    for step in 1..=3 {
        let h = crate::cpu::AdamStep {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
            decoupled: true,
            amsgrad: false,
            maximize: false,
            step,
        };
        crate::cpu::adam_update(&mut p, &g, &mut m, &mut v, None, &h);
        let t = step as i32;
        let mut l = stream.launch_builder(&k);
        l.arg(&n)
            .arg(&mut dp)
            .arg(&dg)
            .arg(&mut dm)
            .arg(&mut dv)
            .arg(&1e-2f32)
            .arg(&0.9f32)
            .arg(&0.999f32)
            .arg(&1e-8f32)
            .arg(&1e-2f32)
            .arg(&1i32)
            .arg(&t);
        // SAFETY: matches `adam_f32(size_t, T* p, const T* g, float* m, float* v, lr, b1, b2, eps, wd, decoupled, t)`.
        unsafe { l.launch(LaunchConfig::for_num_elems(n as u32)) }.unwrap();
    }
    close("adam p", &stream.clone_dtoh(&dp).unwrap(), &p, 1e-5);

    let (num, dim) = (50, 16);
    let table = inputs(num * dim, 23);
    let ids: Vec<i64> = (0..40).map(|i| (i * 7 % num) as i64).collect();
    let k = function(&ctx, "index", "embedding_f32");
    let (dt, di) = (
        stream.clone_htod(&table).unwrap(),
        stream.clone_htod(&ids).unwrap(),
    );
    let mut y = stream.alloc_zeros::<f32>(ids.len() * dim).unwrap();
    let n_ids = ids.len();
    let mut l = stream.launch_builder(&k);
    l.arg(&n_ids).arg(&dim).arg(&di).arg(&dt).arg(&mut y);
    // SAFETY: matches `embedding_f32(size_t n, size_t dim, const long long* ids, const T* table, T* y)`; ids < num.
    unsafe { l.launch(LaunchConfig::for_num_elems((ids.len() * dim) as u32)) }.unwrap();
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&i| table[i as usize * dim..(i as usize + 1) * dim].to_vec())
        .collect();
    close("embedding", &stream.clone_dtoh(&y).unwrap(), &want, 0.0);
}
