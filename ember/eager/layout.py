"""Which strides does eager's kernel give a pointwise op's result?

A fake's strides come from the op's meta function, which for some pointwise ops orders dims
otherwise than eager's TensorIterator when the inputs' layouts disagree (`torch.div(a, b,
rounding_mode='floor')` of a row-major `a` and a transposed `b`: (1, 8) on fakes, (8, 1)
eagerly), and `.view(-1)` of the result works on one and raises on the other.  The answer
comes from running the op once per signature on real tensors of those sizes and strides (where
small enough), asked only where an input is not contiguous.  `with_eager_layout` corrects one
result; `EagerLayoutMode` every result of the ops run under it (capture's fake propagation).
"""
from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ..sizes import contiguous_without_guards, dense_in_order, expr, hint, symbolic_result
from .check import _REAL_SHAPES_LIMIT as _REAL_ELEMENTS_LIMIT  # (real inputs up to this many elements in all)
from .check import real_run
from .metadata import rewritten

# Ops laid out by their kernels as a pointwise op is, without the pointwise tag: elementwise ops
# left untagged (`floor_divide` of a permuted input), and batch norm, whose meta functions keep a
# permuted input's order where the CPU kernel returns a contiguous result
# (test_untagged_elementwise_results_have_eagers_layout).  A name alone: every overload but out=.
# (Those that update running statistics run here on copies, as every run here does.)
_KERNEL_LAID_OUT_NAMES = (
    "floor_divide", "masked_fill.Tensor", "rsub.Tensor", "true_divide.Scalar", "where.ScalarOther",
    "where.ScalarSelf", "where.Scalar", "hardswish.default", "fix.default", "absolute.default",
    "isreal.default", "isclose.default", "complex.default", "polar.default", "prelu.default",
    "_prelu_kernel.default", "log_sigmoid_forward.default", "hardtanh_backward.default",
    "leaky_relu_backward.default", "elu_backward.default", "softplus_backward.default",
    "hardswish_backward.default", "hardsigmoid_backward.default", "mish_backward.default",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "cudnn_batch_norm", "miopen_batch_norm",
)


def _overloads(names) -> set:
    found = set()
    for name in names:
        packet_name, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue  # (not in this torch)
        for candidate in ([overload] if overload else packet.overloads()):
            if candidate != "out" and not candidate.endswith("_out") and hasattr(packet, candidate):
                found.add(getattr(packet, candidate))
    return found


_KERNEL_LAID_OUT = _overloads(_KERNEL_LAID_OUT_NAMES)
_LAYOUTS: dict = {}  # signature -> eager's (sizes, strides) per result (None: not a tensor), or None


@functools.cache
def _is_candidate(func) -> bool:
    """May the op's meta strides differ from eager's?"""
    return func in _KERNEL_LAID_OUT or (isinstance(func, torch._ops.OpOverload) and torch.Tag.pointwise in func.tags
                                        and not func._schema.is_mutable and not func.is_view)


def _signature(value) -> Any:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), value.dtype, value.device.type)
    if isinstance(value, (bool, int, float, str, type(None), torch.dtype)):
        return (type(value), value)  # 1, 1.0 and True promote differently
    return repr(value)


def _leaves(args: tuple, kwargs: dict) -> list:
    """The arguments, lists opened one level (pointwise ops take no deeper nesting)."""
    leaves = []
    for value in (*args, *kwargs.values()):
        leaves.extend([len(value), *value] if isinstance(value, (list, tuple)) else [value])
    return leaves


def _extent(sizes, strides) -> int:
    """Elements of storage these sizes and strides reach (from offset 0)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides)) if all(sizes) else 0


def _real(value):
    """A real tensor with the fake's sizes and strides, all ones (no division by zero)."""
    if not isinstance(value, torch.Tensor):
        return value
    storage = torch.ones(_extent(value.shape, value.stride()), dtype=value.dtype, device=value.device)
    return storage.as_strided(tuple(value.shape), tuple(value.stride()))


def _eager_layouts(func, args: tuple, kwargs: dict) -> tuple | None:
    leaves = _leaves(args, kwargs)
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    try:
        key = (func, tuple(kwargs), tuple(_signature(leaf) for leaf in leaves))
        hash(key)
    except Exception:  # noqa: BLE001 - an argument without a usable signature: no answer
        return None
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    answer = None
    if sum(_extent(t.shape, t.stride()) for t in tensors) <= _REAL_ELEMENTS_LIMIT:
        with real_run(func, tensors):
            try:
                real_args, real_kwargs = pytree.tree_map(_real, (args, kwargs))
                results = pytree.tree_leaves(func(*real_args, **real_kwargs))
                answer = tuple((tuple(r.shape), tuple(r.stride())) if isinstance(r, torch.Tensor) else None
                               for r in results)
            except Exception:  # noqa: BLE001 - eager refuses these inputs: keep the fake's layout
                answer = None
    _LAYOUTS[key] = answer
    return answer


