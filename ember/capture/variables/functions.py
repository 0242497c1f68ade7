"""User functions, closures, bound methods and functools.partial: all inlined when called.

Closure cells are variables too: a cell made in the captured code is symbolic (CellVariable), a cell
of an existing function is real (RealCellVariable, its writes go to the side-effect log).
"""
from __future__ import annotations

import functools
import gc
import inspect
import types
from typing import Any

import torch

from ..errors import Unsupported, UserException
from ..sources import AttrSource, CellContentsSource, ItemSource
from .base import ConstantVariable, VariableTracker, constant, is_constant_value
from .builder import wrap, wrap_static
from .containers import DictVariable, TupleVariable


class CellVariable(VariableTracker):
    """A closure cell created inside the captured code (symbolic contents)."""

    def __init__(self, contents: VariableTracker | None = None, name: str = "") -> None:
        super().__init__()
        self.contents = contents
        self.name = name


class RealCellVariable(VariableTracker):
    """A closure cell of a function that exists outside the capture."""

    def __init__(self, cell: types.CellType, source=None, name: str = "") -> None:
        super().__init__(source)
        self.cell = cell
        self.name = name


def real_cell(graph, cell: types.CellType, source, name: str) -> RealCellVariable:
    """The one variable for a real cell (a write through one closure is seen through another)."""
    known = graph.objects.get(id(cell))
    if isinstance(known, RealCellVariable) and known.cell is cell:
        return known
    variable = RealCellVariable(cell, source, name)
    graph.objects[id(cell)] = variable
    graph._keepalive.append(cell)
    return variable


class BaseFunctionVariable(VariableTracker):
    def python_type(self) -> type:
        return types.FunctionType

    def get_code(self) -> types.CodeType:
        raise NotImplementedError

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return constant(getattr(self.function_object_like(), name))
        if name == "__code__":
            return constant(self.get_code())
        if name == "__get__":
            return FunctionGetVariable(self)
        raise Unsupported(f"function attribute {name}")

    def function_object_like(self) -> Any:
        raise Unsupported("function object")


class FunctionGetVariable(VariableTracker):
    """`function.__get__(obj, cls)`: binds a function to an object, as attribute lookup does."""

    def __init__(self, function: VariableTracker) -> None:
        super().__init__()
        self.function = function

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if kwargs or not 1 <= len(args) <= 2:
            raise Unsupported("function.__get__ with unusual arguments")
        instance = args[0]
        if instance.is_python_constant() and instance.as_python_constant() is None:
            return self.function
        return UserMethodVariable(self.function, instance)


class UserFunctionVariable(BaseFunctionVariable):
    def __init__(self, fn: types.FunctionType, source=None) -> None:
        super().__init__(source)
        self.fn = fn
        # False for a closure at a source, guarded on its code rather than on the object
        # (builder.py): then `fn` is one closure of that code, not the object of later calls.
        self.identity_guarded = True

    def get_code(self) -> types.CodeType:
        return self.fn.__code__

    def function_object_like(self) -> Any:
        return self.fn

    def as_python_constant(self) -> Any:
        if not self.identity_guarded:
            raise Unsupported(f"{self.fn.__qualname__} is one of several closures, not a constant")
        return self.fn

    def static_value(self) -> Any:
        return self.fn if self.identity_guarded else None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__dict__"):
            raise Unsupported(f"function attribute {name}")
        if name in ("__name__", "__qualname__", "__module__", "__doc__") and self.source is not None:
            # guarded: closures of one code share a guard on the code, not on these
            return wrap(tx, getattr(self.fn, name), AttrSource(self.source, name))
        if name in self.fn.__dict__:
            return wrap(tx, self.fn.__dict__[name], AttrSource(self.source, name) if self.source else None)
        return super().var_getattr(tx, name)

    def cells(self, tx) -> list[VariableTracker]:
        closure = self.fn.__closure__ or ()
        if not closure:
            return []
        names = self.fn.__code__.co_freevars
        base = function_source(tx, self)
        return [real_cell(tx.graph, cell, CellContentsSource(base, index), names[index])
                for index, cell in enumerate(closure)]

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        fn = self.fn
        if fn is _MODULE_CALL and args:
            from .modules import NNModuleVariable

            if isinstance(args[0], NNModuleVariable):  # super().__call__(...) in a module's own __call__
                return args[0].call_as_module(tx, args[1:], kwargs)
        return tx.inline_call(code=fn.__code__, f_globals=fn.__globals__, args=args, kwargs=kwargs,
                              defaults=LazyDefaults(tx, self), kwdefaults=LazyKwDefaults(tx, self),
                              cells=self.cells(tx), name=fn.__qualname__, function=self)

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


