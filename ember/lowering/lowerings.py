"""Lowerings: one rule per ATen overload, from IR values to IR values.

    @register(aten.add.Tensor)
    def add(ctx, node, a, b, *, alpha=1): ...

`ctx` is the GraphLowering (it names and stores buffers), `node` the ATen FX node (its fake
value gives the output dtype and shape).  Pointwise ops share `pointwise()`, which broadcasts,
promotes and builds an `inner_fn(ops, index)`; reductions share `reduction()`.  A rule that
cannot handle its arguments raises FallbackNeeded and the op runs as an ATen call.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import sympy
import torch

from ..graph_patterns import CENTERS_ITS_INPUT, centers_its_input
from .indexing import broadcast_index, view_reindex
from .ir import Buffer, ComputedBuffer, IRNode, Pointwise, Reduction, ReductionSpec, View, product
from .symbolic import ShapesNotSupported, expr_of, is_symbolic, provably_nonnegative, static_int

aten = torch.ops.aten
LOWERINGS: dict[Any, Callable] = {}
# Storage dtypes whose arithmetic runs in float32 (loaded, computed, rounded once when stored).
_LOW_PRECISION = {torch.float16: torch.float32, torch.bfloat16: torch.float32}
_NARROW_INTEGERS = {torch.bool, torch.int8, torch.uint8, torch.int16}
# Ops that are extern calls by design (library kernels), not fallbacks.
EXTERN_OPS = {aten.mm.default, aten.bmm.default, aten.convolution.default, aten.convolution_backward.default,
              aten.baddbmm.default, aten.addmm.default}


class FallbackNeeded(Exception):
    pass


def register(*ops):
    def decorator(function):
        for op in ops:
            if op in LOWERINGS:
                raise RuntimeError(f"duplicate lowering for {op}")
            LOWERINGS[op] = function
        return function

    return decorator


def _val(node):
    return node.meta.get("val")


def _size(value) -> list:
    return [expr_of(s) for s in value.shape]


def _int_value(ops, value, dtype=torch.int64):
    """An integer known at compile time (a constant) or a size expression (computed in the kernel)."""
    if is_symbolic(value):
        return ops.index_expr(value, dtype)
    return ops.constant(int(value), dtype)


def _arg_dtype(arg):
    if isinstance(arg, torch.fx.Node):
        value = arg.meta.get("val")
        return value if isinstance(value, torch.Tensor) else value
    return arg


def _promoted(node, positions: Sequence[int]) -> torch.dtype:
    """torch's type promotion of two arguments (tensor or Python scalar), as eager computes it."""
    values = []
    for position in positions:
        arg = node.args[position] if position < len(node.args) else None
        value = _arg_dtype(arg)
        if isinstance(value, torch.Tensor):
            values.append(torch.empty([1] * min(value.dim(), 1), dtype=value.dtype, device="meta"))
        elif isinstance(value, (int, float, bool)):
            values.append(value)
        elif isinstance(value, (torch.SymInt, sympy.Expr)):
            values.append(1)  # a size: a Python int
    if len(values) == 2:
        return torch.result_type(*values)
    if len(values) == 1 and isinstance(values[0], torch.Tensor):
        return values[0].dtype
    return _val(node).dtype


def loader_for(value, out_size: list, dtype: torch.dtype):
    """A loader broadcasting `value` (an IR value or a Python scalar) to out_size, cast to dtype."""
    if isinstance(value, IRNode):
        inner = value.make_loader()
        in_size = value.get_size()
        source_dtype = value.dtype

        def load(ops, index):
            result = inner(ops, broadcast_index(index, out_size, in_size))
            return ops.to_dtype(result, dtype) if source_dtype != dtype else result

        return load

    if is_symbolic(value):  # a size (from a SymInt argument): computed from the size arguments
        def size_value(ops, index):
            return ops.index_expr(value, dtype)

        return size_value
    if isinstance(value, sympy.Basic):
        value = int(value) if value.is_Integer else float(value)

    def constant(ops, index):
        return ops.constant(value, dtype)

    return constant


# Kernels that take a Python scalar as a tensor of the common dtype, rounded to it: fmod(x, 1e-30)
# of a half x divides by 0, and a half x <= 1e30 compares with inf (fuzz default 35042).
_SCALAR_ROUNDED = {"fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge"}


def _rounded_to(load, dtype: torch.dtype, compute: torch.dtype):
    def rounded(ops, index):
        return ops.to_dtype(ops.to_dtype(load(ops, index), dtype), compute)

    return rounded


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


