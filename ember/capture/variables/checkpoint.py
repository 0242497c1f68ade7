"""torch.utils.checkpoint.checkpoint: the function is captured inline, its nodes marked as one
recompute region.

Every FX node made while the function is inlined carries `meta["ember_recompute"]` (the region's
number); the AOT tracer copies it onto the ATen nodes, and the min-cut partitioner recomputes marked
values in the backward instead of saving them, except random ops (saved, so the numbers match).
"""
from __future__ import annotations

import itertools

import torch
import torch.utils.checkpoint

from ..errors import Unsupported, UserException
from .base import ConstantVariable, VariableTracker
from .tensor import TensorVariable

RECOMPUTE_KEY = "ember_recompute"
_regions = itertools.count(1)
# checkpoint()'s own keywords (the rest go to the function, non-reentrant only)
_OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state")


class CheckpointVariable(VariableTracker):
    """`torch.utils.checkpoint.checkpoint` itself, before it is called."""

    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def python_type(self) -> type:
        return type(self.function)

    def as_python_constant(self):
        return self.function

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from .torch_functions import GradModeVariable, NullContextVariable

        if not args:
            raise UserException(TypeError("checkpoint() missing 1 required positional argument: 'function'"))
        function, *arguments = args
        options = {name: kwargs.pop(name) for name in _OPTIONS if name in kwargs}
        for name in ("use_reentrant", "debug", "preserve_rng_state", "determinism_check", "early_stop"):
            if name in options and not isinstance(options[name], ConstantVariable):
                raise Unsupported(f"checkpoint's {name} is not a constant")
        reentrant = options["use_reentrant"].value if "use_reentrant" in options else None
        reentrant = True if reentrant is None else bool(reentrant)  # (torch's default, with a warning)
        context_fn = options.get("context_fn")
        if context_fn is not None and not (isinstance(context_fn, VariableTracker) and _is_noop_context(context_fn)):
            raise Unsupported("checkpoint with a context_fn (selective checkpointing) is not captured")
        if reentrant and kwargs:
            raise UserException(ValueError("Unexpected keyword arguments: " + ",".join(kwargs)))
        manager = NullContextVariable()
        if reentrant and torch.is_grad_enabled() and not any(
                isinstance(a, TensorVariable) and a.example.requires_grad for a in arguments):
            # The reentrant form runs the function without grad and its outputs need no gradient
            # when no input does (parameters inside get none): the same as no_grad around it.
            manager = GradModeVariable(False)
        graph = tx.graph
        outer = getattr(graph, "recompute_region", None)
        graph.recompute_region = outer if outer is not None else next(_regions)  # nested: one region
        manager.enter(tx)
        try:
            result = tx.call(function, list(arguments), kwargs)
        finally:
            graph.recompute_region = outer
        manager.exit(tx)
        return result


def _is_noop_context(variable: VariableTracker) -> bool:
    try:
        return variable.as_python_constant() is torch.utils.checkpoint.noop_context_fn
    except Exception:
        return False
