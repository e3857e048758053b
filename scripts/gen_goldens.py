#!/usr/bin/env python3
"""Writes PyTorch goldens for tapir's core ops (run by hand, not by CI).

    python3 scripts/gen_goldens.py            # -> tests/goldens/core.{json,safetensors}

Each case: inputs (stored contiguous, with a view recipe the Rust test applies
the same way: transposed, strided slice, expanded), the op's outputs, and the
gradient of sum(out_k * w_k) for fixed weights w_k with respect to every
float input. Everything is float64 so the Rust test can check both f64 and f32.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")


def view(base, recipe):
    if recipe is None:
        return base
    if recipe == "t":
        return base.transpose(-1, -2)
    if recipe == "step2":
        return base[::2]
    if recipe == "expand0":
        shape = list(base.shape)
        shape[0] = 3
        return base.expand(*shape)
    raise ValueError(recipe)


def run(op, a, x):
    """The op table; tests/suite/goldens.rs mirrors it name for name."""
    u = {
        "neg": torch.neg, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt, "abs": torch.abs, "sign": torch.sign, "sin": torch.sin, "cos": torch.cos,
        "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "erf": torch.erf, "silu": F.silu,
        "softplus": F.softplus, "square": torch.square, "reciprocal": torch.reciprocal,
        "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "hardswish": F.hardswish,
        "selu": F.selu, "mish": F.mish, "relu6": F.relu6, "hardsigmoid": F.hardsigmoid,
        "logsigmoid": F.logsigmoid, "softsign": F.softsign, "tanhshrink": F.tanhshrink,
        "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
        "tan": torch.tan, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
        "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
        "lgamma": torch.lgamma, "digamma": torch.digamma, "erfc": torch.erfc, "erfinv": torch.erfinv,
        "i0": torch.special.i0, "i0e": torch.special.i0e, "i1": torch.special.i1, "i1e": torch.special.i1e,
        "erfcx": torch.special.erfcx, "ndtr": torch.special.ndtr, "log_ndtr": torch.special.log_ndtr,
        "ndtri": torch.special.ndtri, "entr": torch.special.entr,
        "expm1": torch.expm1, "log2": torch.log2, "log10": torch.log10, "exp2": torch.exp2, "frac": torch.frac,
        "sum": torch.sum, "mean": torch.mean, "max": torch.max, "min": torch.min, "var": torch.var, "std": torch.std,
    }
    if op in u:
        return [u[op](x[0])]
    b = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
         "maximum": torch.maximum, "minimum": torch.minimum, "matmul": torch.matmul, "bmm": torch.bmm,
         "atan2": torch.atan2, "fmod": torch.fmod, "remainder": torch.remainder, "hypot": torch.hypot}
    if op == "meshgrid":
        return list(torch.meshgrid(*x, indexing=a["indexing"]))
    if op == "cartesian_prod":
        return [torch.cartesian_prod(*x)]
    if op == "rot90":
        return [torch.rot90(x[0], a["k"], a["dims"])]
    if op == "kron":
        return [torch.kron(x[0], x[1])]
    if op == "tensordot":
        return [torch.tensordot(x[0], x[1], dims=(a["da"], a["db"]))]
    if op == "take_along_dim":
        return [torch.take_along_dim(x[0], x[1], dim=a.get("dim"))]
    if op == "block_diag":
        return [torch.block_diag(*x)]
    if op == "diff":
        return [torch.diff(x[0], n=a["n"], dim=a["dim"])]
    if op == "kthvalue":
        v, i = torch.kthvalue(x[0], a["k"], dim=a["dim"], keepdim=a["keepdim"])
        return [v, i.double()]
    if op == "nanmedian_dim":
        v, i = torch.nanmedian(x[0], dim=a["dim"], keepdim=a["keepdim"])
        return [v, i.double()]
    if op == "var_mean_dims":
        return list(torch.var_mean(x[0], dim=a["dims"], correction=a["correction"], keepdim=a["keepdim"]))
    if op == "std_mean_dims":
        return list(torch.std_mean(x[0], dim=a["dims"], correction=a["correction"], keepdim=a["keepdim"]))
    if op == "grid_sample":
        return [F.grid_sample(x[0], x[1], mode=a["mode"], padding_mode=a["padding"], align_corners=a["align"])]
    if op == "fractional_max_pool2d":
        y, i = F.fractional_max_pool2d(x[0], a["kernel"], output_size=a["output"], return_indices=True,
                                       _random_samples=x[1])
        return [y, i.double()]
    if op == "zeta":
        return [torch.special.zeta(x[0], x[1])]
    if op == "median_dim":
        v, i = torch.median(x[0], dim=a["dim"], keepdim=a["keepdim"])
        return [v, i.double()]
    if op == "quantile":
        return [torch.quantile(x[0], a["q"], dim=a.get("dim"), keepdim=a["keepdim"])]
    if op == "nanquantile":
        return [torch.nanquantile(x[0], a["q"], dim=a.get("dim"), keepdim=a["keepdim"])]
    if op == "nansum":
        return [torch.nansum(x[0], dim=a["dims"] or None, keepdim=a["keepdim"])]
    if op == "nanmean":
        return [torch.nanmean(x[0], dim=a["dims"] or None, keepdim=a["keepdim"])]
    if op == "cumprod":
        return [torch.cumprod(x[0], a["dim"])]
    if op == "logcumsumexp":
        return [torch.logcumsumexp(x[0], a["dim"])]
    if op == "logaddexp":
        return [torch.logaddexp(x[0], x[1])]
    if op == "xlogy":
        return [torch.xlogy(x[0], x[1])]
    if op == "cov":
        return [torch.cov(x[0], correction=a["correction"])]
    if op == "corrcoef":
        return [torch.corrcoef(x[0])]
    if op == "cdist":
        return [torch.cdist(x[0], x[1], p=float(a["p"]))]
    if op == "isin":
        return [torch.isin(x[0], x[1], invert=a["invert"]).double()]
    if op == "bucketize":
        return [torch.bucketize(x[0], x[1], right=a["right"]).double()]
    if op == "searchsorted":
        return [torch.searchsorted(x[0], x[1], right=a["right"]).double()]
    if op == "trapezoid":
        return [torch.trapezoid(x[0], dx=a["dx"], dim=a["dim"])]
    if op == "lerp":
        return [torch.lerp(x[0], x[1], x[2])]
    if op == "addcmul":
        return [torch.addcmul(x[0], x[1], x[2], value=a["value"])]
    if op == "addcdiv":
        return [torch.addcdiv(x[0], x[1], x[2], value=a["value"])]
    if op == "addmm":
        return [torch.addmm(x[0], x[1], x[2], beta=a["beta"], alpha=a["alpha"])]
    if op == "baddbmm":
        return [torch.baddbmm(x[0], x[1], x[2], beta=a["beta"], alpha=a["alpha"])]
    if op == "cross":
        return [torch.linalg.cross(x[0], x[1], dim=a["dim"])]
    if op == "inner":
        return [torch.inner(x[0], x[1])]
    if op == "sinc":
        return [torch.sinc(x[0])]
    if op == "deg2rad":
        return [torch.deg2rad(x[0])]
    if op == "bincount":
        return [torch.bincount(x[0], weights=x[1] if len(x) > 1 else None, minlength=a["minlength"]).double()]
    if op == "histc":
        return [torch.histc(x[0], bins=a["bins"], min=a["min"], max=a["max"])]
    if op == "unique":
        v, i, c = torch.unique(x[0], sorted=True, return_inverse=True, return_counts=True)
        return [v.double(), i.double(), c.double()]
    if op in ("cummax", "cummin"):
        v, i = getattr(torch, op)(x[0], a["dim"])
        return [v, i.double()]
    if op == "logit":
        return [torch.logit(x[0], eps=a.get("eps"))]
    if op == "nan_to_num":
        return [torch.nan_to_num(x[0], nan=a["nan"], posinf=a.get("posinf"), neginf=a.get("neginf"))]
    if op in b:
        return [b[op](x[0], x[1])]
    cmp = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
    if op in cmp:
        return [cmp[op](x[0], x[1]).double()]
    if op == "logical_and":
        return [torch.logical_and(x[0] > 0, x[1] > 0).double()]
    if op == "logical_or":
        return [torch.logical_or(x[0] > 0, x[1] > 0).double()]
    if op == "logical_not":
        return [torch.logical_not(x[0] > 0).double()]
    if op == "leaky_relu":
        return [F.leaky_relu(x[0], a["slope"])]
    if op == "powf":
        return [torch.pow(x[0], a["e"])]
    if op == "clamp":
        return [torch.clamp(x[0], a["min"], a["max"])]
    if op == "add_scalar":
        return [x[0] + a["v"]]
    if op == "mul_scalar":
        return [x[0] * a["v"]]
    if op == "rsub_scalar":
        return [a["v"] - x[0]]
    if op == "div_scalar":
        return [x[0] / a["v"]]
    if op == "sum_dims":
        return [x[0].sum(dim=a["dims"], keepdim=a["keepdim"])]
    if op == "mean_dims":
        return [x[0].mean(dim=a["dims"], keepdim=a["keepdim"])]
    if op == "var_dims":
        return [x[0].var(dim=a["dims"], correction=a["correction"], keepdim=a["keepdim"])]
    if op == "std_dims":
        return [x[0].std(dim=a["dims"], correction=a["correction"], keepdim=a["keepdim"])]
    if op == "logsumexp":
        return [torch.logsumexp(x[0], dim=a["dims"], keepdim=a["keepdim"])]
    if op == "norm":
        return [torch.linalg.vector_norm(x[0], ord=a["p"])]
    if op == "max_dim":
        v, i = torch.max(x[0], dim=a["dim"], keepdim=a["keepdim"])
        return [v, i.double()]
    if op == "min_dim":
        v, i = torch.min(x[0], dim=a["dim"], keepdim=a["keepdim"])
        return [v, i.double()]
    if op == "amax":
        return [torch.amax(x[0], dim=a["dim"], keepdim=a["keepdim"])]
    if op == "amin":
        return [torch.amin(x[0], dim=a["dim"], keepdim=a["keepdim"])]
    if op == "prod":
        return [torch.prod(x[0])]
    if op == "prod_dim":
        return [torch.prod(x[0], a["dim"], keepdim=a["keepdim"])]
    if op == "fmax":
        return [torch.fmax(x[0], x[1])]
    if op == "fmin":
        return [torch.fmin(x[0], x[1])]
    if op == "logaddexp2":
        return [torch.logaddexp2(x[0], x[1])]
    if op == "div_rounding":
        return [torch.div(x[0], x[1], rounding_mode=a["mode"])]
    if op == "diag":
        return [torch.diag(x[0], a["offset"])]
    if op == "mv":
        return [torch.mv(x[0], x[1])]
    if op == "dist":
        return [torch.dist(x[0], x[1], float(a["p"]))]
    if op in ("hstack", "vstack", "dstack", "column_stack"):
        return [getattr(torch, op)(x)]
    if op == "tensor_split":
        return list(torch.tensor_split(x[0], a["at"], a["dim"]))
    if op == "tensor_unfold":
        return [x[0].unfold(a["dim"], a["size"], a["step"])]
    if op == "copysign":
        return [torch.copysign(x[0], x[1])]
    if op == "signbit":
        return [torch.signbit(x[0]).double()]
    if op == "heaviside":
        return [torch.heaviside(x[0], x[1])]
    if op == "float_power":
        return [torch.float_power(x[0], x[1])]
    if op == "aminmax":
        if "dim" in a:
            return list(torch.aminmax(x[0], dim=a["dim"], keepdim=a["keepdim"]))
        return list(torch.aminmax(x[0]))
    if op == "diag_embed":
        return [torch.diag_embed(x[0], a["offset"], a["dim1"], a["dim2"])]
    if op == "diagflat":
        return [torch.diagflat(x[0], a["offset"])]
    if op == "diagonal_scatter":
        return [torch.diagonal_scatter(x[0], x[1], a["offset"], a["dim1"], a["dim2"])]
    if op == "slice_scatter":
        return [torch.slice_scatter(x[0], x[1], a["dim"], a["start"], a["end"], a["step"])]
    if op == "select_scatter":
        return [torch.select_scatter(x[0], x[1], a["dim"], a["index"])]
    if op in ("addmv", "addr", "addbmm"):
        return [getattr(torch, op)(x[0], x[1], x[2], beta=a["beta"], alpha=a["alpha"])]
    if op in ("fliplr", "flipud", "msort"):
        return [getattr(torch, op)(x[0])]
    if op == "split_with_sizes":
        return list(torch.split(x[0], a["sizes"], a["dim"]))
    if op in ("hsplit", "vsplit", "dsplit"):
        return list(getattr(torch, op)(x[0], a["at"]))
    if op in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"):
        return [getattr(torch, op)(x[0], x[1])]
    if op == "mode":
        v, i = torch.mode(x[0], a["dim"], a["keepdim"])
        return [v, i.double()]
    if op == "unique_consecutive":
        v, inv, counts = torch.unique_consecutive(x[0], return_inverse=True, return_counts=True)
        return [v, inv.double(), counts.double()]
    if op == "ldexp":
        return [torch.ldexp(x[0], x[1])]
    if op == "sum_to_size":
        return [x[0].sum_to_size(a["shape"])]
    if op == "bitwise_not":
        return [torch.bitwise_not(x[0])]
    if op == "isclose":
        return [torch.isclose(x[0], x[1], a["rtol"], a["atol"], a["equal_nan"]).double()]
    if op == "isposinf":
        return [torch.isposinf(x[0]).double()]
    if op == "isneginf":
        return [torch.isneginf(x[0]).double()]
    if op == "argmax":
        return [torch.argmax(x[0], dim=a["dim"], keepdim=a["keepdim"]).double()]
    if op == "softmax":
        return [torch.softmax(x[0], dim=a["dim"])]
    if op == "log_softmax":
        return [torch.log_softmax(x[0], dim=a["dim"])]
    if op == "reshape":
        return [x[0].reshape(a["shape"])]
    if op == "transpose":
        return [x[0].transpose(a["a"], a["b"])]
    if op == "permute":
        return [x[0].permute(a["perm"])]
    if op == "unsqueeze":
        return [x[0].unsqueeze(a["dim"])]
    if op == "squeeze":
        return [x[0].squeeze()]
    if op == "expand":
        return [x[0].expand(a["shape"])]
    if op == "slice":
        idx = [slice(None)] * x[0].dim()
        idx[a["dim"]] = slice(a["start"], a["end"], a["step"])
        return [x[0][tuple(idx)]]
    if op == "select":
        return [x[0].select(a["dim"], a["index"])]
    if op == "flatten":
        return [x[0].flatten(a["start"], a["end"])]
    if op == "unflatten":
        return [x[0].unflatten(a["dim"], a["sizes"])]
    if op == "cat":
        return [torch.cat(x, dim=a["dim"])]
    if op == "stack":
        return [torch.stack(x, dim=a["dim"])]
    if op == "split":
        return list(torch.split(x[0], a["size"], dim=a["dim"]))
    if op == "chunk":
        return list(torch.chunk(x[0], a["chunks"], dim=a["dim"]))
    if op == "unbind":
        return list(torch.unbind(x[0], dim=a["dim"]))
    if op == "repeat":
        return [x[0].repeat(*a["repeats"])]
    if op == "tile":
        return [x[0].tile(a["reps"])]
    if op == "flip":
        return [x[0].flip(a["dims"])]
    if op == "roll":
        return [x[0].roll(a["shifts"], a["dims"])]
    if op == "repeat_interleave":
        return [x[0].repeat_interleave(a["repeats"], dim=a.get("dim"))]
    if op == "movedim":
        return [x[0].movedim(a["source"], a["destination"])]
    if op == "pad":
        return [F.pad(x[0], a["pads"], value=a["value"])]
    if op == "normalize":
        return [F.normalize(x[0], p=a["p"], dim=a["dim"], eps=a["eps"])]
    if op == "cosine_similarity":
        return [F.cosine_similarity(x[0], x[1], dim=a["dim"], eps=a["eps"])]
    if op == "pairwise_distance":
        return [F.pairwise_distance(x[0], x[1], p=a["p"], eps=a["eps"], keepdim=a["keepdim"])]
    if op == "binary_cross_entropy":
        w = x[2] if len(x) > 2 else None
        return [F.binary_cross_entropy(x[0], x[1], weight=w, reduction=a["reduction"])]
    if op == "kl_div":
        return [F.kl_div(x[0], x[1], reduction=a["reduction"], log_target=a["log_target"])]
    if op == "one_hot":
        return [F.one_hot(x[0], a["classes"]).double()]
    if op == "interpolate":
        return [F.interpolate(x[0], size=a.get("size"), scale_factor=a.get("scale"), mode=a["mode"],
                              align_corners=a.get("align_corners"))]
    if op == "einsum":
        return [torch.einsum(a["eq"], *x)]
    if op == "pixel_shuffle":
        return [F.pixel_shuffle(x[0], a["r"])]
    if op == "pixel_unshuffle":
        return [F.pixel_unshuffle(x[0], a["r"])]
    if op == "diagonal":
        return [torch.diagonal(x[0], a["offset"], a["dim1"], a["dim2"])]
    if op == "trace":
        return [torch.trace(x[0])]
    if op == "outer":
        return [torch.outer(x[0], x[1])]
    if op == "dot":
        return [torch.dot(x[0], x[1])]
    if op == "elu":
        return [F.elu(x[0], a["alpha"])]
    if op == "celu":
        return [F.celu(x[0], a["alpha"])]
    if op == "hardtanh":
        return [F.hardtanh(x[0], a["min"], a["max"])]
    if op == "hardshrink":
        return [F.hardshrink(x[0], a["lambd"])]
    if op == "softshrink":
        return [F.softshrink(x[0], a["lambd"])]
    if op == "threshold":
        return [F.threshold(x[0], a["threshold"], a["value"])]
    if op == "glu":
        return [F.glu(x[0], a["dim"])]
    if op == "cumsum":
        return [x[0].cumsum(a["dim"])]
    if op == "sort":
        v, i = torch.sort(x[0], dim=a["dim"], descending=a["descending"], stable=True)
        return [v, i.double()]
    if op == "topk":
        v, i = torch.topk(x[0], a["k"], dim=a["dim"], largest=a["largest"])
        return [v, i.double()]
    if op == "tril":
        return [torch.tril(x[0], a["k"])]
    if op == "triu":
        return [torch.triu(x[0], a["k"])]
    if op == "where":
        return [torch.where(x[0] > 0, x[1], x[2])]
    if op == "masked_fill":
        return [x[0].masked_fill(x[1] > 0, a["v"])]
    if op == "index_select":
        return [x[0].index_select(a["dim"], x[1])]
    if op == "gather":
        return [x[0].gather(a["dim"], x[1])]
    if op == "scatter_add":
        return [x[0].scatter_add(a["dim"], x[1], x[2])]
    if op == "take":
        return [torch.take(x[0], x[1])]
    if op == "put":
        return [x[0].put(x[1], x[2], accumulate=a["accumulate"])]
    if op == "index_put":
        n = a["n_idx"]
        return [x[0].index_put(tuple(x[1:1 + n]), x[1 + n], accumulate=a["accumulate"])]
    if op == "masked_scatter":
        return [x[0].masked_scatter(x[1] > 0, x[2])]
    if op == "polygamma":
        return [torch.polygamma(a["n"], x[0])]
    if op == "xlog1py":
        return [torch.special.xlog1py(x[0], x[1])]
    if op == "mvlgamma":
        return [torch.mvlgamma(x[0], a["p"])]
    if op == "scatter":
        return [x[0].scatter(a["dim"], x[1], x[2])]
    if op == "scatter_scalar":
        return [x[0].scatter(a["dim"], x[1], a["value"])]
    if op == "index_reduce":
        return [x[0].index_reduce(a["dim"], x[1], x[2], a["reduce"], include_self=a["include_self"])]
    if op == "scatter_reduce":
        return [x[0].scatter_reduce(a["dim"], x[1], x[2], a["reduce"], include_self=a["include_self"])]
    if op == "index_add":
        return [x[0].index_add(a["dim"], x[1], x[2], alpha=a["alpha"])]
    if op == "index_copy":
        return [x[0].index_copy(a["dim"], x[1], x[2])]
    if op == "index_fill":
        return [x[0].index_fill(a["dim"], x[1], a["value"])]
    if op == "embedding":
        return [F.embedding(x[1], x[0])]
    if op == "conv2d":
        bias = x[2] if len(x) > 2 else None
        return [F.conv2d(x[0], x[1], bias, stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])]
    if op == "max_pool2d":
        return [F.max_pool2d(x[0], a["kernel"], a["stride"], a["padding"], a["dilation"])]
    if op == "avg_pool2d":
        return [F.avg_pool2d(x[0], a["kernel"], a["stride"], a["padding"])]
    if op == "unfold":
        return [F.unfold(x[0], a["kernel"], dilation=a["dilation"], padding=a["padding"], stride=a["stride"])]
    if op.startswith("linalg_") or op in ("logdet", "cholesky_solve", "cholesky_inverse"):
        return linalg_run(op, a, x)
    raise ValueError(op)


def sign_cols(m):
    """Each column's sign, from its first row: makes sign-ambiguous factors comparable."""
    return torch.sign(m[..., :1, :])


