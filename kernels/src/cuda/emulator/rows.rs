//! The row kernels (`cu/softmax.cu`, `cu/reduce.cu`, `cu/norm.cu`),
//! emulated with the launchers' shapes (`launch/rows.rs`: a block of 256
//! per row, or a thread per row or column), against their CPU twins, in
//! every float dtype and at widths under, at and over a block.

use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::cpu::{layer_norm_backward_rows, layer_norm_rows, log_softmax_rows, softmax_rows};
use crate::cuda::launch::rows::{column_chunks, column_partials};
use crate::cuda::launch::{elems, per_row};
use crate::cuda::twins::attention::rounded;

/// `got` within `tol` of `want`, relative to `1 + |want|`, or both NaN
/// (outside a function's domain the two agree on NaN).
pub(super) fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || g == w || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{i}]: emulated {g} vs CPU {w}");
    }
}

/// Deterministic inputs in [-2, 2).
pub(super) fn draw(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 4000;
            x as f32 / 1000.0 - 2.0
        })
        .collect()
}

/// Job buffers as pointer arguments.
pub(super) fn ptrs(args: &[usize]) -> Vec<Arg> {
    args.iter().map(|&b| Arg::Buffer(b, 0)).collect()
}

#[test]
fn emulated_softmax_sums_and_extremes_match_their_cpu_twins() {
    let [softmax, reduce] = ["softmax", "reduce"].map(|m| Emulator::module(m).unwrap());
    for (dtype, width, tol) in [("f32", 4, 1e-5), ("f16", 2, 4e-3), ("bf16", 2, 2e-2)] {
        for (rows, n) in [(17, 300), (3, 1), (2, 1000), (5, 256)] {
            let what = |op: &str| format!("{op}_{dtype} [{rows}, {n}]");
            let x = rounded(&draw(rows * n, n as u32), dtype);
            let mut job = Job::default();
            let bx = job.buffer(bytes_as(&x, dtype));
            let [sm, lsm] = [0; 2].map(|_| job.output(rows * n, width));
            for (op, y) in [("softmax", sm), ("log_softmax", lsm)] {
                let mut args = vec![n.arg()];
                args.extend(ptrs(&[bx, y]));
                job.launch(&format!("{op}_{dtype}"), per_row(rows), &args);
            }
            let got = softmax
                .run(&job)
                .unwrap_or_else(|e| panic!("{}: {e}", what("softmax")));
            close(
                &what("softmax"),
                &floats_from(&got[sm], dtype),
                &softmax_rows(&x, n),
                tol,
            );
            close(
                &what("log_softmax"),
                &floats_from(&got[lsm], dtype),
                &log_softmax_rows(&x, n),
                tol,
            );

            let mut job = Job::default();
            let bx = job.buffer(bytes_as(&x, dtype));
            let sum = job.output(rows, width);
            let [maxv, minv] = [0; 2].map(|_| job.output(rows, width));
            let [maxi, mini] = [0; 2].map(|_| job.output(rows, 8));
            let mut args = vec![n.arg()];
            args.extend(ptrs(&[bx, sum]));
            job.launch(&format!("sum_last_{dtype}"), per_row(rows), &args);
            for (max, v, i) in [(1i32, maxv, maxi), (0, minv, mini)] {
                let mut args = vec![rows.arg(), n.arg(), max.arg()];
                args.extend(ptrs(&[bx, v, i]));
                job.launch(&format!("extreme_last_{dtype}"), elems(rows), &args);
            }
            let got = reduce
                .run(&job)
                .unwrap_or_else(|e| panic!("{}: {e}", what("reduce")));
            let sums: Vec<f32> = x.chunks(n).map(|r| r.iter().sum()).collect();
            close(
                &what("sum_last"),
                &floats_from(&got[sum], dtype),
                &sums,
                tol,
            );
            for (max, v, i) in [(true, maxv, maxi), (false, minv, mini)] {
                let pick = |r: &[f32]| {
                    let mut best = 0;
                    for (j, &x) in r.iter().enumerate() {
                        if (max && x > r[best]) || (!max && x < r[best]) {
                            best = j;
                        }
                    }
                    best
                };
                let want_i: Vec<i64> = x.chunks(n).map(|r| pick(r) as i64).collect();
                let want_v: Vec<f32> = x.chunks(n).map(|r| r[pick(r)]).collect();
                let got_i: Vec<i64> = got[i]
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(got_i, want_i, "{} indices", what("extreme_last"));
                assert_eq!(
                    floats_from(&got[v], dtype),
                    want_v,
                    "{}",
                    what("extreme_last")
                );
            }
        }
    }
}

