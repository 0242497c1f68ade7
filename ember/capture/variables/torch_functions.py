"""torch functions, grad-mode context managers, and ember's own markers (allow_in_graph, graph_break).

A callable from torch's namespace goes into the graph as a `call_function` node, unless it
is one of a few kinds that touch state outside tensors (seeding, global settings,
autograd entry points), which break the graph.  A function registered with
ember.allow_in_graph is not inlined: each call is one node with the function as target.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import types
import warnings
from typing import Any

import torch

from ... import in_graph
from ..errors import Unsupported
from ..guard_failures import Check
from .base import VariableTracker, all_constant, constant, constant_args, real_getattr
from .builder import wrap_static
from .checkpoint import CheckpointVariable
from .control_flow import CondVariable
from .func_transforms import GradTransformVariable

# Calls that must run in real Python (state outside the graph, or whole other systems).
_BREAKING = {
    torch.manual_seed: "torch.manual_seed changes global RNG state",
    torch.seed: "torch.seed changes global RNG state",
    torch.set_default_dtype: "torch.set_default_dtype changes global state",
    torch.set_printoptions: "torch.set_printoptions changes global state",
    torch.set_num_threads: "torch.set_num_threads changes global state",
    torch.use_deterministic_algorithms: "global setting",
    torch.autograd.grad: "torch.autograd.grad inside a compiled region",
    torch.autograd.backward: "torch.autograd.backward inside a compiled region",
    torch.compile: "torch.compile inside a compiled region",
    torch.get_rng_state: "RNG state",
    torch.set_rng_state: "RNG state",
    torch.save: "file I/O",
    torch.load: "file I/O",
}
if hasattr(torch._C, "_cuda_jiterator_compile_and_launch_kernel"):
    _BREAKING[torch._C._cuda_jiterator_compile_and_launch_kernel] = "a jiterator kernel launches outside the dispatcher"
_BREAKING_MODULES = ("torch.jit", "torch.utils.checkpoint", "torch.distributed", "torch.cuda.graphs",
                     "torch.profiler", "torch.autograd.profiler", "torch.testing", "torch.func",
                     "torch._functorch", "torch.utils.data", "torch.hub", "torch.onnx", "torch.export",
                     # compiles and launches its CUDA kernel itself, outside the dispatcher: on fake
                     # tensors it would hand their null pointers to the GPU (and kill the context)
                     "torch.cuda.jiterator")


def _in_breaking_module(module: str) -> bool:
    """Whether `module` is one of _BREAKING_MODULES or inside one: whole dotted components, so
    torch.func matches torch.func._ops but not torch.functional (einsum, split, norm, ...)."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in _BREAKING_MODULES)


_CHECKPOINT = torch.utils.checkpoint.checkpoint
_COND = getattr(torch, "cond", None)
# torch's setters of global state (torch.set_float32_matmul_precision, torch._C._set_*, ...).
_GLOBAL_SETTER_PREFIXES = ("set_", "_set_")
# Functions whose answer during capture is fixed.
_FIXED_ANSWERS: dict[Any, Any] = {}
# torch's Python files whose functions compute on tensors only: such a function runs as one graph
# node, on fakes at capture time.  Other Python functions of torch (optimizers, LR schedulers, hooks)
# are inlined like user code: run for real they could write fakes into real Python objects.
_GRAPH_FUNCTION_FILES = (
    "torch/nn/functional.py",
    "torch/functional.py",
    "torch/_jit_internal.py",  # boolean_dispatch: F.max_pool2d and friends
    "torch/_tensor.py",
    "torch/__init__.py",  # is_tensor, _check, ...
)


