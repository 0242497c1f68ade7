"""Sizes that may be symbols (a ShapeEnv's SymInts), read without adding guards: comparing or
converting a SymInt guards it; these compare expressions and read hints instead.

`symbolic_result`: fake results for ops whose fake kernels turn symbolic sizes into numbers (C++
code reading `sizes()`, as `constant_pad_nd` under `F.pad`: every sequence length of a causal-LM
loss became its own graph); capture's fake propagation and the ATen tracer ask them first.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def has_symbols(value: Any) -> bool:
    """Does a tensor's layout (or a scalar) hold symbols?"""
    if isinstance(value, SYMBOLIC):
        return True
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride(), value.storage_offset()))
    return False


def expr(value):
    """A size as a comparable value: a SymInt's expression (comparing SymInts would guard them)."""
    return value.node.expr if isinstance(value, torch.SymInt) else value


def hint(value) -> int | None:
    """A size at the trace's values, read without a guard (None: data-dependent)."""
    if isinstance(value, torch.SymInt):
        return None if value.node.hint is None else int(value.node.hint)
    return int(value)


def contiguous_without_guards(tensor: torch.Tensor) -> bool:
    """is_contiguous() without guarding symbolic sizes: strides compared as expressions."""
    if not has_symbols(tensor):
        return tensor.is_contiguous()
    expected = 1
    for size, stride in reversed(list(zip(tensor.shape, tensor.stride()))):
        if expr(size) != 1 and expr(stride) != expr(expected):
            return False
        expected = expected * size
    return True


def dense_in_order(sizes: list[int], strides: list[int], order: list[int]) -> bool:
    """Are these (numeric) strides a contiguous layout of the dims in `order`, outermost first
    (size-1 dims' strides not counted)?"""
    running = 1
    for dim in reversed(order):
        if sizes[dim] != 1 and strides[dim] != running:
            return False
        running *= sizes[dim]
    return True


def symbolic_dims(value: Any) -> tuple[int, ...]:
    """The dimensions of a fake tensor whose sizes are symbols."""
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
        return ()
    return tuple(d for d, size in enumerate(value.shape) if isinstance(size, torch.SymInt))


aten = torch.ops.aten

_RULES: dict[Any, Callable] = {}


def _rule(op):
    def register(function: Callable) -> Callable:
        _RULES[op] = function
        return function

    return register


def symbolic_result(func, args: tuple, kwargs: dict):
    """The fake result of `func` computed with symbolic sizes kept, or None (no rule, or no
    symbolic input): then the op's own fake kernel runs."""
    rule = _RULES.get(func)
    if rule is None or not args or not has_symbols(args[0]):
        return None
    return rule(*args, **kwargs)


@_rule(aten.constant_pad_nd.default)
def _constant_pad_nd(x: torch.Tensor, pad, value=0):
    if len(pad) % 2 or len(pad) // 2 > x.dim():
        return None  # (the op's own checks raise eager's error)
    sizes = list(x.shape)
    for index in range(len(pad) // 2):
        dim = x.dim() - 1 - index
        sizes[dim] = sizes[dim] + pad[2 * index] + pad[2 * index + 1]
    return torch.empty(sizes, dtype=x.dtype, device=x.device)
