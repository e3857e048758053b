//! Each CUDA kernel, through its host launcher, against its CPU twin (the
//! oracle), on a real GPU. Without one (no driver, no device) every test
//! prints SKIPPED and passes; the GPU check script (`scripts/gpu-check.sh`)
//! runs them where a GPU is lent and fails on any SKIPPED.

use super::launch;
use super::{CudaBuffer, CudaDevice, device};
use crate::Layout;
use std::sync::Arc;

fn gpu() -> Option<Arc<CudaDevice>> {
    match device(0) {
        Ok(d) => Some(d),
        Err(why) => {
            println!("SKIPPED: no CUDA device ({why})");
            None
        }
    }
}

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || g == w || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{i}]: GPU {g} vs CPU {w}");
    }
}

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 2000) as f32 / 500.0) - 2.0
        })
        .collect()
}

fn up(dev: &Arc<CudaDevice>, v: &[f32]) -> CudaBuffer {
    dev.upload(v).unwrap()
}

fn down(b: &CudaBuffer, n: usize) -> Vec<f32> {
    b.read::<f32>(n).unwrap()
}

#[test]
fn unary_and_binary_f32_match_the_cpu_with_broadcasting_and_views() {
    let Some(dev) = gpu() else { return };
    let (rows, cols) = (33, 70);
    let n = rows * cols;
    let a = inputs(n, 1);
    let b = inputs(cols, 7);
    let (da, db) = (up(&dev, &a), up(&dev, &b));
    let la = Layout::contiguous(&[rows, cols]);
    let erf = crate::float::Float::erf;
    type Twin = Box<dyn Fn(f32) -> f32>;
    let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
    let gelu = move |v: f32| 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
    // Every unary kernel (UNARY_OPS), on inputs in its domain.
    let unary: Vec<(&str, f32, f32, Twin)> = vec![
        ("neg", 0.0, 0.0, Box::new(|v: f32| -v)),
        ("abs", 0.0, 0.0, Box::new(f32::abs)),
        (
            "sign",
            0.0,
            0.0,
            Box::new(|v: f32| if v == 0.0 { 0.0 } else { v.signum() }),
        ),
        ("exp", 0.0, 0.0, Box::new(f32::exp)),
        ("log", 0.0, 0.0, Box::new(|v: f32| v.abs().ln())),
        ("log1p", 0.0, 0.0, Box::new(|v: f32| v.abs().ln_1p())),
        ("sqrt", 0.0, 0.0, Box::new(|v: f32| v.abs().sqrt())),
        (
            "rsqrt",
            0.0,
            0.0,
            Box::new(|v: f32| 1.0 / (v.abs() + 0.5).sqrt()),
        ),
        ("sin", 0.0, 0.0, Box::new(f32::sin)),
        ("cos", 0.0, 0.0, Box::new(f32::cos)),
        ("tanh", 0.0, 0.0, Box::new(f32::tanh)),
        ("erf", 0.0, 0.0, Box::new(erf)),
        ("sigmoid", 0.0, 0.0, Box::new(sig)),
        ("relu", 0.0, 0.0, Box::new(|v: f32| v.max(0.0))),
        (
            "step",
            0.0,
            0.0,
            Box::new(|v: f32| if v > 0.0 { 1.0 } else { 0.0 }),
        ),
        ("silu", 0.0, 0.0, Box::new(move |v: f32| v * sig(v))),
        ("gelu", 0.0, 0.0, Box::new(gelu)),
        (
            "gelu_grad",
            0.0,
            0.0,
            Box::new(move |v: f32| {
                0.5 * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2))
                    + v * (-0.5 * v * v).exp() * 0.398_942_3
            }),
        ),
        ("pow_scalar", 3.0, 0.0, Box::new(|v: f32| v.powi(3))),
        (
            "leaky_relu",
            0.1,
            0.0,
            Box::new(|v: f32| if v > 0.0 { v } else { 0.1 * v }),
        ),
        (
            "leaky_step",
            0.1,
            0.0,
            Box::new(|v: f32| if v > 0.0 { 1.0 } else { 0.1 }),
        ),
        ("clamp", -0.5, 0.25, Box::new(|v: f32| v.clamp(-0.5, 0.25))),
        (
            "clamp_mask",
            -0.5,
            0.25,
            Box::new(|v: f32| if (-0.5..=0.25).contains(&v) { 1.0 } else { 0.0 }),
        ),
    ];
    assert_eq!(
        unary.len(),
        super::modules::UNARY_OPS.len(),
        "every unary kernel has a twin here"
    );
    // log, log1p and sqrt read |x|, rsqrt |x| + 0.5 (their twins above do the same).
    let pos: Vec<f32> = a.iter().map(|v| v.abs()).collect();
    let shifted: Vec<f32> = a.iter().map(|v| v.abs() + 0.5).collect();
    let (dpos, dshift) = (up(&dev, &pos), up(&dev, &shifted));
    for (op, p0, p1, f) in unary {
        let x = match op {
            "log" | "log1p" | "sqrt" => &dpos,
            "rsqrt" => &dshift,
            _ => &da,
        };
        let y = launch::unary(x, &la, op, "f32", p0, p1).unwrap();
        close(
            op,
            &down(&y, n),
            &a.iter().map(|&v| f(v)).collect::<Vec<_>>(),
            1e-5,
        );
    }
    // A transposed view reads through its strides.
    let t = la.transpose(0, 1);
    let y = launch::unary(&da, &t, "neg", "f32", 0.0, 0.0).unwrap();
    let want: Vec<f32> = crate::cpu::copy_strided(&a, &t)
        .iter()
        .map(|v| -v)
        .collect();
    close("neg of a transpose", &down(&y, n), &want, 0.0);
    let lb = Layout::contiguous(&[cols]).broadcast_to(&[rows, cols]);
    for (op, f) in [
        ("add", (|u, v| u + v) as fn(f32, f32) -> f32),
        ("sub", |u, v| u - v),
        ("mul", |u, v| u * v),
        ("div", |u, v| u / v),
        ("maximum", f32::max),
        ("minimum", f32::min),
        ("pow", |u: f32, v: f32| u.abs().powf(v)),
    ] {
        // pow reads |a| so that fractional powers stay real.
        let base = if op == "pow" { &dpos } else { &da };
        let y = launch::binary(base, &la, &db, &lb, op, "f32").unwrap();
        let want: Vec<f32> = (0..n).map(|i| f(a[i], b[i % cols])).collect();
        close(op, &down(&y, n), &want, 1e-6);
    }
    let c = launch::strided_copy(&da, &t, 4).unwrap();
    close(
        "strided_copy",
        &down(&c, n),
        &crate::cpu::copy_strided(&a, &t),
        0.0,
    );
    let f = launch::fill(&dev, 10, "f32", 2.5).unwrap();
    close("fill", &down(&f, 10), &[2.5; 10], 0.0);
}

