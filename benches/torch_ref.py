#!/usr/bin/env python3
"""PyTorch reference benchmarks, on the CPU or (``--device cuda``) a GPU.

A copy of ../shared/bench/torch_ref.py with a ``--device`` option added for
the CUDA issue: on a GPU every workload's model and data live on the device,
each timed step ends with ``torch.cuda.synchronize()``, and ``matmul`` runs
f32, TF32 and bf16 at n = 4096. tapir's side is ``examples/bench_ref/``
with the same flags; ``scripts/gpu-check.sh`` runs both.

Runs a fixed set of small workloads in float32 on the CPU with a fixed
number of warm-up and timed steps, and prints one JSON object per line
(one per workload variant) on stdout.  The same workloads are meant to be
re-implemented in another framework and compared number for number.

Workloads (see README.md for the exact definitions):
  mlp          residual MLP, full AdamW train step, batch 256
  matmul       square f32 matmul, n = 1024 and n = 2048, GFLOP/s
  transformer  char-level decoder-only transformer, full AdamW train step,
               batch 32 x context 128, two attention variants:
               `manual_attn` (plain ops) and `sdpa` (F.scaled_dot_product_attention)
  cnn          small 2-conv CNN on 1x28x28, SGD momentum 0.9, batch 128
  inference    mlp forward under torch.no_grad: batch-1 latency, batch-256 throughput
  conv         one conv2d forward with bias under torch.no_grad, five layers
  scatter      a graph network's aggregation (100k edges, 10k nodes, 64 features):
               index_add or scatter_reduce amax, forward and backward
  lm_head      an LM head's loss (1024 tokens, 256 features, 32000 words):
               F.linear_cross_entropy, reference or chunked, forward and backward
  pinn         a physics-informed MLP's step: u'' from two nested create_graph
               grads, the residual's backward and an Adam step (64 points)
  unary        one elementwise function over 4M float32 (exp, expm1, log, log1p,
               log2, sin, cos, tan, tanh, sigmoid, sqrt), forward only
  ops          one tensor op over a 2048 x 2048 float32 matrix, forward only:
               view copies, draws, sort, topk, nonzero, reductions, softmax
               and layer norm along a dim, elementwise ops and reductions
               over transposed, permuted and sliced views
  linalg       torch.linalg in float64: a Gaussian-process likelihood over 64
               SPD 64 x 64 matrices (cholesky, solve_triangular, forward and
               backward), eigh of 128 symmetric 32 x 32, svd of one 512 x 512,
               solve of one 1024 x 1024 with 16 right-hand sides

By default each workload variant runs in its own child process, so that the
reported peak RSS (getrusage ru_maxrss) belongs to that variant alone and
nothing (threads, allocator state) leaks between variants.

Examples:
  python torch_ref.py --threads 2
  python torch_ref.py --threads 1 --workloads mlp,cnn --out results.jsonl
  python torch_ref.py --steps-scale 0.1          # quick smoke run
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (warm-up steps, timed steps) per workload variant; scaled by --steps-scale.
DEFAULT_STEPS = {
    "mlp": (10, 100),
    "matmul.n1024": (5, 50),
    "matmul.n2048": (2, 10),
    "matmul.n4096": (3, 20),
    "transformer": (2, 8),  # per attention variant
    "cnn": (5, 40),
    "conv": (3, 20),
    "scatter": (3, 20),
    "unary": (3, 30),
    "ops": (3, 20),
    "lm_head": (2, 8),
    "pinn": (20, 500),
    "linalg": (2, 10),
    "inference.b1": (200, 2000),
    "inference.b256": (10, 200),
}

# Number of distinct pre-generated synthetic batches each training workload
# cycles through (data generation is never inside the timed region).
N_DATA_BATCHES = 8


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def peak_rss_mib():
    """Peak resident set size of this process so far, in MiB (Linux: KiB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def steps_for(key, scale):
    warm, steps = DEFAULT_STEPS[key]
    return max(1, round(warm * scale)), max(1, round(steps * scale))


class Timing:
    """Result of one timed loop."""

    def __init__(self, total, per_step, cpu_seconds):
        self.total = total            # wall seconds around the whole timed loop
        self.per_step = per_step      # wall seconds of each step (for the median)
        self.cpu_seconds = cpu_seconds  # process CPU time (user+sys, all threads)


DEVICE = "cpu"


def sync():
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def time_loop(step_fn, warmup, steps):
    """Run `warmup` untimed calls, then `steps` timed calls; return a Timing.

    The process CPU time is recorded too: cpu_util = cpu_seconds / total is
    close to the thread count on an idle machine and drops when other
    processes compete for the cores (a cheap noise indicator).
    """
    for _ in range(warmup):
        step_fn()
    sync()
    per_step = []
    cpu_start = time.process_time()
    t_start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        step_fn()
        sync()
        per_step.append(time.perf_counter() - t0)
    total = time.perf_counter() - t_start
    return Timing(total, per_step, time.process_time() - cpu_start)


def load_average_1min():
    """1-minute system load average (includes our own threads)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return None


def cpu_busy_fraction(interval=1.0):
    """Fraction of all CPUs busy over `interval` seconds, from /proc/stat
    (None where /proc/stat is unavailable)."""
    def snapshot():
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return vals[3] + vals[4], sum(vals)  # (idle + iowait, total) jiffies

    try:
        idle0, total0 = snapshot()
        time.sleep(interval)
        idle1, total1 = snapshot()
    except OSError:
        return None
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(max_wait, threshold=0.10):
    """Block until other processes keep less than `threshold` of the CPUs busy,
    or `max_wait` seconds have passed.  Returns the last busy fraction seen."""
    deadline = time.monotonic() + max_wait
    while True:
        busy = cpu_busy_fraction()
        if busy is None or busy < threshold or time.monotonic() >= deadline:
            return busy
        time.sleep(2.0)


def make_record(workload, variant, warmup, steps, timing, samples_per_step, **extra):
    """Build the JSON record shared by all workloads."""
    total, per_step = timing.total, timing.per_step
    steps_per_s = steps / total
    rec = {
        "workload": workload,
        "variant": variant,
        "threads": torch.get_num_threads(),
        "warmup": warmup,
        "steps": steps,
        "seconds": round(total, 4),
        "steps_per_s": round(steps_per_s, 3),
        "samples_per_s": round(steps_per_s * samples_per_step, 2),
        "step_ms_median": round(statistics.median(per_step) * 1e3, 4),
    }
    rec.update(extra)
    rec["cpu_util"] = round(timing.cpu_seconds / total, 2)
    rec["loadavg_1m"] = load_average_1min()
    rec["peak_rss_mib"] = round(peak_rss_mib(), 1)
    rec["device"] = DEVICE
    if DEVICE == "cuda":
        # One variant per process (unless --in-process), so the peak is its own.
        rec["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    rec["torch"] = torch.__version__
    return rec


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class ResidualMLP(nn.Module):
    """The seed model: stem Linear(784->256), 4 residual blocks, head Linear(256->10).

    Each block computes x + Linear(256,256) -> LayerNorm(256) -> GELU -> Linear(256,256).
    """

    def __init__(self, in_dim=784, hidden=256, n_blocks=4, n_classes=10):
        super().__init__()
        self.stem = nn.Linear(in_dim, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Linear(hidden, hidden),
                nn.LayerNorm(hidden),
                nn.GELU(),
                nn.Linear(hidden, hidden),
            )
            for _ in range(n_blocks)
        )
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention.

    use_sdpa=False: scores = q k^T / sqrt(d_head), causal mask with -inf,
    softmax, then @ v -- all plain tensor ops.
    use_sdpa=True:  F.scaled_dot_product_attention(q, k, v, is_causal=True).
    """

    def __init__(self, d_model, n_heads, context, use_sdpa):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.use_sdpa = use_sdpa
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.tril(torch.ones(context, context, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, d_head)
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_head))
            att = att.masked_fill(~self.causal_mask[:T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln1(x)); x + mlp(ln2(x))."""

    def __init__(self, d_model, n_heads, context, mlp_ratio, use_sdpa):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, context, use_sdpa)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class CharTransformer(nn.Module):
    """Decoder-only char-level LM: token + learned position embeddings,
    n_layers pre-LN blocks, final LayerNorm, untied Linear head (no bias)."""

    def __init__(self, vocab=128, context=128, d_model=256, n_heads=4, n_layers=4,
                 mlp_ratio=4, use_sdpa=False):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, context, mlp_ratio, use_sdpa) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        _, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class SmallCNN(nn.Module):
    """Conv(1,32,3,p1)-ReLU-MaxPool2-Conv(32,64,3,p1)-ReLU-MaxPool2-Flatten-
    Linear(64*7*7,128)-ReLU-Linear(128,10)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
            nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.net(x)


# --------------------------------------------------------------------------
# Workloads.  Each bench function builds one workload variant, times it and
# returns one JSON-able record.
# --------------------------------------------------------------------------

def bench_mlp(args, variant):
    """Full train step of the residual MLP: zero_grad, forward, loss, backward,
    clip_grad_norm_(1.0), AdamW step."""
    batch, in_dim, n_classes = 256, 784, 10
    g = torch.Generator().manual_seed(args.seed)
    xs = torch.randn(N_DATA_BATCHES, batch, in_dim, generator=g).to(DEVICE)
    ys = torch.randint(0, n_classes, (N_DATA_BATCHES, batch), generator=g).to(DEVICE)

    torch.manual_seed(args.seed)
    model = ResidualMLP(in_dim=in_dim, n_classes=n_classes).to(DEVICE)
    if variant.endswith("_reduce_overhead"):
        # Forward and backward through CUDA graphs (GPU only); the optimizer
        # stays eager, as tapir's compile_step variant.
        model = torch.compile(model, mode="reduce-overhead")
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=1e-2)
    it = [0]

    def step():
        i = it[0] % N_DATA_BATCHES
        it[0] += 1
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    warm, steps = steps_for("mlp", args.steps_scale)
    t = time_loop(step, warm, steps)
    final_loss = step().item()  # one extra, untimed step to report a loss
    return make_record("mlp", variant, warm, steps, t, batch,
                       batch=batch, params=n_params(model), final_loss=round(final_loss, 4))