_MODULE_CALL = torch.nn.Module.__call__


def function_source(tx, fn_var: "UserFunctionVariable"):
    """Where the function object is found: its own source, else a reference to the object
    (a method reached through its class), so that its defaults can be read and guarded."""
    if fn_var.source is not None:
        return fn_var.source
    from ..translator import RefSource

    return RefSource(tx.graph, fn_var.fn, fn_var.fn.__qualname__)


class LazyDefaults:
    """A function's positional defaults, wrapped only when a parameter takes one.  `f.__defaults__`
    can be replaced: the tuple is guarded by identity (covering its constants); a default that is a
    tensor or another object is read through `f.__defaults__[i]`."""

    def __init__(self, tx, fn_var: "UserFunctionVariable") -> None:
        self.tx = tx
        self.fn_var = fn_var
        self.values = fn_var.fn.__defaults__ or ()
        self.wrapped: dict[int, VariableTracker] = {}

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> VariableTracker:
        if index not in self.wrapped:
            source = AttrSource(function_source(self.tx, self.fn_var), "__defaults__")
            self.tx.graph.guards.identity(source, self.fn_var.fn.__defaults__)
            value = self.values[index]
            self.wrapped[index] = ConstantVariable(value) if is_constant_value(value) else \
                wrap(self.tx, value, ItemSource(source, index))
        return self.wrapped[index]


class LazyKwDefaults:
    """A function's keyword-only defaults (a mutable dict): each one used is read and guarded."""

    def __init__(self, tx, fn_var: "UserFunctionVariable") -> None:
        self.tx = tx
        self.fn_var = fn_var
        self.values = fn_var.fn.__kwdefaults__ or {}

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def __getitem__(self, name: str) -> VariableTracker:
        source = AttrSource(function_source(self.tx, self.fn_var), "__kwdefaults__")
        return wrap(self.tx, self.values[name], ItemSource(source, name))


class NestedFunctionVariable(BaseFunctionVariable):
    """A function object made by MAKE_FUNCTION during capture (closure, lambda, comprehension)."""

    def __init__(self, code: types.CodeType, f_globals: dict, qualname: str,
                 defaults: VariableTracker | None, kwdefaults: VariableTracker | None,
                 cells: list[VariableTracker] | None, annotations=None) -> None:
        super().__init__()
        self.code = code
        self.f_globals = f_globals
        self.qualname = qualname
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure_cells = cells or []
        self.attrs: dict[str, VariableTracker] = {}

    def get_code(self) -> types.CodeType:
        return self.code

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__name__":
            return constant(self.code.co_name)
        if name == "__qualname__":
            return constant(self.qualname)
        if name in self.attrs:
            return self.attrs[name]
        if name == "__module__":
            return constant(self.f_globals.get("__name__"))
        raise Unsupported(f"attribute {name} of a nested function")

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        defaults = self.defaults.unpack_sequence(tx) if self.defaults is not None else []
        kwdefaults = dict(self.kwdefaults.items) if self.kwdefaults is not None else {}
        return tx.inline_call(code=self.code, f_globals=self.f_globals, args=args, kwargs=kwargs, defaults=defaults,
                              kwdefaults=kwdefaults, cells=self.closure_cells, name=self.qualname, function=self)

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


