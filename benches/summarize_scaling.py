#!/usr/bin/env python3
"""Thread scaling from `benches/scaling.sh`: per round, the machine's
capacity for two threads of arithmetic (two 1-thread GEMM processes at once
against one alone, mean of the probes before and after the round) and each
framework's 2-thread / 1-thread throughput; then the medians over all rounds
and over the rounds where the machine gave two full cores (capacity >= 1.9).

    python3 benches/summarize_scaling.py scaling.jsonl
"""
import collections
import json
import statistics
import sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
probes = collections.defaultdict(lambda: {"alone": [], "pair": []})
runs = collections.defaultdict(dict)  # (round, framework, unit) -> {threads: samples/s}
for r in rows:
    if r["role"].startswith("probe"):
        probes[r["round"]][r["role"][6:]].append(r["gflops"])
    else:
        runs[(r["round"], r["role"], f'{r["workload"]}.{r["variant"]}')][r["threads"]] = r["samples_per_s"]


def capacity(p):
    # Each probe is one alone run then two at once: pair sums over alone.
    pairs = [p["pair"][i] + p["pair"][i + 1] for i in range(0, len(p["pair"]) - 1, 2)]
    return statistics.mean(s / a for s, a in zip(pairs, p["alone"]))


cap = {r: capacity(p) for r, p in probes.items()}
series = collections.defaultdict(list)  # (framework, unit) -> [(round, scaling)]
for (rnd, fw, unit), t in sorted(runs.items()):
    if 1 in t and 2 in t:
        series[(fw, unit)].append((rnd, t[2] / t[1]))

print("| round | machine capacity (2 threads of GEMM) | " + " | ".join(f"{fw} {u}" for fw, u in sorted(series)) + " |")
print("|---|---|" + "---|" * len(series))
for rnd in sorted(cap):
    cells = []
    for key in sorted(series):
        s = dict(series[key]).get(rnd)
        cells.append(f"{s:.2f}x" if s else "-")
    print(f"| {rnd} | {cap[rnd]:.2f}x | " + " | ".join(cells) + " |")
full = {r for r, c in cap.items() if c >= 1.9}
print()
print(f"machine capacity: median {statistics.median(cap.values()):.2f}x, "
      f"{len(full)} of {len(cap)} rounds with two full cores (>= 1.9x)")
for key in sorted(series):
    all_s = [s for _, s in series[key]]
    full_s = [s for r, s in series[key] if r in full]
    rel = [s / cap[r] for r, s in series[key]]
    line = f"{key[0]} {key[1]}: median {statistics.median(all_s):.2f}x, best {max(all_s):.2f}x"
    if full_s:
        line += f"; in full-core rounds median {statistics.median(full_s):.2f}x"
    line += f"; median of scaling / capacity {statistics.median(rel):.2f}"
    print(line)
