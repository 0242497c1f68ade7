"""Tuples, lists, dicts, named tuples and iterators over them.

Lists and dicts are mutable: one variable stands for one Python object (the builder dedupes by
identity), so every alias sees a mutation; one that existed before the frame and is mutated is
recorded in the side-effect log and written back after the graph runs.
"""
from __future__ import annotations

import collections
import collections.abc
import inspect
import operator
import types
from typing import Any

from ..errors import Unsupported, UserException
from ..sources import ItemSource
from .base import ConstantVariable, ContainerVariable, VariableTracker, all_constant, constant, user_errors
from .builder import wrap, wrap_constant_result
from .sets import DictViewVariable, SetVariable, hash_key, lookup_key, missing_key  # noqa: F401 (re-exported)


class UnreadItems:
    """Items of a value found at a source that are wrapped (and guarded) only when read:
    `unread` maps an index or key to (translator, real value, source); its slot in `_items` is None."""

    unread: Any = None

    @property
    def items(self):
        if self.unread:
            self._read_all()
        return self._items

    @items.setter
    def items(self, value) -> None:
        self._items = value

    def _read_all(self) -> None:
        for key in list(self.unread):
            self._read(key)

    def _read(self, key: Any) -> None:
        tx, value, source = self.unread.pop(key)
        self._items[key] = wrap(tx, value, source)


class BaseListVariable(ContainerVariable):
    container_type: type = list

    def __init__(self, items: list[VariableTracker], source=None) -> None:
        super().__init__(source)
        self.items = list(items)

    def python_type(self) -> type:
        return self.container_type

    def as_python_constant(self) -> Any:
        return self.container_type(item.as_python_constant() for item in self.items)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def known_items(self) -> list[VariableTracker]:
        return self.items

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant() if index.is_python_constant() else _constant_tensor_index(index)
        if key is None:
            raise Unsupported(f"indexing a {self.container_type.__name__} with {index}")
        with user_errors(IndexError, TypeError):
            picked = self.items[key]
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
        if name == "index" and args and all_constant([*self.items, *args]):
            with user_errors(ValueError):
                return constant(self.as_python_constant().index(*[a.as_python_constant() for a in args]))
        if name == "count" and len(args) == 1:
            from .builtins import values_equal

            return constant(sum(1 for item in self.items if values_equal(tx, item, args[0])))
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(UnreadItems, BaseListVariable):
    """A tuple.  A frame argument's tuple of constants wraps (and guards) its items lazily, as a
    dict's values (`DictVariable`): `y[1]` guards only `y[1]` (and the length)."""

    container_type = tuple

    @classmethod
    def unread_tuple(cls, tx, value: tuple, source) -> "TupleVariable":
        tx.graph.guards.length(source, value)
        variable = cls([None] * len(value), source=source)
        variable.unread = {index: (tx, item, ItemSource(source, index)) for index, item in enumerate(value)}
        return variable

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if self.unread and index.is_python_constant() and type(index.as_python_constant()) is int:
            position = index.as_python_constant()
            if -len(self._items) <= position < len(self._items):
                position %= len(self._items)
                if position in self.unread:
                    self._read(position)
                return self._items[position]
        return super().getitem(tx, index)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a tuple")


def _constant_tensor_index(index: VariableTracker) -> int | None:
    """`items[t]` where t is a one-element integer tensor made from constants: its value."""
    known = getattr(index, "known_value", lambda: None)()
    if known is None:
        return None
    with user_errors(TypeError):
        return operator.index(known)


def _field_names(tuple_class: type) -> tuple:
    """A named tuple's fields; for a struct sequence (torch.return_types.max: values, indices),
    which has no _fields, the names of its members in item order."""
    fields = getattr(tuple_class, "_fields", None)
    if fields is not None:
        return tuple(fields)
    count = getattr(tuple_class, "n_sequence_fields", None)
    if not isinstance(count, int):
        return ()
    try:
        probe = tuple_class(tuple(range(count)))
    except Exception:  # noqa: BLE001 - not constructible this way: no fields known
        return ()
    names = [None] * count
    for name, member in vars(tuple_class).items():
        if isinstance(member, types.MemberDescriptorType):
            position = getattr(probe, name, None)
            if isinstance(position, int) and 0 <= position < count:
                names[position] = name
    return tuple(names)


