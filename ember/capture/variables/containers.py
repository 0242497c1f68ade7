"""Tuples, lists, dicts, sets, named tuples and iterators over them.

Lists, dicts and sets are mutable: one variable stands for one Python object (the builder
dedupes by identity), so every alias sees a mutation.  A container that existed before the
frame ran (it has a source) and is mutated is recorded in the side-effect log and written
back after the graph runs.
"""
from __future__ import annotations

import collections
from typing import Any

from ..errors import Unsupported, UserException
from .base import ConstantVariable, VariableTracker, constant


def _const_key(tx, key: VariableTracker) -> Any:
    if key.is_python_constant():
        return key.as_python_constant()
    from .tensor import TensorVariable

    if isinstance(key, TensorVariable):
        return key.identity_key()  # torch.Tensor hashes by id(): as a key it is its identity
    hashable = getattr(key, "identity_key", None)
    if hashable is not None:
        cls = key.python_type()
        if cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__:
            raise Unsupported(f"{cls.__name__} with its own __hash__/__eq__ used as a key")
        return hashable()
    raise Unsupported(f"{key} used as a dict key or set item")


class BaseListVariable(VariableTracker):
    container_type: type = list

    def __init__(self, items: list[VariableTracker], source=None) -> None:
        super().__init__(source)
        self.items = list(items)

    def python_type(self) -> type:
        return self.container_type

    def as_python_constant(self) -> Any:
        return self.container_type(item.as_python_constant() for item in self.items)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant() if index.is_python_constant() else None
        if key is None:
            raise Unsupported(f"indexing a {self.container_type.__name__} with {index}")
        try:
            picked = self.items[key]
        except (IndexError, TypeError) as error:
            raise UserException(error) from None
        if isinstance(key, slice):
            return type(self)(picked) if not isinstance(self, NamedTupleVariable) else TupleVariable(picked)
        return picked

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__":
            return constant(len(self.items))
        if name == "__contains__" and len(args) == 1:
            from .builtins import contains

            return contains(tx, self, args[0])
        if name == "index" and args and all(a.is_python_constant() for a in [*self.items, *args]):
            try:
                return constant(self.as_python_constant().index(*[a.as_python_constant() for a in args]))
            except ValueError as error:
                raise UserException(error) from None
        if name == "count" and len(args) == 1:
            from .builtins import values_equal

            return constant(sum(1 for item in self.items if values_equal(tx, item, args[0])))
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    container_type = tuple

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a tuple")


class SizeLikeTuple(TupleVariable):
    pass


class NamedTupleVariable(TupleVariable):
    def __init__(self, items: list[VariableTracker], tuple_class: type, source=None) -> None:
        super().__init__(items, source)
        self.tuple_class = tuple_class

    def python_type(self) -> type:
        return self.tuple_class

    def as_python_constant(self) -> Any:
        return self.tuple_class(*[item.as_python_constant() for item in self.items])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fields = getattr(self.tuple_class, "_fields", ())
        if name in fields:
            return self.items[fields.index(name)]
        value = getattr(self.tuple_class, name, None)
        if callable(value):
            from .functions import UserFunctionVariable, UserMethodVariable
            import types

            if isinstance(value, types.FunctionType):
                return UserMethodVariable(UserFunctionVariable(value), self)
        raise Unsupported(f"attribute {name!r} of named tuple {self.tuple_class.__name__}")


class ListVariable(BaseListVariable):
    container_type = list

    def mutated(self, tx) -> None:
        tx.graph.side_effects.mutate_container(self)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        items = self.items
        if name == "append" and len(args) == 1:
            self.mutated(tx)
            items.append(args[0])
            return constant(None)
        if name == "extend" and len(args) == 1:
            new_items = args[0].unpack_sequence(tx)
            self.mutated(tx)
            items.extend(new_items)
            return constant(None)
        if name == "insert" and len(args) == 2:
            self.mutated(tx)
            items.insert(args[0].as_python_constant(), args[1])
            return constant(None)
        if name == "pop" and len(args) <= 1:
            index = args[0].as_python_constant() if args else -1
            try:
                value = items[index]
            except IndexError as error:
                raise UserException(IndexError("pop index out of range" if items else "pop from empty list")) from error
            self.mutated(tx)
            del items[index]
            return value
        if name == "remove" and len(args) == 1:
            from .builtins import values_equal

            for position, item in enumerate(items):
                if values_equal(tx, item, args[0]):
                    self.mutated(tx)
                    del items[position]
                    return constant(None)
            raise UserException(ValueError("list.remove(x): x not in list"))
        if name == "clear" and not args:
            self.mutated(tx)
            items.clear()
            return constant(None)
        if name == "reverse" and not args:
            self.mutated(tx)
            items.reverse()
            return constant(None)
        if name == "copy" and not args:
            return ListVariable(list(items))
        if name == "sort":
            from .builtins import sorted_items

            new_items = sorted_items(tx, items, kwargs)
            self.mutated(tx)
            items[:] = new_items
            return constant(None)
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return constant(None)
        if name == "__delitem__" and len(args) == 1:
            self.delitem(tx, args[0])
            return constant(None)
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        key = index.as_python_constant()
        self.mutated(tx)
        if isinstance(key, slice):
            self.items[key] = value.unpack_sequence(tx)
        else:
            try:
                self.items[key] = value
            except IndexError as error:
                raise UserException(error) from None

    def delitem(self, tx, index: VariableTracker) -> None:
        key = index.as_python_constant()
        self.mutated(tx)
        try:
            del self.items[key]
        except IndexError as error:
            raise UserException(error) from None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a list")


