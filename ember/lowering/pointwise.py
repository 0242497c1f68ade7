"""Pointwise rules: `pointwise()` broadcasts, promotes and builds an `inner_fn(ops, index)`;
unary, binary and comparison ops by table, and where, clamp, casts, fills and arange."""
from __future__ import annotations

import sympy
import torch

from .ir import IRNode, Pointwise
from .registry import FallbackNeeded, loader_for, _LOW_PRECISION, _NARROW_INTEGERS, _promoted, register, _size, _val

aten = torch.ops.aten

# Kernels that take a Python scalar as a tensor of the common dtype, rounded to it: fmod(x, 1e-30) of a
# half x divides by 0, a half x <= 1e30 compares with inf (test_low_precision_compared_with_a_scalar_rounds_the_scalar).
_SCALAR_ROUNDED = {"fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge"}


def _rounded_to(load, dtype: torch.dtype, compute: torch.dtype):
    return lambda ops, index: ops.to_dtype(ops.to_dtype(load(ops, index), dtype), compute)


def pointwise(ctx, node, op_name: str, inputs: list, compute_dtype: torch.dtype | None = None,
              input_dtypes: list | None = None) -> Pointwise:
    value = _val(node)
    out_size = _size(value)
    out_dtype = value.dtype
    promoted = compute_dtype or out_dtype
    compute = _LOW_PRECISION.get(promoted, promoted)  # float16/bfloat16 math runs in float32
    dtypes = input_dtypes or [compute] * len(inputs)
    loaders = [loader_for(inp, out_size, dtype) for inp, dtype in zip(inputs, dtypes)]
    if compute != promoted and input_dtypes is None:
        # Eager converts tensor operands of another dtype to the common float16/bfloat16 type
        # first: an int64 or float32 operand is rounded to it before the math (Python scalars
        # are not).
        loaders = [_rounded_to(load, promoted, compute) if isinstance(inp, IRNode) and inp.dtype != promoted
                   else load for load, inp in zip(loaders, inputs)]
        if op_name in _SCALAR_ROUNDED:
            # (add/mul/div keep a Python scalar in float32)
            loaders = [loader_for(float(torch.tensor(inp, dtype=promoted)), out_size, compute)
                       if isinstance(inp, float) else load for load, inp in zip(loaders, inputs)]

    def inner_fn(ops, index):
        result = getattr(ops, op_name)(*[load(ops, index) for load in loaders])
        if compute != out_dtype or compute in _NARROW_INTEGERS:
            # Narrow integers and bools are computed wider by C++ (bool + bool is 2): convert
            # every result so it wraps (or saturates to True) as eager's does.
            return ops.to_dtype(result, out_dtype)
        return result

    return Pointwise(value.device, out_dtype, out_size, inner_fn, ctx.origin())


# unary ops, each lowered as the ops handler's method of its name (aten.<name>.default)
_UNARY = ("abs", "neg", "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos",
          "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "erfc", "sigmoid",
          "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "isnan", "isinf", "logical_not",
          "bitwise_not", "square", "signbit")
_PREDICATE_UNARY = {"isnan", "isinf", "logical_not", "signbit"}
_ROUNDING = {"floor", "ceil", "round", "trunc"}


def _register_unary(name: str) -> None:
    @register(getattr(aten, name).default)
    def lower(ctx, node, x):
        if name in _ROUNDING and not x.dtype.is_floating_point:
            return pointwise(ctx, node, "identity", [x])  # integers are whole already (C++ would make a double)
        if name in _PREDICATE_UNARY:
            dtype = x.dtype if name != "logical_not" else torch.bool
            return pointwise(ctx, node, name, [x], compute_dtype=dtype)
        return pointwise(ctx, node, name, [x])


for _name in _UNARY:
    _register_unary(_name)

