//! bf16 matrix multiply on gemmkit's AVX-512 BF16 kernel: the bf16 element
//! of the batched product in `matmul.rs`.

use super::matmul::{Dst, GemmElement, Operand, product};
use crate::Layout;
use gemm::Parallelism;
use half::bf16;

/// Whether [`matmul_bf16`] runs on this CPU: it needs AVX-512 BF16
/// (`vdpbf16ps`; Zen 4 and later, Cooper Lake and Sapphire Rapids). Without
/// it, multiply bf16 by converting to f32 and calling [`super::matmul`].
pub fn bf16_matmul_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512bf16")
                && std::arch::is_x86_feature_detected!("avx512f")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Batched bf16 `a @ b` (and `+ bias` for a 2-D product, as
/// [`super::matmul_bias`]) on gemmkit's AVX-512 BF16 kernel: bf16 products are
/// exact in f32 and summed in f32, and each output is rounded to bf16 once,
/// as PyTorch's CPU bf16 GEMM (oneDNN, the same instruction). At the seed
/// MLP's sizes it runs at ~1.6-1.9x the f32 GEMM on Zen 5. Panics unless
/// [`bf16_matmul_available`].
///
/// ```
/// use half::bf16;
/// use tapir_kernels::{cpu, Layout};
/// if cpu::bf16_matmul_available() {
///     let a: Vec<bf16> = [1.0f32, 2.0, 3.0, 4.0].map(bf16::from_f32).to_vec();
///     let l = Layout::contiguous(&[2, 2]);
///     let y = cpu::matmul_bf16(&a, &l, &a, &l, None);
///     assert_eq!(y, [7.0f32, 10.0, 15.0, 22.0].map(bf16::from_f32));
/// }
/// ```
pub fn matmul_bf16(
    a: &[bf16],
    la: &Layout,
    b: &[bf16],
    lb: &Layout,
    bias: Option<&[bf16]>,
) -> Vec<bf16> {
    assert!(
        bf16_matmul_available(),
        "matmul_bf16 kernel: this CPU has no AVX-512 BF16"
    );
    product(a, la, b, lb, bias)
}

impl GemmElement for bf16 {
    const TRANSPOSE_COLUMN_MAJOR_B: bool = false;

    fn product(
        (m, n, k): (usize, usize, usize),
        mut dst: Dst<'_, bf16>,
        bias: Option<&[bf16]>,
        a: Operand<'_, bf16>,
        b: Operand<'_, bf16>,
        par: Parallelism,
    ) {
        assert!(
            dst.len() == m * n && a.fits(m, k) && b.fits(k, n) && bias.is_none_or(|c| c.len() == n),
            "matmul_bf16 kernel: a {m} x {k} by {k} x {n} product does not fit its buffers"
        );
        let par = match par {
            Parallelism::None => gemmkit::Parallelism::Serial,
            Parallelism::Rayon(t) => gemmkit::Parallelism::Rayon(t),
        };
        let beta = if dst.accumulate() {
            bf16::ONE
        } else {
            bf16::ZERO
        };
        let (a_ptr, b_ptr, c_ptr) = (a.data.as_ptr(), b.data.as_ptr(), dst.as_mut_ptr());
        let (ars, acs, brs, bcs) = (a.rs as isize, a.cs as isize, b.rs as isize, b.cs as isize);
        // SAFETY (both calls): `fits` checked that every element of `a` and
        // `b` the product reads lies inside its slice, so the offset
        // pointers are in bounds; `dst` holds exactly the `m x n` row-major
        // outputs, which gemmkit reads only when `beta` is 1 (an
        // accumulating, initialised `dst`); `dst` is a `&mut` borrow, so it
        // aliases neither operand; a bias has `n` elements, one per column.
        unsafe {
            let (a_ptr, b_ptr) = (a_ptr.add(a.offset), b_ptr.add(b.offset));
            // The shared leading arguments of gemmkit's two raw entries.
            macro_rules! product {
                ($entry:path, $($tail:expr),+) => {
                    $entry(m, k, n, bf16::ONE, a_ptr, ars, acs, b_ptr, brs, bcs, beta, c_ptr,
                        n as isize, 1, $($tail),+)
                };
            }
            match bias {
                // The fused entry runs its epilogue even without a bias: 14%
                // slower on attention's 128 x 64 x 128 products.
                None => product!(gemmkit::gemm_unchecked, par),
                Some(c) => product!(
                    gemmkit::gemm_fused_unchecked,
                    c.as_ptr(),
                    gemmkit::BiasDim::PerCol,
                    true,
                    None,
                    par
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bf16 values in about [-1.5, 1.5].
    fn values(n: usize, seed: usize) -> Vec<bf16> {
        (0..n)
            .map(|i| bf16::from_f32(((i * 7919 + seed * 104_729) % 1013) as f32 / 337.0 - 1.5))
            .collect()
    }

    /// Checks `got` against the exact (f64) product of the bf16 operands:
    /// within one rounding to bf16 (2^-8 relative) plus f32 summation error.
    fn check(
        got: &[bf16],
        a: &[bf16],
        la: &Layout,
        b: &[bf16],
        lb: &Layout,
        bias: Option<&[bf16]>,
    ) {
        let nd = la.ndim();
        let (m, k, n) = (la.shape[nd - 2], la.shape[nd - 1], lb.shape[nd - 1]);
        let (ao, bo) = (la.batch_offsets(), lb.batch_offsets());
        assert_eq!(got.len(), ao.len() * m * n, "output size");
        for (t, (&ao, &bo)) in ao.iter().zip(&bo).enumerate() {
            for i in 0..m {
                for j in 0..n {
                    let mut exact = bias.map_or(0.0, |c| c[j].to_f64());
                    let mut size = exact.abs();
                    for p in 0..k {
                        let x = a[ao + i * la.strides[nd - 2] + p * la.strides[nd - 1]].to_f64();
                        let y = b[bo + p * lb.strides[nd - 2] + j * lb.strides[nd - 1]].to_f64();
                        exact += x * y;
                        size += (x * y).abs();
                    }
                    let g = got[(t * m + i) * n + j].to_f64();
                    let bound = exact.abs() / 256.0 + 1e-5 * size;
                    assert!(
                        (g - exact).abs() <= bound,
                        "product {t} ({i}, {j}) of {m}x{k}x{n}: got {g}, exact {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn bf16_products_round_the_exact_sum_once_in_every_layout() {
        if !bf16_matmul_available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        for threads in [1, 2] {
            crate::threads::set_num_threads(threads);
            // (m, k, n): a row vector, an odd k, tiles that split across
            // threads, and a product big enough for gemmkit's own threads.
            for (m, k, n) in [
                (1, 33, 17),
                (5, 7, 3),
                (200, 129, 70),
                (256, 256, 256),
                (600, 300, 520),
                (1100, 300, 520),
            ] {
                let a = values(m * k, 1);
                let b = values(k * n, 2);
                let bias = values(n, 3);
                let (la, lb) = (Layout::contiguous(&[m, k]), Layout::contiguous(&[k, n]));
                check(&matmul_bf16(&a, &la, &b, &lb, None), &a, &la, &b, &lb, None);
                let y = matmul_bf16(&a, &la, &b, &lb, Some(&bias));
                check(&y, &a, &la, &b, &lb, Some(&bias));
                // Transposed operands (a weight used as `w.t()`, `x^T g`).
                let lat = Layout::contiguous(&[k, m]).transpose(0, 1);
                let lbt = Layout::contiguous(&[n, k]).transpose(0, 1);
                check(
                    &matmul_bf16(&a, &lat, &b, &lbt, None),
                    &a,
                    &lat,
                    &b,
                    &lbt,
                    None,
                );
            }
            // Batched, with a broadcast (stride-0) right operand.
            let (bt, m, k, n) = (6, 40, 24, 36);
            let a = values(bt * m * k, 4);
            let b = values(k * n, 5);
            let la = Layout::contiguous(&[bt, m, k]);
            let lb = Layout::contiguous(&[1, k, n]).broadcast_to(&[bt, k, n]);
            check(&matmul_bf16(&a, &la, &b, &lb, None), &a, &la, &b, &lb, None);
        }
    }

    #[test]
    fn an_empty_inner_dim_gives_zeros_or_the_bias() {
        if !bf16_matmul_available() {
            return;
        }
        let (la, lb) = (Layout::contiguous(&[2, 0]), Layout::contiguous(&[0, 3]));
        let bias = values(3, 7);
        assert_eq!(matmul_bf16(&[], &la, &[], &lb, None), vec![bf16::ZERO; 6]);
        let y = matmul_bf16(&[], &la, &[], &lb, Some(&bias));
        assert_eq!(y, [bias.clone(), bias].concat());
    }
}
