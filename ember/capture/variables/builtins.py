"""Python builtins during capture: one handler per builtin, registered in a table.

A builtin without a handler still works when all its arguments are constants and it is
pure (it runs for real); anything else is a graph break with the builtin's name.
"""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import types
from typing import Any, Callable

import torch

from ..errors import Unsupported, UserException
from .base import (INPLACE_TO_BINARY, ConstantVariable, VariableTracker, all_constant, constant, is_none, real_getattr,
                   run_for_real, static_of, user_errors)
from .builder import wrap_static
from .containers import (BaseListVariable, DictVariable, DictViewVariable, ListIteratorVariable, ListVariable,
                         RangeIteratorVariable, SetVariable, TupleVariable)
from .functions import BaseFunctionVariable, PartialVariable, UserFunctionVariable, UserMethodVariable
from .glue_values import ObjectTextVariable, contains_answer, tensor_comparison, tensor_to_number
from .modules import NNModuleVariable
from .number_or_tensor import tensor_min_max
from .objects import (InstanceVariable, NewObjectVariable, ObjectMethodVariable, PythonObjectVariable,
                      RealValueVariable, SuperVariable, _class_attribute, has_python_method)
from .operators import binary_op, is_op, unary_op
from .sets import set_operator
from .tensor import TensorVariable
from .torch_functions import TorchFunctionVariable

HANDLERS: dict[Any, Callable] = {}

# Builtins that are safe to run for real on constant arguments.
PURE_BUILTINS = {
    abs, all, any, ascii, bin, bool, chr, complex, divmod, float, format, hash, hex, int, len, max,
    min, oct, ord, pow, repr, round, sorted, str, sum, tuple, list, dict, set, frozenset, range,
    slice, reversed, enumerate, zip, type, isinstance, issubclass, callable, bytes,
}


def register(*functions: Any):
    def decorator(handler: Callable) -> Callable:
        for function in functions:
            if function in HANDLERS:
                raise RuntimeError(f"duplicate builtin handler for {function}")
            HANDLERS[function] = handler
        return handler

    return decorator


def is_supported_builtin(value: Any) -> bool:
    try:
        return value in HANDLERS or value in PURE_BUILTINS  # (object and print have handlers)
    except TypeError:
        return False


class BuiltinVariable(RealValueVariable):
    def __init__(self, function: Any, source=None) -> None:
        super().__init__(source)
        self.function = function

    def static_value(self) -> Any:
        return self.function

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        handler = HANDLERS.get(self.function)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
        if self.function in PURE_BUILTINS and all_constant(args, kwargs):
            return run_for_real(tx, self.function, args, kwargs)
        name = getattr(self.function, "__name__", self.function)
        raise Unsupported(f"builtin {name}() with these arguments is not captured")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.function is object and name in ("__setattr__", "__new__", "__init__"):
            return ObjectMethodVariable(name)
        if name == "fromkeys" and self.function in (dict, collections.OrderedDict, collections.defaultdict):
            from .collections_types import DictFromkeysVariable

            return DictFromkeysVariable(self.function)
        # (hasattr(tuple, "_fields") is False, not an internal error)
        return wrap_static(tx, real_getattr(self.function, name))

    def __repr__(self) -> str:
        return f"BuiltinVariable({getattr(self.function, '__name__', self.function)})"


# -- helpers shared with containers -------------------------------------------------------------
def values_equal(tx, left: VariableTracker, right: VariableTracker) -> bool:
    if is_op(tx, left, right):
        return True
    if left.is_python_constant() and right.is_python_constant():
        with user_errors():
            return bool(left.as_python_constant() == right.as_python_constant())
    from ..scalars import symbolic_equal

    equal = symbolic_equal(tx, left, right)  # (a number captured as a symbol: the ShapeEnv decides)
    if equal is not None:
        return equal
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        if is_none(left) or is_none(right):
            return False
        raise Unsupported("== between tensors inside a container comparison")
    if isinstance(left, BaseListVariable) and isinstance(right, BaseListVariable):
        if left.python_type() is not right.python_type() or len(left.items) != len(right.items):
            return False
        return all(values_equal(tx, a, b) for a, b in zip(left.items, right.items))
    as_sets = set_operator(tx, operator.eq, left, right)
    if as_sets is not None:
        return as_sets.as_python_constant()
    if isinstance(left, DictVariable) and isinstance(right, DictVariable):
        return dicts_equal(tx, left, right)
    left_key = getattr(left, "identity_key", None)
    right_key = getattr(right, "identity_key", None)
    if left_key and right_key:
        return left_key() == right_key()
    if isinstance(left, ConstantVariable) or isinstance(right, ConstantVariable):
        return False
    raise Unsupported(f"comparing {left} and {right}")


