"""View rules (view, permute, expand, slice, select, split, as_strided), cat, slice and select
scatters, constant padding, and getitem of a multi-output rule."""
from __future__ import annotations

import operator

import sympy
import torch

from ..errors import GraphNotSupported
from .indexing import broadcast_index, view_reindex
from .ir import Buffer, ComputedBuffer, IRNode, Layout, Pointwise, ReinterpretView, View
from .pointwise import _constant_fill
from .registry import _dim, FallbackNeeded, _int_value, register, _size, _val
from .symbolic import ShapesNotSupported, expr_of, is_symbolic, provably_nonnegative

aten = torch.ops.aten


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
          aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def view(ctx, node, x, *args):
    new_size = _size(_val(node))
    return View(x, new_size, view_reindex(x.get_size(), new_size))


@register(aten.permute.default)
def permute(ctx, node, x, dims):
    size = x.get_size()
    rank = len(size)
    dims = [_dim(d, rank) for d in dims]

    def reindex(index):
        old = [None] * rank
        for new_position, old_position in enumerate(dims):
            old[old_position] = index[new_position]
        return old

    return View(x, [size[d] for d in dims], reindex)


@register(aten.t.default)
def t(ctx, node, x):
    if len(x.get_size()) < 2:
        return x
    return permute(ctx, node, x, [1, 0])


@register(aten.transpose.int)
def transpose(ctx, node, x, dim0, dim1):
    rank = len(x.get_size())
    dims = list(range(rank))
    a, b = _dim(dim0, rank), _dim(dim1, rank)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(ctx, node, x, dims)


@register(aten.expand.default)
def expand(ctx, node, x, size, *, implicit=False):
    new_size, old_size = _size(_val(node)), x.get_size()
    return View(x, new_size, lambda index: broadcast_index(index, new_size, old_size))


@register(aten.slice.Tensor)
def slice_(ctx, node, x, dim=0, start=None, end=None, step=1):
    dim = _dim(dim, len(x.get_size()))
    start = _start(x.get_size()[dim], start)
    if not isinstance(step, int):
        raise ShapesNotSupported(f"{node.target} with a symbolic step {step}")
    return _sliced(x, dim, start, step, _size(_val(node)))


def _sliced(x, dim, start, step, size):
    def reindex(index):
        old = list(index)
        old[dim] = sympy.sympify(start) + index[dim] * step
        return old

    return View(x, size, reindex)


def _start(length, start):
    """A slice's first index, clamped to [0, length] as Python does (where a symbolic length or
    start makes that decidable for every allowed size; else ShapesNotSupported)."""
    start = 0 if start is None else start
    if length.is_number and not is_symbolic(start):
        length, start = int(length), int(start)
        return max(0, min(length, start + length if start < 0 else start))
    start = expr_of(start)
    if start.is_number and start < 0:
        start = length + start
    elif not start.is_number and not provably_nonnegative(start):
        if provably_nonnegative(-start - 1):  # negative for every size: from the end
            start = length + start
        else:
            raise ShapesNotSupported(f"slice start {start} of a dimension of size {length}: its sign depends on the sizes")
    if not (provably_nonnegative(start) and provably_nonnegative(length - start)):
        raise ShapesNotSupported(f"slice start {start} of a dimension of size {length}: may need clamping")
    return start


def _position(length, position, what: str):
    """A select's index, counted from the end where negative."""
    position = expr_of(position)
    if position.is_number:
        return int(position) + length if int(position) < 0 else int(position)
    if not provably_nonnegative(position):
        raise ShapesNotSupported(f"{what} {position}: its sign depends on the sizes")
    return position


@register(aten.select.int)
def select(ctx, node, x, dim, position):
    dim = _dim(dim, len(x.get_size()))
    position = _position(x.get_size()[dim], position, "select of position")
    return _selected(x, dim, position, _size(_val(node)))


def _selected(x, dim, position, size):
    def reindex(index):
        old = list(index)
        old.insert(dim, sympy.sympify(position))
        return old

    return View(x, size, reindex)


@register(aten.alias.default, aten.detach.default)
def alias(ctx, node, x):
    return x


@register(aten.split.Tensor, aten.split_with_sizes.default)
def split(ctx, node, x, sizes, dim=0):
    outputs = _val(node)
    rank = len(x.get_size())
    dim = _dim(dim, rank)
    results, start = [], sympy.Integer(0)
    for out in outputs:
        length = expr_of(out.shape[dim])
        results.append(_sliced(x, dim, start, 1, _size(out)))
        start = start + length
    return results


@register(aten.unbind.int)
def unbind(ctx, node, x, dim=0):
    dim = _dim(dim, len(x.get_size()))
    return [_selected(x, dim, position, _size(out)) for position, out in enumerate(_val(node))]


