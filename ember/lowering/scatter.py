"""Lowerings that write through data-dependent indices: index_put and scatter (add or assign).

Each becomes a `Scatter` buffer: the input copied into a fresh buffer, then the updates applied
in order (ir.Scatter).  Embedding's backward is `index_put(zeros, [indices], grad, accumulate)`,
so it runs as one C++ kernel instead of ATen's generic index_put.
"""
from __future__ import annotations

import torch

from ..device_limits import ATOMIC_UPDATES_PER_ROW_LIMIT
from .ir import IRNode, Pointwise, Scatter, product
from .registry import FallbackNeeded, _check_indexable, _dim, _size, _val, loader_for, register

aten = torch.ops.aten


def _check_contention(device, updates, rows) -> None:
    limit = ATOMIC_UPDATES_PER_ROW_LIMIT.get(device.type)
    if limit is None or not (getattr(updates, "is_number", True) and getattr(rows, "is_number", True)):
        return
    if int(updates) > limit * max(int(rows), 1):
        raise FallbackNeeded(f"an accumulating scatter of {int(updates)} updates into {int(rows)} rows: atomic "
                             f"adds to the same rows would serialize (ATen's kernel sorts the indices)")


def _check(x: IRNode) -> None:
    if x.dtype == torch.bool:
        raise FallbackNeeded("scatter into a bool tensor")


@register(aten.index_put.default)
def index_put(ctx, node, x, indices, values, accumulate=False):
    _check(x)
    present = [i for i, index in enumerate(indices) if index is not None]
    if len(present) != 1 or not isinstance(indices[present[0]], IRNode):
        raise FallbackNeeded("index_put with several index tensors")
    position = present[0]
    index_node = indices[position]
    if index_node.dtype not in (torch.int64, torch.int32):
        raise FallbackNeeded("index_put with a boolean mask")
    out = _val(node)
    x_size = x.get_size()
    index_size = index_node.get_size()
    rank = len(index_size)
    update_size = [*x_size[:position], *index_size, *x_size[position + 1:]]
    value_loader = loader_for(values, update_size, out.dtype)
    index_loader = index_node.make_loader()
    site = ctx.site()
    _check_indexable(x_size[position])
    if accumulate:
        _check_contention(out.device, product(index_size), x_size[position])

    def target(ops, index):
        row = ops.indirect_indexing(index_loader(ops, index[position:position + rank]), x_size[position], site)
        return [*index[:position], row, *index[position + rank:]]

    direct_inner = any(size != 1 for size in x_size[position + 1:])
    scatter = Scatter(out.device, out.dtype, update_size, value_loader, _size(out), x.make_loader(), target,
                      bool(accumulate), direct_inner, ctx.origin())
    return ctx.store(scatter)


def _scatter(ctx, node, x, dim, index, source, accumulate: bool):
    _check(x)
    out = _val(node)
    # Eager's CPU scatter_add of float16/bfloat16 sums in float32 and rounds once at the end (index_add
    # and index_put round after every addition): test_low_precision_scatter_add_sums_in_float32.
    dtype = torch.float32 if accumulate and out.dtype in (torch.float16, torch.bfloat16) else out.dtype
    x_size = x.get_size()
    rank = len(x_size)
    dim = _dim(dim, rank)
    index_size = index.get_size()
    if len(index_size) != rank or rank == 0:
        raise FallbackNeeded("scatter of a 0-d tensor, or with an index of another rank")
    index_loader = index.make_loader()
    if isinstance(source, IRNode):
        source_loader = source.make_loader()

        def value(ops, position):
            loaded = source_loader(ops, position)
            return ops.to_dtype(loaded, dtype) if source.dtype != dtype else loaded
    else:
        value = loader_for(source, index_size, dtype)

    site = ctx.site()
    _check_indexable(x_size[dim])
    if accumulate:
        _check_contention(out.device, index_size[dim], x_size[dim])  # (per target element)

    def target(ops, position):
        picked = ops.indirect_indexing(index_loader(ops, position), x_size[dim], site, wrap_negative=False)
        result = list(position)
        result[dim] = picked
        return result

    direct_inner = dim != rank - 1 and rank > 0 and index_size[-1] != 1
    scatter = Scatter(out.device, dtype, index_size, value, _size(out), loader_for(x, x_size, dtype), target,
                      accumulate, direct_inner, ctx.origin())
    result = ctx.store(scatter)
    if dtype == out.dtype:
        return result
    rounded = loader_for(result, x_size, out.dtype)
    return Pointwise(out.device, out.dtype, _size(out), rounded, ctx.origin())


@register(aten.scatter_add.default)
def scatter_add(ctx, node, x, dim, index, source):
    return _scatter(ctx, node, x, dim, index, source, accumulate=True)


@register(aten.scatter.src, aten.scatter.value)
def scatter(ctx, node, x, dim, index, source):
    return _scatter(ctx, node, x, dim, index, source, accumulate=False)
