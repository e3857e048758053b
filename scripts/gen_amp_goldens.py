#!/usr/bin/env python3
"""PyTorch goldens for tapir's mixed precision (run by hand, not by CI).

    python3 scripts/gen_amp_goldens.py   # -> tests/goldens/amp.{json,safetensors}

Ops under `torch.autocast("cpu", dtype)` for bf16 and f16: the output dtype
and value, and the f32 inputs' gradients of sum(out.float() * w). A
GradScaler trajectory (SGD, growth_interval 2, an inf injected at step 3:
step skipped, scale halved). The f16 underflow case with and without it.
Values are stored as float64; dtypes in the JSON.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")
T = {}
M = {"torch": torch.__version__, "ops": [], "scaler": {}, "underflow": {}}


def put(key, t):
    T[key] = t.detach().to(torch.float64).contiguous().clone()


def weights_like(o):
    return torch.linspace(-1.0, 1.5, o.numel(), dtype=torch.float32).reshape(o.shape)


torch.manual_seed(0)
r = torch.randn
a, b, c = r(4, 6), r(6, 5), r(4, 5)
w1, b1, w2, b2 = r(8, 6) * 0.4, r(8) * 0.1, r(3, 8) * 0.4, r(3) * 0.1
img, k, kb = r(2, 3, 5, 5), r(4, 3, 3, 3) * 0.3, r(4) * 0.1
seq, k1, k1b = r(2, 3, 7), r(4, 3, 3) * 0.3, r(4) * 0.1
t3 = torch.tensor([0, 2, 1, 2])
g, beta = torch.rand(5) + 0.5, r(5) * 0.1

# name -> (inputs, function); the replay (tests/suite/amp.rs) mirrors it.
CASES = {
    "matmul": ([a, b], lambda a, b: a @ b),
    "linear": ([a, w1, b1], lambda x, w, b: F.linear(x, w, b)),
    "conv2d": ([img, k, kb], lambda x, w, b: F.conv2d(x, w, b, padding=1)),
    "conv1d": ([seq, k1, k1b], lambda x, w, b: F.conv1d(x, w, b)),
    "mlp_cross_entropy": ([a, w1, b1, w2, b2],
                          lambda x, w1, b1, w2, b2: F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), t3)),
    "softmax_of_matmul": ([a, b], lambda a, b: torch.softmax(a @ b, -1)),
    "layer_norm_of_matmul": ([a, b, g, beta], lambda a, b, g, beta: F.layer_norm(a @ b, (5,), g, beta)),
    "mse_of_matmul": ([a, b, c], lambda a, b, c: F.mse_loss(a @ b, c)),
    "cat_with_f32": ([a, b, c], lambda a, b, c: torch.cat([a @ b, c], 0)),
    "exp_sum_of_matmul": ([a, b], lambda a, b: (a @ b * 0.1).exp().sum()),
    "add_f32_residual": ([a, b, c], lambda a, b, c: a @ b + c),
    "sdpa": ([a.reshape(2, 2, 6), c.reshape(2, 2, 5)[..., :4].repeat(1, 1, 1) @ torch.ones(4, 6) * 0.1, c.reshape(2, 2, 5)],
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
}

for dtype in [torch.bfloat16, torch.float16]:
    dname = str(dtype).replace("torch.", "")
    for name, (inputs, fn) in CASES.items():
        xs = [x.clone().requires_grad_(True) for x in inputs]
        with torch.autocast("cpu", dtype=dtype):
            out = fn(*xs)
        (out.float() * weights_like(out)).sum().backward()
        key = f"{dname}.{name}"
        put(f"{key}.out", out)
        for i, x in enumerate(xs):
            put(f"{key}.in{i}", x)
            put(f"{key}.grad{i}", x.grad)
            assert x.grad.dtype == torch.float32
        M["ops"].append({"name": name, "autocast": dname, "n_in": len(xs),
                         "out_dtype": str(out.dtype).replace("torch.", "")})

# ---- GradScaler trajectory ----------------------------------------------------------
torch.manual_seed(1)
lin = torch.nn.Linear(4, 3)
put("scaler.init.weight", lin.weight)
put("scaler.init.bias", lin.bias)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
xs = torch.randn(6, 5, 4)
ys = torch.randn(6, 5, 3)
xs[3, 0, 0] = float("inf")  # step 3's loss and gradients are not finite
put("scaler.xs", xs)
put("scaler.ys", ys)
scales, stepped = [], []
for i in range(6):
    opt.zero_grad()
    loss = F.mse_loss(lin(xs[i]), ys[i])
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    before = lin.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    scales.append(scaler.get_scale())
    stepped.append(not torch.equal(before, lin.weight.detach()))
    put(f"scaler.step{i}.weight", lin.weight)
    put(f"scaler.step{i}.bias", lin.bias)
M["scaler"] = {"scales": scales, "stepped": stepped, "state": scaler.state_dict()}

# ---- the f16 underflow ---------------------------------------------------------------
def underflow_grad(scaled):
    w = torch.ones(4, requires_grad=True)
    loss = (w.half().float() * 1e-8).sum()
    s = torch.amp.GradScaler("cpu", enabled=scaled)
    s.scale(loss).backward()
    opt = torch.optim.SGD([w], lr=0.0)
    s.unscale_(opt)
    return w.grad


put("underflow.plain", underflow_grad(False))
put("underflow.scaled", underflow_grad(True))

os.makedirs(OUT, exist_ok=True)
save_file(T, os.path.join(OUT, "amp.safetensors"))
with open(os.path.join(OUT, "amp.json"), "w") as f:
    json.dump(M, f, indent=0)
print(len(M["ops"]), "op cases; scales", scales, "stepped", stepped, file=sys.stderr)