#[test]
fn emulated_column_sums_match_the_cpu_in_every_float_dtype() {
    let reduce = Emulator::module("reduce").unwrap();
    for (dtype, width, tol) in [("f32", 4, 1e-5), ("f16", 2, 4e-3), ("bf16", 2, 2e-2)] {
        // One chunk, chunks and column blocks cut mid-way, one column, and
        // more rows than 256 chunks of 64 hold.
        for (rows, n) in [(5, 3), (130, 40), (200, 70), (1000, 1), (20_000, 33)] {
            // Positive values: no cancellation, so f32 sums in any order
            // stay within the bound relative to the sum.
            let x: Vec<f32> = draw(rows * n, (rows + n) as u32)
                .iter()
                .map(|v| v.abs() / 2.0 + 0.5)
                .collect();
            let x = rounded(&x, dtype);
            let mut job = Job::default();
            let bx = job.buffer(bytes_as(&x, dtype));
            let (per, chunks) = column_chunks(rows);
            let partial = job.output(chunks * n, 4);
            let y = job.output(n, width);
            let mut args = vec![rows.arg(), n.arg(), per.arg()];
            args.extend(ptrs(&[bx, partial]));
            let shape = column_partials(n, chunks, 1);
            job.launch(&format!("sum_first_partials_{dtype}"), shape, &args);
            let mut args = vec![chunks.arg(), n.arg()];
            args.extend(ptrs(&[partial, y]));
            job.launch(&format!("sum_first_finish_{dtype}"), elems(n), &args);
            let what = format!("sum_first_{dtype} [{rows}, {n}]");
            let got = reduce.run(&job).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want: Vec<f32> = (0..n)
                .map(|j| (0..rows).map(|r| x[r * n + j] as f64).sum::<f64>() as f32)
                .collect();
            close(
                &what,
                &floats_from(&got[y], dtype),
                &rounded(&want, dtype),
                tol,
            );
        }
    }
}

#[test]
fn emulated_layer_norm_matches_its_cpu_twin_forward_and_backward() {
    let norm = Emulator::module("norm").unwrap();
    for (dtype, width, tol) in [("f32", 4, 1e-4), ("f16", 2, 1e-2), ("bf16", 2, 5e-2)] {
        // In f32 also shapes that cut the gradients' chunks of 64 rows and
        // blocks of 32 columns mid-way (a block per row is slow to emulate).
        let mut shapes = vec![(17, 300), (3, 1), (2, 1000), (5, 256)];
        if dtype == "f32" {
            shapes.extend([(130, 40), (200, 70)]);
        }
        for (rows, n) in shapes {
            for affine in [true, false] {
                let what = format!("layer_norm_{dtype} [{rows}, {n}] affine {affine}");
                let x = rounded(&draw(rows * n, 5), dtype);
                let (w, b) = (rounded(&draw(n, 11), dtype), rounded(&draw(n, 13), dtype));
                let g = rounded(&draw(rows * n, 17), dtype);
                let (cw, cb) = if affine {
                    (Some(&w[..]), Some(&b[..]))
                } else {
                    (None, None)
                };
                let cpu = layer_norm_rows(&x, n, cw, cb, 1e-5);
                let (want_dx, want_dw, want_db) =
                    layer_norm_backward_rows(&x, &g, n, &cpu.mean, &cpu.rstd, cw);

                let mut job = Job::default();
                let [bx, bw, bb, bg] = [&x, &w, &b, &g].map(|v| job.buffer(bytes_as(v, dtype)));
                let y = job.output(rows * n, width);
                let [mean, rstd] = [0; 2].map(|_| job.output(rows, 4));
                // The backward from the CPU's statistics, so it is compared alone.
                let cmean = job.buffer(bytes_as(&cpu.mean, "f32"));
                let crstd = job.buffer(bytes_as(&cpu.rstd, "f32"));
                let dx = job.output(rows * n, width);
                let [dw, db] = [0; 2].map(|_| job.output(n, width));
                let weight = |b: usize| if affine { Arg::Buffer(b, 0) } else { Arg::Null };
                let mut args = vec![n.arg(), 1e-5f32.arg(), Arg::Buffer(bx, 0)];
                args.extend([weight(bw), weight(bb)]);
                args.extend(ptrs(&[y, mean, rstd]));
                job.launch(&format!("layer_norm_{dtype}"), per_row(rows), &args);
                let mut args = vec![n.arg()];
                args.extend(ptrs(&[bx, bg, cmean, crstd]));
                args.extend([weight(bw), Arg::Buffer(dx, 0)]);
                job.launch(
                    &format!("layer_norm_backward_{dtype}"),
                    per_row(rows),
                    &args,
                );
                let (per, chunks) = column_chunks(rows);
                let [pw, pb] = [0; 2].map(|_| job.output(chunks * n, 4));
                let mut args = vec![rows.arg(), n.arg(), per.arg()];
                args.extend(ptrs(&[bx, bg, cmean, crstd, pw, pb]));
                let shape = column_partials(n, chunks, 2);
                job.launch(&format!("layer_norm_param_partials_{dtype}"), shape, &args);
                let mut args = vec![chunks.arg(), n.arg()];
                args.extend(ptrs(&[pw, pb, dw, db]));
                job.launch(&format!("layer_norm_param_grads_{dtype}"), elems(n), &args);

                let got = norm.run(&job).unwrap_or_else(|e| panic!("{what}: {e}"));
                let f = |b: usize, dt: &str| floats_from(&got[b], dt);
                close(&format!("{what}: y"), &f(y, dtype), &cpu.y, tol);
                close(&format!("{what}: mean"), &f(mean, "f32"), &cpu.mean, 1e-5);
                close(&format!("{what}: rstd"), &f(rstd, "f32"), &cpu.rstd, 1e-4);
                close(&format!("{what}: dx"), &f(dx, dtype), &want_dx, tol);
                close(&format!("{what}: dw"), &f(dw, dtype), &want_dw, tol);
                close(&format!("{what}: db"), &f(db, dtype), &want_db, tol);
            }
        }
    }
}