#[test]
fn half_types_round_once_like_the_cpu() {
    let Some(dev) = gpu() else { return };
    let n = 1000;
    let a = inputs(n, 3);
    let l = Layout::contiguous(&[n]);
    for dtype in ["f16", "bf16"] {
        type Bits = (fn(f32) -> u16, fn(u16) -> f32);
        let (to_bits, from_bits): Bits = if dtype == "f16" {
            (
                |v| half::f16::from_f32(v).to_bits(),
                |b| half::f16::from_bits(b).to_f32(),
            )
        } else {
            (
                |v| half::bf16::from_f32(v).to_bits(),
                |b| half::bf16::from_bits(b).to_f32(),
            )
        };
        let d = up(&dev, &a);
        let h = launch::cast(&d, &l, "f32", dtype).unwrap();
        let bits: Vec<u16> = h.read::<u16>(n).unwrap();
        let want_bits: Vec<u16> = a.iter().map(|&v| to_bits(v)).collect();
        assert_eq!(
            bits, want_bits,
            "cast f32 -> {dtype} rounds to nearest even"
        );
        let y = launch::binary(&h, &l, &h, &l, "add", dtype).unwrap();
        let got: Vec<f32> = y
            .read::<u16>(n)
            .unwrap()
            .into_iter()
            .map(from_bits)
            .collect();
        let want: Vec<f32> = want_bits
            .iter()
            .map(|&b| from_bits(to_bits(from_bits(b) * 2.0)))
            .collect();
        close(dtype, &got, &want, 0.0);
    }
}

