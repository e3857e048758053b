// The emulator's program: `harness JOB OUT ORDER` reads a job (buffers and
// launches, written by kernels/src/cuda/emulator/mod.rs), runs the launches
// in order over the buffers, and writes the buffers back to OUT. ORDER is
// `forward` or `reverse`: the order in which the blocks run, and a block's
// threads between barriers. It follows the kernel sources and `emu::kernels`, the table of
// the module's kernels, in the same translation unit.

namespace emu {

constexpr size_t STACK_BYTES = 32 * 1024;
constexpr unsigned MAX_THREADS = 1024, MAX_GRID_YZ = 65535;
// Dynamic shared memory above 48 KiB needs an opt-in attribute the
// launchers do not set.
constexpr unsigned MAX_DEFAULT_SHARED = 48 * 1024;

static void (*running_kernel)(void **) = nullptr;
static void **running_args = nullptr;

static void fiber_main() {
    running_kernel(running_args);
    current->state = State::Done;
}

static void run(Fiber &f) {
    current = &f;
    swapcontext(&scheduler, &f.context);
}

// Releases warp `w` if all its lanes wait at a warp barrier; fails if that
// barrier is one a GPU would leave undefined.
static bool release_warp(std::vector<Fiber> &fibers, unsigned w) {
    const size_t first = (size_t)w * 32, end = std::min(fibers.size(), first + 32);
    bool any_waiting = false;
    for (size_t t = first; t < end; ++t) {
        if (fibers[t].state == State::AtWarpBarrier) any_waiting = true;
        else if (fibers[t].state != State::Done) return false;
    }
    if (!any_waiting) return false;
    for (size_t t = first; t < end; ++t) {
        if (fibers[t].state == State::Done)
            fail("warp " + std::to_string(w) + " reached a full-mask __syncwarp or shuffle after lane " +
                 std::to_string(t - first) + " exited");
        if (fibers[t].shuffle != fibers[first].shuffle)
            fail("warp " + std::to_string(w) + " mixes a __syncwarp with a shuffle");
    }
    if (end - first < 32) fail("a full-mask warp barrier in a warp of fewer than 32 threads");
    for (size_t t = first; t < end; ++t) {
        Fiber &f = fibers[t];
        if (f.shuffle) f.received = fibers[first + f.source].offered;
        f.state = State::Ready;
    }
    return true;
}

static void run_block(std::vector<Fiber> &fibers,
                      const std::vector<std::unique_ptr<char[]>> &stacks, bool reverse) {
    const unsigned n = (unsigned)fibers.size();
    for (unsigned t = 0; t < n; ++t) {
        Fiber &f = fibers[t];
        f = Fiber{};
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = stacks[t].get();
        f.context.uc_stack.ss_size = STACK_BYTES;
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_main, 0);
        f.thread_idx.x = t % block_dim.x;
        f.thread_idx.y = t / block_dim.x % block_dim.y;
        f.thread_idx.z = t / (block_dim.x * block_dim.y);
        f.lane = t % 32;
        f.warp = t / 32;
    }
    for (;;) {
        for (unsigned k = 0; k < n; ++k) {
            Fiber &f = fibers[reverse ? n - 1 - k : k];
            if (f.state == State::Ready) run(f);
        }
        bool released = false, all_done = true, all_at_block = true;
        for (unsigned w = 0; w * 32 < n; ++w) released |= release_warp(fibers, w);
        if (released) continue;
        for (const Fiber &f : fibers) {
            if (f.state != State::Done) all_done = false;
            if (f.state != State::Done && f.state != State::AtBlockBarrier) all_at_block = false;
        }
        if (all_done) return;
        if (!all_at_block)
            fail("deadlock: some threads wait at __syncthreads while others wait at a warp barrier");
        for (Fiber &f : fibers)
            if (f.state == State::AtBlockBarrier) f.state = State::Ready;
    }
}

// Reads the job file, checking every length against what is left.
struct Reader {
    const std::vector<unsigned char> &bytes;
    size_t at = 0;
    void take(void *dst, size_t n) {
        if (n > bytes.size() - at) fail("the job file is truncated");
        std::memcpy(dst, bytes.data() + at, n);
        at += n;
    }
    template <typename V>
    V next() {
        V v;
        take(&v, sizeof(V));
        return v;
    }
};

static std::vector<unsigned char> read_file(const char *path) {
    FILE *f = std::fopen(path, "rb");
    if (!f) fail(std::string("cannot open ") + path);
    std::vector<unsigned char> out;
    unsigned char chunk[1 << 16];
    size_t got;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) out.insert(out.end(), chunk, chunk + got);
    std::fclose(f);
    return out;
}

static const Kernel &find_kernel(const std::string &name) {
    for (const Kernel &k : kernels)
        if (name == k.name) return k;
    fail("no kernel named " + name + " in this module");
}

