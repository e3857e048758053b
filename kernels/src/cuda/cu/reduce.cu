// Sums over the last dim of a contiguous [rows, n] tensor, one block per
// row, accumulated in f32 (maxima go through extreme_last below, which also
// gives the index). Each thread's long strided run is summed with Kahan's
// compensation and the threads' sums are combined as a tree, so the error
// does not grow with n (a plain running sum of 2^24 values loses ~1e-4).
// CPU twin: kernels/src/cpu/sum.rs.

template <typename T>
__device__ void sum_impl(size_t n, const T *x, T *y) {
    extern __shared__ float scratch[];
    const T *row = x + blockIdx.x * n;
    float acc = 0.0f, comp = 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = to_f(row[j]) - comp;
        float t = acc + v;
        comp = (t - acc) - v;
        acc = t;
    }
    scratch[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = from_f<T>(scratch[0]);
}

#define REDUCE(T)                                                                        \
    extern "C" __global__ void sum_last_##T(size_t n, const T *x, T *y) { sum_impl<T>(n, x, y); }

REDUCE(f32)
REDUCE(f16)
REDUCE(bf16)

// Max (or min) of each row of a contiguous [rows, n] tensor with the index of
// the first extreme element; NaN wins, as in PyTorch. One thread per row
// (rows are many and short where it matters: pooling windows, class scores).
// CPU twin: `CpuBuffer::extreme` in runtime/src/storage/cpu.rs.
template <typename T>
__device__ void extreme_impl(size_t rows, size_t n, int max, const T *x, T *vals, long long *idx) {
    GRID_STRIDE(r, rows) {
        const T *row = x + r * n;
        size_t best = 0;
        float b = to_f(row[0]);
        for (size_t j = 1; j < n; ++j) {
            float v = to_f(row[j]);
            bool better = (v != v && b == b) || (max ? v > b : v < b);
            if (better) { b = v; best = j; }
        }
        vals[r] = row[best];
        idx[r] = (long long)best;
    }
}
#define EXTREME(T)                                                                     \
    extern "C" __global__ void extreme_last_##T(size_t rows, size_t n, int max, const T *x, \
                                                T *vals, long long *idx) {             \
        extreme_impl<T>(rows, n, max, x, vals, idx);                                   \
    }
EXTREME(f32)
EXTREME(f16)
EXTREME(bf16)
