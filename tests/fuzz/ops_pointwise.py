"""Pointwise op builders: unary, binary (tensors, broadcasting, Python scalars), comparisons,
logical and bitwise ops, where/clamp/masked_fill, dtype conversions, detach/clone, factories."""
from __future__ import annotations

import torch

from .ops_common import (dtype_name, float_to_int_defined, is_bool, is_float, is_integral, need, shape_text)
from .oppool import op

# name: (spellings, rounds, jumps). A spelling is a template over the operand {x}.
UNARY = {
    "abs": (["{x}.abs()", "torch.abs({x})"], False, False),
    "neg": (["{x}.neg()", "-{x}", "torch.neg({x})"], False, False),
    "exp": (["{x}.exp()", "torch.exp({x})"], True, False),
    "log": (["{x}.log()", "torch.log({x})"], True, False),
    "sqrt": (["{x}.sqrt()", "torch.sqrt({x})"], True, False),
    "rsqrt": (["{x}.rsqrt()", "torch.rsqrt({x})"], True, False),
    "sin": (["{x}.sin()", "torch.sin({x})"], True, False),
    "cos": (["{x}.cos()", "torch.cos({x})"], True, False),
    "tanh": (["{x}.tanh()", "torch.tanh({x})"], True, False),
    "sigmoid": (["{x}.sigmoid()", "torch.sigmoid({x})"], True, False),
    "relu": (["{x}.relu()", "F.relu({x})", "torch.relu({x})"], False, False),
    "gelu": (["F.gelu({x})"], True, False),
    "gelu_tanh": (["F.gelu({x}, approximate='tanh')"], True, False),
    "silu": (["F.silu({x})"], True, False),
    "sign": (["{x}.sign()", "torch.sign({x})"], False, True),
    "floor": (["{x}.floor()", "torch.floor({x})"], False, True),
    "ceil": (["{x}.ceil()", "torch.ceil({x})"], False, True),
    "round": (["{x}.round()", "torch.round({x})"], False, True),
    "trunc": (["{x}.trunc()", "torch.trunc({x})"], False, True),
    "reciprocal": (["{x}.reciprocal()", "torch.reciprocal({x})"], True, False),
    "erf": (["{x}.erf()", "torch.erf({x})"], True, False),
    "expm1": (["{x}.expm1()", "torch.expm1({x})"], True, False),
    "log1p": (["{x}.log1p()", "torch.log1p({x})"], True, False),
    "isnan": (["{x}.isnan()", "torch.isnan({x})"], False, True),
    "isinf": (["torch.isinf({x})"], False, True),
    "logical_not": (["{x}.logical_not()", "torch.logical_not({x})"], False, True),
    "bitwise_not": (["{x}.bitwise_not()", "~{x}"], False, False),
    "square": (["{x}.square()", "{x} * {x}"], True, False),
}

# Float-only functions get float operands most of the time; integer ones integral operands.
INTEGRAL_UNARY = {"bitwise_not", "logical_not", "abs", "neg", "sign", "square"}

# name: (spellings over {x} and {y}, rounds, jumps)
BINARY = {
    "add": (["{x} + {y}", "torch.add({x}, {y})", "torch.add({x}, {y}, alpha=2)"], True, False),
    "sub": (["{x} - {y}", "torch.sub({x}, {y})"], True, False),
    "mul": (["{x} * {y}", "torch.mul({x}, {y})"], True, False),
    "div": (["{x} / {y}", "torch.div({x}, {y})", "torch.true_divide({x}, {y})"], True, False),
    "div_floor": (["torch.div({x}, {y}, rounding_mode='floor')"], True, True),
    "div_trunc": (["torch.div({x}, {y}, rounding_mode='trunc')"], True, True),
    "floor_divide": (["{x} // {y}", "torch.floor_divide({x}, {y})"], True, True),
    "remainder": (["{x} % {y}", "torch.remainder({x}, {y})"], True, True),
    "fmod": (["torch.fmod({x}, {y})"], True, True),
    "pow": (["{x} ** {y}", "torch.pow({x}, {y})"], True, False),
    "maximum": (["torch.maximum({x}, {y})"], False, False),
    "minimum": (["torch.minimum({x}, {y})"], False, False),
    "atan2": (["torch.atan2({x}, {y})"], True, False),
}
SCALAR_FIRST = {"add", "sub", "mul", "div", "floor_divide", "remainder", "pow"}
TENSOR_ONLY = {"maximum", "minimum", "atan2"}

COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}

