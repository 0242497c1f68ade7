"""The base of all symbolic values, and Python constants.

A VariableTracker stands for one Python value during symbolic execution: it knows where the value
came from (`source`, for guards and for reading it back) and answers attribute reads, calls, method
calls and iteration.  What it cannot do symbolically raises `Unsupported` (a graph break); it never guesses.
"""
from __future__ import annotations

import contextlib
import operator
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported, UserException

if TYPE_CHECKING:  # pragma: no cover
    from ..translator import Translator
    from ..sources import Source


class VariableTracker:
    source: "Source | None" = None

    def __init__(self, source: "Source | None" = None) -> None:
        self.source = source

    # -- what the value is --------------------------------------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"type() of {self}")

    def is_python_constant(self) -> bool:
        from ..shapes import StaticShapesNeeded

        try:
            self.as_python_constant()
            return True
        except (Unsupported, StaticShapesNeeded):  # (a dynamic size inside: not a constant)
            return False

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self} is not a Python constant")

    def truth(self, tx: "Translator") -> bool:
        """bool(value) when it is known at capture time; raises Unsupported otherwise."""
        return bool(self.as_python_constant())

    # -- operations -----------------------------------------------------------------------------
    def var_getattr(self, tx: "Translator", name: str) -> "VariableTracker":
        raise Unsupported(f"attribute {name!r} of {self}")

    def call_function(self, tx: "Translator", args: list, kwargs: dict) -> "VariableTracker":
        raise Unsupported(f"call of {self}")

    def call_method(self, tx: "Translator", name: str, args: list, kwargs: dict) -> "VariableTracker":
        method = self.var_getattr(tx, name)
        return method.call_function(tx, args, kwargs)

    def unpack_sequence(self, tx: "Translator") -> list["VariableTracker"]:
        raise Unsupported(f"iteration over {self}")

    def get_iter(self, tx: "Translator") -> "VariableTracker":
        from .containers import ListIteratorVariable

        return ListIteratorVariable(self.unpack_sequence(tx))

    def __repr__(self) -> str:
        where = f" from {self.source.expr()}" if self.source is not None else ""
        return f"{type(self).__name__}{where}"


class ContainerVariable(VariableTracker):
    """A list, tuple, dict, set or deque: true when its `items` are not empty; a mutation of one
    that existed before the frame is recorded, to be written back after the graph runs."""

    def truth(self, tx: "Translator") -> bool:
        return bool(self.items)

    def mutated(self, tx: "Translator") -> None:
        tx.graph.side_effects.mutate_container(self)


class MethodVariable(VariableTracker):
    """`owner.name` before it is called: calling it is the owner's call_method."""

    def __init__(self, owner: VariableTracker, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx: "Translator", args: list, kwargs: dict) -> "VariableTracker":
        return self.owner.call_method(tx, self.name, args, kwargs)


class SpelledMethodVariable(MethodVariable):
    """A MethodVariable the glue spells `owner.name` when it outlives a graph."""

    def contained_values(self) -> list:
        return [self.owner]

    def reconstruct_expr(self, codegen) -> str:
        return f"{codegen.reconstruct(self.owner)}.{self.name}"


class NullVariable(VariableTracker):
    """The NULL that CPython pushes below a callable (PUSH_NULL, LOAD_GLOBAL with the low bit)."""

    def __repr__(self) -> str:
        return "NULL"


NULL = NullVariable()


class OpaqueVariable(VariableTracker):
    """A value whose contents the capture cannot know: every question about it breaks (`_refuse`)."""

    truth_question = "bool()"

    def _refuse(self, what: str):
        raise NotImplementedError

    def as_python_constant(self):
        self._refuse("the value")

    def truth(self, tx) -> bool:
        self._refuse(self.truth_question)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        self._refuse(f"attribute {name!r}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        self._refuse(f"method {name!r}")

    def unpack_sequence(self, tx):
        self._refuse("iteration")


CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented), torch.dtype,
    torch.device, torch.Size, range, slice, frozenset, types.CodeType, torch.memory_format, torch.layout,
    # a GPU's fixed facts (torch.cuda.get_device_properties): read-only, one per device
    *[cls for cls in (getattr(torch._C, "_CudaDeviceProperties", None),) if cls is not None],
)


