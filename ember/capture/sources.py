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
import math

from .source_text import is_keyword_name

GLOBALS = "__ember_globals"
CLOSURE = "__ember_closure"


class Source:
    """A path to a value.  Most subclasses are rendered from the templates `_expr`, `_name` and
    `_user` over their fields, each Source field by the same method of its own."""

    _expr = _name = _user = ""

    def expr(self) -> str:
        return self._render(self._expr, "expr")

    def name(self) -> str:
        """A readable identifier for graph placeholders (`self.linear.weight` -> self_linear_weight)."""
        return self._render(self._name, "name")

    def user_path(self) -> str:
        """The path as the user wrote it, for messages (`self._modules['fc']._parameters['weight']`
        -> `self.fc.weight`); the guard's expression where there is no such spelling."""
        return self._render(self._user, "user_path") if self._user else self.expr()

    def root(self) -> "Source":
        base = getattr(self, "base", None)
        return self if base is None else base.root()

    def _render(self, template: str, method: str) -> str:
        return template.format(**{key: getattr(value, method)() if isinstance(value, Source) else value
                                  for key, value in vars(self).items()})


def _attr_path(base: str, name: str) -> str:
    return f"{base}.{name}" if name.isidentifier() else f"getattr({base}, {name!r})"


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    local: str
    _expr = _name = _user = "{local}"


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str
    _expr, _name, _user = GLOBALS + "[{global_name!r}]", "{global_name}", "{global_name}"


@dataclasses.dataclass(frozen=True)
class ClosureSource(Source):
    """Cell `index` of the frame's own closure (a free variable of the root function)."""

    index: int
    var_name: str
    _expr, _name, _user = CLOSURE + "[{index}].cell_contents", "{var_name}", "{var_name}"


@dataclasses.dataclass(frozen=True)
class CellContentsSource(Source):
    """Cell `index` of the closure of a function object found at `base`."""

    base: Source
    index: int
    _expr = _user = "{base}.__closure__[{index}].cell_contents"
    _name = "{base}_closure_{index}"


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str
    _name = "{base}_{attr}"

    def expr(self) -> str:
        if is_keyword_name(self.attr) and not self.attr.startswith("__"):
            return f"{self.base.expr()}.{self.attr}"
        return f"getattr({self.base.expr()}, {self.attr!r})"

    def user_path(self) -> str:
        return _attr_path(self.base.user_path(), self.attr)


@dataclasses.dataclass(frozen=True)
class ModuleDictSource(Source):
    """An entry of an nn.Module's _parameters/_buffers/_modules dict: fast and hook-free."""

    base: Source
    table: str  # "_parameters" | "_buffers" | "_modules"
    key: str
    _expr, _name = "{base}.{table}[{key!r}]", "{base}_{key}"

    def user_path(self) -> str:
        return _attr_path(self.base.user_path(), self.key)


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
    _name, _user = "{base}_{key}", "{base}[{key!r}]"

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key_expr or literal(self.key) or repr(self.key)}]"


@dataclasses.dataclass(frozen=True)
class DictItemSource(Source):
    """An item of a dict subclass read with dict's own lookup (no overridden __getitem__)."""

    base: Source
    key: object
    _expr, _name, _user = "dict.__getitem__({base}, {key!r})", "{base}_{key}", "{base}[{key!r}]"


@dataclasses.dataclass(frozen=True)
class IterationItemSource(Source):
    """The `index`-th item that iterating `base` gives: a dict key or a set member that has no
    literal (a tensor, an object)."""

    base: Source
    index: int
    _expr, _name = "list({base})[{index}]", "{base}_key_{index}"


@dataclasses.dataclass(frozen=True)
class DictValueSource(Source):
    """The value stored under the `index`-th key of a dict (its key has no literal)."""

    base: Source
    index: int
    _expr, _name = "list({base}.values())[{index}]", "{base}_value_{index}"


@dataclasses.dataclass(frozen=True)
class WeakRefCallSource(Source):
    """The object a weakref found at `base` points to (`base()`)."""

    base: Source
    _expr, _name = "{base}()", "{base}_referent"