@register(aten.as_strided.default)
def as_strided(ctx, node, x, size, stride, storage_offset=None):
    # as_strided indexes x's storage itself: x must be in memory as eager lays it out
    traced = ctx.realize_as_traced(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
    if traced is None:
        raise GraphNotSupported("as_strided of a value ember cannot lay out in memory as eager does")
    buffer = traced if isinstance(traced, Buffer) else traced.buffer
    if traced is not buffer and storage_offset is None:
        storage_offset = traced.layout.offset
    if storage_offset is not None and not isinstance(buffer, ComputedBuffer):
        # Kernels index an input from where it sits in its storage at the call (the wrapper's
        # ptr), which can differ from the fake's; this offset is absolute, so ATen applies it.
        raise FallbackNeeded("as_strided with a storage offset into memory ember did not allocate")
    offset = storage_offset if storage_offset is not None else buffer.layout.offset
    layout = Layout(buffer.device, buffer.dtype, [expr_of(s) for s in size],
                    [expr_of(s) for s in stride], expr_of(offset))
    return ReinterpretView(buffer, layout)


@register(aten.cat.default)
def cat(ctx, node, tensors, dim=0):
    value = _val(node)
    tensors = [t for t in tensors if not (isinstance(t, IRNode) and any(s == 0 for s in t.get_size()))]
    if not tensors:
        return _constant_fill(ctx, node, 0)
    dim = _dim(dim, len(value.shape))
    out_size = _size(value)
    pieces = []
    start = sympy.Integer(0)
    for tensor in tensors:
        length = tensor.get_size()[dim]
        pieces.append((start, start + length, tensor.make_loader(), tensor.dtype))
        start = start + length
    dtype = value.dtype

    # The loads of later pieces read out of bounds for early rows; guard them with masked loads.
    def inner_fn(ops, index):
        result = None
        for begin, end, loader, piece_dtype in reversed(pieces):
            shifted = list(index)
            shifted[dim] = index[dim] - begin
            inside = _inside(ops, index[dim], begin, end)

            def body(ops=ops, loader=loader, shifted=shifted, piece_dtype=piece_dtype):
                loaded = loader(ops, shifted)
                return ops.to_dtype(loaded, dtype) if piece_dtype != dtype else loaded

            loaded = ops.masked(inside, body, 0, dtype)
            result = loaded if result is None else ops.where(inside, loaded, result)
        return result

    return Pointwise(value.device, dtype, out_size, inner_fn, ctx.origin())


@register(aten.slice_scatter.default)
def slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    """`x` with `src` written over x[start:end:step] along `dim` (what a write through a slice
    becomes once functionalized: `v[:3] *= 2`).  One pointwise pass; step 1 only."""
    if step != 1 or not isinstance(src, IRNode):
        raise FallbackNeeded("slice_scatter with a step, or of a scalar")
    dim = _dim(dim, len(x.get_size()))
    start = _start(x.get_size()[dim], start)
    return _written_over(ctx, node, x, src, dim, start, src.get_size()[dim], keeps_dim=True)


@register(aten.select_scatter.default)
def select_scatter(ctx, node, x, src, dim, position):
    """`x` with `src` written over x.select(dim, position)."""
    if not isinstance(src, IRNode):
        raise FallbackNeeded("select_scatter of a scalar")
    dim = _dim(dim, len(x.get_size()))
    position = _position(x.get_size()[dim], position, "select_scatter at")
    return _written_over(ctx, node, x, src, dim, position, 1, keeps_dim=False)


def _inside(ops, position, begin, end):
    """A bool value: begin <= position < end."""
    position = ops.index_expr(position, torch.int64)
    return ops.logical_and(ops.ge(position, _int_value(ops, begin)), ops.lt(position, _int_value(ops, end)))


def _written_over(ctx, node, x, src, dim, begin, length, keeps_dim: bool):
    out = _val(node)
    x_loader, src_loader = x.make_loader(), src.make_loader()
    dtype = out.dtype

    def inner_fn(ops, index):
        inside = _inside(ops, index[dim], begin, sympy.sympify(begin) + length)
        shifted = list(index)
        if keeps_dim:
            shifted[dim] = index[dim] - begin
        else:
            del shifted[dim]

        def body():
            loaded = src_loader(ops, shifted)
            return ops.to_dtype(loaded, dtype) if src.dtype != dtype else loaded

        return ops.where(inside, ops.masked(inside, body, 0, dtype), x_loader(ops, index))

    return Pointwise(out.device, dtype, _size(out), inner_fn, ctx.origin())


@register(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, node, x, pad, value=0):
    out = _val(node)
    out_size = _size(out)
    in_size = x.get_size()
    rank = len(in_size)
    loader = x.make_loader()
    pairs = [(pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)]

    def inner_fn(ops, index):
        shifted = list(index)
        checks = None
        for k, (before, _after) in enumerate(pairs):
            dim = rank - 1 - k
            shifted[dim] = index[dim] - before
            inside = _inside(ops, index[dim], before, before + in_size[dim])
            checks = inside if checks is None else ops.logical_and(checks, inside)
        return ops.masked(checks, lambda: loader(ops, shifted), value, out.dtype)

    return Pointwise(out.device, out.dtype, out_size, inner_fn, ctx.origin())


@register(operator.getitem)
def getitem(ctx, node, values, position):
    """Picks one result of a multi-output lowering (split, unbind) or fallback."""
    if isinstance(values, (list, tuple)):
        return values[position]
    raise FallbackNeeded("getitem of a single value")
