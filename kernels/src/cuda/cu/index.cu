// Embedding lookup (rows of a [num, dim] table) and its gradient
// (scatter-add of rows with atomics, accumulated in f32). CPU twin:
// kernels/src/cpu/index.rs.

template <typename T>
__device__ void embedding_impl(size_t n_ids, size_t dim, const long long *ids, const T *table, T *y) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_ids * dim; i += (size_t)blockDim.x * gridDim.x) {
        size_t r = i / dim, c = i % dim;
        y[i] = table[(size_t)ids[r] * dim + c];
    }
}

template <typename T>
__device__ void embedding_backward_impl(size_t n_ids, size_t dim, const long long *ids, const T *gy, float *gtable) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_ids * dim; i += (size_t)blockDim.x * gridDim.x) {
        size_t r = i / dim, c = i % dim;
        atomicAdd(&gtable[(size_t)ids[r] * dim + c], to_f(gy[i]));
    }
}

#define EMBEDDING(T)                                                                     \
    extern "C" __global__ void embedding_##T(size_t n, size_t dim, const long long *ids, \
        const T *table, T *y) { embedding_impl<T>(n, dim, ids, table, y); }              \
    extern "C" __global__ void embedding_backward_##T(size_t n, size_t dim,              \
        const long long *ids, const T *gy, float *gt) { embedding_backward_impl<T>(n, dim, ids, gy, gt); }

EMBEDDING(f32)
EMBEDDING(f16)
EMBEDDING(bf16)
