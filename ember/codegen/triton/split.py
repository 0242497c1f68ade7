"""A scheduled kernel as Triton kernels: the partitioning pass (scheduling/gpu_partition.py)
decides where kernels split, what stays in registers and which reductions run in chunks; this
module hands it the Triton emitter and makes a split reduction's kernels (each program reduces
one chunk of the rows into a workspace, then a combining kernel per reduction)."""
from __future__ import annotations

import functools

import sympy
import torch

from ...scheduling.gpu_partition import GpuLimits, partition
from ...scheduling.scheduler import Kernel
from .kernel import TritonKernel
from .ops import TritonSource
from .reduce import _BLOCK_REDUCE


def triton_kernels(kernel: Kernel, buffer_dtypes: dict[str, torch.dtype], offsets: dict | None = None,
                   int64: bool = False, maybe_empty: frozenset = frozenset(),
                   internal: frozenset = frozenset()) -> list[TritonSource]:
    """A scheduled kernel as Triton kernels, named kernel3, kernel3_1, ...  `internal`: values
    that no other step reads (the scheduler's); those a kernel reads only where it computes
    them it holds in registers, never stored."""
    from ...lowering.ir import Scatter

    if any(isinstance(node.data, Scatter) for node in kernel.nodes):  # (a kernel of its own)
        return [TritonKernel(list(kernel.nodes), [], buffer_dtypes, offsets, int64, maybe_empty).generate_scatter(
            kernel.name if phase == "base" else f"{kernel.name}_1", phase) for phase in ("base", "update")]

    def make(nodes: list, kept_here: frozenset = frozenset()) -> TritonKernel:
        return TritonKernel(nodes, kernel.outer, buffer_dtypes, offsets, int64, maybe_empty, kept_here)

    sources = partition(kernel, make, _split_reduction, _splittable, gpu_limits(), internal)
    incomplete = [source.name for source in sources if source.unheld is not None]
    if incomplete:  # (never launched: the graph runs as ATen calls)
        raise NotImplementedError(f"Triton kernels {incomplete} read values they do not hold")
    return _renumbered(sources, kernel.name)


@functools.lru_cache(maxsize=None)
def gpu_limits() -> GpuLimits:
    """The partitioning thresholds for this machine's GPU: programs to fill it, two per streaming
    multiprocessor (the defaults, an H100's, under Triton's interpreter)."""
    if torch.cuda.is_available():
        return GpuLimits(programs=2 * torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    return GpuLimits()


def _splittable(node, names: set) -> bool:
    """Can a chunk of this reduction's rows be reduced on its own: a block reduction, or a Welford
    mean or m2 whose mate is in the same kernel (their chunks combine together)."""
    kind = node.data.spec.reduction_type
    return kind in _BLOCK_REDUCE or kind in ("welford_mean", "welford_m2") and node.data.partner is not None and \
        set(node.data.partner) <= names


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