def linalg_run(op, a, x):
    """torch.linalg; symmetric inputs are built inside the op (x x^T + n I, x + x^T) so that
    finite differences perturb them symmetrically, and sign-ambiguous factors are normalised."""
    L = torch.linalg
    if op == "linalg_cholesky":
        n = x[0].shape[-1]
        return [L.cholesky(x[0] @ x[0].mT + n * torch.eye(n), upper=a["upper"])]
    if op == "linalg_solve":
        return [L.solve(x[0], x[1])]
    if op == "linalg_solve_triangular":
        return [L.solve_triangular(x[0], x[1], upper=a["upper"], left=a["left"], unitriangular=a["unit"])]
    if op == "linalg_inv":
        return [L.inv(x[0])]
    if op == "linalg_det":
        return [L.det(x[0])]
    if op == "linalg_slogdet":
        sign, logabs = L.slogdet(x[0])
        return [sign, logabs]
    if op == "logdet":
        return [torch.logdet(x[0])]
    if op == "linalg_qr":
        q, r = L.qr(x[0], mode=a["mode"])
        d = torch.sign(torch.diagonal(r, 0, -2, -1))
        return [q * d.unsqueeze(-2), r * d.unsqueeze(-1)]
    if op == "linalg_eigh":
        w, v = L.eigh(x[0] + x[0].mT)
        return [w, v * sign_cols(v)]
    if op == "linalg_eigvalsh":
        return [L.eigvalsh(x[0] + x[0].mT)]
    if op == "linalg_svd":
        u, s, vh = L.svd(x[0], full_matrices=a["full"])
        k = s.shape[-1]
        sg = sign_cols(u[..., :k])
        return [u[..., :k] * sg, s, vh[..., :k, :] * sg.mT]
    if op == "linalg_svdvals":
        return [L.svdvals(x[0])]
    if op == "linalg_pinv":
        return [L.pinv(x[0])]
    if op in ("cholesky_solve", "cholesky_inverse"):
        n = x[0].shape[-1]
        factor = L.cholesky(x[0] @ x[0].mT + n * torch.eye(n), upper=a["upper"])
        if op == "cholesky_inverse":
            return [torch.cholesky_inverse(factor, upper=a["upper"])]
        return [torch.cholesky_solve(x[1], factor, upper=a["upper"])]
    if op == "linalg_lu":
        return list(L.lu(x[0]))
    if op == "linalg_lu_factor":
        lu, piv = L.lu_factor(x[0])
        return [lu, piv.to(torch.float64)]
    if op == "linalg_lu_solve":
        lu, piv = L.lu_factor(x[0])
        return [L.lu_solve(lu, piv, x[1])]
    if op == "linalg_matrix_exp":
        return [L.matrix_exp(x[0])]
    if op == "linalg_lstsq_full":
        r = L.lstsq(x[0], x[1], driver="gelsd")
        return [r.solution, r.residuals, r.rank.double(), r.singular_values]
    if op == "linalg_lstsq":
        return [L.lstsq(x[0], x[1]).solution]
    if op == "linalg_matrix_power":
        return [L.matrix_power(x[0], a["n"])]
    if op == "linalg_multi_dot":
        return [L.multi_dot(x)]
    if op == "linalg_matrix_norm":
        ords = {"fro": "fro", "nuc": "nuc", "2": 2, "m2": -2, "1": 1, "m1": -1, "inf": math.inf,
                "minf": -math.inf}
        return [L.matrix_norm(x[0], ord=ords[a["ord"]])]
    raise ValueError(op)


