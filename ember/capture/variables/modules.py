"""nn.Module instances: inlined; parameters and buffers become named graph inputs.

Attribute reads follow nn.Module's order (_parameters, _buffers, _modules, then the instance dict and
the class) but read the dicts directly.  Calling a module inlines what Module.__call__ runs: its forward
(the instance's own, else the class's) with its hooks (module_call.py), guarded on both staying what
they were.  A module compiled with ember.compile is called through to the module it wraps.
"""
from __future__ import annotations

import types
from typing import Any

import torch

from ..errors import Unsupported, UserException
from ..guard_failures import Check, user_path
from ..module_call import (MODULE_HOOK_TABLES, guard_global_hooks, guard_hook_tables, has_hooks, has_own_hooks,
                           instance_forward, make_hooked_call, own_call, unsupported_hooks)
from ..sources import AttrSource, ModuleDictSource
from .base import VariableTracker, constant
from .builder import wrap, wrap_static
from .containers import ListIteratorVariable, TupleVariable
from .functions import UserFunctionVariable
from .objects import ClassVariable, _class_attribute, _descriptor_result
from .tensor import TensorVariable

_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList,
               torch.nn.ParameterDict)


def guard_plain_container(tx, source, module: torch.nn.Module) -> bool:
    """Guard a plain ModuleList or Sequential (no hooks) by what it holds rather than by identity:
    slicing makes a new container on every call, which behaves like any other with the same number
    of children (identity-guarded when read)."""
    if type(module) not in (torch.nn.ModuleList, torch.nn.Sequential) or has_hooks(module):
        return False
    guards = tx.graph.guards
    expr = source.expr()
    guards.type_match(source, module)
    guards.add(f"len({expr}._modules) == {len(module._modules)}", f"{expr} holds {len(module._modules)} modules")
    return True  # calling it guards its hooks (NNModuleVariable.guard_call)


