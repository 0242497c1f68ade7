"""collections.deque made inside a compiled function: a list of variables plus its maxlen.

Its methods change the list as the real deque would (a full bounded deque drops from the other end).
A deque passed in is not modelled.  An iterator over it raises, as eager's does, if the deque changed.
"""
from __future__ import annotations

import collections

from ..errors import Unsupported, UserException
from .base import SpelledMethodVariable, VariableTracker, constant
from .builtins import register, values_equal
from .containers import ListIteratorVariable


class DequeVariable(VariableTracker):
    def __init__(self, items: list[VariableTracker], maxlen: int | None = None) -> None:
        super().__init__()
        self.maxlen = maxlen
        self.items: list[VariableTracker] = []
        self.version = 0  # changes on every mutation: live iterators check it
        self._extend(items, left=False)

    def python_type(self) -> type:
        return collections.deque

    def truth(self, tx) -> bool:
        return bool(self.items)

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
        return f"DequeVariable({self.items!r}, maxlen={self.maxlen})"

    # -- changes -------------------------------------------------------------------------------
    def _extend(self, new_items: list[VariableTracker], left: bool) -> None:
        for item in new_items:
            if self.maxlen == 0:
                return
            if self.maxlen is not None and len(self.items) == self.maxlen:
                del self.items[-1 if left else 0]
            if left:
                self.items.insert(0, item)
            else:
                self.items.append(item)

    def _index(self, index: VariableTracker) -> int:
        if not index.is_python_constant():
            raise Unsupported(f"indexing a deque with {index}")
        position = index.as_python_constant()
        if not isinstance(position, int):
            raise UserException(TypeError(f"sequence index must be integer, not '{type(position).__name__}'"))
        if not -len(self.items) <= position < len(self.items):
            raise UserException(IndexError("deque index out of range"))
        return position

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return self.items[self._index(index)]

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
        if name in ("append", "appendleft"):
            self._extend([args[0]], left=name == "appendleft")
        elif name in ("extend", "extendleft"):
            new_items = args[0].unpack_sequence(tx)  # (read before changing: d.extend(d))
            self._extend(new_items, left=name == "extendleft")
        elif name in ("pop", "popleft"):
            if not items:
                raise UserException(IndexError("pop from an empty deque"))
            self.version += 1
            return items.pop(-1 if name == "pop" else 0)
        elif name == "insert":
            if self.maxlen is not None and len(items) >= self.maxlen:
                raise UserException(IndexError("deque already at its maximum size"))
            items.insert(args[0].as_python_constant(), args[1])
        elif name in ("clear", "reverse"):
            getattr(items, name)()
        elif name == "rotate":
            steps = args[0].as_python_constant() if args else 1
            if items:
                steps %= len(items)
                items[:] = items[-steps:] + items[:-steps] if steps else items
        elif name == "remove":
            for position, item in enumerate(items):
                if values_equal(tx, item, args[0]):
                    del items[position]
                    break
            else:
                if not args[0].is_python_constant():
                    raise Unsupported("deque.remove of a value not in the deque")  # (its repr)
                raise UserException(ValueError(f"{args[0].as_python_constant()!r} is not in deque"))
        elif name == "copy":
            return DequeVariable(list(items), self.maxlen)
        elif name == "__getitem__":
            return self.getitem(tx, args[0])
        elif name == "__setitem__":
            items[self._index(args[0])] = args[1]
        elif name == "__delitem__":
            del items[self._index(args[0])]
        elif name == "__len__":
            return constant(len(items))
        self.version += 1
        return constant(None)


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
