"""ember's decompositions: composite ATen ops rewritten into a small core set (PrimTorch's job).

Each entry is a Python function with the op's signature that calls simpler ATen ops; the ATen
tracer runs it in place of the op, so its body is traced in turn.  Entries register with
`@register(aten.op.overload, ...)`, grouped by family in the modules below.

    core_decompositions()  -> {OpOverload: function}
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


def core_decompositions() -> dict:
    from . import activations, linear, losses, norms, random, softmax  # noqa: F401 (registration)

    return dict(TABLE)
