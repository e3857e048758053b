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

// Mirrors `AdagradHyper` in kernels/src/cuda/launch/optim_hypers.rs.
struct AdagradHyper {
    float clr;  // lr / (1 + (t - 1) lr_decay)
    float eps, weight_decay;
    int maximize;
};

// The gradient as an update uses it: negated to maximise, plus the L2 term.
__device__ __forceinline__ float decayed_grad(float g, float p, int maximize, float weight_decay) {
    if (maximize) g = -g;
    return weight_decay != 0.0f ? g + weight_decay * p : g;
}

// Adagrad at element i; `sum` holds the squared gradients so far.
template <typename T>
__device__ __forceinline__ void adagrad_elem(size_t i, T *p, const T *g, T *sum,
                                             const AdagradHyper &h) {
    float pi = to_f(p[i]);
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    float s = to_f(sum[i]) + gi * gi;
    sum[i] = from_f<T>(s);
    p[i] = from_f<T>(pi - h.clr * (gi / (sqrtf(s) + h.eps)));
}

// Mirrors `AdadeltaHyper` in kernels/src/cuda/launch/optim_hypers.rs.
struct AdadeltaHyper {
    float lr, rho;
    float w;  // 1 - rho, rounded from f64 as PyTorch's `value=1 - rho`
    float eps, weight_decay;
    int maximize;
};

// Adadelta at element i; `sq` and `acc` are the running averages of the
// squared gradients and the squared deltas.
template <typename T>
__device__ __forceinline__ void adadelta_elem(size_t i, T *p, const T *g, T *sq, T *acc,
                                              const AdadeltaHyper &h) {
    float pi = to_f(p[i]);
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    float s = to_f(sq[i]) * h.rho + h.w * gi * gi;
    sq[i] = from_f<T>(s);
    float delta = sqrtf(to_f(acc[i]) + h.eps) / sqrtf(s + h.eps) * gi;
    acc[i] = from_f<T>(to_f(acc[i]) * h.rho + h.w * delta * delta);
    p[i] = from_f<T>(pi - h.lr * delta);
}

// The larger of a and b, NaN if either is (torch.maximum; fmaxf drops NaN).
__device__ __forceinline__ float maximum_nan(float a, float b) {
    return (a > b || a != a) ? a : b;
}

// Mirrors `AdamaxHyper` in kernels/src/cuda/launch/optim_hypers.rs.
struct AdamaxHyper {
    float w1;  // 1 - beta1
    float beta2, eps, weight_decay;
    float clr;  // lr / (1 - beta1^t)
    int maximize;
};

// Adamax at element i; `u` is the exponentially weighted infinity norm.
template <typename T>
__device__ __forceinline__ void adamax_elem(size_t i, T *p, const T *g, T *m, T *u,
                                            const AdamaxHyper &h) {
    float pi = to_f(p[i]);
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    float mi = to_f(m[i]);
    mi = mi + h.w1 * (gi - mi);
    float ui = maximum_nan(to_f(u[i]) * h.beta2, fabsf(gi) + h.eps);
    m[i] = from_f<T>(mi);
    u[i] = from_f<T>(ui);
    p[i] = from_f<T>(pi - h.clr * (mi / ui));
}

// Mirrors `NadamHyper` in kernels/src/cuda/launch/optim_hypers.rs; the
// per-step scalars come from `NadamStep::scalars` on the host.
struct NadamHyper {
    float w1, beta2, w2, eps;
    float weight_decay;  // the L2 term, 0 when decoupled
    float decay;         // 1 - lr weight_decay when decoupled, else 1
    float grad_coef, avg_coef, bc2;
    int maximize;
};

// NAdam at element i.
template <typename T>
__device__ __forceinline__ void nadam_elem(size_t i, T *p, const T *g, T *m, T *v,
                                           const NadamHyper &h) {
    float pi = to_f(p[i]) * h.decay;
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    float mi = to_f(m[i]);
    mi = mi + h.w1 * (gi - mi);
    float vi = to_f(v[i]) * h.beta2 + h.w2 * gi * gi;
    float denom = sqrtf(vi / h.bc2) + h.eps;
    pi = pi + h.grad_coef * (gi / denom);
    p[i] = from_f<T>(pi + h.avg_coef * (mi / denom));
    m[i] = from_f<T>(mi);
    v[i] = from_f<T>(vi);
}

// Mirrors `RadamHyper` in kernels/src/cuda/launch/optim_hypers.rs; the
// per-step scalars come from `RadamStep::scalars` on the host.
struct RadamHyper {
    float w1, beta2, w2, eps;
    float weight_decay;  // the L2 term, 0 when decoupled
    float decay;         // 1 - lr weight_decay when decoupled, else 1
    float lr, bc1, bc2_sqrt;
    float rect;          // the variance rectification, when `rectified`
    int rectified, maximize;
};

