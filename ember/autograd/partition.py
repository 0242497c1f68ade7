"""Splitting the joint graph into a forward and a backward graph.

Both partitioners choose which forward values the backward receives ("saved"):

- `partition_default`: save every forward value the backward reads;
- `partition_min_cut`: rematerialization by max-flow/min-cut (networkx).  Each forward value is
  an edge whose capacity is its size in bytes; a cut is a set of values to save, everything the
  backward needs beyond them is recomputed there.  Only cheap ops (pointwise, views, shape ops)
  may be recomputed: matmul, convolution, attention, random ops and the rest are banned, so the
  cut never goes above them.

The result carries both graphs and the bytes saved for backward.
"""
from __future__ import annotations

import dataclasses
import operator

import networkx
import sympy
import torch
import torch.fx

from .. import config as ember_config
from ..eager.check import node_eager_accepts
from ..graph_patterns import CENTERS_ITS_INPUT, centering_means, compared_with_its_extremum
from .joint import JointSpec
from .symbolic import SymbolicSizeError, SymbolNodes

aten = torch.ops.aten


@dataclasses.dataclass
class Partition:
    forward: torch.fx.GraphModule  # primals -> forward outputs, mutated inputs' new values, saved values
    backward: torch.fx.GraphModule | None  # saved values, tangents -> gradients of grad_inputs
    saved: list[str]
    saved_bytes: int
    num_forward_outputs: int  # forward outputs + mutated values (before the saved values)


_UNKNOWN_NUMEL = 1 << 20  # a data-dependent size counts as large: cheaper to recompute than guess


def _numel(tensor: torch.Tensor) -> int:
    """Elements, at the sizes of the trace (a symbolic size by its hint, without guarding it)."""
    numel = tensor.numel()
    if isinstance(numel, torch.SymInt):
        hint = numel.node.hint  # (None for a data-dependent size)
        return _UNKNOWN_NUMEL if hint is None else int(hint)
    return int(numel)


def _tensor_bytes(node: torch.fx.Node) -> int:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return _numel(value) * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_numel(v) * v.element_size() for v in value if isinstance(v, torch.Tensor))
    return 0


def _split_roles(joint: torch.fx.GraphModule, spec: JointSpec):
    """(primals, tangents, forward outputs, gradients, the nodes only the backward can run (with
    `_backward_nodes`), those of them the gradients need)."""
    placeholders = [n for n in joint.graph.nodes if n.op == "placeholder"]
    primals = [n for n in placeholders if n.name.startswith("primals_")]
    tangents = [n for n in placeholders if n.name.startswith("tangents_")]
    outputs = list(next(n for n in joint.graph.nodes if n.op == "output").args[0])
    forward_count = spec.num_fw_outputs + len(spec.mutated_inputs)
    fw_outputs, grads = outputs[:forward_count], outputs[forward_count:]
    backward = _backward_nodes(joint, tangents, fw_outputs)
    return primals, tangents, fw_outputs, grads, backward, _ancestors(grads) & backward


def _ancestors(roots, stop=()) -> set:
    """The nodes among `roots` and what they read, not going past `stop`."""
    seen = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen or node in stop:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def _backward_nodes(joint, tangents, fw_outputs) -> set:
    """Nodes that can only run in the backward: those that depend on a tangent, and those that
    only the backward needs and eager's kernel refuses (fake tensors do not check dtypes: pow's
    backward computes `exponent - 1`, which eager refuses for a bool exponent), with what
    depends on them.  Eager raises that error in the backward; moved into the forward, it would
    make the forward raise."""
    tangent_set = set(tangents)
    forward_needed = _ancestors(fw_outputs)
    depends = set()
    for node in joint.graph.nodes:
        if node in tangent_set or any(arg in depends for arg in node.all_input_nodes) or \
                (node.op == "call_function" and node not in forward_needed and not node_eager_accepts(node)):
            depends.add(node)
    return depends


