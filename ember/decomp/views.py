"""Backwards of views: the gradient of x[...] is zeros with the gradient written over the view.

As `*_scatter` of zeros they lower to one pointwise pass (lowerings.slice_scatter) that fuses
with what made the gradient, instead of an ATen call that allocates and fills.
"""
import torch

from . import register

aten = torch.ops.aten


@register(aten.slice_backward.default)
def slice_backward(grad, input_sizes, dim, start, end, step):
    return aten.slice_scatter.default(aten.new_zeros.default(grad, input_sizes), grad, dim, start, end, step)


@register(aten.select_backward.default)
def select_backward(grad, input_sizes, dim, index):
    return aten.select_scatter.default(aten.new_zeros.default(grad, input_sizes), grad, dim, index)


@register(aten.stack.default)
def stack(tensors, dim=0):
    """stack is cat of the pieces each with a new dimension of 1 (the backward of unbind: an
    attention's q, k and v gradients), one pointwise pass instead of an ATen call."""
    ndim = tensors[0].dim() + 1
    dim = dim + ndim if dim < 0 else dim
    return aten.cat.default([aten.unsqueeze.default(t, dim) for t in tensors], dim)
