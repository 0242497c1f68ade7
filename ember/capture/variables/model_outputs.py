"""transformers' ModelOutput (an ordered dict that is also a dataclass), modelled directly.

Its real `__post_init__`/`__setitem__` keep a dict and attributes in step (too much Python to
interpret usefully); this keeps the fields: only non-None fields are keys, integer indexing goes over
those, attributes read any field.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import Unsupported, UserException
from ..sources import AttrSource
from .base import VariableTracker, constant, is_none
from .builder import wrap
from .containers import ListIteratorVariable, TupleVariable
from .tensor import TensorVariable


def is_model_output_class(cls: Any) -> bool:
    return isinstance(cls, type) and any(
        base.__name__ == "ModelOutput" and (base.__module__ or "").startswith("transformers")
        for base in cls.__mro__
    ) and dataclasses.is_dataclass(cls)


class ModelOutputVariable(VariableTracker):
    def __init__(self, cls: type, fields: dict[str, VariableTracker], source=None) -> None:
        super().__init__(source)
        self.cls = cls
        self.fields = fields  # every dataclass field, None included

    @classmethod
    def create(cls_, tx, output_cls: type, args: list, kwargs: dict) -> "ModelOutputVariable":
        names = [field.name for field in dataclasses.fields(output_cls)]
        values: dict[str, VariableTracker] = {name: constant(None) for name in names}
        if len(args) > len(names):
            raise UserException(TypeError(f"{output_cls.__name__} takes {len(names)} arguments"))
        values.update(zip(names, args))
        for name, value in kwargs.items():
            if name not in values:
                raise UserException(TypeError(f"{output_cls.__name__} got an unexpected keyword argument '{name}'"))
            values[name] = value
        others_none = all(is_none(values[name]) for name in names[1:])
        if names and others_none and not is_none(values[names[0]]) \
                and not isinstance(values[names[0]], TensorVariable):
            raise Unsupported("ModelOutput built from a dict or an iterator")
        return cls_(output_cls, values)

    @classmethod
    def from_existing(cls_, tx, value: Any, source) -> "ModelOutputVariable":
        names = [field.name for field in dataclasses.fields(type(value))]
        tx.graph.guards.add(f"tuple({source.expr()}.keys()) == {tuple(value.keys())!r}",
                            f"keys of {source.expr()} are {tuple(value.keys())!r}")
        fields = {name: wrap(tx, getattr(value, name), AttrSource(source, name)) for name in names}
        return cls_(type(value), fields, source=source)

    def python_type(self) -> type:
        return self.cls

    def keys_list(self) -> list[str]:
        return [name for name, value in self.fields.items() if not is_none(value)]

    def to_tuple(self) -> list[VariableTracker]:
        return [self.fields[name] for name in self.keys_list()]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.fields:
            return self.fields[name]
        if name == "__class__":
            from .objects import ClassVariable

            return ClassVariable(self.cls)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, str):
            if key not in self.keys_list():
                raise UserException(KeyError(key))
            return self.fields[key]
        items = self.to_tuple()
        try:
            picked = items[key]
        except IndexError as error:
            raise UserException(error) from None
        return TupleVariable(picked) if isinstance(key, slice) else picked

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if self.source is not None:
            raise Unsupported("writing to a ModelOutput that existed before the call")
        if name not in self.fields:
            raise Unsupported(f"new attribute {name} on a ModelOutput")
        self.fields[name] = value

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "to_tuple" and not args:
            return TupleVariable(self.to_tuple())
        if name == "keys":
            return ListIteratorVariable([constant(key) for key in self.keys_list()])
        if name == "values":
            return ListIteratorVariable(self.to_tuple())
        if name == "items":
            return ListIteratorVariable([TupleVariable([constant(k), self.fields[k]]) for k in self.keys_list()])
        if name == "get" and args:
            key = args[0].as_python_constant()
            if key in self.keys_list():
                return self.fields[key]
            return args[1] if len(args) > 1 else constant(None)
        if name == "__contains__" and len(args) == 1:
            return constant(args[0].as_python_constant() in self.keys_list())
        if name == "__len__":
            return constant(len(self.keys_list()))
        if name == "__setitem__" and len(args) == 2:
            self.store_attr(tx, args[0].as_python_constant(), args[1])
            return constant(None)
        raise Unsupported(f"{self.cls.__name__}.{name}()")

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return [constant(key) for key in self.keys_list()]

    def truth(self, tx) -> bool:
        return bool(self.keys_list())