tensors = {}
manifest = []


def pos(*shape):
    return torch.rand(*shape) * 2 + 0.1


def randn(*shape):
    return torch.randn(*shape)


def idx(high, *shape):
    return torch.randint(0, high, shape)


def case(name, op, inputs, args=None, views=None, grad=None):
    """inputs: base tensors (float64 or int64); views: recipe per input."""
    args = args or {}
    views = views or [None] * len(inputs)
    xs = []
    for i, base in enumerate(inputs):
        tensors[f"{name}.in{i}"] = base.contiguous()
        t = base.clone()
        if t.is_floating_point() and (grad is None or grad[i]):
            t.requires_grad_(True)
        xs.append(t)
    views_x = [view(t, r) for t, r in zip(xs, views)]
    outs = run(op, args, views_x)
    loss = 0
    for k, o in enumerate(outs):
        tensors[f"{name}.out{k}"] = o.detach().contiguous()
        if o.requires_grad:
            w = torch.linspace(-1.0, 1.5, o.numel()).reshape(o.shape) if o.numel() else torch.zeros(o.shape)
            tensors[f"{name}.w{k}"] = w
            loss = loss + (o * w).sum()
    grads = []
    if torch.is_tensor(loss) and loss.requires_grad:
        loss.backward()
    for i, t in enumerate(xs):
        if t.requires_grad and t.grad is not None:
            tensors[f"{name}.grad{i}"] = t.grad.contiguous()
            grads.append(True)
        else:
            grads.append(False)
    manifest.append({"name": name, "op": op, "args": args, "views": views, "n_in": len(inputs),
                     "in_int": [not t.is_floating_point() for t in inputs], "n_out": len(outs), "grads": grads})


# ---- elementwise unary ------------------------------------------------------
for op in ["neg", "exp", "abs", "sign", "sin", "cos", "tanh", "sigmoid", "relu", "erf", "silu", "softplus",
           "square", "gelu", "gelu_tanh"]:
    case(op, op, [randn(3, 4)])
for op in ["log", "log1p", "sqrt", "rsqrt", "reciprocal"]:
    case(op, op, [pos(3, 4)])
case("exp_t", "exp", [randn(4, 3)], views=["t"])
case("tanh_step2", "tanh", [randn(6, 3)], views=["step2"])
case("sigmoid_large", "sigmoid", [torch.tensor([-60.0, -20.0, 0.0, 20.0, 60.0])])
case("softplus_large", "softplus", [torch.tensor([-30.0, -1.0, 0.5, 19.0, 21.0, 40.0])])
case("exp_scalar0d", "exp", [torch.tensor(0.7)])
case("relu_size0", "relu", [randn(0, 3)])
case("leaky_relu", "leaky_relu", [randn(3, 4)], {"slope": 0.1})
case("powf3", "powf", [randn(3, 4)], {"e": 3.0})
case("powf_half", "powf", [pos(3, 4)], {"e": 0.5})
case("powf_neg", "powf", [pos(3, 4)], {"e": -1.5})
case("clamp", "clamp", [randn(3, 4)], {"min": -0.5, "max": 0.5})
case("add_scalar", "add_scalar", [randn(3, 4)], {"v": 2.5})
case("mul_scalar", "mul_scalar", [randn(3, 4)], {"v": -3.0})
case("rsub_scalar", "rsub_scalar", [randn(3, 4)], {"v": 1.0})
case("div_scalar", "div_scalar", [randn(3, 4)], {"v": 4.0})

# ---- binary with broadcasting ---------------------------------------------------
for op in ["add", "sub", "mul", "maximum", "minimum"]:
    case(op, op, [randn(3, 4), randn(3, 4)])
    case(op + "_bcast", op, [randn(2, 3, 4), randn(4)])
    case(op + "_bcast2", op, [randn(2, 1, 4), randn(3, 1)])
case("div", "div", [randn(3, 4), pos(3, 4)])
case("div_bcast", "div", [randn(2, 3, 4), pos(3, 1)])
case("pow", "pow", [pos(3, 4), randn(3, 4)])
case("pow_bcast", "pow", [pos(3, 4), randn(4)])
case("add_t_step", "add", [randn(4, 3), randn(6, 4)], views=["t", "step2"])
case("mul_expand", "mul", [randn(1, 4), randn(3, 4)], views=["expand0", None])
case("add_0d", "add", [randn(3, 2), torch.tensor(1.5)])
case("mul_size1", "mul", [randn(3, 1), randn(1, 5)])
case("maximum_ties", "maximum", [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.0, 3.0])])
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    case("cmp_" + op, op, [a, torch.tensor([2.0, 2.0, 6.0])], grad=[False, False])
for op in ["logical_and", "logical_or"]:
    case(op, op, [randn(3, 4), randn(4)], grad=[False, False])
case("logical_not", "logical_not", [randn(3, 4)], grad=[False])
case("where", "where", [randn(3, 4), randn(3, 4), randn(4)], grad=[False, True, True])
case("masked_fill", "masked_fill", [randn(3, 4), randn(4)], {"v": -2.0}, grad=[True, False])

# ---- reductions ---------------------------------------------------------------------
case("sum", "sum", [randn(3, 4)])
case("sum_t", "sum", [randn(3, 4)], views=["t"])
case("sum_dim0", "sum_dims", [randn(3, 4)], {"dims": [0], "keepdim": False})
case("sum_dim1_keep", "sum_dims", [randn(3, 4)], {"dims": [1], "keepdim": True})
case("sum_dims_02", "sum_dims", [randn(2, 3, 4)], {"dims": [0, 2], "keepdim": False})
case("sum_dims_neg", "sum_dims", [randn(2, 3, 4)], {"dims": [-1], "keepdim": True})
case("sum_size0", "sum_dims", [randn(0, 3)], {"dims": [0], "keepdim": False})
case("sum_step", "sum_dims", [randn(6, 5)], {"dims": [1], "keepdim": False}, views=["step2"])
case("mean", "mean", [randn(3, 4)])
case("mean_dims", "mean_dims", [randn(2, 3, 4)], {"dims": [1], "keepdim": True})
case("var", "var", [randn(3, 4)])
case("var_dims", "var_dims", [randn(3, 5)], {"dims": [1], "correction": 1, "keepdim": False})
case("var_dims_c0", "var_dims", [randn(3, 5)], {"dims": [0], "correction": 0, "keepdim": True})
case("std", "std", [randn(3, 4)])
case("std_dims", "std_dims", [randn(4, 5)], {"dims": [-1], "correction": 1, "keepdim": True})
case("logsumexp", "logsumexp", [randn(3, 4)], {"dims": [1], "keepdim": False})
case("logsumexp_large", "logsumexp", [randn(3, 4) * 400], {"dims": [0, 1], "keepdim": True})
case("norm2", "norm", [randn(3, 4)], {"p": 2.0})
case("norm1", "norm", [randn(3, 4)], {"p": 1.0})
case("norm3", "norm", [randn(3, 4)], {"p": 3.0})
case("max_dim", "max_dim", [randn(3, 4)], {"dim": 1, "keepdim": False})
case("max_dim_keep", "max_dim", [randn(3, 4, 2)], {"dim": 0, "keepdim": True})
case("min_dim", "min_dim", [randn(3, 4)], {"dim": 0, "keepdim": False})
case("amax", "amax", [torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])], {"dim": 1, "keepdim": False})
case("max_all", "max", [randn(3, 4)])
case("min_all", "min", [randn(3, 4)])
case("argmax", "argmax", [randn(3, 5)], {"dim": 1, "keepdim": False}, grad=[False])
case("softmax", "softmax", [randn(3, 5)], {"dim": -1})
case("softmax_dim0", "softmax", [randn(3, 5)], {"dim": 0})
case("softmax_large", "softmax", [randn(2, 4) * 1000], {"dim": 1})
case("softmax_t", "softmax", [randn(5, 3)], {"dim": 1}, views=["t"])
case("log_softmax", "log_softmax", [randn(3, 5)], {"dim": 1})
case("log_softmax_large", "log_softmax", [randn(2, 4) * 1000], {"dim": -1})
case("log_softmax_3d", "log_softmax", [randn(2, 3, 4)], {"dim": 1})

# ---- views, joins and splits ------------------------------------------------------
case("reshape", "reshape", [randn(2, 6)], {"shape": [3, -1]})
case("reshape_t", "reshape", [randn(4, 3)], {"shape": [12]}, views=["t"])
case("transpose", "transpose", [randn(2, 3, 4)], {"a": 0, "b": 2})
case("permute", "permute", [randn(2, 3, 4)], {"perm": [2, 0, 1]})
case("unsqueeze", "unsqueeze", [randn(3, 4)], {"dim": -1})
case("squeeze", "squeeze", [randn(3, 1, 4, 1)])
case("expand", "expand", [randn(3, 1)], {"shape": [2, 3, 4]})
case("slice_step", "slice", [randn(7, 3)], {"dim": 0, "start": 1, "end": 7, "step": 2})
case("slice_neg", "slice", [randn(3, 8)], {"dim": 1, "start": -5, "end": -1, "step": 3})
case("select", "select", [randn(3, 4)], {"dim": 1, "index": 2})
case("flatten", "flatten", [randn(2, 3, 4)], {"start": 1, "end": 2})
case("unflatten", "unflatten", [randn(2, 12)], {"dim": 1, "sizes": [3, 4]})
case("cat", "cat", [randn(2, 3), randn(4, 3)], {"dim": 0})
case("cat_dim1_t", "cat", [randn(3, 2), randn(2, 4)], {"dim": 1}, views=["t", None])
case("stack", "stack", [randn(2, 3), randn(2, 3)], {"dim": 1})
case("split", "split", [randn(5, 3)], {"size": 2, "dim": 0})
case("chunk", "chunk", [randn(3, 7)], {"chunks": 3, "dim": 1})
case("tril", "tril", [randn(4, 5)], {"k": 0})
case("triu", "triu", [randn(2, 4, 4)], {"k": 1})

# ---- indexing -----------------------------------------------------------------
case("index_select", "index_select", [randn(5, 3), torch.tensor([4, 0, 4, 2])], {"dim": 0})
case("index_select_dim1", "index_select", [randn(2, 5, 3), torch.tensor([1, 1, 3])], {"dim": 1})
case("gather", "gather", [randn(3, 4), idx(4, 3, 2)], {"dim": 1})
case("gather_dim0", "gather", [randn(3, 4), idx(3, 2, 4)], {"dim": 0})
case("scatter_add", "scatter_add", [randn(3, 5), idx(5, 3, 4), randn(3, 4)], {"dim": 1})
case("embedding", "embedding", [randn(10, 4), idx(10, 2, 3)])

