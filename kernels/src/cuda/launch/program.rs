//! Fused elementwise programs (`compile`'s chains) on the GPU: each program
//! becomes one generated kernel, compiled by NVRTC on first use and cached
//! like the `.cu` modules. Its CPU twin is `crate::cpu::run_program`.

use super::{CudaBuffer, CudaResult, elems};
use crate::cuda::modules::register_generated;
use crate::program::Program;
use cudarc::driver::PushKernelArg;

/// Runs `p` over `n` elements of dense f32 inputs, each `(buffer, len)`
/// read at `i % len` (`len` is `n` for a full input, less for a cycled
/// one); one dense f32 buffer per output.
pub fn run_program(
    p: &Program,
    inputs: &[(&CudaBuffer, usize)],
    n: usize,
) -> CudaResult<Vec<CudaBuffer>> {
    assert!(
        !inputs.is_empty() && inputs.len() == p.n_inputs,
        "run_program: {} inputs for a program of {} (at least one)",
        inputs.len(),
        p.n_inputs
    );
    assert!(
        inputs
            .iter()
            .all(|(b, len)| *len > 0 && b.bytes() >= len * 4),
        "run_program: an input is shorter than its length"
    );
    let dev = inputs[0].0.device().clone();
    let outs = (0..p.outputs.len())
        .map(|_| dev.alloc(n * 4))
        .collect::<CudaResult<Vec<CudaBuffer>>>()?;
    if n == 0 {
        return Ok(outs);
    }
    let name = p.cuda_name();
    register_generated(&name, || p.cuda_source(&name));
    let ptrs: Vec<u64> = inputs.iter().map(|(b, _)| b.ptr(0)).collect();
    let lens: Vec<usize> = inputs.iter().map(|(_, len)| *len).collect();
    let out_ptrs: Vec<u64> = outs.iter().map(|b| b.ptr(0)).collect();
    let sizes = vec![8; 1 + 2 * inputs.len() + outs.len()];
    let f = dev.function(&name, &sizes)?;
    let mut b = dev.stream().launch_builder(&f);
    b.arg(&n);
    for (ptr, len) in ptrs.iter().zip(&lens) {
        b.arg(ptr);
        b.arg(len);
    }
    for ptr in &out_ptrs {
        b.arg(ptr);
    }
    // SAFETY: the arguments are the generated kernel's `(size_t n, const
    // float *in_k, size_t len_k .., float *out_k ..)` in order (the sizes
    // were checked against its PTX by `function`); every input holds at
    // least `len_k` f32 and is read at `i % len_k`, every output holds `n`
    // f32 and is written at `i < n`; launches are ordered on the device's
    // one stream, so no buffer is reused before the kernel ran.
    unsafe { b.launch(elems(n)) }
        .map(|_| crate::cuda::device::count_launch())
        .map_err(|e| dev.err(&format!("launching {name}"), e))?;
    Ok(outs)
}