class NamedTupleVariable(TupleVariable):
    def __init__(self, items: list[VariableTracker], tuple_class: type, source=None) -> None:
        super().__init__(items, source)
        self.tuple_class = tuple_class

    def python_type(self) -> type:
        return self.tuple_class

    def as_python_constant(self) -> Any:
        return self.tuple_class(*[item.as_python_constant() for item in self.items])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fields = _field_names(self.tuple_class)
        if name in fields and fields.index(name) < len(self.items):
            return self.items[fields.index(name)]
        value = getattr(self.tuple_class, name, None)
        if name in ("_fields", "_field_defaults") and value is not None:
            return wrap_constant_result(tx, value)  # fixed when the class was made
        from .objects import ClassVariable, bind_class_attribute

        raw = inspect.getattr_static(self.tuple_class, name, None)
        bound = bind_class_attribute(tx, raw, self, ClassVariable(self.tuple_class))
        if bound is not None:
            return bound
        raise Unsupported(f"attribute {name!r} of named tuple {self.tuple_class.__name__}")


class ListVariable(UnreadItems, BaseListVariable):
    """A list.  One that existed before the frame is read lazily: until the capture reads it, only
    its type is guarded and `items` holds what the frame appended (written back with `extend`), so
    appending to a global log guards neither its length nor its items.  Its `unread` is
    (translator, the real list) until read."""

    container_type = list

    @classmethod
    def unread_list(cls, tx, value: list, source) -> "ListVariable":
        tx.graph.guards.type_match(source, value)
        variable = cls([], source=source)
        variable.unread = (tx, value)
        return variable

    def _read_all(self) -> None:
        """The capture depends on what the list held: guard its length, wrap its items (before
        what the frame appended, in place: iterators share the item list)."""
        tx, value = self.unread
        self.unread = None
        tx.graph.guards.length(self.source, value)
        self._items[:0] = [wrap(tx, item, ItemSource(self.source, index)) for index, item in enumerate(value)]

    def known_items(self) -> list[VariableTracker]:
        """The items the capture knows of: for a list never read, only those the frame appended."""
        return self._items

    def __repr__(self) -> str:
        return f"ListVariable(unread, +{self._items!r})" if self.unread is not None else super().__repr__()

    def get_iter(self, tx) -> VariableTracker:
        # A list iterator reads the live list by index, so items appended during a loop are seen.
        return ListIteratorVariable(self.items, over=self)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        # append and extend add at the end whatever the list held: no need to read it
        if name == "append" and len(args) == 1 and not kwargs:
            self.mutated(tx)
            self._items.append(args[0])
            return constant(None)
        if name == "extend" and len(args) == 1 and not kwargs:
            new_items = args[0].unpack_sequence(tx)
            self.mutated(tx)
            self._items.extend(new_items)
            return constant(None)
        items = self.items
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
        if name in ("clear", "reverse") and not args:
            self.mutated(tx)
            getattr(items, name)()
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
            with user_errors(IndexError):
                self.items[key] = value

    def delitem(self, tx, index: VariableTracker) -> None:
        key = index.as_python_constant()
        self.mutated(tx)
        with user_errors(IndexError):
            del self.items[key]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a list")


