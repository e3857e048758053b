//! The fused attention kernels (`cu/attention.cu`), emulated with the
//! launchers' shapes and views, against their tiled CPU twin: the same
//! cases, placements and bounds as the GPU twin test (`twins/attention.rs`).

use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::cpu::AttentionOrder;
use crate::cuda::launch::attention::{AttentionViews, blocks};
use crate::cuda::launch::{AttentionRows, AttentionSpec};
use crate::cuda::twins::attention::{AttentionCase, Placement, attention_case, rounded, shapes};

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
            let AttentionCase {
                q,
                k,
                v,
                g,
                scale,
                want,
                grads: (want_dq, want_dk, want_dv),
            } = attention_case(d, causal, 10 * n as u32, dtype);
            for place in Placement::both(d.batch) {
                let what = |part: &str| format!("{dtype} {d:?} causal {causal} {place:?}: {part}");
                let mut job = Job::default();
                // Each input laid out as the placement says, its rows found
                // from its layout as the runtime finds them.
                let mut input = |x: &[f32], rows: usize, width_: usize, offset: usize| {
                    let laid = place.lay(x, rows, width_, offset);
                    let layout = place.layout(d.batch, rows, width_, offset);
                    if place.heads > 1 {
                        // The runtime gives results the order of the inputs.
                        assert_eq!(AttentionOrder::of(&layout), place.order);
                    }
                    let rows = AttentionRows::of(&layout).expect("a view with rows");
                    let buffer = job.buffer(bytes_as(&laid, dtype));
                    (Arg::Buffer(buffer, (offset * width) as u64), rows)
                };
                let (bq, rq) = input(&q, d.l, d.e, 0);
                let (bk, rk) = input(&k, d.s, d.e, place.k_pad());
                let (bv, rv) = input(&v, d.s, d.ev, 0);
                // The backward reads the CPU's output (rounded as the GPU
                // holds it), so the two differ only by their own arithmetic.
                let (cpu_out, rout) = input(&rounded(&want.out, dtype), d.l, d.ev, 0);
                let (bg, rg) = input(&g, d.l, d.ev, 0);
                let cpu_lse = job.buffer(bytes_as(&want.lse, "f32"));
                let out = job.output(d.batch * d.l * d.ev, width);
                let lse = job.output(d.batch * d.l, 4);
                let delta = job.output(d.batch * d.l, 4);
                let dq = job.output(d.batch * d.l * d.e, width);
                let dk = job.output(d.batch * d.s * d.e, width);
                let dv = job.output(d.batch * d.s * d.ev, width);
                // One struct for the three kernels, packed as the launcher
                // packs the backward's: the forward writes `out` in the
                // placement's order, as the backward reads the CPU's output.
                let spec = AttentionSpec {
                    d,
                    heads: place.heads,
                    scale,
                    causal,
                    dtype,
                };
                let views =
                    AttentionViews::backward(&spec, [rq, rk, rv, rout, rg], [place.order; 3]);
                let head = |args: Vec<Arg>| {
                    let mut a: Vec<Arg> = [d.l, d.s, d.e, d.ev].map(|x| x.arg()).to_vec();
                    a.extend([scale.arg(), (causal as i32).arg()]);
                    a.push(Arg::Value(views.bytes()));
                    a.extend(args);
                    a
                };
                let buf = |i| Arg::Buffer(i, 0);
                job.launch(
                    &format!("attention_forward_{dtype}"),
                    blocks(d, d.l, d.e),
                    &head(vec![bq.clone(), bk.clone(), bv.clone(), buf(out), buf(lse)]),
                );
                job.launch(
                    &format!("attention_backward_dq_{dtype}"),
                    blocks(d, d.l, d.e + d.ev),
                    &head(vec![
                        bq.clone(),
                        bk.clone(),
                        bv.clone(),
                        cpu_out,
                        buf(cpu_lse),
                        bg.clone(),
                        buf(delta),
                        buf(dq),
                    ]),
                );
                job.launch(
                    &format!("attention_backward_dkv_{dtype}"),
                    blocks(d, d.s, d.e + d.ev),
                    &head(vec![
                        bq,
                        bk,
                        bv,
                        buf(cpu_lse),
                        buf(delta),
                        bg,
                        buf(dk),
                        buf(dv),
                    ]),
                );
                let got = emu
                    .run(&job)
                    .unwrap_or_else(|e| panic!("{}: {e}", what("run")));
                let back = |i: usize, rows, width_| {
                    place.unlay(&floats_from(&got[i], dtype), rows, width_)
                };
                close(&what("out"), &back(out, d.l, d.ev), &want.out, tol);
                close(&what("lse"), &floats_from(&got[lse], "f32"), &want.lse, tol);
                close(&what("dq"), &back(dq, d.l, d.e), &want_dq, tol);
                close(&what("dk"), &back(dk, d.s, d.e), &want_dk, tol);
                close(&what("dv"), &back(dv, d.s, d.ev), &want_dv, tol);
            }
        }
    }
}
