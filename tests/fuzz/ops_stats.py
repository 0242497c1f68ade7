"""Op builders of issue 32's bug classes, in families only the "stats" and "intmm" modes draw:

  intmm      matrix products of integer tensors with scalar beta/alpha (addmm, addmv, baddbmm,
             addbmm; mm, bmm, matmul): eager converts a float factor to the integer dtype
             (beta=0.5 on int8 adds 0 * bias and stays int8)
  stats      var/std/var_mean/std_mean of equal values (rows of an expanded input, a value
             broadcast along a dim, a statistic of a statistic: var of var) and their gradients,
             which must be exactly 0 where eager's are
  normview   batch_norm/layer_norm/instance_norm/group_norm of selected, sliced, narrowed or
             transposed views, then reductions of the normalized values
"""
from __future__ import annotations

import torch

from .inputs import INT_DTYPES
from .ops_common import dims_text, dtype_name, is_float, is_int, need, ranked, shape_text
from .oppool import op

# Scalar factors: integers, floats that truncate to another integer (0.5 -> 0, -1.5 -> -1), 0.
FACTORS = ("1", "2", "-1", "0", "0.5", "1.5", "-1.5", "2.7", "0.25", "3")


def _factors(builder, tensor) -> str:
    text = ""
    if builder.chance(0.8):
        text += f", beta={builder.choice(FACTORS)}"
    if builder.chance(0.6):
        text += f", alpha={builder.choice(FACTORS)}"
    return text


def _int_dtype(builder, tensor=None) -> torch.dtype:
    if tensor is not None and tensor.dtype in INT_DTYPES:
        return tensor.dtype
    return builder.weighted({torch.int8: 3, torch.uint8: 2, torch.int16: 2, torch.int32: 2, torch.int64: 3})


def _matrix(builder, shape, dtype) -> str:
    """A value of this shape and dtype at hand, else a new input."""
    found = builder.pick(lambda t: tuple(t.shape) == tuple(shape) and t.dtype == dtype)
    return found or builder.new_input(shape, dtype)


@op("intmm", 4)
def addmm_like(builder):
    x = builder.pick(lambda t: is_int(t) and t.dim() in (1, 2, 3) and t.numel() > 0)
    tensor = builder.tensor(x) if x else None
    dtype = _int_dtype(builder, tensor)
    if builder.chance(0.1):
        dtype = builder.choice([torch.float32, torch.float64])  # the same forms on floats
    name = builder.weighted({"addmm": 5, "addmv": 2, "baddbmm": 3, "addbmm": 2})
    sizes = [builder.choice([1, 2, 3, 5, 8, 16, 33]) for _ in range(4)]
    batch, n, k, m = sizes[0], sizes[1], sizes[2], sizes[3]
    if name == "addmm":
        a, b = _matrix(builder, (n, k), dtype), _matrix(builder, (k, m), dtype)
        bias_shape = builder.choice([(n, m), (m,), (1, m), (n, 1), ()])
        out = f"torch.addmm({{bias}}, {a}, {b}{{factors}})"
    elif name == "addmv":
        a, b = _matrix(builder, (n, k), dtype), _matrix(builder, (k,), dtype)
        bias_shape = builder.choice([(n,), (1,), ()])
        out = f"torch.addmv({{bias}}, {a}, {b}{{factors}})"
    elif name == "baddbmm":
        a, b = _matrix(builder, (batch, n, k), dtype), _matrix(builder, (batch, k, m), dtype)
        bias_shape = builder.choice([(batch, n, m), (n, m), (m,), (batch, 1, m)])
        out = f"torch.baddbmm({{bias}}, {a}, {b}{{factors}})"
    else:
        a, b = _matrix(builder, (batch, n, k), dtype), _matrix(builder, (batch, k, m), dtype)
        bias_shape = builder.choice([(n, m), (m,), (1, m)])
        out = f"torch.addbmm({{bias}}, {a}, {b}{{factors}})"
    bias = _matrix(builder, bias_shape, dtype)
    text = out.format(bias=bias, factors=_factors(builder, builder.tensor(a)))
    if builder.chance(0.3):
        text = f"{text}.float()"  # a conversion right after shows the dtype's wrapping
    return builder.emit(text, name, rounds=not text.endswith(".float()") and dtype.is_floating_point)


@op("intmm", 2)
def int_product(builder):
    x = builder.pick(lambda t: is_int(t) and t.dim() in (2, 3) and t.numel() > 0)
    dtype = _int_dtype(builder, builder.tensor(x) if x else None)
    if x is None:
        x = builder.new_input((builder.choice([2, 3, 8]), builder.choice([3, 5, 16])), dtype)
    tensor = builder.tensor(x)
    inner = tensor.shape[-1]
    y = _matrix(builder, tuple(tensor.shape[:-2]) + (inner, builder.choice([1, 4, 7])), tensor.dtype)
    function = "torch.mm" if tensor.dim() == 2 else "torch.bmm"
    text = builder.choice([f"{function}({x}, {y})", f"{x} @ {y}", f"torch.matmul({x}, {y})"])
    return builder.emit(text, "int_matmul", rounds=False)


