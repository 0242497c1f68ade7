"""User-defined classes and their instances, super(), exceptions, and opaque Python objects.

Attribute lookup follows Python's rules: data descriptors (properties) on the class, then the
instance dict, then class attributes (methods bind); a custom `__getattr__`/`__getattribute__` or an
unknown descriptor breaks the graph instead of guessing.
"""
from __future__ import annotations

import copy
import logging
import math
import operator
import types
import weakref
from typing import Any

import torch

from ..errors import Unsupported, UserException
from ..sources import AttrSource, DictItemSource, WeakRefCallSource
from .base import (INPLACE_TO_BINARY, MethodVariable, VariableTracker, all_constant, call_for_real, constant,
                   constant_args, is_constant_value, real_getattr, run_for_real, user_errors)
from .builder import wrap, wrap_constant_result, wrap_static
from .containers import DictVariable, ListIteratorVariable, NamedTupleVariable, TupleVariable
from .functions import UserMethodVariable
from .model_outputs import ModelOutputVariable, is_model_output_class

_PURE_MODULES = {math, operator}


def _attr_source(source, name: str):
    return AttrSource(source, name) if source is not None else None


def _wrap_read(tx, value: Any, source) -> VariableTracker:
    """A value read from a real object: guarded where it was found (`source`), else used as it is."""
    return wrap(tx, value, source) if source is not None else wrap_static(tx, value)
# The operator functions that write into their first argument: never run for real (on a copy
# of a constant-looking list the write would silently vanish); builtins.py models them.
_MUTATING_OPERATORS = {operator.setitem, operator.delitem, operator.iconcat, *INPLACE_TO_BINARY}


class RealValueVariable(VariableTracker):
    """A real object known at capture time (its `static_value`): it is its own constant."""

    def python_type(self) -> type:
        return type(self.static_value())

    def as_python_constant(self) -> Any:
        return self.static_value()


