// A CPU emulator for tapir's CUDA kernels, for tests on machines without a
// GPU. The kernel sources (the same text NVRTC compiles) are compiled as C++
// with this header first; every CUDA thread of a block runs as a fiber
// (ucontext) on one OS thread, and a scheduler switches fibers only at
// barriers: __syncthreads (all live threads of the block), and __syncwarp and
// the shuffles (all 32 lanes of a warp). So the emulator executes the
// kernels' real index arithmetic, shared-memory layout, barriers and warp
// exchanges, and reports what a GPU would leave undefined: a barrier that
// some threads never reach (deadlock), a shuffle with a lane that has exited,
// a partial warp mask. Blocks run one after another, so `__shared__` arrays
// are plain statics and dynamic shared memory is one heap block of exactly
// the launch's size (AddressSanitizer catches a kernel that overruns it).
// Blocks, and a block's threads, run in increasing or decreasing order (the
// harness runs both and compares): a result that depends on the order is a
// race, between threads of a block or between blocks.

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define TAPIR_EMULATED 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static

namespace emu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

enum class State { Ready, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
    ucontext_t context;
    dim3 thread_idx;
    unsigned lane = 0, warp = 0;
    State state = State::Ready;
    // At a warp barrier: whether it is a shuffle, the value offered, the
    // lane read from, and (after the exchange) the value received.
    bool shuffle = false;
    uint64_t offered = 0, received = 0;
    unsigned source = 0;
};

inline dim3 block_idx, block_dim, grid_dim;
inline Fiber *current = nullptr;
inline ucontext_t scheduler;
inline void *dynamic_shared_block = nullptr;

[[noreturn]] inline void fail(const std::string &what) {
    std::fprintf(stderr, "emulated CUDA: %s (block %u,%u,%u)\n", what.c_str(), block_idx.x,
                 block_idx.y, block_idx.z);
    std::exit(3);
}

inline void yield_to_scheduler() { swapcontext(&current->context, &scheduler); }

inline void sync_block() {
    current->state = State::AtBlockBarrier;
    yield_to_scheduler();
}

inline void sync_warp(unsigned mask) {
    if (mask != 0xffffffffu) fail("__syncwarp with a partial mask is not emulated");
    current->state = State::AtWarpBarrier;
    current->shuffle = false;
    yield_to_scheduler();
}

template <typename V>
inline V shuffle_from(unsigned mask, V v, unsigned source) {
    static_assert(sizeof(V) <= 8, "a shuffled value is at most 8 bytes");
    if (mask != 0xffffffffu) fail("a shuffle with a partial mask is not emulated");
    current->state = State::AtWarpBarrier;
    current->shuffle = true;
    current->offered = 0;
    std::memcpy(&current->offered, &v, sizeof(V));
    current->source = source % 32;
    yield_to_scheduler();
    V out;
    std::memcpy(&out, &current->received, sizeof(V));
    return out;
}

inline void *dynamic_shared() { return dynamic_shared_block; }

// Bit casts, as CUDA's intrinsics.
template <typename To, typename From>
inline To bits_as(From x) {
    static_assert(sizeof(To) == sizeof(From), "same width");
    To y;
    std::memcpy(&y, &x, sizeof(To));
    return y;
}

}  // namespace emu

#define threadIdx (emu::current->thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::sync_block()

inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::sync_warp(mask); }

template <typename V>
inline V __shfl_sync(unsigned mask, V v, int source) {
    return emu::shuffle_from(mask, v, (unsigned)source);
}
template <typename V>
inline V __shfl_xor_sync(unsigned mask, V v, int offset) {
    return emu::shuffle_from(mask, v, emu::current->lane ^ (unsigned)offset);
}

inline float __int_as_float(int x) { return emu::bits_as<float>(x); }
inline float __uint_as_float(unsigned x) { return emu::bits_as<float>(x); }
inline unsigned __float_as_uint(float x) { return emu::bits_as<unsigned>(x); }
inline int __float_as_int(float x) { return emu::bits_as<int>(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
using std::isinf;
using std::isnan;
using std::signbit;

// Fibers run one at a time, so atomics are plain read-modify-writes.
template <typename V>
inline V atomicAdd(V *p, V v) {
    V old = *p;
    *p = old + v;
    return old;
}
template <typename V>
inline V atomicCAS(V *p, V compare, V v) {
    V old = *p;
    if (old == compare) *p = v;
    return old;
}

// IEEE half conversions (round to nearest even), as PTX's cvt.rn.f16.f32
// and cvt.f32.f16, through GCC's _Float16.
inline float tapir_emu_half_to_float(unsigned short bits) {
    return (float)emu::bits_as<_Float16>(bits);
}
inline unsigned short tapir_emu_float_to_half(float x) {
    return emu::bits_as<unsigned short>((_Float16)x);
}

namespace emu {

// A kernel's parameter as the harness checks an argument against it.
struct Param {
    size_t size;
    bool pointer;
};

template <typename... A>
std::vector<Param> params_of(void (*)(A...)) {
    return {Param{sizeof(A), std::is_pointer<A>::value}...};
}

template <typename... A, size_t... I>
void call_with(void (*f)(A...), void **args, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<A> *>(args[I])...);
}

// Calls kernel `f` with its arguments unpacked from `args` (one pointer to
// each argument's bytes, as cuLaunchKernel takes them).
template <typename... A>
void invoke(void (*f)(A...), void **args) {
    call_with(f, args, std::index_sequence_for<A...>{});
}

struct Kernel {
    const char *name;
    void (*call)(void **);
    std::vector<Param> (*params)();
};

}  // namespace emu
