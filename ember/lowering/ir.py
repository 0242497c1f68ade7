"""ember's define-by-run loop-level IR.

A tensor value during lowering is one of:

    InputBuffer     a graph input, read through its layout
    ComputedBuffer  a realized Pointwise, Reduction or Scatter: ember generates the loops that store it
    ExternBuffer    the output of an extern call (matmul, convolution, an ATen fallback)
    Pointwise       not yet stored: `inner_fn(ops, index)` computes one element on demand,
                    so consumers inline it
    View            another value read through an index transformation (permute, slice, ...)

A loop body is a function of an ops handler and sympy index expressions: the same body is
printed, analysed, or turned into C++ / Triton by passing another handler.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import sympy
import torch

from .indexing import contiguous_strides, product, simplify_index
from .symbolic import is_size_symbol

Expr = sympy.Expr


def index_vars(count: int, prefix: str = "i") -> list[sympy.Symbol]:
    return [sympy.Symbol(f"{prefix}{n}", integer=True, nonnegative=True) for n in range(count)]


def _exprs(values) -> list[Expr]:
    return [sympy.Integer(v) if isinstance(v, int) else v for v in values]


def _loader(name: str, layout: "Layout") -> Callable:
    return lambda ops, index: ops.load(name, layout.index(index))


@dataclasses.dataclass
class Layout:
    device: torch.device
    dtype: torch.dtype
    size: list[Expr]
    stride: list[Expr]
    offset: Expr = sympy.Integer(0)

    def index(self, index: Sequence[Expr]) -> Expr:
        expr = self.offset
        for var, stride, size in zip(index, self.stride, self.size):
            if size != 1:
                expr = expr + var * stride
        return expr

    def is_contiguous(self) -> bool:
        return [s for s, n in zip(self.stride, self.size) if n != 1] == \
            [s for s, n in zip(contiguous_strides(self.size), self.size) if n != 1]

    @staticmethod
    def contiguous(device, dtype, size) -> "Layout":
        size = _exprs(size)
        return Layout(device, dtype, size, contiguous_strides(size))


def store_layout(node) -> "Layout":
    """The layout a computed node's loops store through: its buffer's, or for a pointwise node
    refined to a kernel's finer ranges (scheduler.refine), the same memory seen over those ranges."""
    return getattr(node.data, "store_layout", None) or node.layout


class IRNode:
    dtype: torch.dtype
    device: torch.device

    def get_size(self) -> list[Expr]:
        raise NotImplementedError

    def make_loader(self) -> Callable:
        raise NotImplementedError

    def numel(self) -> Expr:
        return product(self.get_size())


class Buffer(IRNode):
    """A value stored in memory under `name`."""

    def __init__(self, name: str, layout: Layout) -> None:
        self.name = name
        self.layout = layout
        self.dtype = layout.dtype
        self.device = layout.device

    def get_size(self) -> list[Expr]:
        return list(self.layout.size)

    def make_loader(self) -> Callable:
        return _loader(self.name, self.layout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.layout.dtype}, size={self.layout.size})"


class InputBuffer(Buffer):
    pass


class ComputedBuffer(Buffer):
    def __init__(self, name: str, layout: Layout, data: "Loops") -> None:
        super().__init__(name, layout)
        self.data = data


class ExternBuffer(Buffer):
    """Output of a call the wrapper makes itself (ATen matmul, convolution, fallbacks)."""

    def __init__(self, name: str, layout: Layout, kernel: "ExternCall") -> None:
        super().__init__(name, layout)
        self.kernel = kernel


@dataclasses.dataclass
class ExternCall:
    target: Any  # an OpOverload or a Python callable
    args: tuple  # IR buffers / constants, with the same structure as the ATen call
    kwargs: dict
    outputs: list  # ExternBuffer(s) or None for results ember does not keep
    origin: str = ""  # the ATen node it came from
    multi_output: bool = False
    reason: str = ""  # why it is an extern call (fallback reason), for the logs
    stack_trace: str = ""  # the user source that made the ATen node


class Loops(IRNode):
    """An element-wise computation that is not stored yet."""

    def __init__(self, device, dtype, ranges: list[Expr], inner_fn: Callable, origin: str = "") -> None:
        self.device = device
        self.dtype = dtype
        self.ranges = _exprs(ranges)
        self.inner_fn = inner_fn
        self.origin = origin

    def get_size(self) -> list[Expr]:
        return list(self.ranges)

    def make_loader(self) -> Callable:  # (Pointwise inlines; the others are read from memory)
        raise RuntimeError(f"a {type(self).__name__.lower()} must be realized before it is read")