def bench_matmul(args, variant):
    """C = A @ B for square matrices into a preallocated C (GEMM only). CPU:
    "n1024" (f32); GPU: "<dtype>_n4096" with dtype f32, tf32 or bf16."""
    kind, _, size = variant.rpartition("_")
    kind = kind or "f32"
    n = int(size[1:])  # "n1024" -> 1024
    dtype = torch.bfloat16 if kind == "bf16" else torch.float32
    if DEVICE != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    g = torch.Generator().manual_seed(args.seed)
    a = torch.randn(n, n, generator=g).to(DEVICE, dtype)
    b = torch.randn(n, n, generator=g).to(DEVICE, dtype)
    c = torch.empty(n, n, device=DEVICE, dtype=dtype)

    def step():
        torch.mm(a, b, out=c)

    warm, steps = steps_for(f"matmul.{size}", args.steps_scale)
    t = time_loop(step, warm, steps)
    flop = 2.0 * n ** 3
    # A "sample" here is one full n x n matmul, so samples/s == steps/s.
    return make_record(
        "matmul", variant, warm, steps, t, 1,
        n=n, dtype=kind, gflops=round(flop * steps / t.total / 1e9, 2),
        gflops_median_step=round(flop / statistics.median(t.per_step) / 1e9, 2))


