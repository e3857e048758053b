// Elementwise ops, one kernel per (op, dtype): `<op>_<dtype>`. Inputs are
// strided (broadcast views have stride 0); the output is contiguous. CPU
// twins: kernels/src/cpu/elementwise.rs.

#define UNARY(name, expr)                                                              \
    template <typename T>                                                              \
    __device__ void name##_impl(size_t n, int ndim, const size_t *shape,              \
                                const long long *st, const T *x, T *y) {               \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;                 \
             i += (size_t)blockDim.x * gridDim.x) {                                    \
            float v = to_f(x[strided(i, ndim, shape, st)]);                            \
            y[i] = from_f<T>(expr);                                                    \
        }                                                                              \
    }                                                                                  \
    extern "C" __global__ void name##_f32(size_t n, int nd, const size_t *s,          \
        const long long *st, const f32 *x, f32 *y) { name##_impl(n, nd, s, st, x, y); } \
    extern "C" __global__ void name##_f16(size_t n, int nd, const size_t *s,          \
        const long long *st, const f16 *x, f16 *y) { name##_impl(n, nd, s, st, x, y); } \
    extern "C" __global__ void name##_bf16(size_t n, int nd, const size_t *s,         \
        const long long *st, const bf16 *x, bf16 *y) { name##_impl(n, nd, s, st, x, y); }

UNARY(neg, -v)
UNARY(exp, expf(v))
UNARY(log, logf(v))
UNARY(sqrt, sqrtf(v))
UNARY(abs, fabsf(v))
UNARY(relu, v > 0.0f ? v : 0.0f)
UNARY(tanh, tanhf(v))
UNARY(sigmoid, 1.0f / (1.0f + expf(-v)))
UNARY(silu, v / (1.0f + expf(-v)))
UNARY(gelu, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)))

#define BINARY(name, expr)                                                             \
    template <typename T>                                                              \
    __device__ void name##_impl(size_t n, int ndim, const size_t *shape,              \
                                const long long *sa, const long long *sb,              \
                                const T *a, const T *b, T *y) {                        \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;                 \
             i += (size_t)blockDim.x * gridDim.x) {                                    \
            float u = to_f(a[strided(i, ndim, shape, sa)]);                            \
            float v = to_f(b[strided(i, ndim, shape, sb)]);                            \
            y[i] = from_f<T>(expr);                                                    \
        }                                                                              \
    }                                                                                  \
    extern "C" __global__ void name##_f32(size_t n, int nd, const size_t *s,          \
        const long long *sa, const long long *sb, const f32 *a, const f32 *b, f32 *y)  \
        { name##_impl(n, nd, s, sa, sb, a, b, y); }                                    \
    extern "C" __global__ void name##_f16(size_t n, int nd, const size_t *s,          \
        const long long *sa, const long long *sb, const f16 *a, const f16 *b, f16 *y)  \
        { name##_impl(n, nd, s, sa, sb, a, b, y); }                                    \
    extern "C" __global__ void name##_bf16(size_t n, int nd, const size_t *s,         \
        const long long *sa, const long long *sb, const bf16 *a, const bf16 *b, bf16 *y) \
        { name##_impl(n, nd, s, sa, sb, a, b, y); }

BINARY(add, u + v)
BINARY(sub, u - v)
BINARY(mul, u * v)
BINARY(div, u / v)
BINARY(maximum, fmaxf(u, v))
BINARY(minimum, fminf(u, v))
