#!/usr/bin/env python3
"""Side-by-side table from `benches/compare.sh` output (JSON lines with a
"framework" field): best and median of the interleaved runs, and the ratio
tapir / PyTorch (for latency PyTorch / tapir, so > 1 always means faster).

    python3 benches/summarize_compare.py results.jsonl
"""
import collections
import json
import statistics
import sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
cell = collections.defaultdict(list)
for r in rows:
    if r["workload"] == "inference" and r["variant"] == "b1_latency":
        metric, lower = r["latency_us_median"], True
    elif r["workload"] == "matmul":
        metric, lower = r["gflops"], False
    else:
        metric, lower = r["samples_per_s"], False
    cell[(r["threads"], r["workload"], r["variant"], r["framework"])].append((metric, lower))

print("| threads | workload / variant | metric | PyTorch best / median | tapir best / median | ratio (best) | ratio (median) |")
print("|---|---|---|---|---|---|---|")
keys = sorted({(t, w, v) for (t, w, v, _) in cell})
for t, w, v in keys:
    p, q = cell.get((t, w, v, "pytorch")), cell.get((t, w, v, "tapir"))
    if not p or not q:
        continue
    lower = p[0][1]
    pick = min if lower else max
    pv, qv = [x for x, _ in p], [x for x, _ in q]
    pb, qb, pm, qm = pick(pv), pick(qv), statistics.median(pv), statistics.median(qv)
    ratio = (lambda a, b: a / b) if lower else (lambda a, b: b / a)
    unit = "µs (median latency)" if lower else ("GFLOP/s" if w == "matmul" else "samples/s")
    print(f"| {t} | {w} / {v} | {unit} | {pb:,.1f} / {pm:,.1f} | {qb:,.1f} / {qm:,.1f} | {ratio(pb, qb):.2f}x | {ratio(pm, qm):.2f}x |")
