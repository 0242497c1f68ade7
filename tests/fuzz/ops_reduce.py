"""Reduction-like op builders: sum/mean/prod/amax/.../var_mean over random dims (non-innermost,
several, keepdim), softmax/log_softmax over any dim, layer_norm, cumsum, matmul/mm/bmm."""
from __future__ import annotations

import torch

from .ops_common import dims_text, dtype_name, is_float, need, ranked, shape_text
from .oppool import op

# name: (rounds, jumps, takes a list of dims)
REDUCTIONS = {
    "sum": (True, False, True), "mean": (True, False, True), "prod": (True, False, False),
    "amax": (False, False, True), "amin": (False, False, True), "max": (False, False, False),
    "min": (False, False, False), "argmax": (False, True, False), "argmin": (False, True, False),
    "var": (True, False, True), "std": (True, False, True), "any": (False, True, True),
    "all": (False, True, True), "logsumexp": (True, False, True), "nansum": (True, False, True),
}


def _keepdim(builder) -> str:
    return builder.choice(["", "", ", keepdim=True", ", keepdim=False"])


@op("reduce", 10)
def reduction(builder):
    name = builder.choice(REDUCTIONS)
    rounds, jumps, many_dims = REDUCTIONS[name]
    x = need(builder.pick())
    tensor = builder.tensor(x)
    form = builder.weighted({"all": 1, "dim": 3, "dims": 2 if many_dims else 0})
    if name == "logsumexp" and form == "all":
        form = "dim"
    if form == "all":
        text = f"{x}.{name}()" if builder.chance(0.7) else f"torch.{name}({x})"
    elif form == "dim":
        dim = builder.dim(tensor)
        text = f"{x}.{name}({dim}{_keepdim(builder)})" if builder.chance(0.6) else \
            f"torch.{name}({x}, dim={dim}{_keepdim(builder)})"
    else:
        text = f"{x}.{name}({dims_text(builder.dims(tensor))}{_keepdim(builder)})"
    if name in ("var", "std") and builder.chance(0.4):
        text = text[:-1] + (", " if not text.endswith("()") else "") + builder.choice(
            ["correction=0)", "unbiased=False)", "correction=2)"])
    if name == "sum" and builder.chance(0.1):
        text = text[:-1] + (", " if not text.endswith("()") else "") + f"dtype={dtype_name(torch.float64)})"
    if name in ("max", "min") and form == "dim":
        # max(dim) returns (values, indices)
        if builder.chance(0.5):
            return builder.emit(text, f"{name}_dim", count=2, rounds=(False, False), jumps=(False, True))
        field = builder.choice(["values", "indices"])
        return builder.emit(f"{text}.{field}", f"{name}_dim", rounds=False, jumps=field == "indices")
    return builder.emit(text, name, rounds=rounds, jumps=jumps)


@op("reduce", 3)
def var_mean(builder):
    x = need(builder.pick(is_float) or builder.pick())
    tensor = builder.tensor(x)
    function = builder.choice(["var_mean", "std_mean"])
    arguments = builder.choice(["", f", {builder.dim(tensor)}", f", {dims_text(builder.dims(tensor))}"])
    arguments += builder.choice(["", ", correction=0", ", keepdim=True", ", unbiased=False"])
    return builder.emit(f"torch.{function}({x}{arguments})", function, count=2)


@op("softmax", 4)
def softmax(builder):
    x = need(builder.pick(is_float) or builder.pick())
    dim = builder.dim(builder.tensor(x))
    name = builder.choice(["softmax", "log_softmax"])
    text = builder.choice([f"{x}.{name}({dim})", f"torch.{name}({x}, {dim})", f"F.{name}({x}, dim={dim})",
                           f"F.{name}({x}, dim={dim}, dtype=torch.float32)"])
    return builder.emit(text, name)


@op("norm", 2)
def layer_norm(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    count = builder.rng.randint(1, min(2, tensor.dim()))
    normalized = tuple(tensor.shape[-count:])
    affine = builder.weighted({"none": 2, "weight": 1, "both": 2})
    arguments = ""
    if affine != "none":
        weight = builder.new_input(normalized, tensor.dtype)
        arguments = f", {weight}"
        if affine == "both":
            arguments += f", {builder.new_input(normalized, tensor.dtype)}"
    eps = builder.choice(["", "", ", eps=1e-3"])
    shape = shape_text(normalized) if builder.chance(0.7) else f"{x}.shape[-{count}:]"
    return builder.emit(f"F.layer_norm({x}, {shape}{arguments}{eps})", "layer_norm")


@op("cumsum", 2)
def cumsum(builder):
    x = need(builder.pick())
    dim = builder.dim(builder.tensor(x))
    text = builder.choice([f"{x}.cumsum({dim})", f"torch.cumsum({x}, dim={dim})",
                           f"{x}.cumsum({dim}, dtype=torch.float64)"])
    return builder.emit(text, "cumsum")


@op("matmul", 3)
def matmul(builder):
    x = need(builder.pick(ranked(1, 3)))
    tensor = builder.tensor(x)
    rank = tensor.dim()
    inner = tensor.shape[-1]
    if rank == 1:
        y = builder.pick(lambda t: t.dim() in (1, 2) and t.shape[0] == inner and t.dtype == tensor.dtype, exclude=(x,))
        y = y or builder.new_input((inner, builder.choice([1, 3, 5])) if builder.chance(0.5) else (inner,), tensor.dtype)
        return builder.emit(builder.choice([f"{x} @ {y}", f"torch.matmul({x}, {y})"]), "matmul")
    if builder.chance(0.25):
        other = f"{x}.transpose(-1, -2)" if rank == 3 else f"{x}.t()"
        return builder.emit(builder.choice([f"{x} @ {other}", f"{other} @ {x}"]), "matmul")
    columns = builder.choice([1, 2, 3, 5, 8, 16])
    batch = tuple(tensor.shape[:-2])
    wanted = batch + (inner, columns)
    y = builder.pick(lambda t: tuple(t.shape[:-1]) == batch + (inner,) and t.dtype == tensor.dtype, exclude=(x,))
    y = y or builder.new_input(wanted, tensor.dtype)
    if rank == 2:
        text = builder.choice([f"{x} @ {y}", f"torch.mm({x}, {y})", f"torch.matmul({x}, {y})"])
    else:
        text = builder.choice([f"{x} @ {y}", f"torch.bmm({x}, {y})", f"torch.matmul({x}, {y})"])
    return builder.emit(text, "matmul")
