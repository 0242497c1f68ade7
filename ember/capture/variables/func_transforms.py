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
from .subgraphs import (UNKNOWN, TransformCall, TransformedFunctionVariable, bind_options, call_region, leaf_variables,
                       rebuild, speculate, unique_name)
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


class GradFunctionVariable(TransformedFunctionVariable):
    """What torch.func.grad(f, ...) returned."""

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
        examples = []
        with tx.graph.fake_mode:
            for index, arg in enumerate(args):
                example = arg.example.detach() if index in tensors else None
                if index in positions and (example.is_floating_point() or example.is_complex()):
                    example.requires_grad_(True)
                examples.append(example)
        region = speculate(tx, what, self.function, args, examples, kwargs)
        region.check_writes(set())
        target, result = call_region(tx, region, unique_name(TRANSFORMS[self.transform]),
                                     lambda module: TransformCall(self.transform, module, options),
                                     [args[i] for i in tensors])
        if target.spec is UNKNOWN:
            raise Unsupported(f"{what}: the result's structure is unknown")
        return rebuild(leaf_variables(result, target.count), target.spec)