# ---- matmul -----------------------------------------------------------------------
case("matmul_dot", "matmul", [randn(5), randn(5)])
case("matmul_mv", "matmul", [randn(3, 5), randn(5)])
case("matmul_vm", "matmul", [randn(5), randn(5, 4)])
case("matmul_mm", "matmul", [randn(3, 5), randn(5, 4)])
case("matmul_mm_t", "matmul", [randn(5, 3), randn(4, 5)], views=["t", "t"])
case("matmul_batched_2d", "matmul", [randn(2, 3, 5), randn(5, 4)])
case("matmul_broadcast", "matmul", [randn(2, 1, 3, 5), randn(4, 5, 2)])
case("matmul_large", "matmul", [randn(40, 50), randn(50, 45)])
case("bmm", "bmm", [randn(3, 2, 4), randn(3, 4, 5)])

# ---- convolution and pooling ---------------------------------------------------------
cv = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}
case("conv2d", "conv2d", [randn(2, 3, 6, 6), randn(4, 3, 3, 3)], cv)
case("conv2d_bias_pad_stride", "conv2d", [randn(2, 2, 7, 7), randn(3, 2, 3, 3), randn(3)], dict(cv, stride=2, padding=1))
case("conv2d_dilation", "conv2d", [randn(1, 2, 8, 8), randn(2, 2, 3, 3)], dict(cv, dilation=2))
case("conv2d_groups", "conv2d", [randn(2, 4, 5, 5), randn(6, 2, 3, 3), randn(6)], dict(cv, groups=2, padding=1))
case("conv2d_1x1", "conv2d", [randn(2, 3, 4, 4), randn(5, 3, 1, 1)], cv)
case("unfold", "unfold", [randn(1, 2, 4, 5)], {"kernel": 2, "stride": 1, "padding": 1, "dilation": 1})
case("max_pool2d", "max_pool2d", [randn(2, 3, 6, 6)], {"kernel": 2, "stride": 2, "padding": 0, "dilation": 1})
case("max_pool2d_pad", "max_pool2d", [randn(1, 2, 7, 7)], {"kernel": 3, "stride": 2, "padding": 1, "dilation": 1})
case("max_pool2d_dil", "max_pool2d", [randn(1, 1, 7, 7)], {"kernel": 2, "stride": 1, "padding": 0, "dilation": 2})
case("avg_pool2d", "avg_pool2d", [randn(2, 3, 6, 6)], {"kernel": 2, "stride": 2, "padding": 0})
case("avg_pool2d_pad", "avg_pool2d", [randn(1, 2, 5, 5)], {"kernel": 3, "stride": 2, "padding": 1})

# ---- added later: appended so that the cases above keep their random inputs ----------
# hardswish on both sides of its breaks at -3 and 3 (and away from them, where
# its piecewise gradient is smooth enough for finite differences).
case("hardswish", "hardswish", [torch.tensor([[-5.0, -3.5, -2.9, -1.0], [0.0, 0.7, 2.5, 2.9], [3.2, 4.0, -0.3, 6.0]])])
case("hardswish_randn", "hardswish", [randn(3, 4) * 3])
# unbind (one autograd node for all its slices), along the middle dim of a
# transposed view.
case("unbind", "unbind", [randn(3, 2, 4)], {"dim": 1}, views=["t"])
# ---- added later: the subgradients at kinks as torch 2.15 takes them (of minimum
# norm: 0 at a clamp bound, at hardswish's breaks the flatter side, 0 where a
# vector norm is 0 and, for p < 1, at its zero elements) ----------------------
case("clamp_at_bounds", "clamp", [torch.tensor([-1.0, 1.0, 0.0, 2.0, -3.0])], {"min": -1.0, "max": 1.0})
case("hardswish_at_kinks", "hardswish", [torch.tensor([-3.0, 3.0, 0.0, -4.0])])
case("abs_at_zero", "abs", [torch.tensor([0.0, -0.0, 2.0, -1.5])])
case("norm2_zero", "norm", [torch.zeros(3)], {"p": 2.0})
case("norm3_zero", "norm", [torch.zeros(2, 3)], {"p": 3.0})
case("norm1_5_zero_element", "norm", [torch.tensor([0.0, 2.0, -3.0])], {"p": 1.5})
case("norm_half_zero_element", "norm", [torch.tensor([0.0, 2.0, -3.0])], {"p": 0.5})
# ---- added later: rounding (gradient zero; halves round to even) -------------------
for op in ["floor", "ceil", "round", "trunc"]:
    case(op, op, [randn(3, 4) * 3])
case("round_halves", "round", [torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6])], grad=[False])
case("floor_t", "floor", [randn(4, 3) * 3], views=["t"])
# ---- added later: rearranging copies ------------------------------------------------
case("repeat", "repeat", [randn(2, 3)], {"repeats": [2, 1, 3]})
case("repeat_t", "repeat", [randn(3, 2)], {"repeats": [2, 2]}, views=["t"])
case("tile", "tile", [randn(2, 3)], {"reps": [2]})
case("flip", "flip", [randn(2, 3, 4)], {"dims": [0, 2]})
case("flip_neg_t", "flip", [randn(4, 3)], {"dims": [-1]}, views=["t"])
case("roll", "roll", [randn(3, 4)], {"shifts": [1, -2], "dims": [0, 1]})
case("roll_flat", "roll", [randn(2, 3)], {"shifts": [4], "dims": []})
case("roll_wraps", "roll", [randn(3, 2)], {"shifts": [7], "dims": [0]})
case("repeat_interleave", "repeat_interleave", [randn(2, 3)], {"repeats": 2, "dim": 1})
case("repeat_interleave_flat", "repeat_interleave", [randn(2, 3)], {"repeats": 3})
case("movedim", "movedim", [randn(2, 3, 4)], {"source": 0, "destination": -1})
# ---- added later: ordering ---------------------------------------------------------
case("cumsum", "cumsum", [randn(3, 5)], {"dim": 1})
case("cumsum_dim0_t", "cumsum", [randn(4, 3)], {"dim": 0}, views=["t"])
case("cumsum_3d", "cumsum", [randn(2, 3, 4)], {"dim": -2})
case("sort", "sort", [randn(3, 6)], {"dim": 1, "descending": False})
case("sort_desc_dim0", "sort", [randn(5, 3)], {"dim": 0, "descending": True})
case("sort_ties_nan", "sort", [torch.tensor([2.0, float("nan"), -1.0, 2.0, 0.5, -1.0])], {"dim": 0, "descending": True})
case("topk", "topk", [randn(4, 7)], {"k": 3, "dim": -1, "largest": True})
case("topk_smallest_dim0", "topk", [randn(6, 3)], {"k": 2, "dim": 0, "largest": False})
# ---- added later: more activations (compositions; large inputs must not give
# a NaN gradient through an unused exp branch) --------------------------------------
for op in ["selu", "mish", "relu6", "hardsigmoid", "logsigmoid", "softsign", "tanhshrink"]:
    case(op, op, [randn(3, 4) * 3])
