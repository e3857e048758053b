#!/usr/bin/env bash
# Builds, on a machine with Rust, the test binaries that scripts/gpu-check.sh
# runs on a GPU machine (which may have no Rust): they go to target/gpu-bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/gpu-bin
exe=$(cargo test -p tapir-kernels --features cuda --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])' | head -1)
cp "$exe" target/gpu-bin/kernels-tests
echo "built target/gpu-bin/kernels-tests"
