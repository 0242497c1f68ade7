"""GPU kernel partitioning, a scheduling pass: one scheduled kernel as the GPU kernels it becomes.

A GPU kernel must hold a node's inputs from its kernel-mates in registers (another thread may
hold the element).  The emitter generates what it is asked and reports the first read it could
not serve (`Emitted.unheld`); this pass decides the kernels' boundaries:

    inner loops of another size   a new kernel from the first node whose rows differ
    a mate's value not held       split before the node that read it, or store a value that
                                  was to stay in registers
    long rows, few outputs        a split reduction: programs reduce chunks of the rows, a second
                                  kernel combines them
    a run of reductions that      the pointwise nodes around it cut off into kernels of their own
    would split but its kernel cannot
    values only the kernel reads  kept in registers, never stored (`internal`)

The thresholds are the device's (`GpuLimits`); the emitter is handed in (`make`), so that this
pass imports no code generation.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Protocol

import sympy

from ..lowering.analysis import reads, record
from ..lowering.ir import Pointwise, Reduction, product
from .scheduler import Kernel


@dataclasses.dataclass(frozen=True)
class GpuLimits:
    """When rows are long enough, and their outputs too few to fill the device, to reduce in chunks."""

    split_min_rnumel: int = 4096
    programs: int = 264  # programs that fill the device: about two per streaming multiprocessor (H100: 132)
    column_programs: int = 2048  # a column sum's programs (split into row chunks)
    max_chunks: int = 256


class Emitted(Protocol):
    """What the pass reads of a generated kernel."""

    rnumel: object  # None: a 1-D kernel
    xnumel: object
    XBLOCK: int
    tuning: str
    # (position of the reading node, the value's name, whether it was one to keep in registers)
    # of the first read the kernel could not serve from registers; None: every read was served
    unheld: tuple | None


class KernelEmitter(Protocol):
    nodes: list
    persistent: bool  # (known once generated)
    index_checks: list

    def generate(self, name: str) -> Emitted: ...


Make = Callable[..., KernelEmitter]  # make(nodes, kept=frozenset()) -> an emitter for those nodes
# split_reduction(make, nodes, name, first_source, chunks) -> the stage kernel and its combining kernels
SplitReduction = Callable[[Make, list, str, Emitted, int], list]


def partition(kernel: Kernel, make: Make, split_reduction: SplitReduction, splittable: Callable[[object, set], bool],
              limits: GpuLimits, internal: frozenset = frozenset()) -> list:
    """The kernel's nodes as generated kernels (named kernel3, kernel3_N, ... each name made once,
    since a split reduction names its workspaces after it; the caller renumbers them).  `splittable(node, names)`: can the emitter reduce this node's
    rows in chunks, with the kernel's nodes `names`; `internal`: values no other step reads."""
    readers: dict[str, set[str]] = {}
    names_made = itertools.count(1)
    if internal:
        for node in kernel.nodes:
            for read, _ in record(node.data).loads:
                readers.setdefault(read, set()).add(node.name)

    def generate(nodes: list, name: str) -> list:
        names = {node.name for node in nodes}
        changed = row_size_change(kernel, nodes)
        if changed is not None:
            return split_at(nodes, name, changed, "inner loops of another size")
        # (pointwise kernels only: reductions may be split or cut, regenerating their nodes)
        pointwise = not any(isinstance(node.data, Reduction) for node in nodes)
        only_here = {n for n in names & internal if readers.get(n, set()) <= names}  # (values no other kernel reads)
        kept = set(only_here) if pointwise else set()
        while True:
            first = make(nodes, frozenset(kept))
            source = first.generate(name)
            if source.unheld is None:
                break
            position, value, was_kept = source.unheld
            if not was_kept:
                return split_at(nodes, name, position, f"{value} is read where this kernel holds no value of it")
            kept.discard(value)  # (stored after all)
        chunks = split_count(first, source, limits, splittable)
        if chunks:
            return split_reduction(make, nodes, name, source, chunks)
        cut = _cut_for_split(make, kernel, nodes, name, limits, splittable) \
            if source.rnumel is not None and not first.persistent else None
        if cut is not None:
            return split_at(nodes, name, cut, "")
        if not pointwise:
            return [_with_reductions_kept(make, nodes, name, source, only_here)]
        return [source]

    def split_at(nodes: list, name: str, position: int, reason: str) -> list:
        if position == 0:
            raise NotImplementedError(f"a Triton kernel cannot start with {nodes[0].name}: {reason}")
        head = generate(nodes[:position], name)
        return head + generate(nodes[position:], f"{kernel.name}_{next(names_made)}")

    if not all(isinstance(node.data, (Pointwise, Reduction)) for node in kernel.nodes):
        raise NotImplementedError("a Triton kernel of other loops")
    return generate(list(kernel.nodes), kernel.name)