class PythonObjectVariable(RealValueVariable):
    """A real object used as it is: a Python module, a C function, an enum member, ..."""

    def __init__(self, value: Any, source=None) -> None:
        super().__init__(source)
        self.value = value

    def static_value(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attribute = real_getattr(self.value, name)
        if isinstance(self.value, types.ModuleType):
            module_name = self.value.__name__
            if module_name == "torch" or module_name.startswith("torch.") or self.value in _PURE_MODULES:
                return wrap_static(tx, attribute)
        return _wrap_read(tx, attribute, _attr_source(self.source, name))

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        value = self.value
        owner = getattr(value, "__self__", None)
        pure = not any(value is function for function in _MUTATING_OPERATORS) and (
            any(owner is module for module in _PURE_MODULES)
            or getattr(value, "__module__", None) in ("math", "_operator", "operator")
            or (owner is not None and is_constant_value(owner) and not isinstance(owner, types.ModuleType))
        )
        if pure and all_constant(args, kwargs):
            return run_for_real(tx, value, args, kwargs)
        if pure and getattr(value, "__module__", None) == "math":
            from ..scalars import symbolic_math

            result = symbolic_math(tx, value, args, kwargs)  # (numbers captured as symbols)
            if result is not None:
                return result
        raise Unsupported(f"call to {getattr(value, '__qualname__', None) or value!r} is not captured")

    def __repr__(self) -> str:
        return f"PythonObjectVariable({self.value!r})"


def _trusted_getattribute(cls: type) -> bool:
    """Classes whose __getattribute__ only renames attributes (transformers' configs)."""
    owner = next((klass for klass in cls.__mro__ if "__getattribute__" in klass.__dict__), object)
    return owner.__name__ in ("PreTrainedConfig", "PretrainedConfig") and \
        (owner.__module__ or "").startswith("transformers.")


# Read-only helpers of transformers' configs that build a derived config (with deepcopy and
# a lot of Python): they run for real at capture time, guarded on the config's contents.
_CONFIG_PURE_METHODS = {"get_text_config"}


def _constant_call(args: list, kwargs: dict) -> tuple[list, dict, str]:
    """The real values of constant call arguments, and the call's argument list as source text."""
    const_args, const_kwargs = constant_args(args, kwargs)
    text = ", ".join([*map(repr, const_args), *(f"{k}={v!r}" for k, v in const_kwargs.items())])
    return const_args, const_kwargs, text


class ConfigPureMethodVariable(MethodVariable):
    def call_function(self, tx, args, kwargs) -> VariableTracker:
        owner = self.owner
        if not all_constant(args, kwargs):
            raise Unsupported(f"config.{self.name} with non-constant arguments")
        const_args, const_kwargs, call_args = _constant_call(args, kwargs)
        expr = owner.source.expr()
        snapshot = copy.deepcopy(owner.value.__dict__)
        guards = tx.graph.guards
        guards.add(f"{expr}.__dict__ == {guards.ref(snapshot)}", f"contents of {expr} are unchanged")
        result = getattr(owner.value, self.name)(*const_args, **const_kwargs)
        if result is owner.value:
            return owner
        if is_constant_value(result):
            return wrap_constant_result(tx, result)
        variable = UserObjectVariable(result)
        variable.rebuild_expr = f"{expr}.{self.name}({call_args})"  # how the glue makes it again
        return variable


def _class_attribute(cls: type, name: str) -> tuple[bool, Any]:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return True, klass.__dict__[name]
    return False, None


def has_python_method(cls: type, name: str) -> bool:
    """Whether `cls` (or a base) defines `name` as a plain Python function (one that can be inlined)."""
    return isinstance(_class_attribute(cls, name)[1], types.FunctionType)


def _check_plain_getattr(cls: type) -> None:
    for klass in cls.__mro__:
        raw = klass.__dict__.get("__getattribute__")
        if raw is not None and klass.__module__ != "builtins" and not isinstance(raw, types.WrapperDescriptorType):
            raise Unsupported(f"{cls.__name__} defines __getattribute__")


_READ_ONLY_DICT_METHODS = {"get", "__getitem__", "__contains__", "__len__", "keys", "values", "items"}


class BuiltinDictMethodVariable(MethodVariable):
    """A read-only dict method reached through super() on an existing dict subclass object."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        owner = self.owner
        if owner.source is None or kwargs or not all_constant(args):
            raise Unsupported(f"dict.{self.name} on a dict subclass")
        real = owner.value
        expr = owner.source.expr()
        keys = tuple(dict.keys(real))
        if self.name in ("get", "__getitem__", "__contains__") and args:
            key = args[0].as_python_constant()
            if not isinstance(key, (str, int)):
                raise Unsupported("dict subclass lookup with a non-constant key")
            present = dict.__contains__(real, key)
            guard = f"dict.__contains__({expr}, {key!r})"
            tx.graph.guards.add(guard if present else f"not {guard}",
                                f"{key!r} {'in' if present else 'not in'} {expr}")
            if self.name == "__contains__":
                return constant(present)
            if not present:
                if self.name == "get":
                    return args[1] if len(args) > 1 else constant(None)
                raise UserException(KeyError(key))
            return wrap(tx, dict.__getitem__(real, key), DictItemSource(owner.source, key))
        tx.graph.guards.add(f"tuple(dict.keys({expr})) == {keys!r}", f"keys of {expr} are {keys!r}")
        if self.name == "__len__":
            return constant(len(keys))
        if self.name == "keys":
            return ListIteratorVariable([constant(key) for key in keys])
        raise Unsupported(f"dict.{self.name} on a dict subclass")


def bind_class_attribute(tx, raw: Any, instance: VariableTracker | None,
                         cls_var: VariableTracker) -> VariableTracker | None:
    """A function, staticmethod or classmethod found in a class dict, bound as Python binds it:
    to `instance` (unbound where None), to the class `cls_var`, or not at all; None for anything else."""
    if isinstance(raw, staticmethod):
        return wrap_static(tx, raw.__func__)
    if isinstance(raw, classmethod):
        return UserMethodVariable(wrap_static(tx, raw.__func__), cls_var)
    if isinstance(raw, types.FunctionType):
        # wrap_static, not a bare UserFunctionVariable: a method torch disabled for tracing
        # (Optimizer.zero_grad) or that runs as a graph node must be recognised as such.
        function = wrap_static(tx, raw)
        return function if instance is None else UserMethodVariable(function, instance)
    return None


def _descriptor_result(tx, owner: VariableTracker, cls: type, name: str, raw: Any, attr_source) -> VariableTracker:
    bound = bind_class_attribute(tx, raw, owner, ClassVariable(cls))
    if bound is not None:
        return bound
    if isinstance(raw, property) and not _pybind_field(cls, raw):
        if raw.fget is None:
            raise UserException(AttributeError(f"property {name!r} has no getter"))
        return wrap_static(tx, raw.fget).call_function(tx, [owner], {})
    if isinstance(raw, (types.MemberDescriptorType, property)) and getattr(owner, "real_object", None) is not None:
        with user_errors(AttributeError):
            value = raw.__get__(owner.real_object, cls)
        return _wrap_read(tx, value, attr_source)
    if hasattr(type(raw), "__get__") and not isinstance(raw, (types.BuiltinFunctionType, type)):
        if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            raise Unsupported(f"builtin method {name} of {cls.__name__}")
        raise Unsupported(f"descriptor {type(raw).__name__} for {cls.__name__}.{name}")
    return _wrap_read(tx, raw, attr_source)


def _pybind_field(cls: type, raw: property) -> bool:
    """A pybind11 class's field (`def_readonly`/`def_readwrite`: a property whose getter is
    pybind's C++ `instancemethod`): read for real like a slot, and guarded where it was found."""
    return type(cls).__name__ == "pybind11_type" and type(raw.fget).__name__ == "instancemethod"


_LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "log",
                    "warning_once", "info_once", "warning_advice"}