class UserMethodVariable(VariableTracker):
    def __init__(self, function: VariableTracker, owner: VariableTracker) -> None:
        super().__init__()
        self.function = function
        self.owner = owner

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.function.call_function(tx, [self.owner, *args], kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__self__":
            return self.owner
        if name == "__func__":
            return self.function
        return self.function.var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"UserMethodVariable({self.function!r} of {self.owner!r})"


class PartialVariable(VariableTracker):
    """functools.partial: made during capture, or an existing one read at a source (then its
    instance attributes are real and guarded when read)."""

    def __init__(self, function: VariableTracker, args: list, keywords: dict, source=None,
                 real: Any = None) -> None:
        super().__init__(source)
        self.function = function
        self.args = args
        self.keywords = keywords
        self.real = real
        self.instance_dict: PartialDictVariable | None = None  # `__dict__`, once read

    def python_type(self) -> type:
        return functools.partial

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.function.call_function(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "func":
            return self.function
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.keywords)
        if name == "__call__":
            return self
        if name == "__dict__":
            if self.real is None:  # made during capture: its (empty) instance dict
                if self.instance_dict is None:
                    self.instance_dict = PartialDictVariable(self)
                return self.instance_dict
            if self.source is not None:
                return wrap(tx, self.real.__dict__, AttrSource(self.source, "__dict__"))
        instance_dict = existing_instance_dict(self.real) if self.real is not None else {}
        if name in instance_dict and self.source is not None:
            return wrap(tx, instance_dict[name], AttrSource(self.source, name))
        if self.real is not None and (type(self.real) is not functools.partial or self.source is None):
            found = _MISSING
            if hasattr(functools.partial, name):
                raise Unsupported(f"functools.partial.{name}")  # a method: callers treat it as one
        else:
            # A plain partial's other attributes come from its class (the same for every partial
            # with nothing of that name in its instance dict): what a fresh partial answers.
            found = getattr(_PARTIAL_PROBE, name, _MISSING)
            if found is not _MISSING and not (found is None or isinstance(found, (str, type))):
                raise Unsupported(f"functools.partial.{name}")  # a method: callers treat it as one
        if self.source is not None:
            expr = self.source.expr()
            tx.graph.guards.add(f"{name!r} not in {tx.graph.guards.ref(existing_instance_dict)}({expr})",
                                f"{expr} has no attribute {name!r}")
        if found is not _MISSING:
            return wrap_static(tx, found)
        raise UserException(AttributeError(f"'functools.partial' object has no attribute '{name}'"))


def existing_instance_dict(partial_object: functools.partial) -> dict:
    """A partial's instance dict, without making one: reading `__dict__` creates it, and a partial
    with a dict is no longer flattened by functools.partial(p, ...), so capture must not."""
    keywords = partial_object.keywords
    for referent in gc.get_referents(partial_object):  # (its function, args, keywords and dict)
        if type(referent) is dict and referent is not keywords:
            return referent
    return {}


def _probe_target() -> None:
    pass


_PARTIAL_PROBE = functools.partial(_probe_target)  # (its __dict__ is never read: it stays empty)
_MISSING = object()


class PartialDictVariable(DictVariable):
    """`p.__dict__` of a partial made during capture: empty, and read-only here (a write would
    have to reach the partial rebuilt after the graph)."""

    def __init__(self, owner: PartialVariable) -> None:
        super().__init__({})
        self.owner = owner

    def mutated(self, tx) -> None:
        raise Unsupported("writing the __dict__ of a functools.partial made in the compiled code")


def bind_arguments(code: types.CodeType, name: str, args: list, kwargs: dict,
                   defaults: list, kwdefaults: dict) -> dict[str, VariableTracker]:
    """Python's argument binding for a code object: positional, *args, keyword-only, **kwargs."""
    argcount, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional_names, kwonly_names = names[:argcount], names[argcount:argcount + kwonly]
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    varargs_name = names[argcount + kwonly] if has_varargs else None
    varkw_name = names[argcount + kwonly + int(has_varargs)] if has_varkw else None

    bound: dict[str, VariableTracker] = {}
    if len(args) > argcount and not has_varargs:
        raise UserException(TypeError(
            f"{name}() takes {argcount} positional argument{'s' if argcount != 1 else ''} but {len(args)} were given"))
    for position, value in enumerate(args[:argcount]):
        bound[positional_names[position]] = value
    if has_varargs:
        bound[varargs_name] = TupleVariable(list(args[argcount:]))
    extra: dict[str, VariableTracker] = {}
    for key, value in kwargs.items():
        if key in positional_names[posonly:] or key in kwonly_names:
            if key in bound:
                raise UserException(TypeError(f"{name}() got multiple values for argument '{key}'"))
            bound[key] = value
        elif has_varkw:
            extra[key] = value
        else:
            raise UserException(TypeError(f"{name}() got an unexpected keyword argument '{key}'"))
    first_default = argcount - len(defaults)
    for position, param in enumerate(positional_names):
        if param not in bound:
            if position >= first_default:
                bound[param] = defaults[position - first_default]
            else:
                raise UserException(TypeError(f"{name}() missing required positional argument: '{param}'"))
    for param in kwonly_names:
        if param not in bound:
            if param in kwdefaults:
                bound[param] = kwdefaults[param]
            else:
                raise UserException(TypeError(f"{name}() missing required keyword-only argument: '{param}'"))
    if has_varkw:
        bound[varkw_name] = DictVariable(extra)
    return bound
