#!/usr/bin/env python3
"""PyTorch goldens for tapir's nn / optim layer (run by hand, not by CI).

    python3 scripts/gen_nn_goldens.py   # -> tests/goldens/nn.{json,safetensors}, trajectory.safetensors

Layers: state dict, input, output, and gradients of sum(out * w) for the
input and every parameter, in train and eval mode where they differ.
Losses: every reduction. Optimizers: 5 steps (8 for RAdam) with fixed gradients.
Schedulers: 25 steps of lr. Clipping. The seed MLP trajectory: 10 AdamW
steps with clipping and cosine annealing from PyTorch's initial weights.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")
torch.set_default_dtype(torch.float64)
T = {}
M = {"layers": [], "losses": [], "optim": [], "sched": [], "clip": []}


def put(key, t):
    T[key] = t.detach().to(torch.float64).contiguous().clone() if t.is_floating_point() else t.detach().contiguous().clone()


def weights_like(o):
    return torch.linspace(-1.0, 1.5, o.numel(), dtype=o.dtype).reshape(o.shape)


# ---- layers -------------------------------------------------------------------------
def layer(name, module, inputs, train=True, int_input=False, extra=None):
    torch.manual_seed(1)
    module = module.double()
    module.train(train)
    for k, v in module.state_dict().items():
        put(f"{name}.sd.{k}", v)
    xs = []
    for i, x in enumerate(inputs):
        x = x.clone()
        if x.is_floating_point():
            x = x.double().requires_grad_(True)
        put(f"{name}.in{i}", x)
        xs.append(x)
    out = module(*xs) if extra is None else extra(module, xs)
    if isinstance(out, tuple):
        out = out[0]
    put(f"{name}.out", out)
    (out * weights_like(out)).sum().backward()
    for i, x in enumerate(xs):
        if x.is_floating_point():
            put(f"{name}.grad_in{i}", x.grad)
    for k, p in module.named_parameters():
        put(f"{name}.grad.{k}", p.grad if p.grad is not None else torch.zeros_like(p))
    for k, b in module.named_buffers():
        put(f"{name}.after.{k}", b)
    M["layers"].append({"name": name, "train": train, "n_in": len(inputs),
                        "params": [k for k, _ in module.named_parameters()],
                        "buffers": [k for k, _ in module.named_buffers()]})


torch.manual_seed(0)
r = torch.randn
layer("linear", nn.Linear(5, 3), [r(4, 5)])
layer("linear_nobias_3d", nn.Linear(5, 3, bias=False), [r(2, 4, 5)])
layer("layernorm", nn.LayerNorm(6), [r(4, 6) * 3 + 1])
layer("layernorm_2d_shape", nn.LayerNorm([3, 4]), [r(2, 3, 4)])
layer("rmsnorm", nn.RMSNorm(6), [r(4, 6)])
layer("batchnorm1d_train", nn.BatchNorm1d(3), [r(8, 3) * 2 + 1])
layer("batchnorm1d_eval", nn.BatchNorm1d(3), [r(8, 3)], train=False)
layer("batchnorm2d_train", nn.BatchNorm2d(2), [r(3, 2, 4, 4)])
layer("embedding_pad", nn.Embedding(7, 3, padding_idx=2), [torch.tensor([[0, 2, 5], [2, 6, 1]])])
layer("conv2d", nn.Conv2d(2, 4, 3, stride=1, padding=1), [r(2, 2, 5, 5)])
layer("conv2d_groups", nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), [r(1, 4, 6, 6)])
layer("maxpool2d", nn.MaxPool2d(2), [r(2, 3, 6, 6)])
layer("avgpool2d", nn.AvgPool2d(2), [r(2, 3, 6, 6)])
layer("adaptiveavgpool2d", nn.AdaptiveAvgPool2d((2, 3)), [r(2, 3, 5, 7)])
layer("adaptiveavgpool2d_1", nn.AdaptiveAvgPool2d(1), [r(2, 3, 5, 5)])
layer("flatten", nn.Flatten(), [r(2, 3, 4)])
layer("relu", nn.ReLU(), [r(3, 4)])
layer("gelu", nn.GELU(), [r(3, 4)])
layer("gelu_tanh", nn.GELU(approximate="tanh"), [r(3, 4)])
layer("silu", nn.SiLU(), [r(3, 4)])
layer("tanh", nn.Tanh(), [r(3, 4)])
layer("sigmoid", nn.Sigmoid(), [r(3, 4)])
layer("softmax", nn.Softmax(dim=-1), [r(3, 4)])
layer("dropout_eval", nn.Dropout(0.5), [r(3, 4)], train=False)
layer("sequential", nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2)), [r(3, 4)])
x = r(2, 5, 8)
layer("mha_self", nn.MultiheadAttention(8, 2, batch_first=True), [x],
      extra=lambda m, xs: m(xs[0], xs[0], xs[0], need_weights=False))
layer("mha_causal_pad", nn.MultiheadAttention(8, 2, batch_first=True), [x],
      extra=lambda m, xs: m(xs[0], xs[0], xs[0],
                            key_padding_mask=torch.tensor([[False] * 5, [False, False, False, True, True]]),
                            attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1), need_weights=False))
layer("mha_seq_first", nn.MultiheadAttention(8, 4), [r(5, 2, 8), r(3, 2, 8)],
      extra=lambda m, xs: m(xs[0], xs[1], xs[1], need_weights=False))


# ---- losses -------------------------------------------------------------------------
def loss(name, fn, inputs, grad_idx=(0,)):
    xs = []
    for i, x in enumerate(inputs):
        x = x.clone()
        if i in grad_idx:
            x = x.double().requires_grad_(True)
        put(f"{name}.in{i}", x)
        xs.append(x)
    for red in ["none", "mean", "sum"]:
        for x in xs:
            if x.grad is not None:
                x.grad = None
        out = fn(*xs, red)
        put(f"{name}.{red}.out", out)
        (out * weights_like(out)).sum().backward() if out.dim() else out.backward()
        for i in grad_idx:
            put(f"{name}.{red}.grad{i}", xs[i].grad)
    M["losses"].append({"name": name, "n_in": len(inputs), "grad_idx": list(grad_idx)})


lg = r(6, 5)
tg = torch.tensor([0, 4, 2, -100, 1, 3])
loss("ce", lambda x, t, red: F.cross_entropy(x, t, reduction=red), [lg, tg])
loss("ce_smooth", lambda x, t, red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1), [lg, tg])
loss("ce_weight_smooth", lambda x, t, w, red: F.cross_entropy(x, t, weight=w, reduction=red, label_smoothing=0.2),
     [lg, tg, torch.rand(5) + 0.5])
loss("ce_ignore", lambda x, t, red: F.cross_entropy(x, t, reduction=red, ignore_index=2), [lg, torch.tensor([0, 4, 2, 2, 1, 3])])
loss("ce_probs", lambda x, t, red: F.cross_entropy(x, t, reduction=red), [lg, torch.softmax(r(6, 5), -1)])
loss("ce_probs_smooth", lambda x, t, red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1), [lg, torch.softmax(r(6, 5), -1)])
loss("ce_3d", lambda x, t, red: F.cross_entropy(x, t, reduction=red), [r(2, 4, 3), torch.randint(0, 4, (2, 3))])
loss("nll", lambda x, t, red: F.nll_loss(x, t, reduction=red), [torch.log_softmax(r(6, 5), -1), tg])
loss("mse", lambda x, t, red: F.mse_loss(x, t, reduction=red), [r(3, 4), r(3, 4)])
loss("l1", lambda x, t, red: F.l1_loss(x, t, reduction=red), [r(3, 4), r(3, 4)])
loss("smooth_l1", lambda x, t, red: F.smooth_l1_loss(x, t, reduction=red, beta=0.5), [r(3, 4), r(3, 4)])
loss("huber", lambda x, t, red: F.huber_loss(x, t, reduction=red, delta=0.7), [r(3, 4), r(3, 4)])
loss("bce_logits", lambda x, t, red: F.binary_cross_entropy_with_logits(x, t, reduction=red), [r(3, 4) * 10, torch.rand(3, 4)])
loss("bce_logits_posw", lambda x, t, p, red: F.binary_cross_entropy_with_logits(x, t, pos_weight=p, reduction=red),
     [r(3, 4) * 5, torch.rand(3, 4), torch.rand(4) + 0.5])

# ---- optimizers: 5 steps with fixed gradients ------------------------------------------------
p0 = [r(3, 4), r(4)]
grads = [[r(3, 4), r(4)] for _ in range(5)]
for k in range(5):
    for j in range(2):
        put(f"optim.grad{k}.{j}", grads[k][j])
for j in range(2):
    put(f"optim.p0.{j}", p0[j])


def opt_case(name, make, groups=False, steps=5, scalar_dtype=torch.float64, state=()):
    """`steps` steps, gradients cycling through the five. `scalar_dtype`: the
    default dtype while stepping, which is the dtype of an optimizer's scalar
    state (NAdam's mu_product): float32 is what a user with PyTorch's default
    gets. `state`: state buffers recorded after each step too."""
    ps = [p.clone().double().requires_grad_(True) for p in p0]
    opt = make(ps) if not groups else make(ps)
    torch.set_default_dtype(scalar_dtype)
    for k in range(steps):
        for j, p in enumerate(ps):
            p.grad = grads[k % 5][j].clone().double()
        opt.step()
        for j, p in enumerate(ps):
            put(f"optim.{name}.step{k}.{j}", p)
            for key in state:
                if key in opt.state[p]:
                    put(f"optim.{name}.step{k}.{j}.{key}", opt.state[p][key])
    torch.set_default_dtype(torch.float64)
    M["optim"].append({"name": name, "steps": steps, **({"state": list(state)} if state else {})})


O = torch.optim
opt_case("sgd", lambda ps: O.SGD(ps, lr=0.1))
opt_case("sgd_momentum_damp", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, dampening=0.2))
opt_case("sgd_nesterov_wd", lambda ps: O.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1))
opt_case("sgd_maximize", lambda ps: O.SGD(ps, lr=0.1, momentum=0.5, maximize=True))
opt_case("adam", lambda ps: O.Adam(ps, lr=0.01))
opt_case("adam_wd", lambda ps: O.Adam(ps, lr=0.01, weight_decay=0.1, betas=(0.8, 0.99)))
opt_case("adam_amsgrad", lambda ps: O.Adam(ps, lr=0.01, amsgrad=True))
opt_case("adam_maximize", lambda ps: O.Adam(ps, lr=0.01, maximize=True))
opt_case("adamw", lambda ps: O.AdamW(ps, lr=0.01))
opt_case("adamw_amsgrad", lambda ps: O.AdamW(ps, lr=0.02, weight_decay=0.05, amsgrad=True))
opt_case("adamw_groups", lambda ps: O.AdamW([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05, "weight_decay": 0.0}],
                                            lr=0.01, weight_decay=0.1))
opt_case("rmsprop", lambda ps: O.RMSprop(ps, lr=0.01))
opt_case("rmsprop_centered_mom_wd", lambda ps: O.RMSprop(ps, lr=0.01, centered=True, momentum=0.9, weight_decay=0.1))
opt_case("adagrad", lambda ps: O.Adagrad(ps, lr=0.1))
opt_case("adagrad_decay_wd_init_max", lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.3, weight_decay=0.1,
                                                            initial_accumulator_value=0.5, maximize=True))
opt_case("adadelta", lambda ps: O.Adadelta(ps))
opt_case("adadelta_wd_max", lambda ps: O.Adadelta(ps, lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True))
opt_case("adamax", lambda ps: O.Adamax(ps, lr=0.01))
opt_case("adamax_wd_max", lambda ps: O.Adamax(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, maximize=True))
F32 = torch.float32
opt_case("nadam", lambda ps: O.NAdam(ps, lr=0.01), scalar_dtype=F32)
opt_case("nadam_wd_max", lambda ps: O.NAdam(ps, lr=0.01, weight_decay=0.1, momentum_decay=0.01, maximize=True),
         scalar_dtype=F32)
opt_case("nadamw", lambda ps: O.NAdam(ps, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True), scalar_dtype=F32)
# RAdam rectifies from step 6 with these betas: 8 steps run both branches.
opt_case("radam", lambda ps: O.RAdam(ps, lr=0.01), steps=8)
opt_case("radam_wd_max", lambda ps: O.RAdam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, maximize=True), steps=8)
opt_case("radamw", lambda ps: O.RAdam(ps, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True), steps=8)
# Rprop's signs flip between the cycling gradients; its second case's
# bounds are reached. ASGD averages from step 3 with t0=2.
opt_case("rprop", lambda ps: O.Rprop(ps, lr=0.01), state=("prev", "step_size"))
opt_case("rprop_bounded_max", lambda ps: O.Rprop(ps, lr=0.05, etas=(0.3, 1.5), step_sizes=(0.02, 0.06), maximize=True),
         state=("prev", "step_size"))
opt_case("asgd", lambda ps: O.ASGD(ps, lr=0.01), scalar_dtype=F32, state=("ax",))
opt_case("asgd_averaged_wd_max", lambda ps: O.ASGD(ps, lr=0.05, lambd=1e-2, alpha=0.5, t0=2, weight_decay=0.1,
                                                 maximize=True), scalar_dtype=F32, state=("ax",))
# Adafactor: the matrix's variance factored (row_var, col_var), the
# vector's whole; steps 1 and 2 lerp from the new end (weight >= 0.5), later
# ones from the state. The second case clips the update (d) and floors
# the variance (eps1).
AF_STATE = ("row_var", "col_var", "variance")
opt_case("adafactor", lambda ps: O.Adafactor(ps), state=AF_STATE)
opt_case("adafactor_wd_max_eps_d", lambda ps: O.Adafactor(ps, lr=0.05, beta2_decay=-0.5, eps=(0.5, 1e-2), d=1.2,
                                                          weight_decay=0.1, maximize=True), state=AF_STATE)

# L-BFGS re-evaluates a closure: a small nonlinear least-squares problem
# (its data stored), `steps` calls of step(closure), each recording the
# loss it returned, the parameters and the evaluation and iteration counts.
M["lbfgs"] = []
put("lbfgs.x", torch.sin(torch.arange(24.0) * 0.7).reshape(8, 3))
put("lbfgs.y", torch.cos(torch.arange(16.0) * 0.3).reshape(8, 2) * 0.8)
put("lbfgs.w0", torch.linspace(-0.5, 0.5, 6).reshape(3, 2))
put("lbfgs.b0", torch.tensor([0.1, -0.2]))


def lbfgs_case(name, steps, **kw):
    w = T["lbfgs.w0"].clone().requires_grad_(True)
    b = T["lbfgs.b0"].clone().requires_grad_(True)
    opt = O.LBFGS([w, b], **kw)
    sign = -1.0 if kw.get("maximize") else 1.0

    def closure():
        opt.zero_grad()
        fit = ((torch.tanh(T["lbfgs.x"] @ w + b) - T["lbfgs.y"]) ** 2).mean()
        loss = sign * (fit + 0.01 * (w ** 4).sum())
        loss.backward()
        return loss

    for k in range(steps):
        loss = opt.step(closure)
        put(f"lbfgs.{name}.step{k}.loss", loss)
        put(f"lbfgs.{name}.step{k}.w", w)
        put(f"lbfgs.{name}.step{k}.b", b)
        st = opt.state[w]
        put(f"lbfgs.{name}.step{k}.counts", torch.tensor([float(st["func_evals"]), float(st["n_iter"])]))
    M["lbfgs"].append({"name": name, "steps": steps, "options": {k: v for k, v in kw.items()}})


lbfgs_case("default", 2)
lbfgs_case("short_history", 4, lr=0.5, max_iter=4, history_size=2)
lbfgs_case("strong_wolfe", 2, line_search_fn="strong_wolfe", max_iter=10)
lbfgs_case("wolfe_maximize", 3, line_search_fn="strong_wolfe", max_iter=6, history_size=3, maximize=True)
lbfgs_case("tolerance_grad", 2, tolerance_grad=1e-3, max_iter=50)
lbfgs_case("max_eval", 2, line_search_fn="strong_wolfe", max_iter=30, max_eval=9)
# A long first step makes the search zoom (11 interpolations inside a
# bracket); a short one makes it extrapolate (7 bounded interpolations).
lbfgs_case("wolfe_zoom", 2, line_search_fn="strong_wolfe", lr=30, max_iter=8, history_size=3)
lbfgs_case("wolfe_extrapolate", 2, line_search_fn="strong_wolfe", lr=0.01, max_iter=6)

# Muon orthogonalises the momentum of matrices by Newton-Schulz in bf16.
# A wide and a tall matrix (which is transposed for the iteration) from
# formulas (no draw, so the goldens after this are unchanged), 3 steps.
M["muon"] = []
muon_p0 = [torch.sin(torch.arange(12.0) * 1.3).reshape(3, 4), torch.cos(torch.arange(15.0) * 0.7).reshape(5, 3)]
muon_grads = [[torch.sin(torch.arange(12.0) * (0.9 + k) + j) for j in range(1)] +
              [torch.cos(torch.arange(15.0) * (0.4 + k) + 1.0)] for k in range(3)]
muon_grads = [[g[0].reshape(3, 4), g[1].reshape(5, 3)] for g in muon_grads]
for j in range(2):
    put(f"muon.p0.{j}", muon_p0[j])
    for k in range(3):
        put(f"muon.grad{k}.{j}", muon_grads[k][j])


def muon_case(name, **kw):
    ps = [p.clone().requires_grad_(True) for p in muon_p0]
    opt = O.Muon(ps, **kw)
    for k in range(3):
        for j, p in enumerate(ps):
            p.grad = muon_grads[k][j].clone()
        opt.step()
        for j, p in enumerate(ps):
            put(f"muon.{name}.step{k}.{j}", p)
            put(f"muon.{name}.step{k}.{j}.momentum_buffer", opt.state[p]["momentum_buffer"])
    M["muon"].append({"name": name, "options": kw})


muon_case("default", lr=0.02)
muon_case("plain_momentum_match_rms", lr=0.05, momentum=0.9, nesterov=False, weight_decay=0.0,
          adjust_lr_fn="match_rms_adamw", ns_steps=3)
muon_case("spectral_unclamped", lr=0.01, adjust_lr_fn="spectral_unclamped")

# Weight averaging (swa_utils.AveragedModel) of a Linear + BatchNorm1d over
# four snapshots whose parameters and buffers come from formulas; the
# averaged state dict after each update. Integer buffers (the batch count)
# take PyTorch's non-lerp forms when averaged.
M["swa"] = []
from torch.optim import swa_utils


def swa_net():
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()


def swa_snapshot(net, k):
    with torch.no_grad():
        for i, (name, t) in enumerate(net.state_dict().items()):
            if t.is_floating_point():
                v = torch.sin(torch.arange(t.numel(), dtype=torch.float64) * (0.7 + 0.3 * k) + i).reshape(t.shape)
                t.copy_(v.abs() if name.endswith("running_var") else v)
            else:
                t.fill_(3 * k + 1)
            put(f"swa.snap{k}.{name}", t)


def swa_case(name, use_buffers=False, **kw):
    net = swa_net()
    swa_snapshot(net, 0)
    avg = swa_utils.AveragedModel(net, use_buffers=use_buffers, **kw)
    for k in range(4):
        swa_snapshot(net, k)
        avg.update_parameters(net)
        for key, t in avg.module.state_dict().items():
            put(f"swa.{name}.step{k}.{key}", t)
    M["swa"].append({"name": name, "use_buffers": use_buffers, "ema": kw.get("ema")})


swa_case("swa")
swa_case("swa_buffers", use_buffers=True)
swa_case("ema", multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
swa_case("ema_buffers", use_buffers=True, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.75))
M["swa"][2]["ema"] = 0.9
M["swa"][3]["ema"] = 0.75

# Half-precision parameters through PyTorch's fused kernels (math in f32,
# parameter and state rounded when stored, as tapir's). Inputs are stored
# already rounded to the dtype so both sides start from the same values.
M["optim_half"] = []
for dname, dt in [("bf16", torch.bfloat16), ("f16", torch.float16)]:
    for j in range(2):
        put(f"optim_half.{dname}.p0.{j}", p0[j].to(dt))
        for k in range(5):
            put(f"optim_half.{dname}.grad{k}.{j}", grads[k][j].to(dt))
for name, make in [
    ("sgd", lambda ps: O.SGD(ps, lr=0.1, fused=True)),
    ("sgd_momentum_damp", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, dampening=0.2, fused=True)),
    ("sgd_nesterov_wd", lambda ps: O.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, fused=True)),
    ("sgd_maximize", lambda ps: O.SGD(ps, lr=0.1, momentum=0.5, maximize=True, fused=True)),
    ("adam", lambda ps: O.Adam(ps, lr=0.01, fused=True)),
    ("adam_wd", lambda ps: O.Adam(ps, lr=0.01, weight_decay=0.1, betas=(0.8, 0.99), fused=True)),
    ("adam_amsgrad", lambda ps: O.Adam(ps, lr=0.01, amsgrad=True, fused=True)),
    ("adam_maximize", lambda ps: O.Adam(ps, lr=0.01, maximize=True, fused=True)),
    ("adamw", lambda ps: O.AdamW(ps, lr=0.01, fused=True)),
    ("adamw_amsgrad", lambda ps: O.AdamW(ps, lr=0.02, weight_decay=0.05, amsgrad=True, fused=True)),
    ("adagrad", lambda ps: O.Adagrad(ps, lr=0.1, fused=True)),
    ("adagrad_decay_wd_init_max", lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.3, weight_decay=0.1,
                                                        initial_accumulator_value=0.5, maximize=True, fused=True)),
]:
    for dname, dt in [("bf16", torch.bfloat16), ("f16", torch.float16)]:
        ps = [p.to(dt).requires_grad_(True) for p in p0]
        opt = make(ps)
        for k in range(5):
            for j, p in enumerate(ps):
                p.grad = grads[k][j].to(dt)
            opt.step()
            for j, p in enumerate(ps):
                put(f"optim_half.{name}.{dname}.step{k}.{j}", p)
    M["optim_half"].append({"name": name})

# ---- schedulers: 25 steps -------------------------------------------------------------------
S = torch.optim.lr_scheduler


def sched_case(name, make, opt_kind="sgd", metrics=None):
    p = torch.zeros(1, requires_grad=True)
    opt = O.SGD([p], lr=0.1, momentum=0.9) if opt_kind == "sgd" else O.AdamW([p], lr=0.1)
    s = make(opt)
    lrs, moms = [], []
    for k in range(25):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"] if opt_kind == "sgd" else opt.param_groups[0]["betas"][0])
        opt.step()
        if metrics is not None:
            s.step(metrics[k])
        else:
            s.step()
    T[f"sched.{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)
    T[f"sched.{name}.momentum"] = torch.tensor(moms, dtype=torch.float64)
    M["sched"].append({"name": name, "opt": opt_kind})


sched_case("step", lambda o: S.StepLR(o, step_size=4, gamma=0.5))
sched_case("multistep", lambda o: S.MultiStepLR(o, milestones=[3, 10, 18], gamma=0.3))
sched_case("exponential", lambda o: S.ExponentialLR(o, gamma=0.9))
sched_case("cosine", lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001))
sched_case("linear", lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=8))
sched_case("onecycle_sgd", lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=25))
sched_case("onecycle_adamw", lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=30, pct_start=0.25), opt_kind="adamw")
sched_case("sequential", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.01, total_iters=5),
                                                       S.CosineAnnealingLR(o, T_max=20)], milestones=[5]))
sched_case("warm_restarts", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01))
# added later: appended so the cases above keep their values
sched_case("lambda", lambda o: S.LambdaLR(o, lambda e: min(1.0, (e + 1) / 6.0) * 0.97 ** e))
sched_case("multiplicative", lambda o: S.MultiplicativeLR(o, lambda e: 0.9 if e % 3 else 0.5))
sched_case("constant", lambda o: S.ConstantLR(o, factor=0.25, total_iters=7))
sched_case("polynomial", lambda o: S.PolynomialLR(o, total_iters=12, power=2.0))
sched_case("cyclic", lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4))
sched_case("cyclic_triangular2_adamw", lambda o: S.CyclicLR(o, base_lr=0.02, max_lr=0.2, step_size_up=3, step_size_down=5,
                                                            mode="triangular2", base_momentum=0.85, max_momentum=0.95),
           opt_kind="adamw")
sched_case("cyclic_exp_range", lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=4,
                                                    mode="exp_range", gamma=0.9, cycle_momentum=False))
sched_case("swalr_cos", lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=0.02, anneal_epochs=10))
sched_case("swalr_linear_at_once", lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=0,
                                                                         anneal_strategy="linear"))


class DecayThenSwa:
    """PyTorch's SWALR example: another scheduler for 8 epochs, then SWALR
    annealing from wherever that left the lr."""

    def __init__(self, o):
        self.decay = S.MultiplicativeLR(o, lambda e: 0.8)
        self.swa = torch.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=6, anneal_strategy="linear")
        self.k = 0

    def step(self):
        self.k += 1
        (self.decay if self.k <= 8 else self.swa).step()


sched_case("swalr_after_decay", DecayThenSwa)
plateau_metrics = [1.0, 0.9, 0.9, 0.9, 0.95, 0.91, 0.89, 0.89, 0.89, 0.89, 0.89, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5,
                   0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
T["sched.plateau.metrics"] = torch.tensor(plateau_metrics, dtype=torch.float64)
sched_case("plateau", lambda o: S.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1), metrics=plateau_metrics)

# ---- clipping -----------------------------------------------------------------------------
for name, fn in [("norm2", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 1.0)),
                 ("norm_inf", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.5, norm_type=float("inf"))),
                 ("norm1", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 2.0, norm_type=1.0)),
                 ("norm2_noop", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 100.0)),
                 ("value", lambda ps: torch.nn.utils.clip_grad_value_(ps, 0.3))]:
    ps = [p.clone().double().requires_grad_(True) for p in p0]
    for j, p in enumerate(ps):
        p.grad = grads[0][j].clone().double()
    total = fn(ps)
    T[f"clip.{name}.total"] = torch.tensor(float(total) if total is not None else 0.0, dtype=torch.float64)
    for j, p in enumerate(ps):
        put(f"clip.{name}.grad{j}", p.grad)
    M["clip"].append({"name": name})

# ---- layers added later (their own seed, so the cases above keep their inputs) ----------
torch.manual_seed(2)
r = torch.randn


def flat(*ts):
    """Every output of a multi-output layer as one vector (the replay does the same)."""
    return torch.cat([t.flatten() for t in ts])


def gru_all(m, xs):
    out, h = m(*xs)
    return flat(out, h)


def lstm_all(m, xs):
    out, (h, c) = m(xs[0], tuple(xs[1:]) if len(xs) > 1 else None)
    return flat(out, h, c)


layer("conv1d", nn.Conv1d(3, 4, 3, padding=1), [r(2, 3, 7)])
layer("conv1d_stride_groups", nn.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2, bias=False), [r(2, 4, 11)])
layer("conv1d_unbatched", nn.Conv1d(2, 3, 2), [r(2, 6)])
layer("gru", nn.GRU(3, 4), [r(5, 2, 3)], extra=gru_all)
layer("gru_2l_bi_batch_first", nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True),
      [r(2, 5, 3), r(4, 2, 4)], extra=gru_all)
layer("lstm", nn.LSTM(3, 4, batch_first=True), [r(2, 5, 3)], extra=lstm_all)
layer("lstm_2l_nobias_state", nn.LSTM(3, 4, num_layers=2, bias=False), [r(5, 2, 3), r(2, 2, 4), r(2, 2, 4)],
      extra=lstm_all)
layer("lstm_bi_unbatched", nn.LSTM(3, 4, bidirectional=True), [r(5, 3)], extra=lstm_all)
layer("transformer_post", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
      [r(2, 5, 8)])
layer("transformer_pre_gelu_masks",
      nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", norm_first=True),
      [r(5, 2, 8)],
      extra=lambda m, xs: m(xs[0], src_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
                            src_key_padding_mask=torch.tensor([[False] * 5, [False, False, False, False, True]])))

# ---- scaled_dot_product_attention (added later, its own seed) -------------------------
torch.manual_seed(3)
r = torch.randn
allowed = torch.rand(3, 6) > 0.4
allowed[:, 0] = True  # every query may attend somewhere
layer("sdpa_causal", nn.Identity(), [r(2, 2, 5, 4), r(2, 2, 5, 4), r(2, 2, 5, 4)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], is_causal=True))
layer("sdpa_bool_mask_scale", nn.Identity(), [r(2, 3, 4), r(2, 6, 4), r(2, 6, 5), allowed],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], attn_mask=xs[3], scale=0.3))
layer("sdpa_float_mask", nn.Identity(), [r(3, 4), r(6, 4), r(6, 4), r(3, 6)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], attn_mask=xs[3]))
# Sizes that cross tapir's 64-row attention tiles (its fused kernel), with
# L < S under the top-left causal mask and L > S without a mask.
torch.manual_seed(4)
layer("sdpa_tiles_causal", nn.Identity(), [r(1, 2, 70, 8), r(1, 2, 130, 8), r(1, 2, 130, 8)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], is_causal=True, scale=0.5))
layer("sdpa_tiles", nn.Identity(), [r(130, 6), r(70, 6), r(70, 3)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2]))

# ---- group / instance norm, fold and transposed convolution (added later, their own seed) ----
torch.manual_seed(5)
layer("groupnorm", nn.GroupNorm(2, 4), [r(3, 4, 5, 5) * 2 + 1])
layer("groupnorm_noaffine_3d", nn.GroupNorm(3, 6, eps=1e-3, affine=False), [r(2, 6, 7)])
layer("groupnorm_per_channel", nn.GroupNorm(4, 4), [r(2, 4, 3, 3)])
layer("instancenorm2d_affine", nn.InstanceNorm2d(3, affine=True), [r(2, 3, 4, 5) * 3 - 1])
layer("instancenorm1d_unbatched", nn.InstanceNorm1d(4), [r(4, 9)])
layer("fold", nn.Fold((5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), [r(2, 12, 15)])
layer("convtranspose2d", nn.ConvTranspose2d(3, 4, 3), [r(2, 3, 5, 4)])
layer("convtranspose2d_stride_pad_outpad", nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1,
                                                             output_padding=(1, 0)), [r(2, 4, 4, 5)])
layer("convtranspose2d_groups_dilation", nn.ConvTranspose2d(4, 6, 3, stride=(1, 2), padding=(0, 2), groups=2,
                                                           dilation=2, bias=False), [r(1, 4, 5, 6)])
# output_padding below the dilation but not the stride: a window no input pixel feeds.
layer("convtranspose2d_outpad_dilation", nn.ConvTranspose2d(2, 3, 2, stride=1, dilation=3, output_padding=2),
      [r(1, 2, 3, 3)])

# ---- the transformer decoder layer (added later, its own seed) --------------------------
torch.manual_seed(6)
layer("transformer_decoder_post", nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
      [r(2, 5, 8), r(2, 7, 8)], extra=lambda m, xs: m(xs[0], xs[1]))
layer("transformer_decoder_pre_gelu_masks",
      nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, dropout=0.0, activation="gelu", norm_first=True),
      [r(5, 2, 8), r(6, 2, 8)],
      extra=lambda m, xs: m(xs[0], xs[1], tgt_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
                            tgt_key_padding_mask=torch.tensor([[False] * 5, [False, False, False, False, True]]),
                            memory_key_padding_mask=torch.tensor([[False] * 6, [False, False, True, False, True, True]])))

# ---- the transformer stacks (added later, their own seed) --------------------------------
torch.manual_seed(7)
causal5 = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
pad5 = torch.tensor([[False] * 5, [False, False, False, True, True]])
layer("transformer_encoder_stack",
      nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2,
                            norm=nn.LayerNorm(8), enable_nested_tensor=False),
      [r(2, 5, 8)], extra=lambda m, xs: m(xs[0], mask=causal5, src_key_padding_mask=pad5))
layer("transformer_decoder_stack",
      nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, norm_first=True), 2),
      [r(5, 2, 8), r(6, 2, 8)],
      extra=lambda m, xs: m(xs[0], xs[1], tgt_mask=causal5, tgt_key_padding_mask=pad5))
layer("transformer_full",
      nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0,
                     batch_first=True),
      [r(2, 6, 8), r(2, 5, 8)],
      extra=lambda m, xs: m(xs[0], xs[1], tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
                            src_key_padding_mask=torch.tensor([[False] * 6, [False] * 4 + [True] * 2]),
                            memory_key_padding_mask=torch.tensor([[False] * 6, [False] * 4 + [True] * 2])))

# ---- margin, ranking, embedding and Poisson losses (added later, their own seed) --------------
torch.manual_seed(8)
signs = (torch.rand(4, 3) > 0.5).double() * 2 - 1
loss("soft_margin", lambda x, y, red: F.soft_margin_loss(x, y, reduction=red), [r(4, 3) * 2, signs])
loss("margin_ranking", lambda a, b, y, red: F.margin_ranking_loss(a, b, y, margin=0.3, reduction=red),
     [r(6), r(6), torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])])
loss("hinge_embedding", lambda x, y, red: F.hinge_embedding_loss(x, y, margin=1.2, reduction=red),
     [r(4, 3), signs])
loss("cosine_embedding", lambda a, b, y, red: F.cosine_embedding_loss(a, b, y, margin=0.2, reduction=red),
     [r(5, 4), r(5, 4), torch.tensor([1.0, -1.0, -1.0, 1.0, -1.0])])
loss("triplet_margin", lambda a, p, n, red: F.triplet_margin_loss(a, p, n, margin=1.5, reduction=red),
     [r(5, 4), r(5, 4), r(5, 4)])
loss("triplet_margin_p1_swap", lambda a, p, n, red: F.triplet_margin_loss(a, p, n, p=1.0, swap=True, reduction=red),
     [r(5, 4), r(5, 4), r(5, 4) * 0.5])
loss("poisson_nll", lambda x, y, red: F.poisson_nll_loss(x, y, reduction=red), [r(3, 4), torch.poisson(torch.rand(3, 4) * 4)])
loss("poisson_nll_rate_full", lambda x, y, red: F.poisson_nll_loss(x, y, log_input=False, full=True, reduction=red),
     [torch.rand(3, 4) * 3 + 0.1, torch.poisson(torch.rand(3, 4) * 4)])
# The variance's gradient too: it passes PyTorch's in-place clamp unchanged.
loss("gaussian_nll", lambda x, y, v, red: F.gaussian_nll_loss(x, y, v, reduction=red),
     [r(4, 3), r(4, 3), torch.rand(4, 3) + 0.1], grad_idx=(0, 2))
loss("gaussian_nll_row_var_full", lambda x, y, v, red: F.gaussian_nll_loss(x, y, v, full=True, eps=0.05, reduction=red),
     [r(4, 3), r(4, 3), torch.rand(4) * 0.1], grad_idx=(0, 2))

# ---- Bilinear (added later, its own seed) ------------------------------------------------
torch.manual_seed(9)
layer("bilinear", nn.Bilinear(3, 4, 5), [r(2, 6, 3), r(2, 6, 4)], extra=lambda m, xs: m(xs[0], xs[1]))
layer("bilinear_nobias", nn.Bilinear(2, 3, 4, bias=False), [r(5, 2), r(5, 3)], extra=lambda m, xs: m(xs[0], xs[1]))

# ---- BatchNorm / InstanceNorm keyword arguments, update_bn (added later, its own seed) ----
torch.manual_seed(10)
layer("batchnorm2d_cumulative", nn.BatchNorm2d(2, momentum=None), [r(3, 2, 4, 4), r(3, 2, 4, 4) * 2, r(3, 2, 4, 4) + 1],
      extra=lambda m, xs: m(xs[0]) + m(xs[1]) + m(xs[2]))
layer("batchnorm1d_untracked_eval", nn.BatchNorm1d(3, affine=False, track_running_stats=False), [r(6, 3, 4)],
      train=False)
layer("batchnorm3d_eps_momentum_nobias", nn.BatchNorm3d(2, eps=1e-3, momentum=0.3, bias=False), [r(2, 2, 3, 3, 3)])
# Train on one batch, then eval on another: the running statistics move, then normalise.
layer("instancenorm1d_running", nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
      [r(4, 3, 6) * 2 + 1, r(2, 3, 5)],
      extra=lambda m, xs: (lambda a: (m.eval(), m(xs[1]) + a.mean())[1])(m(xs[0])))
layer("instancenorm2d_running_momentum_none", nn.InstanceNorm2d(2, track_running_stats=True, momentum=None),
      [r(2, 2, 3, 3)])
layer("instancenorm1d_running_unbatched", nn.InstanceNorm1d(3, track_running_stats=True, momentum=0.5), [r(3, 7)])


def update_bn_case(m, xs):
    """One training batch, update_bn over three integer batches, one more training batch
    (momentum restored), then the eval output."""
    m(xs[0])
    torch.optim.swa_utils.update_bn([b.double() for b in xs[1]], m)
    m(xs[0])
    m.eval()
    return m(xs[0])


layer("update_bn", nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), [r(6, 3), torch.randint(-5, 6, (3, 4, 3))],
      extra=update_bn_case)

# ---- pooling options and the 1-D and adaptive max pools (added later, its own seed) -----
torch.manual_seed(11)
layer("maxpool2d_ceil_pad", nn.MaxPool2d(3, 2, 1, ceil_mode=True), [r(2, 3, 6, 7)])
layer("maxpool2d_ceil_dilation", nn.MaxPool2d((2, 3), stride=2, padding=(1, 0), dilation=(2, 1), ceil_mode=True),
      [r(1, 2, 7, 8)])
layer("maxpool2d_unbatched", nn.MaxPool2d(2), [r(3, 5, 4)])
layer("avgpool2d_ceil_exclude_pad", nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), [r(2, 2, 6, 7)])
layer("avgpool2d_ceil_include_pad", nn.AvgPool2d(3, 2, 1, ceil_mode=True), [r(2, 2, 6, 7)])
layer("avgpool2d_divisor", nn.AvgPool2d((2, 3), stride=(1, 2), padding=1, divisor_override=4), [r(1, 2, 5, 6)])
layer("maxpool1d_ceil_dilation", nn.MaxPool1d(3, stride=2, padding=1, dilation=2, ceil_mode=True), [r(2, 3, 11)])
layer("avgpool1d_unbatched_ceil", nn.AvgPool1d(4, 3, 2, ceil_mode=True, count_include_pad=False), [r(3, 10)])
layer("adaptiveavgpool1d", nn.AdaptiveAvgPool1d(4), [r(2, 3, 10)])
layer("adaptivemaxpool2d", nn.AdaptiveMaxPool2d((2, 3)), [r(2, 3, 5, 7)])
layer("adaptivemaxpool2d_even", nn.AdaptiveMaxPool2d(2), [r(1, 2, 4, 6)])
layer("adaptivemaxpool1d_unbatched", nn.AdaptiveMaxPool1d(3), [r(2, 7)])

# ---- padding modes, padding layers, convolutions' padding_mode (added later, its own seed) ----
torch.manual_seed(12)
layer("pad_reflect_2d", nn.ReflectionPad2d((1, 2, 2, 0)), [r(2, 3, 4, 5)])
layer("pad_replicate_1d", nn.ReplicationPad1d((3, 1)), [r(2, 3, 4)])
layer("pad_circular_2d", nn.CircularPad2d((1, 2, 0, 3)), [r(1, 2, 4, 5)])
layer("pad_zero_2d_unbatched", nn.ZeroPad2d((1, 0, 2, 1)), [r(2, 3, 3)])
layer("pad_constant_1d", nn.ConstantPad1d((2, 1), 3.5), [r(2, 4)])
layer("conv2d_reflect", nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), [r(2, 2, 5, 6)])
layer("conv2d_circular_stride", nn.Conv2d(2, 4, (3, 2), stride=2, padding=(2, 1), padding_mode="circular"),
      [r(1, 2, 6, 7)])
layer("conv1d_replicate", nn.Conv1d(3, 2, 3, padding=2, padding_mode="replicate"), [r(2, 3, 8)])

# ---- RNN and the cells (added later, its own seed) ----------------------------------------
torch.manual_seed(13)
layer("rnn_relu_2l_bi_batch_first", nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True,
                                           batch_first=True), [r(2, 5, 3)], extra=gru_all)
layer("rnn_tanh_h0", nn.RNN(3, 4), [r(5, 2, 3), r(1, 2, 4)], extra=gru_all)
# Two steps each, the second from the first's state.
layer("rnncell_relu", nn.RNNCell(3, 4, nonlinearity="relu"), [r(2, 3), r(2, 4)],
      extra=lambda m, xs: m(xs[0] * 0.5, m(xs[0], xs[1])))
layer("grucell", nn.GRUCell(3, 4), [r(3, 3)], extra=lambda m, xs: m(xs[0], m(xs[0])))
layer("lstmcell_nobias_unbatched", nn.LSTMCell(3, 4, bias=False), [r(3), r(4), r(4)],
      extra=lambda m, xs: flat(*m(xs[0] * 2, m(xs[0], (xs[1], xs[2])))))

# ---- PReLU and the softmax layers (added later, its own seed) ------------------------------
torch.manual_seed(14)
layer("prelu_channels", nn.PReLU(3, 0.1), [r(2, 3, 4)])
layer("prelu_single_1d", nn.PReLU(), [r(6)])
layer("logsoftmax", nn.LogSoftmax(dim=1), [r(3, 4, 2)])
layer("softmin", nn.Softmin(dim=-1), [r(3, 5)])
layer("softmax2d_unbatched", nn.Softmax2d(), [r(3, 2, 4)])

# ---- ConvTranspose1d (added later, its own seed) -------------------------------------------
torch.manual_seed(15)
layer("convtranspose1d_stride_pad_outpad_groups", nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                                                     groups=2, dilation=2, bias=False), [r(2, 4, 5)])
layer("convtranspose1d_unbatched", nn.ConvTranspose1d(3, 2, 2), [r(3, 4)])

torch.manual_seed(16)
ids = torch.tensor
layer("embeddingbag_sum_offsets_weighted", nn.EmbeddingBag(10, 3, mode="sum"),
      [ids([1, 2, 4, 5, 4, 3, 2, 9]), ids([0, 3, 3, 6]), r(8)])
layer("embeddingbag_mean_pad_last_offset", nn.EmbeddingBag(10, 3, padding_idx=2, include_last_offset=True),
      [ids([2, 2, 1, 4, 2, 7, 2]), ids([0, 2, 5, 7])])
layer("embeddingbag_max_2d_pad", nn.EmbeddingBag(10, 3, mode="max", padding_idx=0),
      [ids([[1, 0, 3], [0, 0, 0], [5, 5, 2]])])
layer("embeddingbag_max_offsets_maxnorm", nn.EmbeddingBag(8, 3, mode="max", max_norm=0.5, norm_type=1.0),
      [ids([7, 1, 1, 6, 0]), ids([0, 1, 4])])
layer("embedding_maxnorm", nn.Embedding(6, 4, max_norm=1.0), [ids([[0, 3, 3], [5, 1, 0]])])
layer("lppool2d_p2_stride", nn.LPPool2d(2, 3, stride=2), [r(2, 3, 7, 7)])
layer("lppool2d_ceil", nn.LPPool2d(1.5, (2, 3), stride=(2, 2), ceil_mode=True), [r(1, 2, 5, 7).abs() + 0.1])
layer("lppool1d_p3", nn.LPPool1d(3, 2), [r(2, 3, 8).abs() + 0.1])
layer("lppool1d_ceil_unbatched", nn.LPPool1d(2, 3, stride=2, ceil_mode=True), [r(3, 8)])

torch.manual_seed(17)
P = nn.utils.rnn


def packed_run(m, xs, lengths, enforce_sorted, batch_first=False, state=None):
    packed = P.pack_padded_sequence(xs[0], lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    out, hn = m(packed, state)
    padded, _ = P.pad_packed_sequence(out, batch_first=batch_first)
    return flat(padded, *(hn if isinstance(hn, tuple) else (hn,)))


layer("gru_packed_bi_2l_unsorted", nn.GRU(3, 4, num_layers=2, bidirectional=True), [r(5, 3, 3), r(4, 3, 4)],
      extra=lambda m, xs: packed_run(m, xs, [2, 5, 3], False, state=xs[1]))
layer("lstm_packed_batch_first_sorted", nn.LSTM(3, 4, batch_first=True), [r(3, 4, 3)],
      extra=lambda m, xs: packed_run(m, xs, [4, 2, 1], True, batch_first=True))


def rnn_pack_sequence(m, xs):
    out, hn = m(P.pack_sequence(xs, enforce_sorted=False))
    padded, _ = P.pad_packed_sequence(out, batch_first=True, padding_value=0.5)
    return flat(padded, hn)


layer("rnn_relu_pack_sequence", nn.RNN(2, 3, nonlinearity="relu"), [r(2, 2), r(4, 2), r(1, 2)],
      extra=rnn_pack_sequence)

# CTC through log_softmax: PyTorch's ctc backward is the gradient of the
# logits under a log_softmax (its grad w.r.t. log_probs alone is not the
# derivative), so the goldens differentiate the logits.
torch.manual_seed(18)
ids = torch.tensor
loss("ctc_padded", lambda x, t, il, tl, red: F.ctc_loss(x.log_softmax(2), t, il, tl, reduction=red),
     [r(6, 3, 5), ids([[1, 2, 2], [3, 1, 0], [4, 4, 4]]), ids([6, 4, 5]), ids([3, 2, 3])])
loss("ctc_concat_blank_last", lambda x, t, il, tl, red: F.ctc_loss(x.log_softmax(2), t, il, tl, blank=4, reduction=red),
     [r(6, 3, 5), ids([0, 1, 1, 2, 3, 0]), ids([5, 2, 6]), ids([3, 1, 2])])
loss("ctc_zero_infinity_empty", lambda x, t, il, tl, red: F.ctc_loss(x.log_softmax(2), t, il, tl, reduction=red,
                                                                    zero_infinity=True),
     [r(4, 3, 5), ids([[1, 2, 3, 4], [0, 0, 0, 0], [2, 2, 0, 0]]), ids([2, 3, 4]), ids([4, 0, 2])])

torch.manual_seed(19)
loss("multi_margin", lambda x, y, red: F.multi_margin_loss(x, y, reduction=red), [r(5, 4), torch.randint(0, 4, (5,))])
loss("multi_margin_p2_weight", lambda x, y, w, red: F.multi_margin_loss(x, y, p=2, margin=0.7, weight=w, reduction=red),
     [r(5, 4), torch.randint(0, 4, (5,)), torch.rand(4) + 0.5])
loss("multilabel_margin", lambda x, y, red: F.multilabel_margin_loss(x, y, reduction=red),
     [r(3, 5), ids([[3, 0, -1, 1, 2], [4, 4, 1, -1, 0], [-1, 2, 2, 2, 2]])])
loss("multilabel_soft_margin_weight", lambda x, y, w, red: F.multilabel_soft_margin_loss(x, y, weight=w, reduction=red),
     [r(3, 4), torch.bernoulli(torch.full((3, 4), 0.5)), torch.rand(4) + 0.5])

torch.manual_seed(20)


def unpooled(pool, size=None):
    return lambda m, xs: m(*pool(xs[0]), output_size=size)


layer("maxunpool2d_odd_width", nn.MaxUnpool2d(2), [r(2, 3, 4, 5)],
      extra=unpooled(nn.MaxPool2d(2, return_indices=True), (4, 5)))
layer("maxunpool2d_overlapping", nn.MaxUnpool2d(3, stride=1), [r(1, 2, 5, 5)],
      extra=unpooled(nn.MaxPool2d(3, stride=1, return_indices=True)))
layer("maxunpool1d_ceil", nn.MaxUnpool1d(3, stride=2), [r(2, 3, 8)],
      extra=unpooled(nn.MaxPool1d(3, stride=2, ceil_mode=True, return_indices=True), [8]))
layer("maxpool2d_ceil_indices", nn.MaxPool2d(2, ceil_mode=True, return_indices=True), [r(1, 2, 5, 5)],
      extra=lambda m, xs: flat(*m(xs[0])))

# Chained schedulers: each built in order on the optimizer, then chained.
sched_case("chained_linear_exponential",
           lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=0.1, total_iters=5), S.ExponentialLR(o, gamma=0.9)]))
sched_case("chained_constant_cosine_step",
           lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=4),
                                         S.CosineAnnealingLR(o, T_max=6, eta_min=0.01), S.StepLR(o, 3, 0.7)]))
sched_case("chained_poly_multistep_mult",
           lambda o: S.ChainedScheduler([S.PolynomialLR(o, total_iters=10, power=1.5),
                                         S.MultiStepLR(o, milestones=[4, 4, 9], gamma=0.5),
                                         S.MultiplicativeLR(o, lambda e: 0.95)]), opt_kind="adamw")

torch.manual_seed(21)
layer("sdpa_gqa_causal", nn.Identity(), [r(2, 6, 5, 4), r(2, 2, 5, 4), r(2, 2, 5, 3)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], is_causal=True, enable_gqa=True))
layer("sdpa_gqa_mask_unbatched", nn.Identity(), [r(4, 3, 4), r(1, 6, 4), r(1, 6, 4), r(3, 6)],
      extra=lambda m, xs: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], attn_mask=xs[3], enable_gqa=True))

torch.manual_seed(22)
layer("unfold_module_unbatched", nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [r(3, 5, 6)])
layer("fold_module", nn.Fold((5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), [r(2, 12, 15)])

torch.manual_seed(23)


def sampled(mode, pad, align):
    return lambda m, xs: F.grid_sample(xs[0], xs[1], mode=mode, padding_mode=pad, align_corners=align)


def points(*shape, reach=1.2):
    return torch.rand(*shape) * 2 * reach - reach


layer("grid_sample_bilinear_zeros", nn.Identity(), [r(2, 3, 4, 5), points(2, 3, 4, 2)],
      extra=sampled("bilinear", "zeros", False))
layer("grid_sample_bilinear_border_align", nn.Identity(), [r(2, 3, 4, 5), points(2, 3, 4, 2)],
      extra=sampled("bilinear", "border", True))
layer("grid_sample_bilinear_reflection", nn.Identity(), [r(1, 2, 5, 4), points(1, 4, 6, 2, reach=2.6)],
      extra=sampled("bilinear", "reflection", False))
layer("grid_sample_nearest_reflection_align", nn.Identity(), [r(1, 2, 5, 4), points(1, 4, 6, 2, reach=2.6)],
      extra=sampled("nearest", "reflection", True))
layer("affine_grid_then_sample", nn.Identity(), [r(2, 3, 4, 5), r(2, 2, 3) * 0.3 + torch.tensor([[1.0, 0, 0], [0, 1, 0]])],
      extra=lambda m, xs: F.grid_sample(xs[0], F.affine_grid(xs[1], [2, 3, 5, 4], align_corners=False),
                                        align_corners=False))
layer("affine_grid_align_width1", nn.Identity(), [r(2, 2, 3)],
      extra=lambda m, xs: F.affine_grid(xs[0], [2, 1, 3, 1], align_corners=True))

torch.manual_seed(24)
layer("lstm_proj_2l_bi", nn.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True),
      [r(4, 2, 3), r(4, 2, 2), r(4, 2, 5)], extra=lambda m, xs: flat(m(xs[0], (xs[1], xs[2]))[0], *m(xs[0], (xs[1], xs[2]))[1]))
layer("lstm_proj_packed_batch_first", nn.LSTM(3, 4, proj_size=3, batch_first=True), [r(3, 5, 3)],
      extra=lambda m, xs: packed_run(m, xs, [5, 2, 4], False, batch_first=True))

torch.manual_seed(25)
layer("embedding_scale_grad_by_freq_pad", nn.Embedding(6, 3, padding_idx=1, scale_grad_by_freq=True),
      [ids([[0, 2, 2, 1], [5, 2, 0, 1]])])
layer("embeddingbag_sum_scale_grad_by_freq_2d", nn.EmbeddingBag(7, 3, mode="sum", scale_grad_by_freq=True),
      [ids([[1, 1, 4], [4, 1, 0]])])
layer("embeddingbag_mean_scale_grad_by_freq_offsets", nn.EmbeddingBag(7, 3, scale_grad_by_freq=True),
      [ids([3, 3, 1, 6, 3, 0]), ids([0, 2, 5])])

torch.manual_seed(26)
layer("local_response_norm_size3", nn.LocalResponseNorm(3), [r(2, 5, 3, 4) * 3])
layer("local_response_norm_size4_3d", nn.LocalResponseNorm(4, alpha=1e-2, beta=0.5, k=2.0), [r(2, 6, 5)])
layer("channel_shuffle", nn.ChannelShuffle(3), [r(2, 6, 2, 2)])

torch.manual_seed(27)
layer("rrelu_eval", nn.RReLU(0.1, 0.3), [r(3, 4)], train=False)

# ---- 3-D convolutions and pooling (added later, its own seed) ----------------------------
torch.manual_seed(28)
layer("conv3d_pad", nn.Conv3d(2, 4, 3, padding=1), [r(2, 2, 4, 5, 3)])
layer("conv3d_stride_dil_groups", nn.Conv3d(4, 6, (3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1),
                                            dilation=(2, 1, 1), groups=2, bias=False), [r(1, 4, 7, 5, 6)])
layer("conv3d_unbatched_reflect", nn.Conv3d(2, 3, 2, padding=1, padding_mode="reflect"), [r(2, 3, 4, 3)])
layer("conv3d_circular", nn.Conv3d(1, 2, (2, 3, 3), padding=(1, 2, 1), padding_mode="circular"),
      [r(2, 1, 3, 4, 4)])
layer("convtranspose3d", nn.ConvTranspose3d(3, 4, 3), [r(2, 3, 3, 4, 2)])
layer("convtranspose3d_stride_pad_outpad_groups",
      nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 2, 1), padding=(1, 0, 1), output_padding=(1, 1, 0),
                         groups=2, dilation=(1, 1, 2)), [r(1, 4, 3, 3, 4)])
# output_padding past the stride but under the dilation: positions no tap reaches.
layer("convtranspose3d_outpad_dilation_unbatched",
      nn.ConvTranspose3d(2, 2, 2, padding=1, dilation=3, output_padding=2, bias=False), [r(2, 3, 2, 2)])
layer("maxpool3d", nn.MaxPool3d(2), [r(2, 3, 4, 4, 6)])
layer("maxpool3d_stride_pad_dil_ceil", nn.MaxPool3d((3, 2, 3), stride=(2, 1, 2), padding=(1, 1, 0),
                                                    dilation=(1, 2, 1), ceil_mode=True), [r(1, 2, 6, 5, 7)])
# Rounded values: ties, whose gradient goes to the first in PyTorch's scan order.
layer("maxpool3d_unbatched_ties", nn.MaxPool3d(2, stride=1), [torch.round(r(2, 3, 3, 3))])
layer("avgpool3d_pad_ceil", nn.AvgPool3d((2, 3, 2), stride=(2, 2, 1), padding=(1, 1, 1), ceil_mode=True),
      [r(2, 2, 5, 6, 4)])
layer("avgpool3d_exclude_pad", nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False), [r(1, 2, 5, 5, 5)])
layer("avgpool3d_divisor_unbatched", nn.AvgPool3d(2, divisor_override=3), [r(2, 4, 4, 5)])
layer("adaptiveavgpool3d", nn.AdaptiveAvgPool3d((2, 3, 2)), [r(2, 2, 5, 7, 4)])
layer("adaptiveavgpool3d_1", nn.AdaptiveAvgPool3d(1), [r(2, 3, 3, 4, 5)])
layer("adaptivemaxpool3d_unbatched", nn.AdaptiveMaxPool3d((3, 2, 2)), [r(2, 5, 3, 5)])

# ---- 3-D padding and instance norm (added later, its own seed) ---------------------------
torch.manual_seed(29)
layer("pad_reflect_3d", nn.ReflectionPad3d((1, 2, 0, 1, 2, 1)), [r(1, 2, 3, 3, 4)])
layer("pad_replicate_3d_unbatched", nn.ReplicationPad3d((2, 0, 1, 1, 0, 3)), [r(2, 3, 2, 3)])
layer("pad_circular_3d", nn.CircularPad3d((1, 1, 2, 0, 1, 2)), [r(1, 1, 3, 2, 3)])
layer("pad_zero_3d", nn.ZeroPad3d((1, 0, 0, 2, 1, 1)), [r(2, 1, 2, 2, 2)])
layer("pad_constant_3d", nn.ConstantPad3d((0, 1, 1, 0, 2, 0), 1.5), [r(1, 2, 2, 3, 2)])
layer("instancenorm3d_affine", nn.InstanceNorm3d(3, affine=True), [r(2, 3, 3, 4, 2)])

# ---- weight and spectral norm parametrizations (added later, its own seed) ---------------
from torch.nn.utils.parametrizations import weight_norm, spectral_norm
torch.manual_seed(30)
layer("weight_norm_linear", weight_norm(nn.Linear(4, 3)), [r(5, 4)])
layer("weight_norm_conv2d_dim1", weight_norm(nn.Conv2d(2, 3, 2), dim=1), [r(2, 2, 4, 4)])
layer("weight_norm_whole", weight_norm(nn.Linear(3, 2, bias=False), dim=None), [r(4, 3)])
# Training: two power iterations move u and v (checked after), then the weight is divided.
layer("spectral_norm_linear_train", spectral_norm(nn.Linear(4, 5), n_power_iterations=2), [r(3, 4)])
layer("spectral_norm_conv2d_eval", spectral_norm(nn.Conv2d(2, 3, 3)), [r(1, 2, 5, 5)], train=False)
# Rows along dim 1 for a transposed convolution.
layer("spectral_norm_convtranspose2d", spectral_norm(nn.ConvTranspose2d(3, 2, 2)), [r(1, 3, 3, 3)])

# ---- 3-D max pooling indices and unpooling (added later, its own seed) ---------------------
torch.manual_seed(32)
# Overlapping windows (stride 1): an element picked twice is written once.
layer("maxunpool3d_overlapping", nn.MaxUnpool3d(2, stride=1), [r(1, 2, 3, 4, 3)],
      extra=unpooled(nn.MaxPool3d(2, stride=1, return_indices=True)))
layer("maxpool3d_indices_ceil_dilation_unbatched",
      nn.MaxPool3d((2, 3, 2), stride=2, padding=(1, 1, 0), dilation=(1, 1, 2), ceil_mode=True, return_indices=True),
      [r(2, 5, 5, 6)], extra=lambda m, xs: flat(*m(xs[0])))

# ---- LPPool3d (added later, its own seed) ------------------------------------------------
torch.manual_seed(33)
layer("lppool3d_ceil_stride", nn.LPPool3d(2, (2, 3, 2), stride=(1, 2, 2), ceil_mode=True), [r(2, 2, 4, 5, 5)])
layer("lppool3d_p3_unbatched", nn.LPPool3d(3, 2), [r(2, 4, 4, 6).abs() + 0.1])

# ---- the triplet loss with a distance function (added later, its own seed) -----------------
torch.manual_seed(31)
loss("triplet_distance_default", lambda a, p, n, red: F.triplet_margin_with_distance_loss(a, p, n, reduction=red),
     [r(5, 4), r(5, 4), r(5, 4)])
loss("triplet_distance_cosine_swap",
     lambda a, p, n, red: F.triplet_margin_with_distance_loss(
         a, p, n, distance_function=lambda x, y: 1.0 - F.cosine_similarity(x, y), margin=0.5, swap=True,
         reduction=red),
     [r(5, 4), r(5, 4), r(5, 4)], grad_idx=(0, 1, 2))

os.makedirs(OUT, exist_ok=True)
save_file(T, os.path.join(OUT, "nn.safetensors"))
with open(os.path.join(OUT, "nn.json"), "w") as f:
    json.dump({"torch": torch.__version__, **M}, f, indent=0)
print({k: len(v) for k, v in M.items()}, file=sys.stderr)

# ---- the seed MLP trajectory (float32) ---------------------------------------------------------
torch.set_default_dtype(torch.float32)


from seed_models import Mlp as MLP  # noqa: E402 (the seed, shared with gen_module_goldens.py)

torch.manual_seed(0)
model = MLP()
tr = {f"init.{k}": v.clone() for k, v in model.state_dict().items()}
# Batches from a formula the Rust test computes the same way (no need to ship them).
n = torch.arange(10 * 64 * 784, dtype=torch.float64)
xs = torch.sin(n * 0.37 + 0.5).reshape(10, 64, 784).float()
ys = ((torch.arange(10 * 64) * 7 + 3) % 10).reshape(10, 64)
opt = O.AdamW(model.parameters(), lr=3e-4, weight_decay=1e-2)
sched = S.CosineAnnealingLR(opt, T_max=10)
losses, norms = [], []
for k in range(10):
    opt.zero_grad()
    l = F.cross_entropy(model(xs[k]), ys[k])
    l.backward()
    norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
    opt.step()
    sched.step()
    losses.append(float(l.detach()))
tr["losses"] = torch.tensor(losses, dtype=torch.float64)
tr["grad_norms"] = torch.tensor(norms, dtype=torch.float64)
tr["final.head.weight"] = model.head.weight.detach().clone()
save_file(tr, os.path.join(OUT, "trajectory.safetensors"))
print("trajectory losses", [round(x, 5) for x in losses], file=sys.stderr)
