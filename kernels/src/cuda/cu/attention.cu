// Fused scaled-dot-product attention over q [batch, l, e], k [batch, s, e],
// v [batch, s, ev]: flash attention's online softmax, so no [l, s] matrix is
// ever stored (O(l) memory), forward and backward.
//
// Every tensor but the log-sum-exp and delta rows is a strided view whose
// rows are consecutive elements (`AttnRows`): a head split's transposed
// q/k/v ([B, T, H, E] memory read as [B, H, T, E]) is read in place, and the
// output and gradients can be written in that memory order, so neither side
// of a multi-head attention needs a transposing copy (PyTorch's flash kernel
// takes and gives the same layouts).
//
// A block is TAPIR_ATTN_WARPS rows (grid.y) of one (batch, head) slice
// (grid.x), a warp per row. The forward and dq walk the slice's keys 32 at a time: the
// block stages each chunk of keys (and values) in shared memory once for
// all its rows, then a lane per key takes the dot products and the lanes
// over the value width take the weighted sums. dk and dv walk a key row's
// queries the same way, so every gradient is written by one warp and no
// atomics are needed. Staged rows are padded by one float so the lanes'
// dot products hit 32 different banks. Widths up to TAPIR_ATTN_MAX_WIDTH.
// `causal` is PyTorch's top-left aligned mask: query i sees keys 0..=i.
// CPU twin: kernels/src/cpu/attention.rs (tiled; the same arithmetic up to
// the order of its sums).

#define TAPIR_ATTN_WARPS 8
#define TAPIR_ATTN_CHUNK 32
#define TAPIR_ATTN_MAX_WIDTH 128
#define TAPIR_ATTN_PER_LANE (TAPIR_ATTN_MAX_WIDTH / 32)

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Where a view's rows lie, in elements: slice b, split as (b / heads,
// b % heads), starts at (b / heads) * outer + (b % heads) * head; its row i
// at i * row from there.
struct AttnRows {
    size_t outer, head, row;
};

// The views of every tensor the kernels read or write (each kernel uses
// some), and the heads that split a slice index. `AttentionViews` in
// launch/attention.rs.
struct AttnViews {
    size_t heads;
    AttnRows q, k, v, out, g, dq, dk, dv;
};

// The offset of slice `b`'s first row in view `r`.
__device__ __forceinline__ size_t slice_start(AttnRows r, size_t heads, size_t b) {
    return (b / heads) * r.outer + (b % heads) * r.head;
}

// The offset of row `i` of slice `b` in view `r`.
__device__ __forceinline__ size_t row_at(AttnRows r, size_t heads, size_t b, size_t i) {
    return slice_start(r, heads, b) + i * r.row;
}

__device__ __forceinline__ size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

// Keys query `i` sees.
__device__ __forceinline__ size_t keys_seen(int causal, size_t i, size_t s) {
    return causal ? smaller(i + 1, s) : s;
}

// Copies row `src` (`n` elements) into this warp's shared floats.
template <typename T>
__device__ __forceinline__ void row_to_shared(float *dst, const T *src, size_t n, int lane) {
    for (size_t d = lane; d < n; d += 32) dst[d] = to_f(src[d]);
    __syncwarp();
}

// The whole block stages rows first..first+CHUNK of `src` (rows of `n`
// elements `stride` apart, `rows` in all; missing rows are zeros) as shared
// rows of `n + 1` floats.
template <typename T>
__device__ __forceinline__ void chunk_to_shared(float *dst, const T *src, size_t stride,
                                                size_t first, size_t rows, size_t n) {
    for (size_t x = threadIdx.x; x < TAPIR_ATTN_CHUNK * n; x += blockDim.x) {
        const size_t r = x / n, d = x % n;
        dst[r * (n + 1) + d] = first + r < rows ? to_f(src[(first + r) * stride + d]) : 0.0f;
    }
}

// `a · b` over `n` shared floats.
__device__ __forceinline__ float dot_shared(const float *a, const float *b, size_t n) {
    float acc = 0.0f;
    for (size_t d = 0; d < n; ++d) acc += a[d] * b[d];
    return acc;
}

