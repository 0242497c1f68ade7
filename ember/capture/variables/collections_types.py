"""collections.OrderedDict, defaultdict and namedtuple made inside a compiled function.

OrderedDict and defaultdict become DictVariables of that dict type (a defaultdict keeps its
factory, called on a missing key).  `namedtuple(...)` with constant arguments makes the real
class now, so that its instances are NamedTupleVariables; the class is also made again by the
glue on every call where it (or an instance) outlives the graph, as each eager call makes a
new class.
"""
from __future__ import annotations

import collections

from ..errors import Unsupported, UserException
from .base import ConstantVariable, VariableTracker
from .builtins import new_dict, register


@register(collections.OrderedDict)
def _ordered_dict(tx, *args, **kwargs):
    return new_dict(tx, collections.OrderedDict, args, kwargs)


@register(collections.defaultdict)
def _defaultdict(tx, *args, **kwargs):
    factory = args[0] if args else None
    if isinstance(factory, ConstantVariable) and factory.value is None:
        factory = None
    if factory is not None and not _is_callable(tx, factory):
        raise UserException(TypeError("first argument must be callable or None"))
    result = new_dict(tx, collections.defaultdict, args[1:], kwargs)
    result.default_factory = factory
    return result


def _is_callable(tx, value: VariableTracker) -> bool:
    from .builtins import BuiltinVariable

    return BuiltinVariable(callable).call_function(tx, [value], {}).as_python_constant()


@register(collections.namedtuple)
def _namedtuple(tx, *args, **kwargs):
    from .objects import ClassVariable

    if not all(arg.is_python_constant() for arg in [*args, *kwargs.values()]):
        raise Unsupported("namedtuple() with non-constant arguments")
    const_args = [arg.as_python_constant() for arg in args]
    const_kwargs = {key: arg.as_python_constant() for key, arg in kwargs.items()}
    # Eager namedtuple() names the caller's module as the class's module; here that is the user's.
    const_kwargs.setdefault("module", tx.f_globals.get("__name__"))
    try:
        cls = collections.namedtuple(*const_args, **const_kwargs)
    except Exception as error:
        raise UserException(error) from None
    variable = ClassVariable(cls)
    refs = tx.graph.guards
    arguments = [refs.ref(value) for value in const_args]
    arguments += [f"{key}={refs.ref(value)}" for key, value in const_kwargs.items()]
    variable.rebuild_expr = f"{refs.ref(collections.namedtuple)}({', '.join(arguments)})"
    return variable
