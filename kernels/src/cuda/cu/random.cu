// Philox4x32-10 draws, one element per thread: element i of a call is stream
// position e = offset + i, lane e % 4 of the block with counter e / 4 under
// the key `seed`. The CPU twin is kernels/src/cpu/philox.rs, term for term.

__device__ __forceinline__ unsigned philox_bits(unsigned long long seed, unsigned long long e) {
    unsigned long long block = e >> 2;
    unsigned c0 = (unsigned)block, c1 = (unsigned)(block >> 32), c2 = 0u, c3 = 0u;
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        unsigned long long p0 = (unsigned long long)c0 * 0xD2511F53ull;
        unsigned long long p1 = (unsigned long long)c2 * 0xCD9E8D57ull;
        unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0;
        unsigned n1 = (unsigned)p1;
        unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
        unsigned n3 = (unsigned)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    }
    switch ((unsigned)(e & 3ull)) {
        case 0: return c0;
        case 1: return c1;
        case 2: return c2;
        default: return c3;
    }
}

// Uniform in [0, 1): the top 24 bits, exact in f32.
__device__ __forceinline__ float philox_unit(unsigned x) {
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

// `philox_uniform_f32`: n uniform draws in [0, 1).
extern "C" __global__ void philox_uniform_f32(size_t n, unsigned long long seed,
                                              unsigned long long offset, float *y) {
    GRID_STRIDE(i, n) { y[i] = philox_unit(philox_bits(seed, offset + i)); }
}

// `philox_normal_f32`: n standard normal draws, Box-Muller over lane pairs
// (an even position takes the cosine, an odd one the sine).
extern "C" __global__ void philox_normal_f32(size_t n, unsigned long long seed,
                                             unsigned long long offset, float *y) {
    GRID_STRIDE(i, n) {
        unsigned long long e = offset + i;
        unsigned long long first = e & ~1ull;
        float u1 = (float)((philox_bits(seed, first) >> 8) + 1u) * (1.0f / 16777216.0f);
        float u2 = philox_unit(philox_bits(seed, first + 1));
        float r = sqrtf(-2.0f * logf(u1));
        float theta = 6.28318530717958647692f * u2;
        y[i] = (e & 1ull) ? r * sinf(theta) : r * cosf(theta);
    }
}