case("elu", "elu", [randn(3, 4) * 3], {"alpha": 1.0})
case("elu_alpha", "elu", [randn(3, 4) * 3], {"alpha": 0.5})
case("celu", "celu", [randn(3, 4) * 3], {"alpha": 2.0})
case("hardtanh", "hardtanh", [randn(3, 4) * 2], {"min": -1.0, "max": 1.5})
case("hardshrink", "hardshrink", [randn(3, 4)], {"lambd": 0.5})
case("softshrink", "softshrink", [randn(3, 4)], {"lambd": 0.5})
case("threshold", "threshold", [randn(3, 4)], {"threshold": 0.1, "value": -2.0})
case("glu", "glu", [randn(3, 4)], {"dim": 1})
case("glu_dim0_t", "glu", [randn(3, 4)], {"dim": 0}, views=["t"])
case("softplus_huge", "softplus", [torch.tensor([100.0, -100.0, 95.0, 0.5])])
case("elu_huge", "elu", [torch.tensor([100.0, -100.0, 95.0, -0.5])], {"alpha": 1.0})
case("logsigmoid_huge", "logsigmoid", [torch.tensor([100.0, -100.0, -95.0, 0.5])])
# ---- added later: functional helpers and losses -----------------------------------
case("pad", "pad", [randn(2, 3, 4)], {"pads": [1, 2, 0, 1], "value": 0.5})
case("pad_crop", "pad", [randn(3, 5)], {"pads": [-1, 2, 1, -2], "value": -1.0})
case("normalize", "normalize", [randn(3, 4)], {"p": 2.0, "dim": 1, "eps": 1e-12})
case("normalize_p1_dim0", "normalize", [randn(3, 4)], {"p": 1.0, "dim": 0, "eps": 1e-12})
case("normalize_zero_row", "normalize", [torch.tensor([[0.0, 0.0], [3.0, 4.0]])], {"p": 2.0, "dim": 1, "eps": 1e-12})
case("cosine_similarity", "cosine_similarity", [randn(3, 5), randn(3, 5)], {"dim": 1, "eps": 1e-8})
case("cosine_similarity_bcast", "cosine_similarity", [randn(2, 1, 4), randn(3, 4)], {"dim": -1, "eps": 1e-8})
case("cosine_similarity_tiny", "cosine_similarity", [randn(2, 3) * 1e-10, randn(2, 3)], {"dim": 1, "eps": 1e-8})
case("pairwise_distance", "pairwise_distance", [randn(3, 4), randn(3, 4)], {"p": 2.0, "eps": 1e-6, "keepdim": False})
case("pairwise_distance_p3", "pairwise_distance", [randn(3, 4), randn(4)], {"p": 3.0, "eps": 1e-6, "keepdim": True})
case("binary_cross_entropy", "binary_cross_entropy", [torch.rand(3, 4) * 0.9 + 0.05, torch.rand(3, 4)], {"reduction": "mean"})
case("binary_cross_entropy_w", "binary_cross_entropy", [torch.rand(6) * 0.9 + 0.05, torch.rand(6), pos(6)], {"reduction": "sum"}, grad=[True, True, False])
case("binary_cross_entropy_edges", "binary_cross_entropy", [torch.tensor([0.0, 1.0, 0.5]), torch.tensor([1.0, 0.0, 0.5])], {"reduction": "none"}, grad=[False, True])
case("kl_div", "kl_div", [torch.log_softmax(randn(3, 4), 1), torch.softmax(randn(3, 4), 1)], {"reduction": "sum", "log_target": False})
case("kl_div_zero_target", "kl_div", [torch.log_softmax(randn(2, 3), 1), torch.tensor([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])], {"reduction": "none", "log_target": False}, grad=[True, False])
case("kl_div_log_target", "kl_div", [torch.log_softmax(randn(3, 4), 1), torch.log_softmax(randn(3, 4), 1)], {"reduction": "mean", "log_target": True})
case("one_hot", "one_hot", [idx(5, 2, 3)], {"classes": 6})
case("outer", "outer", [randn(3), randn(4)])
case("dot", "dot", [randn(5), randn(5)])
# ---- added later: einsum ------------------------------------------------------------
case("einsum_mm", "einsum", [randn(3, 4), randn(4, 5)], {"eq": "ij,jk->ik"})
case("einsum_attention", "einsum", [randn(2, 3, 4, 5), randn(2, 3, 6, 5)], {"eq": "bhqd,bhkd->bhqk"})
case("einsum_implicit_t", "einsum", [randn(4, 3), randn(3, 2)], {"eq": "ij,ik"}, views=["t", None])
case("einsum_transpose", "einsum", [randn(2, 3, 4)], {"eq": "abc->cab"})
case("einsum_sum_all", "einsum", [randn(3, 4)], {"eq": "ij->"})
case("einsum_private_sum", "einsum", [randn(2, 3), randn(3, 4)], {"eq": "ab,bc->c"})
case("einsum_outer_batch", "einsum", [randn(2, 3), randn(2, 4)], {"eq": "bi,bj->bij"})
case("einsum_three", "einsum", [randn(2, 3), randn(3, 4), randn(4, 5)], {"eq": "ij,jk,kl->il"})
case("einsum_bilinear", "einsum", [randn(2, 3), randn(5, 3, 4), randn(2, 4)], {"eq": "bi,oij,bj->bo"})
# ---- added later: interpolate ---------------------------------------------------------
case("interp_nearest_size", "interpolate", [randn(1, 2, 3, 4)], {"mode": "nearest", "size": [5, 7]})
case("interp_nearest_scale", "interpolate", [randn(2, 1, 3, 3)], {"mode": "nearest", "scale": [2.0, 2.0]})
case("interp_nearest_down", "interpolate", [randn(1, 1, 7, 5)], {"mode": "nearest", "size": [3, 2]})
case("interp_nearest_1_5", "interpolate", [randn(1, 2, 4)], {"mode": "nearest", "scale": [1.5]})
case("interp_linear", "interpolate", [randn(2, 3, 5)], {"mode": "linear", "size": [8]})
case("interp_linear_corners", "interpolate", [randn(1, 2, 4)], {"mode": "linear", "size": [7], "align_corners": True})
case("interp_bilinear", "interpolate", [randn(1, 2, 3, 4)], {"mode": "bilinear", "size": [6, 5]})
case("interp_bilinear_scale", "interpolate", [randn(1, 1, 3, 3)], {"mode": "bilinear", "scale": [2.0, 2.0]})
case("interp_bilinear_corners", "interpolate", [randn(1, 2, 4, 3)], {"mode": "bilinear", "size": [7, 5], "align_corners": True})
case("interp_bilinear_down", "interpolate", [randn(1, 1, 8, 6)], {"mode": "bilinear", "size": [3, 4]})
# ---- added later: einsum ellipses (broadcast, summed, implicit, in the middle) -------
case("einsum_ellipsis_batch_mm", "einsum", [randn(2, 3, 4, 5), randn(5, 6)], {"eq": "...ij,jk->...ik"})
case("einsum_ellipsis_broadcast", "einsum", [randn(3, 1, 4, 5), randn(2, 5, 6)], {"eq": "...ij,...jk->...ik"})
case("einsum_ellipsis_summed", "einsum", [randn(2, 3, 4)], {"eq": "...ij->ij"})
case("einsum_ellipsis_implicit", "einsum", [randn(3, 2, 4), randn(3)], {"eq": "ba...,b"})
case("einsum_ellipsis_middle", "einsum", [randn(3, 2, 5, 4)], {"eq": "i...j->j...i"})
# ---- added later: interpolate's bicubic and area modes ----------------------------------
case("interp_bicubic", "interpolate", [randn(1, 2, 4, 5)], {"mode": "bicubic", "size": [7, 9]})
case("interp_bicubic_corners", "interpolate", [randn(1, 1, 3, 4)], {"mode": "bicubic", "size": [5, 6], "align_corners": True})
case("interp_bicubic_down", "interpolate", [randn(1, 1, 8, 7)], {"mode": "bicubic", "size": [3, 4]})
case("interp_bicubic_scale", "interpolate", [randn(2, 1, 3, 3)], {"mode": "bicubic", "scale": [1.5, 2.0]})
case("interp_area", "interpolate", [randn(1, 2, 7, 5)], {"mode": "area", "size": [3, 2]})
case("interp_area_1d", "interpolate", [randn(2, 3, 10)], {"mode": "area", "size": [4]})
case("interp_area_up", "interpolate", [randn(1, 1, 2, 3)], {"mode": "area", "scale": [2.0, 2.0]})
# ---- added later: diagonals, trace, and einsum's repeated letters -------------------------
case("diagonal_main", "diagonal", [randn(3, 4)], {"offset": 0, "dim1": 0, "dim2": 1})
case("diagonal_offset_3d", "diagonal", [randn(2, 4, 3)], {"offset": 1, "dim1": 2, "dim2": 0})
case("diagonal_below", "diagonal", [randn(4, 3, 2)], {"offset": -2, "dim1": 0, "dim2": -2})
case("diagonal_past_the_edge", "diagonal", [randn(2, 3)], {"offset": 3, "dim1": 0, "dim2": 1})
case("trace", "trace", [randn(4, 4)], {})
case("einsum_diagonal", "einsum", [randn(3, 3)], {"eq": "ii->i"})
case("einsum_trace", "einsum", [randn(3, 3)], {"eq": "ii"})
case("einsum_batch_diagonal", "einsum", [randn(2, 3, 3), randn(3)], {"eq": "bii,i->b"})
case("einsum_diagonal_product", "einsum", [randn(3, 3, 4), randn(4, 3)], {"eq": "iij,ji->j"})
# ---- added later: pixel shuffle ------------------------------------------------------------
case("pixel_shuffle", "pixel_shuffle", [randn(2, 8, 3, 2)], {"r": 2})
case("pixel_shuffle_5d", "pixel_shuffle", [randn(2, 1, 9, 2, 3)], {"r": 3})
case("pixel_unshuffle", "pixel_unshuffle", [randn(1, 2, 4, 6)], {"r": 2})
case("pixel_unshuffle_3d", "pixel_unshuffle", [randn(3, 6, 3)], {"r": 3})
# ---- added later: trilinear, 3-D nearest and area, nearest-exact ---------------------------
case("interp_trilinear", "interpolate", [randn(1, 2, 3, 4, 2)], {"mode": "trilinear", "size": [5, 6, 3]})
case("interp_trilinear_corners", "interpolate", [randn(1, 1, 3, 2, 4)],
     {"mode": "trilinear", "size": [4, 3, 5], "align_corners": True})
case("interp_trilinear_scale", "interpolate", [randn(2, 1, 2, 3, 2)], {"mode": "trilinear", "scale": [2.0, 1.5, 2.5]})
case("interp_nearest_3d", "interpolate", [randn(1, 2, 3, 2, 4)], {"mode": "nearest", "scale": [2.0, 1.5, 0.5]})
case("interp_nearest_exact", "interpolate", [randn(1, 2, 5, 7)], {"mode": "nearest-exact", "size": [3, 11]})
case("interp_nearest_exact_1d_scale", "interpolate", [randn(2, 3, 5)], {"mode": "nearest-exact", "scale": [1.7]})
case("interp_nearest_exact_3d", "interpolate", [randn(1, 1, 3, 4, 5)], {"mode": "nearest-exact", "size": [5, 2, 7]})
case("interp_area_3d", "interpolate", [randn(1, 2, 5, 6, 7)], {"mode": "area", "size": [2, 4, 3]})
# ---- added later: trigonometric, hyperbolic, exp/log bases, atan2, fmod, remainder -----------
for op in ["tan", "atan", "sinh", "cosh", "asinh", "expm1", "exp2", "frac"]:
    case(op, op, [randn(3, 4)])
for op in ["asin", "acos", "atanh"]:
    case(op, op, [torch.rand(3, 4) * 1.8 - 0.9])
case("acosh", "acosh", [pos(3, 4) + 1.0])
for op in ["log2", "log10"]:
    case(op, op, [pos(3, 4)])
case("expm1_tiny", "expm1", [torch.tensor([1e-10, -3e-9, 1e-5, 0.0])])
case("atan2_quadrants", "atan2", [torch.tensor([1.0, 1.0, -1.0, -1.0, 0.5]), torch.tensor([2.0, -2.0, -2.0, 2.0, 0.0])])
case("atan2_bcast", "atan2", [randn(3, 4), randn(4)])
case("fmod_signs", "fmod", [randn(3, 4) * 5, torch.tensor([1.5, -1.5, 0.7, -2.5])])
case("remainder_signs", "remainder", [randn(3, 4) * 5, torch.tensor([1.5, -1.5, 0.7, -2.5])])
case("hypot", "hypot", [randn(3, 4), randn(3, 4)])
case("logit", "logit", [torch.rand(3, 4) * 0.98 + 0.01], {})
case("logit_eps", "logit", [torch.tensor([0.0, 1e-4, 0.3, 0.9999, 1.0])], {"eps": 1e-3})
case("nan_to_num", "nan_to_num", [torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5, -2.0])],
     {"nan": 0.5, "posinf": 9.0, "neginf": -7.0})
# ---- added later: grids, products, order statistics, scans, distances ---------------------
case("meshgrid_ij", "meshgrid", [randn(3), randn(2), randn(4)], {"indexing": "ij"})
case("meshgrid_xy", "meshgrid", [randn(3), randn(2)], {"indexing": "xy"})
case("cartesian_prod", "cartesian_prod", [randn(2), randn(3)])
case("rot90_k1", "rot90", [randn(2, 3, 4)], {"k": 1, "dims": [1, 2]})
case("rot90_k_neg3", "rot90", [randn(3, 2, 2)], {"k": -3, "dims": [2, 0]})
case("kron", "kron", [randn(2, 3), randn(3, 2)])
case("kron_pad", "kron", [randn(2), randn(2, 3, 2)])
case("tensordot", "tensordot", [randn(2, 3, 4), randn(4, 3, 5)], {"da": [1, 2], "db": [1, 0]})
case("take_along_dim", "take_along_dim", [randn(3, 4), torch.tensor([[0, 3], [2, 2], [1, 0]])], {"dim": 1})
case("take_along_dim_bcast", "take_along_dim", [randn(2, 1, 4), torch.tensor([[[0], [3], [1]]])], {"dim": 2})
case("take_along_dim_flat", "take_along_dim", [randn(3, 4), torch.tensor([11, 0, 5])], {})
case("block_diag", "block_diag", [randn(2, 3), randn(1), randn(2, 2)])
case("diff_2", "diff", [randn(3, 6)], {"n": 2, "dim": 1})
case("kthvalue", "kthvalue", [randn(3, 7)], {"k": 3, "dim": 1, "keepdim": False})
case("kthvalue_keep_dim0", "kthvalue", [randn(5, 2)], {"k": 5, "dim": 0, "keepdim": True})
case("median_even", "median_dim", [randn(3, 6)], {"dim": 1, "keepdim": False})
case("median_odd", "median_dim", [randn(5, 3)], {"dim": 0, "keepdim": True})
case("quantile_dim", "quantile", [randn(4, 7)], {"q": 0.3, "dim": 1, "keepdim": False})
case("quantile_all_keep", "quantile", [randn(3, 5)], {"q": 0.85, "keepdim": True})
nan_grid = randn(3, 4)
nan_grid[0, 1] = float("nan")
nan_grid[2, 3] = float("nan")
case("nansum", "nansum", [nan_grid.clone()], {"dims": [1], "keepdim": False})
case("nanmean_all", "nanmean", [nan_grid.clone()], {"dims": [], "keepdim": False})
case("cumprod", "cumprod", [randn(3, 9)], {"dim": 1})
case("cumprod_zero", "cumprod", [torch.tensor([[2.0, 0.0, 3.0, -1.5, 0.5]])], {"dim": 1})
case("logcumsumexp", "logcumsumexp", [randn(4, 6) * 10], {"dim": 0})
case("logaddexp", "logaddexp", [randn(3, 4) * 30, randn(4) * 30])
case("xlogy", "xlogy", [torch.tensor([0.0, 1.5, 2.0, 0.0]), torch.tensor([0.0, 0.5, 3.0, 2.0])])
case("cov", "cov", [randn(3, 8)], {"correction": 1})
case("cov_biased_1d", "cov", [randn(6)], {"correction": 0})
case("corrcoef", "corrcoef", [randn(3, 8)])
case("cdist_p2", "cdist", [randn(4, 3), randn(5, 3)], {"p": 2.0})
case("cdist_p2_mm", "cdist", [randn(2, 30, 3), randn(2, 4, 3)], {"p": 2.0})
case("cdist_p1", "cdist", [randn(4, 3), randn(2, 3)], {"p": 1.0})
case("cdist_inf", "cdist", [randn(3, 2), randn(4, 2)], {"p": "inf"})  # JSON has no infinity
case("cdist_p3", "cdist", [randn(3, 2), randn(4, 2)], {"p": 3.0})
case("isin", "isin", [torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([2, 6, 9])], {"invert": False})
case("isin_invert", "isin", [torch.tensor([1, 2, 3, 4]), torch.tensor([2, 4])], {"invert": True})
case("bucketize", "bucketize", [randn(3, 4), torch.tensor([-1.0, 0.0, 0.5, 1.0])], {"right": False})
case("bucketize_right", "bucketize", [torch.tensor([-1.0, 0.0, 0.2, 1.0, 3.0]), torch.tensor([-1.0, 0.0, 0.5, 1.0])],
     {"right": True})
