"""Ops whose fake-tensor metadata disagrees with eager's kernel, and the ops that compute the same
result with metadata that is right: `bool_tensor ** True` is a bool tensor in eager, but the meta
function of `pow.Tensor_Scalar` promotes bool to int64, and every op traced after it inherits the
wrong dtype (test_capture_sees_a_bool_power_as_bool).  Capture's fake propagation
(`EagerLayoutMode`) and the AOT tracer (as a decomposition) both run these rewrites.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

aten = torch.ops.aten

REWRITES: dict[Any, Callable] = {}


def _rewrite(op):
    def decorator(function: Callable) -> Callable:
        REWRITES[op] = function
        return function

    return decorator


@_rewrite(aten.pow.Tensor_Scalar)
def pow_tensor_scalar(x, exponent):
    if not isinstance(x, torch.Tensor) or x.dtype != torch.bool or type(exponent) is not bool:
        return NotImplemented
    # x ** True is x; x ** False is 1 (True) everywhere, as for any base.
    return aten.clone.default(x) if exponent else aten.ones_like.default(x)


def rewritten(func, args: tuple, kwargs: dict) -> Any:
    """`func(*args, **kwargs)` computed by ops with eager's metadata, or NotImplemented."""
    rule = REWRITES.get(func)
    if rule is None:
        return NotImplemented
    return rule(*args, **kwargs)
