//! `compile`'s fused elementwise programs as generated CUDA kernels
//! (`Program::cuda_source`, launched by `launch::run_program`), emulated
//! against their CPU twin `cpu::run_program`: every instruction alone and
//! its backward program, the binary ones with a cycled (bias) operand, and
//! the chains `compile` fuses in the benchmarks, forward and backward.

use super::rows::{close, draw};
use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::cpu::{Operand, run_program};
use crate::cuda::launch::elems;
use crate::cuda::modules::Module;
use crate::program::{Binary, Inst, Program, Unary};
use std::borrow::Cow;

/// `y = op(x)` for every unary instruction, and `y = op(x, b)` with `b`
/// cycled for every binary one.
fn single_ops() -> Vec<Program> {
    let unary = Unary::ALL.iter().map(|&u| Program {
        n_inputs: 1,
        insts: vec![Inst::Input(0), Inst::Unary(u, 0)],
        outputs: vec![1],
    });
    let binary = Binary::ALL.iter().map(|&b| Program {
        n_inputs: 2,
        insts: vec![Inst::Input(0), Inst::Input(1), Inst::Binary(b, 0, 1)],
        outputs: vec![2],
    });
    unary.chain(binary).collect()
}

/// The fusion benchmark's `h·σ(h) + tanh(h)·0.5` with `h = x + bias`,
/// GELU of a biased input, and a two-output program with constants that
/// are not finite.
fn chains() -> Vec<Program> {
    use Binary::{Add, Mul};
    vec![
        Program {
            n_inputs: 2,
            insts: vec![
                Inst::Input(0),
                Inst::Input(1),
                Inst::Binary(Add, 0, 1),
                Inst::Unary(Unary::Sigmoid, 2),
                Inst::Binary(Mul, 2, 3),
                Inst::Unary(Unary::Tanh, 2),
                Inst::Const(0.5),
                Inst::Binary(Mul, 5, 6),
                Inst::Binary(Add, 4, 7),
            ],
            outputs: vec![8],
        },
        Program {
            n_inputs: 2,
            insts: vec![
                Inst::Input(0),
                Inst::Input(1),
                Inst::Binary(Add, 0, 1),
                Inst::Unary(Unary::Gelu, 2),
            ],
            outputs: vec![3],
        },
        Program {
            n_inputs: 1,
            insts: vec![
                Inst::Input(0),
                Inst::Const(f32::NEG_INFINITY),
                Inst::Binary(Binary::Div, 0, 1),
                Inst::Const(-0.0),
                Inst::Binary(Mul, 0, 3),
            ],
            outputs: vec![2, 4],
        },
    ]
}

/// Each program, then its backward (for every input) where it has one.
fn programs() -> Vec<Program> {
    let mut out = Vec::new();
    for p in single_ops().into_iter().chain(chains()) {
        if p.outputs.len() == 1 && p.differentiable() {
            out.push(p.backward(&vec![true; p.n_inputs]));
        }
        out.push(p);
    }
    out
}

#[test]
fn emulated_fused_programs_match_their_cpu_twin_forward_and_backward() {
    let programs = programs();
    // One module of every program's kernel: the helpers once, then each
    // kernel as `Program::cuda_source` writes it.
    let helpers = crate::elementwise::CUDA_HELPERS;
    let mut names: Vec<String> = programs.iter().map(|p| p.cuda_name()).collect();
    let mut source = helpers.to_string();
    for (p, name) in programs.iter().zip(&names) {
        if !source.contains(&format!(" {name}(")) {
            source.push_str(&p.cuda_source(name)[helpers.len()..]);
        }
    }
    names.sort();
    names.dedup();
    let module = Module {
        name: "fused_programs",
        source: Cow::Owned(source),
        kernels: names.clone(),
    };
    let emu = Emulator::build(&module).unwrap();

    let n = 1000;
    // The first input spans [0.1, 4.1) (log, sqrt and rsqrt stay defined),
    // the others [-2, 2): odd ones cycled (7 long, a bias row), even ones
    // full.
    let first: Vec<f32> = draw(n, 3).iter().map(|v| v + 2.1).collect();
    let signed = draw(n, 5);
    let mut job = Job::default();
    let mut runs = Vec::new();
    for p in &programs {
        let values: Vec<Vec<f32>> = (0..p.n_inputs)
            .map(|k| match k {
                0 => first.clone(),
                k if k % 2 == 0 => signed.clone(),
                k => draw(7, k as u32 + 11),
            })
            .collect();
        let mut args = vec![n.arg()];
        for v in &values {
            args.extend([
                Arg::Buffer(job.buffer(bytes_as(v, "f32")), 0),
                v.len().arg(),
            ]);
        }
        let outs: Vec<usize> = p.outputs.iter().map(|_| job.output(n, 4)).collect();
        args.extend(outs.iter().map(|&o| Arg::Buffer(o, 0)));
        job.launch(&p.cuda_name(), elems(n), &args);
        runs.push((values, outs));
    }
    let got = emu.run(&job).unwrap();
    for (p, (values, outs)) in programs.iter().zip(runs) {
        let operands: Vec<Operand> = values
            .iter()
            .map(|v| match v.len() == n {
                true => Operand::Full(v),
                false => Operand::Cycle(v),
            })
            .collect();
        let want = run_program(p, &operands, &[], n);
        for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
            let what = format!("output {k} of {:?}", p.insts);
            close(&what, &floats_from(&got[*o], "f32"), w, 1e-5);
        }
    }
}
