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

// Column sums of a contiguous [rows, n] tensor (a sum over its leading
// dims: a bias's gradient), in two deterministic stages as LayerNorm's
// weight gradient (norm.cu): blocks of 32 columns x 8 row lanes sum chunks
// of `per` rows into f32 partials [chunks, n], then a thread per column
// adds the chunks in order. No transposing copy, every read coalesced.
template <typename T>
__device__ void sum_first_partials_impl(size_t rows, size_t n, size_t per, const T *x,
                                        float *partial) {
    extern __shared__ float scratch[];  // a float per thread
    const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t first = (size_t)blockIdx.y * per;
    const size_t last = first + per < rows ? first + per : rows;
    float acc = 0.0f;
    if (j < n) {
        for (size_t r = first + threadIdx.y; r < last; r += blockDim.y) acc += to_f(x[r * n + j]);
    }
    scratch[threadIdx.y * blockDim.x + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        for (unsigned y = 1; y < blockDim.y; ++y) acc += scratch[y * blockDim.x + threadIdx.x];
        partial[blockIdx.y * n + j] = acc;
    }
}

template <typename T>
__device__ void sum_first_finish_impl(size_t chunks, size_t n, const float *partial, T *y) {
    GRID_STRIDE(j, n) {
        float acc = 0.0f;
        for (size_t c = 0; c < chunks; ++c) acc += partial[c * n + j];
        y[j] = from_f<T>(acc);
    }
}

#define SUM_FIRST(T)                                                                        \
    extern "C" __global__ void sum_first_partials_##T(size_t rows, size_t n, size_t per,   \
                                                      const T *x, float *partial) {        \
        sum_first_partials_impl<T>(rows, n, per, x, partial);                              \
    }                                                                                       \
    extern "C" __global__ void sum_first_finish_##T(size_t chunks, size_t n,                \
                                                    const float *partial, T *y) {           \
        sum_first_finish_impl<T>(chunks, n, partial, y);                                    \
    }

SUM_FIRST(f32)
SUM_FIRST(f16)
SUM_FIRST(bf16)

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