class DictVariable(UnreadItems, ContainerVariable):
    """A dict; keys are constants or objects (`key_vars`), values any variables.  One that existed
    before the frame wraps (and guards) its constant values lazily: `y[1]` reads and guards only that
    value, so changing a value the frame never reads does not recompile; `items` wraps them all."""

    def __init__(self, items: dict[Any, VariableTracker], source=None, dict_type: type = dict,
                 key_vars: dict[Any, VariableTracker] | None = None) -> None:
        super().__init__(source)
        self.items = dict(items)
        self.dict_type = dict_type
        # The variable for each key (keys that are objects rather than constants).
        self.key_vars = dict(key_vars or {})
        self.default_factory: VariableTracker | None = None

    def add_unread(self, tx, key: Any, value: Any, source) -> None:
        """A constant value of a dict found at a source, wrapped (and guarded) when read."""
        if self.unread is None:
            self.unread = {}
        self.unread[key] = (tx, value, source)
        self._items[key] = None

    def read_one(self, key: Any) -> dict[Any, VariableTracker]:
        """The items, with only `key`'s value read (the rest may stay unread)."""
        if self.unread and key in self.unread:
            self._read(key)
        return self._items

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        if self.key_vars:
            raise Unsupported("a dict keyed by objects is not a constant")
        return self.dict_type({key: value.as_python_constant() for key, value in self.items.items()})

    def lookup(self, tx, key_var: VariableTracker) -> Any:
        return lookup_key(tx, key_var, self.key_vars)

    def key_var(self, key: Any) -> VariableTracker:
        return self.key_vars.get(key) or ConstantVariable(key)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return [self.key_var(key) for key in self.items]

    def getitem(self, tx, key_var: VariableTracker) -> VariableTracker:
        key = self.lookup(tx, key_var)
        items = self.read_one(key)
        if key in items:
            return items[key]
        if self.default_factory is not None:
            value = self.default_factory.call_function(tx, [], {})
            self.mutated(tx)
            self.items[key] = value
            self.key_vars[key] = key_var
            return value
        raise missing_key(key_var, key)

    def setitem(self, tx, key_var: VariableTracker, value: VariableTracker) -> None:
        key = self.lookup(tx, key_var)
        self.mutated(tx)
        self.items[key] = value
        self.__dict__.setdefault("written_keys", set()).add(key)  # (capture/scalars.py: state a frame carries)
        if not key_var.is_python_constant():
            self.key_vars[key] = key_var

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name in ("__contains__", "__len__") and self.unread:  # (the keys are guarded)
            items = self._items
        elif name == "get" and args and self.unread:
            items = self.read_one(self.lookup(tx, args[0]))
        else:
            items = self.items
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return constant(None)
        if name == "__contains__" and len(args) == 1:
            return constant(self.lookup(tx, args[0]) in items)
        if name == "__len__":
            return constant(len(items))
        if name == "get" and 1 <= len(args) <= 2:
            key = self.lookup(tx, args[0])
            if key in items:
                return items[key]
            return args[1] if len(args) == 2 else constant(None)
        if name in ("keys", "values", "items") and not args:
            return DictViewVariable(self, name)
        if name == "update" and len(args) <= 1:
            pairs = mapping_pairs(tx, args[0]) if args else []
            self.mutated(tx)
            for key_var, value in pairs:
                self.setitem(tx, key_var, value)
            for key, value in kwargs.items():
                self.setitem(tx, constant(key), value)
            return constant(None)
        if name == "pop" and 1 <= len(args) <= 2:
            key = self.lookup(tx, args[0])
            if key in items:
                self.mutated(tx)
                self.key_vars.pop(key, None)
                return items.pop(key)
            if len(args) == 2:
                return args[1]
            raise missing_key(args[0], key)
        if name == "popitem" and not args and set(kwargs) <= {"last"}:
            if not items:
                raise UserException(KeyError("popitem(): dictionary is empty"))
            last = kwargs.get("last", constant(True)).as_python_constant()
            if not last and not issubclass(self.dict_type, collections.OrderedDict):
                raise UserException(TypeError("dict.popitem() takes no keyword arguments"))
            self.mutated(tx)
            key = next(reversed(items)) if last else next(iter(items))
            value = items.pop(key)
            return TupleVariable([self.key_vars.pop(key, None) or ConstantVariable(key), value])
        if name == "move_to_end" and len(args) == 1 and set(kwargs) <= {"last"} \
                and issubclass(self.dict_type, collections.OrderedDict):
            key = self.lookup(tx, args[0])
            if key not in items:
                raise missing_key(args[0], key)
            last = kwargs.get("last", constant(True)).as_python_constant()
            self.mutated(tx)
            value = items.pop(key)
            self.items = {key: value, **items} if not last else {**items, key: value}
            return constant(None)
        if name == "setdefault" and 1 <= len(args) <= 2:
            key = self.lookup(tx, args[0])
            if key not in items:
                self.mutated(tx)
                items[key] = args[1] if len(args) == 2 else constant(None)
            return items[key]
        if name == "clear" and not args:
            self.mutated(tx)
            items.clear()
            return constant(None)
        if name == "copy" and not args:
            # dict.copy() of a dict subclass is a dict; OrderedDict.copy() keeps the subclass
            keeps = issubclass(self.dict_type, (collections.OrderedDict, collections.defaultdict))
            copy_type = self.dict_type if keeps else dict
            copy = DictVariable(items, dict_type=copy_type, key_vars=self.key_vars)
            copy.default_factory = self.default_factory
            return copy
        if name == "__delitem__" and len(args) == 1:
            self.call_method(tx, "pop", args, {})
            return constant(None)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory" and issubclass(self.dict_type, collections.defaultdict):
            return self.default_factory or constant(None)
        raise Unsupported(f"attribute {name!r} of a dict")

    def __repr__(self) -> str:
        return f"DictVariable({self.items!r})"


