"""Sizes that are symbols (dynamic shapes): `x.size(0)`, `n * 2`, `n > 16` while capturing.

A SymNodeVariable is a graph node whose value is a SymInt (SymFloat, SymBool) of the ShapeEnv:
arithmetic adds `operator.*` nodes, tensor operators take the node, and bool() of a comparison is
decided now, guarded by the ShapeEnv.  Where a plain number is needed, StaticShapesNeeded recaptures
the frame with static shapes.
"""
from __future__ import annotations

import torch

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ..errors import Unsupported
from ..shapes import StaticShapesNeeded
from .base import VariableTracker

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


class SymNodeVariable(VariableTracker):
    def __init__(self, node: torch.fx.Node, value) -> None:
        super().__init__()
        self.node = node
        self.value = value
        node.meta["example_value"] = value
        node.meta.setdefault("ember_call", (node.op, node.target, node.args, node.kwargs))

    def python_type(self) -> type:
        return _PYTHON_TYPES[type(self.value)]

    def as_proxy(self) -> torch.fx.Node:
        return self.node

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self):
        raise StaticShapesNeeded(f"a dynamic size ({self.value}) is used where capture needs a number", self.value)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("__float__", "__int__") and not args and not kwargs:  # float(n), int(lr)
            kind = float if name == "__float__" else int
            if self.python_type() is kind:
                return self
            return tx.graph.call(tx, "call_function", torch.sym_float if kind is float else torch.sym_int, [self], {})
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..scalars import scalar_sources

        if scalar_sources(tx.graph, self.value):  # (a number captured as a symbol: a constant again)
            raise StaticShapesNeeded(f"{name!r} of a dynamic number ({self.value})", self.value)
        return super().var_getattr(tx, name)

    def truth(self, tx) -> bool:
        try:
            return bool(self.value)  # (the ShapeEnv records the answer as a guard)
        except GuardOnDataDependentSymNode:
            # A value only the graph computes (.item(), nonzero's size): Python branches on it
            # after the graph, as torch.compile does.
            raise Unsupported(f"a branch on a data-dependent value ({self.value})") from None

    def __repr__(self) -> str:
        return f"SymNodeVariable({self.node.name}: {self.value})"


class SymSliceVariable(VariableTracker):
    """A slice with a dynamic bound (`x[:n]`): passed to tensor indexing as a slice of nodes."""

    def __init__(self, parts: list[VariableTracker]) -> None:
        super().__init__()
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self):
        raise StaticShapesNeeded("a slice with a dynamic bound is used where capture needs a constant")

    def __repr__(self) -> str:
        return f"SymSliceVariable({self.parts})"
