"""From a real Python value found at a source to a variable, with the guards it needs.

`wrap(tx, value, source)` is the only place that decides what kind of variable a value
becomes and which facts about it are guarded:

    tensor            -> graph input, guarded on dtype/device/shape/strides/requires_grad
    int/str/...       -> constant, guarded on type and value
    list/tuple/dict   -> container, guarded on length/keys; items wrapped one by one
    nn.Module         -> module, guarded on identity
    function, class   -> guarded on identity
    other objects     -> guarded on type; attributes are read (and guarded) on demand
"""
from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import inspect
import types
import weakref
from typing import Any

import torch

from ..errors import Unsupported
from ..sources import ItemSource, Source
from .base import ConstantVariable, VariableTracker, constant, is_constant_value


def wrap(tx, value: Any, source: Source | None) -> VariableTracker:
    graph = tx.graph
    known = graph.objects.get(id(value))
    if known is not None and getattr(known, "real_object", None) is value:
        if source is not None and known.source is not None and source != known.source:
            # One variable stands for the object reached by both paths: that must stay true.
            graph.guards.same_object(source, known.source)
        return known
    if source is None:
        return wrap_static(tx, value)
    guards = graph.guards

    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter, torch.nn.parameter.Buffer):
            raise Unsupported(f"tensor subclass {type(value).__name__}")
        return graph.tensor_input(value, source)
    if is_constant_value(value) and not isinstance(value, types.CodeType):
        guards.constant(source, value)
        return ConstantVariable(value, source=source)

    from .containers import DictVariable, ListVariable, NamedTupleVariable, SetVariable, TupleVariable

    value_type = type(value)
    if value_type in (tuple, list) or (isinstance(value, tuple) and hasattr(value_type, "_fields")):
        guards.length(source, value)
        items = [wrap(tx, item, ItemSource(source, index)) for index, item in enumerate(value)]
        if value_type is list:
            return _remember(graph, value, ListVariable(items, source=source))
        if value_type is tuple:
            return TupleVariable(items, source=source)
        return NamedTupleVariable(items, value_type, source=source)
    if value_type in (dict,) or (isinstance(value, dict) and value_type.__module__ == "collections"
                                 and value_type.__name__ in ("OrderedDict", "defaultdict")):
        items, key_vars = _wrap_dict_items(tx, value, source)
        variable = DictVariable(items, source=source, dict_type=value_type, key_vars=key_vars)
        if value_type.__name__ == "defaultdict" and value.default_factory is not None:
            from ..sources import AttrSource

            variable.default_factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory"))
        return _remember(graph, value, variable)
    if value_type in (set, frozenset):
        if not all(is_constant_value(item) for item in value):
            raise Unsupported("set of non-constant items")
        guards.constant(source, frozenset(value)) if value_type is frozenset else guards.add(
            f"{source.expr()} == {guards.ref(set(value))}", f"{source.expr()} == {value!r}")
        variable = SetVariable([constant(item) for item in value], source=source, frozen=value_type is frozenset)
        return _remember(graph, value, variable)

    if isinstance(value, types.BuiltinMethodType) and type(getattr(value, "__self__", None)) in (list, dict, set):
        # `lst.append` carried across a graph break: a method call on the (tracked) container.
        from ..sources import AttrSource
        from ..translator import MethodCallVariable

        guards.type_match(source, value)
        return MethodCallVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)
    if isinstance(value, torch.nn.Module):
        guards.identity(source, value)
        from .modules import NNModuleVariable

        return _remember(graph, value, NNModuleVariable(value, source=source))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.MethodWrapperType, types.ModuleType, type,
                          functools.partial, types.MethodType, enum.Enum, torch.finfo, torch.iinfo)):
        if isinstance(value, types.MethodType):
            from ..sources import AttrSource
            from .functions import UserMethodVariable

            function = wrap(tx, value.__func__, AttrSource(source, "__func__"))
            owner = wrap(tx, value.__self__, AttrSource(source, "__self__"))
            return UserMethodVariable(function, owner)
        if isinstance(value, functools.partial):
            from ..sources import AttrSource
            from .functions import PartialVariable

            guards.type_match(source, value)
            return PartialVariable(
                wrap(tx, value.func, AttrSource(source, "func")),
                [wrap(tx, arg, ItemSource(AttrSource(source, "args"), i)) for i, arg in enumerate(value.args)],
                {k: wrap(tx, v, ItemSource(AttrSource(source, "keywords"), k)) for k, v in value.keywords.items()},
            )
        if isinstance(value, types.ModuleType):
            guards.identity(source, value)
        else:
            # Cheap and exact: a different function/class at this source recompiles.
            guards.identity(source, value)
        variable = wrap_static(tx, value)
        variable.source = source
        return variable
    if value_type is weakref.ReferenceType:
        from .objects import WeakRefVariable

        guards.type_match(source, value)
        return WeakRefVariable(value, source=source)
    from .model_outputs import ModelOutputVariable, is_model_output_class

    if is_model_output_class(value_type):
        guards.type_match(source, value)
        return ModelOutputVariable.from_existing(tx, value, source)
    # Any other object: its type is guarded; attributes are read lazily, each with a guard.
    guards.type_match(source, value)
    from .objects import UserObjectVariable

    return _remember(graph, value, UserObjectVariable(value, source=source))


