"""Index arithmetic on sympy expressions: broadcasting, view re-indexing, simplification, printing.

Index variables are non-negative integers, so `floor(x / k)` and `Mod(x, k)` print as C's `/`
and `%`.  `simplify_index` undoes the split that a view followed by a load produces
(`k*floor(x/k) + Mod(x, k)` is `x`), which keeps contiguous kernels free of divisions.
"""
from __future__ import annotations

from typing import Sequence

import sympy

from .ir import Expr, contiguous_strides


def broadcast_index(index: Sequence[Expr], out_size: Sequence[Expr], in_size: Sequence[Expr]) -> list[Expr]:
    """The input index for an output index, numpy-style (right-aligned, size-1 dims read 0)."""
    offset = len(out_size) - len(in_size)
    result = []
    for position, size in enumerate(in_size):
        if size == 1 and out_size[offset + position] != 1:
            result.append(sympy.Integer(0))
        else:
            result.append(index[offset + position])
    return result


def flatten(index: Sequence[Expr], size: Sequence[Expr]) -> Expr:
    strides = contiguous_strides(size)
    return sum((var * stride for var, stride, dim in zip(index, strides, size) if dim != 1), sympy.Integer(0))


def unflatten(flat: Expr, size: Sequence[Expr]) -> list[Expr]:
    strides = contiguous_strides(size)
    result = []
    for dim, stride in zip(size, strides):
        if dim == 1:
            result.append(sympy.Integer(0))
            continue
        part = flat if stride == 1 else sympy.floor(flat / stride)
        if dim * stride != product_all(size) or stride != strides[0]:
            part = sympy.Mod(part, dim)
        result.append(part)
    return [simplify_index(part) for part in result]


def product_all(size: Sequence[Expr]) -> Expr:
    result = sympy.Integer(1)
    for dim in size:
        result = result * dim
    return result


def view_reindex(old_size: Sequence[Expr], new_size: Sequence[Expr]):
    """index in the new shape -> index in the old shape, for a view/reshape of contiguous data."""
    old_size, new_size = list(old_size), list(new_size)
    if [s for s in old_size if s != 1] == [s for s in new_size if s != 1]:
        # Only size-1 dims differ: map the non-unit dims one to one.
        old_positions = [i for i, s in enumerate(old_size) if s != 1]
        new_positions = [i for i, s in enumerate(new_size) if s != 1]

        def squeeze_like(index):
            result = [sympy.Integer(0)] * len(old_size)
            for old, new in zip(old_positions, new_positions):
                result[old] = index[new]
            return result

        return squeeze_like

    def reindex(index):
        return unflatten(flatten(index, new_size), old_size)

    return reindex


def simplify_index(expr: Expr) -> Expr:
    expr = sympy.expand(expr)
    if not isinstance(expr, sympy.Add):
        return _simplify_mod(expr)
    terms = list(expr.args)
    changed = True
    while changed:
        changed = False
        for mod in [t for t in terms if isinstance(t, sympy.Mod)]:
            base, divisor = mod.args
            target = divisor * sympy.floor(base / divisor)
            for term in terms:
                if term is not mod and sympy.expand(term - target) == 0:
                    terms.remove(term)
                    terms.remove(mod)
                    terms.append(base)
                    changed = True
                    break
            if changed:
                break
    return sympy.Add(*[_simplify_mod(t) for t in terms])


def _simplify_mod(expr: Expr) -> Expr:
    if isinstance(expr, sympy.Mod):
        base, divisor = expr.args
        if base.is_nonnegative and divisor.is_number and _upper_bound(base) is not None \
                and _upper_bound(base) < divisor:
            return base
    return expr


def _upper_bound(expr: Expr):
    return None


class CPrinter(sympy.printing.str.StrPrinter):
    """Index expressions for C: floor(a/b) -> (a / b), Mod(a, b) -> (a % b) (all non-negative)."""

    def _print_floor(self, expr):
        inner = expr.args[0]
        numerator, denominator = sympy.fraction(sympy.together(inner))
        if denominator != 1:
            return f"(({self._print(numerator)}) / ({self._print(denominator)}))"
        return self._print(inner)

    def _print_Mod(self, expr):
        return f"(({self._print(expr.args[0])}) % ({self._print(expr.args[1])}))"

    def _print_Integer(self, expr):
        return f"{int(expr)}L" if abs(int(expr)) > 2**31 - 1 else str(int(expr))

    def _print_Symbol(self, expr):
        return expr.name

    def _print_Pow(self, expr):
        base, exponent = expr.args
        if exponent.is_Integer and exponent > 0:
            return "*".join([f"({self._print(base)})"] * int(exponent))
        raise NotImplementedError(f"index expression {expr}")


_PRINTER = CPrinter()


def c_index(expr: Expr) -> str:
    return _PRINTER.doprint(simplify_index(sympy.sympify(expr)))
