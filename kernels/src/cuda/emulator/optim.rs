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
use crate::cuda::launch::MULTI;
use crate::cuda::launch::elems;
use crate::cuda::launch::optim::{MultiTensors, UpdatePlan, multi_blocks};
use crate::cuda::twins::attention::rounded;
use crate::cuda::twins::optim::{StepAt, configs};
use crate::optim::OptimStep;

/// One step of the CPU twin, each stored value rounded through `dtype` as
/// the kernel stores it.
fn cpu_step(s: &OptimStep, p: &mut Vec<f32>, g: &[f32], st: &mut [Vec<f32>], dtype: &str) {
    let mut views: Vec<&mut [f32]> = st.iter_mut().map(|v| &mut v[..]).collect();
    s.apply(p, g, &mut views);
    *p = rounded(p, dtype);
    st.iter_mut().for_each(|v| *v = rounded(v, dtype));
}

/// The launch plans of steps 0, 1, 2 with their hyper structs' bytes, and
/// a hyper table holding those bytes in rows 0, 1, 2.
fn plans_and_table(step: &StepAt) -> (Vec<(UpdatePlan, Vec<u8>)>, Vec<u8>) {
    let mut table = vec![0u8; 3 * ROW];
    let plans = (0..3)
        .map(|t| {
            let plan = UpdatePlan::new(&step(t));
            let hyper = plan.hyper.bytes();
            table[t * ROW..t * ROW + hyper.len()].copy_from_slice(&hyper);
            (plan, hyper)
        })
        .collect();
    (plans, table)
}

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
            for t in 0..3 {
                cpu_step(&step(t), &mut p, &g, &mut st, dtype);
            }
            let (launches, table) = plans_and_table(&step);
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

/// `multi` by value, its addresses (job buffer + 1, or 0 for null) filled
/// in by the harness: the arrays after the lengths hold them.
fn with_addresses(multi: &MultiTensors) -> Arg {
    let bytes = multi.bytes();
    let lengths = 8 * MULTI;
    let patches = (lengths..bytes.len())
        .step_by(8)
        .filter_map(|at| {
            let v = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
            (v != 0).then(|| (at, v as usize - 1))
        })
        .collect();
    Arg::Addresses(bytes, patches)
}

/// The multi-tensor kernels (`<op>_multi_<T>`, and `_multi_at_` from a
/// table row) on three tensors of different lengths at once, as the
/// launcher packs them (`MultiTensors::new`, `multi_blocks`), against
/// `OptimStep::apply` on each tensor alone.
#[test]
fn emulated_multi_tensor_updates_step_each_tensor_as_alone() {
    let optim = Emulator::module("optim").unwrap();
    let lens = [1000, 7, 300];
    for (dtype, tol) in [("f32", 1e-5), ("bf16", 2e-2)] {
        for (name, step) in configs() {
            let states = step(0).state_len();
            let mut job = Job::default();
            // Per tensor: CPU values and state, and (per launch form) the
            // job buffers of the parameter and its state.
            let mut cpu = Vec::new();
            let mut forms: Vec<Vec<(usize, usize, Vec<usize>)>> = vec![Vec::new(), Vec::new()];
            for (k, &n) in lens.iter().enumerate() {
                let p = rounded(&draw(n, 17 + k as u32), dtype);
                let g = rounded(&draw(n, 19 + k as u32), dtype);
                let bg = job.buffer(bytes_as(&g, dtype));
                for form in forms.iter_mut() {
                    let bp = job.buffer(bytes_as(&p, dtype));
                    let bst = (0..states).map(|_| job.buffer(bytes_as(&vec![0.0; n], dtype)));
                    form.push((bp, bg, bst.collect()));
                }
                cpu.push((p, g, vec![vec![0.0f32; n]; states]));
            }
            for t in 0..3 {
                for (p, g, st) in cpu.iter_mut() {
                    cpu_step(&step(t), p, g, st, dtype);
                }
            }
            let (plans, table) = plans_and_table(&step);
            let bt = job.buffer(table);
            for (t, (plan, hyper)) in plans.iter().enumerate() {
                for (f, form) in forms.iter().enumerate() {
                    // Buffer index + 1 stands for each address (0 is null);
                    // the harness writes the real ones.
                    let items: Vec<(u64, u64, Vec<u64>, usize)> = form
                        .iter()
                        .zip(lens)
                        .map(|((bp, bg, bst), n)| {
                            let s = bst.iter().map(|&b| b as u64 + 1).collect();
                            (*bp as u64 + 1, *bg as u64 + 1, s, n)
                        })
                        .collect();
                    let multi = MultiTensors::new(plan, &items);
                    let h = match f {
                        0 => Arg::Value(hyper.clone()),
                        _ => Arg::Buffer(bt, (t * ROW) as u64),
                    };
                    let kernel = match f {
                        0 => format!("{}_multi_{dtype}", plan.op),
                        _ => format!("{}_multi_at_{dtype}", plan.op),
                    };
                    let table = with_addresses(&multi);
                    job.launch(&kernel, multi_blocks(1000, lens.len()), &[table, h]);
                }
            }
            let got = optim
                .run(&job)
                .unwrap_or_else(|e| panic!("{name} ({dtype}): {e}"));
            for (f, form) in forms.iter().enumerate() {
                for ((bp, _, bst), (p, _, st)) in form.iter().zip(&cpu) {
                    let what = format!("{name} ({dtype}, multi form {f}, {} elements)", p.len());
                    close(&what, &floats_from(&got[*bp], dtype), p, tol);
                    for (b, want) in bst.iter().zip(st) {
                        close(&what, &floats_from(&got[*b], dtype), want, tol);
                    }
                }
            }
        }
    }
}
