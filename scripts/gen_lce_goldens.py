#!/usr/bin/env python3
"""PyTorch goldens for `linear_cross_entropy` (run by hand, not by CI).

    python3 scripts/gen_lce_goldens.py   # -> tests/goldens/linear_cross_entropy.{json,safetensors}

Each case: the inputs, then per reduction the loss and the gradients of
`sum(loss * linspace(-1, 1.5))` (of the loss itself when it is a scalar)
for the input, the linear weight and the linear bias, in f64. Cases with
`options` take PyTorch's chunked path (checked here with the op's grad_fn);
the rest its reference path. `chunk_sizes` is the chunk size PyTorch's
`LinearCrossEntropyOptions._adjust` picks (or the error it raises) for a
table of shapes and options.
"""
import json
import os
import warnings

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch.nn import LinearCrossEntropyOptions as Options

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")
torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
T = {}
CASES = []


def put(key, t):
    T[key] = t.detach().contiguous().clone()


def weights_like(o):
    return torch.linspace(-1.0, 1.5, o.numel(), dtype=o.dtype).reshape(o.shape)


def options_json(o):
    if o is None:
        return None
    return {"batch_chunk_size": o.batch_chunk_size, "chunking_method": o.chunking_method,
            "allow_retain_graph": o.allow_retain_graph}


def case(name, x, w, target, bias=None, weight=None, ignore_index=None, label_smoothing=0.0,
         options=None, chunked=None):
    put(f"{name}.x", x)
    put(f"{name}.w", w)
    put(f"{name}.target", target)
    if bias is not None:
        put(f"{name}.bias", bias)
    if weight is not None:
        put(f"{name}.weight", weight)
    for red in ["none", "mean", "sum"]:
        xs = [t.clone().requires_grad_(True) for t in (x, w)]
        b = bias.clone().requires_grad_(True) if bias is not None else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = F.linear_cross_entropy(xs[0], xs[1], target, linear_bias=b, weight=weight,
                                         reduction=red, ignore_index=ignore_index,
                                         label_smoothing=label_smoothing, options=options)
        fn = out.grad_fn
        if "Squeeze" in type(fn).__name__:  # an unbatched input
            fn = fn.next_functions[0][0]
        took_chunks = "chunked" in type(fn).__name__
        assert took_chunks == chunked, (name, red, type(out.grad_fn).__name__)
        put(f"{name}.{red}.out", out)
        (out * weights_like(out)).sum().backward() if out.dim() else out.backward()
        put(f"{name}.{red}.grad_x", xs[0].grad)
        put(f"{name}.{red}.grad_w", xs[1].grad)
        if b is not None:
            put(f"{name}.{red}.grad_bias", b.grad)
    CASES.append({"name": name, "bias": bias is not None, "weight": weight is not None,
                  "ignore_index": ignore_index, "label_smoothing": label_smoothing,
                  "options": options_json(options), "chunked": chunked})


r = torch.randn
ids = torch.tensor([3, 0, 8, -100, 2, 8, 5])
case("ref_index", r(7, 4), r(9, 4), ids, bias=r(9), chunked=False)
case("ref_weight_smooth", r(7, 4), r(9, 4), torch.tensor([3, 0, 2, 2, 1, 8, 5]), weight=torch.rand(9) + 0.5,
     ignore_index=2, label_smoothing=0.1, chunked=False)
case("ref_kdim", r(5, 4), r(3, 2, 4), torch.randint(0, 3, (5, 2)), bias=r(3, 2), chunked=False)
case("ref_prob", r(6, 4), r(5, 4), torch.softmax(r(6, 5), 1), weight=torch.rand(5) + 0.5, chunked=False)
case("ref_unbatched", r(4), r(6, 4), torch.tensor(4), bias=r(6), chunked=False)
case("chunk_index", r(7, 4), r(9, 4), torch.tensor([3, 0, 2, 2, 1, 8, 5]), bias=r(9),
     weight=torch.rand(9) + 0.5, ignore_index=2, options=Options(batch_chunk_size=3), chunked=True)
case("chunk_default_ignore", r(7, 4), r(9, 4), ids, options=Options(batch_chunk_size=2), chunked=True)
case("chunk_prob", r(6, 4), r(5, 4), torch.softmax(r(6, 5) * 2, 1), bias=r(5), weight=torch.rand(5) + 0.5,
     options=Options(batch_chunk_size=4), chunked=True)
case("chunk_auto", r(16, 4), r(40, 4) * 0.5, torch.randint(0, 40, (16,)), bias=r(40), options=Options(),
     chunked=True)
case("chunk_aspect2", r(16, 4), r(40, 4), torch.randint(0, 40, (16,)),
     options=Options(chunking_method="aspect_ratio:2"), chunked=True)
case("chunk_unbatched", r(4), r(6, 4), torch.tensor(1), bias=r(6), options=Options(batch_chunk_size=1),
     chunked=True)
case("chunk_all_ignored", r(3, 4), r(5, 4), torch.tensor([-100, -100, -100]), options=Options(batch_chunk_size=2),
     chunked=True)
# Options PyTorch cannot honour (label smoothing, a K-dimensional loss): the reference path.
case("fallback_smooth", r(7, 4), r(9, 4), ids, label_smoothing=0.2, options=Options(batch_chunk_size=3),
     chunked=False)
case("fallback_kdim", r(5, 4), r(3, 2, 4), torch.randint(0, 3, (5, 2)), options=Options(batch_chunk_size=2),
     chunked=False)

# ---- chunk sizes -------------------------------------------------------------------------------
SIZES = []
for n, f, c in [(16, 4, 40), (1000, 64, 50000), (4096, 512, 512), (4096, 512, 256), (7, 4, 9), (1, 8, 3),
                (100, 3, 7), (0, 4, 9), (33, 5, 1000)]:
    for spec in [{}, {"chunking_method": "aspect_ratio:4"}, {"chunking_method": None, "batch_chunk_size": 5},
                 {"batch_chunk_size": 8}, {"chunking_method": "aspect_ratio", "batch_chunk_size": 8},
                 {"chunking_method": None}]:
        for dtype in [torch.float32, torch.bfloat16]:
            for prob in [False, True]:
                try:
                    got = Options(**spec)._adjust(num_batches=n, in_features=f, num_classes=c, dtype=dtype,
                                                  device=torch.device("cpu"), prob_target=prob).batch_chunk_size
                except ValueError as e:
                    got = str(e)
                SIZES.append({"n": n, "in_features": f, "num_classes": c, "options": spec,
                              "half": dtype != torch.float32, "prob": prob, "chunk": got})

os.makedirs(OUT, exist_ok=True)
save_file(T, os.path.join(OUT, "linear_cross_entropy.safetensors"))
with open(os.path.join(OUT, "linear_cross_entropy.json"), "w") as fh:
    json.dump({"torch": torch.__version__, "cases": CASES, "chunk_sizes": SIZES}, fh, indent=1)
print(f"{len(CASES)} cases, {len(SIZES)} chunk sizes, {len(T)} tensors")
