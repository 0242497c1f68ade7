"""Ill-conditioned sums: where any summation order is as right as eager's.

`x.sum()` over values like [1.7e38, 0.3, -1.7e38, 0.5] has no well-defined float answer: whether
the small terms survive depends on the order of the additions (eager's cascade, a vectorized
kernel's lanes, even a float64 reference loses them). Compared element by element, such a
result says nothing about the compiler. While the float64 reference runs, this mode watches
every summing op and measures how much cancellation it does: the rounding error bound of a sum,
eps * sum(|terms|), against the size of the result. A program with a sum whose bound exceeds
its result (beyond the tolerance) is ill-conditioned: a value mismatch in it is reported as
such, not as a wrong result. So does sin/cos/tan of an argument so large that its own rounding
moves the result beyond the tolerance. So does layer_norm of a row with values beyond the square
root of float32's range: eager's float32 statistics overflow there, and its CPU kernel's
statistics even come out NaN for a constant row of 1e20 (the combine of its vector lanes with an
empty tail multiplies mean^2 = inf by a weight of 0); ember's Welford statistics are inf or exact,
the float64 reference finite, and none of the three is the compiler's mistake (seed 19579).
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# The precision eager sums in: float32 accumulation for float32/float16/bfloat16 programs.
ACCUMULATION_EPS = torch.finfo(torch.float32).eps
# Rounding error bound over result: above this the result is mostly rounding error.  Bounds
# below the fuzzer's float32 tolerance (ATOL, scaled like compare.py's) cannot make a mismatch.
CONDITION_LIMIT = 1.0
ATOL = 1e-5
# sin/cos/tan of arguments whose own rounding error exceeds this (10x ATOL: |x| above ~840).
_PERIODIC = (aten.sin.default, aten.cos.default, aten.tan.default)
PERIODIC_LIMIT = 1e-4
# layer_norm inputs whose squares (mean^2, deviations^2) overflow float32 statistics.
_MOMENTS = (aten.native_layer_norm.default,)
MOMENTS_LIMIT = torch.finfo(torch.float32).max ** 0.5


def _abs_twin(func, args, kwargs):
    """The same op over |terms|: the scale its rounding errors are relative to."""
    if func in (aten.mm.default, aten.bmm.default, aten.matmul.default):
        return func(args[0].abs(), args[1].abs())
    if func is aten.addmm.default:
        return aten.addmm.default(args[0].abs(), args[1].abs(), args[2].abs())
    if func in (aten.sum.default, aten.sum.dim_IntList, aten.nansum.default, aten.mean.default,
                aten.mean.dim, aten.cumsum.default):
        return func(torch.nan_to_num(args[0].abs(), nan=0.0), *args[1:], **kwargs)
    return None


class ConditionWatch(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ill_conditioned = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in _MOMENTS and not self.ill_conditioned:   # returns (out, mean, rstd)
            x = args[0].detach().double().abs()
            if bool((x[torch.isfinite(x)] >= MOMENTS_LIMIT).any()):
                self.ill_conditioned = True
            return result
        if self.ill_conditioned or not isinstance(result, torch.Tensor) or not result.is_floating_point():
            return result
        if func in _PERIODIC and isinstance(args[0], torch.Tensor):
            # sin(x) moves by up to |dx|: one rounding of a large argument (eps * |x|) moves
            # the result beyond any tolerance (sin(exp(10)) after a 1-ulp different exp).
            x = args[0].detach().double().abs()
            if bool((ACCUMULATION_EPS * x[torch.isfinite(x)] > PERIODIC_LIMIT).any()):
                self.ill_conditioned = True
            return result
        try:
            scale = _abs_twin(func, args, kwargs)
        except Exception:  # noqa: BLE001 - a watch must never change the run
            return result
        if scale is not None and scale.numel():
            bound = ACCUMULATION_EPS * scale.double()
            size = result.detach().double().abs()
            finite = torch.isfinite(bound) & torch.isfinite(size)
            if not bool(finite.any()):
                return result
            floor = ATOL * max(1.0, float(size[finite].median()))
            if bool((bound[finite] > CONDITION_LIMIT * size[finite] + floor).any()):
                self.ill_conditioned = True
        return result