def bench_transformer(args, variant):
    """Full train step of the char-level transformer (next-token cross-entropy
    over all B*T positions, clip_grad_norm_(1.0), AdamW)."""
    batch, context, vocab = 32, 128, 128
    g = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, vocab, (N_DATA_BATCHES, batch, context + 1), generator=g)
    xs, ys = data[:, :, :-1].contiguous().to(DEVICE), data[:, :, 1:].contiguous().to(DEVICE)

    torch.manual_seed(args.seed)
    model = CharTransformer(vocab=vocab, context=context,
                            use_sdpa=variant.startswith("sdpa")).to(DEVICE)
    if variant.endswith("_reduce_overhead"):
        model = torch.compile(model, mode="reduce-overhead")  # GPU only
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=1e-2)
    it = [0]

    def step():
        i = it[0] % N_DATA_BATCHES
        it[0] += 1
        opt.zero_grad(set_to_none=True)
        logits = model(xs[i])
        loss = F.cross_entropy(logits.view(-1, vocab), ys[i].view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    warm, steps = steps_for("transformer", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record(
        "transformer", variant, warm, steps, t, batch,
        batch=batch, context=context, params=n_params(model),
        tokens_per_s=round(steps / t.total * batch * context, 1))


def bench_cnn(args, variant):
    """Full train step of the small CNN: CrossEntropyLoss, SGD(lr=0.01, momentum=0.9)."""
    batch = 128
    g = torch.Generator().manual_seed(args.seed)
    xs = torch.randn(N_DATA_BATCHES, batch, 1, 28, 28, generator=g).to(DEVICE)
    ys = torch.randint(0, 10, (N_DATA_BATCHES, batch), generator=g).to(DEVICE)

    torch.manual_seed(args.seed)
    model = SmallCNN().to(DEVICE)
    if variant == "infer_b128":
        # Forward only, in eval mode under no_grad (tapir's tiled conv kernel).
        model.eval()
        it = [0]

        def forward():
            i = it[0] % N_DATA_BATCHES
            it[0] += 1
            model(xs[i])

        warm, steps = steps_for("cnn", args.steps_scale)
        with torch.no_grad():
            t = time_loop(forward, warm, steps)
        return make_record("cnn", variant, warm, steps, t, batch, batch=batch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    it = [0]

    def step():
        i = it[0] % N_DATA_BATCHES
        it[0] += 1
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        opt.step()

    warm, steps = steps_for("cnn", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("cnn", variant, warm, steps, t, batch,
                       batch=batch, params=n_params(model))


# conv variants: (batch, in channels, size, out channels, kernel), padding
# kernel // 2 — ResNet-like layers, and the CNN example's 48 -> 32 at 32 x 32.
CONV_LAYERS = {
    "c48_h32_b64": (64, 48, 32, 32, 3),
    "c64_h56_b32": (32, 64, 56, 64, 3),
    "c64_h56_b1": (1, 64, 56, 64, 3),
    "c256_h14_b8": (8, 256, 14, 256, 3),
    "c64_h56_1x1_b32": (32, 64, 56, 128, 1),
}


def bench_conv(args, variant):
    """One conv2d forward (with bias) under torch.no_grad."""
    n, c, size, oc, k = CONV_LAYERS[variant]
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(n, c, size, size, generator=g).to(DEVICE)
    w = torch.randn(oc, c, k, k, generator=g).to(DEVICE)
    b = torch.randn(oc, generator=g).to(DEVICE)
    warm, steps = steps_for("conv", args.steps_scale)
    with torch.no_grad():
        t = time_loop(lambda: F.conv2d(x, w, b, padding=k // 2), warm, steps)
    flop = 2 * n * oc * size * size * c * k * k
    return make_record("conv", variant, warm, steps, t, n, batch=n,
                       gflops_median_step=round(flop / statistics.median(t.per_step) / 1e9, 2))


def bench_scatter(args, variant):
    """A graph network's aggregation: 100k edges between 10k nodes of 64
    features; each edge's source row gathered, the rows combined at their
    destinations by index_add or scatter_reduce amax (include_self=False),
    forward and backward of the sum."""
    nodes, edges, features = 10_000, 100_000, 64
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(nodes, features, generator=g).to(DEVICE).requires_grad_()
    src = torch.randint(0, nodes, (edges,), generator=g).to(DEVICE)
    dst = torch.randint(0, nodes, (edges,), generator=g).to(DEVICE)
    spread = dst.reshape(-1, 1).expand(edges, features)
    zeros = torch.zeros(nodes, features, device=DEVICE)

    def step():
        x.grad = None
        rows = x.index_select(0, src)
        if variant == "index_add_e100k":
            out = zeros.index_add(0, dst, rows)
        else:
            out = zeros.scatter_reduce(0, spread, rows, "amax", include_self=False)
        out.sum().backward()

    warm, steps = steps_for("scatter", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("scatter", variant, warm, steps, t, edges,
                       edges=edges, nodes=nodes, features=features)


def bench_unary(args, variant):
    """One elementwise function over 4M float32, forward only: a standard
    normal x, |x| + 0.1 for the logarithms, sqrt and pow (to the 1.5),
    tanh(x) for asin. Samples are elements."""
    n = 1 << 22
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(n, generator=g).to(DEVICE)
    positive = x.abs() + 0.1
    unit = torch.tanh(x)
    source = positive if variant in ("log", "log1p", "log2", "sqrt", "pow") else x
    source = unit if variant == "asin" else source
    fn = (lambda t: torch.pow(t, 1.5)) if variant == "pow" else getattr(torch, variant)

    def step():
        fn(source)

    warm, steps = steps_for("unary", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("unary", variant, warm, steps, t, n, elements=n)


OPS_VARIANTS = {
    "t_contiguous": lambda x, cube, pos: x.t().contiguous(),
    "permute_201": lambda x, cube, pos: cube.permute(2, 0, 1).contiguous(),
    "randn": lambda x, cube, pos: torch.randn(x.numel(), device=x.device),
    "rand": lambda x, cube, pos: torch.rand(x.numel(), device=x.device),
    "sort_dim1": lambda x, cube, pos: x.sort(1, descending=True),
    "topk10_dim1": lambda x, cube, pos: x.topk(10, 1),
    "topk100_dim1": lambda x, cube, pos: x.topk(100, 1),
    "topk10_dim0": lambda x, cube, pos: x.topk(10, 0),
    "nonzero": lambda x, cube, pos: pos.nonzero(),
    "masked_select": lambda x, cube, pos: x.masked_select(pos),
    "amax_dim0": lambda x, cube, pos: x.amax(0),
    "amax_dim1": lambda x, cube, pos: x.amax(1),
    "max_dim1": lambda x, cube, pos: x.max(1),
    "max_dim0": lambda x, cube, pos: x.max(0),
    "amax_rows256_dim0": lambda x, cube, pos: cube.reshape(16384, 256).amax(0),
    "sum_rows256_dim0": lambda x, cube, pos: cube.reshape(16384, 256).sum(0),
    "exp_f16": lambda x, cube, pos: HALF[0].exp(),
    "add_f16": lambda x, cube, pos: HALF[0] + HALF[1],
    "gelu_f16": lambda x, cube, pos: torch.nn.functional.gelu(HALF[0]),
    "sum_f16": lambda x, cube, pos: HALF[0].sum(),
    "to_f16": lambda x, cube, pos: x.half(),
    "to_f32_from_f16": lambda x, cube, pos: HALF[0].float(),
    "add_row_f16": lambda x, cube, pos: HALF[0] + HALF[1][0],
    "exp_bf16": lambda x, cube, pos: BF16[0].exp(),
    "add_bf16": lambda x, cube, pos: BF16[0] + BF16[1],
    "gelu_bf16": lambda x, cube, pos: torch.nn.functional.gelu(BF16[0]),
    "sum_bf16": lambda x, cube, pos: BF16[0].sum(),
    "to_bf16": lambda x, cube, pos: x.bfloat16(),
    "to_f32_from_bf16": lambda x, cube, pos: BF16[0].float(),
    "gelu": lambda x, cube, pos: torch.nn.functional.gelu(x),
    "softmax_dim0": lambda x, cube, pos: x.softmax(0),
    "softmax_dim1": lambda x, cube, pos: x.softmax(1),
    "logsumexp_dim0": lambda x, cube, pos: x.logsumexp(0),
    "norm_dim1": lambda x, cube, pos: torch.linalg.vector_norm(x, 2, dim=1),
    "cumsum_dim0": lambda x, cube, pos: x.cumsum(0),
    "cumsum_dim1": lambda x, cube, pos: x.cumsum(1),
    "exp_t": lambda x, cube, pos: x.t().exp(),
    "mul_scalar_t": lambda x, cube, pos: x.t() * 2.0,
    "mul_t_t": lambda x, cube, pos: x.t() * x.t(),
    "add_t_x": lambda x, cube, pos: x.t() + x,
    "relu_permute_201": lambda x, cube, pos: cube.permute(2, 0, 1).relu(),
    "add_inplace_t_t": lambda x, cube, pos: INPLACE[0].t().add_(INPLACE[1].t()),
    "add_inplace_x_t": lambda x, cube, pos: INPLACE[0].add_(INPLACE[1].t()),
    "mul_scalar_inplace_t": lambda x, cube, pos: INPLACE[0].t().mul_(1.0),
    "sum_t_dim1": lambda x, cube, pos: x.t().sum(1),
    "sum_t_dim0": lambda x, cube, pos: x.t().sum(0),
    "amax_t_dim1": lambda x, cube, pos: x.t().amax(1),
    "max_t_dim1": lambda x, cube, pos: x.t().max(1),
    "var_t_dim1": lambda x, cube, pos: x.t().var(1),
    "sum_permute_201_dim12": lambda x, cube, pos: cube.permute(2, 0, 1).sum((1, 2)),
    "sum_narrow_dim0": lambda x, cube, pos: x[:, :1000].sum(0),
    "copy_inplace_t_t": lambda x, cube, pos: INPLACE[0].t().copy_(INPLACE[1].t()),
    "copy_inplace_x_t": lambda x, cube, pos: INPLACE[0].copy_(INPLACE[1].t()),
    "log_softmax_dim1": lambda x, cube, pos: x.log_softmax(1),
    "layer_norm": lambda x, cube, pos: torch.nn.functional.layer_norm(x, (2048,)),
    "softmax_t_dim1": lambda x, cube, pos: x.t().softmax(1),
    "log_softmax_t_dim1": lambda x, cube, pos: x.t().log_softmax(1),
    "softmax_t_dim0": lambda x, cube, pos: x.t().softmax(0),
    "cumsum_t_dim1": lambda x, cube, pos: x.t().cumsum(1),
    "logsumexp_t_dim1": lambda x, cube, pos: x.t().logsumexp(1),
    "argmax_t_dim1": lambda x, cube, pos: x.t().argmax(1),
    "norm_t_dim1": lambda x, cube, pos: torch.linalg.vector_norm(x.t(), 2, dim=1),
    "layer_norm_t": lambda x, cube, pos: torch.nn.functional.layer_norm(x.t(), (2048,)),
    "prod_dim1": lambda x, cube, pos: x.prod(1),
    "prod_dim0": lambda x, cube, pos: x.prod(0),
    "amin_dim1": lambda x, cube, pos: x.amin(1),
}
# Targets of the in-place variants, made by bench_ops (their values drift;
# the time does not depend on them).
INPLACE = []
# f16 copies of x and of the second in-place target, for the f16 variants.
HALF = []
# bf16 copies of the same, for the bf16 variants.
BF16 = []


def bench_ops(args, variant):
    """One tensor op over a standard normal 2048 x 2048 float32 matrix,
    forward only; permute copies a [128, 128, 256] view of it and the draws
    make as many values. Samples are input elements."""
    n = 2048
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(n, n, generator=g).to(DEVICE)
    cube = x.reshape(128, 128, 256)
    pos = x > 0
    INPLACE[:] = [torch.randn(n, n, generator=g).to(DEVICE), torch.randn(n, n, generator=g).to(DEVICE)]
    HALF[:] = [x.half(), INPLACE[1].half()]
    BF16[:] = [x.bfloat16(), INPLACE[1].bfloat16()]
    fn = OPS_VARIANTS[variant]

    def step():
        fn(x, cube, pos)

    warm, steps = steps_for("ops", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("ops", variant, warm, steps, t, n * n, elements=n * n)


def bench_lm_head(args, variant):
    """A language model's output layer and its loss: 1024 tokens of 256
    features against a 32000-word vocabulary, F.linear_cross_entropy's mean
    loss, forward and backward for the features and the weight; reference
    (the whole [1024, 32000] logits) or chunked (the default
    LinearCrossEntropyOptions())."""
    tokens, features, vocab = 1024, 256, 32_000
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(tokens, features, generator=g).to(DEVICE).requires_grad_()
    w = (torch.randn(vocab, features, generator=g) * 0.05).to(DEVICE).requires_grad_()
    y = torch.randint(0, vocab, (tokens,), generator=g).to(DEVICE)
    options = nn.LinearCrossEntropyOptions() if variant.startswith("chunked") else None

    def step():
        x.grad = None
        w.grad = None
        F.linear_cross_entropy(x, w, y, options=options).backward()

    warm, steps = steps_for("lm_head", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("lm_head", variant, warm, steps, t, tokens,
                       tokens=tokens, features=features, vocab=vocab)


def bench_pinn(args, variant):
    """A physics-informed MLP's training step (tapir's ``train_pinn``
    example): 1 -> 32 -> 32 -> 1 with tanh on 64 collocation points, u''
    from two nested create_graph grads, the residual of
    u'' = -pi^2 sin(pi x) plus the boundary loss, backward, an Adam step."""
    torch.manual_seed(args.seed)
    n = 64
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 1)).to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.linspace(-1, 1, n, device=DEVICE).reshape(n, 1).requires_grad_()
    forcing = -(math.pi ** 2) * torch.sin(math.pi * x.detach())
    boundary = torch.tensor([[-1.0], [1.0]], device=DEVICE)

    def step():
        opt.zero_grad()
        u = model(x)
        (ux,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        (uxx,) = torch.autograd.grad(ux.sum(), x, create_graph=True)
        loss = ((uxx - forcing) ** 2).mean() + (model(boundary) ** 2).mean()
        loss.backward()
        opt.step()

    warm, steps = steps_for("pinn", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("pinn", variant, warm, steps, t, n, points=n)


def bench_linalg(args, variant):
    """torch.linalg in float64 (module docstring); samples are matrices."""
    g = torch.Generator().manual_seed(args.seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(DEVICE)

    if variant == "gp_b64_n64":
        x = rnd(64, 64, 64)
        a = (x @ x.mT + 64 * torch.eye(64, dtype=torch.float64, device=DEVICE)).requires_grad_()
        y = rnd(64, 64, 1)

        def step():
            a.grad = None
            l = torch.linalg.cholesky(a)
            alpha = torch.linalg.solve_triangular(l, y, upper=False)
            nll = 0.5 * alpha.square().sum() + torch.diagonal(l, 0, -2, -1).log().sum()
            nll.backward()
        count = 64
    elif variant == "eigh_b128_n32":
        x = rnd(128, 32, 32)
        a = x + x.mT

        def step():
            torch.linalg.eigh(a)
        count = 128
    elif variant == "svd_n512":
        a = rnd(512, 512)

        def step():
            torch.linalg.svd(a, full_matrices=False)
        count = 1
    else:  # solve_n1024
        a = rnd(1024, 1024) + 32 * torch.eye(1024, dtype=torch.float64, device=DEVICE)
        b = rnd(1024, 16)

        def step():
            torch.linalg.solve(a, b)
        count = 1
    warm, steps = steps_for("linalg", args.steps_scale)
    t = time_loop(step, warm, steps)
    return make_record("linalg", variant, warm, steps, t, count)


def bench_inference(args, variant):
    """Residual-MLP forward under torch.no_grad (model in eval mode)."""
    torch.manual_seed(args.seed)
    model = ResidualMLP().eval().to(DEVICE)
    g = torch.Generator().manual_seed(args.seed)
    extra = {}
    if variant.endswith("_reduce_overhead"):
        # CUDA graphs through torch.compile (GPU only); the first call
        # compiles, and is reported as tapir reports its recording call.
        model = torch.compile(model, mode="reduce-overhead")
        x0 = torch.randn(1 if variant.startswith("b1") else 256, 784).to(DEVICE)
        t0 = time.perf_counter()
        with torch.no_grad():
            model(x0)
        sync()
        extra["first_call_s"] = round(time.perf_counter() - t0, 4)

    if variant.startswith("b1_latency"):
        # Each call is timed individually; the median is the headline number.
        x = torch.randn(1, 784, generator=g).to(DEVICE)
        warm, steps = steps_for("inference.b1", args.steps_scale)
        with torch.no_grad():
            t = time_loop(lambda: model(x), warm, steps)
        per_us = sorted(dt * 1e6 for dt in t.per_step)
        return make_record(
            "inference", variant, warm, steps, t, 1, batch=1,
            latency_us_median=round(statistics.median(per_us), 2),
            latency_us_p10=round(per_us[int(0.10 * (len(per_us) - 1))], 2),
            latency_us_p90=round(per_us[int(0.90 * (len(per_us) - 1))], 2), **extra)

    # b256_throughput
    x = torch.randn(256, 784, generator=g).to(DEVICE)
    warm, steps = steps_for("inference.b256", args.steps_scale)
    with torch.no_grad():
        t = time_loop(lambda: model(x), warm, steps)
    return make_record("inference", variant, warm, steps, t, 256, batch=256, **extra)


# workload -> (bench function, its variants).  Every (workload, variant)
# pair is one "unit": one child process and one JSON line.
BENCHES = {
    "mlp": (bench_mlp, ["train_b256"]),
    "matmul": (bench_matmul, ["n1024", "n2048"]),
    "transformer": (bench_transformer, ["manual_attn", "sdpa"]),
    "cnn": (bench_cnn, ["train_b128", "infer_b128"]),
    "inference": (bench_inference, ["b1_latency", "b256_throughput"]),
    "conv": (bench_conv, list(CONV_LAYERS)),
    "scatter": (bench_scatter, ["index_add_e100k", "scatter_amax_e100k"]),
    "lm_head": (bench_lm_head, ["reference_v32k", "chunked_v32k"]),
    "pinn": (bench_pinn, ["train_n64"]),
    "linalg": (bench_linalg, ["gp_b64_n64", "eigh_b128_n32", "svd_n512", "solve_n1024"]),
    "unary": (bench_unary, ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tan",
                            "atan", "asin", "sinh", "cosh", "tanh", "sigmoid", "sqrt", "pow"]),
    "ops": (bench_ops, list(OPS_VARIANTS)),
}
WORKLOADS = list(BENCHES)


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def run_in_process(workload, variant, args):
    """Run one unit in this process and return its record."""
    torch.set_num_threads(args.threads)
    baseline = peak_rss_mib()  # peak RSS after `import torch`, before the workload
    fn, _ = BENCHES[workload]
    if args.amp:
        # The whole step under autocast, as the AMP recipe runs its forward
        # (backward and the optimizer are unaffected by the region).
        dtype = torch.bfloat16 if args.amp == "bf16" else torch.float16
        with torch.autocast(args.device, dtype=dtype):
            rec = fn(args, variant)
    else:
        rec = fn(args, variant)
    rec["amp"] = args.amp
    rec["baseline_rss_mib"] = round(baseline, 1)
    return rec


def run_isolated(workload, variant, args):
    """Run one unit in a fresh interpreter and return its record."""
    cmd = [sys.executable, os.path.abspath(__file__),
           "--unit", f"{workload}:{variant}",
           "--threads", str(args.threads), "--seed", str(args.seed),
           "--steps-scale", str(args.steps_scale), "--device", args.device]
    if args.amp:
        cmd += ["--amp", args.amp]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1])


def run_unit(workload, variant, args, in_process):
    """Run one unit, retrying while it looks disturbed (--min-cpu-util)."""
    tries = args.max_tries if args.min_cpu_util > 0 else 1
    best = None
    for attempt in range(1, tries + 1):
        busy = wait_for_idle(args.wait_idle) if args.wait_idle > 0 else None
        if in_process:
            rec = run_in_process(workload, variant, args)
        else:
            rec = run_isolated(workload, variant, args)
        if busy is not None:
            rec["busy_before"] = round(busy, 3)
        rec["attempt"] = attempt
        if best is None or rec["cpu_util"] > best["cpu_util"]:
            best = rec
        if rec["cpu_util"] >= args.min_cpu_util * args.threads:
            break
        print(f"# {workload}:{variant} attempt {attempt}: cpu_util {rec['cpu_util']} < "
              f"{args.min_cpu_util} x {args.threads} threads (machine busy?)", file=sys.stderr)
    return best


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads(N) (default 2; use 1 for single-thread)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help="comma-separated subset of: " + ",".join(WORKLOADS))
    p.add_argument("--seed", type=int, default=0, help="seed for data and weights (default 0)")
    p.add_argument("--steps-scale", type=float, default=1.0,
                   help="multiply every warm-up/timed step count (e.g. 0.1 for a smoke run)")
    p.add_argument("--out", default=None,
                   help="also append the JSON lines to this file")
    p.add_argument("--no-isolate", action="store_true",
                   help="run every unit in this process (peak RSS becomes cumulative)")
    p.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                   help="before each unit, wait up to SECONDS for other processes to leave "
                        "the CPUs idle (<10%% busy); the busy fraction seen is recorded as "
                        "busy_before (default 0: do not wait)")
    p.add_argument("--min-cpu-util", type=float, default=0.0, metavar="FRACTION",
                   help="treat a unit whose cpu_util is below FRACTION * threads as disturbed "
                        "by other processes and run it again (see --max-tries; default 0: off)")
    p.add_argument("--max-tries", type=int, default=3,
                   help="attempts per unit with --min-cpu-util; the attempt with the highest "
                        "cpu_util is kept (default 3)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the workloads run (default cpu)")
    p.add_argument("--amp", default=None, choices=["bf16", "f16"],
                   help="run each step under torch.autocast to this dtype (tapir: bench_ref --amp)")
    p.add_argument("--unit", default=None, help=argparse.SUPPRESS)  # internal: child mode
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda":
        BENCHES["matmul"] = (bench_matmul, ["f32_n4096", "tf32_n4096", "bf16_n4096"])
        BENCHES["mlp"] = (bench_mlp, ["train_b256", "train_b256_reduce_overhead"])
        BENCHES["transformer"] = (bench_transformer, [
            "manual_attn", "sdpa", "sdpa_reduce_overhead"])
        BENCHES["inference"] = (bench_inference, [
            "b1_latency", "b256_throughput",
            "b1_latency_reduce_overhead", "b256_throughput_reduce_overhead"])

    if args.unit:  # child process: exactly one workload:variant
        workload, variant = args.unit.split(":", 1)
        args.units = [(workload, variant)]
        return args
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in BENCHES]
    if unknown:
        p.error(f"unknown workload(s): {', '.join(unknown)}")
    args.units = [(w, v) for w in names for v in BENCHES[w][1]]
    return args


def main(argv=None):
    args = parse_args(argv)
    in_process = args.no_isolate or args.unit is not None
    out = open(args.out, "a") if args.out else None
    try:
        for workload, variant in args.units:
            rec = run_unit(workload, variant, args, in_process)
            line = json.dumps(rec)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
    finally:
        if out:
            out.close()


if __name__ == "__main__":
    main()
