"""Values only the glue can compute: the capture knows what they are, not what they hold.

`str(obj)` of an object made in the frame whose class keeps object's `__repr__` holds the address of
the object eager makes, which exists only once the glue makes it again.  Such a value can be returned,
stored and passed along (computed by the glue after the graph); looking at its text breaks the graph.
"""
from __future__ import annotations

import operator

import torch

from ..errors import Unsupported, UserException
from ..shapes import StaticShapesNeeded
from .base import ConstantVariable, OpaqueVariable, VariableTracker
from .operators import binary_op, is_op
from .tensor import TensorVariable


class ObjectTextVariable(OpaqueVariable):
    def __init__(self, owner: VariableTracker, function) -> None:
        super().__init__()
        self.owner = owner
        self.function = function  # str or repr

    def python_type(self) -> type:
        return str

    def _refuse(self, what: str):
        raise Unsupported(f"{what} of {self.function.__name__}() of a {self.owner.python_type().__name__} "
                          "object made in the frame (its address is known only when the glue runs)")

    def __repr__(self) -> str:
        return f"ObjectTextVariable({self.function.__name__}, {self.owner!r})"


class TensorTruthVariable(VariableTracker):
    """`value in [t, ...]` decided by one-element tensor comparisons: `t is value or bool(t == value)
    or ...`, each `t == value` a graph output (taken where the frame compares) whose bool() the glue
    takes after the graph (it cannot raise: nothing is reordered); `tail` where none matched."""

    def __init__(self, terms: list, tail: bool, negated: bool = False) -> None:
        super().__init__()
        self.terms, self.tail, self.negated = terms, tail, negated

    def python_type(self) -> type:
        return bool

    def as_python_constant(self):
        raise Unsupported("`in` on a list of tensors: the answer depends on their values")

    def truth(self, tx) -> bool:
        raise Unsupported("data-dependent branch: `in` on a list of tensors depends on their values")

    def negate(self) -> "TensorTruthVariable":
        return TensorTruthVariable(self.terms, self.tail, not self.negated)

    def __repr__(self) -> str:
        return f"TensorTruthVariable({len(self.terms)} comparisons)"


def contains_answer(terms: list, tail: bool) -> VariableTracker:
    return TensorTruthVariable(terms, tail) if terms else ConstantVariable(tail)


def tensor_comparison(tx, candidate: VariableTracker, item: VariableTracker):
    """`candidate == item` as a graph value where a tensor compares with a number or another
    tensor and the result has one element (so bool() of it cannot raise); else None."""
    tensors = [v for v in (candidate, item) if isinstance(v, TensorVariable)]
    if not tensors or is_op(tx, candidate, item):
        return None
    other = item if candidate in tensors else candidate
    if not isinstance(other, TensorVariable) and not (
            isinstance(other, ConstantVariable) and type(other.value) in (int, float, bool)):
        return None
    if any(type(t.example.numel()) is not int or t.example.numel() != 1 for t in tensors):
        return None  # (static sizes only: a symbolic size is not asked)
    return binary_op(tx, operator.eq, candidate, item)


class TensorNumberVariable(VariableTracker):
    """`float(t)` / `int(t)` of a one-element tensor: a graph output (a copy taken where the frame
    converts) that the glue converts after the graph, only where that cannot raise (float() of a
    real tensor, int() of an integer or bool one); using the number during the capture breaks."""

    def __init__(self, tensor: VariableTracker, kind: type) -> None:
        super().__init__()
        self.tensor, self.kind = tensor, kind

    def python_type(self) -> type:
        return self.kind

    def as_python_constant(self):
        raise Unsupported(f"{self.kind.__name__}() of a tensor reads its value")

    def truth(self, tx) -> bool:
        raise Unsupported(f"data-dependent branch: {self.kind.__name__}() of a tensor reads its value")

    def __repr__(self) -> str:
        return f"TensorNumberVariable({self.kind.__name__})"


def tensor_to_number(tx, tensor: VariableTracker, kind: type) -> VariableTracker | None:
    """float(t)/int(t): eager's ValueError where t's (static) size is not one element; the
    glue's conversion (TensorNumberVariable) where it cannot raise; else a break."""
    example = tensor.example
    numel = example.numel()
    if example.is_complex():
        raise Unsupported(f"{kind.__name__}() of a complex tensor")
    if type(numel) is not int:  # (whether it raises depends on the size: decide on numbers)
        raise StaticShapesNeeded(f"{kind.__name__}() of a tensor with dynamic sizes", numel)
    if numel != 1:
        raise UserException(ValueError("only one element tensors can be converted to Python scalars"))
    if kind is int and (example.is_floating_point() or example.dtype not in (
            torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)):
        # (int() of nan or inf raises: the glue would raise it after the graph, not here)
        raise Unsupported(f"{kind.__name__}() of a {example.dtype} tensor reads its value")
    snapshot = tx.graph.call(tx, "call_method", "clone", [tensor], {})
    return TensorNumberVariable(snapshot, kind)
