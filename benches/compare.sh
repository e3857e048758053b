#!/usr/bin/env bash
# Side-by-side with PyTorch on this machine: interleaved runs of
# ../shared/bench/torch_ref.py and tapir's bench_ref, threads 1 and 2.
#   bash benches/compare.sh PYTHON WORKLOADS ROUNDS [--amp bf16] > results.jsonl
# With --amp, both sides run each step under autocast (PyTorch's side is then
# this repo's benches/torch_ref.py, which has the flag).
set -euo pipefail
PY=${1:?python with torch}; WL=${2:-matmul}; ROUNDS=${3:-3}; EXTRA=("${@:4}")
HERE=$(cd "$(dirname "$0")/.." && pwd)
if [ ${#EXTRA[@]} -gt 0 ]; then
  REF=${TORCH_REF:-$HERE/benches/torch_ref.py}
else
  REF=${TORCH_REF:-$HERE/../shared/bench/torch_ref.py}
fi
cargo build --release --example bench_ref -q --manifest-path "$HERE/Cargo.toml"
for r in $(seq "$ROUNDS"); do
  for t in 1 2; do
    "$PY" "$REF" --threads "$t" --workloads "$WL" "${EXTRA[@]}" | sed 's/^{/{"framework": "pytorch", /'
    "$HERE/target/release/examples/bench_ref" --threads "$t" --workloads "$WL" "${EXTRA[@]}" | sed 's/^{/{"framework": "tapir", /'
  done
done
