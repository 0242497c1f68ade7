"""From a real Python value found at a source to a variable, with the guards it needs.

`wrap(tx, value, source)` is the one place that decides what a value becomes and what is guarded:
tensors become graph inputs (guarded on dtype/device/shape/strides/requires_grad), constants are
guarded on type and value, containers on length/keys (items wrapped one by one), modules, functions
and classes on identity, other objects on type (attributes read and guarded on demand).
"""
from __future__ import annotations

import enum
import functools
import sys
import types
import weakref
from typing import Any

import torch

from ..errors import Unsupported
from ..sources import AttrSource, DictValueSource, ItemSource, IterationItemSource, LocalSource, Source, literal
from .base import ConstantVariable, VariableTracker, constant, is_constant_value


def wrap(tx, value: Any, source: Source | None) -> VariableTracker:
    from ..scalars import has_dynamic_items, is_dynamic_candidate, scalar_input

    graph = tx.graph
    known = graph.objects.get(id(value))
    if known is not None and getattr(known, "real_object", None) is value:
        if source is not None and known.source is not None and known.source != source:
            # The capture made one variable of both paths (a mutation through one is seen
            # through the other): they must hold one object on later calls too.
            graph.guards.same_object(source, known.source)
        return known
    if source is None:
        return wrap_static(tx, value)
    guards = graph.guards

    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter, torch.nn.parameter.Buffer):
            raise Unsupported(f"tensor subclass {type(value).__name__}")
        return graph.tensor_input(value, source)
    plan = graph.shape_plan
    if type(value) is tuple and value and isinstance(source, LocalSource) and is_constant_value(value):
        from .containers import TupleVariable  # (a tuple argument: its items guarded as read)

        return TupleVariable.unread_tuple(tx, value, source)
    if is_constant_value(value) and not isinstance(value, types.CodeType) and not (
            plan is not None and type(value) is tuple and has_dynamic_items(plan, value, source)):
        if plan is not None and is_dynamic_candidate(value) and plan.dynamic_scalar(source.expr()):
            return scalar_input(tx, value, source)  # a number seen changing: a graph input
        guards.constant(source, value)
        return ConstantVariable(value, source=source)

    from .containers import DictVariable, ListVariable, NamedTupleVariable, SetVariable, TupleVariable
    from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
    from .model_outputs import ModelOutputVariable, is_model_output_class
    from .modules import NNModuleVariable, guard_plain_container
    from .objects import UserObjectVariable, WeakRefVariable
    from .torch_settings import TorchSettingsVariable, is_settings_object

    value_type = type(value)
    if value_type is list:
        return _remember(graph, value, ListVariable.unread_list(tx, value, source))
    if value_type is tuple or (isinstance(value, tuple) and hasattr(value_type, "_fields")):
        guards.length(source, value)
        items = [wrap(tx, item, ItemSource(source, index)) for index, item in enumerate(value)]
        return TupleVariable(items, source=source) if value_type is tuple else \
            NamedTupleVariable(items, value_type, source=source)
    if value_type in (dict,) or (isinstance(value, dict) and value_type.__module__ == "collections"
                                 and value_type.__name__ in ("OrderedDict", "defaultdict")):
        if all(is_constant_value(key) for key in value):
            guards.dict_keys(source, value)
            variable = DictVariable({}, source=source, dict_type=value_type)
            for key, item in value.items():
                if is_constant_value(item):  # (read, and guarded, only if the frame reads it)
                    variable.add_unread(tx, key, item, item_source(tx, source, key))
                else:
                    variable._items[key] = wrap(tx, item, item_source(tx, source, key))
        else:
            variable = _wrap_object_keyed_dict(tx, value, source)
        if value_type.__name__ == "defaultdict" and value.default_factory is not None:
            variable.default_factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory"))
        return _remember(graph, value, variable)
    if value_type in (set, frozenset):
        if not all(is_constant_value(item) for item in value):
            return _remember(graph, value, _wrap_object_set(tx, value, source))
        guards.constant(source, frozenset(value)) if value_type is frozenset else guards.add(
            f"{source.expr()} == {guards.ref(set(value))}", f"{source.expr()} == {value!r}")
        variable = SetVariable([constant(item) for item in value], source=source, frozen=value_type is frozenset)
        return _remember(graph, value, variable)

    if "numpy" in sys.modules:  # ndarray inputs, numpy functions, dtypes and scalars (numpy_arrays.py)
        from .numpy_arrays import wrap_numpy

        numpy_variable = wrap_numpy(tx, value, source)
        if numpy_variable is not None:
            return numpy_variable
    if isinstance(value, types.BuiltinMethodType) and type(getattr(value, "__self__", None)) in (list, dict, set):
        # `lst.append` carried across a graph break: a method call on the (tracked) container.
        from ..translator import MethodCallVariable

        guards.type_match(source, value)
        return MethodCallVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)
    if isinstance(value, torch.nn.Module):
        identity_guarded = not guard_plain_container(tx, source, value)
        if identity_guarded:
            guards.identity(source, value)
        return _remember(graph, value, NNModuleVariable(value, source=source, identity_guarded=identity_guarded))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.MethodWrapperType, types.ModuleType, type,
                          functools.partial, types.MethodType, enum.Enum, torch.finfo, torch.iinfo)):
        original = compiled_original(value)
        if original is not None:
            # ember.compile(fn) called in captured code: fn is inlined into this graph (the
            # dispatcher is identity-guarded, so what it wraps is fixed).
            guards.identity(source, value)
            return wrap(tx, original, AttrSource(source, "_ember_original"))
        if isinstance(value, types.MethodType):
            function = wrap(tx, value.__func__, AttrSource(source, "__func__"))
            owner = wrap(tx, value.__self__, AttrSource(source, "__self__"))
            return UserMethodVariable(function, owner)
        if isinstance(value, functools.partial):
            guards.type_match(source, value)
            # args and keywords are wrapped whole: their length and keys are guarded too.
            args = wrap(tx, value.args, AttrSource(source, "args"))
            keywords = wrap(tx, value.keywords, AttrSource(source, "keywords"))
            function = wrap(tx, value.func, AttrSource(source, "func"))
            return PartialVariable(function, args.unpack_sequence(tx), dict(keywords.items), source=source, real=value)
        variable = wrap_static(tx, value)
        if type(variable) is UserFunctionVariable and value.__closure__:
            # Each call of the outer function makes a new closure: guard its code and globals only
            # (cells, defaults and attributes are read through guarded sources) to reuse the graph.
            guards.type_match(source, value)
            guards.add(f"{source.expr()}.__code__ is {guards.ref(value.__code__)}",
                       f"{source.expr()} runs {value.__code__.co_qualname}")
            guards.add(f"{source.expr()}.__globals__ is {guards.ref(value.__globals__)}",
                       f"{source.expr()} has the same globals")
            variable.identity_guarded = False
        else:
            # Cheap and exact: a different function/class at this source recompiles.
            guards.identity(source, value)
        variable.source = source
        return variable
    if value_type is weakref.ReferenceType:
        guards.type_match(source, value)
        return WeakRefVariable(value, source=source)
    if is_model_output_class(value_type):
        guards.type_match(source, value)
        return ModelOutputVariable.from_existing(tx, value, source)
    if is_settings_object(value):  # torch.backends.cuda.matmul: settings read through __getattr__
        guards.identity(source, value)
        return TorchSettingsVariable(value, source=source)
    # Any other object: its type is guarded; attributes are read lazily, each with a guard.
    guards.type_match(source, value)
    return _remember(graph, value, UserObjectVariable(value, source=source))