#[test]
fn row_kernels_match_their_cpu_twins() {
    let Some(dev) = gpu() else { return };
    let (rows, d) = (17, 300);
    let x = inputs(rows * d, 5);
    let dx = up(&dev, &x);
    for (log, want) in [
        (false, crate::cpu::softmax_rows(&x, d)),
        (true, crate::cpu::log_softmax_rows(&x, d)),
    ] {
        let y = launch::softmax(&dx, rows, d, "f32", log).unwrap();
        close("softmax", &down(&y, rows * d), &want, 1e-5);
    }
    let y = launch::sum_last(&dx, rows, d, "f32").unwrap();
    let sums: Vec<f32> = x.chunks(d).map(|r| r.iter().sum()).collect();
    close("sum_last", &down(&y, rows), &sums, 1e-4);

    let (w, b) = (inputs(d, 11), inputs(d, 13));
    let cpu = crate::cpu::layer_norm_rows(&x, d, Some(&w), Some(&b), 1e-5);
    let (dw, db) = (up(&dev, &w), up(&dev, &b));
    let (y, mean, rstd) = launch::layer_norm(&dx, Some((&dw, &db)), rows, d, 1e-5, "f32").unwrap();
    close("layer_norm", &down(&y, rows * d), &cpu.y, 1e-4);
    close("layer_norm mean", &down(&mean, rows), &cpu.mean, 1e-5);
    close("layer_norm rstd", &down(&rstd, rows), &cpu.rstd, 1e-4);
}

#[test]
fn matmul_matches_the_cpu_gemm_with_transposes_and_batches() {
    let Some(dev) = gpu() else { return };
    let (batch, m, k, n) = (3, 37, 29, 41);
    let a = inputs(batch * m * k, 31);
    let b = inputs(k * n, 37);
    let (da, db) = (up(&dev, &a), up(&dev, &b));
    let la = Layout::contiguous(&[batch, m, k]);
    // One B broadcast over the batch (batch stride 0).
    let lb = Layout {
        shape: vec![batch, k, n],
        strides: vec![0, n, 1],
        offset: 0,
    };
    let want = crate::cpu::matmul(&a, &la, &b, &lb);
    let c = launch::matmul(
        &da,
        0,
        m * k,
        false,
        &db,
        0,
        0,
        false,
        (batch, m, k, n),
        "f32",
    )
    .unwrap();
    close("matmul", &down(&c, batch * m * n), &want, 1e-4);
    // A^T stored as [k, m]: the same product through the transposed path.
    let at = crate::cpu::copy_strided(&a[..m * k], &Layout::contiguous(&[m, k]).transpose(0, 1));
    let dat = up(&dev, &at);
    let c = launch::matmul(&dat, 0, 0, true, &db, 0, 0, false, (1, m, k, n), "f32").unwrap();
    close("matmul A^T", &down(&c, m * n), &want[..m * n], 1e-4);
}

/// Rounds through `dtype` as a kernel stores it (f32 unchanged).
fn round_through(dtype: &str, v: &mut [f32]) {
    for x in v {
        *x = match dtype {
            "f16" => half::f16::from_f32(*x).to_f32(),
            "bf16" => half::bf16::from_f32(*x).to_f32(),
            _ => *x,
        }
    }
}

/// Uploads f32 values stored as `dtype`.
fn up_as(dev: &Arc<CudaDevice>, v: &[f32], dtype: &str) -> CudaBuffer {
    match dtype {
        "f16" => dev.upload(
            &v.iter()
                .map(|&x| half::f16::from_f32(x).to_bits())
                .collect::<Vec<_>>(),
        ),
        "bf16" => dev.upload(
            &v.iter()
                .map(|&x| half::bf16::from_f32(x).to_bits())
                .collect::<Vec<_>>(),
        ),
        _ => dev.upload(v),
    }
    .unwrap()
}

/// Reads `n` elements stored as `dtype`, as f32.
fn down_as(b: &CudaBuffer, n: usize, dtype: &str) -> Vec<f32> {
    let bits = || b.read::<u16>(n).unwrap().into_iter();
    match dtype {
        "f16" => bits().map(|x| half::f16::from_bits(x).to_f32()).collect(),
        "bf16" => bits().map(|x| half::bf16::from_bits(x).to_f32()).collect(),
        _ => down(b, n),
    }
}