def is_constant_value(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset, torch.Size):
        return all(is_constant_value(item) for item in value)
    if isinstance(value, slice):
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    return type(value) in CONSTANT_TYPES


class ConstantVariable(VariableTracker):
    """An immutable Python value known at capture time (int, str, dtype, torch.Size, ...)."""

    def __init__(self, value: Any, source: "Source | None" = None) -> None:
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def truth(self, tx) -> bool:
        return bool(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import wrap_constant_result

        return wrap_constant_result(tx, real_getattr(self.value, name))

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        # Every method of an immutable builtin value is free of side effects: run it for real.
        if not all_constant(args, kwargs):
            raise Unsupported(f"{type(self.value).__name__}.{name} with a non-constant argument")
        # (a missing method's AttributeError too: the user's error)
        return run_for_real(tx, lambda *a, **k: getattr(self.value, name)(*a, **k), args, kwargs)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (str, bytes, tuple, range, frozenset, torch.Size)):
            return [ConstantVariable(item) for item in self.value]
        raise Unsupported(f"iteration over {type(self.value).__name__}")

    def get_iter(self, tx) -> VariableTracker:
        from .containers import ListIteratorVariable, RangeIteratorVariable

        if isinstance(self.value, range):
            return RangeIteratorVariable(self.value)
        return ListIteratorVariable(self.unpack_sequence(tx))

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


def constant(value: Any) -> ConstantVariable:
    return ConstantVariable(value)


def static_of(variable: VariableTracker) -> Any:
    """The real object a variable knows it stands for (its `static_value`), else None."""
    getter = getattr(variable, "static_value", None)
    return getter() if getter is not None else None


def is_none(value: VariableTracker | None) -> bool:
    """Whether `value` is the constant None."""
    return isinstance(value, ConstantVariable) and value.value is None


def all_constant(args, kwargs: dict | None = None) -> bool:
    return all(arg.is_python_constant() for arg in [*args, *(kwargs or {}).values()])


def constant_args(args, kwargs: dict) -> tuple[list, dict]:
    """The real values of constant call arguments."""
    return [arg.as_python_constant() for arg in args], {key: arg.as_python_constant() for key, arg in kwargs.items()}


@contextlib.contextmanager
def user_errors(*kinds: type[BaseException]):
    """An exception of `kinds` (any Exception when none are named) raised inside is the user's."""
    try:
        yield
    except (kinds or Exception) as error:
        raise UserException(error) from None


def call_for_real(function, args, kwargs) -> Any:
    """`function` called on the real values of constant variables (its exception is the user's)."""
    const_args, const_kwargs = constant_args(args, kwargs)
    with user_errors():
        return function(*const_args, **const_kwargs)


def run_for_real(tx, function, args, kwargs) -> VariableTracker:
    """A pure function on constant variables: its real result, as a variable."""
    from .builder import wrap_constant_result

    return wrap_constant_result(tx, call_for_real(function, args, kwargs))


def real_getattr(value: Any, name: str) -> Any:
    """getattr of a real object; its AttributeError is the user's."""
    with user_errors(AttributeError):
        return getattr(value, name)


BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "<<": operator.lshift, ">>": operator.rshift,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
}

COMPARE_OPERATORS = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}

# In-place operators whose non-inplace form is what an immutable value falls back to (`+=` -> `+`).
INPLACE_TO_BINARY = {function: BINARY_OPERATORS[symbol[:-1]] for symbol, function in BINARY_OPERATORS.items()
                     if symbol.endswith("=")}
