"""Python operators (+, <, in, is, unary -, not) on symbolic values.

Tensors on either side make graph nodes with `operator.*` targets; constants compute for real; lists,
tuples and user objects follow Python's protocol (left operand first, then the reflected method).
"""
from __future__ import annotations

import operator
import types
from typing import Any, Callable

from ..errors import Unsupported, UserException
from .base import INPLACE_TO_BINARY, ConstantVariable, VariableTracker, constant, static_of, user_errors
from .builder import wrap_constant_result
from .containers import BaseListVariable, DictVariable, ListVariable, SetVariable, TupleVariable
from .functions import UserFunctionVariable
from .numpy_arrays import ndarray_binary_op, ndarray_unary_op
from .objects import NewObjectVariable, UserObjectVariable, _class_attribute
from .sets import set_operator
from .symbolic import SymNodeVariable
from .tensor import TensorVariable

_REFLECTED = {  # operator -> (its method, the reflected method): `__add__`, `__radd__`
    getattr(operator, name): (f"__{name.rstrip('_')}__", f"__r{name.rstrip('_')}__") for name in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift", "rshift")
}
_REFLECTED.update({operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
                   operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
                   operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__")})
# in-place operator -> its method: `__iadd__`
_INPLACE_NAMES = {inplace: "__i" + _REFLECTED[binary][0][2:] for inplace, binary in INPLACE_TO_BINARY.items()}


def _is_tensor(value: VariableTracker) -> bool:
    return isinstance(value, TensorVariable)


def _is_symbolic(value: VariableTracker) -> bool:
    return isinstance(value, SymNodeVariable)


def _run_constant(function: Callable, *values: Any) -> VariableTracker:
    with user_errors():
        result = function(*values)
    return wrap_constant_result(None, result)


def binary_op(tx, function: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    result = ndarray_binary_op(tx, function, left, right)  # (None: no ndarray operand)
    if result is not None:
        return result
    from .number_or_tensor import number_or_tensor_binary

    result = number_or_tensor_binary(tx, function, left, right)  # (max(t, 0) and the like)
    if result is not None:
        return result
    inplace = function in INPLACE_TO_BINARY
    if _is_symbolic(left) or _is_symbolic(right):
        other = right if _is_symbolic(left) else left
        if _is_symbolic(other) or (other.is_python_constant() and
                                   isinstance(other.as_python_constant(), (int, float, bool))):
            from ..scalars import check_divisor

            check_divisor(tx, function, left, right)  # (by a symbol that is 0: eager's ZeroDivisionError)
            return tx.graph.call(tx, "call_function", INPLACE_TO_BINARY.get(function, function), [left, right], {})
    if _is_tensor(left) or _is_tensor(right):
        if inplace and _is_tensor(left):
            result = tx.graph.call(tx, "call_function", function, [left, right], {})
            left.node, left.example = result.node, result.example
            return left
        if inplace:
            function = INPLACE_TO_BINARY[function]
        if isinstance(left, (BaseListVariable, DictVariable)) or isinstance(right, (BaseListVariable, DictVariable)):
            if not (left.is_python_constant() or right.is_python_constant()):
                raise Unsupported("operator between a tensor and a container")
        return tx.graph.call(tx, "call_function", function, [left, right], {})
    set_result = set_operator(tx, function, left, right)
    if set_result is not None:
        return set_result
    if left.is_python_constant() and right.is_python_constant() and not isinstance(left, ListVariable) \
            and not isinstance(left, (DictVariable, SetVariable)):
        return _run_constant(function, left.as_python_constant(), right.as_python_constant())
    base = INPLACE_TO_BINARY.get(function, function)
    # A constant tuple beside a tuple holding dynamic sizes: `(-1,) + x.shape[1:]`
    if isinstance(right, BaseListVariable):
        left = _as_sequence(left)
    if isinstance(left, BaseListVariable):
        right = _as_sequence(right)
    if inplace and isinstance(left, ListVariable) and base is operator.add:
        left.call_method(tx, "extend", [right], {})
        return left
    if isinstance(left, BaseListVariable) and isinstance(right, BaseListVariable) and base is operator.add:
        if type(left).container_type is not type(right).container_type:
            raise UserException(TypeError(
                f'can only concatenate {left.container_type.__name__} (not "{right.container_type.__name__}") '
                f"to {left.container_type.__name__}"))
        return type(left)([*left.items, *right.items]) if type(left) in (ListVariable, TupleVariable) \
            else TupleVariable([*left.items, *right.items])
    if isinstance(left, BaseListVariable) and base is operator.mul and right.is_python_constant():
        count = right.as_python_constant()
        if isinstance(count, int):
            items = left.items * count
            if inplace and isinstance(left, ListVariable):
                left.mutated(tx)
                left.items[:] = items
                return left
            return type(left)(items) if type(left) in (ListVariable, TupleVariable) else TupleVariable(items)
    if isinstance(right, BaseListVariable) and base is operator.mul and left.is_python_constant():
        return binary_op(tx, base, right, left)
    if isinstance(left, DictVariable) and isinstance(right, DictVariable) and base is operator.or_:
        if inplace:
            left.call_method(tx, "update", [right], {})
            return left
        return DictVariable({**left.items, **right.items}, key_vars={**left.key_vars, **right.key_vars})
    if function in (operator.eq, operator.ne):
        from .builtins import values_equal

        try:
            equal = values_equal(tx, left, right)
        except Unsupported:
            equal = None
        if equal is not None and not isinstance(left, (UserObjectVariable, NewObjectVariable)):
            return _equality(function, equal)
    if any(isinstance(side, (UserObjectVariable, NewObjectVariable)) for side in (left, right)):
        return _dunder_op(tx, function, left, right)
    if function in (operator.eq, operator.ne) and _unequal_kinds(left, right):
        # Different kinds of objects (a module and None, say) are unequal by identity.
        return _equality(function, False)
    raise Unsupported(f"operator {getattr(function, '__name__', function)} on {left} and {right}")


def _as_sequence(value: VariableTracker) -> VariableTracker:
    """A constant tuple or list as a TupleVariable or ListVariable of constants; else `value`."""
    if not isinstance(value, ConstantVariable) or type(value.value) not in (tuple, list):
        return value
    return (TupleVariable if type(value.value) is tuple else ListVariable)([constant(v) for v in value.value])


def _equality(function: Callable, same: bool) -> VariableTracker:
    """The answer of `==` (or `!=`) given whether the operands are equal."""
    return constant(same if function is operator.eq else not same)


def _unequal_kinds(left: VariableTracker, right: VariableTracker) -> bool:
    """Whether `left == right` is decided by identity: both types keep object's __eq__, or one does
    and the other is a builtin constant (whose __eq__ gives NotImplemented for foreign types)."""
    def identity_eq(value: VariableTracker) -> bool:
        try:
            return value.python_type().__eq__ is object.__eq__
        except Unsupported:
            return False

    if identity_eq(left):
        return identity_eq(right) or isinstance(right, ConstantVariable)
    return identity_eq(right) and isinstance(left, ConstantVariable)


def _dunder_op(tx, function: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    names = []
    if function in _INPLACE_NAMES:
        names.append((left, _INPLACE_NAMES[function], right))
        function = INPLACE_TO_BINARY[function]
    forward, reflected = _REFLECTED.get(function, (None, None))
    if forward is None:
        raise Unsupported(f"operator {function} on objects")
    names.append((left, forward, right))
    names.append((right, reflected, left))
    for owner, name, other in names:
        if not isinstance(owner, (UserObjectVariable, NewObjectVariable)):
            continue
        found, raw = _class_attribute(owner.python_type(), name)
        if not found or raw is None:
            continue
        if not isinstance(raw, types.FunctionType):
            if function in (operator.eq, operator.ne) and raw in (object.__eq__, object.__ne__):
                return _equality(function, left is right)
            raise Unsupported(f"{name} of {owner.python_type().__name__} is not a Python function")
        result = owner.call_method(tx, name, [other], {})
        if isinstance(result, ConstantVariable) and result.value is NotImplemented:
            continue
        return result
    if function in (operator.eq, operator.ne):
        return _equality(function, left is right)
    raise UserException(TypeError(f"unsupported operand type(s) for {function.__name__}"))


compare_op = binary_op  # (comparisons follow the same protocol as the other binary operators)


def is_op(tx, left: VariableTracker, right: VariableTracker) -> bool:
    if left is right:
        return True
    if isinstance(left, ConstantVariable) and isinstance(right, ConstantVariable):
        return left.value is right.value
    same_function = _same_function(tx, left, right)
    if same_function is not None:
        return same_function
    left_real = getattr(left, "real_object", None) or _static(left)
    right_real = getattr(right, "real_object", None) or _static(right)
    if left_real is not None and right_real is not None:
        return left_real is right_real
    if _is_tensor(left) and _is_tensor(right):
        return left.node is right.node and left.example is right.example
    return False


def _same_function(tx, left: VariableTracker, right: VariableTracker) -> bool | None:
    """`f is g` for two functions when one is a closure guarded on its code only: the answer
    is guarded too (the same code makes a new closure on each call of its outer function)."""
    if not (isinstance(left, UserFunctionVariable) and isinstance(right, UserFunctionVariable)):
        return None
    if left.identity_guarded and right.identity_guarded:
        return None
    same = left.fn is right.fn
    guards = tx.graph.guards

    def expr(variable) -> str:
        return variable.source.expr() if variable.source is not None else guards.ref(variable.fn)

    relation = "is" if same else "is not"
    guards.add(f"{expr(left)} {relation} {expr(right)}", f"{expr(left)} {relation} {expr(right)}")
    return same


def _static(variable: VariableTracker) -> Any:
    return variable.value if isinstance(variable, ConstantVariable) else static_of(variable)


def unary_op(tx, function: Callable, value: VariableTracker) -> VariableTracker:
    result = ndarray_unary_op(tx, function, value)  # (None: not an ndarray)
    if result is not None:
        return result
    if _is_tensor(value) or _is_symbolic(value):
        return tx.graph.call(tx, "call_function", function, [value], {})
    if value.is_python_constant():
        return _run_constant(function, value.as_python_constant())
    names = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__"}
    if isinstance(value, (UserObjectVariable, NewObjectVariable)) and function in names:
        return value.call_method(tx, names[function], [], {})
    raise Unsupported(f"unary {function.__name__} on {value}")
