"""Backward formulas that must follow eager's CPU kernels rather than what autograd does on fakes.

A few of autograd's formulas depend on the kind of tensor they see: for `min()`, `max()` and
`median()` over all elements, eager on CPU scatters the gradient into zeros at the selected
positions, but on fakes it multiplies a 0/1 mask (an infinite or NaN gradient turns the zeros into
NaN); `prod` divides by the input unless an element is zero.  While the joint graph is traced,
`EagerFormulas` routes these through autograd.Functions whose backward gives eager's result.
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


def _exclusive_products(x: torch.Tensor, dim: int) -> torch.Tensor:
    """For each element, the product of the others along `dim` (no division, so zeros are fine)."""
    length = x.shape[dim]
    if length == 1:
        return torch.ones_like(x)
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    before = torch.cat([ones, x.narrow(dim, 0, length - 1)], dim).cumprod(dim)
    after = torch.cat([ones, x.narrow(dim, 1, length - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return before * after


class _Prod(torch.autograd.Function):
    """prod's gradient as eager's CPU kernel chooses it by the data: grad * prod / x when no
    element is zero, else the products of the other elements (all-reduce: zero when two or more
    elements are zero).  Autograd on fakes always takes the second form, which differs with
    infinities and overflow."""

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        result = x.prod() if dim is None else x.prod(dim, keepdim)
        ctx.save_for_backward(x, result)
        ctx.dim, ctx.keepdim = dim, keepdim
        return result

    @staticmethod
    def backward(ctx, grad):
        x, result = ctx.saved_tensors
        if x.dim() == 0:
            return grad, None, None
        if ctx.dim is None:
            zeros = (x == 0).sum()
            plain = grad * (result / x)
            others = (grad * _exclusive_products(x.reshape(-1), 0)).reshape(x.shape)
            return torch.where(zeros == 0, plain, torch.where(zeros == 1, others, torch.zeros_like(x))), None, None
        dim = ctx.dim % x.dim()
        if not ctx.keepdim:
            grad, result = grad.unsqueeze(dim), result.unsqueeze(dim)
        plain = grad * (result / x)
        others = grad * _exclusive_products(x, dim)
        return torch.where((x == 0).any(), others, plain), None, None


def _prod(x, dim=None, keepdim=False, *, dtype=None):
    return NotImplemented if dtype is not None and dtype != x.dtype else _Prod.apply(x, dim, keepdim)


_SELECT_ALL = {function: method for method in (torch.Tensor.min, torch.Tensor.max, torch.Tensor.median)
               for function in (getattr(torch, method.__name__), method)}
_PROD = {torch.prod, torch.Tensor.prod}


class EagerFormulas(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        differentiable = args and isinstance(args[0], torch.Tensor) and args[0].requires_grad and \
            torch.is_grad_enabled()
        if differentiable:
            reduce = _SELECT_ALL.get(func)
            if reduce is not None and len(args) == 1 and not kwargs and args[0].device.type != "cuda":
                # (on CUDA eager multiplies the mask, as autograd does on fakes: a NaN gradient
                # makes every element NaN there; fuzz reductions 700927 on an H200)
                return _SelectAll.apply(args[0], reduce)
            if func in _PROD and args[0].is_floating_point():
                result = _prod(*args, **kwargs)
                if result is not NotImplemented:
                    return result
        return func(*args, **kwargs)
