// Row-wise ordering over a contiguous [rows, n] tensor: running sums and
// stable sorts, one thread per row (rows are many where it matters: a
// cumsum over a sequence per batch row; a sort of a few long rows is
// correct but slow, n log n steps on one thread).
// CPU twins: kernels/src/cpu/order.rs (the same f64 accumulation, the same
// comparison, the same stable order).

template <typename T>
__device__ void cumsum_impl(size_t rows, size_t n, const T *x, T *y) {
    GRID_STRIDE(r, rows) {
        const T *row = x + r * n;
        T *out = y + r * n;
        double acc = 0.0;
        for (size_t j = 0; j < n; ++j) {
            acc += (double)to_f(row[j]);
            out[j] = from_f<T>((float)acc);
        }
    }
}

// Whether a comes strictly before b: ascending puts NaN last, descending
// first (PyTorch's order).
__device__ __forceinline__ bool order_before(float a, float b, int descending) {
    bool an = a != a, bn = b != b;
    if (descending) return (an && !bn) || (!an && !bn && a > b);
    return (bn && !an) || (!an && !bn && a < b);
}

// Bottom-up merge sort of each row's indices, ping-ponging between idx and
// scratch; a right element is taken only when strictly before the left
// one, so ties keep their order.
template <typename T>
__device__ void sort_impl(size_t rows, size_t n, int descending, const T *x, T *vals,
                          long long *idx, long long *scratch) {
    GRID_STRIDE(r, rows) {
        const T *row = x + r * n;
        long long *src = idx + r * n;
        long long *dst = scratch + r * n;
        for (size_t j = 0; j < n; ++j) src[j] = (long long)j;
        for (size_t w = 1; w < n; w *= 2) {
            for (size_t lo = 0; lo < n; lo += 2 * w) {
                size_t mid = lo + w < n ? lo + w : n;
                size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
                size_t i = lo, k = mid, o = lo;
                while (i < mid && k < hi) {
                    bool right = order_before(to_f(row[src[k]]), to_f(row[src[i]]), descending);
                    dst[o++] = right ? src[k++] : src[i++];
                }
                while (i < mid) dst[o++] = src[i++];
                while (k < hi) dst[o++] = src[k++];
            }
            long long *t = src;
            src = dst;
            dst = t;
        }
        long long *out = idx + r * n;
        for (size_t j = 0; j < n; ++j) {
            long long s = src[j];
            out[j] = s;
            vals[r * n + j] = row[s];
        }
    }
}

#define ORDER(T)                                                                             \
    extern "C" __global__ void cumsum_last_##T(size_t rows, size_t n, const T *x, T *y) {    \
        cumsum_impl<T>(rows, n, x, y);                                                       \
    }                                                                                        \
    extern "C" __global__ void sort_last_##T(size_t rows, size_t n, int descending,          \
                                             const T *x, T *vals, long long *idx,            \
                                             long long *scratch) {                           \
        sort_impl<T>(rows, n, descending, x, vals, idx, scratch);                            \
    }

ORDER(f32)
ORDER(f16)
ORDER(bf16)