class DictVariable(VariableTracker):
    """A dict with constant keys (str, int, ...); values are any variables."""

    def __init__(self, items: dict[Any, VariableTracker], source=None, dict_type: type = dict,
                 key_vars: dict[Any, VariableTracker] | None = None) -> None:
        super().__init__(source)
        self.items = dict(items)
        self.dict_type = dict_type
        # The variable for each key (keys that are objects rather than constants).
        self.key_vars = dict(key_vars or {})
        self.default_factory: VariableTracker | None = None

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        return {key: value.as_python_constant() for key, value in self.items.items()}

    def truth(self, tx) -> bool:
        return bool(self.items)

    def key_var(self, key: Any) -> VariableTracker:
        return self.key_vars.get(key) or ConstantVariable(key)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return [self.key_var(key) for key in self.items]

    def mutated(self, tx) -> None:
        tx.graph.side_effects.mutate_container(self)

    def getitem(self, tx, key_var: VariableTracker) -> VariableTracker:
        key = _const_key(tx, key_var)
        if key in self.items:
            return self.items[key]
        if self.default_factory is not None:
            value = self.default_factory.call_function(tx, [], {})
            self.mutated(tx)
            self.items[key] = value
            self.key_vars[key] = key_var
            return value
        raise UserException(KeyError(key))

    def setitem(self, tx, key_var: VariableTracker, value: VariableTracker) -> None:
        key = _const_key(tx, key_var)
        self.mutated(tx)
        self.items[key] = value
        if not key_var.is_python_constant():
            self.key_vars[key] = key_var

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        items = self.items
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return constant(None)
        if name == "__contains__" and len(args) == 1:
            return constant(_const_key(tx, args[0]) in items)
        if name == "__len__":
            return constant(len(items))
        if name == "get" and 1 <= len(args) <= 2:
            key = _const_key(tx, args[0])
            if key in items:
                return items[key]
            return args[1] if len(args) == 2 else constant(None)
        if name == "keys" and not args:
            return DictViewVariable(self, "keys")
        if name == "values" and not args:
            return DictViewVariable(self, "values")
        if name == "items" and not args:
            return DictViewVariable(self, "items")
        if name == "update":
            self.mutated(tx)
            if args:
                other = args[0]
                if isinstance(other, DictVariable):
                    items.update(other.items)
                    self.key_vars.update(other.key_vars)
                else:
                    for pair in other.unpack_sequence(tx):
                        key_var, value = pair.unpack_sequence(tx)
                        self.setitem(tx, key_var, value)
            for key, value in kwargs.items():
                items[key] = value
            return constant(None)
        if name == "pop" and 1 <= len(args) <= 2:
            key = _const_key(tx, args[0])
            if key in items:
                self.mutated(tx)
                return items.pop(key)
            if len(args) == 2:
                return args[1]
            raise UserException(KeyError(key))
        if name == "popitem" and not args:
            if not items:
                raise UserException(KeyError("popitem(): dictionary is empty"))
            self.mutated(tx)
            key, value = items.popitem()
            return TupleVariable([self.key_var(key), value])
        if name == "setdefault" and 1 <= len(args) <= 2:
            key = _const_key(tx, args[0])
            if key not in items:
                self.mutated(tx)
                items[key] = args[1] if len(args) == 2 else constant(None)
            return items[key]
        if name == "clear" and not args:
            self.mutated(tx)
            items.clear()
            return constant(None)
        if name == "copy" and not args:
            copy = DictVariable(items, dict_type=self.dict_type, key_vars=self.key_vars)
            copy.default_factory = self.default_factory
            return copy
        if name == "__delitem__" and len(args) == 1:
            key = _const_key(tx, args[0])
            if key not in items:
                raise UserException(KeyError(key))
            self.mutated(tx)
            del items[key]
            return constant(None)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a dict")

    def __repr__(self) -> str:
        return f"DictVariable({self.items!r})"


