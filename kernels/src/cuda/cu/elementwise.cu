// Elementwise ops, one kernel per (op, dtype): `<op>_<dtype>`. Inputs are
// strided views (broadcast dims have stride 0) passed as `Strided` by value;
// the output is contiguous. Arithmetic is in f32 (f16/bf16 are rounded once
// at the store), as PyTorch does. `p0`/`p1` carry the op's scalar parameters
// (the exponent of pow_scalar, the bounds of clamp); other ops ignore them.
// CPU twins: the `UnaryFn`/`BinaryFn` impls in runtime/src/ops/{unary,binary}.rs
// (through kernels/src/cpu/elementwise.rs).

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

__device__ __forceinline__ float sign_f(float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v); }
__device__ __forceinline__ float pow_scalar_f(float v, float e) {
    if (e == 2.0f) return v * v;
    if (e == 1.0f) return v;
    if (e == 0.5f) return sqrtf(v);
    return powf(v, e);
}
__device__ __forceinline__ float gelu_grad_f(float v) {
    float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    float pdf = expf(-0.5f * v * v) * 0.3989422804014327f;
    return cdf + v * pdf;
}

UNARY(neg, -v)
UNARY(abs, fabsf(v))
UNARY(sign, sign_f(v))
UNARY(exp, expf(v))
UNARY(log, logf(v))
UNARY(log1p, log1pf(v))
UNARY(sqrt, sqrtf(v))
UNARY(rsqrt, 1.0f / sqrtf(v))
UNARY(sin, sinf(v))
UNARY(cos, cosf(v))
UNARY(tanh, tanhf(v))
UNARY(erf, erff(v))
UNARY(sigmoid, 1.0f / (1.0f + expf(-v)))
UNARY(relu, (v > 0.0f || v != v) ? v : 0.0f)
UNARY(step, v > 0.0f ? 1.0f : 0.0f)
UNARY(silu, v / (1.0f + expf(-v)))
UNARY(gelu, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)))
UNARY(gelu_grad, gelu_grad_f(v))
UNARY(pow_scalar, pow_scalar_f(v, p0))
UNARY(leaky_relu, v > 0.0f ? v : v * p0)
UNARY(leaky_step, v > 0.0f ? 1.0f : p0)
UNARY(clamp, v != v ? v : fminf(fmaxf(v, p0), p1))
UNARY(clamp_mask, (v >= p0 && v <= p1) ? 1.0f : 0.0f)

#define BINARY(name, expr)                                                             \
    template <typename T>                                                              \
    __device__ void name##_impl(size_t n, Strided la, Strided lb, const T *a,         \
                                const T *b, T *y) {                                    \
        GRID_STRIDE(i, n) {                                                            \
            float u = to_f(a[strided(i, la)]);                                         \
            float v = to_f(b[strided(i, lb)]);                                         \
            y[i] = from_f<T>(expr);                                                    \
        }                                                                              \
    }                                                                                  \
    extern "C" __global__ void name##_f32(size_t n, Strided la, Strided lb,           \
        const f32 *a, const f32 *b, f32 *y) { name##_impl(n, la, lb, a, b, y); }       \
    extern "C" __global__ void name##_f16(size_t n, Strided la, Strided lb,           \
        const f16 *a, const f16 *b, f16 *y) { name##_impl(n, la, lb, a, b, y); }       \
    extern "C" __global__ void name##_bf16(size_t n, Strided la, Strided lb,          \
        const bf16 *a, const bf16 *b, bf16 *y) { name##_impl(n, la, lb, a, b, y); }

BINARY(add, u + v)
BINARY(sub, u - v)
BINARY(mul, u * v)
BINARY(div, u / v)
BINARY(pow, powf(u, v))
// NaN propagates, as torch.maximum / torch.minimum.
BINARY(maximum, (u != u || u > v) ? u : v)
BINARY(minimum, (u != u || u < v) ? u : v)
