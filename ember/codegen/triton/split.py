"""GPU kernel partitioning: a scheduled kernel as one or more Triton kernels.  Split where a
node cannot share registers with the nodes before it (the emitter's _Split), values kept in
registers where only their kernel reads them (_Stored when it cannot), long reductions over
few outputs split into chunks reduced by a second kernel, and looped reductions cut where the
rest would not fit.  (Issue 33: these decisions belong in a scheduling pass.)"""
from __future__ import annotations

import sympy
import torch

from ...lowering.analysis import record
from ...lowering.ir import Pointwise, Reduction
from ...scheduling.scheduler import Kernel
from .kernel import TritonKernel
from .ops import TritonSource, _Split, _Stored
from .reduce import _BLOCK_REDUCE


def triton_kernels(kernel: Kernel, buffer_dtypes: dict[str, torch.dtype], offsets: dict | None = None,
                   int64: bool = False, maybe_empty: frozenset = frozenset(),
                   internal: frozenset = frozenset()) -> list[TritonSource]:
    """A scheduled kernel as Triton kernels, split where a node cannot share registers with the
    nodes before it; named kernel3, kernel3_1, ...  `internal`: values that no other step reads
    (the scheduler's); those of a pointwise Triton kernel read only in it, where it holds them
    in registers, are not stored."""
    from ...lowering.ir import Scatter

    if any(isinstance(node.data, Scatter) for node in kernel.nodes):  # (a kernel of its own)
        return [TritonKernel(list(kernel.nodes), [], buffer_dtypes, offsets, int64, maybe_empty).generate_scatter(
            kernel.name if phase == "base" else f"{kernel.name}_1", phase) for phase in ("base", "update")]
    if not all(isinstance(node.data, (Pointwise, Reduction)) for node in kernel.nodes):
        raise NotImplementedError("a Triton kernel of other loops")
    readers: dict[str, set[str]] = {}
    if internal:
        for node in kernel.nodes:
            for read, _ in record(node.data).loads:
                readers.setdefault(read, set()).add(node.name)

    def make(nodes: list, kept_here: frozenset = frozenset()) -> TritonKernel:
        return TritonKernel(nodes, kernel.outer, buffer_dtypes, offsets, int64, maybe_empty, kept_here)

    def generate(nodes: list, name: str) -> list[TritonSource]:
        names = {node.name for node in nodes}
        # (pointwise kernels only: reductions may be split or cut, regenerating their nodes)
        pointwise = not any(isinstance(node.data, Reduction) for node in nodes)
        kept_here = {n for n in names & internal if readers.get(n, set()) <= names} if pointwise else set()
        try:
            while True:
                first = make(nodes, frozenset(kept_here))
                try:
                    source = first.generate(name)
                    break
                except _Stored as stored:
                    kept_here.discard(stored.name)
        except _Split as split:
            if split.position == 0:
                raise NotImplementedError(f"a Triton kernel cannot start with {nodes[0].name}: {split}") from None
            head = generate(nodes[:split.position], name)
            return head + generate(nodes[split.position:], f"{kernel.name}_{len(head)}")
        chunks = _split_count(first, source)
        if chunks:
            return _split_reduction(make, nodes, name, source, chunks)
        cut = _cut_for_split(make, nodes, name) if source.rnumel is not None and not first.persistent else None
        if cut is not None:
            head = generate(nodes[:cut], name)
            return head + generate(nodes[cut:], f"{kernel.name}_{len(head)}")
        if not pointwise:
            kept_here = {n for n in names & internal if readers.get(n, set()) <= names}
            return [_with_reductions_kept(make, nodes, name, source, kept_here)]
        return [source]

    return _renumbered(generate(list(kernel.nodes), kernel.name), kernel.name)


# Split reductions: rows this long, over too few outputs to fill the GPU, are reduced in chunks
# by a grid of programs (outputs x chunks), then the chunks' partial results by a second kernel.
SPLIT_MIN_RNUMEL = 4096
SPLIT_PROGRAMS = 264  # about two programs per streaming multiprocessor of an H100
SPLIT_COLUMN_PROGRAMS = 2048  # a column sum's programs (split into row chunks)
SPLIT_MAX_CHUNKS = 256