def _register_fixed_answers() -> None:
    candidates = [
        ("torch.compiler", "is_compiling", True),
        ("torch.compiler", "is_dynamo_compiling", True),
        ("torch.compiler", "is_exporting", False),
        ("torch.jit", "is_scripting", False),
        ("torch.jit", "is_tracing", False),
        ("torch._C", "_get_tracing_state", None),
        ("torch.fx._symbolic_trace", "is_fx_tracing", False),
        ("torch._dynamo", "is_compiling", True),
    ]
    for module_name, attr, answer in candidates:
        if module_name.startswith("torch._dynamo"):
            # ember does not import torch's compiler stack; a program that asks torch._dynamo has
            # imported it already (see classify_torch_callable).
            module = sys.modules.get(module_name)
        else:
            try:
                module = importlib.import_module(module_name)
            except Exception:
                continue
        function = getattr(module, attr, None)
        if function is not None:
            _FIXED_ANSWERS[function] = answer


_register_fixed_answers()

# Python functions of torch whose answer is read at capture time, by (module, name), looked up lazily
# (`import torch` does not import torch.onnx).  ONCE: fixed for the process, not guarded; GUARDED: state
# a program can change (a process group, an ONNX export, checkpoint recomputation), guarded.
_ONCE, _GUARDED = "once", "guarded"
_NAMED_FIXED_ANSWERS = {
    ("torch.cuda", "is_available"): _ONCE,
    ("torch.distributed", "is_available"): _ONCE,
    ("torch.distributed.distributed_c10d", "is_initialized"): _GUARDED,
    ("torch.onnx", "is_in_onnx_export"): _GUARDED,
    ("torch.autograd", "_is_checkpoint_valid"): _GUARDED,
}
# Python functions of torch that answer a question about a graph input's storage (not guarded by
# the tensor's guards): answered from the real input and guarded on that answer.
_STORAGE_QUERIES = {("torch.distributed.fsdp._flat_param", "_same_storage_size")}
# Python functions of torch inlined as user code although their module breaks the graph:
# identity-like helpers of TorchScript (`annotate(type, value)` returns value).
_INLINED = {("torch.jit", "annotate"), ("torch.jit._script", "_unwrap_optional")}


def _named_kind(value: Any, names) -> Any:
    """names[(module, qualname)] for a function defined in torch's own files, else None."""
    if not isinstance(value, types.FunctionType):
        return None
    key = (getattr(value, "__module__", None), getattr(value, "__qualname__", None))
    if key not in names or _torch_file(value.__code__.co_filename) is None:
        return None
    return names[key] if isinstance(names, dict) else True


