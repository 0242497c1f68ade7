"""The memory geometry of views, as the joint trace needs it: which storage positions an
as_strided reads, whether a layout is dense (and in which order), whether sizes are symbolic."""
from __future__ import annotations

import math

import torch

from ..sizes import dense_in_order, hint


def reads_within(view: torch.Tensor, size, stride, offset) -> bool:
    """Does as_strided(view's storage, size, stride, offset) read only elements of `view`?
    (Symbolic or large geometries: not known, so False.)"""
    def positions(sizes, strides, start):
        if any(not isinstance(n, int) for n in (*sizes, *strides, start)) or math.prod(sizes) > 1 << 20:
            return None
        flat = torch.full((), start, dtype=torch.int64)
        for n, st in zip(sizes, strides):
            flat = (flat.unsqueeze(-1) + torch.arange(n, dtype=torch.int64) * st).flatten()
        return flat

    with torch._C._DisableTorchDispatch():
        read = positions(list(size), list(stride), offset)
        own = positions(list(view.shape), list(view.stride()), view.storage_offset())
        if read is None or own is None:
            return False
        return bool(torch.isin(read, own).all())


def has_symbols(tensor: torch.Tensor) -> bool:
    return any(isinstance(d, torch.SymInt) for d in (*tensor.shape, *tensor.stride()))


def dense_order(tensor: torch.Tensor) -> list[int] | None:
    """Dimensions from outermost to innermost if the tensor is dense (a permutation of a
    contiguous layout), else None.  Symbolic sizes are ordered by their hints (the guards pin
    the inputs' strides, so the order is that of every allowed size) without guarding them."""
    sizes, strides = [hint(n) for n in tensor.shape], [hint(st) for st in tensor.stride()]
    return None if None in sizes or None in strides else dense_order_of(sizes, strides)


def dense_order_of(sizes, strides) -> list[int] | None:
    """`dense_order` of numeric sizes and strides."""
    order = sorted(range(len(sizes)), key=lambda d: (-strides[d], -sizes[d]))
    return order if dense_in_order(list(sizes), list(strides), order) else None


def inverse_permutation(order) -> list[int]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return inverse


def copy_in_order(tensor: torch.Tensor, order: list[int]) -> torch.Tensor:
    """A dense copy of `tensor` laid out in `order` (outermost first), as ATen ops (traced under a tracer)."""
    aten = torch.ops.aten
    copy = aten.clone.default(aten.permute.default(tensor, order), memory_format=torch.contiguous_format)
    return aten.permute.default(copy, inverse_permutation(order))