CONVERSIONS = {
    ".float()": torch.float32, ".double()": torch.float64, ".half()": torch.float16,
    ".bfloat16()": torch.bfloat16, ".long()": torch.int64, ".int()": torch.int32, ".short()": torch.int16,
    ".to(torch.int8)": torch.int8, ".to(torch.uint8)": torch.uint8, ".to(torch.bool)": torch.bool,
    ".bool()": torch.bool, ".to(torch.float32)": torch.float32, ".to(dtype=torch.float16)": torch.float16,
}


def _spell(builder, spellings, **operands) -> str:
    return builder.choice(spellings).format(**operands)


@op("unary", 6)
def unary(builder):
    name = builder.choice(UNARY)
    spellings, rounds, jumps = UNARY[name]
    if name == "bitwise_not" or (name in INTEGRAL_UNARY and builder.chance(0.5)):
        x = need(builder.pick(is_integral) or builder.pick())
    else:
        x = need(builder.pick(is_float) or builder.pick())
    return builder.emit(_spell(builder, spellings, x=x), name, rounds=rounds, jumps=jumps)


def _second_operand(builder, x: str, name: str):
    """('tensor', name) broadcastable with x, or ('scalar', source text)."""
    tensor = builder.tensor(x)
    if name not in TENSOR_ONLY and builder.chance(0.35):
        return "scalar", builder.scalar(tensor)
    y = builder.pick_broadcastable(tensor.shape, exclude=() if builder.chance(0.2) else (x,))
    if y is None:
        if name in TENSOR_ONLY:
            return "tensor", x
        return "scalar", builder.scalar(tensor)
    return "tensor", y


@op("binary", 10)
def binary(builder):
    name = builder.choice(BINARY)
    spellings, rounds, jumps = BINARY[name]
    x = need(builder.pick())
    kind, y = _second_operand(builder, x, name)
    if kind == "scalar" and name in SCALAR_FIRST and builder.chance(0.4):
        operator_spellings = [s for s in spellings if not s.startswith("torch.")] or spellings
        text = _spell(builder, operator_spellings, x=y, y=x)   # `7 - x`, `2 ** x`, `1 / x`
    else:
        text = _spell(builder, spellings, x=x, y=y)
    return builder.emit(text, name, rounds=rounds, jumps=jumps)


@op("compare", 4)
def compare(builder):
    name = builder.choice(COMPARE)
    x = need(builder.pick())
    kind, y = _second_operand(builder, x, name)
    if builder.chance(0.3):
        text = f"torch.{name}({x}, {y})"
    else:
        text = f"{x} {COMPARE[name]} {y}"
    return builder.emit(text, name, rounds=False, jumps=True)


@op("logical", 2)
def logical(builder):
    name = builder.choice(LOGICAL)
    x = need(builder.pick())
    y = builder.pick_broadcastable(builder.tensor(x).shape) or x
    text = f"torch.{name}({x}, {y})" if builder.chance(0.6) else f"{x}.{name}({y})"
    return builder.emit(text, name, rounds=False, jumps=True)


@op("bitwise", 2)
def bitwise(builder):
    name = builder.choice(BITWISE)
    x = need(builder.pick(is_integral))
    kind, y = _second_operand(builder, x, name)
    if kind == "scalar":
        y = builder.scalar(builder.tensor(x), kind="bool" if is_bool(builder.tensor(x)) else "int")
    text = f"{x} {BITWISE[name]} {y}" if builder.chance(0.6) else f"torch.{name}({x}, {y})"
    return builder.emit(text, name, rounds=False)


def _condition(builder, shape) -> str:
    """A bool tensor broadcastable to `shape`: a bool value, or a comparison written inline."""
    condition = builder.pick_broadcastable(shape, predicate=is_bool)
    if condition is not None and builder.chance(0.6):
        return condition
    x = need(builder.pick_broadcastable(shape))
    return builder.choice([f"{x} > 0", f"{x} != {x}", f"{x} <= {builder.scalar(builder.tensor(x))}"])


@op("where", 3)
def where(builder):
    x = need(builder.pick())
    shape = builder.tensor(x).shape
    condition = _condition(builder, shape)
    kind, y = _second_operand(builder, x, "where")
    first, second = (x, y) if builder.chance(0.5) else (y, x)
    return builder.emit(f"torch.where({condition}, {first}, {second})", "where", rounds=False)


@op("where", 2)
def masked_fill(builder):
    x = need(builder.pick())
    shape = builder.tensor(x).shape
    mask = builder.pick_broadcastable(shape, predicate=is_bool, into=True)
    mask = mask if mask is not None and builder.chance(0.5) else builder.choice([f"{x} > 0", f"{x} != {x}", f"{x} < 1"])
    return builder.emit(f"{x}.masked_fill({mask}, {builder.scalar(builder.tensor(x))})", "masked_fill", rounds=False)