class LoggingCallVariable(MethodVariable):
    """`logger.warning(...)`: a call on an existing logger, replayed after the graph runs (logging
    touches no tensors: only the order of log lines relative to other output changes)."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not all(arg.is_python_constant() for arg in [*args, *kwargs.values()]):
            raise Unsupported(f"logger.{self.name} with non-constant arguments")
        tx.graph.side_effects.record_call(self.owner, self.name, args, kwargs)
        return constant(None)


class InstanceVariable(VariableTracker):
    """What instances of user classes share: calls, iteration and `with` run the class's Python methods."""

    def _protocol(self, tx, name: str, args: list = ()) -> VariableTracker:
        if not has_python_method(self.python_type(), name):
            raise Unsupported(f"{name} of {self.python_type().__name__} is not a Python function")
        return self.call_method(tx, name, list(args), {})

    def _check_assignable(self, name: str, force: bool = False) -> None:
        cls = self.python_type()
        if not force and cls.__setattr__ is not object.__setattr__:
            raise Unsupported(f"{cls.__name__} defines __setattr__")
        found, raw = _class_attribute(cls, name)
        if found and hasattr(type(raw), "__set__"):
            raise Unsupported(f"assignment to descriptor {cls.__name__}.{name}")

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if has_python_method(self.python_type(), "__call__"):
            return self.var_getattr(tx, "__call__").call_function(tx, args, kwargs)
        raise Unsupported(f"call of a {self.python_type().__name__} object")

    def get_iter(self, tx) -> VariableTracker:
        return self._protocol(tx, "__iter__").get_iter(tx)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        return self.get_iter(tx).unpack_sequence(tx)

    def enter(self, tx) -> VariableTracker:
        return self._protocol(tx, "__enter__")

    def exit(self, tx) -> VariableTracker:
        """The normal exit of a `with` block (an exception leaving it is a graph break: WITH_EXCEPT_START)."""
        return self._protocol(tx, "__exit__", [constant(None)] * 3)

    def _lookup(self, tx, name: str, own) -> VariableTracker:
        """Python's order: data descriptors on the class, the instance's own attribute (`own()`, or
        None), then the class's attribute; else AttributeError (guarded absent where found at a source)."""
        cls = self.python_type()
        source = _attr_source(self.source, name)
        found, raw = _class_attribute(cls, name)
        if found and (isinstance(raw, property) or hasattr(type(raw), "__set__")):
            # (a slot's or pybind field's value is read for real: guarded where it was found)
            return _descriptor_result(tx, self, cls, name, raw, source)
        value = own()
        if value is not None:
            return value
        if found:
            return _descriptor_result(tx, self, cls, name, raw, source)
        if hasattr(cls, "__getattr__"):
            raise Unsupported(f"{cls.__name__} defines __getattr__")
        if self.source is not None:
            expr = self.source.expr()
            tx.graph.guards.add(f"{name!r} not in {expr}.__dict__", f"{expr} has no attribute {name!r}")
        raise UserException(AttributeError(f"'{cls.__name__}' object has no attribute '{name}'"))


