//! `arange`'s values, the CPU twins of the CUDA `arange_i64` / `arange_f32`
//! kernels: element `i` is `start + i * step`, exact in integers; for f32
//! computed in f64 and rounded once (PyTorch's CPU `arange` accumulates in
//! double too), so the two devices agree bit for bit.

/// `start, start + step, ...`, `n` of them, as i64.
///
/// ```
/// assert_eq!(tapir_kernels::cpu::arange_i64(4, 10, -3), vec![10, 7, 4, 1]);
/// ```
pub fn arange_i64(n: usize, start: i64, step: i64) -> Vec<i64> {
    (0..n as i64).map(|i| start + i * step).collect()
}

/// `start + i * step` for `i` in `0..n`, computed in f64, as f32.
///
/// ```
/// assert_eq!(tapir_kernels::cpu::arange_f32(3, 0.5, 0.25), vec![0.5, 0.75, 1.0]);
/// ```
pub fn arange_f32(n: usize, start: f64, step: f64) -> Vec<f32> {
    (0..n).map(|i| (start + i as f64 * step) as f32).collect()
}