# -- pointwise ops -------------------------------------------------------------------------------------
_UNARY = {
    "abs": aten.abs.default, "neg": aten.neg.default, "exp": aten.exp.default, "expm1": aten.expm1.default,
    "exp2": aten.exp2.default, "log": aten.log.default, "log1p": aten.log1p.default, "log2": aten.log2.default,
    "log10": aten.log10.default, "sqrt": aten.sqrt.default, "rsqrt": aten.rsqrt.default, "sin": aten.sin.default,
    "cos": aten.cos.default, "tan": aten.tan.default, "sinh": aten.sinh.default, "cosh": aten.cosh.default,
    "tanh": aten.tanh.default, "asin": aten.asin.default, "acos": aten.acos.default, "atan": aten.atan.default,
    "asinh": aten.asinh.default, "acosh": aten.acosh.default, "atanh": aten.atanh.default,
    "erf": aten.erf.default, "erfc": aten.erfc.default, "sigmoid": aten.sigmoid.default,
    "relu": aten.relu.default, "floor": aten.floor.default, "ceil": aten.ceil.default,
    "round": aten.round.default, "trunc": aten.trunc.default, "sign": aten.sign.default,
    "reciprocal": aten.reciprocal.default, "isnan": aten.isnan.default, "isinf": aten.isinf.default,
    "logical_not": aten.logical_not.default, "bitwise_not": aten.bitwise_not.default,
    "square": aten.square.default, "signbit": aten.signbit.default,
}
_FLOAT_UNARY = {"exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
                "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "erfc",
                "sigmoid", "reciprocal"}
_PREDICATE_UNARY = {"isnan", "isinf", "logical_not", "signbit"}


_ROUNDING = {"floor", "ceil", "round", "trunc"}


def _register_unary(name: str, op) -> None:
    def lower(ctx, node, x):
        if name in _ROUNDING and not x.dtype.is_floating_point:
            return pointwise(ctx, node, "identity", [x])  # integers are whole already (C++ would make a double)
        if name in _PREDICATE_UNARY:
            dtype = x.dtype if name != "logical_not" else torch.bool
            return pointwise(ctx, node, name, [x], compute_dtype=dtype)
        return pointwise(ctx, node, name, [x])

    register(op)(lower)


for _name, _op in _UNARY.items():
    _register_unary(_name, _op)

_BINARY = {
    "add": [aten.add.Tensor, aten.add.Scalar], "sub": [aten.sub.Tensor, aten.sub.Scalar],
    "mul": [aten.mul.Tensor, aten.mul.Scalar],
    "maximum": [aten.maximum.default], "minimum": [aten.minimum.default],
    "pow": [aten.pow.Tensor_Tensor], "atan2": [aten.atan2.default],
    "fmod": [aten.fmod.Tensor, aten.fmod.Scalar], "remainder": [aten.remainder.Tensor, aten.remainder.Scalar],
    "floordiv": [aten.floor_divide.default],
    "bitwise_and": [aten.bitwise_and.Tensor], "bitwise_or": [aten.bitwise_or.Tensor],
    "bitwise_xor": [aten.bitwise_xor.Tensor],
}
_COMPARE = {
    "eq": [aten.eq.Tensor, aten.eq.Scalar], "ne": [aten.ne.Tensor, aten.ne.Scalar],
    "lt": [aten.lt.Tensor, aten.lt.Scalar], "le": [aten.le.Tensor, aten.le.Scalar],
    "gt": [aten.gt.Tensor, aten.gt.Scalar], "ge": [aten.ge.Tensor, aten.ge.Scalar],
}
_LOGICAL = {"logical_and": aten.logical_and.default, "logical_or": aten.logical_or.default,
            "logical_xor": aten.logical_xor.default}


def _register_binary(name: str, op) -> None:
    def lower(ctx, node, a, b, alpha=1):
        if name in ("floordiv", "remainder", "fmod") and not _val(node).dtype.is_floating_point:
            raise FallbackNeeded("integer division (ATen raises on division by zero)")
        if alpha != 1:
            b = pointwise(ctx, node, "mul", [b, alpha]) if isinstance(b, IRNode) else b * alpha
        return pointwise(ctx, node, name, [a, b])

    register(op)(lower)


for _name, _ops in _BINARY.items():
    for _op in _ops:
        _register_binary(_name, _op)


def _register_compare(name: str, op) -> None:
    def lower(ctx, node, a, b):
        return pointwise(ctx, node, name, [a, b], compute_dtype=_promoted(node, [0, 1]))

    register(op)(lower)


for _name, _ops in _COMPARE.items():
    for _op in _ops:
        _register_compare(_name, _op)