class UserObjectVariable(InstanceVariable):
    """An instance of a user-defined class that existed before the frame ran."""

    def __init__(self, value: Any, source=None) -> None:
        super().__init__(source)
        self.value = value
        self.real_object = value

    def python_type(self) -> type:
        return type(self.value)

    def identity_key(self) -> Any:
        return ("object", id(self.value))

    def static_value(self) -> Any:
        return self.value if self.source is None else None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        pending = tx.graph.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        if tx.graph.side_effects.is_deleted(self, name):
            raise UserException(AttributeError(name))
        cls = type(self.value)
        if name == "__class__":
            return ClassVariable(cls)
        if name == "__dict__":
            raise Unsupported("__dict__ of an object")
        if _trusted_getattribute(cls):
            return self._trusted_getattr(tx, name)
        _check_plain_getattr(cls)
        if isinstance(self.value, logging.Logger) and name in _LOGGING_METHODS:
            return LoggingCallVariable(self, name)
        instance_dict = getattr(self.value, "__dict__", None)
        return self._lookup(tx, name, lambda: _wrap_read(tx, instance_dict[name], _attr_source(self.source, name))
                            if instance_dict is not None and name in instance_dict else None)

    def _trusted_getattr(self, tx, name: str) -> VariableTracker:
        value = real_getattr(self.value, name)
        if name in _CONFIG_PURE_METHODS and self.source is not None:
            return ConfigPureMethodVariable(self, name)
        if isinstance(value, types.MethodType) and value.__self__ is self.value and \
                isinstance(value.__func__, types.FunctionType):
            return UserMethodVariable(wrap_static(tx, value.__func__), self)
        return _wrap_read(tx, value, _attr_source(self.source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        self._check_assignable(name)
        if not hasattr(self.value, "__dict__"):
            raise Unsupported(f"{type(self.value).__name__} has no instance dict")
        tx.graph.side_effects.store_attr(self, name, value)

    def __repr__(self) -> str:
        return f"UserObjectVariable({type(self.value).__name__})"


class WeakRefVariable(VariableTracker):
    """A `weakref.ref` that existed before the frame ran; calling it reads its referent (the
    LR scheduler's wrapper of `optimizer.step` finds its optimizer through one)."""

    def __init__(self, ref: weakref.ReferenceType, source=None) -> None:
        super().__init__(source)
        self.ref = ref
        self.real_object = ref

    def python_type(self) -> type:
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise UserException(TypeError("weakref.ref() takes no arguments"))
        referent = self.ref()
        if self.source is None:
            return wrap_static(tx, referent)
        source = WeakRefCallSource(self.source)
        if referent is None:
            tx.graph.guards.add(f"{source.expr()} is None", f"{source.expr()} is dead")
            return constant(None)
        return wrap(tx, referent, source)

    def __repr__(self) -> str:
        return f"WeakRefVariable({type(self.ref()).__name__})"


class NewObjectVariable(InstanceVariable):
    """An instance of a user-defined class created during capture."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return self.cls

    def identity_key(self) -> Any:
        return ("new", id(self))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        cls = self.cls
        if name == "__class__":
            return ClassVariable(cls)
        if name == "__dict__":
            return DictVariable(self.attrs)
        _check_plain_getattr(cls)
        return self._lookup(tx, name, lambda: self.attrs.get(name))

    def store_attr(self, tx, name: str, value: VariableTracker, force: bool = False) -> None:
        self._check_assignable(name, force)
        self.attrs[name] = value

    def __repr__(self) -> str:
        return f"NewObjectVariable({self.cls.__name__})"


class ExceptionVariable(VariableTracker):
    """An exception object created during capture: `ValueError("bad")`."""

    def __init__(self, cls: type, args: list[VariableTracker]) -> None:
        super().__init__()
        self.cls = cls
        self.args = args

    def python_type(self) -> type:
        return self.cls

    def real(self) -> BaseException:
        return self.cls(*[arg.as_python_constant() for arg in self.args])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "args":
            return TupleVariable(self.args)
        raise Unsupported(f"exception attribute {name}")


# torch packages written as plain Python over plain Python objects (optimizers, LR schedulers):
# their helper classes (`_enable_get_lr_call`) are created and run like the user's own.
_USER_LIKE_TORCH_PACKAGES = ("torch.optim.",)


def _is_plain_user_class(cls: type) -> bool:
    if type(cls) is not type and type(cls).__name__ != "ABCMeta" or cls.__new__ is not object.__new__:
        return False
    if issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException)):
        return False
    module = getattr(cls, "__module__", "") or ""
    if module == "builtins" or (module.startswith("torch") and not module.startswith(_USER_LIKE_TORCH_PACKAGES)):
        return False
    return "__slots__" not in cls.__dict__


class ClassVariable(RealValueVariable):
    def __init__(self, cls: type, source=None) -> None:
        super().__init__(source)
        self.cls = cls

    def static_value(self) -> Any:
        return self.cls

    def var_getattr(self, tx, name: str) -> VariableTracker:
        pending = tx.graph.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        found, raw = _class_attribute(self.cls, name)
        if not found:
            if name in ("__name__", "__qualname__", "__module__"):
                return constant(getattr(self.cls, name))
            return wrap_static(tx, real_getattr(self.cls, name))
        bound = bind_class_attribute(tx, raw, None, self)
        if bound is not None:
            return bound
        if isinstance(raw, property):
            raise Unsupported("property object read from a class")
        source = self.source
        if source is None and _is_plain_user_class(self.cls):
            from ..translator import RefSource

            source = RefSource(tx.graph, self.cls, self.cls.__name__)  # class attributes can change
        return _wrap_read(tx, getattr(self.cls, name), _attr_source(source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if type(self.cls) is not type or not _is_plain_user_class(self.cls):
            raise Unsupported(f"setting attribute {name!r} on class {self.cls.__name__}")
        tx.graph.side_effects.store_attr(self, name, value)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        cls = self.cls
        const_args = all_constant(args, kwargs)
        if cls in (torch.Size, torch.device, torch.finfo, torch.iinfo, torch.dtype) and const_args:
            value = call_for_real(cls, args, kwargs)
            if isinstance(value, (torch.finfo, torch.iinfo)):
                return PythonObjectVariable(value)
            return wrap_constant_result(tx, value)
        if issubclass(cls, BaseException):
            if kwargs or not all_constant(args):
                raise Unsupported(f"{cls.__name__}(...) with non-constant arguments")
            return ExceptionVariable(cls, list(args))
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            instance = _make_namedtuple(tx, cls, args, kwargs)
            instance.class_var = self
            return instance
        if is_model_output_class(cls):
            return ModelOutputVariable.create(tx, cls, args, kwargs)
        if issubclass(cls, torch.nn.Module) and (cls.__module__ or "").startswith("torch.nn.modules") and const_args:
            return _make_stateless_module(tx, cls, args, kwargs)
        from .collections_types import plain_dict_subclass_base

        if plain_dict_subclass_base(cls) is not None:  # `class D(OrderedDict): pass`
            from .builtins import new_dict

            return new_dict(tx, cls, args, kwargs)
        if _is_plain_user_class(cls):
            instance = NewObjectVariable(cls)
            found, init = _class_attribute(cls, "__init__")
            if init is object.__init__:
                if args or kwargs:
                    raise UserException(TypeError(f"{cls.__name__}() takes no arguments"))
            elif isinstance(init, types.FunctionType):
                wrap_static(tx, init).call_function(tx, [instance, *args], kwargs)
            else:
                raise Unsupported(f"__init__ of {cls.__name__} is not a Python function")
            return instance
        raise Unsupported(f"creating a {cls.__module__}.{cls.__qualname__} object")

    def __repr__(self) -> str:
        return f"ClassVariable({self.cls.__qualname__})"


def _make_stateless_module(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """`CrossEntropyLoss()` inside forward: a torch module with no parameters or buffers, built
    from constants, is a private, fixed object; it is built now and rebuilt by the glue if needed."""
    from .modules import NNModuleVariable

    const_args, const_kwargs, call_args = _constant_call(args, kwargs)
    rng_state = torch.random.get_rng_state()
    module = cls(*const_args, **const_kwargs)
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        torch.random.set_rng_state(rng_state)
        raise Unsupported(f"creating a {cls.__name__} (it has parameters or buffers)")
    variable = NNModuleVariable(module)
    variable.rebuild_expr = f"{tx.graph.guards.ref(cls)}({call_args})"
    return variable


def _make_namedtuple(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    fields = cls._fields
    defaults = getattr(cls, "_field_defaults", {})
    if len(args) > len(fields):
        raise UserException(TypeError(f"{cls.__name__}() takes {len(fields)} arguments"))
    values: dict[str, VariableTracker] = dict(zip(fields, args))
    for key, value in kwargs.items():
        if key not in fields or key in values:
            raise UserException(TypeError(f"{cls.__name__}() got an unexpected keyword argument '{key}'"))
        values[key] = value
    for field in fields:
        if field not in values and field not in defaults:
            raise UserException(TypeError(f"{cls.__name__}() missing required argument: '{field}'"))
    return NamedTupleVariable([values[f] if f in values else wrap_static(tx, defaults[f]) for f in fields], cls)


class SuperVariable(VariableTracker):
    def __init__(self, start_class: type, owner: VariableTracker) -> None:
        super().__init__()
        self.start_class = start_class
        self.owner = owner

    def var_getattr(self, tx, name: str) -> VariableTracker:
        owner_type = self.owner.python_type()
        owner_is_class = isinstance(self.owner, ClassVariable)
        mro = (self.owner.cls if owner_is_class else owner_type).__mro__
        start = mro.index(self.start_class) + 1
        for klass in mro[start:]:
            if name in klass.__dict__:
                raw = klass.__dict__[name]
                if raw is object.__init__:
                    return ObjectMethodVariable("__init__")
                owner_cls = self.owner if owner_is_class else ClassVariable(owner_type)
                bound = bind_class_attribute(tx, raw, None if owner_is_class else self.owner, owner_cls)
                if bound is not None:
                    return bound
                if isinstance(raw, property) and not owner_is_class:
                    return wrap_static(tx, raw.fget).call_function(tx, [self.owner], {})
                if klass is dict and name in _READ_ONLY_DICT_METHODS and isinstance(self.owner, UserObjectVariable):
                    return BuiltinDictMethodVariable(self.owner, name)
                raise Unsupported(f"super().{name} resolves to a {type(raw).__name__}")
        raise UserException(AttributeError(f"'super' object has no attribute '{name}'"))


class ObjectMethodVariable(VariableTracker):
    """object.__setattr__ / object.__new__ / object.__init__ called explicitly (dataclasses do)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.name == "__setattr__" and len(args) == 3:
            target, name, value = args
            if isinstance(target, NewObjectVariable):
                target.store_attr(tx, name.as_python_constant(), value, force=True)
                return constant(None)
            if isinstance(target, UserObjectVariable):
                tx.graph.side_effects.store_attr(target, name.as_python_constant(), value)
                return constant(None)
        if self.name == "__new__" and len(args) == 1 and isinstance(args[0], ClassVariable):
            return NewObjectVariable(args[0].cls)
        if self.name == "__init__":
            return constant(None)
        raise Unsupported(f"object.{self.name}")