def classify_torch_callable(value: Any) -> VariableTracker | None:
    """The variable for a callable that ember treats specially, or None."""
    if value is in_graph.graph_break:
        return GraphBreakVariable()
    if value is _CHECKPOINT:  # (torch marks it not to be traced: ember captures it as a region)
        return CheckpointVariable(value)
    if getattr(value, "_ember_disabled", False) is True:  # (`is True`: torch.ops makes a namespace of any name)
        return DisabledFunctionVariable(value)
    if getattr(value, "_torchdynamo_disable", False) is True:
        # torch.compiler.disable; torch._dynamo also wraps optimizers' _init_group this way once
        # torch.compile has run in the process (its own optimizer support calls it eagerly).
        return DisabledFunctionVariable(value, "is torch.compiler.disable'd")
    # -- ember.allow_in_graph / disallow_in_graph / is_compiling (ember/in_graph.py) --
    if value is in_graph.is_compiling:
        return FixedAnswerVariable(value, True)
    registered = in_graph.verdict(value)
    if registered is True:
        return InGraphFunctionVariable(value)
    if registered is False:
        return DisabledFunctionVariable(value, "is disallowed in the graph (disallow_in_graph)")
    try:
        if value not in _FIXED_ANSWERS and getattr(value, "__name__", None) == "is_compiling" and \
                getattr(value, "__module__", "").startswith("torch._dynamo"):
            _FIXED_ANSWERS[value] = True  # torch._dynamo imported after ember
        if value in _FIXED_ANSWERS:
            return FixedAnswerVariable(value, _FIXED_ANSWERS[value])
    except TypeError:  # unhashable
        return None
    kind = _named_kind(value, _NAMED_FIXED_ANSWERS)
    if kind is not None:
        if kind == _ONCE:
            _FIXED_ANSWERS[value] = value()
            return FixedAnswerVariable(value, _FIXED_ANSWERS[value])
        return FixedAnswerVariable(value, None, guarded=True)
    if _named_kind(value, _INLINED):
        return None  # inlined as user code
    if _named_kind(value, _STORAGE_QUERIES):
        return StorageQueryVariable(value)
    if value in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
        return GradModeClassVariable(value)
    if value is _COND and _COND is not None:
        return CondVariable()
    if value is torch.from_numpy:
        from .numpy_arrays import FromNumpyVariable

        return FromNumpyVariable()
    if value is torch.vmap:
        from .vmap import VmapVariable

        return VmapVariable()
    if value is torch.func.grad or value is torch.func.grad_and_value:
        return GradTransformVariable(value)
    if value in _AUTOCAST_CLASSES:
        return AutocastClassVariable(value)
    if isinstance(value, types.FunctionType) and value.__code__.co_name == "decorate_context" \
            and value.__code__.co_filename.endswith(("torch/utils/_contextlib.py", "torch\\utils\\_contextlib.py")):
        # functools.wraps copied the user's name and module: recognise torch's wrapper by its code.
        return DecoratedContextFunctionVariable(value)
    if isinstance(value, types.FunctionType) and value.__code__.co_filename.endswith(
            ("torch/_compile.py", "torch\\_compile.py")):
        return DisabledFunctionVariable(value, "torch asks not to trace it (torch._disable_dynamo)")
    if value is torch.autograd.profiler.record_function:
        return ProfilerRecordClassVariable(value)
    if isinstance(value, type):
        return None
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, types.FunctionType):
        # Python code: a graph node only where torch's tensor-only files hold it; anything else
        # (torch's optimizers and schedulers, wrappers that functools.wraps renamed) is inlined.
        return TorchFunctionVariable(value) if _runs_in_graph(value, module) else None
    objclass = getattr(value, "__objclass__", None)
    if objclass is not None and objclass in (torch._C.TensorBase, torch.Tensor):
        return TorchFunctionVariable(value)
    if module == "torch" or module.startswith("torch."):
        if not callable(value) or isinstance(value, torch.nn.Module):
            return None
        if module.startswith("torch.nn.modules") or module.startswith("torch.utils._contextlib"):
            return None  # module methods are inlined as user code
        return TorchFunctionVariable(value)
    return None


_TORCH_ROOT = os.path.dirname(os.path.realpath(torch.__file__))


@functools.lru_cache(maxsize=None)
def _torch_file(filename: str) -> str | None:
    """'torch/nn/functional.py' for a file of the installed torch, None for any other file."""
    path = os.path.realpath(filename)
    if not path.startswith(_TORCH_ROOT + os.sep):
        return None
    return "torch/" + os.path.relpath(path, _TORCH_ROOT).replace(os.sep, "/")


def _runs_in_graph(function: types.FunctionType, module: str) -> bool:
    """A Python function of torch that becomes one graph node (see _GRAPH_FUNCTION_FILES)."""
    if function in _BREAKING or _in_breaking_module(module):
        return True  # a graph node that refuses to be one: the call breaks with its reason
    return _torch_file(function.__code__.co_filename) in _GRAPH_FUNCTION_FILES


class CallableValueVariable(VariableTracker):
    """A callable known at capture (a torch or numpy function): a constant whose attributes are read for real."""

    def __init__(self, function: Any, source=None) -> None:
        super().__init__(source)
        self.function = function

    def python_type(self) -> type:
        return type(self.function)

    def as_python_constant(self) -> Any:
        return self.function

    def static_value(self) -> Any:
        return self.function

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return wrap_static(tx, real_getattr(self.function, name))


