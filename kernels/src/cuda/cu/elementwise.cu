// Elementwise kernel templates, one kernel per (op, dtype): `<op>_<dtype>`.
// Inputs are strided views (broadcast dims have stride 0) passed as `Strided`
// by value; the output is contiguous. Arithmetic is in f32 (f16/bf16 are
// rounded once at the store), as PyTorch does. `p0`/`p1` carry the op's
// scalar parameters (the exponent of pow_scalar, the bounds of clamp); other
// ops ignore them. The instantiations, one per op, are generated from the
// rows of kernels/src/elementwise.rs, which also hold each op's CPU twin.

#define UNARY(name, expr)                                                              \
    template <typename T>                                                              \
    __device__ void name##_impl(size_t n, Strided lx, float p0, float p1, const T *x, T *y) { \
        GRID_STRIDE(i, n) {                                                            \
            float v = to_f(x[strided(i, lx)]);                                         \
            y[i] = from_f<T>(expr);                                                    \
        }                                                                              \
    }                                                                                  \
    extern "C" __global__ void name##_f32(size_t n, Strided l, float p0, float p1,    \
        const f32 *x, f32 *y) { name##_impl(n, l, p0, p1, x, y); }                     \
    extern "C" __global__ void name##_f16(size_t n, Strided l, float p0, float p1,    \
        const f16 *x, f16 *y) { name##_impl(n, l, p0, p1, x, y); }                     \
    extern "C" __global__ void name##_bf16(size_t n, Strided l, float p0, float p1,   \
        const bf16 *x, bf16 *y) { name##_impl(n, l, p0, p1, x, y); }

#define BINARY(name, expr)                                                             \
    template <typename T>                                                              \
    __device__ void name##_impl(size_t n, Strided la, Strided lb, float p0,           \
                                const T *a, const T *b, T *y) {                        \
        GRID_STRIDE(i, n) {                                                            \
            float u = to_f(a[strided(i, la)]);                                         \
            float v = to_f(b[strided(i, lb)]);                                         \
            y[i] = from_f<T>(expr);                                                    \
        }                                                                              \
    }                                                                                  \
    extern "C" __global__ void name##_f32(size_t n, Strided la, Strided lb, float p0, \
        const f32 *a, const f32 *b, f32 *y) { name##_impl(n, la, lb, p0, a, b, y); }   \
    extern "C" __global__ void name##_f16(size_t n, Strided la, Strided lb, float p0, \
        const f16 *a, const f16 *b, f16 *y) { name##_impl(n, la, lb, p0, a, b, y); }   \
    extern "C" __global__ void name##_bf16(size_t n, Strided la, Strided lb, float p0,\
        const bf16 *a, const bf16 *b, bf16 *y) { name##_impl(n, la, lb, p0, a, b, y); }

