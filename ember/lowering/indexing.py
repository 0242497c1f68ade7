"""Index arithmetic on sympy expressions: broadcasting, view re-indexing, simplification, printing.

Index variables are non-negative integers, so `floor(x / k)` and `Mod(x, k)` print as C's `/`
and `%`.  `simplify_index` undoes the split that a view followed by a load produces
(`k*floor(x/k) + Mod(x, k)` is `x`), which keeps contiguous kernels free of divisions.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import sympy

from .symbolic import ShapesNotSupported, is_size_symbol, provably_less, provably_nonnegative

Expr = sympy.Expr


def contiguous_strides(size: Sequence[Expr]) -> list[Expr]:
    """Row-major strides of a size (the last dim's stride is 1)."""
    strides: list[Expr] = []
    running: Expr = sympy.Integer(1)
    for dim in reversed(size):
        strides.append(running)
        running = running * dim
    return list(reversed(strides))


def broadcast_index(index: Sequence[Expr], out_size: Sequence[Expr], in_size: Sequence[Expr]) -> list[Expr]:
    """The input index for an output index, numpy-style (right-aligned, size-1 dims read 0)."""
    offset = len(out_size) - len(in_size)
    result = []
    for position, size in enumerate(in_size):
        out = out_size[offset + position]
        if size == 1 and out != 1:
            result.append(sympy.Integer(0))
            continue
        if size != out and sympy.expand(sympy.sympify(size) - out) != 0:
            # Sizes only the trace's values made equal (a fake kernel that does not check shapes, as
            # index_put's values): reading one over the other's range could leave its memory (ATen checks).
            raise ShapesNotSupported(f"a size {size} read over a range of {out}, which the guards do not make equal")
        result.append(index[offset + position])
    return result


def flatten(index: Sequence[Expr], size: Sequence[Expr]) -> Expr:
    strides = contiguous_strides(size)
    return sum((var * stride for var, stride, dim in zip(index, strides, size) if dim != 1), sympy.Integer(0))


_UNFLATTENED: dict = {}  # (flat index, sizes) -> per-dimension indices, for fixed sizes


def unflatten(flat: Expr, size: Sequence[Expr]) -> list[Expr]:
    """The per-dimension indices of a flat (row-major) index, remembered for fixed sizes (every load
    through a reshape calls this, and sympy's floor and Mod constructors are slow)."""
    size = tuple(size)
    if any(_has_size_symbols(sympy.sympify(e)) for e in (flat, *size)):
        return _unflatten(flat, size)
    return list(_remembered(_UNFLATTENED, (flat, size), lambda: tuple(_unflatten(flat, size)), 100_000))


def _remembered(table: dict, key, compute, limit: int):
    """table[key], computed first where missing (the table emptied once it holds `limit` entries)."""
    found = table.get(key)
    if found is None:
        if len(table) > limit:
            table.clear()
        found = table[key] = compute()
    return found


def _unflatten(flat: Expr, size: Sequence[Expr]) -> list[Expr]:
    strides = contiguous_strides(size)
    if any(dim == 0 for dim in size):
        return [sympy.Integer(0)] * len(size)  # no element: the index is never evaluated
    result = []
    for dim, stride in zip(size, strides):
        if dim == 1:
            result.append(sympy.Integer(0))
            continue
        part = flat if stride == 1 else sympy.floor(flat / stride)
        if dim * stride != product(size) or stride != strides[0]:
            part = sympy.Mod(part, dim)
        result.append(part)
    return [simplify_index(part) for part in result]


def product(values: Sequence[Expr]) -> Expr:
    result: Expr = sympy.Integer(1)
    for value in values:
        result = result * value
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

    groups = _view_groups(old_size, new_size)
    if groups is not None:
        def grouped(index):
            result = [sympy.Integer(0)] * len(old_size)
            for old_dims, new_dims in groups:
                flat = flatten([index[k] for k in new_dims], [new_size[k] for k in new_dims])
                parts = [flat] if len(old_dims) == 1 else unflatten(flat, [old_size[k] for k in old_dims])
                for k, part in zip(old_dims, parts):
                    result[k] = part
            return result

        return grouped

    return lambda index: unflatten(flatten(index, new_size), old_size)


def _view_groups(old_size: Sequence[Expr], new_size: Sequence[Expr]):
    """For fixed sizes: the view as runs of old dims and new dims with equal products ([768] ->
    [12, 64]; size-1 dims left out), each reindexed on its own, so that no index is rebuilt from
    the whole flat offset.  None where a size is symbolic or zero (the whole-offset path)."""
    sizes = [sympy.sympify(s) for s in (*old_size, *new_size)]
    if not all(s.is_Integer and int(s) > 0 for s in sizes):
        return None
    old_dims = [k for k, s in enumerate(old_size) if int(s) != 1]
    new_dims = [k for k, s in enumerate(new_size) if int(s) != 1]
    runs = product_runs([int(old_size[k]) for k in old_dims], [int(new_size[k]) for k in new_dims])
    if runs is None:
        return None
    return [([old_dims[p] for p in old_run], [new_dims[p] for p in new_run]) for old_run, new_run in runs]


def product_runs(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """`a` and `b` cut into runs of adjacent positions whose sizes have equal products, in order
    ([768] and [12, 64]: ([0], [0, 1])); None where the two do not cut alike to their ends."""
    sizes, runs, start = (a, b), [], [0, 0]
    while start[0] < len(a) and start[1] < len(b):
        run, products = ([start[0]], [start[1]]), [a[start[0]], b[start[1]]]
        start = [start[0] + 1, start[1] + 1]
        while products[0] != products[1]:
            side = 0 if products[0] < products[1] else 1  # (the side whose run is short)
            if start[side] == len(sizes[side]):
                return None
            run[side].append(start[side])
            products[side] *= sizes[side][start[side]]
            start[side] += 1
        runs.append(run)
    return runs if start == [len(a), len(b)] else None


def simplify_with_bounds(expr: Expr, bounds: dict) -> Expr:
    """Remove floor/Mod that cannot change the value, given each variable's largest value.

    Mod(a, m): terms of `a` whose coefficient is a multiple of m drop out; if what is left stays
    in [0, m) it is the result.  floor(a/m): such terms divide exactly; if the rest stays in
    [0, m) it contributes nothing.  Applied innermost first."""
    if not bounds:
        return expr

    def upper(e):
        total = 0
        for term in sympy.Add.make_args(sympy.expand(e)):
            coefficient, rest = term.as_coeff_Mul()
            if rest == 1:
                high = coefficient
            elif rest not in bounds and _has_size_symbols(rest):
                high = _symbolic_term_upper(coefficient, rest, bounds)
            elif coefficient < 0:
                return None
            elif rest in bounds:
                high = coefficient * bounds[rest]
            else:
                high = inner_upper(rest)
                high = None if high is None else coefficient * high
            if high is None:
                return None
            total += high
        return total

    def inner_upper(term):
        """The largest value of Mod(a, m) (m - 1) or floor(a / d) (floor(upper(a) / d))."""
        if isinstance(term, sympy.Mod) and term.args[1].is_Integer and term.args[1] > 0:
            return term.args[1] - 1
        if isinstance(term, sympy.floor):
            numerator, denominator = sympy.fraction(sympy.together(term.args[0]))
            if denominator.is_Integer and denominator > 0:
                high = upper(numerator)
                if high is not None and sympy.sympify(high).is_number:
                    return sympy.floor(sympy.sympify(high) / denominator)
        return None

    def fits(rest, m):
        """0 <= rest < m for every value of the variables."""
        high = upper(rest)
        return high is not None and _less(high, m) and _nonnegative(rest)

    def split(e, m):
        multiples, rest = sympy.Integer(0), sympy.Integer(0)
        for term in sympy.Add.make_args(sympy.expand(e)):
            coefficient, _ = term.as_coeff_Mul()
            if coefficient.is_Integer and coefficient % m == 0:
                multiples += term
            else:
                rest += term
        return multiples, rest

    def factor_out(e, m):
        """(g, A, B) with e = g*A + B, g dividing m, 0 <= B < g; the largest such g, or None."""
        for g in sorted(sympy.divisors(int(m)), reverse=True):
            if g == 1:
                break
            multiples, rest = split(e, g)
            if fits(rest, g):
                return g, sympy.expand(multiples / g), rest
        return None

    def rewrite_mod(node):
        base, m = node.args
        if not m.is_Integer and not _positive_size(m):
            return node
        split_off, factor = (split, factor_out) if m.is_Integer else (symbolic_split, symbolic_factor_out)
        _, rest = split_off(base, m)
        if fits(rest, m):
            return rest
        found = factor(rest, m)
        if found is not None:  # Mod(g*A + B, g*k) = g*Mod(A, k) + B (g is never m: B would fit)
            g, scaled, small = found
            return g * sympy.Mod(scaled, sympy.cancel(m / g)) + small
        return sympy.Mod(rest, m) if rest != base else node

    def rewrite_floor(node):
        numerator, denominator = sympy.fraction(sympy.together(node.args[0]))
        integer = denominator.is_Integer
        if denominator == 1 or not integer and not _positive_size(denominator):
            return node
        split_off, factor = (split, factor_out) if integer else (symbolic_split, symbolic_factor_out)
        multiples, rest = split_off(numerator, denominator)
        whole = sympy.expand(multiples / denominator if integer else sympy.cancel(multiples / denominator))
        if fits(rest, denominator):
            return whole
        found = factor(rest, denominator)
        if found is not None:  # floor((g*A + B) / (g*k)) = floor(A / k)
            g, scaled, _small = found
            return whole + sympy.floor(scaled / sympy.cancel(denominator / g))
        if multiples != 0 and not integer:  # floor(q + r/m) = q + floor(r/m) for an integer q
            return whole + sympy.floor(rest / denominator)
        return node

    def symbolic_split(e, m):
        """e = multiples + rest, each term of multiples an integer multiple of the size m."""
        multiples, rest = sympy.Integer(0), sympy.Integer(0)
        for term in sympy.Add.make_args(sympy.expand(e)):
            quotient = sympy.cancel(term / m)
            numerator, denominator = sympy.fraction(quotient)
            if denominator == 1 and all(t.as_coeff_Mul()[0].is_Integer for t in sympy.Add.make_args(sympy.expand(quotient))):
                multiples += term
            else:
                rest += term
        return multiples, rest

    def symbolic_factor_out(e, m):
        """(g, A, B) with e = g*A + B, g a proper divisor of the monomial m (a product of its
        factors), 0 <= B < g for every allowed size; the first such g (most factors first), or None."""
        coefficient, monomial = m.as_coeff_Mul()
        if not coefficient.is_Integer:
            return None
        factors = [base for base, power in monomial.as_powers_dict().items() for _ in range(int(power))] \
            if all(p.is_Integer and p > 0 for p in monomial.as_powers_dict().values()) else []
        factors += [sympy.Integer(coefficient)] if coefficient != 1 else []
        if len(factors) < 2 or len(factors) > 6:
            return None
        for count in range(len(factors) - 1, 0, -1):
            for chosen in itertools.combinations(factors, count):
                g = sympy.Mul(*chosen)
                if g == 1:
                    continue
                multiples, rest = symbolic_split(e, g)
                if multiples == 0:
                    continue
                if fits(rest, g):
                    return g, sympy.expand(sympy.cancel(multiples / g)), rest
        return None

    previous = None
    while previous != expr:
        previous = expr
        expr = expr.replace(lambda e: isinstance(e, sympy.Mod), rewrite_mod)
        expr = expr.replace(lambda e: isinstance(e, sympy.floor), rewrite_floor)
        expr = sympy.expand(expr)
    return expr


def _has_size_symbols(expr) -> bool:
    return any(is_size_symbol(s) for s in expr.free_symbols)


def _is_size_expr(expr) -> bool:
    """A symbolic expression of size symbols only."""
    return not expr.is_number and all(is_size_symbol(s) for s in expr.free_symbols)


def _positive_size(expr) -> bool:
    """A symbolic expression of sizes that is >= 1 for every allowed size."""
    return _is_size_expr(expr) and provably_nonnegative(expr - 1)


def _less(a, b) -> bool:
    """a < b; for symbolic values: for every allowed size."""
    a, b = sympy.sympify(a), sympy.sympify(b)
    if a.is_number and b.is_number:
        return bool(a < b)
    return provably_less(a, b)


def _symbolic_term_upper(coefficient, rest, bounds):
    """The largest value of coefficient * rest, where rest is a product of sizes and at most one
    bounded index variable (sizes alone: the term itself, exact); None if unknown."""
    factors = sympy.Mul.make_args(rest)
    variables = [f for f in factors if not (f.free_symbols and all(is_size_symbol(s) for s in f.free_symbols))]
    sizes = sympy.Mul(*[f for f in factors if f not in variables])
    if not variables:
        return coefficient * rest
    if len(variables) != 1 or variables[0] not in bounds or coefficient < 0 or \
            not all(isinstance(f, sympy.Symbol) or (f.is_Pow and f.exp.is_Integer and f.exp > 0)
                    for f in sympy.Mul.make_args(sizes)):
        return None
    return coefficient * sizes * bounds[variables[0]]


def _nonnegative(expr) -> bool:
    return all(term.as_coeff_Mul()[0] >= 0 for term in sympy.Add.make_args(sympy.expand(expr)))


def merge_nested_floors(expr: Expr) -> Expr:
    """floor(floor(x/a)/b) -> floor(x/(a*b)) for an integer x and positive integers a, b (views
    of views split an index in steps; merged, the steps recombine)."""
    def rewrite(node):
        numerator, denominator = sympy.fraction(sympy.together(node.args[0]))
        if not ((denominator.is_Integer and denominator > 1 or _positive_size(denominator))
                and isinstance(numerator, sympy.floor)):
            return node
        inner_numerator, inner_denominator = sympy.fraction(sympy.together(numerator.args[0]))
        if (inner_denominator.is_Integer and inner_denominator > 1 or _positive_size(inner_denominator)) \
                and inner_numerator.is_integer:
            return sympy.floor(inner_numerator / (inner_denominator * denominator))
        return node

    if not any(floor.args[0].has(sympy.floor) for floor in expr.atoms(sympy.floor)):
        return expr  # (nothing nested: the common case, without sympy.together's cost)
    previous = None
    while previous != expr:
        previous = expr
        expr = expr.replace(lambda e: isinstance(e, sympy.floor), rewrite)
    return expr


_SIMPLIFIED: dict = {}  # (index, bounds of its variables) -> simplified, for indices of fixed sizes


def simplify_index(expr: Expr, bounds: dict | None = None) -> Expr:
    """Bounds-aware cleanup, then recombine c*Mod(x, m) + c*m*floor(x/m) into c*x.  Indices of
    fixed sizes are remembered (a model's layers index alike); ones with size symbols are not
    (what they simplify to depends on the graph's size guards)."""
    expr = sympy.sympify(expr)
    if expr.is_Atom:
        return expr
    if bounds:
        bounds = {var: high for var, high in bounds.items() if var in expr.free_symbols}
    if _has_size_symbols(expr) or any(not sympy.sympify(high).is_number for high in (bounds or {}).values()):
        return _simplify_index(expr, bounds)
    key = (expr, tuple(sorted((var.name, high) for var, high in bounds.items())) if bounds else ())
    return _remembered(_SIMPLIFIED, key, lambda: _simplify_index(expr, bounds), 200_000)


def _simplify_index(expr: Expr, bounds: dict | None = None) -> Expr:
    if bounds:
        expr = simplify_with_bounds(sympy.sympify(expr), bounds)
    expr = sympy.expand(merge_nested_floors(sympy.sympify(expr)))
    changed = True
    while changed and isinstance(expr, sympy.Add):
        changed = False
        terms = list(expr.args)
        for term in terms:
            coefficient, mod = term.as_coeff_Mul()
            if not isinstance(mod, sympy.Mod):
                mods = [f for f in sympy.Mul.make_args(mod) if isinstance(f, sympy.Mod)]
                if len(mods) != 1 or not _is_size_expr(sympy.cancel(mod / mods[0])):
                    continue
                coefficient, mod = coefficient * sympy.cancel(mod / mods[0]), mods[0]  # a size times a Mod
            base, divisor = mod.args
            partner = sympy.expand(merge_nested_floors(coefficient * divisor * sympy.floor(base / divisor)))
            if partner in terms:
                remaining = [t for t in terms if t is not term and t != partner]
                expr = sympy.expand(sympy.Add(*remaining) + coefficient * base)
                changed = True
                break
    return expr


class _IndexPrinter(sympy.printing.str.StrPrinter):
    """floor(a/b) -> (a <divide> b), Mod(a, b) -> (a % b) (all non-negative), symbols by name."""
    divide = "/"

    def _print_floor(self, expr):
        inner = expr.args[0]
        numerator, denominator = sympy.fraction(sympy.together(inner))
        if denominator != 1:
            return f"(({self._print(numerator)}) {self.divide} ({self._print(denominator)}))"
        return self._print(inner)

    def _print_Mod(self, expr):
        return f"(({self._print(expr.args[0])}) % ({self._print(expr.args[1])}))"

    def _print_Symbol(self, expr):
        return expr.name

    def _print_Max(self, expr):
        return self._extremum("max", expr.args)

    def _print_Min(self, expr):
        return self._extremum("min", expr.args)


class CPrinter(_IndexPrinter):
    """Index expressions for C."""

    def _print_Integer(self, expr):
        return f"{int(expr)}L" if abs(int(expr)) > 2**31 - 1 else str(int(expr))

    def _print_Pow(self, expr):
        base, exponent = expr.args
        if exponent.is_Integer and exponent > 0:
            return "*".join([f"({self._print(base)})"] * int(exponent))
        raise NotImplementedError(f"index expression {expr}")

    def _extremum(self, name, args):
        text = self._print(args[0])
        for arg in args[1:]:
            text = f"std::{name}<int64_t>({text}, {self._print(arg)})"
        return text

    def _print_Mul(self, expr):
        coefficient, _ = expr.as_coeff_Mul()
        if not coefficient.is_Integer and _has_size_symbols(expr):
            raise ShapesNotSupported(f"a fraction in the index expression {expr}")
        return super()._print_Mul(expr)


class PythonSizePrinter(_IndexPrinter):
    """Size expressions as Python (the wrapper evaluates them from the size symbols' values)."""
    divide = "//"

    def _print_Integer(self, expr):
        return str(int(expr))

    def _extremum(self, name, args):
        return f"{name}({', '.join(self._print(a) for a in args)})"

    def _print_Rational(self, expr):
        raise ShapesNotSupported(f"a fraction {expr} in a size expression")


_PYTHON_PRINTER = PythonSizePrinter()


def python_size(expr) -> str:
    """A size expression as Python source (an int literal for a number)."""
    expr = sympy.sympify(expr)
    if expr.is_number:
        return str(int(expr))
    return _PYTHON_PRINTER.doprint(expr)


_PRINTER = CPrinter()


def c_index(expr: Expr, bounds: dict | None = None) -> str:
    return _PRINTER.doprint(simplify_index(sympy.sympify(expr), bounds))