// out[b, i] = softmax(scale · q[b, i] kᵀ) v, and lse[b, i] the log-sum-exp
// of the scaled scores (-inf, with a zero row, where a query sees no key).
// Shared: WARPS query rows of e, a key chunk of CHUNK x (e + 1), a value
// chunk of CHUNK x (ev + 1).
template <typename T>
__device__ void attention_forward_impl(size_t l, size_t s, size_t e, size_t ev, float scale,
                                       int causal, const AttnViews &w, const T *q, const T *k,
                                       const T *v, T *out, float *lse) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t b = blockIdx.x, first = (size_t)blockIdx.y * TAPIR_ATTN_WARPS;
    const size_t i = first + warp;
    const bool active = i < l;  // warp-uniform: a warp is one row
    float *qs = shared + warp * e;
    float *ks = shared + TAPIR_ATTN_WARPS * e, *vs = ks + TAPIR_ATTN_CHUNK * (e + 1);
    if (active) row_to_shared(qs, q + row_at(w.q, w.heads, b, i), e, lane);
    const size_t seen = active ? keys_seen(causal, i, s) : 0;
    // Keys the block's last row sees: every chunk some row needs.
    const size_t block_seen = keys_seen(causal, smaller(first + TAPIR_ATTN_WARPS, l) - 1, s);
    const T *kb = k + slice_start(w.k, w.heads, b), *vb = v + slice_start(w.v, w.heads, b);
    float m = -TAPIR_INF, sum = 0.0f, acc[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] = 0.0f;
    for (size_t c = 0; c < block_seen; c += TAPIR_ATTN_CHUNK) {
        __syncthreads();  // every warp is done with the last chunk
        chunk_to_shared(ks, kb, w.k.row, c, s, e);
        chunk_to_shared(vs, vb, w.v.row, c, s, ev);
        __syncthreads();
        if (c >= seen) continue;  // warp-uniform
        const size_t j = c + lane;
        const float score = j < seen ? dot_shared(qs, ks + lane * (e + 1), e) * scale : -TAPIR_INF;
        const float m_new = fmaxf(m, warp_max(score));
        const float p = j < seen ? expf(score - m_new) : 0.0f;
        const float rescale = expf(m - m_new);  // 0 on the first chunk (m = -inf)
        sum = sum * rescale + warp_sum(p);
        for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] *= rescale;
        const size_t chunk = smaller(TAPIR_ATTN_CHUNK, seen - c);
        for (size_t jj = 0; jj < chunk; ++jj) {
            const float pj = __shfl_sync(0xffffffffu, p, (int)jj);
            const float *vr = vs + jj * (ev + 1);
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < ev) acc[t] += pj * vr[d];
            }
        }
        m = m_new;
    }
    if (!active) return;
    const float inv = seen > 0 ? 1.0f / sum : 0.0f;
    T *o = out + row_at(w.out, w.heads, b, i);
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < ev) o[d] = from_f<T>(acc[t] * inv);
    }
    if (lane == 0) lse[b * l + i] = seen > 0 ? m + logf(sum) : -TAPIR_INF;
}

// dq for each query row, and delta[row] = dout[row] · out[row], which the
// dk/dv kernel reads: with p = exp(scale · q kᵀ - lse) and
// ds = p (dout · v - delta), dq = scale · Σ_j ds_j k_j.
// Shared: WARPS rows of e + ev (q and dout), key and value chunks as in the
// forward.
template <typename T>
__device__ void attention_backward_dq_impl(size_t l, size_t s, size_t e, size_t ev, float scale,
                                           int causal, const AttnViews &w, const T *q, const T *k,
                                           const T *v, const T *out, const float *lse,
                                           const T *dout, float *delta, T *dq) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t b = blockIdx.x, first = (size_t)blockIdx.y * TAPIR_ATTN_WARPS;
    const size_t i = first + warp, row = b * l + i;
    const bool active = i < l;
    float *qs = shared + warp * (e + ev), *gs = qs + e;
    float *ks = shared + TAPIR_ATTN_WARPS * (e + ev), *vs = ks + TAPIR_ATTN_CHUNK * (e + 1);
    float di = 0.0f, m = 0.0f;
    if (active) {
        row_to_shared(qs, q + row_at(w.q, w.heads, b, i), e, lane);
        row_to_shared(gs, dout + row_at(w.g, w.heads, b, i), ev, lane);
        const T *o = out + row_at(w.out, w.heads, b, i);
        float part = 0.0f;
        for (size_t d = lane; d < ev; d += 32) part += gs[d] * to_f(o[d]);
        di = warp_sum(part);
        if (lane == 0) delta[row] = di;
        m = lse[row];
    }
    const size_t seen = active ? keys_seen(causal, i, s) : 0;
    const size_t block_seen = keys_seen(causal, smaller(first + TAPIR_ATTN_WARPS, l) - 1, s);
    const T *kb = k + slice_start(w.k, w.heads, b), *vb = v + slice_start(w.v, w.heads, b);
    float acc[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) acc[t] = 0.0f;
    for (size_t c = 0; c < block_seen; c += TAPIR_ATTN_CHUNK) {
        __syncthreads();
        chunk_to_shared(ks, kb, w.k.row, c, s, e);
        chunk_to_shared(vs, vb, w.v.row, c, s, ev);
        __syncthreads();
        if (c >= seen) continue;
        float ds = 0.0f;
        if (c + lane < seen) {
            const float p = expf(dot_shared(qs, ks + lane * (e + 1), e) * scale - m);
            ds = p * (dot_shared(gs, vs + lane * (ev + 1), ev) - di);
        }
        const size_t chunk = smaller(TAPIR_ATTN_CHUNK, seen - c);
        for (size_t jj = 0; jj < chunk; ++jj) {
            const float dsj = __shfl_sync(0xffffffffu, ds, (int)jj);
            const float *kr = ks + jj * (e + 1);
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < e) acc[t] += dsj * kr[d];
            }
        }
    }
    if (!active) return;
    T *dqr = dq + row_at(w.dq, w.heads, b, i);
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < e) dqr[d] = from_f<T>(acc[t] * scale);
    }
}