class TorchFunctionVariable(CallableValueVariable):
    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        function = self.function
        reason = _BREAKING.get(function)
        if reason is not None:
            raise Unsupported(reason)
        module = getattr(function, "__module__", "") or ""
        if _in_breaking_module(module):
            raise Unsupported(f"{module}.{getattr(function, '__name__', function)} is not captured")
        name = getattr(function, "__name__", "") or ""
        if name in ("_set_grad_enabled", "set_grad_enabled"):
            raise Unsupported("direct grad-mode switch")
        if name.startswith(_GLOBAL_SETTER_PREFIXES):
            # Run at capture time it would change the setting before the program does (and a
            # node that returns None would then be dropped): it runs eagerly instead.
            raise Unsupported(f"{name} changes global state")
        if name.startswith("_foreach_"):
            from .foreach import foreach_with_tensor_scalar

            result = foreach_with_tensor_scalar(tx, function, args, kwargs)  # (a 0-d tensor as a Scalar)
            if result is not None:
                return result
        result = tx.graph.call(tx, "call_function", function, args, kwargs)
        return _same_object_as_argument(result, [*args, *kwargs.values()])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self.function, '__qualname__', self.function)})"


class InGraphFunctionVariable(TorchFunctionVariable):
    """A user function allowed in the graph (ember/in_graph.py): every call is one opaque node."""

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return tx.graph.call(tx, "call_function", self.function, args, kwargs)


class FixedAnswerVariable(VariableTracker):
    """A function whose answer during capture is a constant.  `guarded`: the answer is what the
    function returns now (it takes no arguments), and the capture guards that it still does."""

    def __init__(self, function: Any, answer: Any, guarded: bool = False) -> None:
        super().__init__()
        self.function = function
        self.answer = answer
        self.guarded = guarded

    def static_value(self) -> Any:
        return self.function

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not self.guarded:
            return constant(self.answer)
        if args or kwargs:
            raise Unsupported(f"{self.function.__qualname__} with arguments")
        answer = self.function()
        if type(answer) is not bool:
            raise Unsupported(f"{self.function.__qualname__}() returned {type(answer).__name__}, not a bool")
        call = f"{tx.graph.guards.ref(self.function)}()"
        return _guarded_answer(tx, call, f"{self.function.__module__}.{self.function.__qualname__}()", answer)


def _guarded_answer(tx, call: str, label: str, answer: bool) -> VariableTracker:
    """`answer`, with a guard that the expression `call` still gives it."""
    tx.graph.guards.add(f"{call} is {answer}", f"{label} is {answer}", Check("value", call, answer, label))
    return constant(answer)


class StorageQueryVariable(VariableTracker):
    """`_same_storage_size(t, n)` of FSDP: a fact about the storage of graph input `t` (with
    constant other arguments), answered from the real input and guarded on the answer."""

    def __init__(self, function: Any) -> None:
        super().__init__()
        self.function = function

    def static_value(self) -> Any:
        return self.function

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .tensor import TensorVariable

        name = f"{self.function.__module__}.{self.function.__qualname__}"
        if kwargs or not args or not isinstance(args[0], TensorVariable) or args[0].real_tensor is None \
                or args[0].source is None or not all(arg.is_python_constant() for arg in args[1:]):
            raise Unsupported(f"{name} of a tensor that is not a graph input, or of non-constants")
        rest = [arg.as_python_constant() for arg in args[1:]]
        if not all(type(item) in (int, bool) for item in rest):
            raise Unsupported(f"{name} with arguments other than ints")
        answer = self.function(args[0].real_tensor, *rest)
        if type(answer) is not bool:
            raise Unsupported(f"{name} returned {type(answer).__name__}, not a bool")
        call = f"{tx.graph.guards.ref(self.function)}({', '.join([args[0].source.expr(), *map(repr, rest)])})"
        return _guarded_answer(tx, call, call, answer)


class GraphBreakVariable(VariableTracker):
    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported("ember.graph_break()")


class DisabledFunctionVariable(VariableTracker):
    def __init__(self, function: Any, why: str = "is ember.disable'd") -> None:
        super().__init__()
        self.function = function
        self.why = why

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"{getattr(self.function, '__qualname__', self.function)} {self.why}")


