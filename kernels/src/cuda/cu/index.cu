// Embedding lookup (rows of a [num, dim] table); its gradient is index_add
// below. CPU twin: kernels/src/cpu/index.rs.

template <typename T>
__device__ void embedding_impl(size_t n_ids, size_t dim, const long long *ids, const T *table, T *y) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_ids * dim; i += (size_t)blockDim.x * gridDim.x) {
        size_t r = i / dim, c = i % dim;
        y[i] = table[(size_t)ids[r] * dim + c];
    }
}

#define EMBEDDING(T)                                                                     \
    extern "C" __global__ void embedding_##T(size_t n, size_t dim, const long long *ids, \
        const T *table, T *y) { embedding_impl<T>(n, dim, ids, table, y); }

EMBEDDING(f32)
EMBEDDING(f16)
EMBEDDING(bf16)

// Gathers along one dim, by element width. `lx` is the input's strides
// viewed at the output's shape; `inner` is the product of the output dims
// after `dim`, `len` the output's size along it, `stride` the input's stride
// there. CPU twins: kernels/src/cpu/index.rs (`Gather`, `Select` in
// runtime/src/ops/index.rs).
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
// torch.gather: the index has the output's shape (contiguous).
#define GATHER(T)                                                                      \
    extern "C" __global__ void gather_##T(size_t n, Strided lx, size_t inner, size_t len, \
        long long stride, const long long *idx, const T *x, T *y) {                    \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len);                              \
            y[i] = x[(long long)strided(i, lx) + (idx[i] - c) * stride];               \
        }                                                                              \
    }
// index_select: one index per position along `dim`.
#define INDEX_SELECT(T)                                                                \
    extern "C" __global__ void index_select_##T(size_t n, Strided lx, size_t inner,    \
        size_t len, long long stride, const long long *idx, const T *x, T *y) {        \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len);                              \
            y[i] = x[(long long)strided(i, lx) + (idx[c] - c) * stride];               \
        }                                                                              \
    }
GATHER(u8) GATHER(u16) GATHER(u32) GATHER(u64)
INDEX_SELECT(u8) INDEX_SELECT(u16) INDEX_SELECT(u32) INDEX_SELECT(u64)

// The adjoints, in f32 with atomics: scatter_add (gather's backward) into a
// contiguous `dst` whose strides `ld` are viewed at the index's shape, and
// index_add over rows (index_select's backward) into a contiguous
// `[outer, size, inner]` buffer from a contiguous `[outer, len, inner]` one.
extern "C" __global__ void scatter_add_f32(size_t n, Strided ls, Strided ld, size_t inner,
        size_t len, long long stride, const long long *idx, const float *src, float *dst) {
    GRID_STRIDE(i, n) {
        long long c = (long long)((i / inner) % len);
        atomicAdd(&dst[(long long)strided(i, ld) + (idx[i] - c) * stride], src[strided(i, ls)]);
    }
}
extern "C" __global__ void index_add_f32(size_t n, size_t inner, size_t len, size_t size,
        const long long *idx, const float *src, float *dst) {
    GRID_STRIDE(i, n) {
        size_t o = i / (len * inner), c = (i / inner) % len, j = i % inner;
        atomicAdd(&dst[(o * size + (size_t)idx[c]) * inner + j], src[i]);
    }
}
