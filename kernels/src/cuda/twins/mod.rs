//! Each CUDA kernel, through its host launcher, against its CPU twin (the
//! oracle), on a real GPU. Without one (no driver, no device) every test
//! prints SKIPPED and passes; the GPU check script (`scripts/gpu-check.sh`)
//! runs them where a GPU is lent and fails on any SKIPPED.

//! The optimizer and indexing twins are in `optim.rs` and `index.rs`.

mod index;
mod optim;

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
