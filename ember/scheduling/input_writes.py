"""New values of inputs written in place by the kernel that computes them.

A graph that mutates an input (batch norm's running statistics, a counter's `+= 1`) returns the
input's new value as an output, and the runtime copies it back (`autograd/runtime._write_back`).
Where the AOT layer offers it (graph meta "ember_input_writes": output position -> input
position; inputs that need no gradient), the kernel computing the new value stores it straight
into the input instead: no buffer to allocate, no copy after the call, and the graph returns the
input itself there (the runtime bumps its version, as eager's in-place op does).

It is safe only where nothing can see the input's old value after the store:

- the new value is a pointwise node of a kernel, laid out as the input (size, strides, dtype,
  device; both at their storage's start), and it is that output alone (no other output is it
  or a view of it, no ATen call reads it: such a call could hand out a view of the input);
- the input is read by that node alone, at the element it stores (each element is loaded and
  then stored by the same program, never read by another), and by no ATen call, and it is no
  output of the graph (a value saved for the backward, a view returned to the user);
- no CUDA graphs: a recording replays into its own copies of inputs and refuses outputs that
  are inputs.
"""
from __future__ import annotations

import sympy
import torch

from .. import config as ember_config
from ..lowering.analysis import record
from ..lowering.ir import ReinterpretView
from ..lowering.ir import Buffer, ComputedBuffer, InputBuffer, Pointwise, index_vars, store_layout
from .scheduler import Kernel, Scheduler


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
    output_uses: dict[str, int] = {}
    for value in graph.outputs:
        base = value.buffer if isinstance(value, ReinterpretView) else value
        if isinstance(base, Buffer):
            output_uses[base.name] = output_uses.get(base.name, 0) + 1
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
    return a.dtype == b.dtype and a.device == b.device and len(a.size) == len(b.size) and \
        all(sympy.expand(x - y) == 0 for x, y in zip(a.size, b.size)) and \
        all(sympy.expand(x - y) == 0 for x, y, n in zip(a.stride, b.stride, a.size) if n != 1) and \
        sympy.sympify(a.offset) == 0 and sympy.sympify(b.offset) == 0


def _reads_only_where_it_stores(value: ComputedBuffer, target: InputBuffer, readers: list) -> bool:
    """Is `target` read by `value`'s node alone, and only at the element that node stores?"""
    if any(node is not value for node in readers):
        return False
    data = value.data
    variables = index_vars(len(data.ranges))
    stored = sympy.expand(store_layout(value).index(variables))
    loads = [index for name, index in record(data).loads if name == target.name]
    return all(sympy.expand(index - stored) == 0 for index in loads)
