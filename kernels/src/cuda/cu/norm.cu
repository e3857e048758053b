// LayerNorm forward over the last dim of a contiguous [rows, n] tensor, one
// block per row; writes y and the per-row mean and 1/std for the backward.
// CPU twin: kernels/src/cpu/norm.rs.

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