#[test]
fn optimizers_match_their_cpu_twins_in_every_float_dtype() {
    use crate::cpu::{AdamStep, RmspropStep, SgdStep, adam_update, rmsprop_update, sgd_update};
    let Some(dev) = gpu() else { return };
    let n = 5000;
    let adamw = AdamStep {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 1e-2,
        decoupled: true,
        amsgrad: false,
        maximize: false,
        step: 0,
    };
    let adam_amsgrad_max = AdamStep {
        weight_decay: 0.1,
        decoupled: false,
        amsgrad: true,
        maximize: true,
        ..adamw
    };
    let nesterov = SgdStep {
        lr: 0.05,
        momentum: 0.9,
        dampening: 0.0,
        weight_decay: 1e-3,
        nesterov: true,
        maximize: false,
    };
    let damped_max = SgdStep {
        lr: 0.1,
        momentum: 0.5,
        dampening: 0.2,
        weight_decay: 0.0,
        nesterov: false,
        maximize: true,
    };
    let plain = SgdStep {
        lr: 0.1,
        ..Default::default()
    };
    let rms_plain = RmspropStep::default();
    let rms_all = RmspropStep {
        weight_decay: 0.1,
        momentum: 0.9,
        centered: true,
        maximize: true,
        ..rms_plain
    };
    // Half types: the twin runs in f32 from the stored values and rounds
    // when storing, as the kernel does; fused multiply-adds on the GPU can
    // still move a result by one unit in the last place.
    for (dtype, tol) in [("f32", 1e-5), ("f16", 4e-3), ("bf16", 2e-2)] {
        for cfg in [adamw, adam_amsgrad_max] {
            let (mut p, mut g) = (inputs(n, 17), inputs(n, 19));
            round_through(dtype, &mut p);
            round_through(dtype, &mut g);
            let mut st = vec![vec![0.0f32; n]; 2 + cfg.amsgrad as usize];
            let (mut dp, dg) = (up_as(&dev, &p, dtype), up_as(&dev, &g, dtype));
            let mut dst: Vec<CudaBuffer> = st.iter().map(|s| up_as(&dev, s, dtype)).collect();
            for step in 1..=3 {
                let h = AdamStep { step, ..cfg };
                let (m, rest) = st.split_first_mut().unwrap();
                let (v, rest) = rest.split_first_mut().unwrap();
                adam_update(&mut p, &g, m, v, rest.first_mut().map(|x| &mut x[..]), &h);
                round_through(dtype, &mut p);
                st.iter_mut().for_each(|s| round_through(dtype, s));
                let mut bufs: Vec<&mut CudaBuffer> = dst.iter_mut().collect();
                launch::adam(&mut dp, &dg, &mut bufs, n, dtype, &h).unwrap();
            }
            let what = format!("adam {dtype} (amsgrad {})", cfg.amsgrad);
            close(&what, &down_as(&dp, n, dtype), &p, tol);
            for (k, (d, s)) in dst.iter().zip(&st).enumerate() {
                close(&format!("{what} state {k}"), &down_as(d, n, dtype), s, tol);
            }
        }
        for cfg in [nesterov, damped_max, plain] {
            let (mut p, mut g) = (inputs(n, 29), inputs(n, 31));
            round_through(dtype, &mut p);
            round_through(dtype, &mut g);
            let mut buf = (cfg.momentum != 0.0).then(|| vec![0.0f32; n]);
            let (mut dp, dg) = (up_as(&dev, &p, dtype), up_as(&dev, &g, dtype));
            let mut dbuf = buf.as_ref().map(|b| up_as(&dev, b, dtype));
            for step in 0..3 {
                sgd_update(&mut p, &g, buf.as_deref_mut(), step == 0, &cfg);
                round_through(dtype, &mut p);
                buf.iter_mut().for_each(|b| round_through(dtype, b));
                launch::sgd(&mut dp, &dg, dbuf.as_mut(), n, dtype, &cfg, step == 0).unwrap();
            }
            let what = format!("sgd {dtype} {cfg:?}");
            close(&what, &down_as(&dp, n, dtype), &p, tol);
            if let (Some(d), Some(b)) = (&dbuf, &buf) {
                close(&format!("{what} buffer"), &down_as(d, n, dtype), b, tol);
            }
        }
        for cfg in [rms_plain, rms_all] {
            let (mut p, mut g) = (inputs(n, 37), inputs(n, 41));
            round_through(dtype, &mut p);
            round_through(dtype, &mut g);
            // [square_avg, momentum_buffer, grad_avg], as the optimizer keeps them.
            let k = 1 + (cfg.momentum > 0.0) as usize + cfg.centered as usize;
            let mut st = vec![vec![0.0f32; n]; k];
            let (mut dp, dg) = (up_as(&dev, &p, dtype), up_as(&dev, &g, dtype));
            let mut dst: Vec<CudaBuffer> = st.iter().map(|s| up_as(&dev, s, dtype)).collect();
            for _ in 0..3 {
                let (sq, rest) = st.split_first_mut().unwrap();
                let (buf, rest) = if cfg.momentum > 0.0 {
                    let (b, r) = rest.split_first_mut().unwrap();
                    (Some(&mut b[..]), r)
                } else {
                    (None, rest)
                };
                let gavg = rest.first_mut().map(|x| &mut x[..]);
                rmsprop_update(&mut p, &g, sq, gavg, buf, &cfg);
                round_through(dtype, &mut p);
                st.iter_mut().for_each(|s| round_through(dtype, s));
                let mut bufs: Vec<&mut CudaBuffer> = dst.iter_mut().collect();
                launch::rmsprop(&mut dp, &dg, &mut bufs, n, dtype, &cfg).unwrap();
            }
            let what = format!("rmsprop {dtype} (centered {})", cfg.centered);
            close(&what, &down_as(&dp, n, dtype), &p, tol);
            for (k, (d, s)) in dst.iter().zip(&st).enumerate() {
                close(&format!("{what} state {k}"), &down_as(d, n, dtype), s, tol);
            }
        }
    }
}

