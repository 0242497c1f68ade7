"""Symbolic sizes (dynamic shapes) in the lowering: SymInts in, plain sympy out.

`expr_of` turns a SymInt (a ShapeEnv expression, with torch's FloorDiv, ModularIndexing,
PythonMod, ...) into standard sympy (floor, Mod, Max, Min) over size symbols that are
`Symbol(name, integer=True, positive=True)`: `is_size_symbol` tells them from loop and index
variables (nonnegative, not known positive).  Each symbol's smallest allowed value is kept, so
`provably_nonnegative` decides slice bounds and index simplifications for every allowed size.
What ember cannot do for every allowed size raises `ShapesNotSupported` (the AOT layer then
compiles per concrete shape).
"""
from __future__ import annotations

import contextlib
import contextvars

import sympy
import torch


class ShapesNotSupported(Exception):
    """This graph's symbolic sizes cannot be compiled into size-generic kernels (the reason
    names the op); compile it for concrete sizes instead."""


# Smallest value of each size symbol seen, by name.  Names repeat across ShapeEnvs (every trace has
# its s0), so each compiled graph keeps its own (`bounds_scope`; test_dynamic_compiles_do_not_depend_on_earlier_ones);
# outside a scope: the smallest over every ShapeEnv.
_GLOBAL_BOUNDS: dict[str, int] = {}
_BOUNDS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("ember_size_bounds", default=None)


@contextlib.contextmanager
def bounds_scope(bounds: dict[str, int] | None = None):
    """The size symbols' lower bounds seen from here on belong to one graph's compile (`bounds`:
    the ones of a compile begun earlier, continued here)."""
    token = _BOUNDS.set({} if bounds is None else bounds)
    try:
        yield _BOUNDS.get()
    finally:
        _BOUNDS.reset(token)


def _bounds() -> dict[str, int]:
    scoped = _BOUNDS.get()
    return _GLOBAL_BOUNDS if scoped is None else scoped


def is_size_symbol(symbol) -> bool:
    return isinstance(symbol, sympy.Symbol) and symbol.is_positive is True


def size_symbols(expr) -> set:
    return {s for s in sympy.sympify(expr).free_symbols if is_size_symbol(s)}


def is_symbolic(value) -> bool:
    """A sympy expression with size symbols (not a plain number)."""
    return isinstance(value, sympy.Basic) and not value.is_number


def _symbol(symbol: sympy.Symbol, shape_env) -> sympy.Symbol:
    name = symbol.name
    if name.startswith(("u", "zuf")):  # torch's prefixes of unbacked symbols
        raise ShapesNotSupported(f"data-dependent size {name}")
    lower = 2
    if shape_env is not None:
        found = shape_env.var_to_range.get(symbol)
        if found is not None:
            try:
                lower = int(found.lower)
            except (TypeError, ValueError, OverflowError, AttributeError):  # (-oo: an int input, not a size)
                raise ShapesNotSupported(f"size {name} has no finite lower bound ({found})") from None
    if lower < 1:
        raise ShapesNotSupported(f"size {name} may be {lower} (ember's size symbols are positive)")
    bounds = _bounds()
    bounds[name] = min(lower, bounds.get(name, lower))
    return sympy.Symbol(name, integer=True, positive=True)


