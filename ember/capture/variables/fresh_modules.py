"""A user nn.Module class with no constructor of its own, instantiated with no arguments inside the
compiled code (`functools.partial(f, mod=SmallNN())`).

Building it runs only nn.Module.__init__, so it is built for real at capture.  It is private to the
frame: its forward is inlined; if it leaves the frame the glue builds a fresh one (`SmallNN()`), the
same as long as the capture changed nothing in it, so writing its attributes or reading its mutable
internals breaks the graph.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker, is_constant_value
from .modules import NNModuleVariable
from .objects import ClassVariable


def is_plain_module_class(cls: Any) -> bool:
    """A user subclass of nn.Module whose construction runs nn.Module.__init__ only."""
    if not isinstance(cls, type) or type(cls) is not type or not issubclass(cls, torch.nn.Module):
        return False
    mro = cls.__mro__
    if mro[-2:] != (torch.nn.Module, object) or cls is torch.nn.Module:
        return False
    for klass in mro[:-2]:
        module = getattr(klass, "__module__", "") or ""
        if module == "torch" or module.startswith("torch."):
            return False  # torch's own modules: built elsewhere (objects.py), with their arguments
        if "__init__" in klass.__dict__ or "__new__" in klass.__dict__:
            return False
    return cls.call_super_init is False


class PlainModuleClassVariable(ClassVariable):
    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if args or kwargs:
            return super().call_function(tx, args, kwargs)  # (nn.Module.__init__ raises TypeError)
        cls = self.cls
        module = cls()
        variable = FreshModuleVariable(module)
        variable.rebuild_expr = f"{tx.graph.guards.ref(cls)}()"
        return variable


class FreshModuleVariable(NNModuleVariable):
    """A module built during capture by PlainModuleClassVariable: read-only here."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        value = self.module.__dict__.get(name)
        if name in ("__dict__",) or (name in self.module.__dict__ and not is_constant_value(value)):
            raise Unsupported(f"{name} of a module made in the compiled code")
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        raise Unsupported(f"setting attribute {name!r} of a module made in the compiled code")