#[test]
fn the_allocator_reuses_freed_blocks_and_empties_its_cache() {
    let Some(dev) = gpu() else { return };
    dev.empty_cache();
    let before = dev.memory_stats();
    let a = dev.upload(&vec![1.0f32; 1000]).unwrap();
    let after = dev.memory_stats();
    assert_eq!(
        after.allocated - before.allocated,
        4096,
        "4000 bytes round to 4096"
    );
    let addr = a.ptr(0);
    drop(a);
    assert_eq!(dev.memory_stats().allocated, before.allocated);
    let b = dev.alloc(4000).unwrap();
    assert_eq!(b.ptr(0), addr, "a freed block of the same size is reused");
    drop(b);
    let reserved = dev.memory_stats().reserved;
    dev.empty_cache();
    assert!(dev.memory_stats().reserved < reserved);
    assert!(dev.memory_stats().peak_allocated >= after.allocated);
}

#[test]
fn data_movement_casts_and_comparisons_match_the_cpu() {
    let Some(dev) = gpu() else { return };
    let (r, c) = (5, 7);
    let a = inputs(r * c, 41);
    let da = up(&dev, &a);
    let l = Layout::contiguous(&[r, c]);
    let t = l.transpose(0, 1);
    // strided_assign: write a transpose into a contiguous buffer.
    let mut y = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    let ly = Layout::contiguous(&[c, r]);
    launch::strided_assign(&mut y, &ly, &da, &t, 4).unwrap();
    close(
        "strided_assign",
        &down(&y, r * c),
        &crate::cpu::copy_strided(&a, &t),
        0.0,
    );
    // Casts through every integer and bool path.
    let ints: Vec<i64> = (0..20).map(|i| i * 7 - 60).collect();
    let di = dev.upload(&ints).unwrap();
    let li = Layout::contiguous(&[20]);
    let f = launch::cast(&di, &li, "i64", "f32").unwrap();
    let want: Vec<f32> = ints.iter().map(|&v| v as f32).collect();
    close("cast i64 -> f32", &down(&f, 20), &want, 0.0);
    let b = launch::cast(&da, &l, "f32", "b8").unwrap();
    let bits = b.read::<u8>(r * c).unwrap();
    let want: Vec<u8> = a.iter().map(|&v| u8::from(v != 0.0)).collect();
    assert_eq!(bits, want, "cast f32 -> bool");
    let back = launch::cast(&f, &li, "f32", "i64").unwrap();
    assert_eq!(back.read::<i64>(20).unwrap(), ints, "cast f32 -> i64");
    let big = launch::fill(&dev, 3, "i64", 1e15).unwrap();
    assert_eq!(big.read::<i64>(3).unwrap(), vec![1_000_000_000_000_000; 3]);
    // Comparisons against a broadcast row, and where.
    let row = inputs(c, 43);
    let dr = up(&dev, &row);
    let lr = Layout::contiguous(&[c]).broadcast_to(&[r, c]);
    let m = launch::compare(&da, &l, &dr, &lr, "gt", "f32").unwrap();
    let want: Vec<u8> = (0..r * c).map(|i| u8::from(a[i] > row[i % c])).collect();
    assert_eq!(m.read::<u8>(r * c).unwrap(), want, "gt");
    let lm = Layout::contiguous(&[r, c]);
    let w = launch::select_where(&m, &lm, &da, &l, &dr, &lr, 4).unwrap();
    let want: Vec<f32> = (0..r * c).map(|i| a[i].max(row[i % c])).collect();
    close("where", &down(&w, r * c), &want, 0.0);
    let e = launch::compare(&di, &li, &di, &li, "eq", "i64").unwrap();
    assert_eq!(e.read::<u8>(20).unwrap(), vec![1; 20], "eq i64");
}