class Pointwise(Loops):
    """Not stored until something needs memory; then `realized` is the buffer that holds it,
    and every reader (views included) loads from there instead of recomputing."""

    realized: "Buffer | None" = None
    # Where it is stored when nothing asks for another layout: None (contiguous), or the
    # channels-last layout eager gives it (lowering/graph.py).
    preferred_layout: "Layout | None" = None

    def make_loader(self) -> Callable:
        if self.realized is not None:
            return self.realized.make_loader()
        return self.inner_fn


@dataclasses.dataclass
class ReductionSpec:
    reduction_type: str  # sum, prod, max, min, argmax, argmin, any, all, welford_mean, welford_m2
    reduction_ranges: list[Expr]
    src_dtype: torch.dtype


class Reduction(Loops):
    """`inner_fn(ops, index, reduction_index)` reduced over `reduction_ranges`."""

    def __init__(self, device, dtype, ranges, inner_fn, spec: ReductionSpec, origin: str = "") -> None:
        super().__init__(device, dtype, ranges, inner_fn, origin)
        self.spec = spec
        # welford_mean / welford_m2 of the same input: (mean buffer, m2 buffer); a kernel holding
        # both computes them in one pass.
        self.partner: tuple[str, str] | None = None


class Scatter(Loops):
    """A buffer written in two passes: `base(ops, index)` over the output's ranges, then for
    each index of the update ranges `inner_fn(ops, index)` written (or added, if accumulate) at
    `target(ops, index)`, an output index that may be data-dependent (indirect_indexing).
    Updates run in order, so duplicates behave as in eager (accumulate: all add; else last wins).
    `direct_inner`: the innermost update index maps to distinct outputs, so it may vectorize."""

    def __init__(self, device, dtype, ranges, inner_fn, out_ranges: list[Expr], base: Callable,
                 target: Callable, accumulate: bool, direct_inner: bool, origin: str = "") -> None:
        super().__init__(device, dtype, ranges, inner_fn, origin)
        self.out_ranges = _exprs(out_ranges)
        self.base = base
        self.target = target
        self.accumulate = accumulate
        self.direct_inner = direct_inner

    def get_size(self) -> list[Expr]:
        return list(self.out_ranges)


class View(IRNode):
    def __init__(self, base: IRNode, size: list[Expr], reindex: Callable[[list[Expr]], list[Expr]]) -> None:
        self.base = base
        self.size = _exprs(size)
        self.reindex = reindex
        self.dtype = base.dtype
        self.device = base.device

    def get_size(self) -> list[Expr]:
        return list(self.size)

    def make_loader(self) -> Callable:
        inner, reindex = self.base.make_loader(), self.reindex
        return lambda ops, index: inner(ops, reindex(list(index)))


def strided_view_of(value: IRNode) -> tuple[Buffer, Layout] | None:
    """If `value` is a buffer read through views that only restride it, the equivalent layout."""
    chain = []
    node = value
    while isinstance(node, View):
        chain.append(node)
        node = node.base
    if isinstance(node, Pointwise) and node.realized is not None:
        node = node.realized
    if not isinstance(node, Buffer):
        return None
    size = value.get_size()
    variables = index_vars(len(size), "q")
    index = list(variables)
    for view in chain:
        index = view.reindex(index)

    symbolic = any(not s.is_number for s in size)
    bounds = {var: size - 1 for var, size in zip(variables, value.get_size()) if size.is_number or symbolic}
    flat = simplify_index(sympy.expand(node.layout.index(index)), bounds)
    stride = [flat.coeff(var) for var in variables]
    offset = flat.subs({var: 0 for var in variables})
    rebuilt = offset + sum((var * s for var, s in zip(variables, stride)), sympy.Integer(0))
    if sympy.expand(rebuilt - flat) != 0 or not all(_size_only(s) for s in [*stride, offset]):
        return None
    return node, Layout(node.layout.device, node.layout.dtype, size, stride, offset)


def _size_only(expr) -> bool:
    """A number, or an expression of size symbols alone (no index variable)."""
    return expr.is_number or all(is_size_symbol(s) for s in expr.free_symbols)


class ReinterpretView(IRNode):
    """A buffer read with another size/stride/offset (what torch.as_strided makes)."""

    def __init__(self, buffer: Buffer, layout: Layout) -> None:
        self.buffer = buffer
        self.layout = layout
        self.dtype = layout.dtype
        self.device = layout.device

    def get_size(self):
        return list(self.layout.size)

    def make_loader(self):
        return _loader(self.buffer.name, self.layout)
