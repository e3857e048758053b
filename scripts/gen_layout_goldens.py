#!/usr/bin/env python3
"""Writes the strides PyTorch gives elementwise results (run by hand, not by CI).

    python3 scripts/gen_layout_goldens.py   # -> tests/goldens/elementwise_layouts.json

PyTorch lays out the result of an elementwise op in the order of its
operands' memory (TensorIterator's reorder_dimensions): `x.t().exp()` keeps
the transposed strides, `x.t() + y` takes the first operand's. Each case is
two operands built from row-major bases by a recipe of view ops (permute,
narrow, unsqueeze, expand, select) that tests/suite/layouts.rs replays with
tapir's ops, and the strides PyTorch gives `exp(a)`, `a + b`, `b * a`,
`a > b` and `where(a > b, a, b)`.
"""
import json
import os
import random

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")
rng = random.Random(7)


def build(recipe):
    t = torch.arange(float(torch.Size(recipe["base"]).numel())).reshape(recipe["base"])
    for step in recipe["steps"]:
        op, args = step[0], step[1:]
        if op == "permute":
            t = t.permute(*args[0])
        elif op == "narrow":
            t = t.narrow(*args)
        elif op == "unsqueeze":
            t = t.unsqueeze(args[0])
        elif op == "expand":
            t = t.expand(*args[0])
        elif op == "select":
            t = t.select(*args)
        else:
            raise ValueError(op)
    return t


def random_operand(shape):
    """A view of `shape`: a permuted base, sometimes narrowed or expanded."""
    ndim = len(shape)
    perm = list(range(ndim))
    rng.shuffle(perm)
    # base dims in the permuted order, so permuting back gives `shape`
    base = [shape[p] for p in perm]
    steps = []
    narrowed = None
    if ndim and rng.random() < 0.2:
        d = rng.randrange(ndim)
        if base[d] > 1:
            base[d] += 1
            narrowed = d
            steps.append(["narrow", d, rng.randrange(2), base[d] - 1])
    inverse = [perm.index(i) for i in range(ndim)]
    steps.append(["permute", inverse])
    expand = list(shape)
    if ndim and narrowed is None and rng.random() < 0.2:
        d = rng.randrange(ndim)
        if shape[d] > 1:
            base[perm.index(d)] = 1
            steps.append(["expand", expand])
    if rng.random() < 0.15:
        # a leading dim picked out by select: a view at an offset
        base = [2] + base
        steps = [["select", 0, 1]] + steps
    return {"base": base, "steps": steps}


def random_case(ndim=None):
    ndim = ndim or rng.randrange(1, 5)
    shape = [rng.choice([1, 2, 3, 4, 5]) for _ in range(ndim)]
    a = random_operand(shape)
    kind = rng.random()
    if kind < 0.2:
        b = {"base": [], "steps": []}
    elif kind < 0.4:
        # broadcast from fewer or size-1 dims
        sub = [s if rng.random() < 0.6 else 1 for s in shape[rng.randrange(ndim):]]
        b = random_operand(sub)
    else:
        b = random_operand(shape)
    return {"a": a, "b": b}


def fixed_cases():
    t = lambda base, steps: {"base": base, "steps": steps}
    return [
        # transposed matrix, alone and beside a row-major one, both orders
        {"a": t([4, 3], [["permute", [1, 0]]]), "b": t([3, 4], [])},
        {"a": t([3, 4], []), "b": t([4, 3], [["permute", [1, 0]]])},
        # channels-last activation and a per-channel bias
        {"a": t([2, 4, 5, 3], [["permute", [0, 3, 1, 2]]]), "b": t([3, 1, 1], [])},
        # heads moved beside batch, as attention does
        {"a": t([2, 5, 3, 4], [["permute", [0, 2, 1, 3]]]), "b": t([], [])},
        # a permuted view at an offset
        {"a": t([2, 3, 4], [["select", 0, 1], ["permute", [1, 0]]]), "b": t([4, 3], [])},
        # channels-last 3-D volumes with size-1 dims (whose strides the
        # channels-last rule sets)
        {"a": t([2, 1, 3, 1, 4], [["permute", [0, 4, 1, 2, 3]]]), "b": t([], [])},
        {"a": t([1, 2, 1, 3, 2], [["permute", [0, 4, 1, 2, 3]]]), "b": t([], [])},
    ]


def main():
    cases = fixed_cases() + [random_case() for _ in range(200)]
    cases += [random_case(ndim=5) for _ in range(30)]
    for case in cases:
        a, b = build(case["a"]), build(case["b"])
        case["shape"] = list(torch.broadcast_shapes(a.shape, b.shape))
        case["a_strides"] = list(a.stride())
        case["b_strides"] = list(b.stride())
        case["exp"] = list(a.exp().stride())
        case["add"] = list((a + b).stride())
        case["mul_ba"] = list((b * a).stride())
        case["gt"] = list((a > b).stride())
        case["where"] = list(torch.where(a > b, a, b).stride())
    with open(os.path.join(OUT, "elementwise_layouts.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=0)
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
