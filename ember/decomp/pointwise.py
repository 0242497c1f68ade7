"""Pointwise ops whose fake-tensor metadata disagrees with eager's kernel.

`bool_tensor ** True` is a bool tensor in eager (the scalar does not promote a bool tensor),
but the fake tensor of the result says int64, and every op traced after it inherits the wrong
dtype.  Rewritten into ops whose metadata is right, the trace sees what eager computes.
"""
import torch

from . import register

aten = torch.ops.aten


@register(aten.pow.Tensor_Scalar)
def pow_tensor_scalar(x, exponent):
    if x.dtype != torch.bool or type(exponent) is not bool:
        return NotImplemented
    # x ** True is x; x ** False is 1 (True) everywhere, as for any base.
    return aten.clone.default(x) if exponent else aten.ones_like.default(x)
