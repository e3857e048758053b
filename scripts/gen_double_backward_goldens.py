"""Second derivatives in PyTorch (float64): a WGAN-GP gradient penalty, a
Hessian-vector product and a physics-informed residual (u'' through two
nested `create_graph` grads), for `tests/suite/double_backward.rs`.

    python3 scripts/gen_double_backward_goldens.py   # -> tests/goldens/double_backward.json
"""
import json
import math
import os

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "goldens")
torch.set_default_dtype(torch.float64)


def fill(shape, seed, scale):
    """Deterministic values the Rust side rebuilds from the JSON."""
    n = math.prod(shape)
    return torch.tensor([math.sin(0.37 * i + seed) * scale for i in range(n)]).reshape(shape)


def as_json(tensors):
    return {k: {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()} for k, t in tensors.items()}


def mlp_params(sizes, seed):
    params = {}
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        params[f"w{i}"] = fill((b, a), seed + 2 * i, 1.0 / math.sqrt(a)).requires_grad_()
        params[f"b{i}"] = fill((b,), seed + 2 * i + 1, 0.1).requires_grad_()
    return params


def gradient_penalty():
    p = mlp_params([4, 8, 8, 1], 1)
    x = fill((5, 4), 11, 1.5).requires_grad_()

    def critic(x):
        h = torch.tanh(F.linear(x, p["w0"], p["b0"]))
        h = F.leaky_relu(F.linear(h, p["w1"], p["b1"]), 0.2)
        return F.linear(h, p["w2"], p["b2"])

    d = critic(x)
    (gx,) = torch.autograd.grad(d, x, torch.ones_like(d), create_graph=True)
    penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean()
    grads = torch.autograd.grad(penalty, list(p.values()), materialize_grads=True)
    inputs = {"x": x, **p}
    outputs = {"penalty": penalty, "grad_x": gx, **{"d_" + k: g for k, g in zip(p, grads)}}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


def hessian_vector_product():
    p = mlp_params([6, 10, 3], 3)
    x = fill((4, 6), 21, 1.0)
    target = torch.tensor([0, 2, 1, 2])
    v = {k: fill(t.shape, 31 + i, 1.0) for i, (k, t) in enumerate(p.items())}
    h = F.gelu(F.linear(x, p["w0"], p["b0"]))
    loss = F.cross_entropy(F.linear(h, p["w1"], p["b1"]), target)
    grads = torch.autograd.grad(loss, list(p.values()), create_graph=True)
    gv = sum((g * v[k]).sum() for k, g in zip(p, grads))
    hv = torch.autograd.grad(gv, list(p.values()), materialize_grads=True)
    inputs = {"x": x, **p, **{"v_" + k: t for k, t in v.items()}}
    outputs = {"loss": loss, **{"hv_" + k: t for k, t in zip(p, hv)}}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


