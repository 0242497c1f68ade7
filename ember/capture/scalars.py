"""Python ints and floats as graph inputs ("automatic dynamic" for scalars).

A guard on a number read from a source (`opt.param_groups[0]['lr']`, `sched.last_epoch`) makes
every new value a recompile.  As for sizes (shapes.py), a number seen changing becomes a symbol:

    record    on a recompile, the missed entries' guards say which numbers changed
              (`GuardSet.changed_scalars`), and the numbers a capture wrote back where it read
              them (state the frame carries between calls) count too: `ShapeState.scalars`
    capture   such a number becomes a placeholder whose example is a SymInt or SymFloat
              (`scalar_input`), guarded by type; what the trace decided about it is guarded
              by the ShapeEnv
    glue      a number computed from such inputs and needed in Python is computed again by the
              same operations on the same inputs (`replay`), so it is exactly eager's value

What capture cannot do with a symbol (`range(n)`, a dict key) raises StaticShapesNeeded, and its
scalars become constants again for that code (ShapeState.static_scalars).  Booleans stay constants.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from .. import logs
from .errors import Unsupported, UserException
from .graph import GraphInput
from .shapes import ShapeSource, StaticShapesNeeded
from .sources import AttrSource, ItemSource, literal
from .variables.base import constant
from .variables.symbolic import SymNodeVariable


def is_dynamic_candidate(value: Any) -> bool:
    """An int (of int64's range) or float; not a bool, not a subclass (an IntEnum keeps its guard)."""
    return type(value) is float or (type(value) is int and -2 ** 63 <= value < 2 ** 63)


def has_dynamic_items(plan, value: tuple, source) -> bool:
    """A tuple of constants (`betas`) with a number that is dynamic: wrapped item by item."""
    return bool(plan.state is not None and plan.state.scalars) and any(
        is_dynamic_candidate(item) and plan.dynamic_scalar(ItemSource(source, index).expr())
        for index, item in enumerate(value))


def scalar_input(tx, value: int | float, source) -> Any:
    """The SymNodeVariable for the number at `source`, a graph input (one per source)."""
    graph = tx.graph
    expr = source.expr()
    known = graph.__dict__.setdefault("scalar_inputs", {})
    if expr in known:
        return known[expr]
    fake_mode = graph.fake_mode
    if fake_mode.shape_env is None:
        fake_mode.shape_env = ShapeEnv()
        fake_mode.static_shapes = False
    shape_env = fake_mode.shape_env
    name = ShapeSource(expr)
    symbol = shape_env.create_unspecified_symbol(value, source=name, dynamic_dim=DimDynamic.DYNAMIC)
    make = shape_env.create_symintnode if type(value) is int else shape_env.create_symfloatnode
    symbolic = make(symbol, hint=value, source=name)
    graph.guards.type_match(source, value)
    node = graph.new_placeholder(source)
    node.meta["source"] = expr
    variable = SymNodeVariable(node, symbolic)
    graph.inputs.append(GraphInput(source, node, value))
    graph.symbolic_inputs.append((symbolic, expr))
    graph.__dict__.setdefault("scalar_symbols", {})[symbol] = expr
    known[expr] = variable
    return variable


def scalar_sources(graph, value: Any) -> list[str]:
    """The dynamic scalars' source exprs that a symbolic value depends on."""
    symbols = getattr(graph, "scalar_symbols", {})
    node = getattr(value, "node", None)
    expr = getattr(node, "expr", None)
    if expr is None or not symbols:
        return []
    return [symbols[s] for s in getattr(expr, "free_symbols", ()) if s in symbols]


# Functions whose calls on numbers the glue may run again (no side effects, no tensors).
def _replayable(target: Any) -> bool:
    module = getattr(target, "__module__", None) or ""
    return module in ("_operator", "operator", "math", "builtins") or target in (
        torch.sym_min, torch.sym_max, torch.sym_float, torch.sym_int, torch.sym_not, torch.sym_ite) or \
        (getattr(target, "__name__", "").startswith("_sym_") and module == "torch")


def replay(cg, node: torch.fx.Node, value: Any = None) -> str:
    """A Python expression computing a symbolic number's value from the frame's sources, by the
    operations capture recorded (node.meta["ember_call"], kept when DCE drops the node).  Raises
    StaticShapesNeeded where it depends on a value only the graph computes."""
    memo = cg.__dict__.setdefault("_replayed", {})
    if node in memo:
        return memo[node]
    if node.op == "placeholder":
        source = node.meta.get("source")
        if source is None or not isinstance(node.meta.get("example_value"), (torch.SymInt, torch.SymFloat)):
            # A tensor's size leaving the graph: static shapes, as before (a torch.Size rebuilt
            # from its items would be a tuple)
            raise StaticShapesNeeded("a dynamic size leaves the graph (returned, or live across a break)", value)
        text = source
    else:
        call = node.meta.get("ember_call")
        if call is None:
            raise StaticShapesNeeded("a dynamic size leaves the graph (returned, or live across a break)", value)
        kind, target, args, kwargs = call
        if kind == "call_function" and _replayable(target):
            parts = [_argument(cg, a, value) for a in args] + [f"{k}={_argument(cg, v, value)}" for k, v in kwargs.items()]
            text = f"{cg.ref(target, 'fn')}({', '.join(parts)})"
        else:
            raise StaticShapesNeeded("a dynamic size computed in the graph leaves it (returned, or live across a break)",
                                     value)
    memo[node] = text
    return text


def _argument(cg, value: Any, symbolic: Any = None) -> str:
    if isinstance(value, torch.fx.Node):
        return replay(cg, value, symbolic)
    if isinstance(value, (tuple, list)):
        items = "".join(f"{_argument(cg, item)}, " for item in value)
        return f"({items})" if isinstance(value, tuple) else f"[{items}]"
    return cg.literal(value)


def demote_scalars(graph, state, need: StaticShapesNeeded, code_name: str) -> bool:
    """After StaticShapesNeeded: make the dynamic scalars it involves constants again for this
    code (all of this capture's, where the value does not say).  False if there were none."""
    dynamic = list(getattr(graph, "scalar_symbols", {}).values())
    if not dynamic:
        return False
    involved = scalar_sources(graph, need.value) if need.value is not None else dynamic
    if not involved:
        return False  # (a size symbol: static shapes)
    state.static_scalars.update(involved)
    logs.get("recompiles").debug("%s: %s stay constants: %s", code_name, ", ".join(involved), need.reason)
    return True


def mark_changed_scalars(runner, closure, args) -> None:
    """On a recompile in the automatic mode: the numbers the missed entries guarded that changed
    (same type, another value) become graph inputs from this capture on."""
    state = runner.shapes
    log = logs.get("recompiles")
    for entry in runner.cache_entries:
        guards = entry.guard_set
        found = [(expr, f"{path} was {old!r}, now {new!r}")
                 for expr, path, old, new in guards.changed_scalars(runner.params, runner.f_globals, closure, args)]
        found += [(expr, f"{path} is written by the code itself (state it carries)")
                  for expr, path in guards.number_constants().items() if expr in getattr(guards, "written_scalars", ())]
        for expr, why in found:
            if expr not in state.scalars and expr not in state.static_scalars:
                state.scalars.add(expr)
                log.debug("%s: %s; marking it dynamic", runner.code.co_name, why)


def note_written_scalars(graph) -> None:
    """The numbers this capture writes back where it can read them (`group['lr'] = ...`), as source
    exprs on the guard set: on a recompile those guarded as constants are marked dynamic even if
    this call left them unchanged (a scheduler writes `group['lr']` each step, changing it rarely)."""
    written = set()
    effects = graph.side_effects
    def note(source, value) -> None:
        if _is_number(value):
            written.add(source.expr())
        elif value.python_type() is tuple:  # (the numbers in a tuple: `group['betas'] = (m, b2)`)
            items = value.items if hasattr(value, "items") and isinstance(value.items, list) else None
            if items is None and value.is_python_constant():
                items = [constant(item) for item in value.as_python_constant()]
            for index, item in enumerate(items or ()):
                if _is_number(item):
                    written.add(ItemSource(source, index).expr())

    for owner, name, value in effects.attr_writes.values():
        if owner.source is not None:
            note(AttrSource(owner.source, name), value)
    for container in effects.mutated_containers.values():
        if container.source is None:
            continue
        for key in getattr(container, "written_keys", ()):
            value = container.items.get(key) if isinstance(container.items, dict) else None
            if value is not None and literal(key) is not None:
                note(ItemSource(container.source, key), value)
    graph.guards.written_scalars = written


# -- Python builtins and math on symbolic numbers -------------------------------------------------
def _is_number(variable) -> bool:
    if isinstance(variable, SymNodeVariable):
        return variable.python_type() in (int, float)
    return variable.is_python_constant() and type(variable.as_python_constant()) in (int, float)


def symbolic_min_max(tx, function, items: list):
    """min()/max() of numbers, some of them symbols; None if not all are numbers.  Of one type,
    torch.sym_min/sym_max (no guard: a warm-up's `min(1.0, (step + 1) / 5)` stays one graph);
    ints with floats, Python's own comparisons (guarded), which keep the winner's type."""
    from .variables.operators import binary_op

    if not any(isinstance(item, SymNodeVariable) for item in items) or not all(_is_number(i) for i in items):
        return None
    if len({item.python_type() for item in items}) == 1:
        target = torch.sym_min if function is min else torch.sym_max
        result = items[0]
        for item in items[1:]:
            result = tx.graph.call(tx, "call_function", target, [result, item], {})
        return result
    best = items[0]
    for item in items[1:]:
        if binary_op(tx, operator.lt if function is min else operator.gt, item, best).truth(tx):
            best = item
    return best


def symbolic_math(tx, function, args: list, kwargs: dict):
    """math.cos(x) and the like of a symbolic number (a cosine schedule's learning rate): torch's
    symbolic twin (`torch._sym_cos`, which on plain floats is math.cos itself); None where there
    is none (math.floor and ceil go through the number's own __floor__/__ceil__)."""
    if kwargs or not args or not any(isinstance(a, SymNodeVariable) for a in args) \
            or not all(_is_number(a) for a in args):
        return None
    name = getattr(function, "__name__", "")
    twin = getattr(torch, f"_sym_{name}", None)
    if twin is not None and len(args) == 1:
        return tx.graph.call(tx, "call_function", twin, args, {})
    if name in ("floor", "ceil", "trunc") and len(args) == 1:
        return tx.graph.call(tx, "call_function", getattr(math, name), args, {})
    return None


def symbolic_equal(tx, left, right) -> bool | None:
    """`left == right` where one is a symbolic number (inside `in`, list.index, tuple ==): the
    ShapeEnv decides, and guards the answer; None if neither is symbolic."""
    from .variables.operators import binary_op

    if not (isinstance(left, SymNodeVariable) or isinstance(right, SymNodeVariable)):
        return None
    other = right if isinstance(left, SymNodeVariable) else left
    if isinstance(other, SymNodeVariable) or (other.is_python_constant() and
                                               type(other.as_python_constant()) in (bool, int, float)):
        return binary_op(tx, operator.eq, left, right).truth(tx)
    if other.is_python_constant() and not isinstance(other.as_python_constant(), complex):
        value = other.as_python_constant()
        if not isinstance(value, (int, float)) and type(value).__eq__ is object.__eq__ or \
                isinstance(value, (str, bytes, tuple, list, dict, set, frozenset, type(None))):
            return False  # (an int or float never equals a str, None, a container...)
    raise Unsupported(f"comparing a symbolic number with {other!r}")


_DIVISIONS = ("truediv", "floordiv", "mod", "itruediv", "ifloordiv", "imod")


def check_divisor(tx, function, left, right) -> None:
    """`left / right` (//, %) with a symbolic number: a divisor that is 0 raises eager's
    ZeroDivisionError here (guarded: `d == 0`), else the graph divides (guarded: `d != 0`)."""
    from .variables.operators import binary_op

    if getattr(function, "__name__", "") not in _DIVISIONS or not isinstance(right, SymNodeVariable):
        return
    if not binary_op(tx, operator.eq, right, constant(0)).truth(tx):
        return
    hints = [v.value.node.hint if isinstance(v, SymNodeVariable) else v.as_python_constant() for v in (left, right)]
    try:
        function(*hints)
    except ZeroDivisionError as error:
        raise UserException(error) from None
