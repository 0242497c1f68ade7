"""Backward formulas that must follow eager's CPU kernels rather than what autograd does on fakes.

A few of autograd's formulas choose their implementation by the kind of tensor they see.  For
`min()`, `max()` and `median()` over all elements, eager (on real CPU tensors) scatters the
gradient into zeros at the selected positions; on tensor subclasses, fake tensors included, it
multiplies a 0/1 mask by the gradient instead, so an infinite or NaN gradient turns the zeros
into NaN.  While the joint graph is traced, `EagerFormulas` routes these calls through
autograd.Functions whose backward writes eager's result with `where`.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


class _SelectAll(torch.autograd.Function):
    """A reduction to one selected element (min, max, median): the gradient is shared evenly by
    the elements equal to the result (NaN results select the NaNs), and 0 elsewhere."""

    @staticmethod
    def forward(ctx, x, reduce):
        result = reduce(x)
        ctx.save_for_backward(x, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        x, result = ctx.saved_tensors
        selected = torch.where(result.isnan(), x.isnan(), x == result)
        share = grad / selected.sum()
        return torch.where(selected, share, grad.new_zeros(())), None


_SELECT_ALL = {
    torch.min: torch.Tensor.min, torch.Tensor.min: torch.Tensor.min,
    torch.max: torch.Tensor.max, torch.Tensor.max: torch.Tensor.max,
    torch.median: torch.Tensor.median, torch.Tensor.median: torch.Tensor.median,
}


class EagerFormulas(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        reduce = _SELECT_ALL.get(func)
        if reduce is not None and len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor) \
                and args[0].requires_grad and torch.is_grad_enabled():
            return _SelectAll.apply(args[0], reduce)
        return func(*args, **kwargs)
