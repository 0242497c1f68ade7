"""Symbolic sizes in traced graphs (dynamic shapes).

A graph traced with symbolic sizes (a ShapeEnv's `s0`, `s1`) passes them to its ops; in the FX
graph each such SymInt is a node computed from the inputs when it runs:

    sym_size = torch.ops.aten.sym_size.int(primals_1, 0)      # s0
    mul = operator.mul(sym_size, 2)                           # 2*s0
    view = torch.ops.aten.view.default(primals_1, [mul, -1])

`SymbolNodes` records which input (a size, stride or storage offset, or a SymInt input) first holds
each symbol and builds each expression over them once.  `input_guards` turns the ShapeEnv's guards
into one predicate over the inputs: a compiled graph only runs for inputs it was made for.
"""
from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable

import sympy
import torch
import torch.fx
from torch.utils._sympy.functions import (CeilToInt, FloatPow, FloatTrueDiv, FloorDiv, FloorToInt, IntTrueDiv, Max,
                                         Min, Mod, PowByNatural, PythonMod, ToFloat, TruncToInt)

from ..capture.shapes import GUARD_NAMESPACE, shape_guards

aten = torch.ops.aten


class SymbolicSizeError(RuntimeError):
    """A symbolic size whose expression the graph cannot compute from its inputs."""


class SymbolNodes:
    """The FX node of each symbolic size used by a graph, built from the graph's inputs."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        # symbol -> (input node, metadata op or None for a SymInt input, dim, the SymInt)
        self.sources: dict[sympy.Symbol, tuple] = {}
        self.nodes: dict[str, torch.fx.Node] = {}  # str(expression) -> node

    def add_input(self, node: torch.fx.Node, value: Any) -> None:
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            self._source(value, (node, None, None, value))
            return
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            return
        for dim, size in enumerate(value.shape):
            self._source(size, (node, aten.sym_size.int, dim, size))
        for dim, stride in enumerate(value.stride()):
            self._source(stride, (node, aten.sym_stride.int, dim, stride))
        offset = value.storage_offset()
        self._source(offset, (node, aten.sym_storage_offset.default, None, offset))

    def _source(self, value: Any, where: tuple) -> None:
        if isinstance(value, (torch.SymInt, torch.SymFloat)) and isinstance(value.node.expr, sympy.Symbol):
            self.sources.setdefault(value.node.expr, where)

    def knows(self, value: Any) -> bool:
        """Is `value` (a SymInt, SymFloat) an expression over the inputs' symbols?"""
        try:
            return all(symbol in self.sources for symbol in value.node.expr.free_symbols)
        except AttributeError:
            return False

    def node_of(self, value: torch.SymInt | torch.SymFloat) -> torch.fx.Node | int | float:
        return self.node_of_expr(value.node.expr)

    def node_of_expr(self, expr: sympy.Expr) -> torch.fx.Node | int | float:
        if expr.is_Integer:
            return int(expr)
        if expr.is_Float or expr.is_Rational:
            return float(expr)
        key = str(expr)
        if key in self.nodes:
            return self.nodes[key]
        if isinstance(expr, sympy.Symbol):
            if expr not in self.sources:
                raise SymbolicSizeError(f"the size {expr} comes from no input of the graph")
            node, op, dim, value = self.sources[expr]
            if op is None:
                return node
            args = (node,) if dim is None else (node, dim)
            built = self.graph.call_function(op, args)
            built.meta["val"] = value
        elif isinstance(expr, ToFloat) or _unary_of(expr) is not None:
            # (|x|, sqrt(x), floor(x) of a number captured as a symbol)
            function = torch.sym_float if isinstance(expr, ToFloat) else _unary_of(expr)
            operand = self.node_of_expr(expr.args[0])
            built = self.graph.call_function(function, (operand,))
            built.meta["val"] = function(_value(operand))
        else:
            function = _function_of(expr)
            operands = [self.node_of_expr(arg) for arg in _operands(expr)]
            built = functools.reduce(lambda a, b: self._apply(function, a, b), operands)
        self.nodes[key] = built
        return built

    def _apply(self, function: Callable, a, b) -> torch.fx.Node:
        node = self.graph.call_function(function, (a, b))
        node.meta["val"] = function(_value(a), _value(b))
        return node


def _value(operand):
    return operand.meta["val"] if isinstance(operand, torch.fx.Node) else operand


_FUNCTIONS = [
    (sympy.Add, operator.add), (sympy.Mul, operator.mul), (FloorDiv, operator.floordiv),
    (PythonMod, operator.mod), (Mod, operator.mod), (Max, torch.sym_max), (Min, torch.sym_min),
    (FloatTrueDiv, operator.truediv), (IntTrueDiv, operator.truediv),
    (FloatPow, operator.pow), (PowByNatural, operator.pow), (sympy.Pow, operator.pow),
]
_UNARY = [(sympy.Abs, operator.abs), (FloorToInt, math.floor), (CeilToInt, math.ceil), (TruncToInt, math.trunc)]


def _unary_of(expr: sympy.Expr) -> Callable | None:
    if len(expr.args) != 1:
        return None
    for kind, function in _UNARY:
        if isinstance(expr, kind):
            return function
    name = type(expr).__name__
    if name.startswith("OpaqueUnaryFn_"):  # torch's math functions of symbols (sqrt, cos, ...)
        return getattr(torch, "_sym_" + name[len("OpaqueUnaryFn_"):], None)
    return None


def _function_of(expr: sympy.Expr) -> Callable:
    for kind, function in _FUNCTIONS:
        if isinstance(expr, kind):
            return function
    raise SymbolicSizeError(f"ember cannot compute the size expression {expr} in a graph")


def _operands(expr: sympy.Expr) -> tuple:
    if isinstance(expr, sympy.Mul) and expr.args and expr.args[0] == -1 and len(expr.args) == 2:
        return (sympy.Integer(-1), expr.args[1])
    return expr.args


def input_guards(shape_env, fakes: list, positions: list[int]) -> tuple[Callable[[list], bool], list[str]]:
    """One predicate over the call's inputs (a list `a`) checking what the trace assumed about
    their symbolic sizes (capture/shapes.py's shape_guards), and the checks as text."""
    checks = shape_guards(shape_env, [fakes[i] for i in positions], [f"a[{i}]" for i in positions],
                          static_too=True)
    source = "lambda a: " + (" and ".join(f"({check})" for check in checks) if checks else "True")
    return eval(compile(source, "<ember aot guards>", "eval"), dict(GUARD_NAMESPACE)), checks