class DictViewVariable(VariableTracker):
    def __init__(self, dict_var: DictVariable, kind: str) -> None:
        super().__init__()
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self) -> type:
        return {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}[self.kind]

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        d = self.dict_var
        if self.kind == "keys":
            return [d.key_var(key) for key in d.items]
        if self.kind == "values":
            return list(d.items.values())
        return [TupleVariable([d.key_var(key), value]) for key, value in d.items.items()]

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return constant(len(self.dict_var.items))
        if name == "__contains__" and self.kind == "keys":
            return constant(_const_key(tx, args[0]) in self.dict_var.items)
        return super().call_method(tx, name, args, kwargs)


class SetVariable(VariableTracker):
    def __init__(self, items: list[VariableTracker], source=None, frozen: bool = False) -> None:
        super().__init__(source)
        self.items: dict[Any, VariableTracker] = {}
        self.frozen = frozen
        for item in items:
            self.items[_const_key(None, item)] = item

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def as_python_constant(self) -> Any:
        return (frozenset if self.frozen else set)(item.as_python_constant() for item in self.items.values())

    def truth(self, tx) -> bool:
        return bool(self.items)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        # Iteration order of a set of constants is that of the real set with the same items.
        if not all(item.is_python_constant() for item in self.items.values()):
            raise Unsupported("iteration over a set of objects (its order follows their addresses)")
        real = set(self.items)
        return [self.items[key] for key in real]

    def mutated(self, tx) -> None:
        tx.graph.side_effects.mutate_container(self)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "add" and len(args) == 1:
            self.mutated(tx)
            self.items[_const_key(tx, args[0])] = args[0]
            return constant(None)
        if name in ("discard", "remove") and len(args) == 1:
            key = _const_key(tx, args[0])
            if key not in self.items:
                if name == "remove":
                    raise UserException(KeyError(key))
                return constant(None)
            self.mutated(tx)
            del self.items[key]
            return constant(None)
        if name == "update":
            self.mutated(tx)
            for arg in args:
                for item in arg.unpack_sequence(tx):
                    self.items[_const_key(tx, item)] = item
            return constant(None)
        if name == "__contains__" and len(args) == 1:
            return constant(_const_key(tx, args[0]) in self.items)
        if name == "__len__":
            return constant(len(self.items))
        if name in ("union", "intersection", "difference", "symmetric_difference", "issubset",
                    "issuperset", "isdisjoint", "__or__", "__and__", "__sub__", "__xor__"):
            if self.is_python_constant() and all(arg.is_python_constant() for arg in args):
                result = getattr(self.as_python_constant(), name)(*[set(a.as_python_constant()) for a in args])
                from .builder import wrap_constant_result

                return wrap_constant_result(tx, result)
        if name == "copy":
            return SetVariable(list(self.items.values()))
        return super().call_method(tx, name, args, kwargs)


class ListIteratorVariable(VariableTracker):
    """An iterator over a known list of variables (also what generators materialize into)."""

    def __init__(self, items: list[VariableTracker], index: int = 0) -> None:
        super().__init__()
        self.items = items
        self.index = index

    def python_type(self) -> type:
        return type(iter(()))

    def next_value(self, tx) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    def get_iter(self, tx) -> VariableTracker:
        return self

    def remaining(self) -> list[VariableTracker]:
        return self.items[self.index:]


class RangeIteratorVariable(VariableTracker):
    def __init__(self, value: range) -> None:
        super().__init__()
        self.iterator = iter(value)
        self.remaining_range = value

    def python_type(self) -> type:
        return type(iter(range(0)))

    def next_value(self, tx) -> VariableTracker | None:
        if not self.remaining_range:
            return None
        item = self.remaining_range[0]
        self.remaining_range = self.remaining_range[1:]
        return constant(item)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        rest = [constant(item) for item in self.remaining_range]
        self.remaining_range = range(0)
        return rest

    def get_iter(self, tx) -> VariableTracker:
        return self


def make_container(tx, python_type: type, items: list[VariableTracker]) -> VariableTracker:
    if python_type is tuple:
        return TupleVariable(items)
    if python_type is list:
        return ListVariable(items)
    if python_type in (set, frozenset):
        return SetVariable(items, frozen=python_type is frozenset)
    raise Unsupported(f"building a {python_type.__name__}")


def ordered_dict_type():
    return collections.OrderedDict
