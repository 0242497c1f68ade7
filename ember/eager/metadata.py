"""Ops whose fake-tensor metadata disagrees with eager's kernel, and the ops that compute the same
result with metadata that is right.

`bool_tensor ** True` is a bool tensor in eager (a bool scalar does not promote a bool tensor;
ATen's fast paths copy the base or fill ones), but the meta function of `pow.Tensor_Scalar`
promotes bool to int64.  Every op traced after it inherits the wrong dtype, and capture then
takes `v.long()` of that int64 fake for `v` itself (`.long()` of an int64 tensor returns it), so
the graph returned one tensor for two with different dtypes (test_capture_sees_a_bool_power_as_bool).

Capture's fake propagation (`EagerLayoutMode`) and the AOT tracer (as a decomposition) both run
these rewrites, so the two agree with eager and with each other.
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
