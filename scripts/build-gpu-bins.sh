#!/usr/bin/env bash
# Builds, on a machine with Rust, everything scripts/gpu-check.sh runs on a
# GPU machine (which may have no Rust and no registry): the CUDA kernel
# twins, the device tests, the golden suites, bench_ref and train_digits, all with the
# `cuda` feature, release profile, stripped, packed with xz into
# target/gpu-bin/bins.tar.xz (about 70 MB of binaries in 13 MB, under the
# device tool's carry limit; gpu-check.sh unpacks it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/gpu-bin
rm -rf "$out"
mkdir -p "$out"
executables() {
    python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])'
}
copy() {
    while read -r name exe; do
        cp "$exe" "$out/$name"
        strip "$out/$name" 2>/dev/null || true
        echo "built $out/$name ($(du -h "$out/$name" | cut -f1))"
    done
}
cargo test --release -p tapir-kernels --features cuda --lib --no-run --message-format=json 2>/dev/null \
    | executables | sed 's/^tapir_kernels /kernels-tests /' | copy
cargo test --release --features cuda --test cuda --test nccl --test pinned --test cudnn --test suite \
    --no-run --message-format=json 2>/dev/null | executables | copy
cargo build --release --features cuda --example bench_ref --example train_digits --example bench_ddp --example bench_h2d \
    --message-format=json 2>/dev/null \
    | executables | copy
du -sh "$out"
tar -C target -cf - gpu-bin | xz -T2 -6 > target/gpu-bin.tar.xz
rm -rf "$out"
mkdir -p "$out"
mv target/gpu-bin.tar.xz "$out/bins.tar.xz"
du -sh "$out/bins.tar.xz"