def to_sympy(expr, shape_env=None) -> sympy.Expr:
    """A ShapeEnv expression as standard sympy over ember's size symbols."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return expr
    if isinstance(expr, sympy.Symbol):
        return _symbol(expr, shape_env)
    if expr.is_Number:
        raise ShapesNotSupported(f"non-integer size {expr}")
    args = [to_sympy(arg, shape_env) for arg in expr.args]
    name = type(expr).__name__
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return expr.func(*args)
    if isinstance(expr, sympy.Pow):
        if args[1].is_Integer and args[1] > 0:
            return args[0] ** args[1]
        raise ShapesNotSupported(f"size expression {expr}")
    if name in ("FloorDiv", "CleanDiv"):
        return sympy.floor(args[0] / args[1])
    if name == "ModularIndexing":
        return sympy.Mod(sympy.floor(args[0] / args[1]), args[2])
    if name in ("PythonMod", "Mod"):
        return sympy.Mod(args[0], args[1])
    if name in ("Max", "Min"):
        return getattr(sympy, name)(*args)
    if isinstance(expr, sympy.floor):
        return sympy.floor(args[0])
    raise ShapesNotSupported(f"size expression {expr} ({name})")


def expr_of(value) -> sympy.Expr:
    """An int, SymInt or sympy value as a sympy expression (ints stay Integers)."""
    if isinstance(value, torch.SymInt):
        node = value.node
        shape_env = getattr(node, "shape_env", None)
        return to_sympy(_decided(node, shape_env), shape_env)
    if isinstance(value, bool):
        return sympy.Integer(int(value))
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, sympy.Basic):
        return value
    raise ShapesNotSupported(f"size {value!r} ({type(value).__name__})")


def _decided(node, shape_env) -> sympy.Expr:
    """A size expression the ShapeEnv's guards make one number (`((s0 // 16) + 1) // 2` guarded to
    be 1: a broadcast dimension; test_a_size_the_guards_make_1_broadcasts) is that number."""
    expr = node.expr
    if shape_env is None or expr.is_number or isinstance(expr, sympy.Symbol) or node.hint is None:
        return expr
    try:
        decided = shape_env._maybe_evaluate_static(sympy.Eq(expr, int(node.hint)))
    except Exception:  # noqa: BLE001 - a ShapeEnv that cannot tell: the expression as it is
        return expr
    return sympy.Integer(int(node.hint)) if decided is not None and bool(decided) else expr


def lower_bound(symbol) -> int:
    return _bounds().get(symbol.name, 2)


def provably_nonnegative(expr) -> bool:
    """Is `expr` >= 0 for every allowed size?  Decided for polynomials whose non-constant terms
    all have positive coefficients (smallest at the symbols' lower bounds); else False."""
    expr = sympy.expand(sympy.sympify(expr))
    if expr.is_number:
        return bool(expr >= 0)
    expr = _without_floors(expr)
    if expr is None or any(isinstance(a, (sympy.floor, sympy.Mod, sympy.Max, sympy.Min))
                           for a in sympy.preorder_traversal(expr)):
        return False
    if expr.is_number:
        return bool(expr >= 0)
    symbols = expr.free_symbols
    if not all(is_size_symbol(s) for s in symbols):
        return False
    try:
        poly = sympy.Poly(expr, *symbols)
    except sympy.PolynomialError:
        return False
    if any(any(monomial) and coefficient < 0 for monomial, coefficient in poly.terms()):
        return False
    return bool(expr.subs({s: lower_bound(s) for s in symbols}) >= 0)


def _without_floors(expr):
    """`expr` with each floor(a/b) (b a positive integer, a >= 0) replaced by the bound that makes
    `expr` smallest: (a - b + 1)/b where its coefficient is positive, a/b where negative; None if
    some floor does not fit."""
    for atom in sorted(expr.atoms(sympy.floor), key=sympy.default_sort_key):
        numerator, denominator = sympy.fraction(sympy.together(atom.args[0]))
        coefficient = expr.coeff(atom)
        if not (denominator.is_Integer and denominator > 0 and coefficient.is_number and coefficient != 0) \
                or any(isinstance(a, (sympy.floor, sympy.Mod)) for a in sympy.preorder_traversal(numerator)) \
                or not provably_nonnegative(numerator):
            return None
        bound = (numerator - denominator + 1) / denominator if coefficient > 0 else numerator / denominator
        expr = sympy.expand(expr.subs(atom, bound))
    return expr


def provably_less(a, b) -> bool:
    """a < b for every allowed size (integers)."""
    return provably_nonnegative(sympy.sympify(b) - sympy.sympify(a) - 1)


def static_int(value, what: str) -> int:
    """A size that must be a number here, else ShapesNotSupported naming `what`."""
    value = expr_of(value) if not isinstance(value, sympy.Basic) else value
    if not value.is_number:
        raise ShapesNotSupported(f"{what} with symbolic size {value}")
    return int(value)
