"""Dynamic shapes at capture: which sizes are symbols, fakes with symbolic sizes, and the
relations the trace relied on as guards.

    ShapePlan      what a capture may make dynamic: every size (`dynamic=True`), dims marked with
                   `mark_dynamic` (any mode), dims seen changing (`dynamic=None`); `mark_static`
                   and sizes 0 and 1 stay constants, as in torch.compile
    symbolic_fake  the input's fake with a ShapeEnv symbol per dynamic size
    shape_guards   the ShapeEnv's guards as Python expressions over the frame's sources

What capture cannot do with a symbol (a size read into Python) raises StaticShapesNeeded, and the
frame is captured again with static shapes (the recompile log says why).
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

import sympy
import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils._sympy.printers import PythonPrinter

from .. import logs

log_recompiles = logs.get("recompiles")


class StaticShapesNeeded(Exception):
    """A symbolic size reached code that needs a number: capture the frame with static shapes.
    `value`: the symbolic value where known (if its symbols are dynamic scalars, only those become
    constants again: scalars.py)."""

    def __init__(self, reason: str, value=None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.value = value


@dataclasses.dataclass(frozen=True)
class ShapeSource(TorchSource):
    """Names a graph input for the ShapeEnv by its guard expression (`x`, `self.weight`)."""
    expr: str

    @property
    def name(self) -> str:
        # A property in torch 2.13's Source, a method in older ones: a str that calls to itself.
        return _Name(self.expr)

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def reconstruct(self, codegen) -> None:
        raise NotImplementedError


class _Name(str):
    def __call__(self) -> str:
        return str(self)


def marked_dims(value: torch.Tensor, attribute: str) -> set[int]:
    return set(getattr(value, attribute, ()) or ())


@dataclasses.dataclass
class ShapeState:
    """Per code object: sizes seen changing between calls (source expr -> dims), and whether its
    capture needed static shapes, so that later captures start so."""
    automatic: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    static: bool = False
    # Python ints and floats seen changing (source exprs): graph inputs from the next capture on
    # (scalars.py); those that capture needed as constants after all stay constants.
    scalars: set[str] = dataclasses.field(default_factory=set)
    static_scalars: set[str] = dataclasses.field(default_factory=set)
    # graph key -> what the backend compiled for it (graph_reuse.py: recompiles that capture alike)
    compiled: dict = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class ShapePlan:
    dynamic: bool | None  # compile(dynamic=...)
    automatic: dict[str, set[int]] = dataclasses.field(default_factory=dict)  # source expr -> dims
    static: bool = False  # this capture falls back to static shapes
    state: ShapeState | None = None  # the code's record (dynamic scalars are read from it)

    def dynamic_scalar(self, expr: str) -> bool:
        """Does the int or float at `expr` become a graph input (a symbol) in this capture?"""
        state = self.state
        return (state is not None and self.dynamic is not False and not self.static
                and expr in state.scalars and expr not in state.static_scalars)

    def dims(self, value: torch.Tensor, expr: str) -> tuple[int, ...]:
        """The dims of input `value` (at `expr`) that become symbols."""
        if self.static or value.layout != torch.strided:
            return ()
        wanted = marked_dims(value, "_ember_dynamic_dims") | marked_dims(value, "_dynamo_dynamic_indices")
        if self.dynamic is True:
            wanted = set(range(value.dim()))
        elif self.dynamic is None:
            wanted |= self.automatic.get(expr, set())
        wanted -= marked_dims(value, "_ember_static_dims")
        return tuple(sorted(d for d in wanted if 0 <= d < value.dim() and value.shape[d] >= 2))


def symbolic_fake(fake_mode, value: torch.Tensor, expr: str, dims: tuple[int, ...]) -> torch.Tensor:
    if fake_mode.shape_env is None:  # (attached at the first dynamic input; others stay static)
        fake_mode.shape_env = ShapeEnv()
        fake_mode.static_shapes = False
    sizes = [DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(value.dim())]
    context = StatelessSymbolicContext(dynamic_sizes=sizes)
    return fake_mode.from_tensor(value, symbolic_context=context, source=ShapeSource(expr))


def has_symbols(value) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    if isinstance(value, (tuple, list)):
        return any(has_symbols(item) for item in value)
    return False


def shape_guards(shape_env: ShapeEnv | None, fakes: list, exprs: list[str], static_too: bool = False) -> list[str]:
    """What a trace assumed about the symbolic sizes of inputs `fakes` (at source expressions
    `exprs`), as Python expressions over those sources: each size, stride and storage offset
    against its expression as the trace left it (`x.size()[0] == 4` where it was specialized,
    which produce_guards does not say; `y.size()[0] == x.size()[1]`), each symbol read where it
    first occurs; then the ShapeEnv's relations and ranges.  Static sizes are left to the tensor
    guards unless `static_too`."""
    if shape_env is None or not fakes:
        return []
    names: dict[sympy.Symbol, sympy.Symbol] = {}
    checks: list[str] = []
    printer = PythonPrinter()
    places = []
    for fake, expr in zip(fakes, exprs):
        if isinstance(fake, (torch.SymInt, torch.SymFloat)):  # a Python scalar input (scalars.py)
            places.append((expr, fake))
            continue
        places += [(f"{expr}.size()[{d}]", s) for d, s in enumerate(fake.shape)]
        places += [(f"{expr}.stride()[{d}]", s) for d, s in enumerate(fake.stride())]
        places.append((f"{expr}.storage_offset()", fake.storage_offset()))
    # Name every symbol where it first occurs by itself before printing any expression: a stride
    # s1*s2 comes before the stride s2 of a[:, ::2] (pinned by tests/codegen/test_dynamic_regressions.py).
    simplified = {text: shape_env.simplify(value.node.expr) for text, value in places
                  if isinstance(value, (torch.SymInt, torch.SymFloat))}
    where: dict[sympy.Symbol, str] = {}
    for text, expr in simplified.items():
        if isinstance(expr, sympy.Symbol) and expr not in where:
            where[expr] = text
            names[expr] = sympy.Symbol(text, integer=True)
    for text, value in places:
        if not isinstance(value, (torch.SymInt, torch.SymFloat)):
            if static_too:
                checks.append(f"{text} == {value}")
            continue
        expr = simplified[text]
        if isinstance(expr, sympy.Symbol) and where[expr] == text:
            continue
        unnamed = expr.free_symbols - names.keys()
        if unnamed:  # (no size, stride or offset is that symbol by itself: nothing to read it from)
            raise StaticShapesNeeded(f"{text} is {expr}, and no input's size is {sorted(map(str, unnamed))[0]}")
        checks.append(f"{text} == {printer.doprint(expr.xreplace(names))}")
    checks += list(shape_env.produce_guards(fakes, [ShapeSource(expr) for expr in exprs]))
    # The printer's `math.isnan(lr)`, `torch.sym_float(n)` (float symbols): names a parameter of
    # the guarded function cannot shadow (GUARD_NAMESPACE).
    checks = [_MODULE_NAME.sub(r"__ember_\1.", check) for check in checks]
    return list(dict.fromkeys(checks))


_MODULE_NAME = re.compile(r"(?<![\w.'\"])(math|torch)\.")
GUARD_NAMESPACE = {"__ember_math": math, "__ember_torch": torch}


class SpecializationWatch:
    """Sizes the user marked dynamic that the program makes constants: `after()` runs after each
    instruction and remembers the line where a marked symbol became a number; `check()` raises."""

    def __init__(self, shape_env: ShapeEnv) -> None:
        self.shape_env = shape_env
        self.marked: dict[sympy.Symbol, str] = {}  # symbol -> "x.size(0)" (mark_dynamic: an error)
        self.automatic: dict[sympy.Symbol, str] = {}  # other dynamic sizes (specialized: a log line)
        self.seen = len(shape_env.replacements)
        self.where: dict[sympy.Symbol, str] = {}  # symbol -> "file:line: code"

    def mark(self, fake: torch.Tensor, expr: str, dims: set[int] | tuple[int, ...], user: bool = True) -> None:
        table = self.marked if user else self.automatic
        for dim in dims:
            if dim < fake.dim() and isinstance(fake.shape[dim], torch.SymInt):
                symbol = fake.shape[dim].node.expr
                if isinstance(symbol, sympy.Symbol) and symbol not in self.marked:
                    table.setdefault(symbol, f"{expr}.size({dim})")

    def after(self, where: Callable[[], str]) -> None:
        count = len(self.shape_env.replacements)
        if count == self.seen:
            return
        self.seen = count
        for symbol in (*self.marked, *self.automatic):
            if symbol not in self.where and self.shape_env.simplify(symbol).is_number:
                self.where[symbol] = where()
                if symbol in self.automatic:
                    log_recompiles.debug("%s is a constant (%s) from %s on", self.automatic[symbol],
                                         self.shape_env.simplify(symbol), self.where[symbol])

    def check(self) -> None:
        for symbol, size in self.marked.items():
            value = self.shape_env.simplify(symbol)
            if value.is_number:
                at = self.where.get(symbol, "a line ember could not place")
                raise DynamicShapeError(
                    f"{size} was marked dynamic (ember.mark_dynamic), but the program makes it the constant "
                    f"{value} at {at}. Remove the mark_dynamic for that dimension, or change the code so that "
                    f"it does not depend on that size being {value}.")


class DynamicShapeError(RuntimeError):
    """A size marked dynamic that the program specializes (torch.compile's ConstraintViolationError)."""