def _extract(joint: torch.fx.GraphModule, inputs: list, outputs: list, name: str,
             on_demand: set | None = None) -> torch.fx.GraphModule:
    """A graph computing `outputs` from `inputs` (nodes of the joint graph), copying what is needed."""
    graph = torch.fx.Graph()
    env: dict = {}
    for node in inputs:
        placeholder = graph.placeholder(node.name)
        placeholder.meta = dict(node.meta)
        env[node] = placeholder
    needed = _ancestors(outputs, stop=env)
    # Nodes in `on_demand` (a backward's recomputed forward nodes) are copied just before their
    # first user, not where the joint graph has them: the scheduler fuses in order, and next to its
    # user a recomputation fuses into the user's kernel, not into one early kernel storing them all.
    on_demand = on_demand or set()
    order = [node for node in joint.graph.nodes if node in needed and node not in env]
    position = {node: i for i, node in enumerate(order)}

    def emit_with_inputs(root: torch.fx.Node) -> None:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in env:
                continue
            if expanded:
                if node.op == "placeholder":
                    raise RuntimeError(f"{name} graph needs {node.name}, which it does not receive")
                env[node] = graph.node_copy(node, lambda n: env[n])
                continue
            stack.append((node, True))
            inputs = [n for n in node.all_input_nodes if n not in env]
            for n in sorted(inputs, key=position.__getitem__, reverse=True):
                stack.append((n, False))

    for node in order:
        if node not in on_demand:
            emit_with_inputs(node)
    for node in order:  # (what no output-side node reaches: kept, in the joint's order)
        emit_with_inputs(node)
    graph.output(tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in outputs))
    return torch.fx.GraphModule(joint, graph, class_name=name)


def _not_after(joint: torch.fx.GraphModule, roots: list) -> set:
    """The joint's nodes that depend on none of `roots` (in a backward: what it recomputes)."""
    after = set(roots)
    for node in joint.graph.nodes:
        if node not in after and any(n in after for n in node.all_input_nodes):
            after.add(node)
    return {node for node in joint.graph.nodes if node not in after}


def _sizes_for_backward(joint: torch.fx.GraphModule, primals: list, backward: torch.fx.GraphModule) -> list:
    """Symbolic sizes the backward's values use that none of its inputs holds by itself (a saved
    tensor of size s0*s1 where the backward needs s0): nodes of the joint graph computing them
    from the primals, saved as ints, so the code generator can read every size from an input."""
    available, needed = set(), set()
    for node in backward.graph.nodes:
        for item in _layout_values(node.meta.get("val")):
            if isinstance(item, (torch.SymInt, torch.SymFloat)):
                needed |= item.node.expr.free_symbols
                if node.op == "placeholder" and isinstance(item, torch.SymInt) and \
                        isinstance(item.node.expr, sympy.Symbol):
                    available.add(item.node.expr)
    missing = sorted(needed - available, key=str)
    if not missing:
        return []
    builder = SymbolNodes(joint.graph)
    for node in primals:
        builder.add_input(node, node.meta.get("val"))
    output = next(n for n in joint.graph.nodes if n.op == "output")
    extra = []
    with joint.graph.inserting_before(output):
        for symbol in missing:
            try:
                node = builder.node_of_expr(symbol)
            except SymbolicSizeError:
                continue  # (a data-dependent size: the backward runs as ATen calls if it needs it)
            if isinstance(node, torch.fx.Node):
                extra.append(node)
    return extra


def _layout_values(value) -> list:
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return [*value.shape, *value.stride(), value.storage_offset()]
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        return [value]
    return []


def partition_default(joint: torch.fx.GraphModule, spec: JointSpec) -> Partition:
    """Saves every forward value the backward reads (or that is a gradient itself), in graph order."""
    primals, tangents, fw_outputs, grads, backward, backward_needed = _split_roles(joint, spec)
    direct = {g for g in grads if isinstance(g, torch.fx.Node)}
    saved = [node for node in joint.graph.nodes if node not in backward and node.op != "output" and
             (node in direct or any(user in backward_needed for user in node.users))]
    return _build(joint, primals, tangents, fw_outputs, grads, saved)


# -- min-cut ----------------------------------------------------------------------------------------
_RECOMPUTABLE_EXTRA = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.permute.default, aten.t.default, aten.transpose.int, aten.squeeze.dim, aten.squeeze.dims,
    aten.squeeze.default, aten.unsqueeze.default, aten.slice.Tensor, aten.select.int, aten.alias.default,
    aten.detach.default, aten.clone.default, aten.full.default, aten.zeros.default, aten.ones.default,
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default, aten.scalar_tensor.default,
    aten.arange.default, aten.arange.start, aten.arange.start_step, aten.split.Tensor, aten.cat.default,
    aten.where.self, aten.to.dtype, aten._to_copy.default, operator.getitem,
}
# Reductions are not in the list: each reads a whole input to make a small result, so saving
# the result (a norm's mean and rstd) is nearly free while recomputing it costs a full pass.
_BANNED_TAGS = (torch.Tag.nondeterministic_seeded,)


