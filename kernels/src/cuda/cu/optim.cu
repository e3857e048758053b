// Fused optimizer updates, following PyTorch's single-tensor code paths
// (state in f32). CPU twins: kernels/src/cpu/optim.rs.

// Adam / AdamW (decoupled = 1) for one step `t`; `wd` is the weight decay.
template <typename T>
__device__ void adam_impl(size_t n, T *p, const T *g, float *m, float *v, float lr,
                          float beta1, float beta2, float eps, float wd, int decoupled, int t) {
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        float pi = to_f(p[i]);
        float gi = to_f(g[i]);
        if (decoupled) pi *= 1.0f - lr * wd;
        else gi += wd * pi;
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float denom = sqrtf(v[i]) / sqrtf(bc2) + eps;
        p[i] = from_f<T>(pi - lr / bc1 * m[i] / denom);
    }
}

// SGD with momentum, dampening, nesterov and weight decay (buf starts as g).
template <typename T>
__device__ void sgd_impl(size_t n, T *p, const T *g, float *buf, float lr, float momentum,
                         float dampening, float wd, int nesterov, int first) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        float pi = to_f(p[i]);
        float d = to_f(g[i]) + wd * pi;
        if (momentum != 0.0f) {
            buf[i] = first ? d : momentum * buf[i] + (1.0f - dampening) * d;
            d = nesterov ? d + momentum * buf[i] : buf[i];
        }
        p[i] = from_f<T>(pi - lr * d);
    }
}

#define OPTIM(T)                                                                           \
    extern "C" __global__ void adam_##T(size_t n, T *p, const T *g, float *m, float *v, float lr, \
        float b1, float b2, float eps, float wd, int decoupled, int t)                     \
        { adam_impl<T>(n, p, g, m, v, lr, b1, b2, eps, wd, decoupled, t); }                \
    extern "C" __global__ void sgd_##T(size_t n, T *p, const T *g, float *buf, float lr,   \
        float momentum, float dampening, float wd, int nesterov, int first)                \
        { sgd_impl<T>(n, p, g, buf, lr, momentum, dampening, wd, nesterov, first); }

OPTIM(f32)
OPTIM(f16)
OPTIM(bf16)
