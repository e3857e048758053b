"""Prints PyTorch's values for the inputs of tests/suite/edge_values.rs.

Run by hand (PyTorch 2.15 on the CPU gave the literals in that file):
    python scripts/edge_values_torch.py
"""

import math

import torch
import torch.nn.functional as F

inf, nan = math.inf, math.nan
f32max = torch.finfo(torch.float32).max


def show(name, t):
    print(f"{name}: {t.tolist()}")


def grad_of(f, values, dtype=torch.float32):
    x = torch.tensor(values, dtype=dtype, requires_grad=True)
    f(x).sum().backward()
    return x.grad


show("asinh", torch.asinh(torch.tensor([f32max, -f32max, 1e30])))
show("acosh", torch.acosh(torch.tensor([f32max])))
show("round", torch.round(torch.tensor([-0.4, -0.5, -1e-7, 0.4, -2.5])))
show("logsigmoid", F.logsigmoid(torch.tensor([1e4, inf, -100.0])))
start, end = torch.tensor([0.0, 1e20, -1.0, 7.0]), torch.tensor([-0.0, 1.0, 2.5, -3.0])
show("lerp(w = 1)", torch.lerp(start, end, 1.0))
show("lerp(w = 0.25)", torch.lerp(start, end, 0.25))
a = torch.tensor([3.0, 1e20, 1e-40, 1e30], requires_grad=True)
b = torch.tensor([4.0, 0.0, 1e-40, -1e30], requires_grad=True)
h = torch.hypot(a, b)
h.sum().backward()
show("hypot", h)
show("d hypot / da", a.grad)
show("d hypot / db", b.grad)
show("logaddexp", torch.logaddexp(torch.tensor([inf, -inf, inf, 1.0, nan]), torch.tensor([inf, -inf, -inf, inf, 1.0])))
show("logcumsumexp", torch.logcumsumexp(torch.tensor([inf, inf, 0.0, -inf]), 0))
huge = torch.tensor([[1e30, 1e30, -1e30, 5.0]])
show("log_softmax", huge.log_softmax(1))
show("log_softmax near 1e4", torch.tensor([10000.0, 10000.25, 9999.5, 10001.0]).log_softmax(0))
show("bf16 log_softmax", huge.bfloat16().log_softmax(1).float())
rows = torch.tensor([[inf, 1.0, 2.0, 3.0], [-inf] * 4])
show("softmax with inf", rows.softmax(1))
show("logsumexp with inf", rows.logsumexp(1))
x = torch.tensor([[nan, 1.0, nan, 3.0], [1.0, 2.0, 3.0, nan], [4.0, 1.0, 2.0, 3.0]], requires_grad=True)
values, indices = x.median(1)
values.sum().backward()
show("median", values)
show("median indices", indices)
show("median grad", x.grad)
show("nanmedian", x.detach().nanmedian(1).values)
show("sinc'", grad_of(torch.sinc, [1e-30, -1e-30, 1e-20, 0.5, 0.0, 2.0]))
show("sinc'(1e-3) f64", grad_of(torch.sinc, [1e-3], torch.float64))
show("logit'", grad_of(torch.logit, [0.0, 1.0, -0.5, 0.25, 1.5]))
show("logit' eps 0.1", grad_of(lambda t: torch.logit(t, 0.1), [0.05, 0.1, 0.5, 0.9, 0.95]))
i = torch.tensor([7, -7, 3])
show("clamp(-1.5, 5.5)", torch.clamp(i, -1.5, 5.5))
show("clamp(min=-1.5)", torch.clamp(i, min=-1.5))
show("clamp(-1, 5)", torch.clamp(i, -1, 5))
show("square", torch.square(i))
i, j = torch.tensor([7, -7, 3, -8]), torch.tensor([2, 2, -2, 3])
show("remainder", torch.remainder(i, j))
show("fmod", torch.fmod(i, j))
show("remainder by 2.5", torch.remainder(i, 2.5))
show("logsumexp of [2, 0]", torch.zeros(2, 0).logsumexp(1))
