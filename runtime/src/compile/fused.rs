//! The fused elementwise op a compiled graph runs in place of a chain: one
//! kernel (an elementwise program, `tapir_kernels::program`) forward, and one
//! tape node whose backward is one fused kernel too.

use crate::Tensor;
use crate::ops::dense0;
use crate::storage::{ProgramInput, Storage};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tapir_kernels::program::Program;

static FORWARD_LAUNCHES: AtomicU64 = AtomicU64::new(0);
static BACKWARD_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many fused kernels compiled graphs have run, forward and backward,
/// since the process started.
pub(crate) fn launches() -> (u64, u64) {
    (
        FORWARD_LAUNCHES.load(Ordering::Relaxed),
        BACKWARD_LAUNCHES.load(Ordering::Relaxed),
    )
}

/// A chain of elementwise ops as one kernel.
pub(crate) struct FusedKernel {
    /// The forward program (one output).
    pub program: Program,
    /// The ops it stands for, in order (for `explain`).
    pub ops: Vec<&'static str>,
    /// Backward programs by which inputs need a gradient.
    backward: Mutex<HashMap<Vec<bool>, Arc<Program>>>,
}

impl FusedKernel {
    pub(crate) fn new(program: Program, ops: Vec<&'static str>) -> FusedKernel {
        FusedKernel {
            program,
            ops,
            backward: Mutex::new(HashMap::new()),
        }
    }

    fn backward_program(&self, needs: &[bool]) -> Arc<Program> {
        let mut cache = self.backward.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(needs.to_vec())
            .or_insert_with(|| Arc::new(self.program.backward(needs)))
            .clone()
    }

    /// The fused op on `inputs` (f32 on a device that runs programs, each
    /// of the output's shape or broadcast over its leading dims, so the
    /// output's shape is theirs broadcast), recorded for autograd as one
    /// node.
    pub(crate) fn run(self: &Arc<Self>, inputs: &[Tensor]) -> Tensor {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        crate::trace::op("fused_elementwise", refs.as_slice(), Vec::new, || {
            self.run_untraced(inputs, &refs)
        })
    }

    fn run_untraced(self: &Arc<Self>, inputs: &[Tensor], refs: &[&Tensor]) -> Tensor {
        FORWARD_LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let shape = inputs.iter().fold(Vec::new(), |s, t| {
            crate::ops::broadcast_shapes(&s, t.shape(), "compile (a fused kernel)")
        });
        let dense: Vec<Tensor> = inputs.iter().map(dense0).collect();
        // Drawn here, where the op order puts the group's last op; the
        // compiler fuses a dropout only when no other draw falls between.
        let seeds: Vec<u64> = (0..self.program.seeds())
            .map(|_| Storage::dropout_seed())
            .collect();
        let out = run_on(&self.program, &dense, &seeds, &shape).remove(0);
        let out = Tensor::from_storage(out, &shape);
        let kernel = self.clone();
        Tensor::record(out, "FusedElementwiseBackward0", refs, move || {
            let saved: Vec<Tensor> = dense.iter().map(Tensor::saved).collect();
            move |g: &Tensor, needs: &[bool]| {
                BACKWARD_LAUNCHES.fetch_add(1, Ordering::Relaxed);
                let program = kernel.backward_program(needs);
                let mut all = saved.clone();
                all.push(dense0(&g.to_dtype(crate::DType::F32)));
                let mut grads = run_on(&program, &all, &seeds, &shape).into_iter();
                // The dense copies have their inputs' shapes.
                needs
                    .iter()
                    .zip(&saved)
                    .map(|(&need, input)| {
                        need.then(|| {
                            let full = grads.next().expect("one gradient per needed input");
                            Tensor::from_storage(full, &shape).sum_to(input.shape())
                        })
                    })
                    .collect()
            }
        })
    }
}

/// Runs `program` over dense `inputs` producing outputs of `shape`.
fn run_on(program: &Program, inputs: &[Tensor], seeds: &[u64], shape: &[usize]) -> Vec<Storage> {
    let n: usize = shape.iter().product();
    let device = inputs.first().map_or(crate::Device::Cpu, |t| t.device());
    let guards: Vec<_> = inputs.iter().map(|t| t.read()).collect();
    let operands: Vec<ProgramInput> = inputs
        .iter()
        .zip(&guards)
        .map(|(t, s)| match t.numel() == n {
            true => ProgramInput::Full(s),
            false => ProgramInput::Cycle(s),
        })
        .collect();
    Storage::run_program(program, &operands, seeds, n, device)
}