_BINARY = {**{name: [getattr(aten, name).Tensor, getattr(aten, name).Scalar]
              for name in ("add", "sub", "mul", "fmod", "remainder")},
           **{name: [getattr(aten, name).default] for name in ("maximum", "minimum", "atan2")},
           **{name: [getattr(aten, name).Tensor] for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
           "pow": [aten.pow.Tensor_Tensor], "floordiv": [aten.floor_divide.default]}
# Comparisons and logical ops compute in the operands' common dtype: logical ops test each operand
# against zero in it, where a 0-d int64 minimum and a uint8 tensor meet as uint8, and the minimum is
# 0 (test_logical_ops_compare_operands_in_their_common_dtype).
_COMPARE = {**{name: [getattr(aten, name).Tensor, getattr(aten, name).Scalar]
               for name in ("eq", "ne", "lt", "le", "gt", "ge")},
            **{name: [getattr(aten, name).default] for name in ("logical_and", "logical_or", "logical_xor")}}


def _register_binary(name: str, ops) -> None:
    @register(*ops)
    def lower(ctx, node, a, b, alpha=1):
        if name in ("floordiv", "remainder", "fmod") and not _val(node).dtype.is_floating_point:
            raise FallbackNeeded("integer division (ATen raises on division by zero)")
        if alpha != 1:
            b = pointwise(ctx, node, "mul", [b, alpha]) if isinstance(b, IRNode) else b * alpha
        return pointwise(ctx, node, name, [a, b])


def _register_compare(name: str, ops) -> None:
    @register(*ops)
    def lower(ctx, node, a, b):
        return pointwise(ctx, node, name, [a, b], compute_dtype=_promoted(node, [0, 1]))


for _name, _ops in _BINARY.items():
    _register_binary(_name, _ops)
for _name, _ops in _COMPARE.items():
    _register_compare(_name, _ops)


@register(aten.pow.Tensor_Scalar)
def pow_scalar(ctx, node, x, exponent):
    """Small integer and half-integer powers as multiplications and roots (vectorize, exact)."""
    value = _val(node)
    if not value.dtype.is_floating_point or not isinstance(exponent, (int, float)) or \
            exponent not in (0.5, -0.5, 1, 2, 3, 4, -1, -2):
        return pointwise(ctx, node, "pow", [x, exponent])
    out_size = _size(value)
    compute = _LOW_PRECISION.get(value.dtype, value.dtype)
    load = loader_for(x, out_size, compute)

    def inner_fn(ops, index):
        result = power(ops, load(ops, index))
        # float16/bfloat16: rounded, as eager stores it (an unrounded square compared unequal to
        # its own mean: var's backward took the wrong branch)
        return ops.to_dtype(result, value.dtype) if compute != value.dtype else result

    def power(ops, base):
        if exponent in (0.5, -0.5, -1):
            return getattr(ops, {0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal"}[exponent])(base)
        if exponent == -2:
            return ops.reciprocal(ops.mul(base, base))
        result = base  # (and exponent 1: the base itself)
        for _ in range(int(exponent) - 1):
            result = ops.mul(result, base)
        return result

    return Pointwise(value.device, value.dtype, out_size, inner_fn, ctx.origin())


@register(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(ctx, node, a, b, alpha=1):
    if alpha != 1:
        a = pointwise(ctx, node, "mul", [a, alpha])
    return pointwise(ctx, node, "sub", [b, a])


@register(aten.where.self)
def where(ctx, node, condition, a, b):
    value = _val(node)
    out_size = _size(value)
    compute = value.dtype
    cond = loader_for(condition, out_size, torch.bool)
    left, right = loader_for(a, out_size, compute), loader_for(b, out_size, compute)
    return Pointwise(value.device, compute, out_size,
                     lambda ops, index: ops.where(cond(ops, index), left(ops, index), right(ops, index)), ctx.origin())


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx, node, x, mask, fill):
    return where(ctx, node, mask, fill, x)


@register(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def clamp(ctx, node, x, low=None, high=None):
    if node.target is aten.clamp_max.default:
        low, high = None, low
    result = x
    if low is not None:
        result = pointwise(ctx, node, "maximum", [result, low])
    if high is not None:
        result = pointwise(ctx, node, "minimum", [result, high])
    return result if result is not x else pointwise(ctx, node, "identity", [x])


@register(aten._to_copy.default)
def to_copy(ctx, node, x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
            memory_format=None):
    value = _val(node)
    if value.device != x.device:
        raise FallbackNeeded("copy across devices")
    return pointwise(ctx, node, "identity", [x], compute_dtype=value.dtype)


@register(aten.clone.default, aten.lift_fresh_copy.default, aten.lift_fresh.default)
def clone(ctx, node, x, *, memory_format=None):
    return pointwise(ctx, node, "identity", [x])


@register(aten.copy.default)
def copy(ctx, node, destination, source, non_blocking=False):
    return pointwise(ctx, node, "identity", [source])


def _constant_fill(ctx, node, fill):
    value = _val(node)
    return Pointwise(value.device, value.dtype, _size(value), lambda ops, index: ops.constant(fill, value.dtype),
                     ctx.origin())


@register(aten.full.default, aten.full_like.default, aten.fill.Scalar)
def full(ctx, node, size_or_x, fill, **kwargs):
    return _constant_fill(ctx, node, fill)


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default, aten.empty.memory_format,
          aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default,
          aten.new_empty_strided.default)
def zeros(ctx, node, *args, **kwargs):
    return _constant_fill(ctx, node, 0)


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def ones(ctx, node, *args, **kwargs):
    return _constant_fill(ctx, node, 1)


@register(aten.scalar_tensor.default)
def scalar_tensor(ctx, node, fill, **kwargs):
    return _constant_fill(ctx, node, fill)


@register(aten.fill.Tensor)
def fill_tensor(ctx, node, x, fill_value):
    """x's shape, every element the 0-d `fill_value` (`v[1:, 2] = 7` writes a lifted 7)."""
    if not isinstance(fill_value, IRNode):
        return _constant_fill(ctx, node, fill_value)
    value = _val(node)
    loaded = fill_value.make_loader()

    def inner_fn(ops, index):
        result = loaded(ops, [])
        return ops.to_dtype(result, value.dtype) if fill_value.dtype != value.dtype else result

    return Pointwise(value.device, value.dtype, _size(value), inner_fn, ctx.origin())


@register(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(ctx, node, *args, **kwargs):
    value = _val(node)
    start, step = (0, 1)
    if node.target is aten.arange.start:
        start = args[0]
    elif node.target is aten.arange.start_step:
        start, step = args[0], args[2]
    if not all(isinstance(v, int) for v in (start, step)):
        raise FallbackNeeded("arange with float bounds")

    def inner_fn(ops, index):
        return ops.index_expr(sympy.Integer(start) + index[0] * step, value.dtype)

    return Pointwise(value.device, value.dtype, _size(value), inner_fn, ctx.origin())
