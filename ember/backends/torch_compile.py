"""`torch.compile(model, backend="ember")`: ember as a backend of torch's own frontend (declared as
a `torch_dynamo_backends` entry point in pyproject.toml): only ember's backend stages run.

With dynamic shapes Dynamo's graphs take each size symbol as an int input of its own, where
ember's read sizes from the tensors: a symbol that is some input tensor's size becomes
`aten.sym_size.int(tensor, dim)` and the int input is dropped; a graph with an int input that is
no tensor's size runs as Dynamo captured it (logged on EMBER_LOGS=fallbacks).
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import logs

log_fallbacks = logs.get("fallbacks")


def ember(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """torch.compile's backend signature: (GraphModule, example inputs) -> callable."""
    from ..debug_dir import frame
    from . import ember_backend

    keep = [index for index, value in enumerate(example_inputs) if not _is_int(value)]
    with frame(name="torch.compile graph"):  # (EMBER_DEBUG_DIR's report: one folder per graph)
        if len(keep) == len(example_inputs):
            return ember_backend(gm, list(example_inputs))
        own = _copy(gm)  # (Dynamo reads its graph's inputs again after the backend returns)
        if not _sizes_from_tensors(own):
            log_fallbacks.debug("torch.compile graph with int inputs that are no tensor's size: running it as captured")
            return gm.forward
        compiled = ember_backend(own, [example_inputs[index] for index in keep])

    def call(*args):
        return compiled(*[args[index] for index in keep])

    return call


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    output = graph.graph_copy(gm.graph, {})
    graph.output(output)
    return torch.fx.GraphModule(gm, graph)


def _is_int(value) -> bool:
    return isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool)


def _sizes_from_tensors(gm: torch.fx.GraphModule) -> bool:
    """Rewrite `gm` so that no int placeholder remains: unused ones are dropped, a size symbol
    is read from a tensor input that has it.  False (gm unchanged) where one is no tensor's size."""
    values = {node: node.meta.get("example_value", node.meta.get("val"))
              for node in gm.graph.nodes if node.op == "placeholder"}
    tensor_sizes = {}
    for node, value in values.items():
        if isinstance(value, torch.Tensor):
            for dim, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    tensor_sizes.setdefault(size.node.expr, (node, dim))
    plan = []
    for node, value in values.items():
        if isinstance(value, torch.Tensor):
            continue
        if not _is_int(value):
            return False  # (no example value, or another kind of input)
        if not node.users:
            plan.append((node, None))
            continue
        source = tensor_sizes.get(value.node.expr) if isinstance(value, torch.SymInt) else None
        if source is None:
            return False
        plan.append((node, source))
    body = next(node for node in gm.graph.nodes if node.op != "placeholder")
    for node, source in plan:
        if source is not None:
            with gm.graph.inserting_before(body):
                size = gm.graph.call_function(torch.ops.aten.sym_size.int, source)
            size.meta.update(node.meta)
            node.replace_all_uses_with(size)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return True