#[test]
fn indexing_kernels_match_their_cpu_twins() {
    let Some(dev) = gpu() else { return };
    let (r, c) = (4, 6);
    let x = inputs(r * c, 51);
    let dx = up(&dev, &x);
    let lx = Layout::contiguous(&[r, c]);
    // gather along dim 1 with a [4, 3] index.
    let index: Vec<usize> = (0..12).map(|i| (i * 5) % c).collect();
    let ids: Vec<i64> = index.iter().map(|&i| i as i64).collect();
    let di = dev.upload(&ids).unwrap();
    let view = Layout {
        shape: vec![r, 3],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let g = launch::Gathered {
        input: &view,
        inner: 1,
        len: 3,
        stride: 1,
        size: c,
        op: "gather",
    };
    let y = launch::gather(&dx, g, &di, 4, true).unwrap();
    let want = crate::cpu::gather(&x, &lx, 1, &index, &[r, 3]);
    close("gather", &down(&y, 12), &want, 0.0);
    // scatter_add: gather's adjoint.
    let src = inputs(12, 53);
    let ds = up(&dev, &src);
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    let g = launch::Gathered {
        input: &view,
        inner: 1,
        len: 3,
        stride: 1,
        size: c,
        op: "gather",
    };
    launch::scatter_add_f32(&mut dst, g, &ds, &Layout::contiguous(&[r, 3]), &di).unwrap();
    let mut want = vec![0.0f32; r * c];
    crate::cpu::scatter_add(
        &mut want,
        &[r, c],
        1,
        &index,
        &[r, 3],
        &src,
        &Layout::contiguous(&[r, 3]),
    );
    close("scatter_add", &down(&dst, r * c), &want, 1e-6);
    // index_select rows (dim 0) and index_add_rows.
    let rows: Vec<usize> = vec![3, 0, 3];
    let rid: Vec<i64> = rows.iter().map(|&i| i as i64).collect();
    let dri = dev.upload(&rid).unwrap();
    let view = Layout {
        shape: vec![3, c],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let g = launch::Gathered {
        input: &view,
        inner: c,
        len: 3,
        stride: c,
        size: r,
        op: "index_select",
    };
    let y = launch::gather(&dx, g, &dri, 4, false).unwrap();
    close(
        "index_select",
        &down(&y, 3 * c),
        &crate::cpu::index_select(&x, 1, r, c, &rows),
        0.0,
    );
    let gsrc = inputs(3 * c, 57);
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    launch::index_add_f32(&mut dst, (1, r, c), &up(&dev, &gsrc), &dri, 3).unwrap();
    let mut want = vec![0.0f32; r * c];
    crate::cpu::index_add_rows(&mut want, r, c, &gsrc, &rows);
    close("index_add", &down(&dst, r * c), &want, 1e-6);
}

#[test]
fn out_of_range_indices_touch_nothing_and_are_reported_at_the_next_read() {
    let Some(dev) = gpu() else { return };
    let (r, c) = (2, 5);
    let x = inputs(r * c, 71);
    let dx = up(&dev, &x);
    let view = Layout::contiguous(&[r, 2]);
    let view = Layout {
        strides: vec![c, 1],
        ..view
    };
    let geom = |op| launch::Gathered {
        input: &view,
        inner: 1,
        len: 2,
        stride: 1,
        size: c,
        op,
    };
    let panic_of = |f: &mut dyn FnMut()| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .expect("the bad index is reported")
    };
    let gather_reported = |msg: String| {
        assert!(
            msg.starts_with("gather: index 7 is out of bounds for dim of size 5")
                || msg.starts_with("gather: index -1 is out of bounds for dim of size 5"),
            "{msg}"
        )
    };
    let index_add_reported = |msg: String| {
        assert!(
            msg.starts_with("index_select backward: index 3 is out of bounds for dim of size 3"),
            "{msg}"
        )
    };
    let src = up(&dev, &[1.0f32; 4]);
    let rows = dev.upload(&[0i64, 3]).unwrap();
    // Index 7 and -1 are out of range: the first launch's first is reported.
    let bad = dev.upload(&[1i64, 7, -1, 0]).unwrap();
    if std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v == "1") {
        // Synchronous launches report at the launch itself.
        gather_reported(panic_of(&mut || {
            launch::gather(&dx, geom("gather"), &bad, 4, true).unwrap();
        }));
        index_add_reported(panic_of(&mut || {
            let mut dst = launch::fill(&dev, 3, "f32", 0.0).unwrap();
            launch::index_add_f32(&mut dst, (1, 3, 1), &src, &rows, 2).unwrap();
        }));
        return;
    }
    let y = launch::gather(&dx, geom("gather"), &bad, 4, true).unwrap();
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    launch::scatter_add_f32(&mut dst, geom("scatter_add"), &src, &view, &bad).unwrap();
    gather_reported(panic_of(&mut || {
        down(&y, 4);
    }));
    // Nothing was read or written for them; the flag is clear again.
    close("gather", &down(&y, 4), &[x[1], 0.0, 0.0, x[c]], 0.0);
    let mut want = vec![0.0f32; r * c];
    want[1] = 1.0;
    want[c] = 1.0;
    close("scatter_add", &down(&dst, r * c), &want, 0.0);
    // index_select's adjoint checks its rows too.
    let mut dst = launch::fill(&dev, 3, "f32", 0.0).unwrap();
    launch::index_add_f32(&mut dst, (1, 3, 1), &src, &rows, 2).unwrap();
    index_add_reported(panic_of(&mut || {
        down(&dst, 3);
    }));
    assert_eq!(down(&dst, 3), vec![1.0, 0.0, 0.0]);
}

