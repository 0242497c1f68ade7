"""Sets, frozensets and dict views, and the keys that dicts and sets are indexed by.

`hash_key(variable)` is what a symbolic dict or set is keyed by: the constant itself, or an
`IdentityKey` for values Python hashes by identity (tensors, plain objects, modules).  Set-like values
(set, frozenset, `d.keys()`, `d.items()`) share one algebra over their key dicts, with Python's rules
for accepted operand types and result types (`frozenset | set` is a frozenset; a dict view gives a set).
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any

from ..errors import Unsupported, UserException
from .base import ConstantVariable, ContainerVariable, VariableTracker, constant, user_errors
from .tensor import TensorVariable


@dataclasses.dataclass(frozen=True)
class IdentityKey:
    """Stands for a value hashed by identity; never equal to a real constant."""

    kind: str
    ident: int


def hash_key(tx, key: VariableTracker) -> Any:
    from .containers import TupleVariable

    if key.is_python_constant():
        value = key.as_python_constant()
        with user_errors(TypeError):
            hash(value)
        return value
    if isinstance(key, TensorVariable):
        return IdentityKey("tensor", id(key))  # one variable per tensor object (in-place ops keep it)
    if type(key) is TupleVariable:
        return tuple(hash_key(tx, item) for item in key.items)
    hashable = getattr(key, "identity_key", None)
    if hashable is not None:
        cls = key.python_type()
        if cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__:
            raise Unsupported(f"{cls.__name__} with its own __hash__/__eq__ used as a key")
        return IdentityKey(*hashable())
    raise Unsupported(f"{key} used as a dict key or set item")


def lookup_key(tx, key_var: VariableTracker, entries: dict[Any, VariableTracker]) -> Any:
    """hash_key for finding `key_var` among `entries` (key -> the variable stored under it).  Two
    inputs that are different objects now may be one object later: each answer that told two inputs
    apart by identity is guarded (one object reached by two paths is already one variable)."""
    key = hash_key(tx, key_var)
    source = key_var.source
    if tx is None or source is None or not isinstance(key, IdentityKey):
        return key
    for other_key, other in entries.items():
        if isinstance(other_key, IdentityKey) and other_key != key and other.source is not None:
            tx.graph.guards.add(f"{source.expr()} is not {other.source.expr()}",
                                f"{source.expr()} and {other.source.expr()} are different objects")
    return key


def is_identity_based(key: Any) -> bool:
    if isinstance(key, IdentityKey):
        return True
    return isinstance(key, tuple) and any(is_identity_based(item) for item in key)


def missing_key(key_var: VariableTracker, key: Any) -> Exception:
    """The KeyError for a missing key, or a break when Python's message would name an object."""
    if is_identity_based(key):
        return Unsupported("KeyError for a key that is an object (eager raises it with the real object)")
    return UserException(KeyError(key))


_OPERATOR_METHODS = {operator.or_: "union", operator.and_: "intersection", operator.sub: "difference",
                     operator.xor: "symmetric_difference"}
# the in-place operator -> (its binary operator, the set method that does it in place)
_INPLACE = {operator.ior: (operator.or_, "update"), operator.iand: (operator.and_, "intersection_update"),
            operator.isub: (operator.sub, "difference_update"),
            operator.ixor: (operator.xor, "symmetric_difference_update")}
_UPDATES = {method: _OPERATOR_METHODS[binary] for binary, method in _INPLACE.values()}  # update -> union, ...
_MUTATING = {"add", "discard", "remove", "clear", "pop", *_UPDATES}
_COMPARISONS = {operator.eq, operator.ne, operator.le, operator.lt, operator.ge, operator.gt}


