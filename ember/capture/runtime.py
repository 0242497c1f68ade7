"""What runs on every call: the per-code cache, the dispatcher, and compiled modules.

`CompileContext` is one `ember.compile(...)` call's settings (backend, fullgraph, config);
it owns a `CodeRunner` per code object it has seen (the user's function and every resume
function made from it).  A `CodeRunner` holds the cache entries for its code: on a call it
tries each entry's guard and runs the first that passes; on a miss it captures (and logs
why it recompiled); past the recompile limit it runs the code eagerly, with one warning.

`make_dispatcher` builds, for a user function, a plain Python function with the same
signature and defaults that forwards the bound arguments to the runner: argument binding
stays CPython's own (fast and exact).
"""
from __future__ import annotations

import functools
import inspect
import logging
import sys
import types
import warnings
import weakref
from collections import Counter, defaultdict
from typing import Any, Callable

import torch

from .. import config as ember_config
from .. import logs
from . import defaults
from .convert_frame import CacheEntry, GraphBreak, capture_frame
from .errors import BackendCompilerFailed, CaptureError
from .translator import argument_names
from .variables.modules import _has_hooks

log_recompiles = logs.get("recompiles")
_TORCH_DIR = __import__("os").path.dirname(torch.__file__)
log_fallbacks = logs.get("fallbacks")

counters: defaultdict[str, Counter] = defaultdict(Counter)
_contexts: "weakref.WeakSet[CompileContext]" = weakref.WeakSet()
_observers: list["CaptureObserver"] = []


class CaptureObserver:
    """Collects graphs, breaks and guards (used by ember.explain and tests)."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.breaks: list[GraphBreak] = []
        self.guards: list[str] = []
        self.skips: list[str] = []

    def __enter__(self) -> "CaptureObserver":
        _observers.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _observers.remove(self)


class CompileContext:
    def __init__(self, backend: Callable, backend_name: str, fullgraph: bool, dynamic, mode, options) -> None:
        self.backend = backend
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode
        self.options = dict(options or {})
        self.runners: dict[types.CodeType, CodeRunner] = {}
        self.wrapped: dict[int, tuple[Any, Any]] = {}
        _contexts.add(self)

    @property
    def config(self):
        return ember_config._config

    def code_runner(self, code: types.CodeType, f_globals: dict) -> "CodeRunner":
        runner = self.runners.get(code)
        if runner is None:
            runner = CodeRunner(self, code, f_globals)
            self.runners[code] = runner
        return runner

    def wrap_callable(self, function: Any) -> Any:
        """A callee that a graph break left as a call: compile it on its own (if Python)."""
        if isinstance(function, types.FunctionType):
            if function.__code__.co_filename.startswith(_TORCH_DIR):
                return function  # torch's Python internals run as they are
            return self._compiled_function(function)
        if isinstance(function, types.MethodType) and isinstance(function.__func__, types.FunctionType):
            return types.MethodType(self.wrap_callable(function.__func__), function.__self__)
        if isinstance(function, torch.nn.Module):
            forward = type(function).forward
            if not isinstance(forward, types.FunctionType) or _is_internal(forward.__code__):
                return function
            dispatcher = self._compiled_function(forward)  # torch's module forwards included
            module = function

            def call_module(*args, **kwargs):
                if _has_hooks(module):
                    return module(*args, **kwargs)
                return dispatcher(module, *args, **kwargs)

            return call_module
        return function

    def _compiled_function(self, function: types.FunctionType) -> Any:
        if getattr(function, "_ember_disabled", False) or _is_internal(function.__code__):
            return function
        known = self.wrapped.get(id(function))
        if known is not None and known[0] is function:
            return known[1]
        compiled = make_dispatcher(function, self)
        self.wrapped[id(function)] = (function, compiled)
        return compiled

    def compile_graph(self, module: torch.fx.GraphModule, example_inputs: list) -> Callable:
        counters["stats"]["unique_graphs"] += 1
        for observer in _observers:
            observer.graphs.append(module)
        try:
            compiled = self.backend(module, example_inputs)
        except Exception as error:
            if ember_config._config.fallback_on_backend_error:
                warnings.warn(f"ember: backend {self.backend_name!r} failed ({type(error).__name__}: {error}); "
                              f"running the graph eagerly")
                return module.forward
            raise BackendCompilerFailed(
                f"backend {self.backend_name!r} raised {type(error).__name__}: {error}\n"
                f"while compiling this graph:\n{module.print_readable(print_output=False)}\n"
                f"(set ember.config.fallback_on_backend_error=True to run such graphs eagerly)"
            ) from error
        if not callable(compiled):
            raise BackendCompilerFailed(
                f"backend {self.backend_name!r} returned {type(compiled).__name__}, not a callable")
        return compiled

    def record_break(self, record: GraphBreak) -> None:
        counters["graph_break"][record.reason] += 1
        for observer in _observers:
            observer.breaks.append(record)

    def record_skip(self, code: types.CodeType, reason: str) -> None:
        counters["stats"]["frames_run_eagerly"] += 1
        for observer in _observers:
            observer.skips.append(f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}): {reason}")

    def reset(self) -> None:
        self.runners.clear()
        self.wrapped.clear()


def _is_internal(code: types.CodeType) -> bool:
    import os

    import ember

    return code.co_filename.startswith(os.path.dirname(ember.__file__))


class CodeRunner:
    """The cache for one code object within one compile context."""

    def __init__(self, context: CompileContext, code: types.CodeType, f_globals: dict) -> None:
        self.context = context
        self.code = code
        self.f_globals = f_globals
        self.params = argument_names(code)
        self.entries: list[tuple[Callable, Callable]] = []
        self.cache_entries: list[CacheEntry] = []
        self.eager = not all(name.isidentifier() for name in self.params)
        self._eager_function: Callable | None = None
        self._warned = False

    def __call__(self, closure, *args):
        for guard, run in self.entries:
            try:
                hit = guard(closure, *args)
            except Exception:  # a guarded path no longer exists (missing attribute, key)
                hit = False
            if hit:
                return run(closure, *args)
        return self.miss(closure, args)

    def miss(self, closure, args: tuple):
        if self.eager:
            return self.run_eagerly(closure, args)
        limit = ember_config._config.recompile_limit
        if len(self.entries) >= limit:
            if not self._warned:
                warnings.warn(
                    f"ember: {self.code.co_name} ({self.code.co_filename}:{self.code.co_firstlineno}) was "
                    f"recompiled {limit} times (ember.config.recompile_limit); it runs eagerly from now on. "
                    f"Last reason: {'; '.join(self.failures(closure, args)[:2])}")
                self._warned = True
            self.eager = True
            return self.run_eagerly(closure, args)
        if self.cache_entries:
            counters["stats"]["recompiles"] += 1
            if log_recompiles.isEnabledFor(logging.DEBUG):
                log_recompiles.debug("recompiling %s: %s", self.code.co_name,
                                     "; ".join(self.failures(closure, args)) or "new entry")
        counters["stats"]["captures"] += 1
        entry = capture_frame(self.context, self.code, self.f_globals, closure, args)
        if entry is None:
            self.eager = True
            return self.run_eagerly(closure, args)
        self.cache_entries.append(entry)
        for observer in _observers:
            observer.guards.append(entry.guard_source)
        self.entries.append((entry.guard, entry.run))
        return entry.run(closure, *args)

    def failures(self, closure, args) -> list[str]:
        reasons = []
        for entry in self.cache_entries:
            reasons.extend(entry.guard_set.failures(self.params, self.f_globals, closure, args)[:1])
        return reasons

    def run_eagerly(self, closure, args: tuple):
        function = self._eager_function
        if function is None:
            function = _spread_call(types.FunctionType(self.code, self.f_globals, self.code.co_name, None, closure),
                                    self.code)
            if self.code.co_freevars:
                function = None  # closure differs per function object: build each time
            else:
                self._eager_function = function
        if function is None:
            function = _spread_call(types.FunctionType(self.code, self.f_globals, self.code.co_name, None, closure),
                                    self.code)
        return function(*args)


def _spread_call(function: types.FunctionType, code: types.CodeType) -> Callable:
    """A callable taking the frame's argument locals positionally (varargs as one tuple)."""
    positional = code.co_argcount
    kwonly = code.co_kwonlyargcount
    names = code.co_varnames
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    kwonly_names = names[positional:positional + kwonly]

    def call(*values):
        index = positional
        args = list(values[:positional])
        kwargs = {name: values[index + i] for i, name in enumerate(kwonly_names)}
        index += kwonly
        if has_varargs:
            args.extend(values[index])
            index += 1
        if has_varkw:
            kwargs.update(values[index])
        return function(*args, **kwargs)

    return call