#[test]
fn conv_and_extreme_kernels_match_their_cpu_twins() {
    let Some(dev) = gpu() else { return };
    let g = crate::cpu::Conv2dGeometry {
        n: 2,
        c: 3,
        h: 7,
        w: 6,
        kernel: (3, 2),
        stride: (2, 1),
        padding: (1, 1),
        dilation: (1, 2),
    };
    let x = inputs(g.n * g.c * g.h * g.w, 61);
    let geom = launch::ConvGeom::new(&g).unwrap();
    let cols = launch::im2col_f32(&up(&dev, &x), geom, -9.0).unwrap();
    let want = crate::cpu::im2col(&x, &g, -9.0);
    close("im2col", &down(&cols, want.len()), &want, 0.0);
    let back = launch::col2im_f32(&up(&dev, &want), geom).unwrap();
    let want_back = crate::cpu::col2im(&want, &g);
    close("col2im", &down(&back, x.len()), &want_back, 1e-5);
    let (rows, n) = (13, 9);
    let mut v = inputs(rows * n, 67);
    v[4] = f32::NAN; // NaN wins its row
    let (vals, idx) = launch::extreme_last(&up(&dev, &v), rows, n, "f32", true).unwrap();
    let (got_v, got_i) = (down(&vals, rows), idx.read::<i64>(rows).unwrap());
    for (k, row) in v.chunks(n).enumerate() {
        let mut best = 0;
        for j in 1..n {
            if (row[j].is_nan() && !row[best].is_nan()) || row[j] > row[best] {
                best = j;
            }
        }
        assert_eq!(got_i[k], best as i64, "argmax row {k}");
        assert!(got_v[k] == row[best] || (got_v[k].is_nan() && row[best].is_nan()));
    }
}

#[test]
fn uploads_through_reused_pinned_staging_keep_every_value() {
    let Some(dev) = gpu() else { return };
    // Same-size uploads back to back reuse one staging block; each must land
    // intact although the host never waits between them.
    let bufs: Vec<(Vec<f32>, CudaBuffer)> = (0..64)
        .map(|k| {
            let v = inputs(100_000, k);
            let b = up(&dev, &v);
            (v, b)
        })
        .collect();
    for (k, (v, b)) in bufs.iter().enumerate() {
        close(&format!("upload {k}"), &down(b, v.len()), v, 0.0);
    }
}
