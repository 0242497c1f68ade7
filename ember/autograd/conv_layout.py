"""Convolutions in channels-last memory order, before the captured graph is traced.

cuDNN's fast convolution kernels work on NHWC tensors; given NCHW ones it transposes the input
and the output for every call (a quarter of ResNet-50's inference step on an H100).  This pass
asks for each 2-D convolution's input and weight (on the listed devices) in channels-last order,
which then carries through the graph as in eager (pointwise ops keep their inputs' order,
convolution_backward returns its gradients so).  Graph outputs still leave in the program's
strides (`in_strides`), and leaves' gradients in the leaves' strides (autograd/joint.py).
"""
from __future__ import annotations

import torch

from .. import logs
from ..eager.check import storage_key
from .cse import nodes_in
from .view_geometry import dense_order_of, has_symbols, inverse_permutation

log_fallbacks = logs.get("fallbacks")

_CONV2D = {torch.conv2d, torch.nn.functional.conv2d}
# Uses whose result depends on memory order, not only on values: under channels-last they
# would fail (`view`) or answer otherwise (`stride`) than in the program as written.
_STRIDE_SENSITIVE = {"view", "view_as", "stride", "is_contiguous", "data_ptr", "storage_offset", "untyped_storage",
                     "as_strided", "unfold", "set_", "resize_", "resize_as_"}
# Uses that return a view or a copy depending on memory order: only a later in-place write can
# tell which (through the view it reaches the source, through a copy it does not).
_ALIAS_SENSITIVE = {"reshape", "reshape_as", "flatten", "contiguous"}
_NAMES = {0: "input", 1: "weight"}  # argument position -> keyword


def channels_last_convolutions(gm: torch.fx.GraphModule, devices: tuple[str, ...]) -> int:
    """Inserts channels-last conversions before 2-D convolutions' inputs and weights on
    `devices`; returns how many convolutions it changed."""
    convolutions = {node for node in gm.graph.nodes if node.op == "call_function" and node.target in _CONV2D}
    if not any(_device_of(node) in devices for node in convolutions):
        return 0
    reason = _order_sensitive_use(gm, convolutions)
    if reason is not None:
        log_fallbacks.debug("convolutions left in the program's memory order: %s", reason)
        return 0
    changed = 0
    for node in list(gm.graph.nodes):
        if node not in convolutions:
            continue
        touched = False
        for position, name in _NAMES.items():
            in_kwargs = name in node.kwargs
            arg = node.kwargs[name] if in_kwargs else node.args[position] if len(node.args) > position else None
            value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
            if not isinstance(value, torch.Tensor) or value.dim() != 4 or value.device.type not in devices \
                    or has_symbols(value):
                continue
            with gm.graph.inserting_before(node):
                copy = gm.graph.call_method("contiguous", (arg,), {"memory_format": torch.channels_last})
            copy.meta["example_value"] = value.contiguous(memory_format=torch.channels_last)
            for key in ("stack_trace", "source_fn"):
                if key in node.meta:
                    copy.meta[key] = node.meta[key]
            if in_kwargs:
                node.kwargs = {**node.kwargs, name: copy}
            else:
                node.args = (*node.args[:position], copy, *node.args[position + 1:])
            touched = True
        changed += touched
    if changed:
        _outputs_in_traced_strides(gm)
        gm.recompile()
    return changed


def _order_sensitive_use(gm: torch.fx.GraphModule, convolutions: set) -> str | None:
    """Why a convolution's result, or anything computed from it, must keep the program's memory
    order (a use whose result depends on it), or None."""
    derived: set = set()
    mutations: list[int] = []
    for position, node in enumerate(gm.graph.nodes):
        if node in convolutions or any(arg in derived for arg in node.all_input_nodes):
            derived.add(node)
            if _writes_in_place(node):
                mutations.append(position)
    for position, node in enumerate(gm.graph.nodes):
        if node in convolutions or not any(arg in derived for arg in node.all_input_nodes):
            continue
        name = _name(node)
        if name in _STRIDE_SENSITIVE:
            return f"{name} of a value computed from a convolution"
        if name in _ALIAS_SENSITIVE and any(later > position for later in mutations):
            return f"{name} of a value computed from a convolution, written in place later"
    return _outputs_sharing_memory(gm, derived)


def _outputs_sharing_memory(gm: torch.fx.GraphModule, derived: set) -> str | None:
    """Outputs computed from a convolution that share memory with another output (two views of
    one result): each leaves through its own copy to the program's strides, which would give
    them memory of their own where eager's share it (`v.squeeze()` twice)."""
    output = next(node for node in gm.graph.nodes if node.op == "output")
    seen: dict = {}
    for arg in nodes_in(output.args):
        value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor):
            continue
        key = storage_key(value)
        if key in seen and (arg in derived or seen[key] in derived) and arg is not seen[key]:
            return "two outputs computed from a convolution share memory"
        seen.setdefault(key, arg)
    return None


def _name(node: torch.fx.Node) -> str:
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        return getattr(node.target, "__name__", "")
    return ""


def _writes_in_place(node: torch.fx.Node) -> bool:
    name = _name(node)
    return (name.endswith("_") and not name.startswith("_")) or name in ("setitem", "__setitem__") or \
        node.kwargs.get("inplace") is True


def _outputs_in_traced_strides(gm: torch.fx.GraphModule) -> None:
    """Each tensor output keeps the strides the captured program gave it (a caller sees eager's
    layout; inside, the copy fuses with what computes the output)."""
    output = next(node for node in gm.graph.nodes if node.op == "output")

    def keep(arg):
        value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided or has_symbols(value) or \
                dense_order_of(tuple(value.shape), tuple(value.stride())) is None:
            return arg
        with gm.graph.inserting_before(output):
            kept = gm.graph.call_function(in_strides, (arg, tuple(value.stride())))
        kept.meta["example_value"] = value
        return kept

    output.args = torch.fx.node.map_arg(output.args, keep)


def in_strides(tensor: torch.Tensor, stride: tuple) -> torch.Tensor:
    """`tensor`, or a copy of it with `stride` (dense) where its strides differ from those (in a
    dimension longer than 1)."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != len(stride) or all(
            a == b for a, b, n in zip(tensor.stride(), stride, tensor.shape) if n != 1):
        return tensor
    order = dense_order_of(tuple(tensor.shape), stride)
    return tensor.permute(order).contiguous().permute(inverse_permutation(order))


def _device_of(node: torch.fx.Node) -> str | None:
    arg = node.kwargs.get("input", node.args[0] if node.args else None)
    value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
    return value.device.type if isinstance(value, torch.Tensor) else None
