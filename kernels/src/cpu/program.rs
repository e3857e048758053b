//! The CPU interpreter of elementwise [`Program`]s: the elements are cut into
//! tiles small enough that every value of the program stays in L1, each
//! instruction runs as one vectorisable loop over the tile, and only the
//! outputs are written to memory.

use super::philox::DropoutMask;
use crate::elementwise::{BinaryFn, UnaryFn};
use crate::program::{Binary, BinaryVisit, Inst, Program, Unary, UnaryVisit};
use crate::{alloc, threads};
use std::mem::MaybeUninit;

/// Elements per tile: 128 f32 (512 bytes) per value, so a program of 90
/// values keeps its tile in a 48 KiB L1; 64-512 measured about the same
/// on this machine's noise, 128 a little ahead.
const TILE: usize = 128;

/// Elements per parallel task.
const TASK: usize = 64 * TILE;

/// One input of a program run.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// One value per element.
    Full(&'a [f32]),
    /// A trailing-dims broadcast: element `i` reads `v[i % v.len()]` (a
    /// bias row against a batch of rows).
    Cycle(&'a [f32]),
    /// One value for every element.
    Scalar(f32),
}

/// Runs `p` over `n` elements: output `k`'s element `i` is `out[k][i]`,
/// each in a fresh buffer from the caching allocator, written once (no
/// zero fill first); `seeds` key the program's dropout masks
/// ([`Program::seeds`] of them).
///
/// ```
/// use tapir_kernels::cpu::{Operand, run_program};
/// use tapir_kernels::program::{Binary, Inst, Program};
/// let p = Program {
///     n_inputs: 2,
///     insts: vec![Inst::Input(0), Inst::Input(1), Inst::Binary(Binary::Add, 0, 1)],
///     outputs: vec![2],
/// };
/// let out = run_program(&p, &[Operand::Full(&[1.0, 2.0, 3.0, 4.0]), Operand::Cycle(&[10.0, 20.0])], &[], 4);
/// assert_eq!(out, [[11.0, 22.0, 13.0, 24.0]]);
/// ```
pub fn run_program(p: &Program, inputs: &[Operand], seeds: &[u64], n: usize) -> Vec<Vec<f32>> {
    assert!(
        inputs.len() == p.n_inputs,
        "run_program: {} inputs given to a program of {}",
        inputs.len(),
        p.n_inputs
    );
    for i in inputs {
        let ok = match i {
            Operand::Full(v) => v.len() >= n,
            Operand::Cycle(v) => !v.is_empty(),
            Operand::Scalar(_) => true,
        };
        assert!(ok, "run_program: an input is shorter than {n} elements");
    }
    assert!(
        seeds.len() >= p.seeds(),
        "run_program: {} seeds for a program with {} dropouts",
        seeds.len(),
        p.seeds()
    );
    let mut outs: Vec<Vec<f32>> = p.outputs.iter().map(|_| alloc::with_capacity(n)).collect();
    let spare: Vec<&mut [MaybeUninit<f32>]> = outs
        .iter_mut()
        .map(|v| &mut v.spare_capacity_mut()[..n])
        .collect();
    threads::par_chunks_mut_many(spare, TASK, |task, pieces| {
        let mut regs = vec![0.0f32; p.insts.len() * TILE];
        let len = pieces.first().map_or(0, |s| s.len());
        let mut at = 0;
        while at < len {
            let m = TILE.min(len - at);
            run_tile(p, inputs, seeds, task * TASK + at, m, &mut regs);
            for (out, &r) in pieces.iter_mut().zip(&p.outputs) {
                let start = task * TASK + at;
                let src = match full_input(p, inputs, r) {
                    Some(v) => &v[start..start + m],
                    None => &regs[r * TILE..r * TILE + m],
                };
                for (d, &v) in out[at..at + m].iter_mut().zip(src) {
                    d.write(v);
                }
            }
            at += m;
        }
    });
    for v in &mut outs {
        // SAFETY: the tasks above wrote every one of the first `n` slots of
        // each output's spare capacity (the chunks cover `0..n`, the tiles
        // each chunk), and `with_capacity(n)` holds at least `n`.
        unsafe { v.set_len(n) };
    }
    outs
}

/// Every instruction of `p` over elements `start..start + m` into `regs`
/// (value `i` at `regs[i * TILE..]`); `start` is a multiple of 4.
fn run_tile(
    p: &Program,
    inputs: &[Operand],
    seeds: &[u64],
    start: usize,
    m: usize,
    regs: &mut [f32],
) {
    for (i, inst) in p.insts.iter().enumerate() {
        let (before, rest) = regs.split_at_mut(i * TILE);
        let dst = &mut rest[..m];
        // A value's elements for this tile: a full input read in place
        // (never copied into its register), else its register.
        let value = |x: usize| -> &[f32] {
            match full_input(p, inputs, x) {
                Some(v) => &v[start..start + m],
                None => &before[x * TILE..x * TILE + m],
            }
        };
        match *inst {
            Inst::Input(_) if full_input(p, inputs, i).is_some() => {}
            Inst::Input(k) => load(inputs[k], start, dst),
            Inst::Const(c) => dst.fill(c),
            Inst::Unary(op, x) => unary_loop(op, value(x), dst),
            Inst::Binary(op, a, b) => binary_loop(op, value(a), value(b), dst),
            Inst::Dropout { x, keep, seed } => {
                let src = value(x);
                let mask = DropoutMask::new(keep, seeds[seed]);
                for (q, (d, s)) in dst.chunks_mut(4).zip(src.chunks(4)).enumerate() {
                    let bits = mask.block((start / 4 + q) as u64);
                    for ((d, &s), &k) in d.iter_mut().zip(s).zip(&bits) {
                        *d = s * k;
                    }
                }
            }
        }
    }
}

/// The elements of value `x` when it is a full input (read in place).
fn full_input<'a>(p: &Program, inputs: &[Operand<'a>], x: usize) -> Option<&'a [f32]> {
    match p.insts[x] {
        Inst::Input(k) => match inputs[k] {
            Operand::Full(v) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// `dst = op(src)`, the match outside the loop so each row's loop
/// vectorises: the row's fast form, then its exact form on the rare
/// elements if any (`UnaryFn::fast`), as the eager kernel.
fn unary_loop(op: Unary, src: &[f32], dst: &mut [f32]) {
    struct Loop<'a>(&'a [f32], &'a mut [f32]);
    impl UnaryVisit for Loop<'_> {
        fn visit<R: UnaryFn>(self, row: R) {
            let Loop(src, dst) = self;
            let any_rare = threads::simd(
                #[inline(always)]
                || {
                    let mut any = false;
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = row.fast(s);
                        any |= row.rare(s);
                    }
                    any
                },
            );
            if any_rare {
                for (d, &s) in dst.iter_mut().zip(src) {
                    if row.rare(s) {
                        *d = row.f(s);
                    }
                }
            }
        }
    }
    op.visit(Loop(src, dst))
}

