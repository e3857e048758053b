//! Matmul on cuBLAS.

use super::*;
use cudarc::cublas::sys as blas;

/// `C[b] = A[b] @ B[b]` for row-major `[batch, m, k]` and `[batch, k, n]`
/// views, each contiguous in its last two dims or their transpose, with
/// batch strides (0 broadcasts one matrix over the batch). cuBLAS is
/// column-major, so it computes `C^T = B^T A^T`.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    a: &CudaBuffer,
    a_offset: usize,
    a_batch_stride: usize,
    a_transposed: bool,
    b: &CudaBuffer,
    b_offset: usize,
    b_batch_stride: usize,
    b_transposed: bool,
    (batch, m, k, n): (usize, usize, usize, usize),
    dtype: &str,
) -> CudaResult<CudaBuffer> {
    let w = width(dtype);
    let dev = a.device().clone();
    let mut c = dev.alloc(batch * m * n * w)?;
    if batch * m * n == 0 {
        return Ok(c);
    }
    if k == 0 {
        c.zero()?;
        return Ok(c);
    }
    let blas = dev.blas()?;
    // A thread's first CUDA call may be this one: cuBLAS runs in the
    // thread's current context.
    dev.bind()?;
    let op = |t: bool| {
        if t {
            blas::cublasOperation_t::CUBLAS_OP_T
        } else {
            blas::cublasOperation_t::CUBLAS_OP_N
        }
    };
    // Row-major X with leading dim ld is column-major X^T, so C^T = B^T A^T:
    // cuBLAS's first operand is B (n x k), its second A (k x m).
    let ldb = if b_transposed { k } else { n };
    let lda = if a_transposed { m } else { k };
    let (data_type, compute) = match dtype {
        "f32" if dev.allow_tf32() => (
            blas::cudaDataType::CUDA_R_32F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        "f32" => (
            blas::cudaDataType::CUDA_R_32F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        "f16" => (
            blas::cudaDataType::CUDA_R_16F,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        "bf16" => (
            blas::cudaDataType::CUDA_R_16BF,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        other => panic!("matmul: no cuBLAS path for {other}"),
    };
    let int = |v: usize| -> CudaResult<i32> {
        i32::try_from(v).map_err(|_| {
            CudaError::Unsupported(format!(
                "matmul: dimension {v} exceeds cuBLAS's 32-bit sizes"
            ))
        })
    };
    let (one, zero) = (1.0f32, 0.0f32);
    let (pa, pb, pc) = (a.ptr(a_offset * w), b.ptr(b_offset * w), c.ptr(0));
    // SAFETY: the views lie inside `a` and `b` (the runtime passes offsets,
    // leading dims and batch strides of in-bounds matrices), `c` holds
    // batch*m*n elements of `dtype`, alpha/beta are f32 as the 32F compute
    // types require, and the handle runs on the device's one stream.
    unsafe {
        cudarc::cublas::result::gemm_strided_batched_ex(
            *blas.handle(),
            op(b_transposed),
            op(a_transposed),
            int(n)?,
            int(m)?,
            int(k)?,
            (&one) as *const f32 as *const _,
            pb as *const _,
            data_type,
            int(ldb)?,
            b_batch_stride as i64,
            pa as *const _,
            data_type,
            int(lda)?,
            a_batch_stride as i64,
            (&zero) as *const f32 as *const _,
            pc as *mut _,
            data_type,
            int(n)?,
            (m * n) as i64,
            int(batch)?,
            compute,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| dev.err("cuBLAS gemm", e))?;
    crate::cuda::device::count_launch();
    Ok(c)
}
