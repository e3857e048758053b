//! Each CUDA kernel, through its host launcher, against its CPU twin (the
//! oracle), on a real GPU. Without one (no driver, no device) every test
//! prints SKIPPED and passes; the GPU check script (`scripts/gpu-check.sh`)
//! runs them where a GPU is lent and fails on any SKIPPED.

//! The attention, optimizer and indexing twins are in `attention.rs`,
//! `optim.rs` and `index.rs`.

pub(super) mod attention;
mod index;
pub(super) mod optim;

use super::launch;
use super::{CudaBuffer, CudaDevice, device};
use crate::Layout;
use crate::elementwise::{BINARY_ROWS, Domain, UNARY_ROWS};
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

/// The inputs a row's twin test draws from (`Domain`): `x` in `[-2, 2]`.
fn in_domain(x: &[f32], d: Domain) -> Vec<f32> {
    match d {
        Domain::Any => x.to_vec(),
        Domain::Positive => x.iter().map(|v| v.abs() + 0.5).collect(),
        Domain::Wide => x.iter().map(|v| v * 3.0).collect(),
        Domain::Unit => x.iter().map(|v| v * 0.45).collect(),
        Domain::AboveOne => x.iter().map(|v| v.abs() + 1.1).collect(),
        Domain::Probability => x.iter().map(|v| v * 0.2 + 0.5).collect(),
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn unary_and_binary_f32_match_the_cpu_with_broadcasting_and_views() {
    let Some(dev) = gpu() else { return };
    let (rows, cols) = (33, 70);
    let n = rows * cols;
    let a = inputs(n, 1);
    let b = inputs(cols, 7);
    let la = Layout::contiguous(&[rows, cols]);
    // Every unary row, on inputs in its domain, against the row's CPU function.
    for r in UNARY_ROWS {
        let x = in_domain(&a, r.domain);
        let (p0, p1) = (r.sample[0] as f32, r.sample[1] as f32);
        let y = launch::unary(&up(&dev, &x), &la, r.name, "f32", p0, p1).unwrap();
        let want: Vec<f32> = x.iter().map(|&v| (r.reference)(v, r.sample)).collect();
        close(r.name, &down(&y, n), &want, 1e-5);
    }
    // A transposed view reads through its strides.
    let da = up(&dev, &a);
    let t = la.transpose(0, 1);
    let y = launch::unary(&da, &t, "neg", "f32", 0.0, 0.0).unwrap();
    let want: Vec<f32> = crate::cpu::copy_strided(&a, &t)
        .iter()
        .map(|v| -v)
        .collect();
    close("neg of a transpose", &down(&y, n), &want, 0.0);
    // Every binary row against a broadcast row operand.
    let db = up(&dev, &b);
    let lb = Layout::contiguous(&[cols]).broadcast_to(&[rows, cols]);
    for r in BINARY_ROWS {
        let x = in_domain(&a, r.domain);
        let y = launch::binary(&up(&dev, &x), &la, &db, &lb, r.name, "f32", r.sample as f32);
        let want: Vec<f32> = (0..n)
            .map(|i| (r.reference)(x[i], b[i % cols], r.sample))
            .collect();
        close(r.name, &down(&y.unwrap(), n), &want, 1e-6);
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn arange_matches_the_cpu_twin() {
    let Some(dev) = gpu() else { return };
    let n = 100_003;
    let ints = launch::arange_i64(&dev, n, -7, 3).unwrap();
    assert_eq!(
        ints.read::<i64>(n).unwrap(),
        crate::cpu::arange_i64(n, -7, 3)
    );
    // Computed in f64 and rounded once on both: bit for bit.
    let floats = launch::arange_f32(&dev, n, 0.1, 0.003).unwrap();
    close(
        "arange f32",
        &down(&floats, n),
        &crate::cpu::arange_f32(n, 0.1, 0.003),
        0.0,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn philox_draws_match_the_cpu_twin() {
    let Some(dev) = gpu() else { return };
    // An offset that is not a multiple of 4 and a length that crosses blocks.
    let (n, seed, offset) = (10_001, 0x1234_5678_9abc_def0, 4_294_967_294);
    let u = launch::philox(&dev, n, seed, offset, false).unwrap();
    // Uniform draws are exact: integer bits scaled by a power of two.
    close(
        "philox uniform",
        &down(&u, n),
        &crate::cpu::philox_uniform(seed, offset, n),
        0.0,
    );
    let z = launch::philox(&dev, n, seed, offset, true).unwrap();
    // Normal draws go through logf, sinf and cosf: a few ulp apart.
    close(
        "philox normal",
        &down(&z, n),
        &crate::cpu::philox_normal(seed, offset, n),
        2e-6,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
        let y = launch::binary(&h, &l, &h, &l, "add", dtype, 0.0).unwrap();
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
    // Backward, with and without the weight, from the GPU's statistics.
    let g = inputs(rows * d, 17);
    let dg = up(&dev, &g);
    let (m, r) = (down(&mean, rows), down(&rstd, rows));
    for weight in [Some(&w), None] {
        let want = crate::cpu::layer_norm_backward_rows(&x, &g, d, &m, &r, weight.map(|w| &w[..]));
        let dwt = weight.map(|w| up(&dev, w));
        let (gx, gw, gb) =
            launch::layer_norm_backward(&dx, &dg, &mean, &rstd, dwt.as_ref(), [rows, d], "f32")
                .unwrap();
        let with = if weight.is_some() {
            "weighted"
        } else {
            "plain"
        };
        close(
            &format!("layer_norm dx ({with})"),
            &down(&gx, rows * d),
            &want.0,
            1e-4,
        );
        close(
            &format!("layer_norm dw ({with})"),
            &down(&gw, d),
            &want.1,
            1e-4,
        );
        close(
            &format!("layer_norm db ({with})"),
            &down(&gb, d),
            &want.2,
            1e-4,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn conv_and_extreme_kernels_match_their_cpu_twins() {
    let Some(dev) = gpu() else { return };
    let g = crate::Conv2dGeometry {
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
    let mut px = x.clone();
    px[5] = f32::NAN; // NaN wins its windows
    let (pv, pi) = launch::max_pool2d_f32(&up(&dev, &px), geom).unwrap();
    let (want_v, want_i) = crate::cpu::max_pool2d(&px, &g);
    let got_v = down(&pv, want_v.len());
    for (k, (a, b)) in got_v.iter().zip(&want_v).enumerate() {
        assert!(
            a == b || (a.is_nan() && b.is_nan()),
            "max_pool2d value {k}: {a} vs {b}"
        );
    }
    assert_eq!(
        pi.read::<i64>(want_i.len()).unwrap(),
        want_i,
        "max_pool2d indices"
    );
    let grad = inputs(want_v.len(), 71);
    let gx = launch::max_pool2d_backward_f32(&up(&dev, &grad), &pi, geom).unwrap();
    let want_gx = crate::cpu::max_pool2d_backward(&grad, &want_i, g.n * g.c, g.h * g.w);
    close("max_pool2d_backward", &down(&gx, x.len()), &want_gx, 1e-6);
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
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
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
