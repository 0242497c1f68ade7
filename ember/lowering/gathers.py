"""Reads at data-dependent indices: embedding, x[indices] (index.Tensor), gather; each index
checked against its dimension (an out-of-range one becomes eager's IndexError)."""
from __future__ import annotations

import torch

from .ir import IRNode, Pointwise
from .registry import _check_empty_result, _check_indexable, _dim, FallbackNeeded, register, _size, _val

aten = torch.ops.aten


@register(aten.embedding.default)
def embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    out = _val(node)
    out_size = _size(out)
    weight_loader = weight.make_loader()
    index_loader = indices.make_loader()
    rows = weight.get_size()[0]
    index_rank = len(indices.get_size())
    site = ctx.site()
    _check_indexable(rows)
    _check_empty_result(out, indices)

    def inner_fn(ops, index):
        row = ops.indirect_indexing(index_loader(ops, index[:index_rank]), rows, site, wrap_negative=False)
        return weight_loader(ops, [row, *index[index_rank:]])

    return Pointwise(out.device, out.dtype, out_size, inner_fn, ctx.origin())


@register(aten.index.Tensor)
def index_tensor(ctx, node, x, indices):
    out = _val(node)
    present = [i for i, index in enumerate(indices) if index is not None]
    if len(present) != 1 or any(not isinstance(indices[i], IRNode) for i in present):
        raise FallbackNeeded("advanced indexing with several index tensors")
    position = present[0]
    index_tensor_value = indices[position]
    if index_tensor_value.dtype == torch.bool:
        raise FallbackNeeded("boolean mask indexing")
    x_size = x.get_size()
    index_size = index_tensor_value.get_size()
    x_loader = x.make_loader()
    index_loader = index_tensor_value.make_loader()
    index_rank = len(index_size)
    site = ctx.site()
    _check_indexable(x_size[position])

    def inner_fn(ops, index):
        picked = index_loader(ops, index[position:position + index_rank])
        row = ops.indirect_indexing(picked, x_size[position], site)
        source = [*index[:position], row, *index[position + index_rank:]]
        return x_loader(ops, source)

    return Pointwise(out.device, out.dtype, _size(out), inner_fn, ctx.origin())


@register(aten.gather.default)
def gather(ctx, node, x, dim, index, *, sparse_grad=False):
    out = _val(node)
    rank = len(x.get_size())
    if len(index.get_size()) != rank or rank == 0:  # ATen treats a 0-d input or index as 1-d
        raise FallbackNeeded("gather from a 0-d tensor, or with an index of another rank")
    dim = _dim(dim, rank)
    x_loader = x.make_loader()
    index_loader = index.make_loader()
    size_along = x.get_size()[dim]
    site = ctx.site()
    _check_indexable(size_along)

    def inner_fn(ops, position):
        picked = ops.indirect_indexing(index_loader(ops, position), size_along, site, wrap_negative=False)
        source = list(position)
        source[dim] = picked
        return x_loader(ops, source)

    return Pointwise(out.device, out.dtype, _size(out), inner_fn, ctx.origin())
