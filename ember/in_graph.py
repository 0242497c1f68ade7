"""`ember.allow_in_graph`, `ember.disallow_in_graph`, `ember.is_compiling` and `ember.graph_break`.

    @ember.allow_in_graph
    def fused_gelu(x):          # calls become one call_function node, not inlined
        return x * torch.sigmoid(1.702 * x)

An allowed function is called on fake tensors at capture time and put in the graph as one opaque
node (AOT autograd traces through it); like torch's, it skips capture's safety checks.
`disallow_in_graph(fn)` makes each call a graph break.  Functions registered with torch's own
allow_in_graph / disallow_in_graph count too, when the program imported torch._dynamo itself.
`is_compiling()` is False when it runs; captured code sees True.
"""
from __future__ import annotations

import sys
from typing import Any

# id -> the function (kept alive, so that its id cannot be reused by another object)
_allowed: dict[int, Any] = {}
_disallowed: dict[int, Any] = {}


def _register(fn: Any, name: str, add: dict, remove: dict) -> Any:
    if isinstance(fn, (list, tuple)):
        return type(fn)(_register(item, name, add, remove) for item in fn)
    if not callable(fn):
        raise TypeError(f"ember.{name} expects a function (or a list of functions), got "
                        f"{type(fn).__name__} ({fn!r:.60})")
    remove.pop(id(fn), None)
    add[id(fn)] = fn
    return fn


def graph_break() -> None:
    """Marks a graph break: ember ends the graph here and resumes after it (a no-op in eager)."""


def allow_in_graph(fn: Any) -> Any:
    """Put calls to `fn` into captured graphs as one call_function node (see the module docstring)."""
    return _register(fn, "allow_in_graph", _allowed, _disallowed)


def disallow_in_graph(fn: Any) -> Any:
    """Make every call to `fn` inside captured code a graph break (the call runs as plain Python)."""
    return _register(fn, "disallow_in_graph", _disallowed, _allowed)


def is_compiling() -> bool:
    """True inside code ember captures (the capture folds this call to True), False when run eagerly."""
    return False


def verdict(value: Any) -> bool | None:
    """True: `value` goes into the graph as one node; False: a call to it breaks the graph;
    None: no registration (capture decides as usual)."""
    key = id(value)
    if _allowed.get(key) is value:
        return True
    if _disallowed.get(key) is value:
        return False
    rules = sys.modules.get("torch._dynamo.trace_rules")
    if rules is not None and not (getattr(value, "__module__", None) or "").startswith("torch._dynamo"):
        # (not torch._dynamo's own functions: the optimizers' step wrapper calls its graph_break(),
        # run as the no-op it is; torch's callables registered for Dynamo's sake, as SDPAParams and
        # the can_use_* checks, ember classifies itself)
        try:
            if key in rules._allowed_callable_ids and not isinstance(value, type) and not _from_torch(value):
                return True
            if key in rules._disallowed_callable_ids:
                return False
        except Exception:  # another torch's layout: nothing registered as far as ember can tell
            return None
    return None


def _from_torch(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")
