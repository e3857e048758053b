// Strided views to contiguous buffers, bit for bit, one kernel per element
// width: `strided_copy_<u8|u16|u32|u64>` serve every dtype (bool and u8,
// f16 and bf16, f32, f64 and i64). CPU twin: kernels/src/cpu/strided.rs
// (`copy_strided`).

#define STRIDED_COPY(T)                                                                \
    extern "C" __global__ void strided_copy_##T(size_t n, Strided l, const T *x, T *y) { \
        GRID_STRIDE(i, n) y[i] = x[strided(i, l)];                                     \
    }
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
STRIDED_COPY(u8)
STRIDED_COPY(u16)
STRIDED_COPY(u32)
STRIDED_COPY(u64)
