"""Lowerings of true and rounding division (`x / y`, `torch.div(x, y, rounding_mode=...)`).

On a GPU, eager truncates a division by a CPU scalar (a Python number, or a CPU tensor of no
dims) as `trunc(x * (1 / y))`: the scalar converted to the common dtype first, its reciprocal
taken in the op's math type (float32 for float16/bfloat16/float32, float64 for float64).  The
product can round otherwise than the quotient, and the truncation makes one bit a different
integer (`div(e, 1e-3, rounding_mode='trunc')`, fuzz conv 704734; tests/codegen/test_division.py).
Its true division by such a scalar divides (torch 2.11 on an H200: -2220 / 0.001 is -2220000,
where -2220 * fl(1 / 0.001) is -2219999.75), and so does ember's; on the CPU eager divides in
both, and so do its kernels here.
"""
from __future__ import annotations

import torch

from .ir import IRNode, Pointwise
from .lowerings import _LOW_PRECISION, _size, _val, FallbackNeeded, loader_for, pointwise, register

aten = torch.ops.aten


def _cpu_scalar_copy(arg) -> bool:
    """Is `arg` the device copy of a CPU scalar tensor (codegen's `_copy_cpu_scalars_to_device`)?"""
    return (isinstance(arg, torch.fx.Node) and arg.target is aten._to_copy.default and
            isinstance(arg.args[0], torch.fx.Node) and bool(arg.args[0].meta.get("ember_copied_to_device")))


def _reciprocal_loader(node, divisor, out_size, promoted, compute):
    """The divisor's reciprocal as eager's CUDA kernels take it, or None where they divide."""
    if _val(node).device.type != "cuda" or not promoted.is_floating_point:
        return None
    if isinstance(divisor, (int, float)) and not isinstance(divisor, bool):
        rounded = torch.tensor(divisor, dtype=torch.float64).to(promoted).to(compute)
        inverse = float(torch.tensor(1.0, dtype=compute) / rounded)
        return loader_for(inverse, out_size, compute)
    if isinstance(divisor, IRNode) and len(node.args) > 1 and _cpu_scalar_copy(node.args[1]):
        load = loader_for(divisor, out_size, promoted)

        def inverse(ops, index):
            value = load(ops, index)
            if compute != promoted:
                value = ops.to_dtype(value, compute)
            return ops.reciprocal(value)

        return inverse
    return None


def _divide(ctx, node, a, b, rounding_mode):
    value = _val(node)
    promoted = value.dtype
    compute = _LOW_PRECISION.get(promoted, promoted)
    out_size = _size(value)
    inverse = _reciprocal_loader(node, b, out_size, promoted, compute) if rounding_mode == "trunc" else None
    if inverse is None:
        return pointwise(ctx, node, "truediv" if rounding_mode is None else "truncdiv", [a, b])
    numerator = loader_for(a, out_size, compute)
    if isinstance(a, IRNode) and a.dtype != promoted and compute != promoted:
        plain = numerator

        def numerator(ops, index):  # (rounded to the half type first, as eager converts it)
            return ops.to_dtype(ops.to_dtype(plain(ops, index), promoted), compute)

    def inner_fn(ops, index):
        result = ops.mul(numerator(ops, index), inverse(ops, index))
        if rounding_mode == "trunc":
            result = ops.trunc(result)
        return ops.to_dtype(result, promoted) if compute != promoted else result

    return Pointwise(value.device, promoted, out_size, inner_fn, ctx.origin())


@register(aten.div.Tensor, aten.div.Scalar)
def true_divide(ctx, node, a, b):
    return _divide(ctx, node, a, b, None)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(ctx, node, a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return _divide(ctx, node, a, b, None)
    if not _val(node).dtype.is_floating_point:
        raise FallbackNeeded("integer division (ATen raises on division by zero)")
    if rounding_mode == "floor":
        return pointwise(ctx, node, "floordiv", [a, b])
    return _divide(ctx, node, a, b, "trunc")
