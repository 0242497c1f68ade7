"""Sizes that change become symbols: one captured graph for a backward at every size.

A captured graph is traced with real tensors, so the sizes a node's backward uses are constants in
it.  When a backward misses the cache only because sizes in its key changed, the cached trace and
this one are lined up op by op:

    key     int leaves of the key's shape-like parts that differ become symbols, one per distinct
            (old, new) pair (equal sizes share one, as torch's duck sizing); sizes 0 and 1 stay constants
    graph   every int argument that differs is written as a symbol, k times one, or a product of two;
            any other difference keeps the sizes static
    inputs  each symbol's value reaches the graph as the size of one more input, `sizes_k` (an
            expanded scalar: no memory), so a compiler behind it sees sizes of tensor inputs

A third size could take a formula another way (a size-dependent branch in a C++ backward), so the
first backward at each new key is traced again and compared with the symbolic graph at its sizes:
equal, the compiled graph runs; different, that key is captured on its own.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any

import torch


class NotGeneral(Exception):
    """The two traces differ in more than sizes (the message says where)."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """A key leaf that became a symbol: its position among the key's tokens, and where it is in
    the key (part 0: the roots; part p: node p - 1) for the log."""
    position: int
    part: int
    path: str


def key_tokens(key: tuple) -> tuple[list, list]:
    """The key as a flat token list and, per token, its place: (part, path) where the token is an
    int in a shape-like part of the key, else None.  Nesting is kept as ("(", length) tokens."""
    tokens: list = []
    places: list = []

    def walk(value: Any, part: int, path: str | None) -> None:
        if isinstance(value, tuple):
            tokens.append(("(", len(value)))
            places.append(None)
            for index, item in enumerate(value):
                walk(item, part, None if path is None else path + _step(value, index))
            return
        tokens.append(value)
        places.append((part, path) if path is not None and type(value) is int else None)

    roots, targets = key[0]
    walk(targets, 0, None)
    tokens.append(("(", len(roots)))
    places.append(None)
    for index, (position, number, described) in enumerate(roots):
        walk(position, 0, None)
        walk(number, 0, None)
        walk(described, 0, f"root gradient {index}")
    for part, node_part in enumerate(key[1:], start=1):
        shaped = {1: "leaf", 2: "leaf.grad"} if node_part[0] == "accumulate" else {4: ""}
        tokens.append(("(", len(node_part)))
        places.append(None)
        for index, item in enumerate(node_part):
            walk(item, part, shaped.get(index))
    return tokens, places


def _step(value: tuple, index: int) -> str:
    """How the log names item `index` of a key tuple: `.shape`/`.stride` of a tensor's
    description, a saved value by its name (`_saved_self_sym_sizes`), else `[index]`."""
    if value and value[0] == "tensor" and index in (1, 2):
        return ".shape" if index == 1 else ".stride"
    if _named(value):
        return value[0] if index == 1 else ""
    return "" if _named(value[index]) else f"[{index}]"


def _named(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and value[0].startswith("_saved")


@dataclasses.dataclass
class Symbols:
    """The symbols two keys' differences make: `slots` (key leaves) -> symbol number, and each
    symbol's value at the old and new key."""
    slots: dict[int, int]
    old: list[int]
    new: list[int]
    described: list[Slot]


def symbols_between(old_tokens: list, new_tokens: list, places: list) -> Symbols:
    """The symbols for two keys that differ only in sizes, or NotGeneral."""
    if len(old_tokens) != len(new_tokens):
        raise NotGeneral("the keys differ in structure")
    pairs: dict[tuple[int, int], int] = {}
    slots: dict[int, int] = {}
    described = []
    for position, (a, b, place) in enumerate(zip(old_tokens, new_tokens, places)):
        if a == b and type(a) is type(b):
            continue
        if place is None or type(a) is not int or type(b) is not int:
            raise NotGeneral("the keys differ in more than sizes")
        if min(a, b) < 2:
            raise NotGeneral(f"a size changed from {a} to {b} (sizes 0 and 1 stay constants)")
        slots[position] = pairs.setdefault((a, b), len(pairs))
        described.append(Slot(position, *place))
    if not pairs:
        raise NotGeneral("the keys are equal")
    return Symbols(slots, [a for a, _ in pairs], [b for _, b in pairs], described)


def bind(symbols: Symbols, tokens: list, template: list) -> list[int] | None:
    """The symbols' values at a key's tokens, or None where they do not fit the template (the
    tokens the symbols were found at): other fixed tokens, or a symbol's slots not one size >= 2."""
    if len(tokens) != len(template):
        return None
    values: list[int | None] = [None] * len(symbols.old)
    slots = symbols.slots
    for position, (token, expected) in enumerate(zip(tokens, template)):
        symbol = slots.get(position)
        if symbol is None:
            if token != expected or type(token) is not type(expected):
                return None
            continue
        if type(token) is not int or token < 2:
            return None
        if values[symbol] is None:
            values[symbol] = token
        elif values[symbol] != token:
            return None
    return values  # type: ignore[return-value]


# -- the graph ------------------------------------------------------------------------------------
# An expression of the symbols: ("s", k), ("mul", m, e) (m times e), ("prod", i, j) (s_i * s_j).
def evaluate(expr: tuple, values: list[int]) -> int:
    if expr[0] == "s":
        return values[expr[1]]
    if expr[0] == "prod":
        return values[expr[1]] * values[expr[2]]
    return expr[1] * evaluate(expr[2], values)