static void launch(Reader &job, std::vector<unsigned char *> &buffers,
                   const std::vector<uint64_t> &lengths, bool reverse) {
    const uint32_t name_len = job.next<uint32_t>();
    std::string name(name_len, '\0');
    job.take(name.data(), name_len);
    const Kernel &kernel = find_kernel(name);
    dim3 grid, block;
    grid.x = job.next<uint32_t>(), grid.y = job.next<uint32_t>(), grid.z = job.next<uint32_t>();
    block.x = job.next<uint32_t>(), block.y = job.next<uint32_t>(), block.z = job.next<uint32_t>();
    const uint32_t shared_bytes = job.next<uint32_t>();
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads > MAX_THREADS || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.y > MAX_GRID_YZ || grid.z > MAX_GRID_YZ || shared_bytes > MAX_DEFAULT_SHARED)
        fail(name + ": the launch exceeds CUDA's limits (grid " + std::to_string(grid.x) + "x" +
             std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block of " +
             std::to_string(threads) + " threads, " + std::to_string(shared_bytes) +
             " bytes of shared memory)");
    const std::vector<Param> params = kernel.params();
    const uint32_t nargs = job.next<uint32_t>();
    if (nargs != params.size())
        fail(name + " takes " + std::to_string(params.size()) + " arguments, the launch passed " +
             std::to_string(nargs));
    std::vector<std::vector<uint64_t>> storage(nargs);
    std::vector<void *> args(nargs);
    for (uint32_t i = 0; i < nargs; ++i) {
        const std::string which = name + "'s argument " + std::to_string(i);
        const uint8_t kind = job.next<uint8_t>();
        if (kind == 0) {
            const uint32_t len = job.next<uint32_t>();
            if (params[i].pointer) fail(which + " is a pointer; the launch passed a value");
            if (len != params[i].size)
                fail(which + " has " + std::to_string(params[i].size) + " bytes, the launch passed " +
                     std::to_string(len));
            storage[i].resize(len / 8 + 1);
            job.take(storage[i].data(), len);
        } else if (kind == 3) {
            // A struct by value with buffer addresses at given positions.
            const uint32_t len = job.next<uint32_t>();
            if (params[i].pointer || len != params[i].size)
                fail(which + " is not a struct of " + std::to_string(len) + " bytes");
            storage[i].resize(len / 8 + 1);
            job.take(storage[i].data(), len);
            const uint32_t patches = job.next<uint32_t>();
            for (uint32_t k = 0; k < patches; ++k) {
                const uint32_t at = job.next<uint32_t>(), index = job.next<uint32_t>();
                if (at + 8 > len || index >= buffers.size())
                    fail(which + ": an address outside the struct or the job's buffers");
                unsigned char *p = buffers[index];
                std::memcpy(reinterpret_cast<unsigned char *>(storage[i].data()) + at, &p, sizeof p);
            }
        } else if (kind == 2) {
            if (!params[i].pointer) fail(which + " is a value; the launch passed a null pointer");
            storage[i].assign(1, 0);
        } else {
            const uint32_t index = job.next<uint32_t>();
            const uint64_t offset = job.next<uint64_t>();
            if (!params[i].pointer) fail(which + " is a value; the launch passed a buffer");
            if (index >= buffers.size() || offset > lengths[index])
                fail(which + " points outside the job's buffers");
            storage[i].resize(1);
            unsigned char *p = buffers[index] + offset;
            std::memcpy(storage[i].data(), &p, sizeof p);
        }
        args[i] = storage[i].data();
    }
    std::vector<Fiber> fibers(threads);
    // Stacks are made once per process (the harness runs one job).
    static std::vector<std::unique_ptr<char[]>> stacks;
    while (stacks.size() < threads) stacks.emplace_back(new char[STACK_BYTES]);
    running_kernel = kernel.call;
    running_args = args.data();
    grid_dim = grid;
    block_dim = block;
    // Blocks run one after another, in reverse order too when threads do:
    // two blocks that write one element (without atomics) then disagree.
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long k = 0; k < blocks; ++k) {
        const unsigned long long b = reverse ? blocks - 1 - k : k;
        block_idx.x = (unsigned)(b % grid.x);
        block_idx.y = (unsigned)(b / grid.x % grid.y);
        block_idx.z = (unsigned)(b / ((unsigned long long)grid.x * grid.y));
        // Never-written shared memory reads as NaN (all ones).
        dynamic_shared_block = std::malloc(shared_bytes ? shared_bytes : 1);
        std::memset(dynamic_shared_block, 0xff, shared_bytes);
        run_block(fibers, stacks, reverse);
        std::free(dynamic_shared_block);
        dynamic_shared_block = nullptr;
    }
}

}  // namespace emu

int main(int argc, char **argv) {
    using namespace emu;
    if (argc != 4) fail("usage: harness JOB OUT forward|reverse");
    const bool reverse = std::string(argv[3]) == "reverse";
    const std::vector<unsigned char> bytes = read_file(argv[1]);
    Reader job{bytes};
    const uint32_t nbuffers = job.next<uint32_t>();
    std::vector<unsigned char *> buffers(nbuffers);
    std::vector<uint64_t> lengths(nbuffers);
    for (uint32_t b = 0; b < nbuffers; ++b) {
        lengths[b] = job.next<uint64_t>();
        if (lengths[b] > bytes.size()) fail("the job file is truncated");
        // Exactly the buffer's bytes, so AddressSanitizer sees an overrun.
        buffers[b] = static_cast<unsigned char *>(std::malloc(lengths[b] ? lengths[b] : 1));
        job.take(buffers[b], lengths[b]);
    }
    const uint32_t nlaunches = job.next<uint32_t>();
    for (uint32_t l = 0; l < nlaunches; ++l) launch(job, buffers, lengths, reverse);
    FILE *out = std::fopen(argv[2], "wb");
    if (!out) fail(std::string("cannot write ") + argv[2]);
    for (uint32_t b = 0; b < nbuffers; ++b) std::fwrite(buffers[b], 1, lengths[b], out);
    if (std::fclose(out) != 0) fail(std::string("cannot write ") + argv[2]);
    return 0;
}
