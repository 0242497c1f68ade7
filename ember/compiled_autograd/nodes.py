"""How each kind of autograd node is traced into the captured graph (rules by node kind).

    built-in (C++)        the node itself is called on the traced gradients; its saved tensors
                          (`_saved_self`, `_saved_result`, lists such as `_saved_indices`) become
                          inputs when its formula reads them
    ember's compiled      the region's backward FX graph runs op by op, its nodes named `aot{k}_...`
      region              (k: the region), its saved values inputs
    Python Function       its `backward` runs on the traced gradients; `ctx.saved_tensors` are inputs
    module backward hooks the module's pre-hooks and hooks as calls (engine.py `_module_hooks`)
AccumulateGrad nodes are the engine's (engine.py): the gradient into `.grad`, with the leaf's hooks.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .tracer import BackwardTracer, CannotCapture, InputSource
from .walk import describe, saved_names


def kind_of(node) -> str:
    name = type(node).__name__
    if name == "AccumulateGrad":
        return "accumulate"
    if isinstance(node, torch.autograd.function.BackwardCFunction):
        forward = getattr(node, "_forward_cls", None)
        if getattr(forward, "ember_traceable_backward", None) is not None:
            return "ember"
        if name == "BackwardHookFunctionBackward":
            return "module_hooks"
        return "python"
    return "builtin"


def node_key(node, kind: str, unpacked: dict | None = None) -> tuple:
    """What the node's captured ops depend on besides its gradients: its saved values (tensors
    by metadata, other values as they are) and, for Python Functions, ctx's plain attributes.
    `unpacked`: ctx.saved_tensors by node, filled here (unpacking them is the costly part, and
    the backward's inputs are fetched from them next)."""
    if kind == "builtin":
        return tuple((name, describe(_saved(node, name))) for name in saved_names(node))
    if kind not in ("ember", "python"):
        return ()
    unpacked = {} if unpacked is None else unpacked
    if node not in unpacked:
        unpacked[node] = _saved(node)
    tensors = tuple(describe(t) for t in unpacked[node])
    if kind == "ember":  # (its backward reads the saved values, saved_other and tangent_shapes)
        return tensors, describe(getattr(node, "saved_other", None)), \
            describe(getattr(node, "tangent_shapes", None)), describe(getattr(node, "saved_layout", None))
    plain = tuple(sorted((k, describe(v)) for k, v in vars(node).items() if not k.startswith("_")
                         and not isinstance(v, torch.Tensor)))
    return tensors, plain


def _saved(node, name: str | None = None):
    """Saved attribute `name` of a built-in node, or (no name) a Function's ctx.saved_tensors."""
    try:
        with _disable_current_modes():  # (unpacking may run ops: not the backward's)
            return getattr(node, name) if name is not None else tuple(node.saved_tensors)
    except RuntimeError as error:  # ("Trying to backward through the graph a second time ...")
        raise CannotCapture(f"{type(node).__name__}'s saved values are gone ({str(error).splitlines()[0]})") from None


def _matcher(tracer: BackwardTracer, candidates: list, label: str):
    """Resolves a tensor the node's backward reads to the saved value it is: by identity, else by
    memory and metadata (a saved output is a fresh tensor object at each unpacking)."""
    made: dict[InputSource, torch.fx.Node] = {}

    def resolve(tensor: torch.Tensor):
        for candidate, source in candidates:
            if candidate is tensor or (candidate.data_ptr() == tensor.data_ptr() and candidate.shape == tensor.shape
                                       and candidate.stride() == tensor.stride() and candidate.dtype == tensor.dtype
                                       and candidate.device == tensor.device):
                if source not in made:
                    name = "_".join(part for part in (label, source.name.lstrip("_"),
                                                      str(source.item) if source.item >= 0 else "") if part)
                    made[source] = tracer.placeholder(candidate, source, name)
                return made[source]
        return None

    return resolve


def _call(tracer: BackwardTracer, candidates: list, label: str, call, failed: str | None) -> tuple:
    """`call()` under the tracer, tensors the node's backward reads resolved among `candidates`;
    an error other than CannotCapture becomes one (`failed`: what the message calls the call;
    None: errors pass as they are)."""
    tracer.resolve = _matcher(tracer, candidates, label)
    try:
        with torch.no_grad():
            results = call()
    except Exception as error:  # noqa: BLE001 - the engine runs it and reports its own error
        if failed is None or isinstance(error, CannotCapture):
            raise
        raise CannotCapture(f"{failed} ({type(error).__name__}: {error})") from None
    finally:
        tracer.resolve = lambda tensor: None
    return results if isinstance(results, tuple) else (results,)


def trace_builtin(tracer: BackwardTracer, node, position: int, grads: list) -> tuple:
    candidates = []
    for name in saved_names(node):
        value = _saved(node, name)
        if isinstance(value, torch.Tensor):
            candidates.append((value, InputSource("saved", position, name)))
        elif isinstance(value, (list, tuple)):
            candidates += [(item, InputSource("saved", position, name, k)) for k, item in enumerate(value)
                           if isinstance(item, torch.Tensor)]
    return _call(tracer, candidates, f"n{position}", lambda: node(*grads),
                 f"calling {type(node).__name__} failed")


def trace_python(tracer: BackwardTracer, node, position: int, grads: list) -> tuple:
    candidates = [(tensor, InputSource("ctx", position, "", k)) for k, tensor in enumerate(_saved(node))
                  if isinstance(tensor, torch.Tensor)]
    if any(isinstance(value, torch.Tensor) for value in vars(node).values()):
        raise CannotCapture(f"{type(node).__name__} keeps tensors on ctx outside save_for_backward")
    return _call(tracer, candidates, f"n{position}_saved", lambda: node.apply(*grads),
                 f"{type(node).__name__}.backward failed while tracing")


def trace_ember(tracer: BackwardTracer, node, position: int, grads: list) -> tuple:
    """ember's compiled region: its backward graph's ops, inlined (the compiled kernels would be
    opaque to the tracer)."""
    candidates = [(tensor, InputSource("ctx", position, "", k)) for k, tensor in enumerate(_saved(node))]
    return _call(tracer, candidates, f"n{position}_saved",
                 lambda: tuple(node._forward_cls.ember_traceable_backward(node, tracer, *grads)), None)


RULES = {"builtin": trace_builtin, "python": trace_python, "ember": trace_ember}