# -- grad mode ----------------------------------------------------------------------------------
def set_grad_mode(tx, enabled: bool) -> None:
    """Switch grad mode in the graph (so the compiled code switches too) and during capture."""
    if torch.is_grad_enabled() == enabled:
        return
    node = tx.graph.graph.call_function(torch._C._set_grad_enabled, (enabled,))
    node.meta["stack_trace"] = tx.stack_trace()
    torch._C._set_grad_enabled(enabled)


class _ContextClassVariable(VariableTracker):
    """A context manager class itself (not an instance): calling it makes the instance."""

    def __init__(self, cls: Any) -> None:
        super().__init__()
        self.cls = cls

    def python_type(self) -> type:
        return type

    def static_value(self) -> Any:
        return self.cls


class GradModeClassVariable(_ContextClassVariable):
    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.cls in (torch.no_grad, torch.enable_grad):
            target = self.cls is torch.enable_grad
            if kwargs or len(args) > 1:
                raise Unsupported(f"{self.cls.__name__} with these arguments")
            if args:  # `@torch.no_grad` without parentheses: the decorated function
                return GradModeFunctionVariable(target, args[0])
            return GradModeVariable(target)
        mode = (args[0] if args else kwargs["mode"]).as_python_constant()
        # set_grad_enabled acts at construction; as a context manager it restores on exit.
        variable = GradModeVariable(bool(mode), prior=torch.is_grad_enabled())
        set_grad_mode(tx, bool(mode))
        return variable


class GradModeVariable(VariableTracker):
    def __init__(self, target: bool, prior: bool | None = None) -> None:
        super().__init__()
        self.target = target
        self.prior = prior
        self.entered_early = prior is not None

    def python_type(self) -> type:
        return {True: torch.enable_grad, False: torch.no_grad}[self.target]

    def enter(self, tx) -> VariableTracker:
        if not self.entered_early:
            self.prior = torch.is_grad_enabled()
        set_grad_mode(tx, self.target)
        return constant(None)

    def exit(self, tx) -> VariableTracker:
        set_grad_mode(tx, self.prior)
        return constant(None)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        """`@torch.no_grad()` as a decorator: the decorated function.  (set_grad_enabled, which
        switched the mode when it was made, switches it back when it decorates: not captured.)"""
        if self.entered_early or kwargs or len(args) != 1:
            raise Unsupported("call of a torch.set_grad_enabled object" if self.entered_early
                              else "call of a grad mode object with these arguments")
        return GradModeFunctionVariable(self.target, args[0])

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        if name == "clone":
            return GradModeVariable(self.target)
        raise Unsupported(f"grad mode object method {name}")


class GradModeFunctionVariable(VariableTracker):
    """A Python function decorated with torch.no_grad() / enable_grad() in the compiled code: each
    call runs it inlined inside that grad mode.  Rebuilt after the graph by decorating it again."""

    def __init__(self, target: bool, wrapped: VariableTracker) -> None:
        super().__init__()
        from .functions import BaseFunctionVariable

        if not isinstance(wrapped, BaseFunctionVariable):
            raise Unsupported(f"decorating {wrapped} with a grad mode")
        if wrapped.get_code().co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            raise Unsupported("a generator decorated with a grad mode (the mode applies per resumption)")
        self.target = target
        self.wrapped = wrapped

    def python_type(self) -> type:
        return types.FunctionType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        manager = GradModeVariable(self.target)
        manager.enter(tx)
        try:
            return self.wrapped.call_function(tx, args, kwargs)
        finally:
            manager.exit(tx)  # (also on an exception: the with-block of torch's wrapper restores the mode)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__wrapped__":
            return self.wrapped
        if name in functools.WRAPPER_ASSIGNMENTS:  # copied from the function by functools.wraps
            return self.wrapped.var_getattr(tx, name)
        raise Unsupported(f"attribute {name} of a function decorated with a grad mode")

    def contained_values(self) -> list:
        return [self.wrapped]

    def reconstruct_expr(self, codegen) -> str:
        decorator = torch.enable_grad if self.target else torch.no_grad
        return f"{codegen.ref(decorator)}()({codegen.reconstruct(self.wrapped)})"


