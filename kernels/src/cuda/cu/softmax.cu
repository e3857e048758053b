// Row-wise softmax / log_softmax over the last dim of a contiguous [rows, n]
// tensor, one block per row, max-subtracted for stability. CPU twin:
// kernels/src/cpu/softmax.rs.

template <typename T, bool LOG>
__device__ void softmax_impl(size_t n, const T *x, T *y) {
    extern __shared__ float scratch[];
    const T *row = x + blockIdx.x * n;
    T *out = y + blockIdx.x * n;
    float m = -TAPIR_INF;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, to_f(row[j]));
    scratch[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    m = scratch[0];
    __syncthreads();
    float sum = 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(to_f(row[j]) - m);
    scratch[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    sum = scratch[0];
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = to_f(row[j]) - m;
        out[j] = from_f<T>(LOG ? v - logf(sum) : expf(v) / sum);
    }
}

#define SOFTMAX(T)                                                                      \
    extern "C" __global__ void softmax_##T(size_t n, const T *x, T *y) { softmax_impl<T, false>(n, x, y); } \
    extern "C" __global__ void log_softmax_##T(size_t n, const T *x, T *y) { softmax_impl<T, true>(n, x, y); }

SOFTMAX(f32)
SOFTMAX(f16)
SOFTMAX(bf16)
