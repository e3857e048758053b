// Fused scaled-dot-product attention over dense row-major q [batch, l, e],
// k [batch, s, e], v [batch, s, ev]: flash attention's online softmax, so no
// [l, s] matrix is ever stored (O(l) memory), forward and backward. One warp
// per row: the forward and dq walk a query row's keys 32 at a time (a lane
// per key for the dot products, then the lanes over the value width);
// dk/dv walk a key row's queries the same way, so every gradient is written
// by one warp and no atomics are needed. Widths up to TAPIR_ATTN_MAX_WIDTH.
// `causal` is PyTorch's top-left aligned mask: query i sees keys 0..=i.
// CPU twin: kernels/src/cpu/attention.rs (tiled; the same arithmetic up to
// the order of its sums).

#define TAPIR_ATTN_WARPS 4
#define TAPIR_ATTN_MAX_WIDTH 256
#define TAPIR_ATTN_PER_LANE (TAPIR_ATTN_MAX_WIDTH / 32)

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Copies row `src` (`n` elements) into this warp's shared floats.
template <typename T>
__device__ __forceinline__ void row_to_shared(float *dst, const T *src, size_t n, int lane) {
    for (size_t d = lane; d < n; d += 32) dst[d] = to_f(src[d]);
    __syncwarp();
}

// `a · row` for `a` in shared memory and `row` in global memory.
template <typename T>
__device__ __forceinline__ float dot_row(const float *a, const T *row, size_t n) {
    float acc = 0.0f;
    for (size_t d = 0; d < n; ++d) acc += a[d] * to_f(row[d]);
    return acc;
}

__device__ __forceinline__ size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

// Keys query `i` sees.
__device__ __forceinline__ size_t keys_seen(int causal, size_t i, size_t s) {
    return causal ? smaller(i + 1, s) : s;
}

// out[b, i] = softmax(scale · q[b, i] kᵀ) v, and lse[b, i] the log-sum-exp
// of the scaled scores (-inf, with a zero row, where a query sees no key).
template <typename T>
__device__ void attention_forward_impl(size_t batch, size_t l, size_t s, size_t e, size_t ev,
                                       float scale, int causal, const T *q, const T *k,
                                       const T *v, T *out, float *lse) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t row = (size_t)blockIdx.x * TAPIR_ATTN_WARPS + warp;
    if (row >= batch * l) return;  // a whole warp leaves together
    const size_t b = row / l, i = row % l;
    float *qs = shared + warp * e;
    row_to_shared(qs, q + row * e, e, lane);
    const T *kb = k + b * s * e, *vb = v + b * s * ev;
    const size_t seen = keys_seen(causal, i, s);
    float m = -TAPIR_INF, sum = 0.0f, acc[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] = 0.0f;
    for (size_t c = 0; c < seen; c += 32) {
        const size_t j = c + lane;
        const float score = j < seen ? dot_row(qs, kb + j * e, e) * scale : -TAPIR_INF;
        const float m_new = fmaxf(m, warp_max(score));
        const float p = j < seen ? expf(score - m_new) : 0.0f;
        const float rescale = expf(m - m_new);  // 0 on the first chunk (m = -inf)
        sum = sum * rescale + warp_sum(p);
        for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] *= rescale;
        const size_t chunk = smaller(32, seen - c);
        for (size_t jj = 0; jj < chunk; ++jj) {
            const float pj = __shfl_sync(0xffffffffu, p, (int)jj);
            const T *vr = vb + (c + jj) * ev;
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < ev) acc[t] += pj * to_f(vr[d]);
            }
        }
        m = m_new;
    }
    const float inv = seen > 0 ? 1.0f / sum : 0.0f;
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < ev) out[row * ev + d] = from_f<T>(acc[t] * inv);
    }
    if (lane == 0) lse[row] = seen > 0 ? m + logf(sum) : -TAPIR_INF;
}

