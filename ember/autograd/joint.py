"""The joint forward+backward graph, traced ahead of time (seed 000's `joint_forward_backward`).

    def joint(primals, tangents):
        outs = fn(*primals)
        grads = torch.autograd.grad(outs, primals, grad_outputs=tangents)
        return outs, grads

`trace_joint` runs that on fake tensors under the ATen tracer, so the graph holds the forward
ops, then the backward ops autograd ran, all functional.  Inputs are named `primals_1..` and
`tangents_1..`; the output is the flat list `[forward outputs, new values of mutated inputs,
gradients]`, described by `JointSpec`.  `trace_forward` is the same without the backward
(the inference path).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils import _pytree as pytree

from .eager_formulas import EagerFormulas
from .tracer import AtenTracer, TracingError


@dataclasses.dataclass
class JointSpec:
    num_primals: int
    num_tangents: int
    num_fw_outputs: int  # flat forward outputs (tensors and constants)
    mutated_inputs: list[int]  # primal indices written in place (new values follow the outputs)
    grad_inputs: list[int]  # primal indices that get a gradient (the last outputs, in order)
    diff_outputs: list[int]  # forward outputs that have a tangent
    out_spec: Any  # pytree spec of the user's outputs
    constant_outputs: dict[int, Any]  # forward outputs that are not tensors
    output_aliases: dict[int, tuple]  # output index -> ("input", i, size, stride, offset)
    # Per forward output: does eager's result require grad (a returned x.detach() does not).
    output_requires_grad: list[bool] = dataclasses.field(default_factory=list)
    # Output j -> output i when both are the same graph value (y and y.detach()): the runtime
    # returns one tensor from the graph and derives the others from it.
    output_copies: dict[int, int] = dataclasses.field(default_factory=dict)

    # diff_outputs index the forward outputs followed by the mutated inputs' new values: an input
    # that requires grad and is written in place (a non-leaf) gets its new value differentiably.
    def mutation_is_differentiable(self, position: int) -> bool:
        return self.num_fw_outputs + position in self.diff_outputs


def _fakes(fake_mode: FakeTensorMode, args: list) -> tuple[list, list]:
    """(the fakes the function runs on, the leaves gradients are taken for).

    Every input is an autograd leaf of its own, made from its detached value: a view relation
    between two inputs (a tensor and a view of it, both live across a graph break) belongs to
    autograd outside the graph, which sends each input's gradient on to its base; followed here
    as well, it would be counted twice.  An input that is not a leaf in eager (an intermediate)
    runs as a clone of its leaf, so that in-place ops on it are allowed as in eager and the
    gradient is taken for its value before them."""
    fakes, leaves = [], []
    for arg in args:
        if not isinstance(arg, torch.Tensor):
            fakes.append(arg)
            leaves.append(arg)
            continue
        leaf = fake_mode.from_tensor(arg.detach(), static_shapes=True)
        if arg.requires_grad:
            leaf.requires_grad_(True)
        leaves.append(leaf)
        fakes.append(leaf.clone() if arg.requires_grad and not arg.is_leaf else leaf)
    return fakes, leaves


def trace_joint(fn: Callable, args: list, decompositions: dict | None = None,
                with_backward: bool = True) -> tuple[torch.fx.GraphModule, JointSpec]:
    # Inputs keep static shapes; a ShapeEnv gives data-dependent outputs (nonzero, masked_select,
    # item) unbacked symbolic sizes so tracing can go on past them.
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    primals, leaves = _fakes(fake_mode, args)
    # The same tensor passed twice is one input: later occurrences get no node and no gradient.
    first_seen: dict[int, int] = {}
    duplicates = set()
    for index, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            if id(arg) in first_seen:
                duplicates.add(index)
            else:
                first_seen[id(arg)] = index
    graph = torch.fx.Graph()
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    graph.owning_module = module
    tracer = AtenTracer(graph, fake_mode, decompositions)
    for index, primal in enumerate(primals):
        if index in duplicates:
            node = graph.placeholder(f"primals_{index + 1}")
            node.meta["val"] = primal
        elif isinstance(primal, torch.Tensor):
            node = tracer.add_input(f"primals_{index + 1}", primal)
            # A clone (non-leaf input) lost the input's storage offset: compilers read the
            # placeholder's value for the layout they will be called with.
            node.meta["val"] = leaves[index]
        else:
            node = graph.placeholder(f"primals_{index + 1}")
            node.meta["val"] = primal
    last_placeholder = list(graph.nodes)[-1] if len(graph.nodes) else None

    grad_inputs = [i for i, p in enumerate(primals)
                   if isinstance(p, torch.Tensor) and p.requires_grad and i not in duplicates]
    with fake_mode, tracer:
        with EagerFormulas() if with_backward else contextlib.nullcontext():
            outputs = _run_with_provenance(fn, primals, tracer)
        flat_outputs, out_spec = pytree.tree_flatten(outputs)
        mutated = tracer.mutated_inputs()
        # An input written with grad mode on: eager refuses it for a leaf that requires grad, and
        # records it for other inputs; under no_grad (an optimizer step) it is a plain write.
        written_with_grad = {index for index, _ in mutated if id(primals[index]) in tracer.written_with_grad}
        for index in written_with_grad:
            if index in grad_inputs and args[index].is_leaf:
                raise TracingError(f"in-place write to primals_{index + 1}, a leaf that requires grad")
        # The forward outputs, then the new values of mutated inputs (the primal objects
        # themselves: in-place ops changed them); those written with grad that require grad get
        # tangents.
        candidates = flat_outputs + [primals[index] if index in written_with_grad else None for index, _ in mutated]
        diff_outputs = [
            i for i, out in enumerate(candidates)
            if isinstance(out, torch.Tensor) and out.requires_grad and with_backward and grad_inputs
            and not any(isinstance(d, torch.SymInt) for d in out.shape)
        ]
        grads: list = []
        tangent_nodes = []
        if diff_outputs:
            tracer.recording = False
            tangents = [torch.empty_like(candidates[i], memory_format=torch.contiguous_format)
                        for i in diff_outputs]
            tracer.recording = True
            anchor = last_placeholder
            for position, tangent in enumerate(tangents):
                with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(None):
                    node = graph.placeholder(f"tangents_{position + 1}")
                node.meta["val"] = tangent
                tracer.nodes[id(tangent)] = node
                tracer.keepalive.append(tangent)
                tangent_nodes.append(node)
                anchor = node
            targets = [leaves[i] for i in grad_inputs]
            grads = list(torch.autograd.grad(
                [candidates[i] for i in diff_outputs], targets, tangents, allow_unused=True))
    output_nodes: list = []
    constant_outputs: dict[int, Any] = {}
    for index, out in enumerate(flat_outputs):
        if isinstance(out, torch.Tensor):
            output_nodes.append(tracer.node_of(out))
        elif isinstance(out, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            output_nodes.append(tracer.sym_node_of(out))
        else:
            constant_outputs[index] = out
            output_nodes.append(None)
    mutated = tracer.mutated_inputs()
    output_nodes.extend(node for _, node in mutated)
    for grad in grads:
        output_nodes.append(tracer.node_of(grad) if grad is not None else None)
    graph.output(tuple(output_nodes))
    _remove_aliases(graph)
    graph.eliminate_dead_code()
    module.recompile()
    final_outputs = list(next(n for n in graph.nodes if n.op == "output").args[0])[:len(flat_outputs)]
    output_requires_grad = [isinstance(out, torch.Tensor) and out.requires_grad for out in flat_outputs]
    spec = JointSpec(
        num_primals=len(primals),
        num_tangents=len(tangent_nodes),
        num_fw_outputs=len(flat_outputs),
        mutated_inputs=[index for index, _ in mutated],
        grad_inputs=grad_inputs if diff_outputs else [],
        diff_outputs=diff_outputs,
        out_spec=out_spec,
        constant_outputs=constant_outputs,
        output_aliases=_output_aliases(primals, flat_outputs),
        output_requires_grad=output_requires_grad,
        output_copies=_output_copies(final_outputs, output_requires_grad),
    )
    return module, spec


def _output_copies(nodes: list, requires_grad: list[bool]) -> dict[int, int]:
    """Outputs that are the same graph value as another (y and y.detach() once detach is gone):
    each maps to the one the graph returns, preferably one that requires grad."""
    groups: dict[Any, list[int]] = {}
    for index, node in enumerate(nodes):
        if isinstance(node, torch.fx.Node):
            groups.setdefault(node, []).append(index)
    copies = {}
    for members in groups.values():
        if len(members) > 1:
            kept = next((i for i in members if requires_grad[i]), members[0])
            copies.update({i: kept for i in members if i != kept})
    return copies


def _output_aliases(primals: list, outputs: list) -> dict[int, tuple]:
    """Outputs that share storage with an input: the runtime returns a view of the real input."""
    storages = {}
    for index, primal in enumerate(primals):
        if isinstance(primal, torch.Tensor):
            storages.setdefault(_storage_key(primal), index)
    aliases = {}
    for index, out in enumerate(outputs):
        if isinstance(out, torch.Tensor):
            source = storages.get(_storage_key(out))
            # as_strided re-creates the view only within one dtype (not view_as_complex & co.)
            symbolic = any(isinstance(d, torch.SymInt) for d in (*out.shape, *out.stride()))
            if source is not None and out.dtype == primals[source].dtype and not symbolic:
                aliases[index] = ("input", source, tuple(out.shape), tuple(out.stride()), out.storage_offset())
    return aliases


def _storage_key(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage()._cdata
    except Exception:
        return id(tensor)


def _run_with_provenance(fn: Callable, args: list, tracer: AtenTracer):
    """Run fn; for a captured FX graph, node by node so each ATen op keeps its user source line."""
    if not isinstance(fn, torch.fx.GraphModule):
        return fn(*args)

    class ProvenanceInterpreter(torch.fx.Interpreter):
        def run_node(self, node):
            tracer.current_meta = {key: node.meta[key] for key in ("stack_trace",) if key in node.meta}
            try:
                return super().run_node(node)
            finally:
                tracer.current_meta = {}

    return ProvenanceInterpreter(fn).run(*args)


def _remove_aliases(graph: torch.fx.Graph) -> None:
    """detach/alias are no-ops in a functional graph (autograd inserts them around saved values)."""
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