# ---- statistics of equal values ------------------------------------------------------------------
STATISTICS = ("var", "std", "var_mean", "std_mean")
CORRECTIONS = ("", ", unbiased=False", ", unbiased=True", ", correction=0", ", correction=2")


def _statistic(builder, x: str, dims: str) -> object:
    name = builder.weighted({"var": 5, "std": 2, "var_mean": 2, "std_mean": 1})
    keepdim = builder.choice(["", "", ", keepdim=True"])
    correction = builder.choice(CORRECTIONS)
    if name in ("var", "std") and builder.chance(0.5):
        text = f"{x}.{name}({dims}{correction}{keepdim})"
    else:
        text = f"torch.{name}({x}, {dims}{correction}{keepdim})"
    if name in ("var_mean", "std_mean"):
        if builder.chance(0.5):
            return builder.emit(f"{text}[{builder.choice([0, 1])}]", name)
        return builder.emit(text, name, count=2)
    return builder.emit(text, name)


def _float_rows(tensor) -> bool:
    return is_float(tensor) and tensor.dim() >= 1 and tensor.numel() > 0


@op("stats", 4)
def statistic_of_expanded(builder):
    """var/std over the dims an input is expanded along (every row equal), or over others."""
    x = builder.pick(lambda t: _float_rows(t) and 0 in t.stride())
    if x is None or builder.chance(0.3):
        # a fresh input expanded along some dims (an equal row per expanded dim)
        base = builder.pick(_float_rows)
        dtype = builder.tensor(base).dtype if base else builder.choice([torch.float64, torch.float32])
        shape = tuple(builder.choice([2, 3, 4, 5, 8, 9, 16, 31]) for _ in range(builder.choice([1, 2, 2, 3])))
        x = builder.new_input(shape, dtype, layout="expanded")
    tensor = builder.tensor(x)
    expanded = [d for d in range(tensor.dim()) if tensor.stride(d) == 0 and tensor.shape[d] > 1]
    dims = [builder.choice(expanded)] if expanded and builder.chance(0.75) else builder.dims(tensor)
    value = x if builder.chance(0.7) else f"({x} * {builder.choice(['1e3', '1e6', '-3e4'])})"
    return _statistic(builder, value, dims_text(dims) if len(dims) > 1 else str(dims[0]))


@op("stats", 3)
def statistic_of_broadcast(builder):
    """A value made equal along a dim (a slice or reduction broadcast back), then its statistic."""
    x = need(builder.pick(lambda t: _float_rows(t) and t.dim() >= 1))
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    size = tensor.shape[dim]
    how = builder.choice(["slice", "amax", "mean", "index"])
    if how == "slice":
        made = f"{x}.narrow({dim}, 0, 1).expand_as({x})"
    elif how == "index":
        made = f"{x}.select({dim}, {builder.rng.randrange(size)}).unsqueeze({dim}).expand_as({x})"
    else:
        made = f"{x}.{how}({dim}, keepdim=True).expand_as({x})"
    if builder.chance(0.3):
        made = f"({made} * {builder.choice(['3.0', '1e3', '0.1', '-7.5'])})"
    return _statistic(builder, made, str(dim))


@op("stats", 3)
def statistic_of_statistic(builder):
    """var of var: a statistic over one dim, then over a dim its input is expanded along (the
    inner results are equal there: the outer gradient is 0), the values sometimes scaled up
    (the inner variance squares them: its rounding noise, times the outer gradient, shows)."""
    x = builder.pick(lambda t: _float_rows(t) and t.dim() >= 2 and 0 in t.stride())
    if x is None or builder.chance(0.3):
        base = builder.pick(_float_rows)
        dtype = builder.tensor(base).dtype if base else builder.choice([torch.float64, torch.float32])
        shape = tuple(builder.choice([2, 3, 4, 5, 8, 9, 16, 31]) for _ in range(builder.choice([2, 2, 3])))
        x = builder.new_input(shape, dtype, layout="expanded")
    tensor = builder.tensor(x)
    if tensor.dim() < 2:
        return None
    expanded = [d for d in range(tensor.dim()) if tensor.stride(d) == 0 and tensor.shape[d] > 1]
    if expanded and builder.chance(0.8):
        along = builder.choice(expanded)
        first = builder.choice([d for d in range(tensor.dim()) if d != along])
        second = along - (1 if along > first else 0)
    else:
        first = builder.dim(tensor)
        second = builder.rng.randrange(tensor.dim() - 1)
    if builder.chance(0.3):
        second -= tensor.dim() - 1
    inner = builder.choice(["var", "std", "mean", "var"])
    correction = builder.choice(CORRECTIONS) if inner != "mean" else ""
    outer = builder.choice(["var", "std", "var"])
    value = x if builder.chance(0.5) else f"{x} * {builder.choice(['1e2', '1e3', '3e4'])}"
    return builder.emit(f"torch.{outer}(torch.{inner}({value}, {first}{correction}), {second}"
                        f"{builder.choice(CORRECTIONS)})", f"{outer}_of_{inner}")


