#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU, the CUDA 13 driver and
# libraries (NVRTC, cuBLAS) and PyTorch, but possibly no Rust: build first
# with scripts/build-gpu-bins.sh elsewhere and carry target/gpu-bin here.
#
#   1. every CUDA kernel against its CPU twin (kernels-tests cuda::);
#   2. the device tests: every op and gradient GPU vs CPU, the seed MLP
#      trajectory GPU vs CPU with zero host round trips, checkpoints across
#      devices, the caching allocator (tests/cuda/); NCCL collectives and
#      DDP on one GPU rank (tests/nccl.rs); pinned memory (tests/pinned.rs);
#      convolution on cuDNN against the CPU (tests/cudnn.rs);
#   3. the PyTorch golden suites instantiated on the GPU (TAPIR_TEST_DEVICE);
#   4. the main job, train_digits, trained on the GPU end to end;
#   5. the GPU benchmarks, tapir and PyTorch on the same GPU, as ratios.
#
# Any SKIPPED check fails the run (a GPU run must run everything). Logs and
# JSON lines go to $OUT (or target/gpu-check/). Takes about 3-5 minutes;
# STEP_TIMEOUT (seconds, default 300) bounds each test step.
#
#   scripts/gpu-check.sh                  # everything
#   scripts/gpu-check.sh kernels device   # only these steps (to rerun what
#                                         # failed without spending device
#                                         # time on the rest): kernels,
#                                         # device, goldens, digits, bench
#
# With the session's device tool: build here, then one call, e.g.
#   run(command="scripts/gpu-check.sh", carry=["target/gpu-bin"], timeout_s=540)
# and the logs come back under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/gpu-check}
mkdir -p "$out"
bins=target/gpu-bin
test -d "$bins" || { echo "gpu-check: $bins missing: run scripts/build-gpu-bins.sh first"; exit 2; }
# The binaries travel packed (bins.tar.xz); unpack them with Python's tarfile
# (no xz tool needed on the GPU machine).
if [ -f "$bins/bins.tar.xz" ]; then
    python3 - "$bins/bins.tar.xz" target/gpu-unpacked <<'PY' || { echo "gpu-check: cannot unpack $bins/bins.tar.xz"; exit 2; }
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:  # Python before 3.12 has no filter argument
        t.extractall(sys.argv[2])
PY
    bins=target/gpu-unpacked/gpu-bin
fi
nvidia-smi -L || echo "gpu-check: nvidia-smi not found"

# CUDA libraries: the toolkit's, and any from pip wheels (PyTorch ships them).
libs=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = []
for base in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += glob.glob(os.path.join(base, "nvidia", "*", "lib"))
    dirs += glob.glob(os.path.join(base, "torch", "lib"))
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${libs}:${LD_LIBRARY_PATH:-}"
# The golden tests read tests/goldens under this root.
export CARGO_MANIFEST_DIR=$PWD

steps=" ${*:-kernels device goldens digits bench} "
wanted() { [[ "$steps" == *" $1 "* ]]; }

failed=0
check() {
    local name=$1
    shift
    echo "== $name"
    timeout "${STEP_TIMEOUT:-300}" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log"
    if [ $rc -ne 0 ]; then
        echo "gpu-check: $name FAILED (exit $rc; log $out/$name.log)"
        failed=1
    elif grep -q SKIPPED "$out/$name.log"; then
        echo "gpu-check: $name had SKIPPED checks (no GPU, NVRTC or cuBLAS visible)"
        failed=1
    fi
}

# A first run on new hardware should say where it broke: backtraces on, and
# the kernel twins with synchronous launches, so a faulting kernel is named
# by its own launch rather than by a later read.
export RUST_BACKTRACE=1
# (The CPU emulator's tests, cuda::emulator, ran in CI already and need g++.)
wanted kernels && check kernels env CUDA_LAUNCH_BLOCKING=1 "$bins/kernels-tests" cuda:: --include-ignored --nocapture --test-threads 1 --skip cuda::emulator
wanted device && check device-tests "$bins/cuda" --include-ignored --nocapture --test-threads 1 --skip without_a_gpu
# NCCL (libnccl from the nvidia-nccl wheel on the library path above): one rank on the GPU.
wanted device && check nccl "$bins/nccl" --include-ignored --nocapture --test-threads 1 --skip without_a_gpu
# Convolution on cuDNN (libcudnn from the nvidia-cudnn wheel) against the CPU.
wanted device && check cudnn "$bins/cudnn" --include-ignored --nocapture --test-threads 1 --skip without_cudnn
# Pinned host memory: DMA copies, write/drop ordering, pinned loader batches.
wanted device && check pinned "$bins/pinned" --include-ignored --nocapture --test-threads 1 --skip without_a_gpu
if wanted goldens; then
    for suite in goldens nn_goldens training linear_cross_entropy; do
        # The golden suites are modules of the `suite` test binary.
        check "golden-$suite" env TAPIR_TEST_DEVICE=cuda:0 "$bins/suite" "$suite::" --test-threads 1
    done