def make_dispatcher(function: types.FunctionType, context: CompileContext) -> Callable:
    """A function with `function`'s signature that runs it through ember's cache."""
    code = function.__code__
    runner = context.code_runner(code, function.__globals__)
    params = argument_names(code)
    if not all(name.isidentifier() for name in params):
        return function
    positional = code.co_argcount
    posonly = code.co_posonlyargcount
    kwonly = code.co_kwonlyargcount
    names = code.co_varnames
    parts = []
    for index in range(positional):
        parts.append(names[index])
        if posonly and index == posonly - 1:
            parts.append("/")
    index = positional
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[positional + kwonly])
    elif kwonly:
        parts.append("*")
    parts.extend(names[index:index + kwonly])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[positional + kwonly + bool(code.co_flags & inspect.CO_VARARGS)])
    # Defaults are read from `function` on each call, so that changing them is seen (defaults.py).
    dispatcher_defaults, dispatcher_kwdefaults, prologue = defaults.sentinel_defaults(function)
    source = (
        f"def {_safe_name(function.__name__)}({', '.join(parts)}):\n"
        + "".join(f"    {line}\n" for line in prologue)
        + f"    return __ember_runner(__ember_closure, {', '.join(params)})\n"
    )
    namespace = {"__ember_runner": runner, "__ember_closure": function.__closure__, **defaults.namespace(function)}
    exec(compile(source, f"<ember dispatcher for {function.__qualname__}>", "exec"), namespace)
    dispatcher = namespace[_safe_name(function.__name__)]
    dispatcher.__defaults__ = dispatcher_defaults
    dispatcher.__kwdefaults__ = dispatcher_kwdefaults
    functools.update_wrapper(dispatcher, function)
    dispatcher._ember_original = function
    dispatcher._ember_runner = runner
    return dispatcher


def _safe_name(name: str) -> str:
    return name if name.isidentifier() and not name.startswith("<") else "compiled_function"


def reset_all() -> None:
    for context in list(_contexts):
        context.reset()
    counters.clear()
    from .resume import clear_cache

    clear_cache()