class NullContextVariable(VariableTracker):
    def __init__(self, value: VariableTracker | None = None) -> None:
        super().__init__()
        self.value = value or constant(None)

    def enter(self, tx) -> VariableTracker:
        return self.value

    def exit(self, tx) -> VariableTracker:
        return constant(None)


class ProfilerRecordClassVariable(_ContextClassVariable):
    """`torch.autograd.profiler.record_function(name)`: a profiler range label.  Compiled code
    has no Python-level ranges (as with torch.compile), so the block runs with no label."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return NullContextVariable()


class DecoratedContextFunctionVariable(VariableTracker):
    """A function decorated with @torch.no_grad() / @torch.enable_grad()."""

    def __init__(self, wrapper: types.FunctionType) -> None:
        super().__init__()
        self.wrapper = wrapper
        cells = dict(zip(wrapper.__code__.co_freevars, wrapper.__closure__ or ()))
        self.func = cells["func"].cell_contents
        factory = cells["ctx_factory"].cell_contents
        self.ctx = getattr(factory, "__self__", None)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        ctx = self.ctx
        if not isinstance(ctx, (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)):
            raise Unsupported(f"function decorated with {type(ctx).__name__}")
        manager = GradModeVariable(bool(ctx.mode) if isinstance(ctx, torch.set_grad_enabled)
                                   else isinstance(ctx, torch.enable_grad))
        manager.enter(tx)
        result = wrap_static(tx, self.func).call_function(tx, args, kwargs)
        manager.exit(tx)
        return result


# -- autocast -----------------------------------------------------------------------------------
_AUTOCAST_CLASSES = {torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast, torch.cuda.amp.autocast}


def enter_autocast(device_type: str, dtype, enabled: bool, cache_enabled: bool):
    """Graph-side autocast entry (what an autocast `with` block turns into in a graph)."""
    mode = torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
    mode.__enter__()
    return mode


def exit_autocast(mode) -> None:
    mode.__exit__(None, None, None)


class AutocastClassVariable(VariableTracker):
    def __init__(self, cls) -> None:
        super().__init__()
        self.cls = cls

    def static_value(self):
        return self.cls

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not all_constant(args, kwargs):
            raise Unsupported("autocast with non-constant arguments")
        const_args, const_kwargs = constant_args(args, kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = self.cls(*const_args, **const_kwargs)
        return AutocastVariable(real.device, real.fast_dtype, real._enabled, real._cache_enabled)


class AutocastVariable(VariableTracker):
    def __init__(self, device_type: str, dtype, enabled: bool, cache_enabled) -> None:
        super().__init__()
        self.args = (device_type, dtype, enabled, cache_enabled)
        self.node = None
        self.live = None  # the real autocast entered during capture

    def python_type(self) -> type:
        return torch.autocast

    def enter(self, tx) -> VariableTracker:
        graph = tx.graph
        self.node = graph.graph.call_function(enter_autocast, self.args)
        self.node.meta["stack_trace"] = tx.stack_trace()
        self.live = enter_autocast(*self.args)
        graph.entered_contexts.append(self.live)
        return constant(None)

    def exit(self, tx) -> VariableTracker:
        graph = tx.graph
        node = graph.graph.call_function(exit_autocast, (self.node,))
        node.meta["stack_trace"] = tx.stack_trace()
        exit_autocast(self.live)
        graph.entered_contexts.remove(self.live)
        return constant(None)


def _same_object_as_argument(result: VariableTracker, arguments: list) -> VariableTracker:
    """An op that returns one of its tensor arguments (`torch.relu_(x)`, `torch.Tensor.add_(x, 1)`,
    `torch.add(a, b, out=c)`) returns that argument's variable, as the method form does: `is`, set
    and dict lookups then answer as in eager.  The fake result is the argument's own fake then."""
    from .tensor import TensorVariable

    if not isinstance(result, TensorVariable):
        return result
    for argument in arguments:
        if isinstance(argument, TensorVariable) and argument.example is result.example:
            argument.node = result.node
            return argument
    return result
