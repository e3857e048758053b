// Gathers along one dim, by element width. `lx` is the input's strides
// viewed at the output's shape; `inner` is the product of the output dims
// after `dim`, `len` the output's size along it, `stride` the input's stride
// there (embedding is index_select of rows), `size` the input's size there.
// CPU twins: kernels/src/cpu/index.rs (`Gather`, `Select` in
// runtime/src/ops/index.rs).
//
// Every index is checked against `size` here, not on the host (which would
// wait for the GPU): an out-of-range one is neither read nor written, and the
// first is recorded in `flag` ([launch id, index]) for the host to report at
// its next read (kernels/src/cuda/checks.rs).
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ bool in_range(long long k, long long size, u64 *flag, long long id) {
    if (k >= 0 && k < size) return true;
    if (atomicCAS(flag, 0ull, (u64)id) == 0ull) flag[1] = (u64)k;
    return false;
}

// torch.gather: the index has the output's shape (contiguous).
#define GATHER(T)                                                                      \
    extern "C" __global__ void gather_##T(size_t n, Strided lx, size_t inner, size_t len, \
        long long stride, long long size, u64 *flag, long long id, const long long *idx,  \
        const T *x, T *y) {                                                            \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len), k = idx[i];                  \
            y[i] = in_range(k, size, flag, id)                                         \
                ? x[(long long)strided(i, lx) + (k - c) * stride] : (T)0;              \
        }                                                                              \
    }
// index_select: one index per position along `dim`.
#define INDEX_SELECT(T)                                                                \
    extern "C" __global__ void index_select_##T(size_t n, Strided lx, size_t inner,    \
        size_t len, long long stride, long long size, u64 *flag, long long id,          \
        const long long *idx, const T *x, T *y) {                                      \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len), k = idx[c];                  \
            y[i] = in_range(k, size, flag, id)                                         \
                ? x[(long long)strided(i, lx) + (k - c) * stride] : (T)0;              \
        }                                                                              \
    }
GATHER(u8) GATHER(u16) GATHER(u32) GATHER(u64)
INDEX_SELECT(u8) INDEX_SELECT(u16) INDEX_SELECT(u32) INDEX_SELECT(u64)

// torch.scatter by element width: `src` written into a contiguous `dst`
// whose strides `ld` are viewed at the index's shape. With repeated indices
// one of the values lands, as in PyTorch.
#define SCATTER_ASSIGN(T)                                                              \
    extern "C" __global__ void scatter_assign_##T(size_t n, Strided ls, Strided ld,    \
        size_t inner, size_t len, long long stride, long long size, u64 *flag,          \
        long long id, const long long *idx, const T *src, T *dst) {                    \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len), k = idx[i];                  \
            if (in_range(k, size, flag, id))                                           \
                dst[(long long)strided(i, ld) + (k - c) * stride] = src[strided(i, ls)];  \
        }                                                                              \
    }
SCATTER_ASSIGN(u8) SCATTER_ASSIGN(u16) SCATTER_ASSIGN(u32) SCATTER_ASSIGN(u64)

// scatter_reduce's product, max and min in f32: a compare-and-swap loop on
// the destination's bits (no hardware atomic multiplies floats). A NaN on
// either side wins, as in the CPU twin (kernels/src/cpu/index.rs).
__device__ __forceinline__ float combine_prod(float a, float b) { return a * b; }
__device__ __forceinline__ float combine_amax(float a, float b) {
    return (isnan(a) || !(isnan(b) || b > a)) ? a : b;
}
__device__ __forceinline__ float combine_amin(float a, float b) {
    return (isnan(a) || !(isnan(b) || b < a)) ? a : b;
}
#define SCATTER_REDUCE(OP)                                                             \
    extern "C" __global__ void scatter_##OP##_f32(size_t n, Strided ls, Strided ld,    \
        size_t inner, size_t len, long long stride, long long size, u64 *flag,          \
        long long id, const long long *idx, const float *src, float *dst) {            \
        GRID_STRIDE(i, n) {                                                            \
            long long c = (long long)((i / inner) % len), k = idx[i];                  \
            if (!in_range(k, size, flag, id)) continue;                                \
            unsigned *at = (unsigned *)&dst[(long long)strided(i, ld) + (k - c) * stride]; \
            float v = src[strided(i, ls)];                                             \
            unsigned seen = *at, was;                                                  \
            do {                                                                       \
                was = seen;                                                            \
                seen = atomicCAS(at, was, __float_as_uint(combine_##OP(__uint_as_float(was), v))); \
            } while (seen != was);                                                     \
        }                                                                              \
    }
SCATTER_REDUCE(prod) SCATTER_REDUCE(amax) SCATTER_REDUCE(amin)

// The adjoints, in f32 with atomics: scatter_add (gather's backward) into a
// contiguous `dst` whose strides `ld` are viewed at the index's shape, and
// index_add over rows (index_select's backward) into a contiguous
// `[outer, size, inner]` buffer from a contiguous `[outer, len, inner]` one.
extern "C" __global__ void scatter_add_f32(size_t n, Strided ls, Strided ld, size_t inner,
        size_t len, long long stride, long long size, u64 *flag, long long id,
        const long long *idx, const float *src, float *dst) {
    GRID_STRIDE(i, n) {
        long long c = (long long)((i / inner) % len), k = idx[i];
        if (in_range(k, size, flag, id))
            atomicAdd(&dst[(long long)strided(i, ld) + (k - c) * stride], src[strided(i, ls)]);
    }
}
extern "C" __global__ void index_add_f32(size_t n, size_t inner, size_t len, size_t size,
        u64 *flag, long long id, const long long *idx, const float *src, float *dst) {
    GRID_STRIDE(i, n) {
        size_t o = i / (len * inner), c = (i / inner) % len, j = i % inner;
        long long k = idx[c];
        if (in_range(k, (long long)size, flag, id))
            atomicAdd(&dst[(o * size + (size_t)k) * inner + j], src[i]);
    }
}
