// Data movement, one kernel per element width (`u8`, `u16`, `u32`, `u64`
// serve every dtype: bool and u8, f16 and bf16, f32, f64 and i64), and
// conversions between every pair of dtypes. CPU twins:
// kernels/src/cpu/elementwise.rs (`copy_strided`, `zip_inplace`) and
// runtime/src/storage/cpu.rs (`cast`, `select_where`).

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
typedef double f64;
struct b8 { unsigned char v; };

// y = x[view], contiguous.
#define STRIDED_COPY(T)                                                                \
    extern "C" __global__ void strided_copy_##T(size_t n, Strided l, const T *x, T *y) { \
        GRID_STRIDE(i, n) y[i] = x[strided(i, l)];                                     \
    }
// y[view ly] = x[view lx], both views of one shape (copy_ and slice writes).
#define STRIDED_ASSIGN(T)                                                              \
    extern "C" __global__ void strided_assign_##T(size_t n, Strided ly, Strided lx,   \
                                                  T *y, const T *x) {                  \
        GRID_STRIDE(i, n) y[strided(i, ly)] = x[strided(i, lx)];                       \
    }
// y = cond ? a : b over three views broadcast to one shape; cond is bool.
#define WHERE(T)                                                                       \
    extern "C" __global__ void where_##T(size_t n, Strided lc, Strided la, Strided lb, \
        const unsigned char *c, const T *a, const T *b, T *y) {                        \
        GRID_STRIDE(i, n) y[i] = c[strided(i, lc)] ? a[strided(i, la)] : b[strided(i, lb)]; \
    }
#define MOVES(T) STRIDED_COPY(T) STRIDED_ASSIGN(T) WHERE(T)
MOVES(u8)
MOVES(u16)
MOVES(u32)
MOVES(u64)

// Every dtype to and from double (exact for all but i64 beyond 2^53); the
// half types convert through float as c10::Half and c10::BFloat16 do.
__device__ __forceinline__ double to_d(f32 x) { return x; }
__device__ __forceinline__ double to_d(f16 x) { return to_f(x); }
__device__ __forceinline__ double to_d(bf16 x) { return to_f(x); }
__device__ __forceinline__ double to_d(f64 x) { return x; }
__device__ __forceinline__ double to_d(i64 x) { return (double)x; }
__device__ __forceinline__ double to_d(u8 x) { return x; }
__device__ __forceinline__ double to_d(b8 x) { return x.v ? 1.0 : 0.0; }
template <typename T> __device__ __forceinline__ T from_d(double x);
template <> __device__ __forceinline__ f32 from_d<f32>(double x) { return (float)x; }
template <> __device__ __forceinline__ f16 from_d<f16>(double x) { return from_f<f16>((float)x); }
template <> __device__ __forceinline__ bf16 from_d<bf16>(double x) { return from_f<bf16>((float)x); }
template <> __device__ __forceinline__ f64 from_d<f64>(double x) { return x; }
template <> __device__ __forceinline__ i64 from_d<i64>(double x) { return (i64)x; }
template <> __device__ __forceinline__ u8 from_d<u8>(double x) { return (u8)(i64)x; }
template <> __device__ __forceinline__ b8 from_d<b8>(double x) { b8 b; b.v = x != 0.0; return b; }
// i64 to i64 and to bool stay exact.
template <typename D, typename S> __device__ __forceinline__ D convert(S x) { return from_d<D>(to_d(x)); }
template <> __device__ __forceinline__ i64 convert<i64, i64>(i64 x) { return x; }
template <> __device__ __forceinline__ b8 convert<b8, i64>(i64 x) { b8 b; b.v = x != 0; return b; }

// `cast_to_<dst>_<src>`: a strided view of src converted into a contiguous dst.
#define CAST(D, S)                                                                     \
    extern "C" __global__ void cast_to_##D##_##S(size_t n, Strided l, const S *x, D *y) { \
        GRID_STRIDE(i, n) y[i] = convert<D, S>(x[strided(i, l)]);                      \
    }
#define CASTS_FROM(S) CAST(f32, S) CAST(f16, S) CAST(bf16, S) CAST(f64, S) CAST(i64, S) CAST(u8, S) CAST(b8, S)
CASTS_FROM(f32)
CASTS_FROM(f16)
CASTS_FROM(bf16)
CASTS_FROM(f64)
CASTS_FROM(i64)
CASTS_FROM(u8)
CASTS_FROM(b8)

// `fill_<dtype>`: n copies of one value.
#define FILL(T)                                                                        \
    extern "C" __global__ void fill_##T(size_t n, double v, T *y) {                    \
        T x = from_d<T>(v);                                                            \
        GRID_STRIDE(i, n) y[i] = x;                                                    \
    }
FILL(f32)
FILL(f16)
FILL(bf16)
FILL(f64)
FILL(i64)
FILL(u8)
FILL(b8)

// `arange_i64` / `arange_f32`: element i is start + i * step, exact in
// integers, computed in double and rounded once for f32 (the CPU twins are
// kernels/src/cpu/range.rs).
extern "C" __global__ void arange_i64(size_t n, long long start, long long step, i64 *y) {
    GRID_STRIDE(i, n) y[i] = start + (long long)i * step;
}
extern "C" __global__ void arange_f32(size_t n, double start, double step, f32 *y) {
    GRID_STRIDE(i, n) y[i] = (float)(start + (double)i * step);
}

// `<cmp>_<dtype>`: elementwise comparison of two views to bool. Half types
// compare as float, integers exactly.
__device__ __forceinline__ float cv(f32 x) { return x; }
__device__ __forceinline__ float cv(f16 x) { return to_f(x); }
__device__ __forceinline__ float cv(bf16 x) { return to_f(x); }
__device__ __forceinline__ double cv(f64 x) { return x; }
__device__ __forceinline__ i64 cv(i64 x) { return x; }
__device__ __forceinline__ int cv(u8 x) { return x; }
__device__ __forceinline__ int cv(b8 x) { return x.v; }
#define COMPARE(name, OP, T)                                                           \
    extern "C" __global__ void name##_##T(size_t n, Strided la, Strided lb, const T *a, \
                                          const T *b, unsigned char *y) {              \
        GRID_STRIDE(i, n) y[i] = cv(a[strided(i, la)]) OP cv(b[strided(i, lb)]);       \
    }
#define COMPARES(T) COMPARE(eq, ==, T) COMPARE(ne, !=, T) COMPARE(lt, <, T) COMPARE(le, <=, T) COMPARE(gt, >, T) COMPARE(ge, >=, T)
COMPARES(f32)
COMPARES(f16)
COMPARES(bf16)
COMPARES(f64)
COMPARES(i64)
COMPARES(u8)
COMPARES(b8)
