"""ember.compile and friends: the user-facing entry points.

`compile(fn_or_module, backend=..., fullgraph=..., ...)` returns a function (or a module
wrapper sharing the original's parameters) whose calls go through ember's capture cache.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import types
from typing import Any, Callable

import torch

from . import config as ember_config
from .backends import lookup_backend
from .capture.runtime import CaptureObserver, CompileContext, make_dispatcher, reset_all


def disable(fn: Callable | None = None, *, reason: str | None = None):
    """Keep `fn` out of capture: ember calls it as plain Python (a graph break around the call)."""
    if fn is None:
        return functools.partial(disable, reason=reason)
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    fn = _original(fn)

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        return fn(*args, **kwargs)

    disabled._ember_disabled = True
    disabled._ember_disable_reason = reason
    return disabled


def _original(fn):
    """What ember.compile was given for `fn` (a compiled module's model, a dispatcher's function), else `fn`."""
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_ember_original", None) or fn


_WRAPPER_PREFIX = "_orig_mod."


class OptimizedModule(torch.nn.Module):
    """`ember.compile(module)`: calls run through ember; everything else is the original module.

    - Attributes (`training` included) read and write the original's; the compiled code guards
      what it read.  A forward assigned on the instance (also on a submodule) runs instead of the
      class's; assigning or deleting one is noticed on the next call.
    - Hooks: the original's and its submodules' forward (pre-)hooks run inside the captured code;
      backward and always-called hooks make the call run eagerly (a submodule's: a graph break).
      Global hooks fire once per call, for the original; hooks on the wrapper run around it.
    - state_dict keys are the original's, without torch.compile's `_orig_mod.` prefix (also for a
      compiled submodule); load_state_dict accepts both.  named_parameters() and named_modules()
      carry the prefix, as the original is the child `_orig_mod`.
    - copy.deepcopy, pickle and torch.save give a compiled module of a copy of the model, with
      the same compile settings and an empty cache (a custom backend must be picklable by name).
    """

    _WRAPPER_ATTRIBUTES = frozenset({"_orig_mod", "_ember_context", "_ember_compile_arguments",
                                     "_ember_initialized", "_ember_loading_prefixes"})

    def __init__(self, module: torch.nn.Module, context: CompileContext, compile_arguments: dict) -> None:
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType) and module.__dict__.get("forward") is None:
            raise TypeError(f"ember.compile: {type(module).__name__}.forward is not a Python function")
        object.__setattr__(self, "_ember_initialized", False)  # Module.__init__ sets `training`
        super().__init__()
        torch.nn.Module.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_ember_context", context)
        object.__setattr__(self, "_ember_compile_arguments", dict(compile_arguments))
        object.__setattr__(self, "_ember_loading_prefixes", [])
        self._register_load_state_dict_pre_hook(self._accept_plain_keys)
        self.register_load_state_dict_post_hook(OptimizedModule._report_plain_keys)
        object.__setattr__(self, "_ember_initialized", True)

    def __call__(self, *args, **kwargs):
        if (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self.__dict__.get("_backward_pre_hooks")):
            return super().__call__(*args, **kwargs)  # hooks registered on the wrapper itself
        # Module.__call__ would also fire global hooks for the wrapper: they fire for the original.
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._ember_context.call_module(self._modules["_orig_mod"], args, kwargs)

    # -- attributes: the original's ----------------------------------------------------------------
    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self._ember_initialized:  # Module.__init__'s default is not the original's state
            self._orig_mod.training = value

    def __getattr__(self, name: str):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        if name in OptimizedModule._WRAPPER_ATTRIBUTES:
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OptimizedModule._WRAPPER_ATTRIBUTES or hasattr(type(self), name):
            return super().__setattr__(name, value)
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in OptimizedModule._WRAPPER_ATTRIBUTES or hasattr(type(self), name):
            return super().__delattr__(name)
        delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._orig_mod)) | set(super().__dir__()))

    # -- state_dict: the original model's keys -----------------------------------------------------
    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, *args, **kwargs):
        return self._orig_mod.load_state_dict(_without_wrapper_prefix(state_dict), *args, **kwargs)

    def _accept_plain_keys(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                           error_msgs) -> None:
        """As a submodule being loaded: move the original's plain keys (`sub.weight`) under the
        child that owns them (`sub._orig_mod.weight`); torch.compile's prefixed keys stay."""
        inner = prefix + _WRAPPER_PREFIX
        for key in [key for key in state_dict if key.startswith(prefix) and not key.startswith(inner)]:
            state_dict[inner + key[len(prefix):]] = state_dict.pop(key)
        self._ember_loading_prefixes.append(inner)

    def _report_plain_keys(self, incompatible_keys) -> None:
        """Missing/unexpected keys named as the checkpoint names them (without `_orig_mod.`)."""
        while self._ember_loading_prefixes:
            inner = self._ember_loading_prefixes.pop()
            outer = inner[:-len(_WRAPPER_PREFIX)]
            for keys in (incompatible_keys.missing_keys, incompatible_keys.unexpected_keys):
                keys[:] = [outer + key[len(inner):] if key.startswith(inner) else key for key in keys]

    # -- copies: a compiled module of the copied model, with an empty cache -------------------------
    def __reduce_ex__(self, protocol):
        return _rebuild_compiled_module, (self._orig_mod, self._ember_compile_arguments)

    def __deepcopy__(self, memo):
        module = copy.deepcopy(self._orig_mod, memo)
        return _rebuild_compiled_module(module, copy.deepcopy(self._ember_compile_arguments, memo))

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def _rebuild_compiled_module(module: torch.nn.Module, compile_arguments: dict) -> OptimizedModule:
    return compile(module, **compile_arguments)


def _without_wrapper_prefix(state_dict):
    """A torch.compile'd model's checkpoint (`_orig_mod.weight`) as the plain model's (`weight`)."""
    if not any(key.startswith(_WRAPPER_PREFIX) for key in state_dict):
        return state_dict
    renamed = collections.OrderedDict(
        (key[len(_WRAPPER_PREFIX):] if key.startswith(_WRAPPER_PREFIX) else key, value)
        for key, value in state_dict.items())
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        renamed._metadata = collections.OrderedDict(  # type: ignore[attr-defined]
            ("" if name == _WRAPPER_PREFIX[:-1] else
             name[len(_WRAPPER_PREFIX):] if name.startswith(_WRAPPER_PREFIX) else name, value)
            for name, value in metadata.items())
    return renamed


# torch.compile's modes and the ember.config settings each implies.
MODE_SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True},
    "max-autotune-no-cudagraphs": {},
}


