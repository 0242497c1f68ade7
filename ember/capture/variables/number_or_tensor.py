"""Values eager holds as a Python number or as a 0-d tensor depending on tensor values.

`max(t.sum(), 0)` is the tensor where `0 > t.sum()` is False and the int 0 where it is True.  In the
graph it is the 0-d tensor `torch.where(0 > s, 0, s)`; outside it the glue makes eager's own object
again: `(0 if cond else s)`.  Within the capture it only takes part where eager's result is the same
whichever object it is: min()/max() with 0-d tensors of its dtype and numbers that dtype holds exactly
(Python's comparison, then torch.where: ties and NaN pick what Python picks); +, -, * with another such
value or an int when every number is an int (again such a value); any binary operator with a floating
tensor of more dimensions, or a 0-d one of its dtype (a plain tensor either way).  Anything else breaks.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch

from ..errors import Unsupported
from .base import INPLACE_TO_BINARY, ConstantVariable, OpaqueVariable, VariableTracker
from .operators import binary_op
from .tensor import TensorVariable

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*"}


class NumberOrTensorVariable(OpaqueVariable):
    truth_question = "data-dependent branch: bool()"

    def __init__(self, tensor: VariableTracker, parts: tuple, glue: Callable, ints: bool) -> None:
        super().__init__()
        self.tensor = tensor  # the 0-d graph value
        self.parts = parts    # the variables the glue rebuilds it from
        self.glue = glue      # (codegen, part expressions) -> the glue's expression
        self.ints = ints      # every number it can be is an int

    def _refuse(self, what: str):
        raise Unsupported(f"{what} of min()/max() of a tensor and a number (eager holds a Python number "
                          "or a tensor there, depending on tensor values)")

    def python_type(self) -> type:
        self._refuse("type()")

    def __repr__(self) -> str:
        return "NumberOrTensorVariable"


def _graph_value(value: VariableTracker) -> VariableTracker:
    return value.tensor if isinstance(value, NumberOrTensorVariable) else value


def _is_tensor(value) -> bool:
    return isinstance(value, TensorVariable)


def _int_valued(value: VariableTracker) -> bool:
    if isinstance(value, NumberOrTensorVariable):
        return value.ints
    return _is_tensor(value) or (isinstance(value, ConstantVariable) and type(value.value) is int)


def tensor_min_max(tx, function: Callable, items: list) -> VariableTracker | None:
    """min()/max() over 0-d tensors, such values and numbers; None where a choice would not be
    exact in the tensors' dtype (the caller breaks)."""
    tensors = [_graph_value(item) for item in items if _is_tensor(_graph_value(item))]
    if not tensors:
        return None
    dtype, device = tensors[0].example.dtype, tensors[0].example.device
    for item in items:
        value = _graph_value(item)
        if _is_tensor(value):
            example = value.example
            if example.dim() != 0 or example.dtype != dtype or example.device != device:
                return None
        elif not _exact_in(value, dtype):
            return None
    compare = operator.lt if function is min else operator.gt
    best = items[0]
    for item in items[1:]:
        condition = binary_op(tx, compare, _graph_value(item), _graph_value(best))
        where = tx.graph.call(tx, "call_function", torch.where,
                              [condition, _graph_value(item), _graph_value(best)], {})
        if _is_tensor(item) and _is_tensor(best):
            best = where
        else:
            best = NumberOrTensorVariable(where, (condition, item, best),
                                          lambda cg, c, p, k: f"({p} if {c} else {k})",
                                          _int_valued(item) and _int_valued(best))
    return best


def number_or_tensor_binary(tx, function: Callable, left: VariableTracker, right: VariableTracker):
    """`left <op> right` where either is such a value (see the module's docstring); None where
    neither is."""
    if not isinstance(left, NumberOrTensorVariable) and not isinstance(right, NumberOrTensorVariable):
        return None
    ours = left if isinstance(left, NumberOrTensorVariable) else right
    other = right if ours is left else left
    if function in _SYMBOLS and _int_valued(left) and _int_valued(right) and (
            isinstance(other, NumberOrTensorVariable) or isinstance(other, ConstantVariable)):
        result = binary_op(tx, function, _graph_value(left), _graph_value(right))
        symbol = _SYMBOLS[function]
        return NumberOrTensorVariable(result, (left, right), lambda cg, l, r: f"({l} {symbol} {r})", True)
    if function not in INPLACE_TO_BINARY and _is_tensor(other) and other.example.is_floating_point() and (
            other.example.dim() > 0 or other.example.dtype == ours.tensor.example.dtype):
        return binary_op(tx, function, _graph_value(left), _graph_value(right))
    ours._refuse(f"{getattr(function, '__name__', function)}")


def _exact_in(item: VariableTracker, dtype) -> bool:
    if not isinstance(item, ConstantVariable) or type(item.value) not in (int, float):
        return False
    value = item.value
    if dtype.is_floating_point:
        try:
            return torch.tensor(value, dtype=dtype).item() == value
        except (OverflowError, RuntimeError):
            return False
    if dtype.is_complex or dtype == torch.bool or type(value) is not int:
        return False
    info = torch.iinfo(dtype)
    return info.min <= value <= info.max
