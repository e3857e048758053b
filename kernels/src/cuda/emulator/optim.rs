//! The fused optimizer kernels (`cu/optim.cu`), emulated from the
//! launcher's own plan (`launch::optim::UpdatePlan`: which state buffer each
//! kernel pointer is, and the hyper-parameter struct), three steps against
//! `OptimStep::apply` (the CPU twin) in every configuration and float dtype
//! of the GPU twin test, with the hyper struct by value and (the `_at`
//! kernels of a CUDA graph's step) from a hyper-table row, as its bytes
//! (`hyper::row_bytes`). The first GPU run found plain SGD wrong here;
//! this runs that path without a GPU.

use super::rows::{close, draw};
use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::cuda::hyper::ROW;
use crate::cuda::launch::elems;
use crate::cuda::launch::optim::UpdatePlan;
use crate::cuda::twins::attention::rounded;
use crate::cuda::twins::optim::configs;

#[test]
fn emulated_optimizer_kernels_step_as_their_cpu_twin_from_the_launch_plan() {
    let optim = Emulator::module("optim").unwrap();
    let n = 5000;
    for (dtype, tol) in [("f32", 1e-5), ("f16", 4e-3), ("bf16", 2e-2)] {
        for (name, step) in configs() {
            let states = step(0).state_len();
            let mut p = rounded(&draw(n, 17), dtype);
            let g = rounded(&draw(n, 19), dtype);
            let mut st = vec![vec![0.0f32; n]; states];
            let mut job = Job::default();
            let bg = job.buffer(bytes_as(&g, dtype));
            // Two copies of the parameter and its state: one stepped by
            // the kernels taking the hyper struct by value, one by the
            // `_at` kernels reading it from a hyper-table row (inside a
            // CUDA graph).
            let copies: Vec<(usize, Vec<usize>)> = (0..2)
                .map(|_| {
                    let bp = job.buffer(bytes_as(&p, dtype));
                    let bst = st.iter().map(|s| job.buffer(bytes_as(s, dtype))).collect();
                    (bp, bst)
                })
                .collect();
            let mut table = vec![0u8; 3 * ROW];
            let mut launches = Vec::new();
            for t in 0..3 {
                let s = step(t);
                let mut views: Vec<&mut [f32]> = st.iter_mut().map(|v| &mut v[..]).collect();
                s.apply(&mut p, &g, &mut views);
                p = rounded(&p, dtype);
                st.iter_mut().for_each(|v| *v = rounded(v, dtype));

                let plan = UpdatePlan::new(&s);
                let hyper = plan.hyper.bytes();
                table[t * ROW..t * ROW + hyper.len()].copy_from_slice(&hyper);
                launches.push((plan, hyper));
            }
            let bt = job.buffer(table);
            for (t, (plan, hyper)) in launches.into_iter().enumerate() {
                for (copy, (bp, bst)) in copies.iter().enumerate() {
                    let mut args = vec![n.arg(), Arg::Buffer(*bp, 0), Arg::Buffer(bg, 0)];
                    args.extend(plan.state.iter().map(|k| match k {
                        Some(i) => Arg::Buffer(bst[*i], 0),
                        None => Arg::Null,
                    }));
                    let (kernel, h) = match copy {
                        0 => (format!("{}_{dtype}", plan.op), Arg::Value(hyper.clone())),
                        _ => (
                            format!("{}_at_{dtype}", plan.op),
                            Arg::Buffer(bt, (t * ROW) as u64),
                        ),
                    };
                    args.push(h);
                    job.launch(&kernel, elems(n), &args);
                }
            }
            let got = optim
                .run(&job)
                .unwrap_or_else(|e| panic!("{name} ({dtype}): {e}"));
            for (copy, (bp, bst)) in copies.iter().enumerate() {
                let what = format!(
                    "{name} ({dtype}, {})",
                    ["by value", "from a table row"][copy]
                );
                close(&what, &floats_from(&got[*bp], dtype), &p, tol);
                for (k, (b, want)) in bst.iter().zip(&st).enumerate() {
                    let got = floats_from(&got[*b], dtype);
                    close(&format!("{what} state {k}"), &got, want, tol);
                }
            }
        }
    }
}