def is_recomputable(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if target in _RECOMPUTABLE_EXTRA:
        if target is operator.getitem:
            return is_recomputable(node.args[0])
        return True
    tags = getattr(target, "tags", ())
    if any(tag in tags for tag in _BANNED_TAGS):
        return False
    return torch.Tag.pointwise in tags


def _must_recompute(node: torch.fx.Node, backward: set) -> bool:
    """A value made inside torch.utils.checkpoint (capture/variables/checkpoint.py) and used only
    there: recomputed in the backward whatever it costs, as eager's checkpoint does.  The region's
    results (read by the forward outside it) and random ops' results may be saved."""
    region = node.meta.get("ember_recompute")
    if node.op != "call_function" or region is None:
        return False
    if any(tag in getattr(node.target, "tags", ()) for tag in _BANNED_TAGS):
        return False
    return all(user.meta.get("ember_recompute") == region for user in node.users
               if user not in backward and user.op != "output")


def partition_min_cut(joint: torch.fx.GraphModule, spec: JointSpec) -> Partition:
    primals, tangents, fw_outputs, grads, backward, backward_needed = _split_roles(joint, spec)
    if not backward_needed:
        return partition_default(joint, spec)
    nodes = [n for n in joint.graph.nodes if n.op != "output"]
    pinned = compared_with_its_extremum(joint.graph)
    forward_side = [n for n in nodes if n not in backward]
    grad_outputs = {g for g in grads if isinstance(g, torch.fx.Node)}

    flow = networkx.DiGraph()
    infinite = float("inf")
    for node in forward_side:
        value = node.meta.get("val")
        # A symbolic size costs an int (it is saved as one); a tuple-valued node is crossed
        # through its getitems.
        if isinstance(value, torch.Tensor):
            weight = _tensor_bytes(node) or 1
        else:
            weight = 1 if isinstance(value, (torch.SymInt, torch.SymFloat, int, float)) else infinite
        recompute = _must_recompute(node, backward)
        if recompute:
            weight = infinite  # inside torch.utils.checkpoint: never saved
        if node.op == "placeholder" or ((not is_recomputable(node) or node in pinned) and not recompute):
            # An input, or banned from recomputation: it runs in the forward, so saving it (or
            # something after it) is the only way across.
            flow.add_edge("source", f"{node.name}_in", capacity=infinite)
        flow.add_edge(f"{node.name}_in", f"{node.name}_out", capacity=weight)
        if node in grad_outputs:  # a gradient computed without any tangent
            flow.add_edge(f"{node.name}_out", "sink", capacity=infinite)
        for user in node.users:
            if user in backward_needed:
                flow.add_edge(f"{node.name}_out", "sink", capacity=infinite)
            elif user.op != "output":
                flow.add_edge(f"{node.name}_out", f"{user.name}_in", capacity=infinite)
    if "sink" not in flow:
        return partition_default(joint, spec)
    _, (reachable, _) = networkx.minimum_cut(flow, "source", "sink")
    saved = [n for n in forward_side if f"{n.name}_in" in reachable and f"{n.name}_out" not in reachable]
    return _build(joint, primals, tangents, fw_outputs, grads, saved)


def _build(joint, primals, tangents, fw_outputs, grads, saved) -> Partition:
    for mean in centering_means(joint.graph):  # (the mark travels with the node into either graph)
        mean.meta[CENTERS_ITS_INPUT] = True
    backward = None
    if tangents and grads:
        recomputed = _not_after(joint, tangents) if ember_config._config.recompute_near_use else None
        backward = _extract(joint, saved + tangents, list(grads), "BackwardGraph", recomputed)
        extra = _sizes_for_backward(joint, primals, backward)
        if extra:
            saved = saved + extra
            backward = _extract(joint, saved + tangents, list(grads), "BackwardGraph", recomputed)
    forward = _extract(joint, primals, list(fw_outputs) + saved, "ForwardGraph")
    saved_bytes = sum(_tensor_bytes(n) for n in saved)
    return Partition(forward, backward, [n.name for n in saved], saved_bytes, len(fw_outputs))