case("searchsorted_rows", "searchsorted", [torch.tensor([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]),
                                             torch.tensor([[3.0, 6.0], [1.0, 4.0]])], {"right": False})
case("trapezoid", "trapezoid", [randn(3, 5)], {"dx": 0.5, "dim": 1})
# ---- added later: lerp, addcmul/addcdiv, addmm/baddbmm, cross, inner, sinc, counting --------
case("lerp", "lerp", [randn(3, 4), randn(3, 4), torch.rand(4)])
case("addcmul", "addcmul", [randn(3, 4), randn(3, 4), randn(4)], {"value": 0.5})
case("addcdiv", "addcdiv", [randn(3, 4), randn(3, 4), pos(3, 4)], {"value": -2.0})
case("addmm", "addmm", [randn(4), randn(3, 5), randn(5, 4)], {"beta": 0.5, "alpha": 2.0})
case("baddbmm", "baddbmm", [randn(2, 3, 4), randn(2, 3, 5), randn(2, 5, 4)], {"beta": 1.5, "alpha": -1.0})
case("cross", "cross", [randn(4, 3), randn(4, 3)], {"dim": -1})
case("cross_dim0_bcast", "cross", [randn(3, 2), randn(3, 1)], {"dim": 0})
case("inner", "inner", [randn(2, 3), randn(4, 3)])
case("sinc", "sinc", [torch.tensor([0.0, 0.3, -1.5, 2.0, 1e-3])])
case("deg2rad", "deg2rad", [randn(3, 4) * 90])
case("bincount", "bincount", [torch.tensor([2, 0, 5, 2, 2])], {"minlength": 8})
case("bincount_weights", "bincount", [torch.tensor([1, 3, 1, 0]), randn(4)], {"minlength": 0}, grad=[False, False])
case("histc", "histc", [randn(50)], {"bins": 7, "min": -1.5, "max": 2.0}, grad=[False])
case("histc_data_range", "histc", [randn(30)], {"bins": 5, "min": 0.0, "max": 0.0}, grad=[False])
case("unique", "unique", [torch.tensor([[3, 1, 3], [7, 1, 2]])])
case("unique_float", "unique", [torch.tensor([0.5, -1.0, 0.5, 2.0, -1.0])], grad=[False])
# ---- added later: running maxima and minima -------------------------------------------------
case("cummax", "cummax", [randn(3, 9)], {"dim": 1})
case("cummin_dim0", "cummin", [randn(6, 2)], {"dim": 0})
case("cummax_ties_nan", "cummax", [torch.tensor([1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan"), 0.0])],
     {"dim": 0}, grad=[False])
# ---- added later: convolutions on the tiled forward kernel (8+ input channels per group,
# stride 1: the shifted GEMMs; more than 128 output channels per group: the unfolded tiles) ---
case("conv2d_shifted_bias", "conv2d", [randn(2, 9, 10, 11), randn(5, 9, 3, 3), randn(5)], dict(cv, padding=1))
case("conv2d_shifted_dilation", "conv2d", [randn(1, 8, 9, 9), randn(3, 8, 3, 2)], dict(cv, padding=2, dilation=2))
case("conv2d_shifted_groups", "conv2d", [randn(2, 16, 6, 7), randn(4, 8, 3, 3), randn(4)], dict(cv, groups=2, padding=1))
case("conv2d_wide_out", "conv2d", [randn(1, 8, 5, 5), randn(130, 8, 3, 3) * 0.1], dict(cv, padding=1), grad=[True, False])
# ---- added later: quantiles of slices holding NaN, and nanquantile -------------------------
nan = float("nan")
q_nan = torch.tensor([[0.5, nan, -1.0, 2.0, 0.25], [3.0, 1.0, -2.0, 0.0, 4.0],
                      [nan, nan, nan, nan, nan], [1.5, -0.5, nan, nan, 2.5]])
case("quantile_nan_rows", "quantile", [q_nan.clone()], {"q": 0.3, "dim": 1, "keepdim": False}, grad=[False])
case("nanquantile_nan_rows", "nanquantile", [q_nan.clone()], {"q": 0.3, "dim": 1, "keepdim": True}, grad=[False])
case("nanquantile_all", "nanquantile", [q_nan.clone()], {"q": 0.9, "keepdim": False}, grad=[False])
case("nanquantile_dim0", "nanquantile", [randn(6, 3)], {"q": 0.65, "dim": 0, "keepdim": False})

# ---- added later: the scatter family (assignments use rows without repeats, so that the
# value landing is not up to the kernel; the reductions repeat indices on purpose) ------------
torch.manual_seed(35)


def rows_perm(rows, n, k):
    return torch.stack([torch.randperm(n)[:k] for _ in range(rows)])


case("scatter", "scatter", [randn(3, 5), rows_perm(3, 5, 4), randn(3, 4)], {"dim": 1})
# PyTorch's backward cannot give a source larger than the index its gradient (its engine
# rejects the index-shaped one), so these check the source's gradient by finite differences
# only (tests/suite/scatter.rs).
case("scatter_src_larger", "scatter", [randn(4, 3), rows_perm(3, 4, 2).t().contiguous(), randn(3, 5)], {"dim": 0},
     grad=[True, False, False])
case("scatter_scalar", "scatter_scalar", [randn(3, 5), rows_perm(3, 5, 2)], {"dim": -1, "value": 2.5})
case("scatter_add_src_larger", "scatter_add", [randn(3, 5), idx(5, 2, 4), randn(3, 6)], {"dim": 1},
     grad=[True, False, False])
for reduce in ["sum", "prod", "mean", "amax", "amin"]:
    for include_self in [True, False]:
        tag = "" if include_self else "_excl"
        case(f"scatter_reduce_{reduce}{tag}", "scatter_reduce", [randn(4, 3), idx(4, 6, 3), randn(6, 3)],
             {"dim": 0, "reduce": reduce, "include_self": include_self})
case("scatter_reduce_amax_dim1", "scatter_reduce", [randn(2, 3, 4), idx(4, 2, 3, 6), randn(2, 3, 6)],
     {"dim": -1, "reduce": "amax", "include_self": True})
# zeros in the product: one in self, a lone one and a pair in the source's targets
zs = torch.tensor([[1.5, 0.0], [-2.0, 0.5], [0.7, 1.2]])
zsrc = torch.tensor([[0.0, 2.0], [3.0, 0.0], [-1.5, 0.0], [0.4, 0.8]])
zi = torch.tensor([[0, 1], [1, 2], [2, 2], [0, 0]])
case("scatter_reduce_prod_zeros", "scatter_reduce", [zs, zi, zsrc], {"dim": 0, "reduce": "prod", "include_self": True})
case("scatter_reduce_prod_zeros_excl", "scatter_reduce", [zs.clone(), zi.clone(), zsrc.clone()],
     {"dim": 0, "reduce": "prod", "include_self": False})
case("scatter_reduce_mean_int", "scatter_reduce", [idx(20, 3, 4) - 10, idx(3, 5, 4), idx(20, 5, 4) - 10],
     {"dim": 0, "reduce": "mean", "include_self": True})
case("scatter_reduce_amin_int_excl", "scatter_reduce", [idx(20, 3, 4) - 10, idx(3, 5, 4), idx(20, 5, 4) - 10],
     {"dim": 0, "reduce": "amin", "include_self": False})
case("index_add", "index_add", [randn(3, 5), torch.tensor([4, 0, 4, 1]), randn(3, 4)], {"dim": 1, "alpha": 1.5})
case("index_add_dim0", "index_add", [randn(4, 2, 3), torch.tensor([3, 3, 0]), randn(3, 2, 3)],
     {"dim": 0, "alpha": 1.0})
case("index_copy", "index_copy", [randn(5, 3), torch.tensor([3, 0, 4]), randn(3, 3)], {"dim": 0})
case("index_fill", "index_fill", [randn(3, 5), torch.tensor([1, 3])], {"dim": 1, "value": -2.0})
case("index_fill_int", "index_fill", [idx(9, 4, 2), torch.tensor([2])], {"dim": 0, "value": 7.0})

# ---- added later: special functions ----------------------------------------------------------
torch.manual_seed(36)
case("lgamma", "lgamma", [pos(3, 4) * 3])
case("lgamma_negative", "lgamma", [torch.tensor([-0.5, -1.3, -2.7, -3.5, 0.02, 15.0, 170.0, 1e-3])])
case("lgamma_poles", "lgamma", [torch.tensor([0.0, -1.0, -2.0, 1.0, 2.0, float("inf")])], grad=[False])
case("digamma", "digamma", [pos(3, 4) * 4])
case("digamma_negative", "digamma", [torch.tensor([-0.5, -1.3, -2.7, -3.25, 0.01, 12.5, 1e4])])
case("digamma_poles", "digamma", [torch.tensor([0.0, -0.0, -1.0, -4.0, float("inf")])], grad=[False])
for n in [0, 1, 2, 3]:
    case(f"polygamma_{n}", "polygamma", [pos(2, 5) * 3], {"n": n})
case("polygamma_1_negative", "polygamma", [torch.tensor([-0.5, -1.25, -2.6])], {"n": 1})
case("erfc", "erfc", [randn(3, 4) * 2])
case("erfc_tail", "erfc", [torch.tensor([5.0, 8.0, 12.0, -6.0, 0.0])])
case("erfinv", "erfinv", [torch.rand(3, 4) * 1.9 - 0.95])
case("erfinv_tails", "erfinv", [torch.tensor([0.99, -0.995, 1e-8, 0.0, 0.75])])
# (nearer 1 the f32 input's rounding moves the answer beyond f32 tolerances, and central
# differences lose their accuracy; kernels/src/special.rs checks 1 - 1e-12 in f64)
case("erfinv_edges", "erfinv", [torch.tensor([1.0, -1.0, 1.5, -2.0, 0.9999, -0.999])], grad=[False])

# ---- added later: take, put, index_put, masked_scatter --------------------------------------
torch.manual_seed(37)
case("take", "take", [randn(3, 4), torch.tensor([[0, 11], [-1, 5]])])
case("put", "put", [randn(3, 4), torch.tensor([1, 7, -2]), randn(3)], {"accumulate": False})
case("put_accumulate", "put", [randn(3, 4), torch.tensor([1, 7, 1, 0]), randn(2, 2)], {"accumulate": True})
case("index_put_rows", "index_put", [randn(4, 3), torch.tensor([2, 0]), randn(2, 3)],
     {"n_idx": 1, "accumulate": False})
case("index_put_pairs_acc", "index_put", [randn(4, 3, 2), torch.tensor([[1], [3]]), torch.tensor([0, 2, 0]),
                                          randn(2, 3, 2)], {"n_idx": 2, "accumulate": True})
case("index_put_broadcast_value", "index_put", [randn(4, 3), torch.tensor([3, 1]), torch.tensor([0, 2]),
                                                randn(1)], {"n_idx": 2, "accumulate": False})
case("masked_scatter", "masked_scatter", [randn(3, 4), randn(3, 4), randn(14)])

# ---- added later: torch.linalg ----------------------------------------------------------------
torch.manual_seed(38)


def wellcond(*shape):
    n = shape[-1]
    return torch.randn(*shape) + 0.5 * n * torch.eye(n)


case("linalg_cholesky", "linalg_cholesky", [randn(4, 4)], {"upper": False})
case("linalg_cholesky_upper_batch", "linalg_cholesky", [randn(2, 3, 3)], {"upper": True})
case("linalg_solve", "linalg_solve", [wellcond(4, 4), randn(4, 2)])
case("linalg_solve_vector_batch", "linalg_solve", [wellcond(2, 3, 3), randn(2, 3)])
case("linalg_solve_broadcast", "linalg_solve", [wellcond(3, 3), randn(2, 3, 2)])
case("linalg_solve_t", "linalg_solve", [wellcond(3, 3), randn(3, 2)], views=["t", None])
for upper in [False, True]:
    for left in [True, False]:
        for unit in [False, True]:
            tag = f"{'u' if upper else 'l'}{'' if left else '_right'}{'_unit' if unit else ''}"
            rhs = randn(3, 2) if left else randn(2, 3)
            case(f"linalg_solve_triangular_{tag}", "linalg_solve_triangular", [wellcond(3, 3), rhs],
                 {"upper": upper, "left": left, "unit": unit})
case("linalg_solve_triangular_batch", "linalg_solve_triangular", [wellcond(2, 3, 3), randn(3, 4)],
     {"upper": False, "left": True, "unit": False})
case("linalg_inv", "linalg_inv", [wellcond(2, 4, 4)])
case("linalg_det", "linalg_det", [randn(3, 3, 3)])
case("linalg_slogdet", "linalg_slogdet", [randn(2, 4, 4)])
spd = randn(3, 3)
case("logdet", "logdet", [spd @ spd.mT + torch.eye(3)])
case("linalg_qr_tall", "linalg_qr", [randn(5, 3)], {"mode": "reduced"})
case("linalg_qr_wide", "linalg_qr", [randn(3, 5)], {"mode": "reduced"})
case("linalg_qr_square_batch", "linalg_qr", [randn(2, 3, 3)], {"mode": "reduced"})
case("linalg_qr_complete_wide", "linalg_qr", [randn(2, 3, 4)], {"mode": "complete"})
case("linalg_eigh", "linalg_eigh", [randn(4, 4)])
case("linalg_eigh_batch", "linalg_eigh", [randn(2, 3, 3)])
case("linalg_eigvalsh", "linalg_eigvalsh", [randn(2, 4, 4)])
case("linalg_svd_tall", "linalg_svd", [randn(5, 3)], {"full": False})
case("linalg_svd_wide_batch", "linalg_svd", [randn(2, 3, 4)], {"full": False})
case("linalg_svd_full_tall", "linalg_svd", [randn(4, 3)], {"full": True})
case("linalg_svdvals", "linalg_svdvals", [randn(2, 4, 3)])
case("linalg_pinv_tall", "linalg_pinv", [randn(4, 3)])
case("linalg_pinv_wide_batch", "linalg_pinv", [randn(2, 2, 4)])
for ordname in ["fro", "nuc", "2", "m2", "1", "m1", "inf", "minf"]:
    case(f"linalg_matrix_norm_{ordname}", "linalg_matrix_norm", [randn(3, 4)], {"ord": ordname})
torch.manual_seed(39)
case("linalg_lstsq", "linalg_lstsq", [randn(5, 3), randn(5, 2)])
case("linalg_lstsq_batch", "linalg_lstsq", [randn(2, 4, 3), randn(2, 4, 1)])
case("cholesky_solve", "cholesky_solve", [randn(3, 3), randn(3, 2)], {"upper": False})
case("cholesky_solve_upper_batch", "cholesky_solve", [randn(2, 3, 3), randn(2, 3, 2)], {"upper": True})
case("cholesky_inverse", "cholesky_inverse", [randn(4, 4)], {"upper": False})
case("linalg_matrix_power_3", "linalg_matrix_power", [randn(2, 3, 3) * 0.5], {"n": 3})
case("linalg_matrix_power_m2", "linalg_matrix_power", [wellcond(3, 3)], {"n": -2})
case("linalg_multi_dot_vectors", "linalg_multi_dot", [randn(3), randn(3, 4), randn(4, 5), randn(5)])
case("linalg_multi_dot", "linalg_multi_dot", [randn(2, 6), randn(6, 3), randn(3, 4)])
torch.manual_seed(40)
case("linalg_lu", "linalg_lu", [randn(4, 4)])
case("linalg_lu_batch", "linalg_lu", [randn(2, 3, 3)])
case("linalg_lu_tall", "linalg_lu", [randn(5, 3)])
case("linalg_lu_wide", "linalg_lu", [randn(3, 5)])
case("linalg_lu_factor", "linalg_lu_factor", [randn(2, 4, 4)])
case("linalg_lu_factor_tall", "linalg_lu_factor", [randn(5, 3)])
case("linalg_lu_solve", "linalg_lu_solve", [wellcond(4, 4), randn(4, 2)])
case("linalg_lu_solve_batch", "linalg_lu_solve", [wellcond(2, 3, 3), randn(2, 3, 1)])
torch.manual_seed(41)
case("linalg_matrix_exp", "linalg_matrix_exp", [randn(3, 3) * 0.3])
case("linalg_matrix_exp_scaled_batch", "linalg_matrix_exp", [randn(2, 4, 4) * 3])

# ---- torch.special: Bessel functions and the normal distribution's tails --------------------
torch.manual_seed(42)
T = torch.tensor
case("i0", "i0", [randn(3, 4) * 3])
case("i0_far", "i0", [T([-31.0, -29.9, 29.5, 30.5])])
case("i0e", "i0e", [randn(3, 4) * 5])
case("i0e_far", "i0e", [T([-1000.0, -35.0, 0.0, 30.5, 1e4])])
case("i1", "i1", [randn(3, 4) * 3])
case("i1_far", "i1", [T([-31.0, -29.9, 29.5, 30.5])])
case("i1_zero", "i1", [T([0.0, 1e-3, -2.0])])
case("i1e", "i1e", [randn(3, 4) * 5])
case("i1e_far_and_zero", "i1e", [T([-1000.0, -35.0, 0.0, 30.5, 1e4])])
case("erfcx", "erfcx", [randn(3, 4).abs() * 3 - 1])
case("erfcx_tails", "erfcx", [T([-1e-3, 9.99, 10.5, 50.0, 1e4])])
case("erfcx_left", "erfcx", [T([-5.0, -4.0])])
case("ndtr", "ndtr", [randn(3, 4) * 2])
case("ndtr_tails", "ndtr", [T([-40.0, -10.0, 0.0, 5.0, 40.0])])
case("log_ndtr", "log_ndtr", [randn(3, 4) * 3])
case("log_ndtr_tails", "log_ndtr", [T([-40.0, -1.5, -1.0, -0.5, 0.0, 8.0, 40.0])])
case("ndtri", "ndtri", [torch.rand(3, 4) * 0.98 + 0.01])
case("ndtri_tails", "ndtri", [T([1e-3, 0.5, 0.9990234375, 0.3])])
case("ndtri_deep", "ndtri", [T([1e-30, 1e-10])])
case("ndtri_edges", "ndtri", [T([0.0, 1.0, -0.5, 1.5])], grad=[False])
for p in (1, 3, 5):
    case(f"mvlgamma_{p}", "mvlgamma", [pos(3, 4) * 3 + (p - 1) / 2 + 0.1], {"p": p})
for reduce in ("prod", "mean", "amax", "amin"):
    for include_self in (True, False):
        tag = "" if include_self else "_excl"
        case(f"index_reduce_{reduce}{tag}", "index_reduce", [randn(5, 3), idx(5, 6), randn(6, 3)],
             {"dim": 0, "reduce": reduce, "include_self": include_self}, grad=[True, False, True])
case("index_reduce_amax_dim1", "index_reduce", [randn(2, 4, 3), idx(4, 5), randn(2, 5, 3)],
     {"dim": 1, "reduce": "amax", "include_self": True}, grad=[True, False, True])
case("index_reduce_mean_int", "index_reduce", [idx(20, 4, 3) - 10, idx(4, 5), idx(20, 5, 3) - 10],
     {"dim": 0, "reduce": "mean", "include_self": True})
case("zeta", "zeta", [pos(3, 4) + 1.1, pos(3, 4)], grad=[False, True])
case("zeta_broadcast", "zeta", [pos(3, 1) + 1.5, pos(1, 4) * 3], grad=[False, True])
case("zeta_edges", "zeta", [T([1.0, 0.5, 2.0, 3.0]), T([1.0, 1.0, -1.0, -1.5])], grad=[False, False])
case("var_mean_dims", "var_mean_dims", [randn(3, 5)], {"dims": [1], "correction": 1, "keepdim": False})
case("std_mean_dims_c0", "std_mean_dims", [randn(4, 3)], {"dims": [0], "correction": 0, "keepdim": True})
nan = float("nan")
case("nanmedian_dim", "nanmedian_dim", [T([[1.0, nan, 3.0, 2.0, 0.5], [4.0, 1.0, nan, nan, 2.0]])],
     {"dim": 1, "keepdim": False})
case("nanmedian_dim0_keep", "nanmedian_dim", [randn(4, 3)], {"dim": 0, "keepdim": True})
case("nanmedian_all_nan", "nanmedian_dim", [T([[nan, nan], [1.0, 2.0]])], {"dim": 1, "keepdim": False},
     grad=[False])
case("linalg_lstsq_full_tall", "linalg_lstsq_full", [randn(2, 5, 3), randn(2, 5, 2)])
case("linalg_lstsq_full_wide", "linalg_lstsq_full", [randn(3, 5), randn(3, 2)])
case("fractional_max_pool2d", "fractional_max_pool2d", [randn(2, 3, 9, 10), torch.rand(2, 3, 2)],
     {"kernel": [2, 2], "output": [4, 5]}, grad=[True, False])
case("fractional_max_pool2d_unbatched", "fractional_max_pool2d", [randn(2, 7, 7), torch.rand(1, 2, 2)],
     {"kernel": [3, 2], "output": [3, 4]}, grad=[True, False])
case("fractional_max_pool2d_single_row", "fractional_max_pool2d", [randn(1, 2, 5, 6), torch.rand(1, 2, 2)],
     {"kernel": [3, 2], "output": [1, 3]}, grad=[True, False])
case("linalg_det_singular", "linalg_det", [T([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, -1.0]])])
case("linalg_det_rank_one", "linalg_det", [T([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [-1.0, -2.0, -3.0]])])
case("linalg_det_batch_with_singular", "linalg_det",
     [torch.stack([randn(3, 3), T([[2.0, 1.0, 0.0], [4.0, 2.0, 0.0], [1.0, 3.0, 5.0]])])])
for pad, align in (("zeros", False), ("border", True), ("reflection", False), ("reflection", True)):
    case(f"grid_sample_bicubic_{pad}{'_align' if align else ''}", "grid_sample",
         [randn(2, 2, 4, 5), torch.rand(2, 3, 4, 2) * 2.6 - 1.3],
         {"mode": "bicubic", "padding": pad, "align": align})
case("entr", "entr", [pos(3, 4)])
case("entr_edges", "entr", [T([0.0, -1.0, 0.5, float("inf")])], grad=[False])
case("xlog1py", "xlog1py", [T([0.0, 1.5, 2.0, 0.0, -0.5]), T([0.5, 0.5, 3.0, 2.0, -0.25])])
case("xlog1py_broadcast", "xlog1py", [randn(3, 1), pos(1, 4)])
case("xlog1py_edges", "xlog1py", [T([0.0, 0.0, 1.0]), T([-1.0, float("nan"), -1.0])], grad=[False, False])
# ELU's family near 0 from below: e^x - 1 would keep only exp's rounding there.
tiny = [-1e-6, -3e-9, -1e-12, 0.0, 2e-7, -0.5]
case("elu_tiny", "elu", [T(tiny)], {"alpha": 1.0})
case("celu_tiny", "celu", [T(tiny)], {"alpha": 2.0})
case("selu_tiny", "selu", [T(tiny)])
# Rows long enough for the row kernels' 16 lanes and their tails; ties
# (rounded values) pick the first index.
case("logsumexp_rows", "logsumexp", [randn(3, 37) * 30], {"dims": [-1], "keepdim": True})
case("logsumexp_rows_t", "logsumexp", [randn(37, 3)], {"dims": [1], "keepdim": False}, views=["t"])
case("max_dim_rows_ties", "max_dim", [randn(4, 37).round()], {"dim": 1, "keepdim": False})
case("min_dim_rows_ties", "min_dim", [randn(4, 37).round()], {"dim": -1, "keepdim": True})
# Products: odd lengths carry an element to the next halving level; one
# zero in a row gets the product of the others, two get nothing.
case("prod_dim", "prod_dim", [randn(3, 7)], {"dim": 1, "keepdim": False})
case("prod_dim_keep_t", "prod_dim", [randn(5, 4)], {"dim": 0, "keepdim": True}, views=["t"])
case("prod_dim_zeros", "prod_dim",
     [T([[2.0, 0.0, 3.0, -1.5, 0.5], [0.0, 1.0, 0.0, 2.0, 4.0], [1.0, -2.0, 0.5, 3.0, 0.0]])],
     {"dim": -1, "keepdim": False})
case("prod_all", "prod", [randn(2, 3, 5) * 0.5 + 1.0])
case("prod_int", "prod_dim", [torch.tensor([[3, -2, 5], [7, 0, 1]])], {"dim": 1, "keepdim": False})
case("amin", "amin", [T([[1.0, -3.0, -3.0], [2.0, 0.0, -1.0]])], {"dim": 1, "keepdim": False})
case("amin_keep_t", "amin", [randn(4, 3)], {"dim": 0, "keepdim": True}, views=["t"])
# PyTorch names a tapir session found missing (2026-12-07).
nan, inf = float("nan"), float("inf")
case("fmax", "fmax", [randn(3, 4), randn(1, 4)])
case("fmin", "fmin", [randn(3, 4), randn(3, 1)])
case("fmax_nan", "fmax", [T([1.0, nan, 3.0, -2.0]), T([2.0, 5.0, nan, -3.0])])
case("fmin_nan", "fmin", [T([1.0, nan, 3.0, -2.0]), T([2.0, 5.0, nan, -3.0])])
case("fmax_ties", "fmax", [T([1.0, 2.0, -1.0]), T([1.0, 0.5, -1.0])])
case("fmax_both_nan", "fmax", [T([nan, 1.0]), T([nan, 2.0])], grad=[False, False])
case("logaddexp2", "logaddexp2", [randn(3, 4) * 4, randn(1, 4) * 4])
case("logaddexp2_edges", "logaddexp2", [T([inf, -inf, -inf, 1000.0, 2.0]), T([inf, -inf, 3.0, 1000.0, inf])],
     grad=[False, False])
quotients = [T([7.0, -7.0, 7.0, -7.0, 0.5, -0.5, 5.0, -5.0, 1.0, -1.0, 0.0, 3.0, inf, 6.0]),
             T([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, inf, inf, 0.0, 0.0, -4.0, 0.1, 2.0, 1.5])]
for mode in ("floor", "trunc"):
    case(f"div_{mode}", "div_rounding", [q.clone() for q in quotients], {"mode": mode}, grad=[False, False])
    case(f"div_{mode}_random", "div_rounding", [randn(4, 5) * 10, randn(1, 5) * 3], {"mode": mode},
         grad=[False, False])
    case(f"div_{mode}_int", "div_rounding", [torch.tensor([7, -7, 7, -7, 0, 9, -9]),
                                           torch.tensor([2, 2, -2, -2, 3, -4, 4])], {"mode": mode})
case("diag_vector", "diag", [randn(3)], {"offset": 0})
case("diag_vector_above", "diag", [randn(3)], {"offset": 1})
case("diag_vector_below", "diag", [randn(2)], {"offset": -2})
case("diag_matrix", "diag", [randn(4, 3)], {"offset": 1}, views=["t"])
case("mv", "mv", [randn(3, 4), randn(4)])
for p in (2.0, 1.0, 3.0, "inf"):  # JSON has no infinity: the string
    case(f"dist_p{p}", "dist", [randn(3, 4), randn(1, 4)], {"p": p})
case("hstack", "hstack", [randn(2, 3), randn(2, 1)])
case("hstack_vectors", "hstack", [randn(3), randn(2)])
case("vstack", "vstack", [randn(3), randn(2, 3)])
case("dstack", "dstack", [randn(2, 3), randn(2, 3, 2)])
case("column_stack", "column_stack", [randn(3), randn(3, 2)])
case("tensor_split_sections", "tensor_split", [randn(7, 2)], {"at": 3, "dim": 0})
case("tensor_split_indices", "tensor_split", [randn(2, 6)], {"at": [1, 4, 9], "dim": 1})
case("isclose", "isclose", [T([1.0, 1.0, inf, inf, nan, 0.0, 1e-9, 100.0]),
                            T([1.0 + 1e-6, 1.1, inf, -inf, nan, 1e-8, 0.0, 100.001])],
     {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}, grad=[False, False])
case("isclose_equal_nan", "isclose", [T([nan, 1.0, nan]), T([nan, nan, 1.0])],
     {"rtol": 0.0, "atol": 0.0, "equal_nan": True}, grad=[False, False])
case("isposinf", "isposinf", [T([inf, -inf, nan, 1.0])], grad=[False])
case("isneginf", "isneginf", [T([inf, -inf, nan, 1.0])], grad=[False])
# PyTorch names a tapir session found missing (2026-12-07, second round).
case("tensor_unfold", "tensor_unfold", [randn(3, 10)], {"dim": 1, "size": 4, "step": 3})
case("tensor_unfold_gap_t", "tensor_unfold", [randn(9, 2)], {"dim": 0, "size": 2, "step": 3}, views=["t"])
case("tensor_unfold_dense", "tensor_unfold", [randn(2, 5, 3)], {"dim": -2, "size": 5, "step": 1})
case("copysign", "copysign", [randn(3, 4), randn(1, 4)])
case("copysign_zeros", "copysign", [T([0.0, 2.0, -3.0, 0.0, 1.5]), T([-1.0, -0.0, 0.0, 0.0, nan])])
case("signbit", "signbit", [T([-1.0, 0.0, -0.0, 2.0, -inf, nan])], grad=[False])
case("heaviside", "heaviside", [T([-1.5, 0.0, -0.0, 2.0, nan]), T([0.25])], grad=[False, False])
case("float_power", "float_power", [pos(3, 4), randn(1, 4)])
case("aminmax", "aminmax", [randn(3, 5)])
case("aminmax_dim", "aminmax", [randn(4, 3)], {"dim": 0, "keepdim": True}, views=["t"])
case("aminmax_ties", "aminmax", [T([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])], {"dim": 1, "keepdim": False})
case("diag_embed", "diag_embed", [randn(2, 3)], {"offset": 0, "dim1": -2, "dim2": -1})
case("diag_embed_swapped", "diag_embed", [randn(2, 3)], {"offset": -1, "dim1": 2, "dim2": 0})
case("diagflat", "diagflat", [randn(2, 2)], {"offset": 1})
case("diagonal_scatter", "diagonal_scatter", [randn(3, 4), randn(3)], {"offset": 0, "dim1": 0, "dim2": 1})
case("diagonal_scatter_batched", "diagonal_scatter", [randn(2, 3, 4), randn(3, 2)],
     {"offset": -1, "dim1": 2, "dim2": 0})
case("slice_scatter", "slice_scatter", [randn(5, 3), randn(2, 3)], {"dim": 0, "start": 1, "end": 5, "step": 2})
case("slice_scatter_negative", "slice_scatter", [randn(2, 6), randn(2, 3)],
     {"dim": -1, "start": -4, "end": -1, "step": 1})
case("select_scatter", "select_scatter", [randn(3, 4), randn(3)], {"dim": 1, "index": -2})
case("addmv", "addmv", [randn(3), randn(3, 4), randn(4)], {"beta": 0.5, "alpha": -2.0})
case("addr", "addr", [randn(3, 1), randn(3), randn(2)], {"beta": 2.0, "alpha": 0.5})
case("addbmm", "addbmm", [randn(2, 2), randn(3, 2, 4), randn(3, 4, 2)], {"beta": 1.0, "alpha": 1.5})
case("fliplr", "fliplr", [randn(2, 3, 2)])
case("flipud", "flipud", [randn(3, 2)])
case("msort", "msort", [randn(4, 3)])
case("split_with_sizes", "split_with_sizes", [randn(6, 2)], {"sizes": [1, 0, 3, 2], "dim": 0})
case("hsplit", "hsplit", [randn(2, 6)], {"at": 3})
case("vsplit_indices", "vsplit", [randn(5, 2)], {"at": [2, 3]})
case("dsplit", "dsplit", [randn(2, 1, 4)], {"at": 2})
ints = torch.tensor([[-13, 0, 7, 255], [-1, 64, 1 << 40, -(1 << 62)]])
for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm"):
    case(op, op, [ints.clone(), torch.tensor([[6, -9, 0, 12], [3, 48, -6, 5]])])
case("bitwise_not", "bitwise_not", [ints.clone()])
case("bitwise_shifts_left", "bitwise_left_shift", [ints.clone(), torch.tensor([[1, 3, 63, 64], [-1, 0, 20, 1]])])
case("bitwise_shifts_right", "bitwise_right_shift", [ints.clone(), torch.tensor([[1, 3, 63, 64], [-1, 0, 20, 70]])])
case("bitwise_broadcast", "bitwise_xor", [ints.clone(), torch.tensor([[5], [-2]])])
case("mode", "mode", [T([[1.0, 2.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 0.0], [7.0, 7.0, 7.0, 1.0, 7.0]])],
     {"dim": 1, "keepdim": False})
case("mode_keep_t", "mode", [randn(3, 4).round()], {"dim": 0, "keepdim": True}, views=["t"])
case("mode_nan", "mode", [T([3.0, nan, nan, 1.0])], {"dim": 0, "keepdim": False})
case("mode_int", "mode", [torch.tensor([[2, 2, 9, 9, 9], [4, -1, 4, -1, 0]])], {"dim": -1, "keepdim": True})
case("unique_consecutive", "unique_consecutive", [torch.tensor([[1, 1, 2, 2], [3, 1, 1, 2]])])
case("unique_consecutive_nan", "unique_consecutive", [T([1.0, 1.0, nan, nan, -0.0, 0.0])], grad=[False])
case("ldexp", "ldexp", [randn(3, 4), torch.tensor([[-3, 0, 2, 7]])], grad=[True, False])
case("ldexp_float_exponent", "ldexp", [randn(2, 3), randn(2, 1)])
case("sum_to_size", "sum_to_size", [randn(2, 3, 4)], {"shape": [3, 1]})

os.makedirs(OUT, exist_ok=True)
save_file(tensors, os.path.join(OUT, "core.safetensors"))
with open(os.path.join(OUT, "core.json"), "w") as f:
    json.dump({"torch": torch.__version__, "cases": manifest}, f, indent=0)
ops = sorted({c["op"] for c in manifest})
print(f"{len(manifest)} cases over {len(ops)} ops -> {OUT}", file=sys.stderr)