class SetVariable(ContainerVariable):
    def __init__(self, items: list[VariableTracker], source=None, frozen: bool = False) -> None:
        super().__init__(source)
        self.items: dict[Any, VariableTracker] = {}
        self.frozen = frozen
        # Members read by position from a real set iterate in that order (see builder.py).
        self.order_known = False
        for item in items:
            self.items.setdefault(hash_key(None, item), item)

    @classmethod
    def from_keys(cls, items: dict[Any, VariableTracker], frozen: bool = False) -> "SetVariable":
        result = cls([], frozen=frozen)
        result.items = dict(items)
        return result

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def as_python_constant(self) -> Any:
        return (frozenset if self.frozen else set)(item.as_python_constant() for item in self.items.values())

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        if self.order_known or len(self.items) <= 1:  # one member: no order to get wrong
            return list(self.items.values())
        if any(is_identity_based(key) for key in self.items):
            raise Unsupported("iterating a set of tensors or objects: the order depends on their addresses")
        # Iteration order of a set of constants is that of the real set with the same items.
        real = set(self.items)
        return [self.items[key] for key in real]

    def mutated(self, tx) -> None:
        self.order_known = False
        super().mutated(tx)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if self.frozen and name in _MUTATING:
            raise UserException(AttributeError(f"'frozenset' object has no attribute '{name}'"))
        if kwargs:
            return super().call_method(tx, name, args, kwargs)
        items = self.items
        if name == "add" and len(args) == 1:
            key = lookup_key(tx, args[0], items)
            if key not in items:
                self.mutated(tx)
                items[key] = args[0]
            return constant(None)
        if name in ("discard", "remove") and len(args) == 1:
            key = lookup_key(tx, args[0], items)
            if key not in items:
                if name == "remove":
                    raise missing_key(args[0], key)
                return constant(None)
            self.mutated(tx)
            del items[key]
            return constant(None)
        if name == "pop" and not args:
            if not items:
                raise UserException(KeyError("pop from an empty set"))
            first = self.unpack_sequence(tx)[0]
            self.mutated(tx)
            del items[hash_key(tx, first)]
            return first
        if name == "clear" and not args:
            self.mutated(tx)
            items.clear()
            return constant(None)
        if name in _UPDATES or name in _OPERATOR_METHODS.values():
            result = combine(_UPDATES.get(name, name), items, [iterable_keys(tx, arg) for arg in args])
            if name not in _UPDATES:
                return SetVariable.from_keys(result, frozen=self.frozen)
            self.mutated(tx)
            self.items = result
            return constant(None)
        if name in ("issubset", "issuperset", "isdisjoint") and len(args) == 1:
            other = iterable_keys(tx, args[0]).keys()
            mine = items.keys()
            answer = {"issubset": mine <= other, "issuperset": mine >= other,
                      "isdisjoint": not (mine & other)}[name]
            return constant(answer)
        if name == "__contains__" and len(args) == 1:
            return constant(lookup_key(tx, args[0], items) in items)
        if name == "__len__":
            return constant(len(items))
        if name == "copy" and not args:
            return self if self.frozen else SetVariable.from_keys(items)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.frozen and name in _MUTATING:
            raise UserException(AttributeError(f"'frozenset' object has no attribute '{name}'"))
        raise Unsupported(f"attribute {name!r} of a {self.python_type().__name__}")

    def __repr__(self) -> str:
        return f"SetVariable({list(self.items.values())!r})"


def combine(name: str, first: dict, others: list[dict]) -> dict:
    """The key dict of `first.<name>(*others)`; entries keep the variable that came first."""
    result = dict(first)
    for other in others:
        if name == "union":
            for key, item in other.items():
                result.setdefault(key, item)
        elif name == "intersection":
            result = {key: item for key, item in result.items() if key in other}
        elif name == "difference":
            result = {key: item for key, item in result.items() if key not in other}
        elif name == "symmetric_difference":
            merged = {key: item for key, item in result.items() if key not in other}
            merged.update((key, item) for key, item in other.items() if key not in result)
            result = merged
    return result


def iterable_keys(tx, iterable: VariableTracker) -> dict[Any, VariableTracker]:
    """The elements of any iterable as a key dict (what set methods accept)."""
    known = set_items(tx, iterable)
    if known is not None:
        return known
    items: dict[Any, VariableTracker] = {}
    for item in iterable.get_iter(tx).unpack_sequence(tx):
        items.setdefault(hash_key(tx, item), item)
    return items


