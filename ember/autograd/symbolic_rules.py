"""Fake results for ops whose fake kernels turn symbolic sizes into numbers.

Some ATen ops reach FakeTensorMode through C++ code that reads `sizes()` rather than
`sym_sizes()`: the fake kernel then calls int() on each symbolic size, and the ShapeEnv makes it
a constant (`constant_pad_nd`, under `F.pad`: every sequence length of a causal-LM loss, which
pads its labels, became its own graph).  For inputs with symbolic sizes these rules give the
result's metadata from the sizes' expressions instead; capture's fake propagation and the ATen
tracer both ask them first.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .symbolic import has_symbols

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
