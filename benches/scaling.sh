#!/usr/bin/env bash
# Thread scaling beside what the machine gives at that moment. A VM's two
# vCPUs do not always give two cores' worth of arithmetic: two copies of a
# 1-thread GEMM, run at once, reach anywhere from ~1.25x to ~2x one copy's
# throughput here, and it changes within minutes. So each round measures
# that capacity (the probe: `bench_ref --threads 1 --one matmul.n1024` alone,
# then two copies at once, before and after), then tapir's 1- and 2-thread
# throughput on each workload, and PyTorch's with a Python given.
#   bash benches/scaling.sh ROUNDS [PYTHON] > scaling.jsonl
#   python3 benches/summarize_scaling.py scaling.jsonl
set -euo pipefail
ROUNDS=${1:-10}; PY=${2:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
REF=${TORCH_REF:-$HERE/../shared/bench/torch_ref.py}
BIN=$HERE/target/release/examples/bench_ref
UNITS=(mlp.train_b256 inference.b256_throughput)
cargo build --release --example bench_ref -q --manifest-path "$HERE/Cargo.toml"
tag() { sed "s/^{/{\"round\": $1, \"role\": \"$2\", /"; }
probe() {
  "$BIN" --threads 1 --one matmul.n1024 | tag "$1" probe_alone
  "$BIN" --threads 1 --one matmul.n1024 > "$TMP.a" & "$BIN" --threads 1 --one matmul.n1024 > "$TMP.b"; wait
  cat "$TMP.a" "$TMP.b" | tag "$1" probe_pair
}
TMP=$(mktemp)
trap 'rm -f "$TMP" "$TMP.a" "$TMP.b"' EXIT
for r in $(seq "$ROUNDS"); do
  probe "$r"
  for u in "${UNITS[@]}"; do
    for t in 1 2; do
      "$BIN" --threads "$t" --one "$u" | tag "$r" tapir
      if [ -n "$PY" ]; then
        "$PY" "$REF" --threads "$t" --unit "${u/./:}" | tag "$r" pytorch
      fi
    done
  done
  probe "$r"
done
