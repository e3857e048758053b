#!/usr/bin/env bash
# The GPU checks, run on a machine with an NVIDIA GPU, the CUDA 13 driver and
# NVRTC (no Rust needed): first `scripts/build-gpu-bins.sh` elsewhere, then
# carry target/gpu-bin here. Runs every CUDA kernel against its CPU twin.
# (The CUDA tensor backend and its GPU benchmarks are not built yet; see the
# CUDA issue.)
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L || echo "nvidia-smi not found"
bin=target/gpu-bin/kernels-tests
test -x "$bin" || { echo "gpu-check: $bin missing: run scripts/build-gpu-bins.sh first"; exit 2; }
out=$("$bin" cuda:: --nocapture --test-threads 1 2>&1) || { echo "$out"; exit 1; }
echo "$out"
if echo "$out" | grep -q SKIPPED; then
    echo "gpu-check: some checks were SKIPPED (no GPU or no NVRTC visible)"
    exit 3
fi