def _solve(old: int, new: int, symbols: Symbols) -> tuple | None:
    """The simplest expression of the symbols that is `old` at the old key's sizes and `new` at
    the new one's, or None."""
    count = len(symbols.old)
    bases = [("s", k) for k in range(count)] + \
        [("prod", i, j) for i in range(count) for j in range(i, count)]
    for base in bases:
        at_old, at_new = evaluate(base, symbols.old), evaluate(base, symbols.new)
        if (at_old, at_new) == (old, new):
            return base
        if at_new and new % at_new == 0 and new // at_new >= 2 and new // at_new * at_old == old:
            return ("mul", new // at_new, base)
    return None


SIZE_EXPR = "ember_size_expr"  # node.meta key of the nodes that compute a symbol expression


def symbolic_graph(old: torch.fx.Graph, new: torch.fx.Graph, symbols: Symbols) -> torch.fx.Graph:
    """`new` with every int argument that differs from `old`'s written over the symbols (read
    from the last inputs, `sizes_k`); NotGeneral where the two differ otherwise."""
    old_nodes, new_nodes = list(old.nodes), list(new.nodes)
    if len(old_nodes) != len(new_nodes):
        raise NotGeneral(f"the traces have {len(old_nodes)} and {len(new_nodes)} nodes")
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    index_of = {node: index for index, node in enumerate(old_nodes)}
    made: dict[tuple, torch.fx.Node] = {}
    sizes: list = []

    def expression(expr: tuple) -> torch.fx.Node:
        if expr not in made:
            if expr[0] == "s":
                node = graph.call_method("size", (sizes[expr[1]], 0))
            elif expr[0] == "prod":
                node = graph.call_function(operator.mul, (expression(("s", expr[1])), expression(("s", expr[2]))))
            else:
                node = graph.call_function(operator.mul, (expr[1], expression(expr[2])))
            node.meta[SIZE_EXPR] = expr
            made[expr] = node
        return made[expr]

    def argument(a: Any, b: Any, where: str) -> Any:
        if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
            if index_of.get(a) != new_index[b]:
                raise NotGeneral(f"{where} reads another value")
            return env[b]
        if isinstance(a, (tuple, list)) and type(a) is type(b):
            if len(a) != len(b):
                raise NotGeneral(f"{where} has {len(a)} and {len(b)} items")
            return type(b)(argument(x, y, where) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                raise NotGeneral(f"{where} has other keyword arguments")
            return {k: argument(a[k], b[k], where) for k in b}
        if type(a) is int and type(b) is int and a != b:
            expr = _solve(a, b, symbols)
            if expr is None:
                raise NotGeneral(f"{where} has {a} and {b}, no expression of the sizes")
            return expression(expr)
        if type(a) is not type(b) or a != b:
            raise NotGeneral(f"{where} differs: {a!r:.60} and {b!r:.60}")
        return b

    new_index = {node: index for index, node in enumerate(new_nodes)}
    for a, b in zip(old_nodes, new_nodes):
        if a.op != b.op or a.target != b.target:
            raise NotGeneral(f"{b.name}: {a.op} {a.target} and {b.op} {b.target}")
        if b.op == "placeholder":
            if a.meta.get("ember_source") != b.meta.get("ember_source"):
                raise NotGeneral(f"input {b.name} comes from elsewhere")
            env[b] = graph.placeholder(b.name)
            env[b].meta.update(b.meta)
            continue
        if not sizes:  # (one input per symbol: one tensor of all the sizes could hold more elements than int64 counts)
            for k in range(len(symbols.new)):
                sizes.append(graph.placeholder(f"sizes_{k}"))
                sizes[-1].meta[SIZE_EXPR] = ("sizes",)
        where = f"{b.name} ({b.meta.get('ember_origin', '')})"
        args = argument(a.args, b.args, where)
        kwargs = argument(dict(a.kwargs), dict(b.kwargs), where)
        if b.op == "output":
            graph.output(args[0])
            continue
        node = graph.create_node(b.op, b.target, args, kwargs, name=b.name)
        node.meta.update(b.meta)
        env[b] = node
    return graph


def signature(graph: torch.fx.Graph, values: list[int] | None = None) -> list:
    """The graph's ops with their arguments, size expressions evaluated at `values`, values read
    by position: two traces of one backward at one size have equal signatures."""
    position: dict[torch.fx.Node, int] = {}
    rows: list = []

    def plain(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            expr = a.meta.get(SIZE_EXPR)
            if expr is not None:
                return ("int", evaluate(expr, values))
            return ("node", position[a])
        if isinstance(a, (tuple, list)):
            return (type(a).__name__, tuple(plain(x) for x in a))
        if isinstance(a, dict):
            return ("dict", tuple((k, plain(v)) for k, v in a.items()))
        if type(a) is int:
            return ("int", a)
        return (type(a).__name__, a)

    for node in graph.nodes:
        if SIZE_EXPR in node.meta:
            continue
        position[node] = len(position)
        source = node.meta.get("ember_source") if node.op == "placeholder" else None
        rows.append((node.op, node.target if node.op != "placeholder" else source, plain(node.args),
                     plain(dict(node.kwargs))))
    return rows


_SCALARS: dict = {}


def sizes_input(values: list[int], device: torch.device) -> list[torch.Tensor]:
    """Per symbol, an expanded scalar whose size is its value, on the backward's device (a CPU
    input would keep a CUDA graph from being recorded)."""
    if device not in _SCALARS:
        _SCALARS[device] = torch.zeros((), device=device)
    scalar = _SCALARS[device]
    return [scalar.expand(value) for value in values]