def row_size_change(kernel: Kernel, nodes: list) -> int | None:
    """The position of the first node whose inner loop (or reduction) runs over rows of another
    size than the first one's: one GPU kernel has one row size (RBLOCK's range)."""
    groups = [group for group in Kernel(kernel.name, kernel.outer, nodes).groups() if group.reduction or group.inner]
    if not groups:
        return None
    first = product(groups[0].row_ranges())
    for group in groups[1:]:
        if sympy.expand(product(group.row_ranges()) - first) != 0:
            return nodes.index(group.nodes[0])
    return None


def split_count(emitter: KernelEmitter, source: Emitted, limits: GpuLimits, splittable) -> int:
    """How many chunks to reduce the rows in (0: no split)."""
    if source.rnumel is None or emitter.persistent or emitter.index_checks:
        return 0
    rnumel, xnumel = sympy.sympify(source.rnumel), sympy.sympify(source.xnumel)
    if not (rnumel.is_number and xnumel.is_number) or int(rnumel) < limits.split_min_rnumel:
        return 0
    nodes = emitter.nodes
    names = {node.name for node in nodes}
    if not all(isinstance(node.data, Reduction) and splittable(node, names) for node in nodes):
        return 0
    if any(reads(node) & names for node in nodes):
        return 0  # (a reduction of another's result, as softmax's sum of its max: a chunk lacks it)
    programs = -(-int(xnumel) // source.XBLOCK)
    if source.tuning == "columns":
        # A column sum streams rows of XBLOCK outputs: about 2048 programs in all kept an H100's
        # memory busy (a bias gradient of [12608, 3072]: 81 us in 2 chunks, 44 us in 32;
        # scratch sweep of XBLOCK, RBLOCK, warps and chunks over eight shapes, 2026-11-24).
        if programs >= limits.column_programs // 2:
            return 0
        chunks = min(limits.max_chunks, -(-limits.column_programs // programs), int(rnumel) // 64)
        return chunks if chunks >= 2 else 0
    if programs >= limits.programs // 2:
        return 0
    return max(2, min(64, limits.programs // programs, int(rnumel) // 1024))


def _cut_for_split(make: Make, kernel: Kernel, nodes: list, name: str, limits: GpuLimits, splittable) -> int | None:
    """Where to cut a kernel that does not split as a whole so that a run of its reductions can:
    the pointwise nodes around them (a bias gradient's cast, batch norm's running statistics,
    the product between two batch norms' backward sums) go to kernels of their own.  None: no
    run of reductions would split."""
    start = 0
    for reduces, run in itertools.groupby(nodes, key=lambda node: isinstance(node.data, Reduction)):
        run = list(run)
        end = start + len(run)
        if reduces and (start, end) != (0, len(nodes)) and row_size_change(kernel, run) is None:
            emitter = make(run)
            source = emitter.generate(name)
            if source.unheld is None and split_count(emitter, source, limits, splittable):
                return start if start > 0 else end
        start = end
    return None


def _with_reductions_kept(make: Make, nodes: list, name: str, source: Emitted, kept: set) -> Emitted:
    """A whole reduction kernel (neither split nor cut) made again with `kept`, the values only it
    reads, held in registers, reductions' results among them (a batch norm's statistics feeding
    its epilogue: a buffer, ~6 us of host time, and a store saved); a value read where the kernel
    holds none of it is stored after all."""
    kept = set(kept)
    while kept:
        again = make(nodes, frozenset(kept)).generate(name)
        if again.unheld is None:
            return again
        kept.discard(again.unheld[1])
    return source
