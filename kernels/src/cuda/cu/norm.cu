// LayerNorm over the last dim of a contiguous [rows, n] tensor. Forward: one
// block per row; writes y and the per-row mean and 1/std for the backward.
// Backward: dx one block per row, dw/db in two stages over chunks of rows.
// CPU twins: kernels/src/cpu/norm.rs.

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

// dw[j] = sum_r g * xhat and db[j] = sum_r g, in two deterministic stages
// (no atomics). First, block (x, y) sums rows y * per .. (y + 1) * per of
// columns x * 32 .. x * 32 + 32: a warp per row lane reads 32 adjacent
// columns of a row at once, the 8 lanes' sums are added in order, and the
// chunk's partial sums go to pw/pb[y, j]. Then a thread per column adds
// the chunks' partials in order. One thread per column over every row, as
// before, left all but n threads of the GPU idle.
template <typename T>
__device__ void layer_norm_param_partials_impl(size_t rows, size_t n, size_t per, const T *x,
                                               const T *g, const float *mean, const float *rstd,
                                               float *pw, float *pb) {
    extern __shared__ float scratch[];  // two floats per thread
    const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t first = (size_t)blockIdx.y * per;
    const size_t last = first + per < rows ? first + per : rows;
    float sw = 0.0f, sb = 0.0f;
    if (j < n) {
        for (size_t r = first + threadIdx.y; r < last; r += blockDim.y) {
            float gv = to_f(g[r * n + j]);
            sw += gv * (to_f(x[r * n + j]) - mean[r]) * rstd[r];
            sb += gv;
        }
    }
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x, lanes = blockDim.x * blockDim.y;
    scratch[t] = sw;
    scratch[lanes + t] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        for (unsigned y = 1; y < blockDim.y; ++y) {
            sw += scratch[y * blockDim.x + threadIdx.x];
            sb += scratch[lanes + y * blockDim.x + threadIdx.x];
        }
        pw[blockIdx.y * n + j] = sw;
        pb[blockIdx.y * n + j] = sb;
    }
}

template <typename T>
__device__ void layer_norm_param_grads_impl(size_t chunks, size_t n, const float *pw,
                                            const float *pb, T *dw, T *db) {
    GRID_STRIDE(j, n) {
        float sw = 0.0f, sb = 0.0f;
        for (size_t c = 0; c < chunks; ++c) {
            sw += pw[c * n + j];
            sb += pb[c * n + j];
        }
        dw[j] = from_f<T>(sw);
        db[j] = from_f<T>(sb);
    }
}

#define LAYER_NORM_BACKWARD(T)                                                           \
    extern "C" __global__ void layer_norm_backward_##T(size_t n, const T *x, const T *g,   \
        const float *mean, const float *rstd, const T *w, T *dx)                          \
        { layer_norm_backward_impl<T>(n, x, g, mean, rstd, w, dx); }                      \
    extern "C" __global__ void layer_norm_param_partials_##T(size_t rows, size_t n,       \
        size_t per, const T *x, const T *g, const float *mean, const float *rstd,         \
        float *pw, float *pb)                                                              \
        { layer_norm_param_partials_impl<T>(rows, n, per, x, g, mean, rstd, pw, pb); }    \
    extern "C" __global__ void layer_norm_param_grads_##T(size_t chunks, size_t n,        \
        const float *pw, const float *pb, T *dw, T *db)                                   \
        { layer_norm_param_grads_impl<T>(chunks, n, pw, pb, dw, db); }

LAYER_NORM_BACKWARD(f32)
LAYER_NORM_BACKWARD(f16)
LAYER_NORM_BACKWARD(bf16)