// RAdam at element i.
template <typename T>
__device__ __forceinline__ void radam_elem(size_t i, T *p, const T *g, T *m, T *v,
                                           const RadamHyper &h) {
    float pi = to_f(p[i]) * h.decay;
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    float mi = to_f(m[i]);
    mi = mi + h.w1 * (gi - mi);
    float vi = to_f(v[i]) * h.beta2 + h.w2 * gi * gi;
    float corrected = mi / h.bc1;
    if (h.rectified) {
        float adaptive = (1.0f / (sqrtf(vi) + h.eps)) * h.bc2_sqrt;
        pi = pi - corrected * h.lr * adaptive * h.rect;
    } else {
        pi = pi - corrected * h.lr;
    }
    p[i] = from_f<T>(pi);
    m[i] = from_f<T>(mi);
    v[i] = from_f<T>(vi);
}

// Mirrors `RpropHyper` in kernels/src/cuda/launch/optim_hypers.rs.
struct RpropHyper {
    float lr, etaminus, etaplus, step_size_min, step_size_max;
    int maximize, first;
};

// torch.sign: -1, 0 or 1, and 0 for NaN.
__device__ __forceinline__ float sign_of(float x) {
    return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
}

// Rprop at element i; `prev` is the last gradient used, `step` the
// coordinate's step size.
template <typename T>
__device__ __forceinline__ void rprop_elem(size_t i, T *p, const T *g, T *prev, T *step,
                                           const RpropHyper &h) {
    float gi = to_f(g[i]);
    if (h.maximize) gi = -gi;
    float product = gi * to_f(prev[i]);
    // The factor PyTorch writes over sign(g * prev); NaN stays NaN.
    float eta = product > 0.0f ? h.etaplus
              : product < 0.0f ? h.etaminus
              : product == 0.0f ? 1.0f : product;
    float size = (h.first ? h.lr : to_f(step[i])) * eta;
    size = size < h.step_size_min ? h.step_size_min
         : size > h.step_size_max ? h.step_size_max : size;
    // After a sign change the coordinate waits a step.
    if (eta == h.etaminus) gi = 0.0f;
    step[i] = from_f<T>(size);
    p[i] = from_f<T>(to_f(p[i]) - sign_of(gi) * size);
    prev[i] = from_f<T>(gi);
}

// Mirrors `AsgdHyper` in kernels/src/cuda/launch/optim_hypers.rs.
struct AsgdHyper {
    float weight_decay;
    float decay;  // 1 - lambd eta
    float eta, mu;
    int maximize;
    int copy;     // mu == 1: the average is the parameter
};

// ASGD at element i; `ax` is the running average of the parameter.
template <typename T>
__device__ __forceinline__ void asgd_elem(size_t i, T *p, const T *g, T *ax,
                                          const AsgdHyper &h) {
    float pi = to_f(p[i]);
    float gi = decayed_grad(to_f(g[i]), pi, h.maximize, h.weight_decay);
    pi = pi * h.decay;
    pi = pi + -h.eta * gi;
    float a = to_f(ax[i]);
    p[i] = from_f<T>(pi);
    ax[i] = from_f<T>(h.copy ? pi : a + (pi - a) * h.mu);
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
    MULTI(T, RmspropHyper, rmsprop, (T *)t.s0[k], (T *)t.s1[k], (T *)t.s2[k])          \
    ONE_STATE(T, AdagradHyper, adagrad)                                                    \
    TWO_STATES(T, AdadeltaHyper, adadelta)                                                 \
    TWO_STATES(T, AdamaxHyper, adamax)                                                     \
    TWO_STATES(T, NadamHyper, nadam)                                                       \
    TWO_STATES(T, RadamHyper, radam)                                                       \
    TWO_STATES(T, RpropHyper, rprop)                                                       \
    ONE_STATE(T, AsgdHyper, asgd)

// `<op>_<T>`, `<op>_at_<T>` and the multi-tensor forms of an update with one
// or two state buffers.
#define ONE_STATE(T, H, op)                                                                 \
    extern "C" __global__ void op##_##T(size_t n, T *p, const T *g, T *s0, H h)             \
        { GRID_STRIDE(i, n) op##_elem<T>(i, p, g, s0, h); }                                 \
    extern "C" __global__ void op##_at_##T(size_t n, T *p, const T *g, T *s0, const H *h)   \
        { GRID_STRIDE(i, n) op##_elem<T>(i, p, g, s0, *h); }                                \
    MULTI(T, H, op, (T *)t.s0[k])
#define TWO_STATES(T, H, op)                                                                \
    extern "C" __global__ void op##_##T(size_t n, T *p, const T *g, T *s0, T *s1, H h)      \
        { GRID_STRIDE(i, n) op##_elem<T>(i, p, g, s0, s1, h); }                             \
    extern "C" __global__ void op##_at_##T(size_t n, T *p, const T *g, T *s0, T *s1,        \
        const H *h) { GRID_STRIDE(i, n) op##_elem<T>(i, p, g, s0, s1, *h); }                \
    MULTI(T, H, op, (T *)t.s0[k], (T *)t.s1[k])

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
