"""Lowerings of true and rounding division (`x / y`, `torch.div(x, y, rounding_mode=...)`).

On a GPU, eager divides by a Python number as a multiplication by its reciprocal: a true
division by `fl(1 / y)` (taken in float64, rounded to the op's math type), a truncating one
`trunc(x * (1 / y))` (taken in the math type; scripts/gpu_div_probe.py).  The product can round
otherwise than the quotient (test_division.py::test_ember_divides_by_a_number_as_eagers_cuda_kernel).
A CPU tensor of no dims as the divisor is inverted in the kernel for truncation.  On the CPU
eager divides, and so do ember's kernels.
"""
from __future__ import annotations

import torch

from .ir import IRNode, Pointwise
from .pointwise import _rounded_to, pointwise
from .registry import _LOW_PRECISION, _size, _val, FallbackNeeded, loader_for, register

aten = torch.ops.aten


def _cpu_scalar_copy(arg) -> bool:
    """Is `arg` the device copy of a CPU scalar tensor (codegen's `_copy_cpu_scalars_to_device`)?"""
    return (isinstance(arg, torch.fx.Node) and arg.target is aten._to_copy.default and
            isinstance(arg.args[0], torch.fx.Node) and bool(arg.args[0].meta.get("ember_copied_to_device")))


def _reciprocal_loader(node, divisor, out_size, compute, rounding_mode):
    """The divisor's reciprocal as eager's CUDA kernels take it, or None where they divide."""
    if _val(node).device.type != "cuda" or not _val(node).dtype.is_floating_point:
        return None
    if isinstance(divisor, (int, float)) and not isinstance(divisor, bool):
        scalar = torch.tensor(divisor, dtype=torch.float64)
        if rounding_mode == "trunc":  # 1 / b in the op's math type
            inverse = torch.tensor(1.0, dtype=compute) / scalar.to(compute)
        else:  # 1 / b in float64, then rounded to it
            inverse = (torch.tensor(1.0, dtype=torch.float64) / scalar).to(compute)
        return loader_for(float(inverse), out_size, compute)
    if rounding_mode == "trunc" and isinstance(divisor, IRNode) and len(node.args) > 1 and \
            _cpu_scalar_copy(node.args[1]):
        load = loader_for(divisor, out_size, compute)
        return lambda ops, index: ops.reciprocal(load(ops, index))
    return None


def _divide(ctx, node, a, b, rounding_mode):
    value = _val(node)
    promoted = value.dtype
    compute = _LOW_PRECISION.get(promoted, promoted)
    out_size = _size(value)
    inverse = _reciprocal_loader(node, b, out_size, compute, rounding_mode)
    if inverse is None:
        return pointwise(ctx, node, "truediv" if rounding_mode is None else "truncdiv", [a, b])
    numerator = loader_for(a, out_size, compute)
    if isinstance(a, IRNode) and a.dtype != promoted and compute != promoted:
        numerator = _rounded_to(numerator, promoted, compute)  # (to the half type first, as eager converts it)

    def inner_fn(ops, index):
        result = ops.mul(numerator(ops, index), inverse(ops, index))
        if rounding_mode == "trunc":
            result = ops.trunc(result)
        return ops.to_dtype(result, promoted) if compute != promoted else result

    return Pointwise(value.device, promoted, out_size, inner_fn, ctx.origin())


@register(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def div(ctx, node, a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return _divide(ctx, node, a, b, None)
    if not _val(node).dtype.is_floating_point:
        raise FallbackNeeded("integer division (ATen raises on division by zero)")
    if rounding_mode == "floor":
        return pointwise(ctx, node, "floordiv", [a, b])
    return _divide(ctx, node, a, b, "trunc")