// dk and dv for each key row j, over the queries that see it:
// dv = Σ_i p_i dout_i, dk = scale · Σ_i ds_i q_i. Shared: WARPS rows of
// e + ev (k and v), a query chunk of CHUNK x (e + 1) and an upstream chunk
// of CHUNK x (ev + 1).
template <typename T>
__device__ void attention_backward_dkv_impl(size_t l, size_t s, size_t e, size_t ev, float scale,
                                            int causal, const AttnViews &w, const T *q,
                                            const T *k, const T *v, const float *lse,
                                            const float *delta, const T *dout, T *dk, T *dv) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t b = blockIdx.x, first = (size_t)blockIdx.y * TAPIR_ATTN_WARPS;
    const size_t j = first + warp;
    const bool active = j < s;
    float *ks = shared + warp * (e + ev), *vs = ks + e;
    float *qs = shared + TAPIR_ATTN_WARPS * (e + ev), *gs = qs + TAPIR_ATTN_CHUNK * (e + 1);
    if (active) {
        row_to_shared(ks, k + row_at(w.k, w.heads, b, j), e, lane);
        row_to_shared(vs, v + row_at(w.v, w.heads, b, j), ev, lane);
    }
    // Queries from `from` on see key j; the block's first key is seen from
    // `first` on under the causal mask.
    const size_t from = causal ? j : 0, block_from = causal ? first : 0;
    const T *qb = q + slice_start(w.q, w.heads, b), *gb = dout + slice_start(w.g, w.heads, b);
    const float *lb = lse + b * l, *db = delta + b * l;
    float ak[TAPIR_ATTN_PER_LANE], av[TAPIR_ATTN_PER_LANE];
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) ak[t] = av[t] = 0.0f;
    for (size_t c = block_from; c < l; c += TAPIR_ATTN_CHUNK) {
        __syncthreads();
        chunk_to_shared(qs, qb, w.q.row, c, l, e);
        chunk_to_shared(gs, gb, w.g.row, c, l, ev);
        __syncthreads();
        if (!active || c + TAPIR_ATTN_CHUNK <= from) continue;  // warp-uniform
        const size_t i = c + lane;
        float p = 0.0f, ds = 0.0f;
        if (i >= from && i < l) {
            p = expf(dot_shared(ks, qs + lane * (e + 1), e) * scale - lb[i]);
            ds = p * (dot_shared(vs, gs + lane * (ev + 1), ev) - db[i]);
        }
        const size_t chunk = smaller(TAPIR_ATTN_CHUNK, l - c);
        for (size_t ii = 0; ii < chunk; ++ii) {
            const float pi = __shfl_sync(0xffffffffu, p, (int)ii);
            const float dsi = __shfl_sync(0xffffffffu, ds, (int)ii);
            const float *qr = qs + ii * (e + 1), *gr = gs + ii * (ev + 1);
            for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
                const size_t d = lane + 32 * t;
                if (d < ev) av[t] += pi * gr[d];
                if (d < e) ak[t] += dsi * qr[d];
            }
        }
    }
    if (!active) return;
    T *dkr = dk + row_at(w.dk, w.heads, b, j), *dvr = dv + row_at(w.dv, w.heads, b, j);
    for (int t = 0; t < TAPIR_ATTN_PER_LANE; ++t) {
        const size_t d = lane + 32 * t;
        if (d < e) dkr[d] = from_f<T>(ak[t] * scale);
        if (d < ev) dvr[d] = from_f<T>(av[t]);
    }
}

#define ATTENTION(T)                                                                           \
    extern "C" __global__ void attention_forward_##T(size_t l, size_t s, size_t e, size_t ev,  \
                                                     float scale, int causal, AttnViews w,     \
                                                     const T *q, const T *k, const T *v,       \
                                                     T *out, float *lse) {                     \
        attention_forward_impl<T>(l, s, e, ev, scale, causal, w, q, k, v, out, lse);           \
    }                                                                                          \
    extern "C" __global__ void attention_backward_dq_##T(                                      \
        size_t l, size_t s, size_t e, size_t ev, float scale, int causal, AttnViews w,         \
        const T *q, const T *k, const T *v, const T *out, const float *lse, const T *dout,     \
        float *delta, T *dq) {                                                                 \
        attention_backward_dq_impl<T>(l, s, e, ev, scale, causal, w, q, k, v, out, lse, dout,  \
                                      delta, dq);                                              \
    }                                                                                          \
    extern "C" __global__ void attention_backward_dkv_##T(                                     \
        size_t l, size_t s, size_t e, size_t ev, float scale, int causal, AttnViews w,         \
        const T *q, const T *k, const T *v, const float *lse, const float *delta,              \
        const T *dout, T *dk, T *dv) {                                                         \
        attention_backward_dkv_impl<T>(l, s, e, ev, scale, causal, w, q, k, v, lse, delta,     \
                                       dout, dk, dv);                                          \
    }

ATTENTION(f32)
ATTENTION(f16)
ATTENTION(bf16)
