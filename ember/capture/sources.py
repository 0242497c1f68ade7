"""Sources: where a value seen during capture came from in the user's frame.

A source is a small immutable path (argument `x`, global `W`, closure cell 0, attribute
`.weight` of another source, item `[2]` of another source).  The same path is used twice:
guards check the value found there on every call, and the glue code that runs after a graph
reads inputs from there.  `expr()` renders the path as a Python expression that is valid in
both generated functions, whose parameters are the frame's arguments plus these names:

    __ember_globals   the frame's globals dict
    __ember_closure   the frame's closure tuple (cells)
"""
from __future__ import annotations

import dataclasses
import keyword
import math

GLOBALS = "__ember_globals"
CLOSURE = "__ember_closure"


class Source:
    def expr(self) -> str:
        raise NotImplementedError

    def name(self) -> str:
        """A readable identifier for graph placeholders (`self.linear.weight` -> self_linear_weight)."""
        raise NotImplementedError

    def root(self) -> "Source":
        return self


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    local: str

    def expr(self) -> str:
        return self.local

    def name(self) -> str:
        return self.local


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str

    def expr(self) -> str:
        return f"{GLOBALS}[{self.global_name!r}]"

    def name(self) -> str:
        return self.global_name


@dataclasses.dataclass(frozen=True)
class ClosureSource(Source):
    """Cell `index` of the frame's own closure (a free variable of the root function)."""

    index: int
    var_name: str

    def expr(self) -> str:
        return f"{CLOSURE}[{self.index}].cell_contents"

    def name(self) -> str:
        return self.var_name


@dataclasses.dataclass(frozen=True)
class CellContentsSource(Source):
    """Cell `index` of the closure of a function object found at `base`."""

    base: Source
    index: int

    def expr(self) -> str:
        return f"{self.base.expr()}.__closure__[{self.index}].cell_contents"

    def name(self) -> str:
        return f"{self.base.name()}_closure_{self.index}"

    def root(self) -> Source:
        return self.base.root()


def _is_identifier(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def expr(self) -> str:
        if _is_identifier(self.attr) and not self.attr.startswith("__"):
            return f"{self.base.expr()}.{self.attr}"
        return f"getattr({self.base.expr()}, {self.attr!r})"

    def name(self) -> str:
        return f"{self.base.name()}_{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class ModuleDictSource(Source):
    """An entry of an nn.Module's _parameters/_buffers/_modules dict: fast and hook-free."""

    base: Source
    table: str  # "_parameters" | "_buffers" | "_modules"
    key: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.table}[{self.key!r}]"

    def name(self) -> str:
        return f"{self.base.name()}_{self.key}"

    def root(self) -> Source:
        return self.base.root()


def literal(value: object) -> str | None:
    """Python source that evaluates to `value` with only builtins in scope, or None.
    (`torch.float32`, `inf` or an enum member print as names that generated code lacks.)"""
    if value is None or value is Ellipsis or type(value) in (bool, int, str, bytes):
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else None
    if type(value) in (tuple, frozenset):
        parts = [literal(item) for item in value]
        if any(part is None for part in parts):
            return None
        inner = "".join(f"{part}, " for part in parts)
        return f"({inner})" if type(value) is tuple else f"frozenset(({inner}))"
    return None


@dataclasses.dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    key: object  # a hashable constant
    key_expr: str | None = None  # how the key is spelled when it has no literal (a guard reference)

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key_expr or literal(self.key) or repr(self.key)}]"

    def name(self) -> str:
        return f"{self.base.name()}_{self.key}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class TypeSource(Source):
    base: Source

    def expr(self) -> str:
        return f"type({self.base.expr()})"

    def name(self) -> str:
        return f"type_{self.base.name()}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class DictItemSource(Source):
    """An item of a dict subclass read with dict's own lookup (no overridden __getitem__)."""

    base: Source
    key: object

    def expr(self) -> str:
        return f"dict.__getitem__({self.base.expr()}, {self.key!r})"

    def name(self) -> str:
        return f"{self.base.name()}_{self.key}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class IterationItemSource(Source):
    """The `index`-th item that iterating `base` gives: a dict key or a set member that has no
    literal (a tensor, an object)."""

    base: Source
    index: int

    def expr(self) -> str:
        return f"list({self.base.expr()})[{self.index}]"

    def name(self) -> str:
        return f"{self.base.name()}_key_{self.index}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class KeyedItemSource(Source):
    """An item of a dict whose key is an object, not a constant (`opt.state[param]`)."""

    base: Source
    key: Source

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key.expr()}]"

    def name(self) -> str:
        return f"{self.base.name()}_{self.key.name()}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class DictValueSource(Source):
    """The value stored under the `index`-th key of a dict (its key has no literal)."""

    base: Source
    index: int

    def expr(self) -> str:
        return f"list({self.base.expr()}.values())[{self.index}]"

    def name(self) -> str:
        return f"{self.base.name()}_value_{self.index}"

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class WeakRefCallSource(Source):
    """The object a weakref found at `base` points to (`base()`)."""

    base: Source

    def expr(self) -> str:
        return f"{self.base.expr()}()"

    def name(self) -> str:
        return f"{self.base.name()}_referent"

    def root(self) -> Source:
        return self.base.root()