# Eager converts both operands to their common dtype before testing them against zero: a 0-d
# int64 minimum and a uint8 tensor meet as uint8, where the minimum is 0 (fuzz intmath 7240).
for _name, _op in _LOGICAL.items():
    register(_op)(functools.partial(lambda name, ctx, node, a, b: pointwise(
        ctx, node, name, [a, b], compute_dtype=_promoted(node, [0, 1])), _name))


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
        if exponent == 0.5:
            return ops.sqrt(base)
        if exponent == -0.5:
            return ops.rsqrt(base)
        if exponent == 1:
            return base
        if exponent == -1:
            return ops.reciprocal(base)
        if exponent == -2:
            return ops.reciprocal(ops.mul(base, base))
        result = base
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

    def inner_fn(ops, index):
        return ops.where(cond(ops, index), left(ops, index), right(ops, index))

    return Pointwise(value.device, compute, out_size, inner_fn, ctx.origin())


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx, node, x, mask, fill):
    value = _val(node)
    out_size = _size(value)
    cond = loader_for(mask, out_size, torch.bool)
    base = loader_for(x, out_size, value.dtype)
    fill_loader = loader_for(fill, out_size, value.dtype)

    def inner_fn(ops, index):
        return ops.where(cond(ops, index), fill_loader(ops, index), base(ops, index))

    return Pointwise(value.device, value.dtype, out_size, inner_fn, ctx.origin())


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


@register(aten.clone.default)
def clone(ctx, node, x, *, memory_format=None):
    return pointwise(ctx, node, "identity", [x])


@register(aten.copy.default)
def copy(ctx, node, destination, source, non_blocking=False):
    return pointwise(ctx, node, "identity", [source])


@register(aten.lift_fresh_copy.default, aten.lift_fresh.default)
def lift_fresh_copy(ctx, node, x):
    return pointwise(ctx, node, "identity", [x])


def _constant_fill(ctx, node, fill):
    value = _val(node)
    out_size = _size(value)

    def inner_fn(ops, index):
        return ops.constant(fill, value.dtype)

    return Pointwise(value.device, value.dtype, out_size, inner_fn, ctx.origin())


@register(aten.full.default)
def full(ctx, node, size, fill, **kwargs):
    return _constant_fill(ctx, node, fill)


@register(aten.full_like.default)
def full_like(ctx, node, x, fill, **kwargs):
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


@register(aten.fill.Scalar)
def fill(ctx, node, x, fill_value):
    return _constant_fill(ctx, node, fill_value)


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


# -- views ---------------------------------------------------------------------------------------------------
def _dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(ctx, node, x, size):
    new_size = _size(_val(node))
    return View(x, new_size, view_reindex(x.get_size(), new_size))


@register(aten.permute.default)
def permute(ctx, node, x, dims):
    rank = len(x.get_size())
    dims = [_dim(d, rank) for d in dims]
    size = x.get_size()
    new_size = [size[d] for d in dims]

    def reindex(index):
        old = [None] * rank
        for new_position, old_position in enumerate(dims):
            old[old_position] = index[new_position]
        return old

    return View(x, new_size, reindex)


@register(aten.t.default)
def t(ctx, node, x):
    if len(x.get_size()) < 2:
        return x
    return permute(ctx, node, x, [1, 0])


@register(aten.transpose.int)
def transpose(ctx, node, x, dim0, dim1):
    rank = len(x.get_size())
    dims = list(range(rank))
    a, b = _dim(dim0, rank), _dim(dim1, rank)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(ctx, node, x, dims)


@register(aten.expand.default)
def expand(ctx, node, x, size, *, implicit=False):
    new_size = _size(_val(node))
    old_size = x.get_size()

    def reindex(index):
        return broadcast_index(index, new_size, old_size)

    return View(x, new_size, reindex)