fi

if wanted digits; then
    check train-digits "$bins/train_digits" --device cuda --epochs 10 --overwrite --out "$out/digits"
    grep "val_acc" "$out/train-digits.log" | tail -n 1
    # The same run with every step replayed from one CUDA graph
    # (tapir::compile_step): the accuracy should match the line above.
    check train-digits-graphs "$bins/train_digits" --device cuda --cuda-graphs --epochs 10 \
        --overwrite --out "$out/digits-graphs"
    grep -E "val_acc|CUDA graphs" "$out/train-digits-graphs.log" | tail -n 2
fi

if ! wanted bench; then
    echo "gpu-check: $([ $failed -eq 0 ] && echo PASSED || echo FAILED) (steps:$steps); logs in $out"
    exit $failed
fi
echo "== benchmarks (tapir, then PyTorch, same GPU)"
work=matmul,mlp,inference,cnn,transformer,pinn
# tapir's side adds `fusion` (tapir only: eager against compile's generated
# CUDA kernel for an elementwise tail).
timeout 300 "$bins/bench_ref" --device cuda --threads 4 --workloads $work,fusion \
    >"$out/bench-tapir.jsonl" 2>"$out/bench-tapir.err" || { echo "bench_ref failed"; failed=1; }
timeout 300 python3 benches/torch_ref.py --device cuda --threads 4 --workloads $work \
    >"$out/bench-torch.jsonl" 2>"$out/bench-torch.err" || { echo "torch_ref failed"; failed=1; }
# Whether the *_reduce_overhead variants really replayed CUDA graphs (their
# compile_step explain(), on bench_ref's stderr).
grep -E "CUDA Graphs|skipping CUDA graphs" "$out/bench-tapir.err" || echo "no CUDA graph lines from bench_ref"
# Data parallel under NCCL at world size 1 (one GPU: NCCL puts no two ranks
# on one GPU), the seed MLP step through DistributedDataParallel.
timeout 120 "$bins/bench_ddp" --backend nccl --threads 4 --steps 200 \
    >"$out/bench-ddp-nccl.jsonl" 2>"$out/bench-ddp-nccl.err" || { echo "bench_ddp (NCCL) failed"; failed=1; }
cat "$out/bench-ddp-nccl.jsonl"
# Time in batch.to(device) per step, pageable against pin_memory batches.
timeout 120 "$bins/bench_h2d" --steps 100 \
    >"$out/bench-h2d.jsonl" 2>"$out/bench-h2d.err" || { echo "bench_h2d failed"; failed=1; }
cat "$out/bench-h2d.jsonl"
python3 - "$out/bench-tapir.jsonl" "$out/bench-torch.jsonl" <<'PY' | tee "$out/bench-ratios.txt"
import json, sys
def load(p):
    try:
        return {(r["workload"], r["variant"]): r for r in map(json.loads, open(p)) }
    except OSError:
        return {}
ours, torch = load(sys.argv[1]), load(sys.argv[2])
print(f"{'workload':<12} {'variant':<14} {'tapir':>12} {'pytorch':>12} {'ratio':>7}"
      f" {'peak MiB tapir':>15} {'pytorch':>8} {'launches/step':>13}")
for key, r in ours.items():
    t = torch.get(key) or {}
    metric = "gflops" if key[0] == "matmul" else "samples_per_s"
    a = r.get(metric)
    b = t.get(metric)
    ratio = f"{a / b:.2f}" if a and b else "-"
    pa, pb = r.get("peak_gpu_mib", "-"), t.get("peak_gpu_mib", "-")
    launches = r.get("gpu_launches_per_step", "-")
    print(f"{key[0]:<12} {key[1]:<14} {a!s:>12} {b!s:>12} {ratio:>7} {pa!s:>15} {pb!s:>8}"
          f" {launches!s:>13}  ({metric})")
PY
# The side-by-side table and the raw lines, beside the CPU runs.
stamp=$(date +%F)
mkdir -p benches/results
cp "$out/bench-ratios.txt" "benches/results/$stamp-gpu-ratios.txt"
cp "$out/bench-tapir.jsonl" "benches/results/$stamp-gpu-tapir.jsonl"
cp "$out/bench-torch.jsonl" "benches/results/$stamp-gpu-torch.jsonl"
echo "gpu-check: $([ $failed -eq 0 ] && echo PASSED || echo FAILED); logs in $out, tables in benches/results/$stamp-gpu-*"
exit $failed
