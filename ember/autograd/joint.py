"""The joint forward+backward graph, traced ahead of time.

    def joint(primals, tangents):
        outs = fn(*primals)
        grads = torch.autograd.grad(outs, primals, grad_outputs=tangents)
        return outs, grads

`trace_joint` runs that on fakes under the ATen tracer: the graph holds the forward ops, then
the backward ops autograd ran, all functional.  Inputs are `primals_1..` and `tangents_1..`; the
output is the flat list `[forward outputs, new values of mutated inputs, gradients]`, described by
`JointSpec`.  Without the backward (`with_backward=False`) it is the inference path's graph.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils import _pytree as pytree

from .. import logs
from ..eager.check import storage_key
from .eager_formulas import EagerFormulas
from ..capture.shapes import ShapeSource
from .tracer import AtenTracer, TracingError
from .view_geometry import copy_in_order, dense_order, has_symbols

log_fallbacks = logs.get("fallbacks")


@dataclasses.dataclass
class JointSpec:
    num_primals: int
    num_tangents: int
    # Forward outputs: the user's flat outputs (tensors and constants), then the bases of outputs
    # that share memory with each other (intermediates eager's outputs are views of).
    num_fw_outputs: int
    mutated_inputs: list[int]  # primal indices written in place (new values follow the outputs)
    grad_inputs: list[int]  # primal indices that get a gradient (the last outputs, in order)
    diff_outputs: list[int]  # forward outputs that have a tangent
    out_spec: Any  # pytree spec of the user's outputs
    constant_outputs: dict[int, Any]  # forward outputs that are not tensors
    # Forward outputs made outside the graph, as views of what they share memory with in eager.
    output_aliases: dict[int, OutputAlias]
    # Per forward output: does eager's result require grad (a returned x.detach() does not).
    output_requires_grad: list[bool] = dataclasses.field(default_factory=list)
    # Output j -> output i when both are the same graph value (y and y.detach()): derived from it.
    output_copies: dict[int, int] = dataclasses.field(default_factory=dict)
    # Forward outputs sharing an input's memory in eager that cannot be re-made as views (copied).
    outputs_sharing_inputs: list[int] = dataclasses.field(default_factory=list)
    # Per grad input: the positions in diff_outputs whose autograd graph reaches it.  Eager gives
    # an input a gradient (zeros included: pow(x, 0)) exactly when the backward starts from an
    # output that reaches it, whatever the gradient's value depends on.
    grad_sources: list[frozenset[int]] = dataclasses.field(default_factory=list)
    # Dynamic shapes: the trace's ShapeEnv and the inputs' fakes (for guards); None and [] if static.
    shape_env: Any = None
    input_fakes: list = dataclasses.field(default_factory=list)

    # diff_outputs index the forward outputs followed by the mutated inputs' new values: an input
    # that requires grad and is written in place (a non-leaf) gets its new value differentiably.
    def mutation_is_differentiable(self, position: int) -> bool:
        return self.num_fw_outputs + position in self.diff_outputs

    @property
    def num_user_outputs(self) -> int:
        return self.out_spec.num_leaves


@dataclasses.dataclass(frozen=True)
class OutputAlias:
    """An output eager returns as a view: the runtime makes it as a view of the real tensor, of
    input `source` (kind "input", after the write-back) or of forward output `source` (kind "output").

    `chain`: the view ops that made it from the source, (op, args, kwargs, piece), replayed on the
    real tensor so autograd sees eager's views; () is the source itself.  None: no chain gives it,
    so it is as_strided(size, stride, source offset + offset), of the source viewed as `dtype` first
    when that differs.  `source_size`/`source_stride`: the layout of an output source these assume
    (a compiled base with another layout is copied into this one first)."""
    kind: str
    source: int
    chain: tuple | None
    size: tuple = ()
    stride: tuple = ()
    offset: int = 0
    dtype: torch.dtype | None = None
    source_size: tuple = ()
    source_stride: tuple = ()
    # A view of an input made before the graph wrote that input: the runtime makes it before
    # the write-back too, so that autograd treats it as eager's (its grad_fn regenerated from its base).
    before_write: bool = False
    # A detached view that eager's in-place op then made require grad (`v = x.detach(); v.mul_(w)`):
    # the graph also returns its value, which the runtime writes into the view differentiably.
    refill: bool = False


def _fakes(fake_mode: FakeTensorMode, args: list, dynamic_dims: dict[int, tuple[int, ...]]) -> tuple[list, list]:
    """(the fakes the function runs on, the leaves gradients are taken for).

    Every input is an autograd leaf of its own (a view relation between two inputs belongs to
    autograd outside the graph; followed here too, a gradient would be counted twice).  An input
    that is not a leaf in eager runs as a clone of its leaf, so in-place ops on it are allowed."""
    fakes, leaves = [], []
    for index, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            if index in dynamic_dims and type(arg) in (int, float):  # a Python number that is a symbol
                arg = _symbolic_scalar(fake_mode, arg, index)
            fakes.append(arg)
            leaves.append(arg)
            continue
        if dynamic_dims.get(index):
            leaf = _symbolic_fake(fake_mode, arg.detach(), index, dynamic_dims[index])
        else:
            leaf = fake_mode.from_tensor(arg.detach(), static_shapes=True)
        if arg.requires_grad:
            leaf.requires_grad_(True)
        leaves.append(leaf)
        fakes.append(_own_copy(fake_mode, leaf) if arg.requires_grad and not arg.is_leaf else leaf)
    return fakes, leaves


def _symbolic_fake(fake_mode: FakeTensorMode, tensor: torch.Tensor, index: int, dims: tuple[int, ...]):
    """The input's fake with a symbol for each size in `dims` (named for the ShapeEnv's guards
    by its position `a[index]`; sizes 0 and 1 stay constants)."""
    sizes = [DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(tensor.dim())]
    return fake_mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes),
                                 source=ShapeSource(f"a[{index}]"))


def _symbolic_scalar(fake_mode: FakeTensorMode, value: int | float, index: int):
    """A SymInt or SymFloat for a Python number input captured as a symbol (capture/scalars.py)."""
    source = ShapeSource(f"a[{index}]")
    shape_env = fake_mode.shape_env
    symbol = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
    if type(value) is int:
        return shape_env.create_symintnode(symbol, hint=value, source=source)
    return shape_env.create_symfloatnode(symbol, hint=value, source=source)


def _own_copy(fake_mode: FakeTensorMode, leaf: torch.Tensor) -> torch.Tensor:
    """A differentiable copy of `leaf` with its strides (a clone makes a non-dense tensor dense,
    and then reshape views where eager copies: x[::2].reshape(-1)).  Elements that share memory
    (expanded) cannot be copied into: those get a clone."""
    if not _non_overlapping(leaf):
        return leaf.clone()
    with fake_mode:
        copy = torch.empty_strided(leaf.shape, leaf.stride(), dtype=leaf.dtype, device=leaf.device)
    return copy.copy_(leaf)


def _non_overlapping(tensor: torch.Tensor) -> bool:
    """No two elements share memory: each dimension, innermost first, steps past what those inside span."""
    span = 0  # the last element the inner dimensions reach, from the first
    for stride, size in sorted((st, n) for n, st in zip(tensor.shape, tensor.stride()) if n > 1):
        if stride <= span:
            return False
        span += stride * (size - 1)
    return True


def trace_joint(fn: Callable, args: list, decompositions: dict | None = None,
                with_backward: bool = True,
                dynamic_dims: dict[int, tuple[int, ...]] | None = None) -> tuple[torch.fx.GraphModule, JointSpec]:
    """`dynamic_dims`: input position -> dims whose sizes are symbols (dynamic shapes); other
    sizes are constants.  A ShapeEnv also gives data-dependent outputs (nonzero, masked_select,
    item) unbacked symbolic sizes so tracing can go on past them."""
    # FakeTensorMode's fallback runs an op without a meta kernel for real on zero-filled tensors:
    # on a GPU a device-side assert there would kill the process's CUDA context.
    on_device = any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)
    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_fallback_kernels=not on_device)
    primals, leaves = _fakes(fake_mode, args, dynamic_dims or {})
    # The same tensor passed twice is one input: later occurrences get no node and no gradient.
    first_seen: dict[int, int] = {}
    duplicates = {index for index, arg in enumerate(args)
                  if isinstance(arg, torch.Tensor) and first_seen.setdefault(id(arg), index) != index}
    graph = torch.fx.Graph()
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    graph.owning_module = module
    tracer = AtenTracer(graph, fake_mode, decompositions)
    for index, primal in enumerate(primals):
        if isinstance(primal, torch.Tensor) and index not in duplicates:
            node = tracer.add_input(f"primals_{index + 1}", primal)
            # (a clone lost the input's storage offset: compilers read the layout from here)
            node.meta["val"] = leaves[index]
            continue
        node = graph.placeholder(f"primals_{index + 1}")
        node.meta["val"] = primal
        if not isinstance(primal, torch.Tensor):
            tracer.symbols.add_input(node, primal)  # (a number captured as a symbol; else nothing)
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
        output_requires_grad = [isinstance(out, torch.Tensor) and out.requires_grad for out in flat_outputs]
        # Inputs that require grad once their new values are written back (differentiably).
        differentiable = with_backward and bool(grad_inputs)
        will_require_grad = {i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}
        will_require_grad |= {i for i in written_with_grad if differentiable and primals[i].requires_grad}
        aliases, bases, sharing_inputs = _plan_aliases(primals, leaves, flat_outputs, tracer, output_requires_grad,
                                       will_require_grad, differentiable)
        output_requires_grad += [base.requires_grad for base in bases]
        # The forward outputs the graph returns (views are made outside it), then the new values
        # of mutated inputs (the primals themselves); those written with grad get tangents.
        forward_values = [None if i in aliases and not aliases[i].refill else out
                          for i, out in enumerate(flat_outputs)] + bases
        candidates = forward_values + [primals[index] if index in written_with_grad else None
                                       for index, _ in mutated]
        diff_outputs = [i for i, out in enumerate(candidates)
                        if isinstance(out, torch.Tensor) and out.requires_grad and with_backward and grad_inputs]
        if any(isinstance(d, torch.SymInt) and not tracer.symbols.knows(d)
               for i in diff_outputs for d in candidates[i].shape):
            # (its tangent's size is known only at run time: x[mask] of an x that requires grad)
            raise TracingError("an output whose size depends on data requires grad")
        grads: list = []
        grad_sources: list[frozenset[int]] = []
        if diff_outputs:
            with tracer.paused():
                tangents = [torch.empty_like(candidates[i], memory_format=torch.contiguous_format)
                            for i in diff_outputs]
            anchor = last_placeholder
            for position, tangent in enumerate(tangents):
                with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(None):
                    node = graph.placeholder(f"tangents_{position + 1}")
                node.meta["val"] = tangent
                tracer._bind(tangent, node)
                anchor = node
            targets = [leaves[i] for i in grad_inputs]
            grads = [_in_leaf_layout(grad, primals[i]) if args[i].is_leaf else grad for grad, i in zip(
                torch.autograd.grad([candidates[i] for i in diff_outputs], targets, tangents, allow_unused=True),
                grad_inputs)]
            grad_sources = _grad_sources([candidates[i] for i in diff_outputs], targets)
    output_nodes: list = []
    constant_outputs: dict[int, Any] = {}
    for index, out in enumerate(forward_values):
        if index in aliases and not aliases[index].refill:
            output_nodes.append(None)
        elif isinstance(out, torch.Tensor):
            output_nodes.append(tracer.node_of(out))
        elif isinstance(out, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            output_nodes.append(tracer.sym_node_of(out))
        else:
            constant_outputs[index] = out
            output_nodes.append(None)
    mutated = tracer.mutated_inputs()
    output_nodes += [node for _, node in mutated] + [tracer.node_of(g) if g is not None else None for g in grads]
    graph.output(tuple(output_nodes))
    _remove_aliases(graph)
    graph.eliminate_dead_code()
    module.recompile()
    final_outputs = list(next(n for n in graph.nodes if n.op == "output").args[0])[:len(forward_values)]
    spec = JointSpec(
        num_primals=len(primals),
        num_tangents=len(diff_outputs),
        num_fw_outputs=len(forward_values),
        mutated_inputs=[index for index, _ in mutated],
        grad_inputs=grad_inputs if diff_outputs else [],
        diff_outputs=diff_outputs,
        out_spec=out_spec,
        constant_outputs=constant_outputs,
        output_aliases=aliases,
        output_requires_grad=output_requires_grad,
        output_copies=_output_copies(final_outputs, output_requires_grad),
        outputs_sharing_inputs=sharing_inputs,
        grad_sources=grad_sources,
        shape_env=fake_mode.shape_env if dynamic_dims else None,
        input_fakes=leaves if dynamic_dims else [],
    )
    return module, spec


def _in_leaf_layout(grad, leaf: torch.Tensor):
    """A leaf's gradient in the leaf's own strides, traced so the copy fuses (AccumulateGrad
    would copy it after the graph: a channels-last gradient of a contiguous weight)."""
    if not isinstance(grad, torch.Tensor) or grad.dtype != leaf.dtype or grad.layout != torch.strided or \
            has_symbols(grad) or has_symbols(leaf) or grad.shape != leaf.shape or grad.stride() == leaf.stride():
        return grad
    order = dense_order(leaf)
    return grad if order is None else copy_in_order(grad, order)


def _grad_sources(outputs: list[torch.Tensor], leaves: list[torch.Tensor]) -> list[frozenset[int]]:
    """For each leaf, the positions of the outputs whose autograd graph reaches it."""
    position_of = {id(leaf): k for k, leaf in enumerate(leaves)}
    reached: list[set[int]] = [set() for _ in leaves]
    for position, out in enumerate(outputs):
        if out.grad_fn is None:  # a leaf returned as it is
            if id(out) in position_of:
                reached[position_of[id(out)]].add(position)
            continue
        seen = set()
        stack = [out.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf it writes
            if variable is not None and id(variable) in position_of:
                reached[position_of[id(variable)]].add(position)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return [frozenset(positions) for positions in reached]


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


def _plan_aliases(primals: list, leaves: list, outputs: list, tracer: AtenTracer, requires_grad: list[bool],
                  will_require_grad: set[int], differentiable: bool) -> tuple[dict[int, OutputAlias], list, list]:
    """Which outputs eager returns as views, and of what: (aliases, intermediate bases, outputs
    sharing an input's memory that cannot be made as views).  An output sharing an input's memory
    is a view of the real input (after the write-back); outputs sharing memory with each other are
    views of their tracer root, which the graph returns (as an extra output if need be).  Where
    the view cannot be re-created, the output is the graph's value (the `fallbacks` log says so)."""
    inputs = {storage_key(p): i for i, p in reversed(list(enumerate(primals))) if isinstance(p, torch.Tensor)}
    aliases: dict[int, OutputAlias] = {}
    groups: dict[int, list[int]] = {}
    sharing_inputs: list[int] = []
    for index, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            continue
        key = storage_key(out)
        if _data_dependent(out, tracer):
            if key in inputs:
                _log_unaliased(index, f"input {inputs[key]}", "its size depends on data")
                sharing_inputs.append(index)
            continue
        if key not in inputs:
            groups.setdefault(key, []).append(index)
            continue
        root = tracer.root(out)
        source = next((i for i, primal in enumerate(primals) if primal is root), inputs[key])
        if requires_grad[index] and source not in will_require_grad:
            alias = "it requires grad, the input does not"
        elif out is primals[source]:
            alias = OutputAlias("input", source, ())  # the input itself (x.float() of a float x): eager returns it
        else:
            alias = _alias("input", source, out, primals[source], leaves[source], requires_grad[index], tracer)
            if not isinstance(alias, str) and requires_grad[index] and alias.chain and \
                    any(step[0] is torch.ops.aten.detach.default for step in alias.chain):
                alias = dataclasses.replace(alias, refill=True) if _non_overlapping(out) else \
                    "a detached view that requires grad, whose elements share memory"
            made = tracer.created_version.get(id(out))
            if not isinstance(alias, str) and made is not None and made < tracer.version.get(id(root), 0):
                alias = dataclasses.replace(alias, before_write=True)
        if isinstance(alias, str):
            _log_unaliased(index, f"input {source}", alias)
            sharing_inputs.append(index)
        else:
            aliases[index] = alias
    bases: list[torch.Tensor] = []
    for key, members in groups.items():
        if len(members) == 1:
            continue  # a fresh tensor, or a lone view of an intermediate nobody else sees
        root = tracer.root(outputs[members[0]])
        node = tracer.nodes.get(id(root))
        if storage_key(root) != key or node is None or node.op != "call_function" or _data_dependent(root, tracer):
            for index in members[1:]:
                _log_unaliased(index, f"output {members[0]}", "their common base is not a traced value")
            continue
        base_index = next((i for i in members if outputs[i] is root), None)
        if base_index is None:
            base_index = len(outputs) + len(bases)
            bases.append(root)
        for index in members:
            if index == base_index:
                continue
            if requires_grad[index] and not (root.requires_grad and differentiable):
                alias = "it requires grad, its base does not"
            else:
                alias = _alias("output", base_index, outputs[index], root, root, requires_grad[index], tracer)
            if isinstance(alias, str):
                _log_unaliased(index, f"output {base_index}", alias)
            else:
                aliases[index] = alias
    return aliases, bases, sharing_inputs


def _alias(kind: str, source: int, out: torch.Tensor, traced: torch.Tensor, real: torch.Tensor,
           requires_grad: bool, tracer: AtenTracer) -> OutputAlias | str:
    """How to make `out` from the source (`traced`: the fake it was made from; `real`: a fake
    with the layout of what the runtime will have); a string says why it cannot be made."""
    layout = (tuple(traced.shape), tuple(traced.stride())) if kind == "output" else ((), ())
    chain = _view_chain(out, traced, tracer)
    if chain is not None and _replays_to(chain, real, out, traced, tracer):
        return OutputAlias(kind, source, chain, source_size=layout[0], source_stride=layout[1])
    if requires_grad and out.dtype != traced.dtype:
        return "a view of another dtype that requires grad"  # as_strided of a dtype view: not differentiable
    if requires_grad and not _non_overlapping(real):
        return "elements of its source share memory"  # as_strided's gradient would be per memory location
    if _strides(traced) != _strides(real):
        return "the input (not a leaf) was traced with other strides"
    try:
        viewed = _as_dtype(traced, out.dtype, tracer)
        _as_dtype(real, out.dtype, tracer)
    except Exception:  # noqa: BLE001 - eager's view(dtype) refuses this layout
        return f"the {traced.dtype} memory cannot be viewed as {out.dtype}"
    start = out.storage_offset() - viewed.storage_offset()
    if kind == "output" and out.numel() and (start < 0 or start + extent(out) > extent(viewed)):
        return "it reaches outside its base"
    return OutputAlias(kind, source, None, tuple(out.shape), tuple(out.stride()), start,
                       out.dtype if out.dtype != traced.dtype else None, *layout)


def _view_chain(out: torch.Tensor, source: torch.Tensor, tracer: AtenTracer) -> tuple | None:
    """The view ops the tracer saw make `out` from `source`, first to last (None: not views of it)."""
    chain = []
    tensor = out
    while tensor is not source:
        info = tracer.views.get(id(tensor))
        if info is None:
            return None
        chain.append((info.func, info.args, info.kwargs, info.index))
        tensor = info.parent
    symbolic = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)
    if any(isinstance(value, symbolic) for step in chain for value in pytree.tree_leaves(step[1:3])):
        return None
    return tuple(reversed(chain))