def physics_informed():
    p = mlp_params([1, 16, 16, 1], 5)
    x = torch.linspace(-1, 1, 9).reshape(9, 1).requires_grad_()

    def u(x):
        h = torch.tanh(F.linear(x, p["w0"], p["b0"]))
        h = torch.tanh(F.linear(h, p["w1"], p["b1"]))
        return F.linear(h, p["w2"], p["b2"])

    y = u(x)
    (ux,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (uxx,) = torch.autograd.grad(ux.sum(), x, create_graph=True)
    residual = ((uxx + torch.sin(x)) ** 2).mean()
    grads = torch.autograd.grad(residual, list(p.values()), materialize_grads=True)
    inputs = {"x": x, **p}
    outputs = {"residual": residual, "ux": ux, "uxx": uxx, **{"d_" + k: g for k, g in zip(p, grads)}}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


def functional_point():
    """The point, tangents and cotangent of the functional cases, and their
    f(x, w) = tanh(x @ w) and scalar g(x, w) = sum(tanh(x @ w)²)."""
    x, w = fill((2, 4), 41, 1.0), fill((4, 3), 42, 0.7)
    tx, tw = fill((2, 4), 43, 1.0), fill((4, 3), 44, 1.0)
    u = fill((2, 3), 45, 1.0)

    def f(x, w):
        return torch.tanh(x @ w)

    def g(x, w):
        return (torch.tanh(x @ w) ** 2).sum()

    return (x, w, tx, tw, u), f, g


def functional():
    """torch.autograd.functional on f(x, w) = tanh(x @ w) and the scalar
    g(x, w) = sum(tanh(x @ w)²)."""
    from torch.autograd import functional as AF

    (x, w, tx, tw, u), f, g = functional_point()
    jx, jw = AF.jacobian(f, (x, w))
    (hxx, hxw), (hwx, hww) = AF.hessian(g, (x, w))
    _, (vx, vw) = AF.vjp(f, (x, w), u)
    _, jv = AF.jvp(f, (x, w), (tx, tw))
    _, (hvx, hvw) = AF.hvp(g, (x, w), (tx, tw))
    inputs = {"x": x, "w": w, "tx": tx, "tw": tw, "u": u}
    outputs = {"jx": jx, "jw": jw, "hxx": hxx, "hxw": hxw, "hwx": hwx, "hww": hww,
               "vjp_x": vx, "vjp_w": vw, "jvp": jv, "hvp_x": hvx, "hvp_w": hvw}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


def functional_create_graph():
    """torch.autograd.functional with create_graph=True on the same f and g:
    each result (and vjp's output) squared and summed, then differentiated
    with respect to x and w (for the Hessian, a third derivative)."""
    from torch.autograd import functional as AF

    (x, w, tx, tw, u), f, g = functional_point()
    x, w = x.requires_grad_(), w.requires_grad_()

    def sq(ts):
        return sum((t ** 2).sum() for t in ts)

    losses = {
        "jacobian": sq(AF.jacobian(f, (x, w), create_graph=True)),
        "hessian": sq([h for row in AF.hessian(g, (x, w), create_graph=True) for h in row]),
        "vjp": sq([AF.vjp(f, (x, w), u, create_graph=True)[0], *AF.vjp(f, (x, w), u, create_graph=True)[1]]),
        "jvp": sq([AF.jvp(f, (x, w), (tx, tw), create_graph=True)[1]]),
        "hvp": sq(AF.hvp(g, (x, w), (tx, tw), create_graph=True)[1]),
        "vhp": sq(AF.vhp(g, (x, w), (tx, tw), create_graph=True)[1]),
    }
    outputs = {}
    for name, loss in losses.items():
        dx, dw = torch.autograd.grad(loss, (x, w))
        outputs.update({name: loss, name + "_dx": dx, name + "_dw": dw})
    inputs = {"x": x, "w": w, "tx": tx, "tw": tw, "u": u}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


def maml_step():
    """One MAML meta-gradient: an inner SGD step with create_graph on a
    conv / batch norm / relu / max pool / linear classifier, then the
    query loss differentiated with respect to the initial parameters."""
    p = {
        "conv_w": fill((4, 1, 3, 3), 51, 1 / 3), "conv_b": fill((4,), 52, 0.1),
        "bn_w": 1 + fill((4,), 53, 0.2), "bn_b": fill((4,), 54, 0.1),
        "fc_w": fill((3, 16), 55, 0.25), "fc_b": fill((3,), 56, 0.1),
    }
    for t in p.values():
        t.requires_grad_()
    xs, xq = fill((6, 1, 4, 4), 57, 1.0), fill((6, 1, 4, 4), 58, 1.0)
    ys, yq = torch.tensor([0, 1, 2, 0, 1, 2]), torch.tensor([2, 1, 0, 0, 2, 1])

    def model(x, q):
        h = F.conv2d(x, q["conv_w"], q["conv_b"], padding=1)
        h = F.batch_norm(h, None, None, q["bn_w"], q["bn_b"], training=True, momentum=0.1, eps=1e-5)
        h = F.max_pool2d(F.relu(h), 2)
        return F.linear(h.reshape(x.shape[0], -1), q["fc_w"], q["fc_b"])

    loss_s = F.cross_entropy(model(xs, p), ys)
    grads = torch.autograd.grad(loss_s, list(p.values()), create_graph=True)
    fast = {k: t - 0.4 * g for (k, t), g in zip(p.items(), grads)}
    loss_q = F.cross_entropy(model(xq, fast), yq)
    meta = torch.autograd.grad(loss_q, list(p.values()))
    inputs = {"xs": xs, "xq": xq, **p}
    outputs = {"loss_s": loss_s, "loss_q": loss_q, **{"meta_" + k: g for k, g in zip(p, meta)}}
    return {"inputs": as_json(inputs), "outputs": as_json(outputs)}


cases = {
    "functional": functional(),
    "functional_create_graph": functional_create_graph(),
    "maml_step": maml_step(),
    "gradient_penalty": gradient_penalty(),
    "hessian_vector_product": hessian_vector_product(),
    "physics_informed": physics_informed(),
}
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "double_backward.json"), "w") as f:
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in cases.items()]
    f.write('{"torch": %s, "cases": {\n%s\n}}\n' % (json.dumps(torch.__version__), ",\n".join(lines)))
