"""torch._foreach_* ops handed a 0-d tensor where the op takes a Scalar.

Eager reads that tensor as a number (`.item()`), so the op as one node cannot be traced.  As its
reference path does, each list element gets an op of its own, here with the 0-d tensor detached and cast
to the dtype the number is computed in: `_foreach_pow(s, exponents)` is torch.pow(s', e_i) per element,
`_foreach_lerp_(xs, ends, w)` is x_i.lerp_(e_i, w').  Anything else returns None (traced as it is).
"""
from __future__ import annotations

import torch

from .base import VariableTracker, constant
from .containers import BaseListVariable, TupleVariable
from .tensor import TensorVariable


def foreach_with_tensor_scalar(tx, function, args: list, kwargs: dict) -> VariableTracker | None:
    name = getattr(function, "__name__", "")
    if kwargs:
        return None
    if name == "_foreach_pow" and len(args) == 2:
        return _pow_scalar_base(tx, *args)
    if name == "_foreach_lerp_" and len(args) == 3:
        return _lerp_scalar_weight(tx, *args)
    return None


def _zero_dim(value: VariableTracker) -> bool:
    return isinstance(value, TensorVariable) and value.example.dim() == 0 and not value.example.is_complex()


def _tensors(tx, value: VariableTracker) -> list | None:
    if not isinstance(value, BaseListVariable):
        return None
    items = value.unpack_sequence(tx)
    return items if items and all(isinstance(item, TensorVariable) for item in items) else None


def _number_kind(example: torch.Tensor):
    """A Python number of the kind `.item()` gives for this tensor (for torch.result_type)."""
    if example.dtype == torch.bool:
        return True
    return 1.0 if example.dtype.is_floating_point else 1


def _detached_as(tx, scalar: VariableTracker, dtype: torch.dtype) -> VariableTracker:
    detached = scalar.call_method(tx, "detach", [], {})
    if scalar.example.dtype == dtype:
        return detached
    return detached.call_method(tx, "to", [constant(dtype)], {})


def _pow_scalar_base(tx, base: VariableTracker, exponents: VariableTracker) -> VariableTracker | None:
    items = _tensors(tx, exponents)
    if not _zero_dim(base) or items is None:
        return None
    kind = _number_kind(base.example)
    results = []
    for item in items:
        dtype = torch.result_type(item.example, kind)  # a number never widens the tensor's dtype
        results.append(tx.graph.call(tx, "call_function", torch.pow, [_detached_as(tx, base, dtype), item], {}))
    return TupleVariable(results)


def _lerp_scalar_weight(tx, selves: VariableTracker, ends: VariableTracker, weight: VariableTracker):
    targets, others = _tensors(tx, selves), _tensors(tx, ends)
    if not _zero_dim(weight) or not weight.example.dtype.is_floating_point or targets is None \
            or others is None or len(targets) != len(others):
        return None
    # The number is used in the op's compute type; only float32/float64 compute in their own
    # dtype (a float16 lerp computes in float32, where a 0-d float16 weight would round first).
    if any(t.example.dtype not in (torch.float32, torch.float64) for t in targets):
        return None
    for target, other in zip(targets, others):
        target.call_method(tx, "lerp_", [other, _detached_as(tx, weight, target.example.dtype)], {})
    return selves