# ---- normalizations of views ---------------------------------------------------------------------
def _view_of(builder, x: str, tensor) -> tuple[str, tuple]:
    """A select/slice/narrow/transpose view of `x` (source, shape), rank at least 2 when possible."""
    kinds = ["slice", "narrow", "transpose", "none"] + (["select"] if tensor.dim() >= 3 else [])
    kind = builder.choice(kinds)
    dim = builder.rng.randrange(tensor.dim())
    size = tensor.shape[dim]
    if kind == "select" and size:
        index = builder.rng.randrange(size) - (size if builder.chance(0.5) else 0)
        view = f"{x}.select({dim}, {index})"
    elif kind == "slice" and size > 1:
        view = f"{x}[{':, ' * dim}{builder.choice(['1:', '::2', ':-1', '1::2'])}]"
    elif kind == "narrow" and size > 1:
        start = builder.rng.randrange(size - 1)
        view = f"{x}.narrow({dim}, {start}, {builder.rng.randint(1, size - start)})"
    elif kind == "transpose" and tensor.dim() >= 2:
        view = f"{x}.transpose({dim}, {(dim + 1) % tensor.dim()})"
    else:
        view = x
    return view, tuple(eval(view, builder.namespace).shape)


@op("normview", 4)
def norm_of_view(builder):
    x = need(builder.pick(lambda t: is_float(t) and t.dim() >= 2 and t.numel() > 1))
    tensor = builder.tensor(x)
    view, shape = _view_of(builder, x, tensor)
    if len(shape) < 2:
        view, shape = x, tuple(tensor.shape)
    dtype = tensor.dtype
    name = builder.weighted({"batch_norm": 5, "layer_norm": 3, "instance_norm": 2, "group_norm": 1})
    channels = shape[1]
    eps = builder.choice(["", ", eps=1e-5", ", eps=1e-3"])
    if name == "batch_norm":
        training = builder.choice(["True", "True", "False"])
        stats = "None, None" if training == "True" and builder.chance(0.6) else \
            f"torch.zeros({channels}, dtype={dtype_name(dtype)}), torch.ones({channels}, dtype={dtype_name(dtype)})"
        weight = f"{builder.new_input((channels,), dtype)}.contiguous()" if builder.chance(0.3) else "None"
        bias = builder.new_input((channels,), dtype) if builder.chance(0.3) else "None"
        text = f"F.batch_norm({view}, {stats}, {weight}, {bias}, training={training}{eps})"
    elif name == "layer_norm":
        count = builder.rng.randint(1, min(2, len(shape)))
        text = f"F.layer_norm({view}, {shape_text(shape[-count:])}{eps})"
    elif name == "instance_norm":
        if len(shape) < 3:
            view, shape = f"{view}.unsqueeze(-1).expand(*{view}.shape, 2)", shape + (2,)
        text = f"F.instance_norm({view}{eps})"
    else:
        groups = builder.choice([g for g in (1, 2, 3) if channels % g == 0])
        text = f"F.group_norm({view}, {groups}{eps})"
    return builder.emit(text, name)


@op("normview", 2)
def reduce_normalized(builder):
    """A sum or mean over the dims a normalization averaged out (0 +- rounding noise), or others."""
    x = need(builder.pick(lambda t: is_float(t) and t.dim() >= 1 and t.numel() > 0))
    tensor = builder.tensor(x)
    name = builder.choice(["sum", "mean", "amax", "var"])
    dims = [0] if builder.chance(0.5) else builder.dims(tensor)
    return builder.emit(f"{x}.{name}({dims_text(dims)})", name)


@op("normview", 1)
def quotient_of_reduced(builder):
    """A quotient of two values at hand (a noise-zero divisor is the fuzzer's to excuse)."""
    x = need(builder.pick(lambda t: is_float(t) and t.numel() > 0 and ranked(0, 2)(t)))
    mode = builder.choice(["", ", rounding_mode='trunc'", ", rounding_mode='floor'"])
    y = builder.pick_broadcastable(builder.tensor(x).shape, is_float) or x
    return builder.emit(f"torch.div({x}, {y}{mode})", "div", jumps=bool(mode))
