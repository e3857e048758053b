// Fused optimizer updates, operation for operation as their CPU twins
// (kernels/src/cpu/optim.rs) in f32. The `_at` kernels read their
// hyper-parameters from device memory instead of their arguments: inside a
// CUDA graph the host rewrites them before each replay (hyper.rs). Parameter, gradient and state share the
// parameter's dtype, as PyTorch's state tensors do; half types are computed
// in f32 and rounded once when stored, as PyTorch's fused kernels do.

// Mirrors `AdamHyper` in kernels/src/cuda/launch/optim.rs. The step-derived
// constants are computed on the host in f64, as the CPU twin does.
struct AdamHyper {
    float beta1, beta2, eps, weight_decay;
    float decay;      // 1 - lr * weight_decay (AdamW), else 1
    float step_size;  // lr / (1 - beta1^t)
    float bc2_sqrt;   // sqrt(1 - beta2^t)
    int decoupled, maximize;
};

// Adam / AdamW at element i; `vmax` is the amsgrad state, null without
// amsgrad.
template <typename T>
__device__ __forceinline__ void adam_elem(size_t i, T *p, const T *g, T *m, T *v, T *vmax,
                                          const AdamHyper &h) {
    float w1 = 1.0f - h.beta1, w2 = 1.0f - h.beta2;
    float pi = to_f(p[i]);
    float gi = to_f(g[i]);
    if (h.maximize) gi = -gi;
    if (h.weight_decay != 0.0f) {
        if (h.decoupled) pi = pi * h.decay;
        else gi = gi + h.weight_decay * pi;
    }
    float mi = to_f(m[i]);
    mi = mi + w1 * (gi - mi);
    float vi = to_f(v[i]) * h.beta2 + w2 * gi * gi;
    float vv = vi;
    if (vmax) {
        vv = fmaxf(to_f(vmax[i]), vi);
        vmax[i] = from_f<T>(vv);
    }
    float denom = sqrtf(vv) / h.bc2_sqrt + h.eps;
    p[i] = from_f<T>(pi - h.step_size * (mi / denom));
    m[i] = from_f<T>(mi);
    v[i] = from_f<T>(vi);
}

// Mirrors `SgdHyper` in kernels/src/cuda/launch/optim.rs.
struct SgdHyper {
    float lr, momentum;
    float damp;  // 1 - dampening
    float weight_decay;
    int nesterov, maximize;
    int first;   // the momentum buffer starts as the gradient
};

// SGD at element i; `buf` is the momentum buffer, null without momentum.
template <typename T>
__device__ __forceinline__ void sgd_elem(size_t i, T *p, const T *g, T *buf, const SgdHyper &h) {
    float pi = to_f(p[i]);
    float d = to_f(g[i]);
    if (h.maximize) d = -d;
    if (h.weight_decay != 0.0f) d = d + h.weight_decay * pi;
    if (buf) {
        float b = h.first ? d : to_f(buf[i]) * h.momentum + h.damp * d;
        buf[i] = from_f<T>(b);
        d = h.nesterov ? d + h.momentum * b : b;
    }
    p[i] = from_f<T>(pi - h.lr * d);
}

// Mirrors `RmspropHyper` in kernels/src/cuda/launch/optim.rs.
struct RmspropHyper {
    float lr, alpha, eps, weight_decay, momentum;
    int maximize;
};

// RMSprop at element i; `gavg` (centered) and `buf` (momentum) are null
// when unused.
template <typename T>
__device__ __forceinline__ void rmsprop_elem(size_t i, T *p, const T *g, T *sq, T *gavg, T *buf,
                                             const RmspropHyper &h) {
    float w = 1.0f - h.alpha;
    float pi = to_f(p[i]);
    float gi = to_f(g[i]);
    if (h.maximize) gi = -gi;
    if (h.weight_decay != 0.0f) gi = gi + h.weight_decay * pi;
    float s = to_f(sq[i]) * h.alpha + w * gi * gi;
    sq[i] = from_f<T>(s);
    float avg;
    if (gavg) {
        float ga = to_f(gavg[i]);
        ga = ga + w * (gi - ga);
        gavg[i] = from_f<T>(ga);
        avg = sqrtf(s - ga * ga) + h.eps;
    } else {
        avg = sqrtf(s) + h.eps;
    }
    if (buf) {
        float b = to_f(buf[i]) * h.momentum + gi / avg;
        buf[i] = from_f<T>(b);
        p[i] = from_f<T>(pi - h.lr * b);
    } else {
        p[i] = from_f<T>(pi - h.lr * (gi / avg));
    }
}

