"""collections.OrderedDict, defaultdict and namedtuple made inside a compiled function, and fromkeys.

OrderedDict and defaultdict become DictVariables of that type (a defaultdict keeps its factory).
`namedtuple(...)` of constants makes the real class now; the glue makes it again on every call where it
(or an instance) outlives the graph, as each eager call makes a new class.
"""
from __future__ import annotations

import collections

from ..errors import Unsupported, UserException
from .base import VariableTracker, all_constant, constant, constant_args, is_none, user_errors
from .builtins import BuiltinVariable, new_dict, register
from .containers import DictVariable
from .objects import ClassVariable


class DictFromkeysVariable(VariableTracker):
    """`dict.fromkeys`, `OrderedDict.fromkeys`, `defaultdict.fromkeys`: a new dict of that type
    (a defaultdict's factory is None) mapping each key to the one value."""

    def __init__(self, dict_type: type) -> None:
        super().__init__()
        self.dict_type = dict_type

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        kwargs = dict(kwargs)
        if self.dict_type is collections.OrderedDict and "value" in kwargs and len(args) == 1:
            args = [*args, kwargs.pop("value")]  # OrderedDict.fromkeys also takes value=
        if kwargs:
            raise UserException(TypeError("fromkeys() takes no keyword arguments"))
        if not 1 <= len(args) <= 2:
            raise UserException(TypeError(f"fromkeys expected 1 or 2 arguments, got {len(args)}"))
        value = args[1] if len(args) == 2 else constant(None)
        result = DictVariable({}, dict_type=self.dict_type)
        for key in args[0].get_iter(tx).unpack_sequence(tx):
            result.setitem(tx, key, value)
        return result

    def __repr__(self) -> str:
        return f"DictFromkeysVariable({self.dict_type.__name__})"


@register(collections.OrderedDict)
def _ordered_dict(tx, *args, **kwargs):
    return new_dict(tx, collections.OrderedDict, args, kwargs)


@register(collections.defaultdict)
def _defaultdict(tx, *args, **kwargs):
    factory = args[0] if args else None
    if is_none(factory):
        factory = None
    if factory is not None and not _is_callable(tx, factory):
        raise UserException(TypeError("first argument must be callable or None"))
    result = new_dict(tx, collections.defaultdict, args[1:], kwargs)
    result.default_factory = factory
    return result


# What a subclass body may hold and still be the base dict type in all but its type.
_TRIVIAL_CLASS_ATTRIBUTES = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                                       "__annotations__", "__firstlineno__", "__static_attributes__"})


def plain_dict_subclass_base(cls: type) -> type | None:
    """dict or OrderedDict where `cls` is a subclass of it that defines nothing of its own
    (`class D(OrderedDict): pass`), so that its instances behave as the base's; else None."""
    if not isinstance(cls, type) or type(cls) is not type:
        return None
    for base in (collections.OrderedDict, dict):
        if cls is base or not issubclass(cls, base) or issubclass(cls, collections.defaultdict):
            continue
        mro = cls.__mro__
        own = mro[:mro.index(base)]
        if mro[len(own):] == base.__mro__ and all(type(klass) is type for klass in own) \
                and all(set(klass.__dict__) <= _TRIVIAL_CLASS_ATTRIBUTES for klass in own):
            return base
        return None
    return None


def _is_callable(tx, value: VariableTracker) -> bool:
    return BuiltinVariable(callable).call_function(tx, [value], {}).as_python_constant()


@register(collections.namedtuple)
def _namedtuple(tx, *args, **kwargs):
    if not all_constant(args, kwargs):
        raise Unsupported("namedtuple() with non-constant arguments")
    const_args, const_kwargs = constant_args(args, kwargs)
    # Eager namedtuple() names the caller's module as the class's module; here that is the user's.
    const_kwargs.setdefault("module", tx.f_globals.get("__name__"))
    with user_errors():
        cls = collections.namedtuple(*const_args, **const_kwargs)
    variable = ClassVariable(cls)
    refs = tx.graph.guards
    arguments = [refs.ref(value) for value in const_args]
    arguments += [f"{key}={refs.ref(value)}" for key, value in const_kwargs.items()]
    variable.rebuild_expr = f"{refs.ref(collections.namedtuple)}({', '.join(arguments)})"
    return variable
