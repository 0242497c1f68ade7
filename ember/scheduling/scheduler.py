"""The scheduler: which buffers are computed, in what order, and fused into which kernels.

1. Dead-code elimination: buffers nobody reads and that are not outputs are dropped.
2. Fusion, greedily in order: a ComputedBuffer joins the current kernel when the kernel's outer
   loop can be shared (a reduction's outer ranges are its output ranges; a pointwise buffer
   splits its ranges into outer and inner).  A consumer may read a kernel-mate only at the same
   outer position.  Pointwise nodes with the same inner ranges share one inner loop (vertical
   and horizontal fusion).  An extern call ends the current kernel; a scatter is a kernel of its
   own; a node the current kernel cannot take may join an earlier kernel over the same outer
   loop that reads the same data.  Limits: MIN_OUTER_ITERATIONS, `ember.config.max_kernel_buffers`.
3. Last uses: after which step each buffer can be freed.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import sympy

from .. import config as ember_config
from ..lowering.analysis import record
from ..lowering.graph import GraphLowering, _SideEffectMarker
from ..lowering.indexing import product_runs, simplify_index
from ..lowering.printer import provenance, sizes
from ..lowering.symbolic import is_size_symbol
from ..lowering.ir import (Buffer, ComputedBuffer, ExternBuffer, ExternCall, Layout, Pointwise, Reduction,
                           ReinterpretView, Scatter, index_vars, product, store_layout)


def squeeze(ranges) -> list:
    return [r for r in ranges if r != 1]


def buffer_names(tree) -> set[str]:
    """The buffers a tree of extern-call arguments reads (a view's base)."""
    from torch.utils import _pytree as pytree

    return {leaf.buffer.name if isinstance(leaf, ReinterpretView) else leaf.name
            for leaf in pytree.tree_leaves(tree) if isinstance(leaf, (ReinterpretView, Buffer))}


def output_names(graph: GraphLowering) -> list[str]:
    """The buffers the graph returns (a view's base), once per output."""
    bases = [value.buffer if isinstance(value, ReinterpretView) else value for value in graph.outputs]
    return [base.name for base in bases if isinstance(base, Buffer)]


@dataclasses.dataclass
class LoopGroup:
    """Nodes of a kernel that share one inner loop (or one reduction loop)."""

    inner: list
    nodes: list[ComputedBuffer]
    reduction: bool

    def row_ranges(self) -> list:
        """The ranges its inner loop runs over: the reduction's (size-1 dims removed), or the inner ones."""
        return squeeze(self.nodes[0].data.spec.reduction_ranges) if self.reduction else list(self.inner)


@dataclasses.dataclass
class Kernel:
    name: str
    outer: list  # outer ranges (size-1 dims removed)
    nodes: list[ComputedBuffer]

    def groups(self) -> list[LoopGroup]:
        groups: list[LoopGroup] = []
        for node in self.nodes:
            inner = inner_ranges(node, self.outer)
            is_reduction = isinstance(node.data, Reduction)
            if groups and not is_reduction and not groups[-1].reduction and groups[-1].inner == inner:
                groups[-1].nodes.append(node)
            else:
                groups.append(LoopGroup(inner, [node], is_reduction))
        return groups


@dataclasses.dataclass
class ExternStep:
    call: ExternCall


def inner_ranges(node: ComputedBuffer, outer: list) -> list:
    data = node.data
    if isinstance(data, Reduction):
        return list(data.spec.reduction_ranges)
    ranges = squeeze(data.ranges)
    return ranges[len(outer):]


def outer_candidates(node: ComputedBuffer) -> list[list]:
    ranges = squeeze(node.data.ranges)
    if isinstance(node.data, Reduction):
        return [ranges]
    return [ranges[:k] for k in range(len(ranges), -1, -1)]


class Scheduler:
    def __init__(self, graph: GraphLowering) -> None:
        self.graph = graph
        self.steps: list[Any] = []
        self.kept: list[Buffer] = []
        self._reads: dict[str, set[str]] = {}
        self._loads: dict[str, list] = {}
        self._touched: dict[str, tuple[int, set[str]]] = {}  # kernel -> (its node count, buffers)

    # -- 1. dead code -----------------------------------------------------------------------------
    def eliminate_dead_code(self) -> None:
        needed = set(output_names(self.graph))
        kept = []
        seen_calls = set()
        for buffer in reversed(self.graph.buffers):
            if isinstance(buffer, _SideEffectMarker):
                kept.append(buffer)
                needed |= self._extern_reads(buffer.kernel)
                continue
            if buffer.name not in needed:
                if isinstance(buffer, ExternBuffer) and id(buffer.kernel) in seen_calls:
                    kept.append(buffer)
                continue
            kept.append(buffer)
            if isinstance(buffer, ComputedBuffer):
                recorded = record(buffer.data)
                self._loads[buffer.name] = recorded.loads
                self._reads[buffer.name] = {name for name, _ in recorded.loads}
                needed |= self._reads[buffer.name]
            elif isinstance(buffer, ExternBuffer):
                if id(buffer.kernel) not in seen_calls:
                    seen_calls.add(id(buffer.kernel))
                    needed |= self._extern_reads(buffer.kernel)
        self.kept = list(reversed(kept))

    @staticmethod
    def _extern_reads(call: ExternCall) -> set[str]:
        return buffer_names((call.args, call.kwargs))

    # -- 2. fusion --------------------------------------------------------------------------------------
    # How many earlier kernels a node may join when the current one does not take it.
    LOOKBACK = 8

    def fuse(self) -> None:
        steps: list[Any] = []
        current: Kernel | None = None
        emitted_calls = set()
        names = (f"kernel{k}" for k in itertools.count())
        produced_at: dict[str, int] = {}  # buffer -> index of the step that writes it
        for buffer in self.kept:
            position = len(steps) - 1
            if isinstance(buffer, (ExternBuffer, _SideEffectMarker)):
                current = None
                if id(buffer.kernel) not in emitted_calls:
                    emitted_calls.add(id(buffer.kernel))
                    steps.append(ExternStep(buffer.kernel))
                    position += 1
            elif isinstance(buffer.data, Scatter):  # its own kernel: two passes over different ranges
                steps.append(Kernel(next(names), [], [buffer]))
                current, position = None, position + 1
            elif current is not None and self._can_join(current, buffer):
                current.nodes.append(buffer)
            elif (earlier := self._earlier_kernel(steps, buffer, produced_at)) is not None:
                steps[earlier].nodes.append(buffer)
                position = earlier
            else:
                current = Kernel(next(names), squeeze(buffer.data.ranges), [buffer])
                steps.append(current)
                position += 1
            produced_at[buffer.name] = position
        self.steps = steps

    def _earlier_kernel(self, steps: list, node: ComputedBuffer, produced_at: dict[str, int]) -> int | None:
        """Horizontal fusion across other steps: an earlier kernel over the same outer loop that
        runs after everything the node reads.  Moving the node there is safe: nothing reads it yet."""
        reads = self._reads_of(node)
        ready = max((produced_at.get(name, -1) for name in reads), default=-1)
        candidates = [i for i in range(max(ready, 0), len(steps)) if isinstance(steps[i], Kernel)]
        for position in candidates[-self.LOOKBACK:]:
            kernel = steps[position]
            if isinstance(kernel.nodes[0].data, Scatter):
                continue
            shares_input = any(reads & (self._reads.get(member.name) or set()) for member in kernel.nodes) or \
                any(member.name in reads for member in kernel.nodes)
            if shares_input and self._can_join(kernel, node):
                return position
        return None

    def _can_join(self, kernel: Kernel, node: ComputedBuffer) -> bool:
        if len(self._buffers_touched(kernel) | self._node_buffers(node)) > ember_config._config.max_kernel_buffers:
            return False
        nodes = kernel.nodes + [node]
        reductions = [n for n in nodes if isinstance(n.data, Reduction)]
        outer = squeeze((reductions or nodes)[0].data.ranges)
        for member in nodes:
            if outer not in outer_candidates(member):
                return not reductions and self._join_refined(kernel, node)
        if not isinstance(node.data, Reduction) and _serializes(outer, node):
            return False
        if not outer and not reductions:
            return len({tuple(squeeze(n.data.ranges)) for n in nodes}) == 1
        # A consumer may read a kernel-mate's output only within the same outer iteration, and one
        # that shares its loop body (tests/codegen/test_fusion_legality.py) only the element that
        # iteration wrote: another element of it is written by a later iteration, or by another lane.
        produced = {member.name: member for member in kernel.nodes}
        loop_mates = _loop_mates(kernel.nodes, node, outer)
        for name, index in self._loads.get(node.name) or record(node.data).loads:
            producer = produced.get(name)
            if producer is not None and not self._same_outer_row(producer, node, index, outer,
                                                                 same_element=name in loop_mates):
                return False
        kernel.outer = outer
        return True

    def _join_refined(self, kernel: Kernel, node: ComputedBuffer) -> bool:
        """A pointwise node over the same elements as a pointwise kernel in other dims (a bias add
        over [12608, 3072] and the GELU that reads it as [64, 197, 3072]): both iterate over
        their common refinement, if the checks pass there; else everything stays as it was."""
        nodes = kernel.nodes + [node]
        if not all(type(n.data) is Pointwise for n in nodes) or \
                any(squeeze(n.data.ranges) != kernel.outer for n in kernel.nodes):
            return False
        ranges = common_refinement(kernel.outer, squeeze(node.data.ranges))
        if ranges is None:
            return False
        saved = {n.name: (n.data, self._loads.get(n.name)) for n in nodes}
        for member in nodes:
            refined = refine(member, ranges)
            if refined is None:
                break
            member.data = refined
            self._loads[member.name] = record(refined).loads
        else:
            if self._can_join(kernel, node):
                return True
        for member in nodes:
            member.data, loads = saved[member.name]
            if loads is None:
                self._loads.pop(member.name, None)
            else:
                self._loads[member.name] = loads
        return False

    def _reads_of(self, node: ComputedBuffer) -> set[str]:
        return self._reads.get(node.name) or {name for name, _ in record(node.data).loads}

    def _node_buffers(self, node: ComputedBuffer) -> set[str]:
        return {node.name} | self._reads_of(node)

    def _buffers_touched(self, kernel: Kernel) -> set[str]:
        """The buffers the kernel reads or writes (kept per kernel, grown as nodes join it)."""
        cached = self._touched.get(kernel.name)
        if cached is None or cached[0] != len(kernel.nodes):
            start, touched = (cached[0], set(cached[1])) if cached else (0, set())
            for node in kernel.nodes[start:]:
                touched |= self._node_buffers(node)
            cached = self._touched[kernel.name] = (len(kernel.nodes), touched)
        return cached[1]

    def _same_outer_row(self, producer: ComputedBuffer, consumer: ComputedBuffer, load_index, outer,
                        same_element: bool = False) -> bool:
        """Does the consumer's load stay inside the producer's row for the same outer position
        (`same_element`: read the very element the producer stores in the same iteration)?"""
        # (simplified: a load through views splits its index, k*floor(x/k) + Mod(x, k) for x)
        load = simplify_index(sympy.expand(sympy.sympify(load_index).subs(_to_kernel(consumer, outer))))
        store = sympy.expand(store_layout(producer).index(index_vars(len(producer.data.ranges), "i")))
        store = simplify_index(sympy.expand(store.subs(_to_kernel(producer, outer))))
        if same_element:
            return sympy.expand(load - store) == 0
        outer_symbols = [sympy.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(len(outer))]

        def at_inner_zero(expr):  # (size symbols stay: they are the same in every iteration)
            return expr.subs({s: 0 for s in expr.free_symbols if s not in outer_symbols and not is_size_symbol(s)})

        load_inner_zero = at_inner_zero(load)
        if sympy.expand(load_inner_zero - at_inner_zero(store)) != 0:
            return False
        rest = sympy.expand(load - load_inner_zero)
        if any(s in outer_symbols for s in rest.free_symbols):
            return False
        return all(not isinstance(a, (sympy.floor, sympy.Mod)) or not (a.free_symbols & set(outer_symbols))
                   for a in sympy.preorder_traversal(load))

    def internal_values(self) -> set[str]:
        """Buffers computed by a kernel and read by nothing else: no other step reads them and
        they are not graph outputs.  A backend may keep them in registers (codegen/triton/kernel.py)."""
        step_of: dict[str, int] = {}
        for position, step in enumerate(self.steps):
            if isinstance(step, Kernel) and not isinstance(step.nodes[0].data, Scatter):
                for node in step.nodes:
                    step_of[node.name] = position
        candidates = set(step_of)
        for position, step in enumerate(self.steps):
            candidates -= {name for name in self._step_reads(step) if step_of.get(name) != position}
        return candidates - set(output_names(self.graph))

    def _step_reads(self, step) -> set[str]:
        """The buffers a step (a kernel, or an extern call) reads."""
        if isinstance(step, Kernel):
            return set().union(*(self._reads.get(node.name, set()) for node in step.nodes))
        return self._extern_reads(step.call)

    def undefined_reads(self) -> list[str]:
        """Reads of buffers no earlier step (or earlier node of the same kernel) writes, nor an
        input or constant holds: a schedule out of order.  (ember.config.verify_graphs)"""
        defined = {buffer.name for buffer in self.graph.inputs} | set(self.graph.constants)
        problems = []
        for position, step in enumerate(self.steps):
            if isinstance(step, Kernel):
                for node in step.nodes:
                    missing = self._reads.get(node.name, set()) - defined - {n.name for n in step.nodes}
                    problems += [f"step {position} ({node.name}) reads {name}" for name in sorted(missing)]
                defined |= {node.name for node in step.nodes}
            else:
                missing = self._extern_reads(step.call) - defined
                problems += [f"step {position} ({step.call.origin}) reads {name}" for name in sorted(missing)]
                defined |= {out.name for out in step.call.outputs if out is not None}
        return problems

    # -- 3. lifetimes ------------------------------------------------------------------------------------
    def last_uses(self) -> dict[int, list[str]]:
        """step index -> buffers that die after it (inputs included)."""
        last: dict[str, int] = {}
        for position, step in enumerate(self.steps):
            last.update(dict.fromkeys(self._step_reads(step), position))
        returned = set(output_names(self.graph))
        dying: dict[int, list[str]] = {}
        for name, position in last.items():
            if name not in returned:
                dying.setdefault(position, []).append(name)
        return dying


# A pointwise node joins a kernel whose outer loop has fewer iterations than this only when its
# inner loop is short: otherwise one program (a GPU block, a CPU thread) walks all of it.
MIN_OUTER_ITERATIONS = 64
MAX_SERIAL_INNER = 8192


def _serializes(outer: list, node: ComputedBuffer) -> bool:
    iterations, work = product(outer), product(inner_ranges(node, outer))
    small_outer = iterations.is_number and int(iterations) < MIN_OUTER_ITERATIONS
    long_inner = not work.is_number or int(work) > MAX_SERIAL_INNER
    return small_outer and long_inner


def _loop_mates(nodes: list[ComputedBuffer], node: ComputedBuffer, outer: list) -> set[str]:
    """The nodes that would share `node`'s loop body were it appended to `nodes` (its LoopGroup)."""
    if isinstance(node.data, Reduction):
        return set()
    return {member.name for member in Kernel("", outer, nodes + [node]).groups()[-1].nodes} - {node.name}


def _to_kernel(node: ComputedBuffer, outer: list) -> dict:
    """The node's own index variables (the names record() uses) in terms of the kernel's loop
    variables: x0, x1, ... over the outer ranges, then y0, y1, ... (size-1 dims: 0)."""
    ranges = list(node.data.ranges)
    to_kernel, position = {}, 0
    for var, size in zip(index_vars(len(ranges), "i"), ranges):
        if size == 1:
            to_kernel[var] = 0
            continue
        name = f"x{position}" if position < len(outer) else f"y{position - len(outer)}"
        to_kernel[var] = sympy.Symbol(name, integer=True, nonnegative=True)
        position += 1
    return to_kernel


def common_refinement(a: list, b: list) -> list | None:
    """Ranges from which both `a` and `b` (squeezed) come by merging runs of adjacent dims:
    [12608, 3072] and [64, 197, 3072] give [64, 197, 3072].  None where sizes are symbolic or
    a run would need splitting on both sides ([6, 4] and [4, 6])."""
    values = [sympy.sympify(n) for n in (*a, *b)]
    if not all(value.is_number for value in values):
        return None
    a, b = [int(n) for n in a], [int(n) for n in b]
    runs = product_runs(a, b)
    if runs is None:
        return None
    refined: list = []
    for positions_a, positions_b in runs:
        run_a, run_b = [a[p] for p in positions_a], [b[p] for p in positions_b]
        if len(run_a) > 1 and len(run_b) > 1 and run_a != run_b:
            return None
        refined += [sympy.Integer(n) for n in (run_a if len(run_a) >= len(run_b) else run_b)]
    return refined


def refine(node: ComputedBuffer, ranges: list) -> Pointwise | None:
    """The node's pointwise loops over `ranges`, a refinement of its own (size-1 dims dropped,
    others split into runs), storing to the same memory (`store_layout`).  None if its layout
    does not line up with its ranges."""
    data = node.data
    own = list(data.ranges)
    layout = store_layout(node)
    if squeeze(own) == list(ranges):
        return data
    if not isinstance(layout, Layout) or len(layout.size) != len(own):
        return None
    own_dims = [position for position, size in enumerate(own) if size != 1]
    found = product_runs([int(own[position]) for position in own_dims], [int(n) for n in ranges])
    if found is None or any(len(own_run) != 1 for own_run, _ in found):
        return None
    runs = [(own_dims[own_run[0]], run) for own_run, run in found]  # (own dim, the ranges it splits into)
    strides: list = [None] * len(ranges)
    for position, run in runs:
        stride = layout.stride[position]
        for k in reversed(run):
            strides[k] = stride
            stride = stride * ranges[k]

    def to_own(index):
        result = [sympy.Integer(0)] * len(own)
        for position, run in runs:
            expr = sympy.Integer(0)
            for k in run:
                expr = expr * ranges[k] + index[k]
            result[position] = expr
        return result

    inner_fn = data.inner_fn
    refined = copy.copy(data)
    refined.ranges = list(ranges)
    refined.inner_fn = lambda ops, index: inner_fn(ops, to_own(index))
    refined.store_layout = Layout(layout.device, layout.dtype, list(ranges), strides, layout.offset)
    return refined


def schedule_text(scheduler) -> str:
    """The steps in order: fused kernels with their loop structure, and extern calls."""
    lines = []
    for step in scheduler.steps:
        if isinstance(step, Kernel):
            lines.append(f"{step.name}: outer loops {sizes(step.outer)}")
            for group in step.groups():
                kind = "reduction" if group.reduction else "pointwise"
                for node in group.nodes:
                    lines.append(f"    {kind} over {sizes(group.inner)}: {node.name}  # {provenance(node)}")
        else:
            call = step.call
            names = ", ".join(b.name for b in call.outputs if b is not None) or "-"
            lines.append(f"extern {call.target} -> {names}  # {call.origin}")
    return "\n".join(lines)
