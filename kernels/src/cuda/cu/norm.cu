// LayerNorm over the last dim of a contiguous [rows, n] tensor. Forward: one
// block per row; writes y and the per-row mean and 1/std for the backward.
// Backward: dx one block per row, dw/db one thread per column summing the
// rows in order. CPU twins: kernels/src/cpu/norm.rs.

// Sums `v` over the block into scratch[0] (blockDim.x a power of two).
__device__ float block_sum(float *scratch, float v) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) scratch[threadIdx.x] += scratch[threadIdx.x + k];
        __syncthreads();
    }
    float total = scratch[0];
    __syncthreads();
    return total;
}

template <typename T>
__device__ void layer_norm_impl(size_t n, float eps, const T *x, const T *w, const T *b,
                                T *y, float *mean_out, float *rstd_out) {
    extern __shared__ float scratch[];
    const T *row = x + blockIdx.x * n;
    float s = 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) s += to_f(row[j]);
    scratch[threadIdx.x] = s;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) scratch[threadIdx.x] += scratch[threadIdx.x + k];
        __syncthreads();
    }
    float mean = scratch[0] / n;
    __syncthreads();
    float q = 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float d = to_f(row[j]) - mean;
        q += d * d;
    }
    scratch[threadIdx.x] = q;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) scratch[threadIdx.x] += scratch[threadIdx.x + k];
        __syncthreads();
    }
    float rstd = rsqrtf(scratch[0] / n + eps);
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = (to_f(row[j]) - mean) * rstd;
        if (w) v = v * to_f(w[j]) + to_f(b[j]);
        y[blockIdx.x * n + j] = from_f<T>(v);
    }
    if (threadIdx.x == 0) {
        mean_out[blockIdx.x] = mean;
        rstd_out[blockIdx.x] = rstd;
    }
}

#define LAYER_NORM(T)                                                                    \
    extern "C" __global__ void layer_norm_##T(size_t n, float eps, const T *x, const T *w, \
        const T *b, T *y, float *mean, float *rstd) { layer_norm_impl<T>(n, eps, x, w, b, y, mean, rstd); }

LAYER_NORM(f32)
LAYER_NORM(f16)
LAYER_NORM(bf16)

// dx of one row per block: rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)),
// dxh = g * w (w may be null).
template <typename T>
__device__ void layer_norm_backward_impl(size_t n, const T *x, const T *g, const float *mean,
                                         const float *rstd, const T *w, T *dx) {
    extern __shared__ float scratch[];
    size_t base = blockIdx.x * n;
    float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    float a = 0.0f, c = 0.0f;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float dxh = to_f(g[base + j]) * (w ? to_f(w[j]) : 1.0f);
        a += dxh;
        c += dxh * (to_f(x[base + j]) - mu) * rs;
    }
    a = block_sum(scratch, a) / n;
    c = block_sum(scratch, c) / n;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        float dxh = to_f(g[base + j]) * (w ? to_f(w[j]) : 1.0f);
        dx[base + j] = from_f<T>(rs * (dxh - a - (to_f(x[base + j]) - mu) * rs * c));
    }
}

// dw[j] = sum_r g * xhat, db[j] = sum_r g, one thread per column.
template <typename T>
__device__ void layer_norm_param_grads_impl(size_t rows, size_t n, const T *x, const T *g,
                                            const float *mean, const float *rstd, T *dw, T *db) {
    GRID_STRIDE(j, n) {
        float sw = 0.0f, sb = 0.0f;
        for (size_t r = 0; r < rows; ++r) {
            float gv = to_f(g[r * n + j]);
            sw += gv * (to_f(x[r * n + j]) - mean[r]) * rstd[r];
            sb += gv;
        }
        dw[j] = from_f<T>(sw);
        db[j] = from_f<T>(sb);
    }
}

#define LAYER_NORM_BACKWARD(T)                                                           \
    extern "C" __global__ void layer_norm_backward_##T(size_t n, const T *x, const T *g,   \
        const float *mean, const float *rstd, const T *w, T *dx)                          \
        { layer_norm_backward_impl<T>(n, x, g, mean, rstd, w, dx); }                      \
    extern "C" __global__ void layer_norm_param_grads_##T(size_t rows, size_t n,          \
        const T *x, const T *g, const float *mean, const float *rstd, T *dw, T *db)       \
        { layer_norm_param_grads_impl<T>(rows, n, x, g, mean, rstd, dw, db); }

LAYER_NORM_BACKWARD(f32)
LAYER_NORM_BACKWARD(f16)
LAYER_NORM_BACKWARD(bf16)