/// `dst = op(a, b)`.
fn binary_loop(op: Binary, a: &[f32], b: &[f32], dst: &mut [f32]) {
    struct Loop<'a>(&'a [f32], &'a [f32], &'a mut [f32]);
    impl BinaryVisit for Loop<'_> {
        fn visit<R: BinaryFn>(self, row: R) {
            let Loop(a, b, dst) = self;
            threads::simd(
                #[inline(always)]
                || {
                    for (d, (&u, &v)) in dst.iter_mut().zip(a.iter().zip(b)) {
                        *d = row.f(u, v);
                    }
                },
            )
        }
    }
    op.visit(Loop(a, b, dst))
}

fn load(input: Operand, start: usize, dst: &mut [f32]) {
    match input {
        Operand::Full(v) => dst.copy_from_slice(&v[start..start + dst.len()]),
        Operand::Scalar(c) => dst.fill(c),
        Operand::Cycle(v) if v.len() == 1 => dst.fill(v[0]),
        Operand::Cycle(v) => {
            let mut j = start % v.len();
            for d in dst.iter_mut() {
                *d = v[j];
                j += 1;
                if j == v.len() {
                    j = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiled, threaded and with a cycling input, against an element-by-
    /// element evaluation, over a length that is not a multiple of a tile.
    #[test]
    fn tiles_agree_with_one_element_at_a_time() {
        let p = Program {
            n_inputs: 3,
            insts: vec![
                Inst::Input(0),
                Inst::Input(1),
                Inst::Binary(Binary::Add, 0, 1),
                Inst::Unary(Unary::Gelu, 2),
                Inst::Input(2),
                Inst::Binary(Binary::Mul, 3, 4),
            ],
            outputs: vec![5, 3],
        };
        let n = 3 * TASK + 77;
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let bias: Vec<f32> = (0..13).map(|i| i as f32 * 0.1 - 0.6).collect();
        crate::threads::set_num_threads(2);
        let out = run_program(
            &p,
            &[
                Operand::Full(&x),
                Operand::Cycle(&bias),
                Operand::Scalar(1.5),
            ],
            &[],
            n,
        );
        let (a, b) = (&out[0], &out[1]);
        assert_eq!((a.len(), b.len()), (n, n));
        for i in [0, 1, 255, 256, 4095, TASK, n - 1] {
            let g = Unary::Gelu.eval(x[i] + bias[i % 13]);
            assert_eq!((a[i], b[i]), (g * 1.5, g), "element {i}");
        }
    }

    /// A fused ReLU's backward is the eager one's (PyTorch's
    /// threshold_backward): zero at and below 0, the gradient through NaN.
    #[test]
    fn relu_backward_passes_the_gradient_through_nan_as_eager() {
        let p = Program {
            n_inputs: 1,
            insts: vec![Inst::Input(0), Inst::Unary(Unary::Relu, 0)],
            outputs: vec![1],
        };
        let back = p.backward(&[true]);
        let x = [-1.0f32, 0.0, 2.0, f32::NAN, -0.0];
        let g = [5.0f32, 6.0, 7.0, 8.0, 9.0];
        let out = run_program(&back, &[Operand::Full(&x), Operand::Full(&g)], &[], 5);
        assert_eq!(out[0], [0.0, 0.0, 7.0, 8.0, 0.0]);
    }

    /// A program's dropout is `philox_dropout_mask`'s, element for element,
    /// over tiles and threads and a tail that is not a whole Philox block.
    #[test]
    fn dropout_matches_the_mask_kernel() {
        let p = Program {
            n_inputs: 1,
            insts: vec![
                Inst::Input(0),
                Inst::Dropout {
                    x: 0,
                    keep: 0.7,
                    seed: 0,
                },
            ],
            outputs: vec![1],
        };
        let n = 2 * TASK + 13;
        let x: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 1e-3).collect();
        crate::threads::set_num_threads(2);
        let out = run_program(&p, &[Operand::Full(&x)], &[99], n).remove(0);
        let mask = super::super::philox_dropout_mask(n, 0.7, 99);
        for i in 0..n {
            assert_eq!(out[i], x[i] * mask[i], "element {i}");
        }
    }
}
