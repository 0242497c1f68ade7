"""Calls to functions registered with ember.allow_in_graph (or torch.compiler.allow_in_graph).

Such a call is not inlined: it runs once on fake tensors (for its result's shapes) and becomes
one `call_function` node whose target is the function itself (ember/in_graph.py).
"""
from __future__ import annotations

from .base import VariableTracker
from .torch_functions import TorchFunctionVariable


class InGraphFunctionVariable(TorchFunctionVariable):
    """A user function allowed in the graph: every call is one opaque node."""

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return tx.graph.call(tx, "call_function", self.function, args, kwargs)

    def __repr__(self) -> str:
        return f"InGraphFunctionVariable({getattr(self.function, '__qualname__', self.function)})"
