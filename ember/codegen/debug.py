"""Finding the first ATen node whose compiled value differs from eager (a small minifier).

    from ember.codegen.debug import first_mismatch
    first_mismatch(gm, real_inputs)   # -> (node, max abs difference) or None
"""
from __future__ import annotations

import copy

import torch
import torch.fx

from .compile import compile_graph


def first_mismatch(gm: torch.fx.GraphModule, inputs: list, rtol: float = 1e-4, atol: float = 1e-4):
    """Compile `gm` with every tensor intermediate as an output and compare each with eager."""
    graph = copy.deepcopy(gm.graph)
    watched = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    output = next(n for n in graph.nodes if n.op == "output")
    output.args = (tuple(watched),)
    probe = torch.fx.GraphModule(gm, graph)
    eager = probe(*inputs)
    compiled = compile_graph(probe, inputs)(*inputs)
    for node, want, got in zip(watched, eager, compiled):
        if want.dtype.is_floating_point:
            ok = torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = torch.equal(got, want)
        if not ok:
            difference = (got.double() - want.double()).abs().max().item() if want.numel() else 0.0
            return node, difference
    return None