def with_eager_layout(func, args: tuple, kwargs: dict, result: Any) -> Any:
    """`result` (fakes from `func`'s meta function) with the strides eager's kernel gives.

    A result whose strides differ is replaced by a new fake (a pointwise op's result is memory
    of its own, so nothing else refers to it yet)."""
    if not _is_candidate(func):
        return result
    results, spec = pytree.tree_flatten(result)
    if not any(isinstance(r, torch.Tensor) and r.dim() >= 2 and r.numel() > 1 for r in results):
        return result
    if not all(r.layout == torch.strided for r in results if isinstance(r, torch.Tensor)):
        return result  # sparse: no strides
    leaves = _leaves(args, kwargs)
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    if any(t.layout != torch.strided for t in tensors):
        return result
    if any(t._has_symbolic_sizes_strides for t in [*tensors, *(r for r in results if isinstance(r, torch.Tensor))]):
        if all(contiguous_without_guards(t) for t in tensors):
            return result
        try:
            hinted_args, hinted_kwargs = pytree.tree_map(_hinted, (args, kwargs))
        except _NoHint:
            return result
        return _relaid(result, results, spec, _eager_layouts(func, hinted_args, hinted_kwargs), _in_eagers_order)
    if all(t.is_contiguous() for t in tensors):
        return result
    return _relaid(result, results, spec, _eager_layouts(func, args, kwargs), _with_eager_strides)


def _relaid(result, results: list, spec, layouts: tuple | None, relay) -> Any:
    """`result` with each tensor that has eager's layout replaced by `relay(tensor, layout)`."""
    if layouts is None or len(layouts) != len(results):
        return result
    fixed = [relay(value, layout) if isinstance(value, torch.Tensor) and layout is not None else value
             for value, layout in zip(results, layouts)]
    if all(a is b for a, b in zip(fixed, results)):
        return result
    return pytree.tree_unflatten(fixed, spec)


def _with_eager_strides(value: torch.Tensor, layout: tuple) -> torch.Tensor:
    if layout[0] != tuple(value.shape) or layout[1] == tuple(value.stride()):
        return value
    try:
        # Runs under the modes below the caller's (the fake mode): a fake with eager's strides.
        return torch.empty_strided(tuple(value.shape), layout[1], dtype=value.dtype, device=value.device)
    except Exception:  # noqa: BLE001 - a dtype empty_strided refuses: keep the meta layout
        return value


def _in_eagers_order(value: torch.Tensor, layout: tuple) -> torch.Tensor:
    """Symbolic sizes: eager's layout at the trace's sizes (the symbols' hints) gives the order
    of the result's dims in memory; the result gets dense strides in that order, as expressions
    of its symbolic sizes.  The order holds for every size the guards allow: they pin each
    input's strides to its traced expressions, and eager's kernels order a pointwise result's
    dims by its inputs' strides."""
    if len(layout[1]) != value.dim():
        return value
    order = sorted(range(value.dim()), key=lambda d: (-layout[1][d], d))  # outermost first
    strides = [None] * value.dim()
    running = 1
    for dim in reversed(order):
        strides[dim] = running
        running = running * value.shape[dim]
    if dense_in_order(*layout, order) and [expr(a) for a in strides] != [expr(b) for b in value.stride()]:
        return torch.empty_strided(value.shape, strides, dtype=value.dtype, device=value.device)
    return value


class _NoHint(Exception):
    pass


def _hint(value) -> int:
    found = hint(value)
    if found is None:
        raise _NoHint
    return found


def _hinted(value):
    """A fake's stand-in at the trace's sizes: a real tensor with the hints of its sizes/strides."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _NoHint
    if not isinstance(value, torch.Tensor):
        return value
    sizes, strides = [_hint(s) for s in value.shape], [_hint(s) for s in value.stride()]
    extent = _extent(sizes, strides)
    if extent > _REAL_ELEMENTS_LIMIT:
        raise _NoHint
    with _disable_current_modes():
        return torch.empty(extent, dtype=value.dtype, device=value.device).as_strided(sizes, strides)


class EagerLayoutMode(TorchDispatchMode):
    """Entered above a FakeTensorMode: every op's result gets eager's strides (with_eager_layout),
    and the ops whose metadata disagrees with eager's run as the ops that agree (metadata.py)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = rewritten(func, args, kwargs)
        if result is not NotImplemented:
            return result  # (ops run below this mode: their fakes, each laid out by the fake mode)
        result = symbolic_result(func, args, kwargs)
        if result is None:
            result = func(*args, **kwargs)
        return with_eager_layout(func, args, kwargs, result)