def _wrap_dict_items(tx, value: dict, source: Source) -> tuple[dict, dict]:
    """The items of an existing dict, keyed as DictVariable keys them.

    Keys are constants or tensors (an optimizer's `state` is keyed by parameters; a tensor
    hashes by identity, so such a dict is an identity map).  The keys are guarded before any
    item is read: reading a missing key of a defaultdict would insert it."""
    from ..sources import KeyedItemSource
    from ..translator import RefSource

    guards = tx.graph.guards
    if all(is_constant_value(key) for key in value):
        guards.dict_keys(source, value)
        return {key: wrap(tx, item, ItemSource(source, key)) for key, item in value.items()}, {}
    if not all(is_constant_value(key) or type(key) in _TENSOR_KEY_TYPES for key in value):
        raise Unsupported("dict with keys that are neither constants nor tensors")
    keys = tuple(value)
    guards.type_match(source, value)
    guards.add(f"tuple(map(id, {source.expr()})) == {guards.ref(tuple(map(id, keys)))}",
               f"keys of {source.expr()} are the same {len(keys)} objects")
    guards.ref(keys)  # keeps the key objects alive, so their ids stay theirs
    items, key_vars = {}, {}
    for position, key in enumerate(keys):
        if is_constant_value(key):
            items[key] = wrap(tx, value[key], ItemSource(source, key))
            continue
        key_source = RefSource(tx.graph, key, f"{source.name()}_key{position}")
        key_var = wrap(tx, key, key_source)
        identity = key_var.identity_key()
        key_vars[identity] = key_var
        items[identity] = wrap(tx, value[key], KeyedItemSource(source, key_source))
    return items, key_vars


_TENSOR_KEY_TYPES = (torch.Tensor, torch.nn.Parameter)


def _remember(graph, value: Any, variable: VariableTracker) -> VariableTracker:
    variable.real_object = value
    graph.objects[id(value)] = variable
    graph._keepalive.append(value)
    label = variable.source.expr() if variable.source is not None else repr(variable)
    graph.side_effects.real_objects.watch(value, label)
    return variable


def _is_torch_static(value: Any) -> bool:
    """Objects from torch's namespace that ember treats as fixed (no identity guard)."""
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, types.ModuleType):
        return value.__name__ == "torch" or value.__name__.startswith("torch.") or value.__name__ in ("math", "operator")
    return module == "torch" or module.startswith("torch.") or module in ("builtins", "math", "operator", "_operator")


def wrap_static(tx, value: Any) -> VariableTracker:
    """A value with no source: known now, not guarded (constants, objects ember created)."""
    if is_constant_value(value):
        return ConstantVariable(value)
    from .builtins import BuiltinVariable, is_supported_builtin
    from .containers import DictVariable, ListVariable, TupleVariable
    from .functions import UserFunctionVariable
    from .objects import ClassVariable, PythonObjectVariable, UserObjectVariable
    from .torch_functions import TorchFunctionVariable, classify_torch_callable

    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor without a source (created outside the graph)")
    if isinstance(value, tuple) and type(value) is tuple:
        return TupleVariable([wrap_static(tx, item) for item in value])
    if isinstance(value, list) and type(value) is list:
        return ListVariable([wrap_static(tx, item) for item in value])
    if type(value) is dict and all(is_constant_value(key) for key in value):
        return DictVariable({key: wrap_static(tx, item) for key, item in value.items()})
    special = classify_torch_callable(value)
    if special is not None:
        return special
    if is_supported_builtin(value):
        return BuiltinVariable(value)
    if isinstance(value, type):
        return ClassVariable(value)
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value)
    if isinstance(value, torch.nn.Module):
        from .modules import NNModuleVariable

        return NNModuleVariable(value)
    if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.MethodWrapperType, enum.Enum, torch.finfo,
                          torch.iinfo)):
        return PythonObjectVariable(value)
    if isinstance(value, types.MethodType):
        from .functions import UserMethodVariable

        return UserMethodVariable(wrap_static(tx, value.__func__), wrap_static(tx, value.__self__))
    if type(value) is weakref.ReferenceType:
        from .objects import WeakRefVariable

        return WeakRefVariable(value)
    return UserObjectVariable(value)


def wrap_constant_result(tx, value: Any) -> VariableTracker:
    """The result of running a pure operation on constants."""
    from .containers import DictVariable, ListVariable, SetVariable, TupleVariable

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
        from .objects import PythonObjectVariable

        return PythonObjectVariable(value)
    return wrap_static(tx, value)


def is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def is_user_function(value: Any) -> bool:
    return isinstance(value, types.FunctionType) and not inspect.isbuiltin(value)


BUILTIN_NAMES = vars(builtins)
