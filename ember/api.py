"""ember.compile and friends: the user-facing entry points.

`compile(fn_or_module, backend=..., fullgraph=..., ...)` returns a function (or a module
wrapper sharing the original's parameters) whose calls go through ember's capture cache.
"""
from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Callable

import torch

from .backends import lookup_backend
from .capture.runtime import CaptureObserver, CompileContext, make_dispatcher, reset_all


def graph_break() -> None:
    """Marks a graph break: ember ends the graph here and resumes after it (a no-op in eager)."""


def disable(fn: Callable | None = None, *, reason: str | None = None):
    """Keep `fn` out of capture: ember calls it as plain Python (a graph break around the call)."""
    if fn is None:
        return functools.partial(disable, reason=reason)
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    original = getattr(fn, "_ember_original", None)
    if original is not None:
        fn = original

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        return fn(*args, **kwargs)

    disabled._ember_disabled = True
    disabled._ember_disable_reason = reason
    return disabled


class OptimizedModule(torch.nn.Module):
    """A module whose forward runs through ember; parameters and state_dict are the original's."""

    def __init__(self, module: torch.nn.Module, context: CompileContext) -> None:
        super().__init__()
        self._orig_mod = module
        self._ember_context = context
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"ember.compile: {type(module).__name__}.forward is not a Python function")
        self._ember_forward = make_dispatcher(forward, context)

    def forward(self, *args, **kwargs):
        module = self._orig_mod
        if module._forward_hooks or module._forward_pre_hooks:
            return module(*args, **kwargs)
        return self._ember_forward(module, *args, **kwargs)

    def __getattr__(self, name: str):
        if name in ("_orig_mod", "_ember_context", "_ember_forward"):
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def compile(model_or_fn=None, *, backend="ember", fullgraph: bool = False, dynamic=None, mode=None,
            options: dict | None = None):
    """Compile a function or nn.Module with ember; usable as a call or as a decorator."""
    if model_or_fn is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options)
    backend_fn, backend_name = lookup_backend(backend)
    if not callable(model_or_fn):
        raise TypeError(
            f"ember.compile expects a function or an nn.Module, got {type(model_or_fn).__name__} "
            f"({model_or_fn!r:.80}); pass the callable itself, e.g. ember.compile(model)"
        )
    if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise ValueError(f"unknown mode {mode!r}; ember accepts None, 'default', 'reduce-overhead', "
                         f"'max-autotune' and 'max-autotune-no-cudagraphs'")
    context = CompileContext(backend_fn, backend_name, fullgraph, dynamic, mode, options)
    if isinstance(model_or_fn, OptimizedModule):
        model_or_fn = model_or_fn._orig_mod
    if isinstance(model_or_fn, torch.nn.Module):
        return OptimizedModule(model_or_fn, context)
    original = getattr(model_or_fn, "_ember_original", None)
    if original is not None:
        model_or_fn = original
    if isinstance(model_or_fn, types.MethodType) and isinstance(model_or_fn.__func__, types.FunctionType):
        dispatcher = make_dispatcher(model_or_fn.__func__, context)
        return types.MethodType(dispatcher, model_or_fn.__self__)
    if isinstance(model_or_fn, types.FunctionType):
        return make_dispatcher(model_or_fn, context)
    # Other callables (builtins, callable objects): nothing to capture at this level.
    call = getattr(type(model_or_fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        dispatcher = make_dispatcher(call, context)
        return functools.wraps(call)(lambda *args, **kwargs: dispatcher(model_or_fn, *args, **kwargs))
    return model_or_fn


def reset() -> None:
    """Forget every cached capture (all compiled functions recompile on their next call)."""
    reset_all()


@dataclasses.dataclass
class ExplainOutput:
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    guards: list[str]
    ops_per_graph: list[list[str]]
    frames_run_eagerly: list[str]

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        lines.append("Break reasons:")
        for index, record in enumerate(self.break_reasons):
            lines.append(f"  {index + 1}. {record.reason}\n     at {record.filename}:{record.lineno} "
                         f"in {record.code_name}")
        if self.frames_run_eagerly:
            lines.append("Frames run eagerly:")
            lines.extend(f"  {item}" for item in self.frames_run_eagerly)
        lines.append("Ops per graph:")
        for index, ops in enumerate(self.ops_per_graph):
            lines.append(f"  graph {index}: {', '.join(ops)}")
        lines.append("Guards:")
        for index, guard in enumerate(self.guards):
            lines.append(f"  entry {index}:")
            lines.extend(f"    {line}" for line in guard.splitlines())
        return "\n".join(lines)


def explain(fn: Callable, *, backend="eager") -> Callable[..., ExplainOutput]:
    """`ember.explain(fn)(*args, **kwargs)`: graphs, graph breaks (reason, file:line) and guards."""

    def run(*args, **kwargs) -> ExplainOutput:
        compiled = compile(fn, backend=backend)
        with CaptureObserver() as observer:
            compiled(*args, **kwargs)
        ops = [[_op_name(node) for node in gm.graph.nodes if node.op in ("call_function", "call_method")]
               for gm in observer.graphs]
        return ExplainOutput(
            graphs=list(observer.graphs),
            graph_count=len(observer.graphs),
            graph_break_count=len(observer.breaks),
            break_reasons=list(observer.breaks),
            guards=list(observer.guards),
            ops_per_graph=ops,
            frames_run_eagerly=list(observer.skips),
        )

    return run


def _op_name(node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