def compiled_original(value: Any) -> Any:
    from ..runtime import compiled_original as original_of_dispatcher

    return original_of_dispatcher(value)


def item_source(tx, base: Source, key: Any) -> ItemSource:
    """`base[key]`, the key spelled as a literal or, when it has none, as a guard reference."""
    return ItemSource(base, key) if literal(key) is not None else ItemSource(base, key, tx.graph.guards.ref(key))


def _wrap_object_keyed_dict(tx, value: dict, source: Source) -> VariableTracker:
    """A dict keyed by tensors or objects: each key is read by position and guarded like any
    value found at a source (a tensor key becomes a graph input), so lookups by identity hold."""
    from .containers import DictVariable
    from .sets import hash_key

    tx.graph.guards.length(source, value)
    variable = DictVariable({}, source=source, dict_type=type(value))
    for index, (key, item) in enumerate(value.items()):
        key_var = wrap(tx, key, IterationItemSource(source, index))
        entry = hash_key(tx, key_var)
        variable.items[entry] = wrap(tx, item, DictValueSource(source, index))
        if not key_var.is_python_constant():
            variable.key_vars[entry] = key_var
    return variable


def _wrap_object_set(tx, value: set | frozenset, source: Source) -> VariableTracker:
    """A set of tensors or objects: members are read by position (the order iterating it gives
    now and, with the same members, on later calls), each guarded like any value at a source."""
    from .sets import SetVariable

    tx.graph.guards.length(source, value)
    members = [wrap(tx, item, IterationItemSource(source, index)) for index, item in enumerate(value)]
    variable = SetVariable(members, source=source, frozen=type(value) is frozenset)
    variable.order_known = True
    return variable