// Up to TAPIR_MULTI tensors of one update (PyTorch's multi-tensor apply, as
// its default `foreach` optimizers on CUDA): lengths and addresses, state
// pointers in the kernel's order (0 where unused). Block row y updates
// tensor y. Mirrors `MultiTensors` in kernels/src/cuda/launch/optim.rs.
#define TAPIR_MULTI 16
struct MultiTensors {
    unsigned long long n[TAPIR_MULTI];
    unsigned long long p[TAPIR_MULTI], g[TAPIR_MULTI];
    unsigned long long s0[TAPIR_MULTI], s1[TAPIR_MULTI], s2[TAPIR_MULTI];
};

#define FOR_EACH_TENSOR_ELEMENT(t, k, i)                                                    \
    const unsigned k = blockIdx.y;                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (t).n[k];            \
         i += (size_t)blockDim.x * gridDim.x)

#define OPTIM(T)                                                                           \
    extern "C" __global__ void adam_##T(size_t n, T *p, const T *g, T *m, T *v, T *vmax,   \
        AdamHyper h) { GRID_STRIDE(i, n) adam_elem<T>(i, p, g, m, v, vmax, h); }           \
    extern "C" __global__ void sgd_##T(size_t n, T *p, const T *g, T *buf, SgdHyper h)     \
        { GRID_STRIDE(i, n) sgd_elem<T>(i, p, g, buf, h); }                                \
    extern "C" __global__ void rmsprop_##T(size_t n, T *p, const T *g, T *sq, T *gavg,     \
        T *buf, RmspropHyper h) { GRID_STRIDE(i, n) rmsprop_elem<T>(i, p, g, sq, gavg, buf, h); } \
    extern "C" __global__ void adam_at_##T(size_t n, T *p, const T *g, T *m, T *v,         \
        T *vmax, const AdamHyper *h) { GRID_STRIDE(i, n) adam_elem<T>(i, p, g, m, v, vmax, *h); } \
    extern "C" __global__ void sgd_at_##T(size_t n, T *p, const T *g, T *buf,              \
        const SgdHyper *h) { GRID_STRIDE(i, n) sgd_elem<T>(i, p, g, buf, *h); }            \
    extern "C" __global__ void rmsprop_at_##T(size_t n, T *p, const T *g, T *sq, T *gavg,  \
        T *buf, const RmspropHyper *h)                                                     \
        { GRID_STRIDE(i, n) rmsprop_elem<T>(i, p, g, sq, gavg, buf, *h); }                 \
    MULTI(T, AdamHyper, adam, (T *)t.s0[k], (T *)t.s1[k], (T *)t.s2[k])                    \
    MULTI(T, SgdHyper, sgd, (T *)t.s0[k])                                                  \
    MULTI(T, RmspropHyper, rmsprop, (T *)t.s0[k], (T *)t.s1[k], (T *)t.s2[k])

// `<op>_multi_<T>` (hyper struct by value) and `<op>_multi_at_<T>` (from a
// hyper-table row) over a MultiTensors.
#define MULTI(T, H, op, ...)                                                                \
    extern "C" __global__ void op##_multi_##T(MultiTensors t, H h) {                        \
        FOR_EACH_TENSOR_ELEMENT(t, k, i)                                                    \
        op##_elem<T>(i, (T *)t.p[k], (const T *)t.g[k], __VA_ARGS__, h);                    \
    }                                                                                       \
    extern "C" __global__ void op##_multi_at_##T(MultiTensors t, const H *h) {              \
        FOR_EACH_TENSOR_ELEMENT(t, k, i)                                                    \
        op##_elem<T>(i, (T *)t.p[k], (const T *)t.g[k], __VA_ARGS__, *h);                   \
    }

OPTIM(f32)
OPTIM(f16)
OPTIM(bf16)
