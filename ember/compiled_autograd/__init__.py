"""Compiled autograd: the whole backward pass captured when it runs, hooks included, as one
graph, and compiled (seed 002, ember's take on torch's compiled autograd).

    with ember.compiled_autograd.enable(ember.compile(backend="ember")):
        loss.backward()            # one captured graph, whatever graph breaks the forward had

    ember.config.compiled_autograd = True     # backward calls inside ember.compile'd functions
    ember.compile(lambda: loss.backward())()

A backward under it walks the autograd graph from the roots and traces each node's backward
(built-in nodes' ATen ops, ember's regions inlined as `aot{k}_` ops, Python Functions), the
tensor hooks (as calls) and the accumulation into `.grad` into one FX graph, then compiles and
runs it (engine.py).  Graphs are cached by the autograd graph's structure and metadata; sizes that
change become symbols (dynamic.py); `EMBER_LOGS=compiled_autograd` prints each capture's reason
and graph.  What cannot be captured (retain_grad, create_graph, `inputs=` that are not leaves, a
live hook registered on a node directly, whose node Python cannot see) runs in autograd's own
engine, the reason logged.

Not done: saved tensors stay until the graph is freed (only autograd's C++ side can free them
after a backward); a second backward through them still raises eager's error.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

import torch
import torch.utils.hooks

from .. import config
from ..capture.runtime import enclosing_context
from .engine import CACHE, DYNAMIC, CompiledAutograd, graph_text
from .walk import note_node_hooks
from .tracer import call_hook, call_module_hooks, call_module_pre_hooks

_state = threading.local()
_ORIGINAL_BACKWARD = torch.autograd.backward
_by_compiler: dict[str, CompiledAutograd] = {}


def _stack() -> list:
    return _state.__dict__.setdefault("stack", [])


@contextlib.contextmanager
def enable(compiler_fn: Callable | None = None) -> Iterator[CompiledAutograd]:
    """Backward calls in this block (`.backward()`, `torch.autograd.backward`) run as captured
    graphs compiled by `compiler_fn` (a function of an FX GraphModule that returns a callable,
    such as `ember.compile(backend="ember")`; None runs the graph as it is).  Yields the
    CompiledAutograd, whose `stats` count captures, cache hits and fallbacks."""
    engine = CompiledAutograd(compiler_fn)
    _stack().append(engine)
    try:
        yield engine
    finally:
        _stack().pop()


def reset() -> None:
    """Forgets every captured backward (ember.reset() calls this)."""
    CACHE.clear()
    DYNAMIC.clear()
    _by_compiler.clear()


def active() -> CompiledAutograd | None:
    stack = _stack()
    if stack:
        return stack[-1]
    if config.get("compiled_autograd"):
        context = enclosing_context()
        if context is not None:
            return _config_engine(context)
    return None


def _config_engine(context) -> CompiledAutograd:
    """The engine `ember.config.compiled_autograd` uses inside a compiled call: graphs compiled
    with the enclosing call's backend (one engine per backend)."""
    backend = context.backend_name or "ember"
    if backend not in _by_compiler:
        _by_compiler[backend] = CompiledAutograd(context.graph_compiler())
    return _by_compiler[backend]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """torch.autograd.backward, captured where compiled autograd is on (see the module)."""
    engine = active()
    if engine is not None and any(_traced(t) for t in ([tensors] if isinstance(tensors, torch.Tensor) else tensors)):
        engine = None  # (a backward during ember's own tracing)
    targets = None
    if inputs is not None:
        targets = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
        if not targets or not all(isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad for t in targets) \
                or len({id(t) for t in targets}) != len(targets):
            targets = None
            if engine is not None:
                engine._fallback("backward(inputs=...) with an input that is not a distinct leaf requiring grad")
            engine = None
    if engine is None or create_graph or grad_variables is not None:
        if engine is not None:
            engine._fallback("create_graph or grad_variables given")
        return _ORIGINAL_BACKWARD(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
    roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    given = _given(grad_tensors, roots)
    wrong = any(not root.requires_grad for root in roots) or \
        any(grad is not None and not isinstance(grad, torch.Tensor) for grad in given)
    grads = None if wrong else _root_grads(roots, given)
    if grads is None:
        return _ORIGINAL_BACKWARD(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
    with torch.no_grad():
        if targets is None:
            if engine.backward(roots, grads, retain_graph=bool(retain_graph)):
                return None
        else:  # backward(inputs=leaves): their gradients, as grad() computes them, accumulated here
            results = engine.backward(roots, grads, inputs=targets, retain_graph=bool(retain_graph))
            if results is not False:
                _accumulate_into(targets, results)
                return None
    return _ORIGINAL_BACKWARD(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)


def _given(grads, roots: list) -> list:
    """The root gradients given, one per root (a lone None for several roots: None for each)."""
    given = [grads] if isinstance(grads, torch.Tensor) or grads is None else list(grads)
    return [None] * len(roots) if len(given) == 1 and len(roots) > 1 and given[0] is None else given


def _root_grads(roots: list, given: list) -> list | None:
    """The root gradients, detached (ones for a one-element root given None); None where
    autograd's engine should run (it raises its own error)."""
    if len(given) != len(roots) or any(g is None and r.numel() != 1 for g, r in zip(given, roots)):
        return None
    return [torch.ones_like(r, memory_format=torch.preserve_format) if g is None else g.detach()
            for g, r in zip(given, roots)]


def _accumulate_into(leaves: list, grads: list) -> None:
    """As AccumulateGrad: a new `.grad` (a copy in the leaf's layout where the gradient is not
    one of its own), or added in place to the existing one; then post-accumulate-grad hooks."""
    for leaf, grad in zip(leaves, grads):
        if grad is None:
            continue
        if leaf.grad is None:
            leaf.grad = torch.empty_like(leaf).copy_(grad)
        else:
            leaf.grad.add_(grad)
        for hook in (getattr(leaf, "_post_accumulate_grad_hooks", None) or {}).values():
            hook(leaf)


_ORIGINAL_GRAD = torch.autograd.grad


def _traced(tensor) -> bool:
    """A fake tensor (ember tracing a joint graph): autograd's engine handles it."""
    return isinstance(tensor, torch._subclasses.FakeTensor)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """torch.autograd.grad, captured where compiled autograd is on (see the module)."""
    engine = active()
    arguments = (outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                 is_grads_batched, materialize_grads)
    roots = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    targets = [inputs] if isinstance(inputs, torch.Tensor) else \
        list(inputs) if isinstance(inputs, (list, tuple)) else None
    if engine is None or create_graph or is_grads_batched or targets is None or \
            any(not isinstance(t, torch.Tensor) or not t.requires_grad or _traced(t) for t in [*roots, *targets]):
        return _ORIGINAL_GRAD(*arguments)  # (ember's own tracing of a joint graph lands here: fakes)
    grads = _root_grads(roots, _given(grad_outputs, roots))
    if grads is None:
        return _ORIGINAL_GRAD(*arguments)
    with torch.no_grad():
        results = engine.backward(roots, grads, inputs=targets,
                                  retain_graph=bool(create_graph if retain_graph is None else retain_graph))
    if results is False:
        return _ORIGINAL_GRAD(*arguments)
    if any(result is None for result in results):
        if materialize_grads:
            results = [torch.zeros_like(t) if r is None else r for r, t in zip(results, targets)]
        elif not allow_unused:  # (autograd's own error, from its own engine)
            return _ORIGINAL_GRAD(*arguments)
    return tuple(results)


# -- what autograd's Python API does not show of a node: noted when it is registered ---------------
_ORIGINAL_REGISTER_HOOK = torch.Tensor.register_hook
_ORIGINAL_RETAIN_GRAD = torch.Tensor.retain_grad


def _register_hook(self, hook):
    handle = _ORIGINAL_REGISTER_HOOK(self, hook)
    if self.grad_fn is not None and self._backward_hooks is not None:
        self.grad_fn.metadata.setdefault("ember_tensor_hooks", {})[self.output_nr] = self._backward_hooks
    return handle


def _retain_grad(self):
    _ORIGINAL_RETAIN_GRAD(self)
    if self.grad_fn is not None:
        self.grad_fn.metadata["ember_retains_grad"] = True


# (a torch without it: module backward hooks are then not seen, and such backwards fall back)
_ORIGINAL_APPLY_ON_TENSORS = getattr(getattr(torch.utils.hooks, "BackwardHook", None), "_apply_on_tensors", None)


def _apply_on_tensors(self, fn, args):
    """nn.Module full backward hooks: their BackwardHookFunctionBackward node noted, with the
    BackwardHook and which side of the module it sits on (the hooks it registers on the node
    cannot be listed from Python)."""
    side = "input" if "setup_input_hook" in getattr(fn, "__qualname__", "") else "output"

    def noting(grad_fn):
        _SETTING_UP_MODULE_HOOKS.append(True)
        try:
            fn(grad_fn)  # (registers BackwardHook's own node hook, which ember traces: not noted)
        finally:
            _SETTING_UP_MODULE_HOOKS.pop()
        grad_fn.metadata.setdefault("ember_module_hooks", []).append((side, self))

    return _ORIGINAL_APPLY_ON_TENSORS(self, noting, args)


_ORIGINAL_NODE_REGISTER = torch.autograd.function._HookMixin.__dict__.get("_register_hook")
_SETTING_UP_MODULE_HOOKS: list = []


def _register_node_hook(backward_hooks, hook):
    """What every node's register_hook and register_prehook call (from C++) to keep a hook: the
    dictionary is noted (walk.note_node_hooks), so that a backward while it holds hooks falls back."""
    result = _ORIGINAL_NODE_REGISTER.__func__(backward_hooks, hook)
    if not _SETTING_UP_MODULE_HOOKS and isinstance(result, tuple) and result and isinstance(result[0], dict):
        note_node_hooks(result[0])
    return result


def install() -> None:
    from ..capture.translator import TRACEABLE_EMBER_CODE

    for function in (call_hook, call_module_hooks, call_module_pre_hooks):
        TRACEABLE_EMBER_CODE.add(function.__code__)  # (capture inlines it, and the user's hook in it)
    torch.autograd.backward = backward
    torch.autograd.grad = grad
    if _ORIGINAL_APPLY_ON_TENSORS is not None:
        torch.utils.hooks.BackwardHook._apply_on_tensors = _apply_on_tensors
    torch.Tensor.register_hook = _register_hook
    torch.Tensor.retain_grad = _retain_grad
    if isinstance(_ORIGINAL_NODE_REGISTER, staticmethod):
        torch.autograd.function._HookMixin._register_hook = staticmethod(_register_node_hook)


install()

__all__ = ["enable", "active", "reset", "backward", "grad", "call_hook", "graph_text", "CompiledAutograd"]
