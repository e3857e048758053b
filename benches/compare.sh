#!/usr/bin/env bash
# Side-by-side with PyTorch on this machine: interleaved runs of
# ../shared/bench/torch_ref.py and tapir's bench_ref, threads 1 and 2.
#   bash benches/compare.sh PYTHON WORKLOADS ROUNDS > results.jsonl
set -euo pipefail
PY=${1:?python with torch}; WL=${2:-matmul}; ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
REF=${TORCH_REF:-$HERE/../shared/bench/torch_ref.py}
cargo build --release --example bench_ref -q --manifest-path "$HERE/Cargo.toml"
for r in $(seq "$ROUNDS"); do
  for t in 1 2; do
    "$PY" "$REF" --threads "$t" --workloads "$WL" | sed 's/^{/{"framework": "pytorch", /'
    "$HERE/target/release/examples/bench_ref" --threads "$t" --workloads "$WL" | sed 's/^{/{"framework": "tapir", /'
  done
done