def mapping_pairs(tx, other: VariableTracker) -> list[tuple[VariableTracker, VariableTracker]]:
    """What `dict(other)` and `d.update(other)` read, as Python does: `keys()` and `other[key]`
    when `other` has a `keys` attribute (any mapping), else (key, value) pairs from iterating it."""
    if isinstance(other, DictVariable):
        return [(other.key_var(key), value) for key, value in other.items.items()]
    keys = _mapping_keys(tx, other)
    if keys is not None:
        return [(key, tx.getitem(other, key)) for key in keys]
    pairs = []
    for index, pair in enumerate(other.get_iter(tx).unpack_sequence(tx)):
        parts = pair.get_iter(tx).unpack_sequence(tx)
        if len(parts) != 2:
            raise UserException(ValueError(
                f"dictionary update sequence element #{index} has length {len(parts)}; 2 is required"))
        pairs.append((parts[0], parts[1]))
    return pairs


def _mapping_keys(tx, other: VariableTracker) -> list[VariableTracker] | None:
    from .functions import UserFunctionVariable, UserMethodVariable

    if isinstance(other, (BaseListVariable, SetVariable, DictViewVariable, ListIteratorVariable,
                          RangeIteratorVariable, ConstantVariable)):
        return None  # builtin iterables without a `keys` attribute
    try:
        if not hasattr(other.python_type(), "keys"):
            return None  # zip, map, generators, ...: an iterable of pairs (dict.update's rule)
    except Unsupported:
        pass
    try:
        keys_method = tx.load_attr(other, "keys")
    except UserException as error:
        if isinstance(error.value, AttributeError):
            return None
        raise
    function = keys_method.function if isinstance(keys_method, UserMethodVariable) else None
    if isinstance(function, UserFunctionVariable) and function.fn is collections.abc.Mapping.keys:
        keys_view = other  # Mapping.keys() is a KeysView, which iterates the mapping itself
    else:
        keys_view = keys_method.call_function(tx, [], {})
    return keys_view.get_iter(tx).unpack_sequence(tx)


class IteratorVariable(VariableTracker):
    """An iterator: iter() of it is itself."""

    def get_iter(self, tx) -> VariableTracker:
        return self


class ListIteratorVariable(IteratorVariable):
    """An iterator over a known list of variables (also what generators materialize into)."""

    def __init__(self, items: list[VariableTracker], index: int = 0, iterator_type: type | None = None,
                 over: "ListVariable | None" = None) -> None:
        super().__init__()
        self.items = items  # the list's own item list when iterating a ListVariable (`over`)
        self.index = index
        self.iterator_type = iterator_type  # what type() says: a generator, ...
        self.over = over

    def python_type(self) -> type:
        return self.iterator_type or type(iter(()))

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

    def remaining(self) -> list[VariableTracker]:
        return self.items[self.index:]


class RangeIteratorVariable(IteratorVariable):
    def __init__(self, value: range) -> None:
        super().__init__()
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