def replay_views(chain: tuple, tensor: torch.Tensor) -> torch.Tensor:
    for func, args, kwargs, piece in chain:
        tensor = func(tensor, *args, **kwargs)
        if piece is not None:
            tensor = tensor[piece]
    return tensor


def _replays_to(chain: tuple, real: torch.Tensor, out: torch.Tensor, traced: torch.Tensor,
                tracer: AtenTracer) -> bool:
    """Does the chain, replayed on the runtime's layout, give out's view (a view op recorded
    before an in-place metadata change, or an as_strided with its absolute offset, may not)?"""
    try:
        with tracer.paused():
            replayed = replay_views(chain, real.detach())
    except Exception:  # noqa: BLE001 - eager would refuse this view of that layout
        return False
    return (replayed.dtype == out.dtype and _strides(replayed) == _strides(out)
            and replayed.storage_offset() - real.storage_offset() == out.storage_offset() - traced.storage_offset())


def _as_dtype(tensor: torch.Tensor, dtype: torch.dtype, tracer: AtenTracer) -> torch.Tensor:
    """tensor.view(dtype) on the fakes, recorded nowhere."""
    if tensor.dtype == dtype:
        return tensor
    with tracer.paused():
        return tensor.detach().view(dtype)


def extent(tensor: torch.Tensor) -> int:
    """Elements from the tensor's first one to one past its last one (0 if empty)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def _strides(tensor: torch.Tensor) -> tuple:
    """Shape and strides, ignoring the strides of size-1 dimensions (they address nothing)."""
    return tuple(tensor.shape), tuple(st for st, n in zip(tensor.stride(), tensor.shape) if n != 1)


def _data_dependent(tensor: torch.Tensor, tracer: AtenTracer) -> bool:
    """Does the layout hold a size no input has (nonzero's, masked_select's)?  Sizes of the
    inputs' symbols (dynamic shapes) are fine: a view's replay computes them."""
    return any(isinstance(d, torch.SymInt) and not tracer.symbols.knows(d)
               for d in (*tensor.shape, *tensor.stride(), tensor.storage_offset()))


def _log_unaliased(index: int, what: str, why: str) -> None:
    log_fallbacks.debug("ember: output %d shares memory with %s in eager; returned as a copy (%s)", index, what, why)


def _run_with_provenance(fn: Callable, args: list, tracer: AtenTracer):
    """Run fn; for a captured FX graph, node by node so each ATen op keeps its user source line."""
    if not isinstance(fn, torch.fx.GraphModule):
        return fn(*args)

    class ProvenanceInterpreter(torch.fx.Interpreter):
        def run_node(self, node):
            tracer.current_meta = {key: node.meta[key] for key in ("stack_trace", "ember_recompute")
                                   if key in node.meta}
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