_NAN_BOUND_AGREES = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13)


def portable_bound(text: str) -> str:
    """A clamp bound: not NaN before torch 2.13, whose eager kernels disagree with 2.13's (and
    ember's: NaN everywhere) about a NaN bound. The draw is the same, so seeds keep their programs."""
    return "float('inf')" if text == "float('nan')" and not _NAN_BOUND_AGREES else text


@op("clamp", 3)
def clamp(builder):
    x = need(builder.pick(lambda t: not is_bool(t)))
    tensor = builder.tensor(x)
    low, high = portable_bound(builder.scalar(tensor)), portable_bound(builder.scalar(tensor))
    form = builder.weighted({"both": 3, "min": 2, "max": 2, "tensor": 2, "clamp_min": 1})
    if form == "both":
        text = f"{x}.clamp({low}, {high})" if builder.chance(0.5) else f"torch.clamp({x}, min={low}, max={high})"
    elif form == "min":
        text = f"{x}.clamp(min={low})"
    elif form == "max":
        text = f"torch.clamp({x}, max={high})"
    elif form == "clamp_min":
        text = f"{x}.clamp_min({low})"
    else:
        bound = need(builder.pick_broadcastable(tensor.shape, exclude=(x,)))
        text = f"torch.clamp({x}, min={bound})" if builder.chance(0.5) else f"{x}.clamp(max={bound})"
    return builder.emit(text, "clamp", rounds=False)


@op("convert", 5)
def convert(builder):
    spelling = builder.choice(CONVERSIONS)
    dtype = CONVERSIONS[spelling]
    x = need(builder.pick())
    if not float_to_int_defined(builder.tensor(x), dtype):
        return None
    jumps = dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    return builder.emit(f"{x}{spelling}", f"to_{str(dtype).replace('torch.', '')}", rounds=not jumps, jumps=jumps)


@op("alias", 3)
def detach_clone(builder):
    x = need(builder.pick())
    form = builder.weighted({"detach": 4, "clone": 3, "contiguous": 3, "detach_clone": 1, "clone_format": 1})
    text = {"detach": f"{x}.detach()", "clone": f"{x}.clone()", "contiguous": f"{x}.contiguous()",
            "detach_clone": f"{x}.detach().clone()",
            "clone_format": f"{x}.clone(memory_format=torch.contiguous_format)"}[form]
    view_of = x if form in ("detach", "contiguous") else None
    return builder.emit(text, form, rounds=False, view_of=view_of)


@op("factory", 1)
def factory(builder):
    x = need(builder.pick())
    tensor = builder.tensor(x)
    form = builder.weighted({"zeros_like": 2, "ones_like": 1, "full_like": 2, "full": 1, "arange": 2, "new_ones": 1})
    if form == "zeros_like":
        text = f"torch.zeros_like({x})"
    elif form == "ones_like":
        text = f"torch.ones_like({x}, dtype={dtype_name(builder.choice([torch.float32, torch.int64, tensor.dtype]))})"
    elif form == "full_like":
        text = f"torch.full_like({x}, {builder.scalar(tensor)})"
    elif form == "full":
        text = f"torch.full({shape_text(tensor.shape)}, {builder.scalar(tensor)})"
    elif form == "new_ones":
        text = f"{x}.new_ones({shape_text(tensor.shape)})"
    else:
        length = tensor.shape[-1] if tensor.dim() else 1
        text = builder.choice([f"torch.arange({length})", f"torch.arange({length}, dtype={dtype_name(tensor.dtype)})",
                               f"torch.arange(0, {length} * 0.5, 0.5)", f"torch.arange({length}) * {x}"])
        if not is_float(tensor) and "0.5" in text:
            text = f"torch.arange({length})"
    return builder.emit(text, form, rounds=False)


NARROW_SCALARS = ["True", "False", "1", "2", "7", "200", "255", "-1", "0.5", "-0.0"]
NARROW_OPERATOR_NAMES = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod", "/": "div"}


@op("narrow", 4)
def narrow_scalar_arithmetic(builder):
    """Bool and narrow-int tensors with Python scalars (`b + True`, `7 - x`, `x * 200`): results that
    must saturate (bool) or wrap around (uint8/int8/int16) before anything reads them."""
    x = need(builder.pick(lambda t: t.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16)))
    scalar = builder.choice(NARROW_SCALARS)
    operator = builder.choice(["+", "-", "*", "//", "%", "/"])
    text = f"{scalar} {operator} {x}" if builder.chance(0.4) else f"{x} {operator} {scalar}"
    return builder.emit(text, f"narrow_{NARROW_OPERATOR_NAMES[operator]}", rounds=operator == "/",
                        jumps=operator in ("//", "%"))
