"""New values of inputs written in place by the kernel that computes them.

A graph that mutates an input (batch norm's running statistics) returns the new value as an
output, and the runtime copies it back.  Where the AOT layer offers it (graph meta
"ember_input_writes": output position -> input position), the kernel computing the new value
stores it straight into the input instead (no buffer, no copy; the graph returns the input).
Only where nothing can see the old value after the store: the new value is a pointwise node laid
out as the input, that output alone, read by no ATen call; the input is read by that node alone,
at the element it stores, by no ATen call, and is no output; and no CUDA graphs (a recording
replays into its own copies of inputs).
"""
from __future__ import annotations

import collections

import sympy
import torch

from .. import config as ember_config
from ..lowering.analysis import record
from ..lowering.graph import same_layout
from ..lowering.ir import ComputedBuffer, InputBuffer, Pointwise, index_vars, store_layout
from .scheduler import Kernel, Scheduler, output_names


def input_writes(gm: torch.fx.GraphModule, scheduler: Scheduler) -> dict[str, str]:
    """computed buffer -> the input it is stored into (its memory), for the offered outputs
    where that is safe."""
    offered = gm.meta.get("ember_input_writes")
    graph = scheduler.graph
    if not offered or (ember_config.cudagraphs and any(i.device.type == "cuda" for i in graph.inputs)):
        return {}
    readers: dict[str, list] = {}  # buffer -> the kernel nodes reading it
    extern_reads: set[str] = set()
    for step in scheduler.steps:
        if isinstance(step, Kernel):
            for node in step.nodes:
                for name in {name for name, _ in record(node.data).loads}:
                    readers.setdefault(name, []).append(node)
        else:
            extern_reads |= scheduler._extern_reads(step.call)
    output_uses = collections.Counter(output_names(graph))
    placed: dict[str, str] = {}
    for position, index in offered.items():
        if position >= len(graph.outputs) or index >= len(graph.placeholders):
            continue
        value, target = graph.outputs[position], graph.placeholders[index]
        if not isinstance(value, ComputedBuffer) or not isinstance(value.data, Pointwise) or \
                not isinstance(target, InputBuffer) or target.name in placed.values():
            continue
        if output_uses.get(value.name) != 1 or value.name in extern_reads or target.name in output_uses or \
                target.name in extern_reads or value.name in placed:
            continue
        if _same_layout(value, target) and _reads_only_where_it_stores(value, target, readers.get(target.name, [])):
            placed[value.name] = target.name
    return placed


def _same_layout(value: ComputedBuffer, target: InputBuffer) -> bool:
    a, b = value.layout, target.layout
    return a.dtype == b.dtype and a.device == b.device and same_layout(a, b) and sympy.sympify(a.offset) == 0


def _reads_only_where_it_stores(value: ComputedBuffer, target: InputBuffer, readers: list) -> bool:
    """Is `target` read by `value`'s node alone, and only at the element that node stores?"""
    if any(node is not value for node in readers):
        return False
    data = value.data
    variables = index_vars(len(data.ranges))
    stored = sympy.expand(store_layout(value).index(variables))
    loads = [index for name, index in record(data).loads if name == target.name]
    return all(sympy.expand(index - stored) == 0 for index in loads)