// dq for each query row, and delta[row] = dout[row] · out[row], which the
// dk/dv kernel reads: with p = exp(scale · q kᵀ - lse) and
// ds = p (dout · v - delta), dq = scale · Σ_j ds_j k_j.
template <typename T>
__device__ void attention_backward_dq_impl(size_t batch, size_t l, size_t s, size_t e, size_t ev,
                                           float scale, int causal, const T *q, const T *k,
                                           const T *v, const T *out, const float *lse,
                                           const T *dout, float *delta, T *dq) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t row = (size_t)blockIdx.x * TAPIR_ATTN_WARPS + warp;
    if (row >= batch * l) return;
    const size_t b = row / l, i = row % l;
    float *qs = shared + warp * (e + ev), *gs = qs + e;
    row_to_shared(qs, q + row * e, e, lane);
    row_to_shared(gs, dout + row * ev, ev, lane);
    float part = 0.0f;
    for (size_t d = lane; d < ev; d += 32) part += gs[d] * to_f(out[row * ev + d]);
    const float di = warp_sum(part);
    if (lane == 0) delta[row] = di;
    const T *kb = k + b * s * e, *vb = v + b * s * ev;
    const size_t seen = keys_seen(causal, i, s);
    const float m = lse[row];
    float acc[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] = 0.0f;
    for (size_t c = 0; c < seen; c += 32) {
        const size_t j = c + lane;
        float ds = 0.0f;
        if (j < seen) {
            const float p = expf(dot_row(qs, kb + j * e, e) * scale - m);
            ds = p * (dot_row(gs, vb + j * ev, ev) - di);
        }
        const size_t chunk = smaller(32, seen - c);
        for (size_t jj = 0; jj < chunk; ++jj) {
            const float dsj = __shfl_sync(0xffffffffu, ds, (int)jj);
            const T *kr = kb + (c + jj) * e;
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < e) acc[t] += dsj * to_f(kr[d]);
            }
        }
    }
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < e) dq[row * e + d] = from_f<T>(acc[t] * scale);
    }
}

// dk and dv for each key row j, over the queries that see it:
// dv = Σ_i p_i dout_i, dk = scale · Σ_i ds_i q_i.
template <typename T>
__device__ void attention_backward_dkv_impl(size_t batch, size_t l, size_t s, size_t e, size_t ev,
                                            float scale, int causal, const T *q, const T *k,
                                            const T *v, const float *lse, const float *delta,
                                            const T *dout, T *dk, T *dv) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t row = (size_t)blockIdx.x * TAPIR_ATTN_WARPS + warp;
    if (row >= batch * s) return;
    const size_t b = row / s, j = row % s;
    float *ks = shared + warp * (e + ev), *vs = ks + e;
    row_to_shared(ks, k + row * e, e, lane);
    row_to_shared(vs, v + row * ev, ev, lane);
    const T *qb = q + b * l * e, *gb = dout + b * l * ev;
    const float *lb = lse + b * l, *db = delta + b * l;
    const size_t first = causal ? j : 0;  // the first query that sees key j
    float ak[TAPIR_ATTN_PER_LANE], av[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) ak[t] = av[t] = 0.0f;
    for (size_t c = first; c < l; c += 32) {
        const size_t i = c + lane;
        float p = 0.0f, ds = 0.0f;
        if (i < l) {
            p = expf(dot_row(ks, qb + i * e, e) * scale - lb[i]);
            ds = p * (dot_row(vs, gb + i * ev, ev) - db[i]);
        }
        const size_t chunk = smaller(32, l - c);
        for (size_t ii = 0; ii < chunk; ++ii) {
            const float pi = __shfl_sync(0xffffffffu, p, (int)ii);
            const float dsi = __shfl_sync(0xffffffffu, ds, (int)ii);
            const T *qr = qb + (c + ii) * e, *gr = gb + (c + ii) * ev;
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < ev) av[t] += pi * to_f(gr[d]);
                if (d < e) ak[t] += dsi * to_f(qr[d]);
            }
        }
    }
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < e) dk[row * e + d] = from_f<T>(ak[t] * scale);
        if (d < ev) dv[row * ev + d] = from_f<T>(av[t]);
    }
}

#define ATTENTION(T)                                                                           \
    extern "C" __global__ void attention_forward_##T(                                          \
        size_t batch, size_t l, size_t s, size_t e, size_t ev, float scale, int causal,        \
        const T *q, const T *k, const T *v, T *out, float *lse) {                              \
        attention_forward_impl<T>(batch, l, s, e, ev, scale, causal, q, k, v, out, lse);       \
    }                                                                                          \
    extern "C" __global__ void attention_backward_dq_##T(                                      \
        size_t batch, size_t l, size_t s, size_t e, size_t ev, float scale, int causal,        \
        const T *q, const T *k, const T *v, const T *out, const float *lse, const T *dout,     \
        float *delta, T *dq) {                                                                 \
        attention_backward_dq_impl<T>(batch, l, s, e, ev, scale, causal, q, k, v, out, lse,    \
                                      dout, delta, dq);                                        \
    }                                                                                          \
    extern "C" __global__ void attention_backward_dkv_##T(                                     \
        size_t batch, size_t l, size_t s, size_t e, size_t ev, float scale, int causal,        \
        const T *q, const T *k, const T *v, const float *lse, const float *delta,              \
        const T *dout, T *dk, T *dv) {                                                         \
        attention_backward_dkv_impl<T>(batch, l, s, e, ev, scale, causal, q, k, v, lse, delta, \
                                       dout, dk, dv);                                          \
    }

ATTENTION(f32)
ATTENTION(f16)
ATTENTION(bf16)