def _compile_settings(mode, options, dynamic) -> dict[str, Any]:
    """ember.config overrides for one compile call, checked as torch.compile checks them."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same "
                           "time. (ember.compile: pass options=... alone, or a mode alone)")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"ember.compile: dynamic must be True, False or None, got {dynamic!r}")
    if mode is not None:
        if not isinstance(mode, str) or mode not in MODE_SETTINGS:
            raise RuntimeError(f"ember.compile: unrecognized mode={mode!r}, should be one of: "
                               f"{', '.join(MODE_SETTINGS)}")
        return dict(MODE_SETTINGS[mode])
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"ember.compile: options must be a dict of ember.config settings, got "
                        f"{type(options).__name__}")
    known = ember_config.Config().keys()
    unknown = [key for key in options if key not in known]
    if unknown:
        raise RuntimeError(f"ember.compile: unexpected option(s) {', '.join(map(repr, unknown))}; options are "
                           f"ember.config settings: {', '.join(sorted(known))}")
    ember_config.patch(**options)  # checks each value's type
    return dict(options)


def compile(model_or_fn=None, *, backend="ember", fullgraph: bool = False, dynamic=None, mode=None,
            options: dict | None = None):
    """Compile a function or nn.Module with ember; usable as a call or as a decorator.

    backend: "ember" (default), "eager", "aot_eager", "inductor" or a callable(gm, example_inputs).
    fullgraph: a graph break raises instead of splitting the graph.
    dynamic: as in torch.compile.  True: every input size of 2 or more is a symbol from the first
        capture; False: every size is a constant; None: the first capture is static, and a size
        that changes between calls becomes a symbol at the recompile.  Sizes 0 and 1 and
        `mark_static` dims stay constants; `mark_dynamic` dims are symbols under True and None.
    mode: one of torch.compile's modes: "reduce-overhead" (and "max-autotune") replay compiled
        GPU graphs as CUDA graphs (MODE_SETTINGS).
    options: ember.config settings in force while this function captures and compiles (unknown
        keys raise); not together with `mode`.
    """
    if model_or_fn is None:
        _compile_settings(mode, options, dynamic)  # bad arguments fail at the decorator line
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options)
    backend_fn, backend_name = lookup_backend(backend)
    if not callable(model_or_fn):
        raise TypeError(f"ember.compile expects a function or an nn.Module, got {type(model_or_fn).__name__} "
                        f"({model_or_fn!r:.80}); pass the callable itself, e.g. ember.compile(model)")
    settings = _compile_settings(mode, options, dynamic)
    if ember_config._config.disable or ember_config.disabled_by_environment():
        # the off switch (EMBER_DISABLE=1, TORCH_COMPILE_DISABLE=1, ember.config.disable): as torch.compile
        # with TORCH_COMPILE_DISABLE, the function or module itself comes back, to run eagerly
        return _original(model_or_fn)
    context = CompileContext(backend_fn, backend_name, fullgraph, dynamic, mode, settings)
    model_or_fn = _original(model_or_fn)
    if isinstance(model_or_fn, torch.nn.Module):
        arguments = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)
        return OptimizedModule(model_or_fn, context, arguments)
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
    """Forget every cached capture (all compiled functions recompile on their next call) and every
    captured backward (compiled autograd)."""
    reset_all()
    from . import compiled_autograd

    compiled_autograd.reset()


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
        return ExplainOutput(graphs=list(observer.graphs), graph_count=len(observer.graphs),
                             graph_break_count=len(observer.breaks), break_reasons=list(observer.breaks),
                             guards=list(observer.guards), ops_per_graph=ops, frames_run_eagerly=list(observer.skips))

    return run


def _op_name(node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)


def _mark(attribute: str, verb: str, tensor, dim) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"ember.{verb}: expected a tensor, got {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -tensor.dim() <= d < max(tensor.dim(), 1):
            raise IndexError(f"ember.{verb}: dim {d!r} is out of range for a tensor with {tensor.dim()} dims")
    marked = set(getattr(tensor, attribute, ()) or ())
    marked.update(d % tensor.dim() for d in dims)
    setattr(tensor, attribute, marked)


def mark_dynamic(tensor, dim) -> None:
    """Capture `tensor`'s size at `dim` (an int or a list of ints) as a symbol, whatever
    `dynamic=` says (torch._dynamo.mark_dynamic's markings are honoured too)."""
    _mark("_ember_dynamic_dims", "mark_dynamic", tensor, dim)


def mark_static(tensor, dim) -> None:
    """Keep `tensor`'s size at `dim` a constant, even with dynamic=True."""
    _mark("_ember_static_dims", "mark_static", tensor, dim)
