"""torch.func.grad / torch.func.grad_and_value of a Python function, as one graph node.

The function is captured as a subgraph (subgraphs.py) on fresh fakes of the call's tensors (requiring
grad where argnums names them; closed-over tensors are extra inputs, not differentiated, as functorch
treats them; constants are passed as they are).  The node runs the transform of that subgraph, on fakes
at capture (which gives the result's structure) and on the real tensors when compiled.  Writes into
tensors, Python state changes and non-tensor arguments or results break the graph.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker
from .subgraphs import bind_options, call_node, flat_leaves, leaf_variables, rebuild, speculate, unique_name
from .tensor import TensorVariable

TRANSFORMS = {torch.func.grad: "grad", torch.func.grad_and_value: "grad_and_value"}


class GradTransformVariable(VariableTracker):
    """torch.func.grad or torch.func.grad_and_value itself."""

    def __init__(self, transform: Any) -> None:
        super().__init__()
        self.transform = transform

    def static_value(self) -> Any:
        return self.transform

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        what = f"torch.func.{TRANSFORMS[self.transform]}"
        func, options = bind_options(what, ("func", "argnums", "has_aux"), args, kwargs)
        argnums = options.get("argnums", 0)
        if not (type(argnums) is int or (isinstance(argnums, tuple) and argnums and
                                        all(type(n) is int for n in argnums))):
            raise Unsupported("torch.func.grad with argnums that are not an int or a tuple of ints")
        return GradFunctionVariable(self.transform, func, options)

    def reconstruct_expr(self, codegen) -> str:
        return codegen.ref(self.transform)


class GradFunctionVariable(VariableTracker):
    """What torch.func.grad(f, ...) returned."""

    def __init__(self, transform: Any, function: VariableTracker, options: dict) -> None:
        super().__init__()
        self.transform = transform
        self.function = function
        self.options = options

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        what = f"torch.func.{TRANSFORMS[self.transform]}'s function"
        argnums = self.options.get("argnums", 0)
        numbers = argnums if isinstance(argnums, tuple) else (argnums,)
        if not all(-len(args) <= n < len(args) for n in numbers):
            raise Unsupported(f"{what}: argnums out of range")
        positions = [n % len(args) for n in numbers]
        tensors = [i for i, arg in enumerate(args) if isinstance(arg, TensorVariable)]
        if not all(i in tensors or args[i].is_python_constant() for i in range(len(args))) or \
                not all(i in tensors for i in positions):
            raise Unsupported(f"{what}: an argument that is neither a tensor nor a constant, or argnums naming one")
        # constants are passed to the function as they are; argnums count the tensors only
        remapped = tuple(tensors.index(i) for i in positions)
        options = dict(self.options, argnums=remapped if isinstance(argnums, tuple) else remapped[0])
        fake_mode = tx.graph.fake_mode

        def arguments(region):
            made = []
            for index, arg in enumerate(args):
                if index not in tensors:
                    made.append(arg)
                    continue
                with fake_mode:
                    example = arg.example.detach()
                    if index in positions and (example.is_floating_point() or example.is_complex()):
                        example.requires_grad_(True)
                made.append(region.argument(example))
            return made

        region = speculate(tx, what, self.function, arguments, kwargs)
        region.check_writes(set())
        name = unique_name(TRANSFORMS[self.transform])
        module = region.module(region.lifted, name)
        region.remove()
        target = GradCall(self.transform, module, options)
        target.__name__ = target.__qualname__ = name
        result = call_node(tx, target, [*[args[i] for i in tensors], *region.lifted])
        if target.spec is _UNKNOWN:
            raise Unsupported(f"{what}: the result's structure is unknown")
        return rebuild(leaf_variables(result, target.count), target.spec)

    def reconstruct_expr(self, codegen) -> str:
        options = "".join(f", {key}={codegen.literal(value)}" for key, value in self.options.items())
        return f"{codegen.ref(self.transform)}({codegen.reconstruct(self.function)}{options})"


_UNKNOWN = object()


class GradCall:
    """The graph node's target: the transform of a captured subgraph, its results as a flat tuple
    (the structure noted at the first call, on fakes at capture time)."""

    def __init__(self, transform: Any, module: torch.fx.GraphModule, options: dict) -> None:
        self.transform = transform
        self.module = module
        self.options = options
        self.spec = _UNKNOWN
        self.count = 0

    def __call__(self, *args) -> tuple:
        result = self.transform(self.module, **self.options)(*args)
        if self.spec is _UNKNOWN:
            self.spec = spec_of(result)
            self.count = len(flat_leaves(result))
        return flat_leaves(result)


def spec_of(value: Any):
    """The structure `subgraphs.rebuild` takes, of a tensor or (nested) tuple/list of tensors."""
    if isinstance(value, torch.Tensor):
        return None
    if type(value) in (tuple, list):
        return type(value), [(len(flat_leaves(item)), spec_of(item)) for item in value]
    raise TypeError(f"a {type(value).__name__} in the result (only tensors are captured)")
