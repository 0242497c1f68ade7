"""torch.vmap / torch.func.vmap of one of torch's own functions (`torch.vmap(torch.Tensor.acos_)`).

The batched call becomes one graph node that runs torch.vmap itself on the node's inputs: at
capture time on fake tensors (what vmap returns, including the input itself for an in-place
method), in the compiled code on the real ones, so the semantics are vmap's own.  Only torch's
functions qualify: running user code on fakes at capture time could change the user's objects
(vmapping a Python function would need inlining it under batching rules: not captured).
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker


class VmapVariable(VariableTracker):
    """torch.vmap itself."""

    def static_value(self) -> Any:
        return torch.vmap

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        names = ("func", "in_dims", "out_dims", "randomness")
        if len(args) > len(names) or any(key not in (*names, "chunk_size") for key in kwargs):
            raise Unsupported("torch.vmap with these arguments")
        bound = dict(zip(names, args), **kwargs)
        if "func" not in bound:
            raise Unsupported("torch.vmap without a function")
        func = bound.pop("func")
        if not all(value.is_python_constant() for value in bound.values()):
            raise Unsupported("torch.vmap with non-constant in_dims/out_dims/randomness/chunk_size")
        options = {key: value.as_python_constant() for key, value in bound.items()}
        return VmappedFunctionVariable(_torch_function_of(func), options)


def _torch_function_of(func: VariableTracker) -> Any:
    from .torch_functions import TorchFunctionVariable, _BREAKING, _in_breaking_module

    if type(func) is not TorchFunctionVariable:
        raise Unsupported(f"torch.func.vmap of {func} is not captured (only torch's own functions)")
    function = func.function
    if function in _BREAKING or _in_breaking_module(getattr(function, "__module__", "") or ""):
        raise Unsupported(f"torch.func.vmap of {getattr(function, '__qualname__', function)}")
    return function


class VmappedFunctionVariable(VariableTracker):
    """What torch.vmap(f, ...) returned, for one of torch's functions f."""

    def __init__(self, function: Any, options: dict) -> None:
        super().__init__()
        self.function = function
        self.options = options

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .tensor import TensorVariable
        from .torch_functions import _same_object_as_argument

        if kwargs or not all(isinstance(arg, TensorVariable) or arg.is_python_constant() for arg in args):
            raise Unsupported("a vmapped function called with keywords or non-tensor objects")
        function, options = self.function, dict(self.options)

        def vmapped(*values):
            return torch.vmap(function, **options)(*values)

        name = getattr(function, "__name__", "function")
        vmapped.__name__ = vmapped.__qualname__ = f"ember_vmap_{name}"
        result = tx.graph.call(tx, "call_function", vmapped, list(args), {})
        return _same_object_as_argument(result, list(args))

    def reconstruct_expr(self, codegen) -> str:
        options = "".join(f", {key}={codegen.literal(value)}" for key, value in self.options.items())
        return f"{codegen.ref(torch.vmap)}({codegen.ref(self.function)}{options})"
