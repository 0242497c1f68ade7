"""What runs on every call: the per-code cache, the dispatcher, and compiled modules.

`CompileContext` is one `ember.compile(...)` call's settings; it owns a `CodeRunner` per code
object it has seen (the user's function and its resume functions).  A `CodeRunner` tries each
cache entry's guard and runs the first that passes; on a miss it captures (logging why); past the
recompile limit it runs the code eagerly, with one warning.  `CompileContext.call_module` calls a
module as Module.__call__ would, hooks included (module_call.py).  `make_dispatcher` builds a
function with the user's signature that forwards the bound arguments to the runner, so argument
binding stays CPython's own.
"""
from __future__ import annotations

import contextlib
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
from .. import debug_dir as _debug_dir
from .. import logs
from ..gc_pause import gc_paused
from . import defaults
from . import stance as _stance
from .convert_frame import EAGER_THIS_CALL, CacheEntry, GraphBreak, capture_frame
from .errors import BackendCompilerFailed
from .scalars import mark_changed_scalars
from .shapes import ShapeState
from .translator import argument_names, is_internal
from .module_call import TORCH_DIR, has_hooks, hook_key, instance_forward, make_hooked_call, own_call, \
    unsupported_hooks

log_recompiles = logs.get("recompiles")
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
    """One `ember.compile(...)` call: its backend and settings (ember.config overrides, the call's
    `options`, in force while it captures and compiles), and the caches of what it compiled."""

    def __init__(self, backend: Callable, backend_name: str, fullgraph: bool, dynamic, mode,
                 settings: dict | None = None) -> None:
        self.backend = backend
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode
        self.settings = dict(settings or {})
        self.runners: dict[types.CodeType, CodeRunner] = {}
        self.wrapped: dict[int, tuple[Any, Any]] = {}
        # (forward, hook_key) -> compiled call with those hooks; per forward, how many were made
        self.hooked_calls: dict[tuple, Callable] = {}
        self.hooked_variants: Counter = Counter()
        self.eager_modules: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
        _contexts.add(self)

    @property
    def config(self):
        return ember_config._config

    def settings_scope(self):
        """The compile call's options applied to ember.config, for one capture."""
        return ember_config.patch(**self.settings) if self.settings else contextlib.nullcontext()

    def graph_compiler(self) -> Callable:
        """A compiler of FX GraphModules with this context's backend, each graph in a context of its
        own (as `ember.compile(gm, backend=...)`): for compiled autograd's graphs."""
        def compile_graph(gm: torch.fx.GraphModule) -> Callable:
            context = CompileContext(self.backend, self.backend_name, False, None, None, {})
            return lambda *args: context.call_module(gm, args, {})
        return compile_graph

    def code_runner(self, code: types.CodeType, f_globals: dict) -> "CodeRunner":
        if code not in self.runners:
            self.runners[code] = CodeRunner(self, code, f_globals)
        return self.runners[code]

    def wrap_callable(self, function: Any) -> Any:
        """A callee that a graph break left as a call: compile it on its own (if Python)."""
        if isinstance(function, types.FunctionType):
            if function.__code__.co_filename.startswith(TORCH_DIR):
                return function  # torch's Python internals run as they are
            return self._compiled_function(function)
        if isinstance(function, types.MethodType) and isinstance(function.__func__, types.FunctionType):
            return types.MethodType(self.wrap_callable(function.__func__), function.__self__)
        if type(function) is functools.partial:  # e.g. a forward that accelerate assigned on a module
            return functools.partial(self.wrap_callable(function.func), *function.args, **function.keywords)
        if isinstance(function, torch.nn.Module):
            if own_call(function) is not None:
                return function  # its class's own __call__ (an ember.compile'd module's included)
            forward = instance_forward(function) or type(function).forward
            if isinstance(forward, types.FunctionType) and is_internal(forward.__code__) or not isinstance(
                    forward, (types.FunctionType, types.MethodType, functools.partial)):
                return function
            return lambda *args, **kwargs: self.call_module(function, args, kwargs)
        return function

    def call_module(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        """`module(*args, **kwargs)` with its forward compiled (torch's module forwards included),
        and its forward hooks and pre-hooks captured with it (module_call.py).  As in torch, a
        forward assigned on the instance (`module.forward = f`) runs instead of the class's."""
        own_forward = instance_forward(module)
        if not has_hooks(module):
            if own_forward is not None:
                return self.wrap_callable(own_forward)(*args, **kwargs)
            return self._compiled_function(type(module).forward)(module, *args, **kwargs)
        reason = unsupported_hooks(module)
        if reason is not None:
            if module not in self.eager_modules:
                self.eager_modules.add(module)
                log_fallbacks.debug("running %s eagerly: %s", type(module).__qualname__, reason)
                self.record_skip(type(module).forward.__code__, reason)
            return module(*args, **kwargs)
        forward = own_forward if own_forward is not None else type(module).forward
        key = (forward, hook_key(module))
        call = self.hooked_calls.get(key) or self._hooked_call(module, key)
        return call(module, *args, **kwargs)

    def _hooked_call(self, module: torch.nn.Module, key: tuple) -> Callable:
        forward = key[0]
        own_forward = forward is instance_forward(module)
        if self.hooked_variants[forward] >= ember_config._config.recompile_limit:
            # Hooks keep changing: past the recompile limit they run as plain Python around the
            # compiled forward (uncached, so old hooks are not kept alive).
            if self.hooked_variants[forward] == ember_config._config.recompile_limit:
                self.hooked_variants[forward] += 1
                warnings.warn(f"ember: the hooks of {type(module).__qualname__} changed more than "
                              f"ember.config.recompile_limit times; from now on new hooks run "
                              f"uncompiled around the compiled forward")
            if own_forward:
                compiled_own = self.wrap_callable(forward)
                return make_hooked_call(module, lambda _, *args, **kwargs: compiled_own(*args, **kwargs))
            return make_hooked_call(module, self._compiled_function(forward))
        self.hooked_variants[forward] += 1
        # The instance's forward is read as `self.forward` in the captured call (and guarded).
        call = make_dispatcher(make_hooked_call(module, None if own_forward else forward), self)
        self.hooked_calls[key] = call
        return call

    def _compiled_function(self, function: types.FunctionType) -> Any:
        known = self.wrapped.get(id(function))
        if known is not None and known[0] is function:
            return known[1]
        if getattr(function, "_ember_disabled", False) or is_internal(function.__code__):
            compiled = function
        else:
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
        """Forget every capture.  Dispatchers already handed out hold their runner, so the
        runners are emptied in place (their next call captures again); runners of resume
        functions (dropped with the resume code cache) and of hooked module calls go."""
        for runner in self.runners.values():
            runner.reset()
        dropped = {call._ember_runner.code for call in self.hooked_calls.values()}
        self.runners = {code: runner for code, runner in self.runners.items()
                        if runner.entry_point and code not in dropped}
        self.wrapped.clear()
        self.hooked_calls.clear()
        self.hooked_variants.clear()
        self.eager_modules = weakref.WeakSet()


_dispatch_modes = torch._C._len_torch_dispatch_stack  # (how many TorchDispatchModes are active)


def enclosing_context() -> "CompileContext | None":
    """The context of the innermost compiled call running on this thread (a backward called in
    the Python a graph break resumes in), found on the stack so that calls pay nothing for it."""
    runner_code = CodeRunner.__call__.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is runner_code:
            return getattr(frame.f_locals.get("self"), "context", None)
        frame = frame.f_back
    return None


class CodeRunner:
    """The cache for one code object within one compile context."""

    def __init__(self, context: CompileContext, code: types.CodeType, f_globals: dict) -> None:
        self.context = context
        self.code = code
        self.f_globals = f_globals
        self.params = argument_names(code)
        self.entry_point = False  # a dispatcher calls it (not only glue code)
        self.reset()

    def reset(self) -> None:
        self.entries: list[tuple[Callable, Callable]] = []
        self.cache_entries: list[CacheEntry] = []
        self.eager = not all(name.isidentifier() for name in self.params)
        self._eager_function: Callable | None = None
        self._warned = False
        # Automatic dynamic shapes (dynamic=None): sizes seen changing, by guard expression.
        self.shapes = ShapeState()

    def __call__(self, closure, *args):
        if _dispatch_modes() and not ember_config._config.compiled_under_dispatch_modes:
            # a TorchDispatchMode is to see (and may change) every ATen op, as in eager: compiled
            # kernels would hide them, so the code runs as written (as under torch.compile)
            return self.run_eagerly(closure, args)
        if _stance.current is not None or ember_config._config.disable:
            return _stance.dispatch(self, closure, args)  # ember.set_stance / ember.config.disable
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
        if _stance.current is not None and _stance.on_miss(self, closure, args):
            return self.run_eagerly(closure, args)  # "eager_on_recompile" (stance.py)
        with self.context.settings_scope(), _debug_dir.frame(self.code):  # (EMBER_DEBUG_DIR's report)
            return self._capture_and_run(closure, args)

    def _capture_and_run(self, closure, args: tuple):
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
            if getattr(self.context, "dynamic", None) is None:
                self._mark_changed_sizes(closure, args)
            elif self.context.dynamic is True:
                mark_changed_scalars(self, closure, args)  # (every size is a symbol already)
        counters["stats"]["captures"] += 1
        with gc_paused():  # (the first run too: graphs compile at their first call)
            entry = capture_frame(self.context, self.code, self.f_globals, closure, args, self.shapes)
            if entry is None or entry is EAGER_THIS_CALL:  # (EAGER_THIS_CALL: eager raises the user's exception)
                self.eager = entry is None
                return self.run_eagerly(closure, args)
            self.cache_entries.append(entry)
            for observer in _observers:
                observer.guards.append(entry.guard_source)
            self.entries.append((entry.guard, entry.run))
            return entry.run(closure, *args)

    def _mark_changed_sizes(self, closure, args) -> None:
        """The automatic mode: a size that changed between calls becomes a symbol in the next
        capture (torch.compile's automatic dynamic shapes)."""
        for entry in self.cache_entries:
            for expr, path, dim, old, new in entry.guard_set.changed_sizes(self.params, self.f_globals, closure, args):
                dims = self.shapes.automatic.setdefault(expr, set())
                if dim not in dims:
                    dims.add(dim)
                    log_recompiles.debug("%s: %s.size(%d) was %d, now %d; marking it dynamic",
                                         self.code.co_name, path, dim, old, new)
        mark_changed_scalars(self, closure, args)

    def failures(self, closure, args) -> list[str]:
        """Why each cache entry missed: `x.size(0) expected 4, got 5` (entries numbered if several)."""
        reasons = []
        for index, entry in enumerate(self.cache_entries):
            for reason in entry.guard_set.failures(self.params, self.f_globals, closure, args)[:1]:
                reasons.append(f"entry {index}: {reason}" if len(self.cache_entries) > 1 else reason)
        return reasons

    def run_eagerly(self, closure, args: tuple):
        function = self._eager_function
        if function is None:
            function = _spread_call(types.FunctionType(self.code, self.f_globals, self.code.co_name, None, closure),
                                    self.code)
            if not self.code.co_freevars:  # (the closure differs per function object: made each call)
                self._eager_function = function
        return function(*args)


def _spread_call(function: types.FunctionType, code: types.CodeType) -> Callable:
    """A callable taking the frame's argument locals positionally (varargs as one tuple)."""
    positional, kwonly = code.co_argcount, code.co_kwonlyargcount
    kwonly_names = code.co_varnames[positional:positional + kwonly]
    has_varargs, has_varkw = bool(code.co_flags & inspect.CO_VARARGS), bool(code.co_flags & inspect.CO_VARKEYWORDS)

    def call(*values):
        args = list(values[:positional])
        kwargs = {name: values[positional + i] for i, name in enumerate(kwonly_names)}
        index = positional + kwonly
        if has_varargs:
            args.extend(values[index])
            index += 1
        if has_varkw:
            kwargs.update(values[index])
        return function(*args, **kwargs)

    return call


DISPATCHER_FILENAME_PREFIX = "<ember dispatcher for "


def compiled_original(value: Any) -> types.FunctionType | None:
    """The user's function behind a dispatcher that ember.compile returned, else None.  Told by
    the dispatcher's code, not by its attributes: functools.wraps copies those onto a user's
    own wrapper, whose body must still run."""
    if (isinstance(value, types.FunctionType) and value.__code__.co_filename.startswith(DISPATCHER_FILENAME_PREFIX)
            and isinstance(getattr(value, "_ember_original", None), types.FunctionType)):
        return value._ember_original
    return None


def make_dispatcher(function: types.FunctionType, context: CompileContext) -> Callable:
    """A function with `function`'s signature that runs it through ember's cache."""
    code = function.__code__
    runner = context.code_runner(code, function.__globals__)
    runner.entry_point = True
    params = runner.params
    if not all(name.isidentifier() for name in params):
        return function
    positional, kwonly, names = code.co_argcount, code.co_kwonlyargcount, code.co_varnames
    parts = list(names[:positional])
    if code.co_posonlyargcount:
        parts.insert(code.co_posonlyargcount, "/")
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[positional + kwonly])
    elif kwonly:
        parts.append("*")
    parts.extend(names[positional:positional + kwonly])
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
    exec(compile(source, f"{DISPATCHER_FILENAME_PREFIX}{function.__qualname__}>", "exec"), namespace)
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
