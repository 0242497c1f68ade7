"""The lowering table and what every rule shares: `register`, `FallbackNeeded`, argument
readers (`_val`, `_size`, `_dim`), type promotion, `loader_for` (a value's loader broadcast to an
output size), index checks.  A rule, `@register(aten.add.Tensor) def add(ctx, node, a, b, *,
alpha=1)`, gets the GraphLowering (`ctx`) and the ATen FX node (its fake gives the output's dtype
and shape); one that cannot handle its arguments raises FallbackNeeded (the op runs as ATen).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import sympy
import torch

from .indexing import broadcast_index
from .ir import IRNode, product
from .symbolic import ShapesNotSupported, expr_of, is_symbolic, provably_nonnegative

aten = torch.ops.aten
LOWERINGS: dict[Any, Callable] = {}
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
    return ops.index_expr(value, dtype) if is_symbolic(value) else ops.constant(int(value), dtype)


def _promoted(node, positions: Sequence[int]) -> torch.dtype:
    """torch's type promotion of two arguments (tensor or Python scalar), as eager computes it."""
    values = []
    for position in positions:
        arg = node.args[position] if position < len(node.args) else None
        value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
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
        return lambda ops, index: ops.index_expr(value, dtype)
    if isinstance(value, sympy.Basic):
        value = int(value) if value.is_Integer else float(value)
    return lambda ops, index: ops.constant(value, dtype)


def _dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def _check_indexable(size) -> None:
    """Generated code turns an out-of-range index into a bounds error and reads row 0 meanwhile:
    a dimension with no row 0 is left to ATen (which raises for any index)."""
    if size == 0:
        raise FallbackNeeded("indexing into an empty dimension")
    if _may_be_zero(size):
        raise ShapesNotSupported(f"indexing into a dimension of size {size}, which may be 0")


def _check_empty_result(out, indices) -> None:
    """A result with no elements runs no kernel, so no bounds check: where eager checks every
    index anyway (embedding of 0-wide rows, index_select) ATen runs it (test_embedding_with_an_empty_result_still_checks_its_indices)."""
    elements = product(_size(out))
    if _may_be_zero(elements) and product(indices.get_size()) != 0:
        raise ShapesNotSupported(f"a result of {elements} elements, which may be none (eager still checks every index)")
    if elements == 0 and product(indices.get_size()) != 0:
        raise FallbackNeeded("a result with no elements (eager still checks every index)")


def _may_be_zero(size) -> bool:
    """A symbolic size that is 0 for some allowed sizes (s0 - 2), as far as ember can tell."""
    size = sympy.sympify(size)
    return not size.is_number and not provably_nonnegative(size - 1)