def dicts_equal(tx, left: DictVariable, right: DictVariable) -> bool:
    """dict == dict: the same keys with equal values; two OrderedDicts also need the same order."""
    if left.items.keys() != right.items.keys():
        return False
    both_ordered = issubclass(left.dict_type, collections.OrderedDict) and \
        issubclass(right.dict_type, collections.OrderedDict)
    if both_ordered and list(left.items) != list(right.items):
        return False
    return all(values_equal(tx, value, right.items[key]) for key, value in left.items.items())


def contains(tx, container: VariableTracker, item: VariableTracker) -> VariableTracker:
    if isinstance(container, (DictVariable, SetVariable, DictViewVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, ConstantVariable) and item.is_python_constant():
        with user_errors():
            return constant(item.as_python_constant() in container.value)
    if isinstance(container, TensorVariable):
        raise Unsupported("`in` on a tensor depends on its values")
    proxy = getattr(container, "real_object", None)
    if type(proxy) is types.MappingProxyType and container.source is not None and item.is_python_constant():
        # `"x" in cls.__dict__`: answered now from the live class dict, guarded on the answer
        key = item.as_python_constant()
        with user_errors(TypeError):
            answer = key in proxy
        expr = f"({tx.graph.guards.ref(key)} in {container.source.expr()}) is {answer}"
        tx.graph.guards.add(expr, f"{key!r} {'in' if answer else 'not in'} {container.source.expr()}")
        return constant(answer)
    if isinstance(container, InstanceVariable) and has_python_method(container.python_type(), "__contains__"):
        return constant(container.call_method(tx, "__contains__", [item], {}).truth(tx))
    terms = []  # one-element `candidate == item` tensors the glue reads (glue_values.py)
    for candidate in container.unpack_sequence(tx):
        term = tensor_comparison(tx, candidate, item) if isinstance(container, BaseListVariable) else None
        if term is not None:
            terms.append(term)
        elif values_equal(tx, candidate, item):
            break
    else:
        return contains_answer(terms, False)
    return contains_answer(terms, True)


def sorted_items(tx, items: list[VariableTracker], kwargs: dict) -> list[VariableTracker]:
    key_function = kwargs.get("key")
    reverse = kwargs.get("reverse", constant(False)).as_python_constant()
    keys = items if key_function is None or is_none(key_function) else \
        [key_function.call_function(tx, [item], {}) for item in items]
    if not all_constant(keys):
        raise Unsupported("sorting values that are not constants")
    order = sorted(range(len(items)), key=lambda index: keys[index].as_python_constant(), reverse=reverse)
    return [items[index] for index in order]


def _iterate(tx, value: VariableTracker | None) -> list[VariableTracker]:
    """The items of an iterable (none for a missing argument: `list()`)."""
    return value.get_iter(tx).unpack_sequence(tx) if value is not None else []


# -- handlers ------------------------------------------------------------------------------------
@register(len)
def _len(tx, value, **kwargs):
    if isinstance(value, ConstantVariable):
        return None
    if isinstance(value, (BaseListVariable, DictVariable, SetVariable)):
        return constant(len(value.items))
    return value.call_method(tx, "__len__", [], {})


@register(isinstance)
def _isinstance(tx, value, classes):
    target = classes.as_python_constant() if classes.is_python_constant() else None
    if target is None:
        target = static_of(classes)
    if target is None:
        if isinstance(classes, TupleVariable):
            target = tuple(static_of(c) or c.as_python_constant() for c in classes.items)
        else:
            raise Unsupported("isinstance with a non-constant class")
    value_type = value.python_type()
    if isinstance(value, TensorVariable) and value_type is torch.Tensor:
        # FakeTensor-free answer: a plain tensor is a torch.Tensor and nothing more specific.
        return constant(issubclass(torch.Tensor, target) if isinstance(target, type) else
                        any(issubclass(torch.Tensor, t) for t in target))
    with user_errors(TypeError):
        return constant(issubclass(value_type, target))


@register(issubclass)
def _issubclass(tx, cls, classes):
    left = static_of(cls) or cls.as_python_constant()
    right = static_of(classes)
    if right is None:
        right = classes.as_python_constant()
    return constant(issubclass(left, right))


@register(getattr)
def _getattr(tx, value, name, default=None):
    try:
        return tx.load_attr(value, name.as_python_constant())
    except UserException as error:
        if default is not None and isinstance(error.value, AttributeError):
            return default
        raise


@register(hasattr)
def _hasattr(tx, value, name):
    kind = _python_type_or_none(value)
    if kind in _SLOTLESS_TYPES:  # no instance attributes: the type answers
        return constant(hasattr(kind, name.as_python_constant()))
    try:
        tx.load_attr(value, name.as_python_constant())
        return constant(True)
    except UserException as error:
        if isinstance(error.value, AttributeError):
            return constant(False)
        raise


# Builtin types whose instances have no attributes of their own.
_SLOTLESS_TYPES = (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.defaultdict,
                   collections.deque, str, int, float, bool, type(None))


def _python_type_or_none(value: VariableTracker) -> type | None:
    try:
        return value.python_type()
    except (Unsupported, NotImplementedError):
        return None


@register(setattr)
def _setattr(tx, value, name, new_value):
    tx.store_attr(value, name.as_python_constant(), new_value)
    return constant(None)


@register(iter)
def _iter(tx, value, *rest):
    if rest:
        raise Unsupported("iter() with a sentinel")
    return value.get_iter(tx)


@register(next)
def _next(tx, iterator, *default):
    step = getattr(iterator, "next_value", None)
    if step is None:
        raise Unsupported(f"next() on {iterator}")
    value = step(tx)
    if value is None:
        if default:
            return default[0]
        raise UserException(StopIteration())
    return value


@register(range)
def _range(tx, *args):
    return constant(range(*[a.as_python_constant() for a in args]))


@register(reversed)
def _reversed(tx, sequence):
    if isinstance(sequence, ConstantVariable) and isinstance(sequence.value, range):
        return RangeIteratorVariable(sequence.value[::-1])
    return ListIteratorVariable(list(reversed(sequence.unpack_sequence(tx))))


@register(sorted)
def _sorted(tx, iterable, **kwargs):
    return ListVariable(sorted_items(tx, _iterate(tx, iterable), kwargs))


@register(list)
def _list(tx, iterable=None):
    return ListVariable(_iterate(tx, iterable))


@register(tuple)
def _tuple(tx, iterable=None):
    return iterable if type(iterable) is TupleVariable else TupleVariable(_iterate(tx, iterable))


def _set_of(frozen: bool):
    def handler(tx, iterable=None):
        if isinstance(iterable, SetVariable):  # the same members: their order does not matter
            if frozen and iterable.frozen:
                return iterable  # frozenset(a frozenset) is that frozenset
            return SetVariable.from_keys(iterable.items, frozen=frozen)
        return SetVariable(_iterate(tx, iterable), frozen=frozen)

    return handler


register(set)(_set_of(False))
register(frozenset)(_set_of(True))


@register(dict)
def _dict(tx, *args, **kwargs):
    return new_dict(tx, dict, args, kwargs)


def new_dict(tx, dict_type: type, args: tuple, kwargs: dict) -> DictVariable:
    """`dict_type(*args, **kwargs)` for dict and OrderedDict: a mapping or pairs, then keywords."""
    if len(args) > 1:
        raise UserException(TypeError(f"{dict_type.__name__} expected at most 1 argument, got {len(args)}"))
    result = DictVariable({}, dict_type=dict_type)
    result.call_method(tx, "update", list(args), kwargs)
    return result


@register(sum)
def _sum(tx, iterable, start=None):
    items = _iterate(tx, iterable)
    if all(item.is_python_constant() for item in items) and (start is None or start.is_python_constant()):
        # run for real on the items (the iterable itself may be a generator, not a constant)
        return run_for_real(tx, sum, [TupleVariable(items), *([] if start is None else [start])], {})
    total = start if start is not None else constant(0)
    for item in items:
        total = binary_op(tx, operator.add, total, item)
    return total


def _min_max(function, tx, *args, **kwargs):
    items = _iterate(tx, args[0]) if len(args) == 1 else list(args)
    if all_constant(items, kwargs):
        return run_for_real(tx, function, [TupleVariable(items)] if len(args) == 1 else items, kwargs)
    if not items:
        if "default" in kwargs:
            return kwargs["default"]
        raise UserException(ValueError(f"{function.__name__}() arg is an empty sequence"))
    if kwargs:
        raise Unsupported(f"{function.__name__}() of non-constants")
    from ..scalars import symbolic_min_max

    result = tensor_min_max(tx, function, items)  # (0-d tensors and numbers: torch.where)
    if result is None and len(items) == 2 and all(isinstance(item, TensorVariable) for item in items):
        raise Unsupported(f"{function.__name__}() of tensors compares values")
    if result is None:
        result = symbolic_min_max(tx, function, items)  # (numbers captured as symbols)
    if result is None:
        raise Unsupported(f"{function.__name__}() of non-constants")
    return result


register(min)(functools.partial(_min_max, min))
register(max)(functools.partial(_min_max, max))


register(abs)(lambda tx, value: unary_op(tx, operator.abs, value))


def _all_or_any(stop_at: bool):
    """all() stops at the first false item, any() at the first true one (later items are not read)."""
    def handler(tx, iterable):
        for item in _iterate(tx, iterable):
            if item.truth(tx) == stop_at:
                return constant(stop_at)
        return constant(not stop_at)

    return handler


register(all)(_all_or_any(False))
register(any)(_all_or_any(True))


@register(bool)
def _bool(tx, value=None):
    return constant(value is not None and value.truth(tx))


def _scalar(kind):
    def handler(tx, value=None, *rest):
        if value is None or value.is_python_constant():
            return None
        if isinstance(value, TensorVariable):  # (converted by the glue after the graph)
            return tensor_to_number(tx, value, kind)
        return value.call_method(tx, f"__{kind.__name__}__", [], {})

    return handler


register(int)(_scalar(int))
register(float)(_scalar(float))


def to_text(tx, value: VariableTracker, kind: str) -> VariableTracker:
    """str()/repr() of a value: constants for real, user objects through their Python methods."""
    function = str if kind == "__str__" else repr
    if value.is_python_constant():
        return constant(function(value.as_python_constant()))
    caught = static_of(value)
    if isinstance(caught, BaseException) and type(caught).__module__ == "builtins":
        # an exception that user code caught: a builtin exception's text is fixed by its args
        return constant(function(caught))
    if isinstance(value, InstanceVariable):
        for name in ((kind, "__repr__") if kind == "__str__" else (kind,)):
            if has_python_method(value.python_type(), name):
                result = value.call_method(tx, name, [], {})
                if not (result.is_python_constant() and isinstance(result.as_python_constant(), str)):
                    raise Unsupported(f"{name} returned a non-string")
                return result
        if isinstance(value, NewObjectVariable) and _class_attribute(value.cls, "__repr__")[1] is object.__repr__ \
                and _class_attribute(value.cls, "__str__")[1] is object.__str__:
            return ObjectTextVariable(value, function)  # "<mod.Class object at 0x...>": the glue's
    raise Unsupported(f"{kind[2:-2]}() of {value}")


def _text_handler(kind: str):
    def handler(tx, value=None, *rest):
        if value is None or rest or value.is_python_constant():
            return None
        return to_text(tx, value, kind)

    return handler


register(str)(_text_handler("__str__"))
register(repr)(_text_handler("__repr__"))


@register(type)
def _type(tx, *args):
    if len(args) != 1:
        raise Unsupported("type() with three arguments")
    return wrap_static(tx, args[0].python_type())


@register(callable)
def _callable(tx, value):
    if value.is_python_constant():
        return None
    if isinstance(value, (BaseFunctionVariable, UserMethodVariable, PartialVariable, NNModuleVariable,
                          TorchFunctionVariable, BuiltinVariable)):
        return constant(True)
    # An instance is callable when its class (not its metaclass) defines __call__.
    return constant(any("__call__" in klass.__dict__ for klass in value.python_type().__mro__))


def _never(reason: str):
    def handler(tx, *args, **kwargs):
        raise Unsupported(reason)

    return handler


register(print)(_never("print() writes to stdout"))
register(id)(_never("id() of an object"))
register(delattr)(_never("delattr"))


@register(super)
def _super(tx, *args):
    if len(args) == 2:
        return SuperVariable(args[0].as_python_constant(), args[1])
    if not args:
        return tx.zero_arg_super()
    raise Unsupported("super() with one argument")


@register(object)
def _object(tx, *args):
    if args:
        raise UserException(TypeError("object() takes no arguments"))
    return NewObjectVariable(object)


@register(functools.reduce)
def _reduce(tx, function, iterable, *initial):
    items = _iterate(tx, iterable)
    if initial:
        accumulator = initial[0]
    elif items:
        accumulator, items = items[0], items[1:]
    else:
        raise UserException(TypeError("reduce() of empty iterable with no initial value"))
    for item in items:
        accumulator = function.call_function(tx, [accumulator, item], {})
    return accumulator


@register(functools.partial)
def _partial(tx, function, *args, **kwargs):
    if type(function) is PartialVariable and not getattr(function.real, "__dict__", None):
        # partial(partial(f, a), b) is partial(f, a, b), as functools makes it
        return PartialVariable(function.function, [*function.args, *args], {**function.keywords, **kwargs})
    return PartialVariable(function, list(args), kwargs)


def _operator_handler(function):
    def handler(tx, *args):
        if len(args) == 2:
            return binary_op(tx, function, args[0], args[1])
        if len(args) == 1:
            return unary_op(tx, function, args[0])
        raise Unsupported(f"operator.{function.__name__}")

    return handler


for _function in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                  operator.mod, operator.pow, operator.matmul, operator.neg, operator.pos,
                  operator.and_, operator.or_, operator.xor, operator.lt, operator.le, operator.eq,
                  operator.ne, operator.gt, operator.ge, operator.invert, *INPLACE_TO_BINARY):
    register(_function)(_operator_handler(_function))


