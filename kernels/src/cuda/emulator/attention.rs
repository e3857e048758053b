//! The fused attention kernels (`cu/attention.cu`), emulated with the
//! launchers' shapes, against their tiled CPU twin: the same cases and
//! bounds as the GPU twin test (`twins/attention.rs`).

use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::cuda::launch::attention::blocks;
use crate::cuda::twins::attention::{AttentionCase, attention_case, rounded, shapes};

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || g == w;
        assert!(ok, "{what}[{i}]: emulated {g} vs CPU {w}");
    }
}

#[test]
fn emulated_attention_kernels_match_their_cpu_twin_forward_and_backward() {
    let emu = Emulator::module("attention").unwrap();
    for (dtype, width, tol) in [("f32", 4, 2e-5), ("f16", 2, 2e-2), ("bf16", 2, 6e-2)] {
        for (n, (d, causal)) in shapes().into_iter().enumerate() {
            let what = |part: &str| format!("{dtype} {d:?} causal {causal}: {part}");
            let AttentionCase {
                q,
                k,
                v,
                g,
                scale,
                want,
                grads: (want_dq, want_dk, want_dv),
            } = attention_case(d, causal, 10 * n as u32, dtype);

            let mut job = Job::default();
            let [bq, bk, bv] = [&q, &k, &v].map(|x| job.buffer(bytes_as(x, dtype)));
            let out = job.output(d.batch * d.l * d.ev, width);
            let lse = job.output(d.batch * d.l, 4);
            // The backward reads the CPU's output (rounded as the GPU holds
            // it), so the two differ only by their own arithmetic.
            let cpu_out = job.buffer(bytes_as(&rounded(&want.out, dtype), dtype));
            let cpu_lse = job.buffer(bytes_as(&want.lse, "f32"));
            let bg = job.buffer(bytes_as(&g, dtype));
            let delta = job.output(d.batch * d.l, 4);
            let dq = job.output(d.batch * d.l * d.e, width);
            let dk = job.output(d.batch * d.s * d.e, width);
            let dv = job.output(d.batch * d.s * d.ev, width);
            let sizes = [d.l, d.s, d.e, d.ev].map(|x| x.arg());
            let head = |job_args: &[usize]| {
                let mut a: Vec<Arg> = sizes.to_vec();
                a.extend([scale.arg(), (causal as i32).arg()]);
                a.extend(job_args.iter().map(|&b| Arg::Buffer(b, 0)));
                a
            };
            job.launch(
                &format!("attention_forward_{dtype}"),
                blocks(d, d.l, d.e),
                &head(&[bq, bk, bv, out, lse]),
            );
            job.launch(
                &format!("attention_backward_dq_{dtype}"),
                blocks(d, d.l, d.e + d.ev),
                &head(&[bq, bk, bv, cpu_out, cpu_lse, bg, delta, dq]),
            );
            job.launch(
                &format!("attention_backward_dkv_{dtype}"),
                blocks(d, d.s, d.e + d.ev),
                &head(&[bq, bk, bv, cpu_lse, delta, bg, dk, dv]),
            );
            let got = emu
                .run(&job)
                .unwrap_or_else(|e| panic!("{}: {e}", what("run")));
            close(&what("out"), &floats_from(&got[out], dtype), &want.out, tol);
            close(&what("lse"), &floats_from(&got[lse], "f32"), &want.lse, tol);
            close(&what("dq"), &floats_from(&got[dq], dtype), &want_dq, tol);
            close(&what("dk"), &floats_from(&got[dk], dtype), &want_dk, tol);
            close(&what("dv"), &floats_from(&got[dv], dtype), &want_dv, tol);
        }
    }
}
