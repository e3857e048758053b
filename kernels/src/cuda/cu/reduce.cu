// Sums and maxima over the last dim of a contiguous [rows, n] tensor, one
// block per row, accumulated in f32. CPU twin: kernels/src/cpu/reduce.rs.

template <typename T, bool MAX>
__device__ void reduce_impl(size_t n, const T *x, T *y) {
    extern __shared__ float scratch[];
    const T *row = x + blockIdx.x * n;
    float acc = MAX ? -TAPIR_INF : 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = to_f(row[j]);
        acc = MAX ? fmaxf(acc, v) : acc + v;
    }
    scratch[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = scratch[threadIdx.x + s];
            scratch[threadIdx.x] = MAX ? fmaxf(scratch[threadIdx.x], o) : scratch[threadIdx.x] + o;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = from_f<T>(scratch[0]);
}

#define REDUCE(T)                                                                        \
    extern "C" __global__ void sum_last_##T(size_t n, const T *x, T *y) { reduce_impl<T, false>(n, x, y); } \
    extern "C" __global__ void max_last_##T(size_t n, const T *x, T *y) { reduce_impl<T, true>(n, x, y); }

REDUCE(f32)
REDUCE(f16)
REDUCE(bf16)