@register(operator.setitem)
def _operator_setitem(tx, container, index, value):
    container.call_method(tx, "__setitem__", [index, value], {})
    return constant(None)


@register(operator.delitem)
def _operator_delitem(tx, container, index):
    container.call_method(tx, "__delitem__", [index], {})
    return constant(None)


register(operator.is_)(lambda tx, left, right: constant(bool(is_op(tx, left, right))))
register(operator.is_not)(lambda tx, left, right: constant(not is_op(tx, left, right)))
register(operator.getitem)(lambda tx, container, index: tx.getitem(container, index))
register(operator.not_)(lambda tx, value: constant(not value.truth(tx)))
register(operator.truth)(lambda tx, value: constant(value.truth(tx)))
register(operator.contains)(contains)


@register(inspect.signature)
def _signature(tx, function, **kwargs):
    """inspect.signature of a function ember knows: computed from the real function (its identity is guarded)."""
    bound = isinstance(function, UserMethodVariable)
    target = function.function if bound else function
    if not isinstance(target, UserFunctionVariable) or kwargs:
        raise Unsupported(f"inspect.signature of {function}")
    signature = inspect.signature(target.fn)
    if bound:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    parameters = {name: PythonObjectVariable(param) for name, param in signature.parameters.items()}
    return _SignatureVariable(signature, DictVariable(parameters))


class _SignatureVariable(VariableTracker):
    def __init__(self, signature, parameters) -> None:
        super().__init__()
        self.signature = signature
        self.parameters = parameters

    def python_type(self) -> type:
        return inspect.Signature

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "parameters":
            return self.parameters
        raise Unsupported(f"Signature.{name}")


class _ItemGetterVariable(VariableTracker):
    def __init__(self, keys: list, attribute: bool) -> None:
        super().__init__()
        self.keys = keys
        self.attribute = attribute

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        (target,) = args
        if self.attribute:
            values = [tx.load_attr(target, key.as_python_constant()) for key in self.keys]
        else:
            values = [tx.getitem(target, key) for key in self.keys]
        return values[0] if len(values) == 1 else TupleVariable(values)


@register(operator.itemgetter)
def _itemgetter(tx, *keys):
    return _ItemGetterVariable(list(keys), attribute=False)


@register(operator.attrgetter)
def _attrgetter(tx, *names):
    if any("." in name.as_python_constant() for name in names):
        raise Unsupported("dotted operator.attrgetter")
    return _ItemGetterVariable(list(names), attribute=True)


# Handlers for other standard-library callables register into the same table.
from . import collections_types, deques, iterators  # noqa: E402,F401