#[test]
fn emulated_running_sums_and_sorts_match_their_cpu_twins() {
    use crate::cpu::{cumsum_rows, sort_rows};
    let order = Emulator::module("order").unwrap();
    for (dtype, width) in [("f32", 4), ("f16", 2), ("bf16", 2)] {
        // Rows of one, odd and power-of-two widths, with ties (the draws
        // repeat) and NaN, which sorts last ascending and first descending.
        for (rows, n) in [(3, 1), (4, 7), (2, 64), (5, 33)] {
            let what = |op: &str| format!("{op}_{dtype} [{rows}, {n}]");
            let mut x = rounded(&draw(rows * n, n as u32), dtype);
            for v in x.iter_mut().step_by(5) {
                *v = (*v * 2.0).round() / 2.0;
            }
            if n > 3 {
                x[2] = f32::NAN;
            }
            let mut job = Job::default();
            let bx = job.buffer(bytes_as(&x, dtype));
            let sums = job.output(rows * n, width);
            let mut args = vec![rows.arg(), n.arg()];
            args.extend(ptrs(&[bx, sums]));
            job.launch(&format!("cumsum_last_{dtype}"), elems(rows), &args);
            let mut sorted = Vec::new();
            for descending in [0i32, 1] {
                let (v, i, s) = (
                    job.output(rows * n, width),
                    job.output(rows * n, 8),
                    job.output(rows * n, 8),
                );
                let mut args = vec![rows.arg(), n.arg(), descending.arg()];
                args.extend(ptrs(&[bx, v, i, s]));
                job.launch(&format!("sort_last_{dtype}"), elems(rows), &args);
                sorted.push((descending == 1, v, i));
            }
            let got = order
                .run(&job)
                .unwrap_or_else(|e| panic!("{}: {e}", what("order")));
            let want = cumsum_rows(&x, n, 0.0f64, |a, v| a + v as f64, |a| a as f32);
            let want = rounded(&want, dtype);
            let got_sums = floats_from(&got[sums], dtype);
            for (k, (g, w)) in got_sums.iter().zip(&want).enumerate() {
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "{}[{k}]: emulated {g} vs CPU {w}",
                    what("cumsum_last")
                );
            }
            for (descending, v, i) in sorted {
                let (want_v, want_i) = sort_rows(&x, n, descending);
                let got_i: Vec<i64> = got[i]
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(
                    got_i,
                    want_i,
                    "{} (descending {descending})",
                    what("sort_last")
                );
                let got_v = floats_from(&got[v], dtype);
                let same = got_v
                    .iter()
                    .zip(&want_v)
                    .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
                assert!(same, "{} values", what("sort_last"));
            }
        }
    }
}