def _split_count(kernel: TritonKernel, source: TritonSource) -> int:
    """How many chunks to reduce the rows in (0: no split)."""
    if source.rnumel is None or kernel.persistent or kernel.index_checks:
        return 0
    rnumel, xnumel = sympy.sympify(source.rnumel), sympy.sympify(source.xnumel)
    if not (rnumel.is_number and xnumel.is_number) or int(rnumel) < SPLIT_MIN_RNUMEL:
        return 0
    names = {node.name for node in kernel.nodes}
    if not all(isinstance(node.data, Reduction) and (node.data.spec.reduction_type in _BLOCK_REDUCE or _paired_welford(
            node, names)) for node in kernel.nodes):
        return 0
    from ...lowering.analysis import reads

    if any(reads(node) & names for node in kernel.nodes):
        return 0  # (a reduction of another's result, as softmax's sum of its max: a chunk lacks it)
    programs = -(-int(xnumel) // source.XBLOCK)
    if source.tuning == "columns":
        # A column sum streams rows of XBLOCK outputs: about 2048 programs in all kept an H100's
        # memory busy (a bias gradient of [12608, 3072]: 81 us in 2 chunks, 44 us in 32;
        # scratch sweep of XBLOCK, RBLOCK, warps and chunks over eight shapes, 2026-11-24).
        if programs >= SPLIT_COLUMN_PROGRAMS // 2:
            return 0
        chunks = min(SPLIT_MAX_CHUNKS, -(-SPLIT_COLUMN_PROGRAMS // programs), int(rnumel) // 64)
        return chunks if chunks >= 2 else 0
    if programs >= SPLIT_PROGRAMS // 2:
        return 0
    return max(2, min(64, SPLIT_PROGRAMS // programs, int(rnumel) // 1024))


def _paired_welford(node, names: set) -> bool:
    """A Welford mean or m2 whose mate is in the same kernel (their chunks combine together)."""
    return node.data.spec.reduction_type in ("welford_mean", "welford_m2") and node.data.partner is not None and \
        set(node.data.partner) <= names


def _cut_for_split(make, nodes: list, name: str) -> int | None:
    """Where to cut a kernel that does not split as a whole so that a run of its reductions can:
    the pointwise nodes around them (a bias gradient's cast, batch norm's running statistics,
    the product between two batch norms' backward sums) go to kernels of their own.  None: no
    run of reductions would split."""
    kinds = [isinstance(node.data, Reduction) for node in nodes]
    start = 0
    while start < len(nodes):
        if not kinds[start]:
            start += 1
            continue
        end = start
        while end < len(nodes) and kinds[end]:
            end += 1
        if (start, end) != (0, len(nodes)):
            run = make(nodes[start:end])
            try:
                splits = _split_count(run, run.generate(name))
            except _Split:
                splits = 0
            if splits:
                return start if start > 0 else end
        start = end
    return None


def _with_reductions_kept(make, nodes: list, name: str, source: TritonSource, kept: set) -> TritonSource:
    """A whole reduction kernel (neither split nor cut) made again with `kept`, the values only it
    reads, held in registers, reductions' results among them (a batch norm's mean and variance
    feeding its epilogue, a layer norm's statistics at inference: each a buffer the wrapper
    allocated, ~6 us of host time on an H100 machine, and a store); a value read where the
    kernel holds none of it is stored after all."""
    kept = set(kept)
    while kept:
        try:
            return make(nodes, frozenset(kept)).generate(name)
        except _Stored as stored:
            kept.discard(stored.name)
    return source


def _split_reduction(make, nodes: list, name: str, source: TritonSource, chunks: int) -> list[TritonSource]:
    """The first pass (each program reduces one chunk of its outputs' rows into a workspace),
    then one combining kernel per reduction."""
    kernel = make(nodes)
    kernel.split = chunks
    stage = kernel.generate(name)
    rblock = source.RBLOCK
    stage.XBLOCK, stage.RBLOCK, stage.num_warps = source.XBLOCK, rblock, source.num_warps
    per_chunk = -(-int(source.rnumel) // chunks)
    if source.tuning == "columns" and per_chunk >= 1024:
        stage.num_warps = 8  # (long chunks of few columns: batch norm's statistics over channels)
    stage.constexprs = {"RCHUNK": -(-per_chunk // rblock) * rblock}
    stage.grid_y = chunks
    xnumel = int(sympy.sympify(source.xnumel))
    stage.workspaces = [(f"{name}_ws{k}", chunks * xnumel, acc) for k, (_, _, acc) in enumerate(kernel.partials)]
    sources = [stage]
    slots = {node.name: k for k, (node, _, _) in enumerate(kernel.partials)}
    for k, (node, kind, acc) in enumerate(kernel.partials):
        if not kind.startswith("welford"):
            combine = make([node]).generate_combine(f"{name}_c{k}", kind, acc, chunks, kernel.outer)
            combine.inputs = [stage.workspaces[k][0]]
        elif node.data.spec.reduction_type == "welford_mean":  # (the pair's one combining kernel)
            m2 = next(n for n, _, _ in kernel.partials if n.name in node.data.partner and n is not node)
            combine = make([node, m2]).generate_welford_combine(
                f"{name}_c{k}", acc, chunks, kernel.outer, int(source.rnumel), stage.constexprs["RCHUNK"])
            combine.inputs = [stage.workspaces[k][0], stage.workspaces[slots[m2.name]][0]]
        else:
            continue
        sources.append(combine)
    return sources


def _renumbered(sources: list[TritonSource], base: str) -> list[TritonSource]:
    """kernel3, kernel3_1, kernel3_2, ... in order (nested splits name them out of order)."""
    for position, source in enumerate(sources):
        name = base if position == 0 else f"{base}_{position}"
        if source.name != name:
            source.source = source.source.replace(f"def {source.name}(", f"def {name}(", 1)
            source.name = name
    return sources
