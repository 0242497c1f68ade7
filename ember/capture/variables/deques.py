"""collections.deque made inside a compiled function: a real deque whose items are variables.

Its methods run on that real deque, so it changes (a full bounded deque drops from the other end) and
raises as eager's does; only positions are constants and `remove` compares items as Python's == does.
A deque passed in is not modelled.  An iterator over it raises, as eager's does, if the deque changed.
"""
from __future__ import annotations

import collections
import functools
import operator

from ..errors import Unsupported, UserException
from .base import ContainerVariable, SpelledMethodVariable, VariableTracker, constant, user_errors
from .builtins import register, values_equal
from .containers import ListIteratorVariable


class DequeVariable(ContainerVariable):
    def __init__(self, items: list[VariableTracker], maxlen: int | None = None) -> None:
        super().__init__()
        self.items: collections.deque[VariableTracker] = collections.deque(items, maxlen)
        self.version = 0  # changes on every mutation: live iterators check it

    @property
    def maxlen(self) -> int | None:
        return self.items.maxlen

    def python_type(self) -> type:
        return collections.deque

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def get_iter(self, tx) -> VariableTracker:
        return _DequeIteratorVariable(self)

    def contained_values(self) -> list[VariableTracker]:
        return list(self.items)

    def reconstruct_expr(self, cg) -> str:
        items = "".join(f"{cg.reconstruct(item)}, " for item in self.items)
        maxlen = f", maxlen={self.maxlen}" if self.maxlen is not None else ""
        return f"{cg.ref(collections.deque, 'type')}(({items}){maxlen})"

    def __repr__(self) -> str:
        return f"DequeVariable({list(self.items)!r}, maxlen={self.maxlen})"

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return self.call_method(tx, "__getitem__", [index], {})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "maxlen":
            return constant(self.maxlen)
        if name in _METHODS:
            return SpelledMethodVariable(self, name)
        if hasattr(collections.deque, name):
            raise Unsupported(f"deque.{name}")
        raise UserException(AttributeError(f"'collections.deque' object has no attribute '{name}'"))

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs or name not in _METHODS:
            raise Unsupported(f"deque.{name} with these arguments")
        arity = _METHODS[name]
        if len(args) not in arity:
            raise UserException(TypeError(f"deque.{name}() takes {arity[-1]} arguments ({len(args)} given)"))
        items = self.items
        if name == "remove":
            position = next((at for at, item in enumerate(items) if values_equal(tx, item, args[0])), None)
            if position is None and not args[0].is_python_constant():
                raise Unsupported("deque.remove of a value not in the deque")  # (its repr)
            if position is None:
                raise UserException(ValueError(f"{args[0].as_python_constant()!r} is not in deque"))
            args = [constant(position)]
            name = "__delitem__"
        if name in ("copy", "__len__"):
            return DequeVariable(list(items), self.maxlen) if name == "copy" else constant(len(items))
        if name in ("extend", "extendleft"):
            args = [args[0].unpack_sequence(tx)]  # (read before changing: d.extend(d))
        elif name.startswith("__") and not args[0].is_python_constant():  # d[i] = x, del d[i], d[i]
            raise Unsupported(f"indexing a deque with {args[0]}")
        elif name.startswith("__") or (name in ("insert", "rotate") and args):
            args = [args[0].as_python_constant(), *args[1:]]
        # (d[i] through operator: `d.__getitem__("a")` words its TypeError apart from `d["a"]`)
        method = functools.partial(getattr(operator, name[2:-2]), items) if name.startswith("__") \
            else getattr(items, name)
        with user_errors(IndexError, TypeError):
            result = method(*args)
        if name == "__getitem__":
            return result
        self.version += 1
        return result if name in ("pop", "popleft") else constant(None)


# method -> the numbers of positional arguments it takes
_METHODS = {
    "append": (1,), "appendleft": (1,), "extend": (1,), "extendleft": (1,), "pop": (0,), "popleft": (0,),
    "insert": (2,), "clear": (0,), "reverse": (0,), "rotate": (0, 1), "remove": (1,), "copy": (0,),
    "__getitem__": (1,), "__setitem__": (2,), "__delitem__": (1,), "__len__": (0,),
}


class _DequeIteratorVariable(ListIteratorVariable):
    def __init__(self, deque: DequeVariable) -> None:
        super().__init__(list(deque.items), iterator_type=type(iter(collections.deque())))
        self.deque = deque
        self.version = deque.version

    def _check(self) -> None:
        # Eager raises RuntimeError for some changes only (not for d[i] = x): not modelled.
        if self.deque.version != self.version:
            raise Unsupported("iterating a deque that changed since the iterator was made")

    def next_value(self, tx) -> VariableTracker | None:
        self._check()
        return super().next_value(tx)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        self._check()
        return super().unpack_sequence(tx)


@register(collections.deque)
def _deque(tx, iterable=None, maxlen=None):
    items = iterable.unpack_sequence(tx) if iterable is not None else []
    if maxlen is not None:
        if not maxlen.is_python_constant():
            raise Unsupported("deque(maxlen=) not a constant")
        maxlen = maxlen.as_python_constant()
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 0):
            raise UserException(ValueError("maxlen must be non-negative") if isinstance(maxlen, int)
                                else TypeError("an integer is required"))
    return DequeVariable(items, maxlen)
