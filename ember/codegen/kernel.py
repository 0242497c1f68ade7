"""The kernel emitter both backends share (buffer arguments, scopes of common subexpressions,
temporaries, bounds-checked data-dependent indices; CppKernel and TritonKernel differ by a few
spellings and by their loops and blocks), and what both builds share: the cache folder and the
error of a kernel that does not compile.
"""
from __future__ import annotations

import os

import sympy
import torch

from .. import config as ember_config


# ops method -> expression template over the operands {0}, {1}, ...: the ops both backends
# spell alike (C and Python share their infix operators); each backend's table adds the rest
COMMON_OPS: dict[str, str] = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "neg": "(-{0})",
    "square": "({0} * {0})", "identity": "{0}",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
}


def named_calls(namespace: str, unary: str = "", binary: str = "") -> dict[str, str]:
    """Ops spelled as the library function of their own name: `std::exp({0})`, `libdevice.atan2({0}, {1})`."""
    table = {name: f"{namespace}{name}({{0}})" for name in unary.split()}
    table.update({name: f"{namespace}{name}({{0}}, {{1}})" for name in binary.split()})
    return table


class KernelCompileError(RuntimeError):
    """A generated kernel that its compiler (g++, Triton) rejected; the message names the file
    with its source.  Where a graph is compiled (codegen/compile.py) its graph runs as ATen calls."""


def cache_dir() -> str:
    """ember's kernel cache: ember.config.cache_dir, else $EMBER_CACHE_DIR, else ~/.cache/ember."""
    path = ember_config.get("cache_dir") or os.environ.get("EMBER_CACHE_DIR") or os.path.join("~", ".cache", "ember")
    path = os.path.expanduser(path)
    os.makedirs(path, exist_ok=True)
    return path


def loop_index(ranges, variables) -> list:
    """An index over `ranges` in the kernel's loop variables, taken in order: a dim of size 1
    has none (its index is 0), the others the next variable (the scheduler dropped the size-1
    dims from the loops it made)."""
    available = list(variables)
    return [sympy.Integer(0) if size == 1 else available.pop(0) for size in ranges]


class Scope:
    """Lines at one nesting level (a kernel's body, a C++ block, a Triton r loop) and what they
    computed: `cse` (expression text -> its temporary) and `stored` ((buffer, index text) -> the
    value stored there).  Lookups walk out through the enclosing scopes."""

    _serial = 0

    def __init__(self, parent: "Scope | None" = None) -> None:
        self.parent = parent
        Scope._serial += 1
        self.serial = Scope._serial
        self.lines: list[str] = []
        self.cse: dict[str, str] = {}
        self.stored: dict[tuple[str, str], str] = {}

    def find(self, table: str, key):
        scope = self
        while scope is not None:
            found = getattr(scope, table).get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


class Emitter:
    """What a kernel generator holds while it writes one kernel: inputs read through `in_ptrK`,
    outputs (set by subclasses) written through `out_ptrK`, and temporaries (`emit`).  Subclasses
    spell an assignment (`ASSIGN`) and the lines of a checked index (`INDEX_*`, `flag_bad_index`)."""

    ASSIGN: str  # "{name} = {expr}"
    INDEX_CAST: str  # "{name} = {value}" as a 64-bit integer
    INDEX_WRAP: str  # negative indices count from the end of a dim of {size}
    INDEX_BAD: str  # "{name}_bad": outside [0, {size})
    INDEX_CLAMP: str  # a bad index reads row 0

    def __init__(self) -> None:
        self.inputs: list[str] = []  # buffer names read, in argument order
        self.index_checks: list[str] = []  # sites of bounds-checked indexing, in order of first use
        self.scope = Scope()
        self.value_dtypes: dict[str, torch.dtype] = {}  # temporary -> its dtype, where known
        self.bounds: dict = {}  # loop variable -> its largest value (index simplification)
        self._temps = 0

    # -- arguments --------------------------------------------------------------------------------
    def input_pointer(self, name: str) -> str:
        if name in self.outputs:
            return f"out_ptr{self.outputs.index(name)}"
        if name not in self.inputs:
            self.inputs.append(name)
        return f"in_ptr{self.inputs.index(name)}"

    def index_check_site(self, site: str) -> int:
        """The position of `site` among the kernel's bounds checks (a bit in C++, an element in Triton)."""
        if site not in self.index_checks:
            self.index_checks.append(site)
        return self.index_checks.index(site)

    # -- values -----------------------------------------------------------------------------------
    def new_temp(self, prefix: str = "tmp") -> str:
        self._temps += 1
        return f"{prefix}{self._temps}"

    def emit(self, expr: str, dtype: torch.dtype | None = None) -> str:
        """A temporary holding `expr` (reused where the same text was computed in scope); its dtype,
        where known, lets ops refuse operands a backend would treat otherwise than eager."""
        found = self.scope.find("cse", expr)
        if found is not None:
            return found
        name = self.new_temp()
        self.scope.lines.append(self.ASSIGN.format(name=name, expr=expr))
        self.scope.cse[expr] = name
        if dtype is not None:
            self.value_dtypes[name] = dtype
        return name

    def text(self, expr) -> str:
        """An index or size expression in the backend's syntax."""
        raise NotImplementedError

    def checked_index(self, value: str, size, site: str = "", wrap_negative: bool = True) -> sympy.Symbol:
        """A data-dependent index, bounds-checked: one outside [0, size) ([-size, size) where negative
        indices count from the end) sets this site's flag (the wrapper raises) and reads row 0."""
        name = self.new_temp("idx")
        size_text = self.text(size)
        lines = self.scope.lines
        lines.append(self.INDEX_CAST.format(name=name, value=value))
        if wrap_negative:
            lines.append(self.INDEX_WRAP.format(name=name, size=size_text))
        lines.append(self.INDEX_BAD.format(name=name, size=size_text))
        if ember_config.bounds_checks:
            lines.append(self.flag_bad_index(name, self.index_check_site(site)))
        lines.append(self.INDEX_CLAMP.format(name=name))
        symbol = sympy.Symbol(name, integer=True, nonnegative=True)
        self.bounds[symbol] = sympy.sympify(size) - 1  # (checked, and 0 where it was not in range)
        return symbol

    def flag_bad_index(self, name: str, position: int) -> str:
        """The line that reports `{name}_bad` at check site `position`."""
        raise NotImplementedError