@register(aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def squeeze_like(ctx, node, x, *args):
    new_size = _size(_val(node))
    return View(x, new_size, view_reindex(x.get_size(), new_size))


@register(aten.slice.Tensor)
def slice_(ctx, node, x, dim=0, start=None, end=None, step=1):
    size = x.get_size()
    rank = len(size)
    dim = _dim(dim, rank)
    start = 0 if start is None else start
    if size[dim].is_number and not is_symbolic(start):
        length = int(size[dim])
        start = int(start)
        start = max(0, min(length, start + length if start < 0 else start))
    else:
        start = _symbolic_start(size[dim], expr_of(start))
    if not isinstance(step, int):
        raise ShapesNotSupported(f"{node.target} with a symbolic step {step}")
    new_size = _size(_val(node))

    def reindex(index):
        old = list(index)
        old[dim] = sympy.sympify(start) + index[dim] * step
        return old

    return View(x, new_size, reindex)


def _symbolic_start(length, start):
    """A slice's first index, clamped to [0, length] as Python does, where a symbolic length or
    start makes that decidable for every allowed size; else ShapesNotSupported."""
    if start.is_number and start < 0:
        start = length + start
    elif not start.is_number and not provably_nonnegative(start):
        if provably_nonnegative(-start - 1):  # negative for every size: from the end
            start = length + start
        else:
            raise ShapesNotSupported(f"slice start {start} of a dimension of size {length}: its sign depends on the sizes")
    if not (provably_nonnegative(start) and provably_nonnegative(length - start)):
        raise ShapesNotSupported(f"slice start {start} of a dimension of size {length}: may need clamping")
    return start


@register(aten.select.int)
def select(ctx, node, x, dim, position):
    size = x.get_size()
    dim = _dim(dim, len(size))
    position = expr_of(position)
    if position.is_number:
        position = int(position)
        position = position + size[dim] if position < 0 else position
    elif not provably_nonnegative(position):
        raise ShapesNotSupported(f"select of position {position}: its sign depends on the sizes")

    def reindex(index):
        old = list(index)
        old.insert(dim, sympy.sympify(position))
        return old

    return View(x, _size(_val(node)), reindex)


@register(aten.alias.default, aten.detach.default)
def alias(ctx, node, x):
    return x


@register(aten.split.Tensor, aten.split_with_sizes.default)
def split(ctx, node, x, sizes, dim=0):
    outputs = _val(node)
    rank = len(x.get_size())
    dim = _dim(dim, rank)
    results, start = [], sympy.Integer(0)
    for out in outputs:
        length = expr_of(out.shape[dim])
        results.append(_slice_view(x, dim, start, _size(out)))
        start = start + length
    return results


def _slice_view(x, dim, start, new_size):
    def reindex(index):
        old = list(index)
        old[dim] = index[dim] + start
        return old

    return View(x, new_size, reindex)


@register(aten.unbind.int)
def unbind(ctx, node, x, dim=0):
    dim = _dim(dim, len(x.get_size()))
    results = []
    for position, out in enumerate(_val(node)):
        def reindex(index, position=position):
            old = list(index)
            old.insert(dim, sympy.Integer(position))
            return old

        results.append(View(x, _size(out), reindex))
    return results


@register(aten.as_strided.default)
def as_strided(ctx, node, x, size, stride, storage_offset=None):
    from .graph import ReinterpretView
    from .ir import Layout

    # as_strided indexes x's storage itself: x must be in memory as eager lays it out
    traced = ctx.realize_as_traced(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
    if traced is None:
        from .graph import GraphNotSupported
        raise GraphNotSupported("as_strided of a value ember cannot lay out in memory as eager does")
    buffer = traced if isinstance(traced, Buffer) else traced.buffer
    if traced is not buffer and storage_offset is None:
        storage_offset = traced.layout.offset
    if storage_offset is not None and not isinstance(buffer, ComputedBuffer):
        # Kernels index an input from where it sits in its storage at the call (the wrapper's
        # ptr), which can differ from the fake's; this offset is absolute, so ATen applies it.
        raise FallbackNeeded("as_strided with a storage offset into memory ember did not allocate")
    offset = storage_offset if storage_offset is not None else buffer.layout.offset
    layout = Layout(buffer.device, buffer.dtype, [expr_of(s) for s in size],
                    [expr_of(s) for s in stride], expr_of(offset))
    return ReinterpretView(buffer, layout)


@register(aten.cat.default)
def cat(ctx, node, tensors, dim=0):
    value = _val(node)
    tensors = [t for t in tensors if not (isinstance(t, IRNode) and any(s == 0 for s in t.get_size()))]
    if not tensors:
        return _constant_fill(ctx, node, 0)
    dim = _dim(dim, len(value.shape))
    out_size = _size(value)
    pieces = []
    start = sympy.Integer(0)
    for tensor in tensors:
        length = tensor.get_size()[dim]
        pieces.append((start, start + length, tensor.make_loader(), tensor.dtype))
        start = start + length

    # The loads of later pieces read out of bounds for early rows; guard them with masked loads.
    return Pointwise(value.device, value.dtype, out_size, _masked_cat(pieces, dim, value.dtype), ctx.origin())


def _masked_cat(pieces, dim, dtype):
    def inner_fn(ops, index):
        result = None
        for begin, end, loader, piece_dtype in reversed(pieces):
            shifted = list(index)
            shifted[dim] = index[dim] - begin
            position = ops.index_expr(index[dim], torch.int64)
            inside = ops.logical_and(ops.ge(position, _int_value(ops, begin)),
                                     ops.lt(position, _int_value(ops, end)))

            def body(ops=ops, loader=loader, shifted=shifted, piece_dtype=piece_dtype):
                loaded = loader(ops, shifted)
                return ops.to_dtype(loaded, dtype) if piece_dtype != dtype else loaded

            loaded = ops.masked(inside, body, 0, dtype)
            result = loaded if result is None else ops.where(inside, loaded, result)
        return result

    return inner_fn


@register(aten.slice_scatter.default)
def slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    """`x` with `src` written over x[start:end:step] along `dim` (what a write through a slice
    becomes once functionalized: `v[:3] *= 2`).  One pointwise pass; step 1 only."""
    if step != 1 or not isinstance(src, IRNode):
        raise FallbackNeeded("slice_scatter with a step, or of a scalar")
    size = x.get_size()
    dim = _dim(dim, len(size))
    start = 0 if start is None else start
    if size[dim].is_number and not is_symbolic(start):
        length = int(size[dim])
        start = max(0, min(length, int(start) + length if int(start) < 0 else int(start)))
    else:
        start = _symbolic_start(size[dim], expr_of(start))
    return _written_over(ctx, node, x, src, dim, start, src.get_size()[dim], keeps_dim=True)


@register(aten.select_scatter.default)
def select_scatter(ctx, node, x, src, dim, position):
    """`x` with `src` written over x.select(dim, position)."""
    if not isinstance(src, IRNode):
        raise FallbackNeeded("select_scatter of a scalar")
    size = x.get_size()
    dim = _dim(dim, len(size))
    position = expr_of(position)
    if position.is_number:
        position = int(position) + size[dim] if int(position) < 0 else int(position)
    elif not provably_nonnegative(position):
        raise ShapesNotSupported(f"select_scatter at {position}: its sign depends on the sizes")
    return _written_over(ctx, node, x, src, dim, position, 1, keeps_dim=False)


def _written_over(ctx, node, x, src, dim, begin, length, keeps_dim: bool):
    out = _val(node)
    x_loader, src_loader = x.make_loader(), src.make_loader()
    dtype = out.dtype

    def inner_fn(ops, index):
        position = ops.index_expr(index[dim], torch.int64)
        inside = ops.logical_and(ops.ge(position, _int_value(ops, begin)),
                                 ops.lt(position, _int_value(ops, sympy.sympify(begin) + length)))
        shifted = list(index)
        if keeps_dim:
            shifted[dim] = index[dim] - begin
        else:
            del shifted[dim]

        def body():
            loaded = src_loader(ops, shifted)
            return ops.to_dtype(loaded, dtype) if src.dtype != dtype else loaded

        return ops.where(inside, ops.masked(inside, body, 0, dtype), x_loader(ops, index))

    return Pointwise(out.device, dtype, _size(out), inner_fn, ctx.origin())


@register(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, node, x, pad, value=0):
    out = _val(node)
    out_size = _size(out)
    in_size = x.get_size()
    rank = len(in_size)
    loader = x.make_loader()
    pairs = [(pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)]

    def inner_fn(ops, index):
        shifted = list(index)
        checks = None
        for k, (before, _after) in enumerate(pairs):
            dim = rank - 1 - k
            shifted[dim] = index[dim] - before
            position = ops.index_expr(index[dim], torch.int64)
            inside = ops.logical_and(ops.ge(position, _int_value(ops, before)),
                                     ops.lt(position, _int_value(ops, before + in_size[dim])))
            checks = inside if checks is None else ops.logical_and(checks, inside)
        return ops.masked(checks, lambda: loader(ops, shifted), value, out.dtype)

    return Pointwise(out.device, out.dtype, out_size, inner_fn, ctx.origin())


# -- gathers --------------------------------------------------------------------------------------------------
def _check_indexable(size) -> None:
    """Generated code turns an out-of-range index into a bounds error and reads row 0 meanwhile:
    a dimension with no row 0 is left to ATen (which raises for any index)."""
    if size == 0:
        raise FallbackNeeded("indexing into an empty dimension")
    if _may_be_zero(size):
        raise ShapesNotSupported(f"indexing into a dimension of size {size}, which may be 0")


def _check_empty_result(out, indices) -> None:
    """A result with no elements runs no kernel, so no bounds check: where eager checks every
    index anyway (embedding of 0-wide rows, index_select) ATen runs it (fuzz index 3370)."""
    if _may_be_zero(product(_size(out))) and _numel(indices.get_size()) != 0:
        raise ShapesNotSupported(f"a result of {product(_size(out))} elements, which may be none (eager still "
                                 "checks every index)")
    if product(_size(out)) == 0 and _numel(indices.get_size()) != 0:
        raise FallbackNeeded("a result with no elements (eager still checks every index)")


def _may_be_zero(size) -> bool:
    """A symbolic size that is 0 for some allowed sizes (s0 - 2), as far as ember can tell."""
    size = sympy.sympify(size)
    return not size.is_number and not provably_nonnegative(size - 1)


def _numel(size):
    return product(size)


@register(aten.embedding.default)
def embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    out = _val(node)
    out_size = _size(out)
    weight_loader = weight.make_loader()
    index_loader = indices.make_loader()
    rows = weight.get_size()[0]
    index_rank = len(indices.get_size())
    site = ctx.site()
    _check_indexable(rows)
    _check_empty_result(out, indices)

    def inner_fn(ops, index):
        row = ops.indirect_indexing(index_loader(ops, index[:index_rank]), rows, site, wrap_negative=False)
        return weight_loader(ops, [row, *index[index_rank:]])

    return Pointwise(out.device, out.dtype, out_size, inner_fn, ctx.origin())


@register(aten.index.Tensor)
def index_tensor(ctx, node, x, indices):
    out = _val(node)
    present = [i for i, index in enumerate(indices) if index is not None]
    if len(present) != 1 or any(not isinstance(indices[i], IRNode) for i in present):
        raise FallbackNeeded("advanced indexing with several index tensors")
    position = present[0]
    index_tensor_value = indices[position]
    if index_tensor_value.dtype == torch.bool:
        raise FallbackNeeded("boolean mask indexing")
    x_size = x.get_size()
    index_size = index_tensor_value.get_size()
    x_loader = x.make_loader()
    index_loader = index_tensor_value.make_loader()
    index_rank = len(index_size)
    site = ctx.site()
    _check_indexable(x_size[position])

    def inner_fn(ops, index):
        picked = index_loader(ops, index[position:position + index_rank])
        row = ops.indirect_indexing(picked, x_size[position], site)
        source = [*index[:position], row, *index[position + index_rank:]]
        return x_loader(ops, source)

    return Pointwise(out.device, out.dtype, _size(out), inner_fn, ctx.origin())


@register(aten.gather.default)
def gather(ctx, node, x, dim, index, *, sparse_grad=False):
    out = _val(node)
    rank = len(x.get_size())
    if len(index.get_size()) != rank or rank == 0:  # ATen treats a 0-d input or index as 1-d
        raise FallbackNeeded("gather from a 0-d tensor, or with an index of another rank")
    dim = _dim(dim, rank)
    x_loader = x.make_loader()
    index_loader = index.make_loader()
    size_along = x.get_size()[dim]
    site = ctx.site()
    _check_indexable(size_along)

    def inner_fn(ops, position):
        picked = ops.indirect_indexing(index_loader(ops, position), size_along, site, wrap_negative=False)
        source = list(position)
        source[dim] = picked
        return x_loader(ops, source)

    return Pointwise(out.device, out.dtype, _size(out), inner_fn, ctx.origin())


# -- reductions -------------------------------------------------------------------------------------------------
_NO_IDENTITY = ("max", "min", "argmax", "argmin")


def reduction(ctx, node, x, dims, keepdim: bool, reduction_type: str, dtype: torch.dtype | None = None,
              out=None, result_dtype: torch.dtype | None = None):
    """`x` reduced over `dims`, stored; `out` (default: the node's value) gives the result's
    shape and, unless `result_dtype` says otherwise, its dtype."""
    out = _val(node) if out is None else out
    size = x.get_size()
    rank = len(size)
    dims = sorted({_dim(d, rank) for d in (range(rank) if dims is None or dims == [] else dims)})
    if rank == 0:
        dims = []  # dim 0 or -1 of a 0-d tensor: its one element
    kept = [d for d in range(rank) if d not in dims]
    reduction_ranges = [size[d] for d in dims] or [sympy.Integer(1)]
    if reduction_type in _NO_IDENTITY and any(r == 0 for r in reduction_ranges):
        # eager raises ("Expected reduction dim to be specified for input.numel() == 0"); the
        # ATen call raises it on every run (fuzz default 26701: `c.min()` of an empty tensor)
        raise FallbackNeeded(f"{reduction_type} over an empty dim has no value")
    if reduction_type in _NO_IDENTITY + ("welford_mean", "welford_m2") and any(_may_be_zero(r) for r in reduction_ranges):
        raise ShapesNotSupported(f"{reduction_type} over {reduction_ranges} elements, which may be none")
    out_size = _size(out)
    loader = x.make_loader()
    compute = dtype or (out.dtype if reduction_type not in ("argmax", "argmin") else x.dtype)
    compute = _LOW_PRECISION.get(compute, compute)  # accumulate float16/bfloat16 in float32

    def inner_fn(ops, index, rindex):
        full = [None] * rank
        out_positions = [d for d in range(rank) if keepdim or d in kept]
        index_by_dim = dict(zip(out_positions, index))
        for d in kept:
            full[d] = index_by_dim[d]
        for d, r in zip(dims, rindex):
            full[d] = r
        value = loader(ops, full)
        return ops.to_dtype(value, compute) if x.dtype != compute else value

    spec = ReductionSpec(reduction_type, reduction_ranges, compute)
    node_ir = Reduction(out.device, result_dtype or out.dtype, out_size, inner_fn, spec, ctx.origin())
    return ctx.store(node_ir)


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(ctx, node, x, dims=None, keepdim=False, *, dtype=None):
    out = _val(node)
    return reduction(ctx, node, x, dims, keepdim, "sum", out.dtype)


def _reduced_count(x, dims):
    """How many elements of `x` each output of a reduction over `dims` (None or []: all) combines
    (an int, or a sympy expression of the sizes)."""
    size = x.get_size()
    rank = len(size)
    count = sympy.Integer(1)
    for d in (range(rank) if not dims or rank == 0 else {_dim(d, rank) for d in dims}):
        count = count * size[d]
    return int(count) if count.is_number else count


@register(aten.mean.dim, aten.mean.default)
def mean(ctx, node, x, dims=None, keepdim=False, *, dtype=None):
    out = _val(node)
    # ATen's CPU mean of float16/bfloat16 sums and divides in float32 and rounds once (a sum
    # rounded first overflows float16, or rounds twice).
    compute = _LOW_PRECISION.get(out.dtype, out.dtype)
    total = reduction(ctx, node, x, dims, keepdim, "sum", out.dtype, result_dtype=compute)
    count = _reduced_count(x, dims)
    if not _centers_its_input(node) or _may_be_zero(count):
        return pointwise(ctx, node, "truediv", [total, count if is_symbolic(count) else float(count)],
                         input_dtypes=[compute, compute])
    # x - mean(x) (var/std's backward, a centering): a row of equal values must give exactly 0,
    # as eager's pairwise-summed mean does for 2^k of them, but a running sum of 3 x's rounds
    # (issue 32: the gradient of var(v) for 16 equal v was 1e-5, not 0).  Where the row's
    # largest and smallest values are equal (and the sum finite), the mean is that value (+0
    # for a row of -0.0, as eager's sum from +0); else sum / n as before.
    largest = reduction(ctx, node, x, dims, keepdim, "max", compute, result_dtype=compute)
    smallest = reduction(ctx, node, x, dims, keepdim, "min", compute, result_dtype=compute)
    loaders = [value.make_loader() for value in (total, largest, smallest)]

    def exact_if_equal(ops, index):
        sum_value, high, low = (load(ops, index) for load in loaders)
        divisor = ops.index_expr(count, compute) if is_symbolic(count) else ops.constant(float(count), compute)
        mean_value = ops.truediv(sum_value, divisor)
        equal = ops.logical_and(ops.eq(high, low), ops.logical_not(ops.isinf(sum_value)))
        value = ops.where(equal, ops.add(high, ops.constant(0.0, compute)), mean_value)
        return ops.to_dtype(value, out.dtype) if compute != out.dtype else value

    return Pointwise(out.device, out.dtype, _size(out), exact_if_equal, ctx.origin())


def _centers_its_input(node) -> bool:
    """Is `mean(x)` subtracted from that same x, here or, before the joint graph was partitioned,
    in the backward (graph_patterns.centering_means)?"""
    return bool(node.meta.get(CENTERS_ITS_INPUT)) or centers_its_input(node)


def _welford(ctx, node, x, dims, correction, keepdim, out, root: bool = False):
    """mean and the sum of squared deviations (m2) in one Welford pass, then var = m2 / (n - correction)
    (its square root, the std, if `root`).

    Both statistics are kept in float32 for float16/bfloat16 inputs (m2 overflows float16), and
    the variance is rounded to the output dtype only after the square root."""
    count = _reduced_count(x, dims)
    dims = None if not dims else list(dims)
    stats_dtype = _LOW_PRECISION.get(out.dtype, out.dtype)
    mean = reduction(ctx, node, x, dims, keepdim, "welford_mean", out=out, result_dtype=stats_dtype)
    m2 = reduction(ctx, node, x, dims, keepdim, "welford_m2", out=out, result_dtype=stats_dtype)
    m2.data.partner = mean.data.partner = (mean.name, m2.name)
    correction = 1 if correction is None else correction
    if is_symbolic(count):
        if not provably_nonnegative(count - correction):
            raise ShapesNotSupported(f"{node.target} with correction {correction} over {count} elements")
        divisor = sympy.expand(count - correction)
    else:
        divisor = float(max(count - correction, 0))

    def divisor_value(ops):
        return ops.index_expr(divisor, stats_dtype) if is_symbolic(divisor) else ops.constant(divisor, stats_dtype)

    def variance(ops, index):
        value = ops.truediv(ops.load(m2.name, m2.layout.index(index)), divisor_value(ops))
        value = ops.sqrt(value) if root else value
        return ops.to_dtype(value, out.dtype) if stats_dtype != out.dtype else value

    def mean_value(ops, index):
        if count == 0:  # the mean of nothing is NaN, as in eager
            return ops.constant(float("nan"), out.dtype)
        value = ops.load(mean.name, mean.layout.index(index))
        return ops.to_dtype(value, out.dtype) if stats_dtype != out.dtype else value

    var = Pointwise(out.device, out.dtype, _size(out), variance, ctx.origin())
    mean_result = Pointwise(out.device, out.dtype, _size(out), mean_value, ctx.origin()) \
        if count == 0 or stats_dtype != out.dtype else mean
    return var, mean_result


@register(aten.var_mean.correction, aten.var.correction, aten.std.correction)
def var_std(ctx, node, x, dims=None, *, correction=None, keepdim=False):
    if not x.dtype.is_floating_point:
        raise FallbackNeeded(f"{node.target} of an integer tensor")
    value = _val(node)
    variance, mean = _welford(ctx, node, x, dims, correction, keepdim, value[0] if isinstance(value, tuple) else value,
                              root=node.target is aten.std.correction)
    if node.target is not aten.var_mean.correction:
        return variance
    count = _reduced_count(x, dims)
    rank = len(x.get_size())
    every_dim = not dims or rank == 0 or len({_dim(d, rank) for d in dims}) == rank
    if count != 0 and every_dim:
        # Over every dim eager's mean is sum / n (two passes; over some dims it is Welford's, as
        # here): Welford's running mean rounds at every step (the mean of integer-valued floats,
        # exact in eager, came out 1 ulp off and its trunc jumped: fuzz default 24459).  The sum
        # fuses into the Welford kernel.
        want = _val(node)[1]
        stats_dtype = _LOW_PRECISION.get(want.dtype, want.dtype)
        # ATen's CPU Welford accumulates in double: [2^31, 1, -2^31, 0, ...] has mean 1/n there,
        # and 0 from a float32 sum (fuzz known 7706)
        if want.device.type == "cpu":
            stats_dtype = torch.float64
        total = reduction(ctx, node, x, None if not dims else list(dims), keepdim, "sum", stats_dtype, out=want,
                          result_dtype=stats_dtype)

        welford_mean = mean
        running_loader = mean.make_loader()

        def mean_value(ops, index):
            value = ops.truediv(ops.load(total.name, total.layout.index(index)),
                                ops.index_expr(count, stats_dtype) if is_symbolic(count)
                                else ops.constant(float(count), stats_dtype))
            # A sum that is not finite (an inf or NaN in the input, or finite values overflowing
            # it) gives way to Welford's mean, as eager's: [inf, 1] has mean NaN there (inf - inf
            # in the running update), [1, inf] inf; an overflowing sum's mean is finite
            # (fuzz default 27061, 30803).
            running = running_loader(ops, index)
            if welford_mean.dtype != stats_dtype:
                running = ops.to_dtype(running, stats_dtype)
            value = ops.where(ops.isinf(value), running, ops.where(ops.isnan(value), running, value))
            return ops.to_dtype(value, want.dtype) if stats_dtype != want.dtype else value

        mean = Pointwise(want.device, want.dtype, _size(want), mean_value, ctx.origin())
    return variance, mean


@register(aten.amax.default, aten.max.default)
def amax(ctx, node, x, dims=(), keepdim=False):
    return reduction(ctx, node, x, list(dims), keepdim, "max")


@register(aten.amin.default, aten.min.default)
def amin(ctx, node, x, dims=(), keepdim=False):
    return reduction(ctx, node, x, list(dims), keepdim, "min")


@register(aten.prod.default, aten.prod.dim_int)
def prod(ctx, node, x, dim=None, keepdim=False, *, dtype=None):
    dims = None if dim is None or isinstance(dim, torch.dtype) else [dim]
    return reduction(ctx, node, x, dims, keepdim, "prod", _val(node).dtype)


@register(aten.any.default, aten.any.dim, aten.any.dims)
def any_(ctx, node, x, dim=None, keepdim=False):
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return reduction(ctx, node, x, dims, keepdim, "any", torch.bool)


@register(aten.all.default, aten.all.dim, aten.all.dims)
def all_(ctx, node, x, dim=None, keepdim=False):
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return reduction(ctx, node, x, dims, keepdim, "all", torch.bool)


@register(aten.argmax.default, aten.argmin.default)
def argmax(ctx, node, x, dim=None, keepdim=False):
    kind = "argmax" if node.target is aten.argmax.default else "argmin"
    if dim is None:
        flat = View(x, [x.numel()], view_reindex(x.get_size(), [x.numel()]))
        return reduction(ctx, node, flat, [0], False, kind)
    return reduction(ctx, node, x, [dim], keepdim, kind)


@register(__import__("operator").getitem)
def getitem(ctx, node, values, position):
    """Picks one result of a multi-output lowering (split, unbind) or fallback."""
    if isinstance(values, (list, tuple)):
        return values[position]
    raise FallbackNeeded("getitem of a single value")
from . import pooling  # noqa: E402,F401  (registers its lowerings)
from . import scatter  # noqa: E402,F401  (registers its lowerings)
from . import division  # noqa: E402,F401  (registers its lowerings)
