"""Shared checks for captured subgraphs (torch.cond, torch.vmap, torch.func.grad): the compiled
graph holds the computation, and ember's AOT tracer traced it (no eager fallback)."""
from __future__ import annotations

import copy

import torch

import ember
from ember.autograd.api import aot_function


class RecordingBackend:
    """A backend that keeps each captured graph and compiles it with ember's AOT layer, keeping
    the ATen forward/backward graphs it produced (none when tracing fell back to eager)."""

    def __init__(self) -> None:
        self.captured: list[torch.fx.GraphModule] = []
        self.aten: list[torch.fx.GraphModule] = []

    def _compiler(self, gm, example_inputs):
        self.aten.append(gm)
        return gm.forward

    def __call__(self, gm, example_inputs):
        self.captured.append(gm)
        return aot_function(gm, fw_compiler=self._compiler, bw_compiler=self._compiler)

    def captured_targets(self) -> list[str]:
        return [getattr(node.target, "__name__", str(node.target))
                for gm in self.captured for node in gm.graph.nodes if node.op == "call_function"]

    def aten_ops(self) -> set:
        return {node.target for gm in self.aten for node in gm.graph.nodes if node.op == "call_function"}


def compile_recorded(fn, *args):
    """(backend, compiled result) of fn compiled with fullgraph=True on a copy of args."""
    ember.reset()
    backend = RecordingBackend()
    with ember.config.patch(raise_capture_errors=True):
        result = ember.compile(fn, backend=backend, fullgraph=True)(*copy.deepcopy(args))
    return backend, result


def gradients(fn, compiled, inputs: list, outputs_of=lambda out: out):
    """Gradients of the sum of fn's tensor outputs w.r.t. inputs (fresh leaves), for fn and compiled."""
    results = []
    for function in (fn, compiled):
        leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
        out = outputs_of(function(*leaves))
        tensors = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
        total = sum(o.sum() for o in tensors if o.requires_grad)
        results.append(torch.autograd.grad(total, [t for t in leaves if t.requires_grad]))
    return results
