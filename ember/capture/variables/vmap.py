"""torch.vmap / torch.func.vmap of torch's own functions and of Python functions.

The batched call is one graph node that runs torch.vmap itself on the node's inputs (on fakes at capture,
on the real tensors when compiled), so batching rules, randomness and errors are vmap's own.  A Python
function is first captured as a subgraph (subgraphs.py) on one example's tensors (each batched argument's
fake with its batched dimension selected away; closed-over tensors become unbatched inputs).  It may write
in place into its own batched arguments (vmap writes through); other writes, Python state changes and
non-tensor results break the graph.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker
from .subgraphs import (TransformCall, TransformedFunctionVariable, bind_options, call_region, leaf_variables, rebuild,
                       speculate, unique_name)
from .tensor import TensorVariable
from .torch_functions import _BREAKING, TorchFunctionVariable, _in_breaking_module, _same_object_as_argument


class VmapVariable(VariableTracker):
    """torch.vmap itself."""

    def static_value(self) -> Any:
        return torch.vmap

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        names = ("func", "in_dims", "out_dims", "randomness")
        func, options = bind_options("torch.vmap", names, args, kwargs, extra=("chunk_size",))
        if type(func) is not TorchFunctionVariable:
            return VmappedPythonFunctionVariable(torch.vmap, func, options)
        function = func.function
        if function in _BREAKING or _in_breaking_module(getattr(function, "__module__", "") or ""):
            raise Unsupported(f"torch.func.vmap of {getattr(function, '__qualname__', function)}")
        return VmappedFunctionVariable(torch.vmap, function, options)


class VmappedFunctionVariable(TransformedFunctionVariable):
    """What torch.vmap(f, ...) returned, for one of torch's functions f."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs or not all(isinstance(arg, TensorVariable) or arg.is_python_constant() for arg in args):
            raise Unsupported("a vmapped function called with keywords or non-tensor objects")
        function, options = self.function, dict(self.options)

        def vmapped(*values):
            return torch.vmap(function, **options)(*values)

        name = getattr(function, "__name__", "function")
        vmapped.__name__ = vmapped.__qualname__ = f"ember_vmap_{name}"
        result = tx.graph.call(tx, "call_function", vmapped, list(args), {})
        return _same_object_as_argument(result, list(args))

    def function_expr(self, codegen) -> str:
        return codegen.ref(self.function)


class VmappedPythonFunctionVariable(TransformedFunctionVariable):
    """What torch.vmap(f, ...) returned for a Python function (or any callable ember inlines):
    `function` is its variable."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        options = dict(self.options)
        in_dims = options.pop("in_dims", 0)
        out_dims = options.get("out_dims", 0)
        if in_dims is None or isinstance(in_dims, int):
            dims = [in_dims] * len(args)
        elif isinstance(in_dims, (tuple, list)) and len(in_dims) == len(args):
            dims = list(in_dims)
        else:
            raise Unsupported("torch.vmap with in_dims that do not match the arguments one to one")
        if not all(dim is None or type(dim) is int for dim in dims) or \
                not (out_dims is None or type(out_dims) is int or (isinstance(out_dims, (tuple, list)) and all(
                    d is None or type(d) is int for d in out_dims))):
            raise Unsupported("torch.vmap with nested in_dims/out_dims")
        batched, normalized, sizes = [], [], set()
        for arg, dim in zip(args, dims):
            if dim is None:
                normalized.append(None)
                continue
            if not isinstance(arg, TensorVariable) or arg.example.dim() == 0:
                raise Unsupported("torch.vmap of a Python function: a batched argument that is not a tensor with dims")
            dim = dim % arg.example.dim() if -arg.example.dim() <= dim < arg.example.dim() else None
            if dim is None:
                raise Unsupported("torch.vmap: an in_dim out of range")
            size = arg.example.shape[dim]
            if not isinstance(size, torch.SymInt):
                sizes.add(size)
            batched.append(arg)
            normalized.append(dim)
        # (sizes that differ, symbolic ones included, make vmap itself fail on the fakes: a break)
        if not batched or len(sizes) > 1 or 0 in sizes:
            raise Unsupported("torch.vmap of a Python function: no batched tensor, or batch sizes 0 or unequal")
        with tx.graph.fake_mode:
            examples = [None if dim is None else arg.example.select(dim, 0) for arg, dim in zip(args, normalized)]
        region = speculate(tx, "torch.vmap's function", self.function, args, examples, kwargs)
        region.check_writes(set(region.inputs))
        if not region.leaves:
            raise Unsupported("torch.vmap of a function that returns no tensor")
        name = unique_name("vmap") + ("_" if region.writes else "")  # (a trailing _: kept as a write)
        options["in_dims"] = tuple(dim for dim in normalized if dim is not None) + (None,) * len(region.lifted)
        _, result = call_region(tx, region, name, lambda module: TransformCall(torch.vmap, module, options), batched)
        # (a batched argument written in place and returned is that argument's variable)
        leaves = [_same_object_as_argument(leaf, batched) for leaf in leaf_variables(result, len(region.leaves))]
        return rebuild(leaves, region.spec)
