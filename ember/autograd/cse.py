"""Common-subexpression elimination on a functional ATen graph, before it is partitioned.

Models repeat work eager cannot share (each of BERT's 12 layers converts the same attention mask).
A node applying the same pure op to the same inputs as an earlier one is replaced by it, and
t(t(x)) by x.  Not merged: ops that mutate, draw random numbers or allocate uninitialized memory;
graphs holding a mutation (their order of effects is not only data flow); and nodes whose value
reaches a graph output (two outputs eager returns as separate tensors would share memory).
"""
from __future__ import annotations

import math
import operator

import torch

aten = torch.ops.aten

# Ops whose result may share its input's memory though their schemas do not say so: a reshape
# of a copy made for it comes out of the decompositions as clone + _unsafe_view.
_ALIASING = {aten._unsafe_view.default, aten.reshape.default, aten.contiguous.default}

_UNINITIALIZED = {aten.empty.memory_format, aten.empty_strided.default, aten.new_empty.default,
                  aten.new_empty_strided.default, aten.empty_like.default}


def _pure(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is operator.getitem:
        return node.op == "call_function"
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target in _UNINITIALIZED:
        return False
    return not target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in target.tags


def _has_mutation(graph: torch.fx.Graph) -> bool:
    return any(node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
               and node.target._schema.is_mutable for node in graph.nodes)


def _reaching_outputs(graph: torch.fx.Graph) -> set:
    """Nodes whose memory a graph output is (or is a view of)."""
    reached: set = set()
    pending = [arg for node in graph.nodes if node.op == "output" for arg in nodes_in(node.args)]
    while pending:
        node = pending.pop()
        if node in reached:
            continue
        reached.add(node)
        target = node.target
        is_view = target is operator.getitem or target in _ALIASING or (
            isinstance(target, torch._ops.OpOverload) and target.is_view)
        if is_view and node.args and isinstance(node.args[0], torch.fx.Node):
            pending.append(node.args[0])
    return reached


def nodes_in(value) -> list:
    """The nodes in an argument structure."""
    found: list = []
    torch.fx.node.map_arg(value, found.append)
    return found


def _hashable(value):
    """A key for an argument: scalars with their type (1, 1.0 and True compute differently) and
    a float's sign (x * 0.0 and x * -0.0 differ in the sign of zero)."""
    if isinstance(value, int):  # (bool too)
        return (type(value), value)
    if isinstance(value, float):
        return (float, value, math.copysign(1.0, value))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _double_transpose_of(node: torch.fx.Node):
    """x for t(t(x)) (the same sizes and strides as x): padded matrix products transpose an
    operand back, so GPT-2's LM-head gradient was padded twice, once as g and once as t(t(g))."""
    inner = node.args[0] if node.target is aten.t.default else None
    if isinstance(inner, torch.fx.Node) and inner.op == "call_function" and inner.target is aten.t.default and \
            isinstance(inner.args[0], torch.fx.Node):
        return inner.args[0]
    return None


def eliminate_common_subexpressions(gm: torch.fx.GraphModule) -> int:
    """Merges duplicate pure nodes in place; returns how many were removed."""
    graph = gm.graph
    if _has_mutation(graph):
        return 0
    keep = _reaching_outputs(graph)
    seen: dict = {}
    removed = 0
    for node in list(graph.nodes):
        if not _pure(node):
            continue
        first = _double_transpose_of(node) if node not in keep else None
        if first is None:
            try:
                first = seen.setdefault((node.target, _hashable(node.args), _hashable(node.kwargs)), node)
            except TypeError:
                continue
        if first is node or node in keep:
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        removed += 1
    if removed:
        gm.recompile()
    return removed