def _remember(graph, value: Any, variable: VariableTracker) -> VariableTracker:
    from .modules import NNModuleVariable

    variable.real_object = value
    graph.objects[id(value)] = variable
    graph._keepalive.append(value)
    label = variable.source.expr() if variable.source is not None else repr(variable)
    graph.side_effects.real_objects.watch(value, label)
    if variable.source is not None and type(value) is not frozenset and not isinstance(variable, NNModuleVariable):
        # A mutable object guarded by type or contents: no other source may hold it on a later call
        # (`a.append(1); len(b)` was captured with a and b apart).  Modules are identity-guarded.
        graph.guards.distinct(variable.source, "python objects")
    return variable


def wrap_static(tx, value: Any) -> VariableTracker:
    """A value with no source: known now, not guarded (constants, objects ember created)."""
    if is_constant_value(value):
        return ConstantVariable(value)
    from .builtins import BuiltinVariable, is_supported_builtin
    from .containers import DictVariable, ListVariable, TupleVariable
    from .fresh_modules import PlainModuleClassVariable, is_plain_module_class
    from .functions import UserFunctionVariable, UserMethodVariable
    from .modules import NNModuleVariable
    from .objects import ClassVariable, PythonObjectVariable, UserObjectVariable, WeakRefVariable
    from .torch_functions import classify_torch_callable
    from .torch_settings import TorchSettingsVariable, is_settings_object

    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor without a source (created outside the graph)")
    if "numpy" in sys.modules:
        from .numpy_arrays import wrap_numpy_static

        numpy_variable = wrap_numpy_static(tx, value)
        if numpy_variable is not None:
            return numpy_variable
    if type(value) is tuple:
        return TupleVariable([wrap_static(tx, item) for item in value])
    if type(value) is list:
        return ListVariable([wrap_static(tx, item) for item in value])
    if type(value) is dict and all(is_constant_value(key) for key in value):
        return DictVariable({key: wrap_static(tx, item) for key, item in value.items()})
    special = classify_torch_callable(value)
    if special is not None:
        return special
    if is_supported_builtin(value):
        return BuiltinVariable(value)
    if is_plain_module_class(value):
        return PlainModuleClassVariable(value)
    if isinstance(value, type):
        return ClassVariable(value)
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(compiled_original(value) or value)
    if isinstance(value, torch.nn.Module):
        return NNModuleVariable(value)
    if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.MethodWrapperType, enum.Enum, torch.finfo,
                          torch.iinfo)):
        return PythonObjectVariable(value)
    if isinstance(value, types.MethodType):
        return UserMethodVariable(wrap_static(tx, value.__func__), wrap_static(tx, value.__self__))
    if type(value) is weakref.ReferenceType:
        return WeakRefVariable(value)
    if is_settings_object(value):
        return TorchSettingsVariable(value)
    return UserObjectVariable(value)


def wrap_constant_result(tx, value: Any) -> VariableTracker:
    """The result of running a pure operation on constants."""
    from .containers import DictVariable, ListVariable, SetVariable, TupleVariable
    from .objects import PythonObjectVariable

    if is_constant_value(value):
        return ConstantVariable(value)
    if type(value) is list:
        return ListVariable([wrap_constant_result(tx, item) for item in value])
    if type(value) is tuple:
        return TupleVariable([wrap_constant_result(tx, item) for item in value])
    if type(value) is dict:
        return DictVariable({key: wrap_constant_result(tx, item) for key, item in value.items()})
    if type(value) in (set, frozenset):
        return SetVariable([ConstantVariable(item) for item in value], frozen=type(value) is frozenset)
    if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)):
        return PythonObjectVariable(value)
    return wrap_static(tx, value)