def set_items(tx, value: VariableTracker) -> dict[Any, VariableTracker] | None:
    """The key dict of a set-like value (set, frozenset, keys or items view), else None."""
    if isinstance(value, SetVariable):
        return value.items
    if isinstance(value, DictViewVariable) and value.kind in ("keys", "items"):
        return {hash_key(tx, item): item for item in value.unpack_sequence(tx)}
    if isinstance(value, ConstantVariable) and isinstance(value.value, (set, frozenset)):
        return {item: constant(item) for item in value.value}
    return None


def _is_view(value: VariableTracker) -> bool:
    return isinstance(value, DictViewVariable) and value.kind in ("keys", "items")


def _is_real_set(value: VariableTracker) -> bool:
    return isinstance(value, SetVariable) or (isinstance(value, ConstantVariable)
                                              and isinstance(value.value, (set, frozenset)))


def _frozen(value: VariableTracker) -> bool:
    return isinstance(value, SetVariable) and value.frozen or (
        isinstance(value, ConstantVariable) and isinstance(value.value, frozenset))


def set_operator(tx, function, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """`left <op> right` when a set or a dict view is involved; None when Python would look elsewhere."""
    if not (_is_real_set(left) or _is_view(left) or _is_real_set(right) or _is_view(right)):
        return None
    if function in _INPLACE:
        binary, method = _INPLACE[function]
        if isinstance(left, SetVariable) and not left.frozen and _is_real_set(right):
            left.call_method(tx, method, [right], {})  # set |= set mutates the set in place (every alias sees it)
            return left
        function = binary
    if function in _OPERATOR_METHODS:
        if _is_view(left) or _is_view(right):
            # dict views accept any iterable on either side and always give a set
            result = combine(_OPERATOR_METHODS[function], iterable_keys(tx, left), [iterable_keys(tx, right)])
            return SetVariable.from_keys(result)
        if _is_real_set(left) and _is_real_set(right):
            result = combine(_OPERATOR_METHODS[function], set_items(tx, left), [set_items(tx, right)])
            return SetVariable.from_keys(result, frozen=_frozen(left))
        return None
    if function in _COMPARISONS:
        left_items, right_items = set_items(tx, left), set_items(tx, right)
        if left_items is not None and right_items is not None:
            return constant(function(left_items.keys(), right_items.keys()))
        other = right if left_items is not None else left
        if function in (operator.eq, operator.ne) and _is_builtin_value(other):
            return constant(function is operator.ne)  # a set is never equal to a non-set
        return None
    return None


def _is_builtin_value(value: VariableTracker) -> bool:
    from .containers import BaseListVariable, DictVariable

    return isinstance(value, (ConstantVariable, BaseListVariable, DictVariable, DictViewVariable))


class DictViewVariable(VariableTracker):
    """`d.keys()`, `d.values()`, `d.items()`: live views of a DictVariable."""

    def __init__(self, dict_var, kind: str) -> None:
        super().__init__()
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self) -> type:
        return {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}[self.kind]

    def truth(self, tx) -> bool:
        return bool(self.dict_var.items)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        from .containers import TupleVariable

        d = self.dict_var
        if self.kind == "keys":
            return [d.key_var(key) for key in d.items]
        if self.kind == "values":
            return list(d.items.values())
        return [TupleVariable([d.key_var(key), value]) for key, value in d.items.items()]

    def call_method(self, tx, name, args, kwargs):
        from .builtins import values_equal

        d = self.dict_var
        if name == "__len__" and not args:
            return constant(len(d.items))
        if name == "__contains__" and len(args) == 1:
            if self.kind == "keys":
                return constant(d.lookup(tx, args[0]) in d.items)
            if self.kind == "items":
                pair = args[0]
                try:
                    is_tuple = issubclass(pair.python_type(), tuple)
                except Unsupported:
                    is_tuple = False
                parts = pair.unpack_sequence(tx) if is_tuple else []
                if len(parts) != 2:
                    return constant(False)  # only a 2-tuple can be an item
                key = d.lookup(tx, parts[0])
                return constant(key in d.items and values_equal(tx, d.items[key], parts[1]))
            return constant(any(values_equal(tx, value, args[0]) for value in d.items.values()))
        if name == "isdisjoint" and len(args) == 1 and self.kind != "values":
            mine = set_items(tx, self).keys()
            return constant(not (mine & iterable_keys(tx, args[0]).keys()))
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a dict {self.kind} view")
