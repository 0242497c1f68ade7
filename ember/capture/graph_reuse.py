"""One backend compile for graphs that a code object's recompiles capture alike.

A recompile caused by a fact only Python reads (a scheduler's `step % 3 == 0` choosing which
learning rate it writes back) captures the same graph under other guards: the new cache entry
then calls the callable compiled for the first.  Graphs are alike when their nodes (op, name,
target object, arguments, constants by type and repr, stack trace, recompute region), their
inputs (type, dtype, device, sizes and strides with symbols numbered in order, requires_grad,
leaf or not) and the global state a backend compiles in (grad mode, default dtype, autocast)
are.  A target ember made for one capture (a wrapper) is a new object each time: never alike.
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch
import torch.fx

from .. import logs
from .guards import autocast_state


def graph_key(module: torch.fx.GraphModule, example_inputs: list) -> tuple | None:
    """A hashable description of what the backend would be given, or None (not comparable)."""
    symbols: dict[sympy.Symbol, sympy.Symbol] = {}
    parts: list = []
    try:
        for node in module.graph.nodes:
            parts.append((node.op, node.name, _object_key(node.target), _arg_key(node.args),
                          _arg_key(node.kwargs), node.meta.get("stack_trace"),
                          _arg_key(node.meta.get("ember_recompute"))))
            if node.op == "placeholder":
                parts.append(_value_key(node.meta.get("example_value"), symbols))
        parts.append(tuple(_example_key(value) for value in example_inputs))
        # what a backend may compile in besides the graph (its entry's guards hold them at capture)
        parts.append((torch.is_grad_enabled(), torch.get_default_dtype(), autocast_state()))
        key = tuple(parts)
        hash(key)
    except (_NotComparable, TypeError):  # (an unhashable target or constant: compiled anew)
        return None
    return key


class _NotComparable(Exception):
    pass


def _object_key(value: Any) -> Any:
    if isinstance(value, str):
        return ("str", value)
    return ("object", id(value), value)  # (the object kept alive by the key: ids stay unique)


def _arg_key(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return ("node", value.name)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_arg_key(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((key, _arg_key(item)) for key, item in value.items()))
    if isinstance(value, slice):
        return ("slice", _arg_key(value.start), _arg_key(value.stop), _arg_key(value.step))
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return (type(value).__name__, repr(value))  # (repr: 0.0 and -0.0 differ, nan is nan)
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ("torch", str(value))
    if isinstance(value, torch.Tensor):
        raise _NotComparable
    return _object_key(value)


def _symbolic_key(value: Any, symbols: dict) -> Any:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = value.node.expr
        for symbol in sorted(expr.free_symbols, key=str):
            symbols.setdefault(symbol, sympy.Symbol(f"v{len(symbols)}"))
        return ("sym", str(expr.xreplace(symbols)))
    return ("int", value)


def _value_key(value: Any, symbols: dict) -> Any:
    if isinstance(value, torch.Tensor):
        strided = value.layout == torch.strided
        return ("tensor", type(value).__name__, str(value.dtype), str(value.device), str(value.layout),
                tuple(_symbolic_key(size, symbols) for size in value.shape),
                tuple(_symbolic_key(stride, symbols) for stride in value.stride()) if strided else (),
                _symbolic_key(value.storage_offset(), symbols) if strided else 0, value.requires_grad)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(value).__name__, _symbolic_key(value, symbols))
    raise _NotComparable


def _example_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (type(value), value.dtype, value.device, value.layout, value.requires_grad, value.is_leaf,
                value._base is not None)
    return type(value)


def compile_or_reuse(context, cache: dict | None, module: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """`context.compile_graph(module, example_inputs)`, or the callable an alike graph of the
    same code object got (`cache`: the code's record, ShapeState.compiled)."""
    key = graph_key(module, example_inputs) if cache is not None else None
    if key is not None and key in cache:
        logs.get("recompiles").debug("the recompiled graph is the same as an earlier one: its compiled "
                                     "form is used again")
        return cache[key]
    compiled = context.compile_graph(module, example_inputs)
    if key is not None:
        cache[key] = compiled
    return compiled