class NNModuleVariable(VariableTracker):
    def __init__(self, module: torch.nn.Module, source=None, identity_guarded: bool = True) -> None:
        super().__init__(source)
        self.module = module
        self.real_object = module
        # False for a plain container guarded by what it holds (guard_plain_container): then
        # later calls may bring another object, read through the source.
        self.identity_guarded = identity_guarded

    def python_type(self) -> type:
        return type(self.module)

    def identity_key(self) -> Any:
        return ("module", id(self.module))

    def static_value(self) -> Any:
        return None

    def _child(self, tx, table: str, key: str, value: Any) -> VariableTracker:
        if self.source is None:
            if isinstance(value, torch.Tensor):
                raise Unsupported("parameter of a module with no source")
            return wrap_static(tx, value)
        return wrap(tx, value, ModuleDictSource(self.source, table, key))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        module = self.module
        pending = tx.graph.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        if name == "__class__":
            return ClassVariable(type(module))
        cls = type(module)
        found, raw = _class_attribute(cls, name)
        if found and isinstance(raw, property):
            return _descriptor_result(tx, self, cls, name, raw, None)
        for table in ("_parameters", "_buffers", "_modules"):
            entries = module.__dict__.get(table)
            if entries is not None and name in entries:
                value = entries[name]
                if value is None:
                    return constant(None)
                return self._child(tx, table, name, value)
        if name in module.__dict__:
            value = module.__dict__[name]
            if self.source is None:
                return wrap_static(tx, value)
            return wrap(tx, value, AttrSource(self.source, name))
        if found:
            source = AttrSource(self.source, name) if self.source is not None else None
            return _descriptor_result(tx, self, cls, name, raw, source)
        if cls.__getattr__ is not torch.nn.Module.__getattr__:
            raise Unsupported(f"{cls.__name__} overrides __getattr__")
        raise UserException(AttributeError(f"'{cls.__name__}' object has no attribute '{name}'"))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        module = self.module
        for table in ("_parameters", "_buffers", "_modules"):
            if name in module.__dict__.get(table, {}):
                raise Unsupported(f"assignment to registered {table[1:-1]} {name!r} of a module")
        if isinstance(value, (TensorVariable, NNModuleVariable)):
            raise Unsupported("assigning a tensor or module as a plain module attribute")
        if type(module).__setattr__ is not torch.nn.Module.__setattr__:
            raise Unsupported(f"{type(module).__name__} overrides __setattr__")
        tx.graph.side_effects.store_attr(self, name, value)

    # -- calling ---------------------------------------------------------------------------------
    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        module = self.module
        if _is_compiled_module(module):
            return self._call_compiled_module(tx, args, kwargs)
        call = own_call(module)
        if call is not None:
            # A class's own __call__ runs instead (its super().__call__ comes back to call_as_module).
            if not isinstance(call, types.FunctionType):
                raise Unsupported(f"{type(module).__name__}.__call__ is not a Python function")
            return UserFunctionVariable(call).call_function(tx, [self, *args], kwargs)
        return self.call_as_module(tx, args, kwargs)

    def call_as_module(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """What nn.Module.__call__ runs: the hooks around the forward."""
        module = self.module
        reason = unsupported_hooks(module)
        if reason is not None:
            raise Unsupported(reason)
        self.guard_call(tx)
        own_forward = instance_forward(module)
        forward = type(module).forward
        if own_forward is None:
            if forward is torch.nn.Module.forward:
                raise UserException(NotImplementedError(
                    f'Module [{type(module).__name__}] is missing the required "forward" function'))
            if not isinstance(forward, types.FunctionType):
                raise Unsupported(f"forward of {type(module).__name__} is not a Python function")
        if has_hooks(module):
            hooked = make_hooked_call(module, None if own_forward is not None else forward)
            return UserFunctionVariable(hooked).call_function(tx, [self, *args], kwargs)
        if own_forward is not None:
            return self.var_getattr(tx, "forward").call_function(tx, args, kwargs)
        return UserFunctionVariable(forward).call_function(tx, [self, *args], kwargs)

    def guard_call(self, tx) -> None:
        """Guard that what calling the module runs besides its class's forward is what it was: its
        hooks, the global hooks and its instance forward.  The instance dict is read by reference when
        the module's identity is guarded (the cheapest exact check), else through the source."""
        guards = tx.graph.guards
        guard_global_hooks(guards)
        if self.source is None:
            if has_own_hooks(self.module) or instance_forward(self.module) is not None:
                raise Unsupported(f"hooks or an instance forward on a {type(self.module).__name__} made during "
                                  f"capture")
            return
        self._guard_own_call_state(tx)

    def _guard_own_call_state(self, tx) -> None:
        guards = tx.graph.guards
        module = self.module
        path = user_path(self.source)
        attributes = guards.ref(module.__dict__) if self.identity_guarded else f"{self.source.expr()}.__dict__"
        tables = [(f"{attributes}[{name!r}]", module.__dict__[name], f"{path}.{name}")
                  for name in MODULE_HOOK_TABLES if name in module.__dict__]
        guard_hook_tables(guards, tables, path)
        if instance_forward(module) is None:
            guards.add(f"'forward' not in {attributes}", f"{path} has no forward of its own (module.forward = f)",
                       Check("value", f"'forward' in {attributes}", False, f"'forward' in {path}.__dict__"))

    def _call_compiled_module(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """`ember.compile(child)` called inside captured code: the child's module is inlined, as if
        it had not been compiled on its own (OptimizedModule.__call__ runs the module as
        Module.__call__ would, global hooks included, unless the wrapper has hooks of its own)."""
        module = self.module
        if has_own_hooks(module) or instance_forward(module) is not None:
            raise Unsupported("a compiled module (ember.compile) with hooks or a forward of its own")
        if self.source is None:
            raise Unsupported("a compiled module (ember.compile) made during capture")
        self._guard_own_call_state(tx)
        return self.var_getattr(tx, "_orig_mod").call_function(tx, args, kwargs)

    def guard_length(self, tx) -> None:
        """What a container gives (its length, its slices, its items in order) depends on how
        many entries it holds: guarded, so a module appended later recompiles."""
        if self.source is not None:
            expr = f"{self.source.expr()}.{_table(self.module)}"
            count = len(self.module.__dict__[_table(self.module)])
            tx.graph.guards.add(f"len({expr}) == {count}", f"{expr} holds {count} entries")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        module = self.module
        if name == "__len__" and isinstance(module, _CONTAINERS):
            self.guard_length(tx)
            return constant(len(module))
        if name == "__getitem__" and isinstance(module, _CONTAINERS):
            return self.getitem(tx, args[0])
        if name == "__contains__" and isinstance(module, torch.nn.ModuleDict):
            return constant(args[0].as_python_constant() in module)
        if name in ("parameters", "buffers", "children", "named_parameters", "named_buffers",
                    "named_children", "modules", "named_modules", "keys", "values", "items"):
            return self._listing(tx, name, args, kwargs)
        if name == "__iter__":
            return ListIteratorVariable(self.unpack_sequence(tx))
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        module = self.module
        key = index.as_python_constant()
        if isinstance(module, torch.nn.ModuleDict):
            if key not in module:
                raise UserException(KeyError(key))
            return self._child(tx, "_modules", key, module[key])
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            if isinstance(key, slice):
                return ModuleSliceVariable.make(tx, self, key)
            if isinstance(key, int) and key < 0:
                self.guard_length(tx)
            names = list(module._modules.keys())
            try:
                name = names[key]
            except IndexError as error:
                raise UserException(IndexError(f"index {key} is out of range")) from error
            return self._child(tx, "_modules", name, module._modules[name])
        if isinstance(module, torch.nn.ParameterList):
            name = list(module._parameters.keys())[key]
            return self._child(tx, "_parameters", name, module._parameters[name])
        if isinstance(module, torch.nn.ParameterDict):
            return self._child(tx, "_parameters", key, module._parameters[key])
        raise Unsupported(f"indexing {type(module).__name__}")

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        module = self.module
        if not isinstance(module, _CONTAINERS):
            if hasattr(type(module), "__iter__"):
                raise Unsupported(f"iteration over {type(module).__name__}")
            raise UserException(TypeError(f"'{type(module).__name__}' object is not iterable"))
        self.guard_length(tx)
        table = _table(module)
        if isinstance(module, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
            return [constant(key) for key in module.__dict__[table]]
        return [self._child(tx, table, key, value) for key, value in module.__dict__[table].items()]

    def _listing(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        module = self.module
        if args or kwargs:
            raise Unsupported(f"Module.{name} with arguments")

        def entry(key: str, value: VariableTracker) -> VariableTracker:  # named_*: (name, value) pairs
            return TupleVariable([constant(key), value]) if name.startswith("named") else value

        if name in ("keys", "values", "items") and isinstance(module, torch.nn.ModuleDict):
            items = []
            for key, child in module._modules.items():
                child_var = self._child(tx, "_modules", key, child)
                items.append({"keys": constant(key), "values": child_var,
                              "items": TupleVariable([constant(key), child_var])}[name])
            return ListIteratorVariable(items)
        if name in ("children", "named_children"):
            return ListIteratorVariable([entry(key, self._child(tx, "_modules", key, child))
                                         for key, child in module._modules.items() if child is not None])
        if name in ("parameters", "named_parameters", "buffers", "named_buffers"):
            table = "_parameters" if "parameters" in name else "_buffers"
            return ListIteratorVariable(_dedupe([entry(f"{prefix}{key}", owner._child(tx, table, key, value))
                                                 for prefix, owner in self._walk(tx)
                                                 for key, value in owner.module.__dict__[table].items()
                                                 if value is not None]))
        if name in ("modules", "named_modules"):
            return ListIteratorVariable([entry(prefix[:-1], owner) for prefix, owner in self._walk(tx)])
        raise Unsupported(f"Module.{name}")

    def _walk(self, tx, prefix: str = "", seen=None):
        seen = seen if seen is not None else set()
        if id(self.module) in seen:
            return
        seen.add(id(self.module))
        yield prefix, self
        for key, child in self.module._modules.items():
            if child is None:
                continue
            yield from self._child(tx, "_modules", key, child)._walk(tx, f"{prefix}{key}.", seen)

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"


class ModuleSliceVariable(NNModuleVariable):
    """`layers[a:b]` of an nn.ModuleList or nn.Sequential: a new container of the same class, made
    now, whose children are read where they live in the sliced one (their parameters are inputs with
    the usual guards); the glue slices the real container again if the slice outlives the graph."""

    def __init__(self, sliced: torch.nn.Module, origin: NNModuleVariable, key: slice,
                 origin_names: dict[str, str]) -> None:
        super().__init__(sliced)
        self.origin = origin
        self.key = key
        self.origin_names = origin_names  # key in the slice -> key in the original container
        self.real_object = None  # made during capture: not an object the guards know

    @staticmethod
    def make(tx, origin: NNModuleVariable, key: slice) -> "ModuleSliceVariable":
        module = origin.module
        if type(module) not in (torch.nn.ModuleList, torch.nn.Sequential):
            raise Unsupported(f"slicing a {type(module).__name__} (its constructor may do anything)")
        origin.guard_length(tx)
        try:
            sliced = module[key]
        except Exception as error:
            raise UserException(error) from None
        original = list(module._modules.keys())[key]
        return ModuleSliceVariable(sliced, origin, key, dict(zip(sliced._modules.keys(), original)))

    def guard_length(self, tx) -> None:
        self.origin.guard_length(tx)

    def _child(self, tx, table: str, key: str, value: Any) -> VariableTracker:
        if table == "_modules" and key in self.origin_names:
            return self.origin._child(tx, table, self.origin_names[key], value)
        return super()._child(tx, table, key, value)

    def reconstruct_expr(self, cg) -> str:
        return f"{cg.reconstruct(self.origin)}[{cg.literal(self.key)}]"

    def contained_values(self) -> list[VariableTracker]:
        return []

    def __repr__(self) -> str:
        return f"ModuleSliceVariable({type(self.module).__name__}[{self.key}])"


def _is_compiled_module(module: torch.nn.Module) -> bool:
    """ember.compile(module) (api.OptimizedModule): a wrapper whose calls go through a compile
    context, its original the child `_orig_mod`."""
    from ..runtime import CompileContext

    return isinstance(module.__dict__.get("_ember_context"), CompileContext) and "_orig_mod" in module._modules


def _table(module: torch.nn.Module) -> str:
    """The table a container's entries are in."""
    return "_parameters" if isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)) else "_modules"


def _dedupe(items: list[VariableTracker]) -> list[VariableTracker]:
    seen, unique = set(), []
    for item in items:
        key = id(item.items[1]) if hasattr(item, "items") and isinstance(item.items, list) else id(item)
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique

