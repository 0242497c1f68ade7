"""ember's decompositions: composite ATen ops rewritten into a small core set (PrimTorch's job).

Each entry (`@register(aten.op.overload, ...)`, by family in the modules below) is a function
with the op's signature that calls simpler ATen ops; the ATen tracer runs it in place of the op.
`core_decompositions()` gives the table, {OpOverload: function}.
"""
from __future__ import annotations

from typing import Callable

import torch

TABLE: dict = {}


def register(*ops):
    def decorator(function: Callable) -> Callable:
        for op in ops:
            if op in TABLE:
                raise RuntimeError(f"duplicate decomposition for {op}")
            TABLE[op] = function
        return function

    return decorator


_LOW_PRECISION = (torch.float16, torch.bfloat16)


def upcast(*tensors):
    """float16/bfloat16 tensors as float32 (others, and None, as they are): decompositions of ops
    that eager computes in float32 internally must not round after every step."""
    aten = torch.ops.aten
    return tuple(aten._to_copy.default(t, dtype=torch.float32) if t is not None and t.dtype in _LOW_PRECISION
                 else t for t in tensors)


def downcast(value, dtype: torch.dtype):
    """`value` converted back to `dtype` (the input's) if the computation ran wider."""
    if value is None or value.dtype == dtype:
        return value
    return torch.ops.aten._to_copy.default(value, dtype=dtype)


def divide_by_count(value, count):
    """value / count for an element count: times 1.0 / count for a number (as eager's kernels
    scale), a division by the size itself when it is symbolic (dynamic shapes: 1.0 / s0 would
    be a SymFloat the code generator cannot take as a kernel argument; a SymInt it can)."""
    if isinstance(count, torch.SymInt):
        return torch.ops.aten.div.Tensor(value, count)
    return torch.ops.aten.mul.Tensor(value, 1.0 / count)


def core_decompositions() -> dict:
    from . import activations, linear, losses, norms, pointwise, random, softmax, views  # noqa: F401 (registration)

    return dict(TABLE)
