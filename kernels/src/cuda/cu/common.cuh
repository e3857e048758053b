// Shared by every tapir CUDA module: f16/bf16 as raw 16-bit storage with
// conversions to and from float (all arithmetic is done in f32, as PyTorch
// does for half types), and the strided index used for broadcasting.
// Prepended to each module's source. It needs no CUDA headers, so NVRTC
// compiles it with no include path. `TAPIR_EMULATED` is defined only by the
// CPU emulator (kernels/src/cuda/emulator), which has no PTX.

struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
typedef float f32;

#define TAPIR_INF __int_as_float(0x7f800000)

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(f16 x) {
#ifdef TAPIR_EMULATED
    return tapir_emu_half_to_float(x.bits);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
#endif
}
__device__ __forceinline__ float to_f(bf16 x) { return __uint_as_float(((unsigned)x.bits) << 16); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ f16 from_f<f16>(float x) {
    f16 h;
#ifdef TAPIR_EMULATED
    h.bits = tapir_emu_float_to_half(x);
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
#endif
    return h;
}
// Round to nearest even, NaN kept quiet (as PyTorch's c10::BFloat16).
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) {
    unsigned u = __float_as_uint(x);
    bf16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        b.bits = 0x7fc0;
    } else {
        b.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    return b;
}

// A view's shape and strides (in elements), passed to kernels by value so a
// launch needs no device allocation. Mirrors `Strided` in kernels/src/cuda/launch.rs.
#define TAPIR_MAX_DIMS 8
struct Strided {
    int ndim;
    unsigned long long shape[TAPIR_MAX_DIMS];
    long long strides[TAPIR_MAX_DIMS];
};

// Offset of linear index `i` (row-major over the view's shape) in its buffer.
__device__ __forceinline__ size_t strided(size_t i, const Strided &l) {
    long long off = 0;
    for (int d = l.ndim - 1; d >= 0; --d) {
        off += (long long)(i % l.shape[d]) * l.strides[d];
        i /= l.shape[d];
    }
    return (size_t)off;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)blockDim.x * gridDim.x)
