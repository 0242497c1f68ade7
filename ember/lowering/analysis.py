"""Running a loop body with a recording ops handler: what it reads, how much it computes.

The scheduler uses `reads()` for dependencies and fusion legality; the lowering uses
`op_count()` to decide whether a value read twice is worth storing.
"""
from __future__ import annotations

import sympy

from .ir import ComputedBuffer, Loops, Reduction, Scatter, index_vars


class RecordingOps:
    """Implements every ops method by recording; values are opaque tokens."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, sympy.Expr]] = []
        self.count = 0
        self._indirect = 0

    def load(self, name: str, index):
        self.loads.append((name, sympy.sympify(index)))
        return f"load_{name}"

    def constant(self, value, dtype):
        return "constant"

    def index_expr(self, expr, dtype):
        return "index"

    def to_dtype(self, value, dtype):
        return value

    def indirect_indexing(self, value, size, site="", wrap_negative=True):
        self._indirect += 1
        return sympy.Symbol(f"indirect{self._indirect}", integer=True, nonnegative=True)

    def masked(self, mask, body, other, dtype):
        self.count += 1
        return body()

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def operation(*args, **kwargs):
            self.count += 1
            return name

        return operation


def record(loops: Loops) -> RecordingOps:
    ops = RecordingOps()
    index = index_vars(len(loops.ranges))
    if isinstance(loops, Scatter):
        loops.base(ops, index_vars(len(loops.out_ranges), "o"))
        loops.target(ops, index)
        loops.inner_fn(ops, index)
    elif isinstance(loops, Reduction):
        loops.inner_fn(ops, index, index_vars(len(loops.spec.reduction_ranges), "r"))
    else:
        loops.inner_fn(ops, index)
    return ops


def reads(buffer: ComputedBuffer) -> set[str]:
    return {name for name, _ in record(buffer.data).loads}


def op_count(loops: Loops) -> int:
    return record(loops).count
