"""Opcode handlers for CPython 3.11 and 3.12: the table, and the handlers of stack, name,
attribute, operator and build opcodes (control flow: opcodes_flow.py).

`@handler("NAME", ..., min_version=(3, 11), max_version=(3, 12))` registers a function for the
opcodes it names on the Python versions it covers (`one_liners({...})`: one-expression handlers,
by name).  The registrar checks that each name is a real opcode of the running Python and refuses
duplicates.  An opcode with no handler is a graph break naming it, never a crash.
"""
from __future__ import annotations

import dis
import operator
import sys
from typing import Callable

from .errors import Unsupported, UserException
from .translator import MethodCallVariable
from .variables.base import BINARY_OPERATORS, COMPARE_OPERATORS, NULL, ConstantVariable, NullVariable, constant
from .variables.builtins import contains, to_text
from .variables.containers import BaseListVariable, DictVariable, DictViewVariable, ListVariable, SetVariable, \
    TupleVariable
from .variables.modules import NNModuleVariable
from .variables.objects import SuperVariable
from .variables.operators import binary_op, compare_op, is_op, unary_op
from .variables.symbolic import SymNodeVariable, SymSliceVariable
from .variables.tensor import TensorVariable

HANDLERS: dict[str, Callable] = {}
VERSION = sys.version_info[:2]


# Opcodes of one supported version that the other lacks: registering them elsewhere is a no-op.
ONLY_311 = {"PRECALL", "LOAD_METHOD", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "LIST_TO_TUPLE",
            "UNARY_POSITIVE", "LOAD_CLASSDEREF", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE",
            "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE",
            "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"}
ONLY_312 = {"RETURN_CONST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "END_FOR", "POP_JUMP_IF_TRUE",
            "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE", "BINARY_SLICE", "STORE_SLICE",
            "LOAD_SUPER_ATTR", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "END_SEND", "CLEANUP_THROW"}


def handler(*names: str, min_version=(3, 11), max_version=(3, 12)):
    def register(function: Callable) -> Callable:
        if not (min_version <= VERSION <= max_version):
            return function
        for name in names:
            if name not in dis.opmap:
                if name in (ONLY_311 if VERSION >= (3, 12) else ONLY_312):
                    continue
                raise RuntimeError(f"{name} is not an opcode of Python {VERSION[0]}.{VERSION[1]}")
            if name in HANDLERS:
                raise RuntimeError(f"duplicate handler for {name}")
            HANDLERS[name] = function
        return function

    return register


def one_liners(table: dict[str, Callable], **versions) -> None:
    """Register handlers that are one expression each (`lambda tx, inst: ...`), by opcode name."""
    for name, function in table.items():
        handler(name, **versions)(function)


# -- no-ops ---------------------------------------------------------------------------------------
@handler("NOP", "RESUME", "PRECALL", "COPY_FREE_VARS", "EXTENDED_ARG")
def _nop(tx, inst):
    pass


@handler("MAKE_CELL")
def _make_cell(tx, inst):
    name = inst.argval
    cell = tx.cells.get(name)
    if cell is not None and name in tx.locals and hasattr(cell, "contents"):
        cell.contents = tx.locals.pop(name)


# -- stack manipulation, locals, cells, globals, constants ---------------------------------------------
one_liners({
    "POP_TOP": lambda tx, inst: tx.pop(),
    "PUSH_NULL": lambda tx, inst: tx.push(NULL),
    "COPY": lambda tx, inst: tx.push(tx.stack[-inst.arg]),
    "LOAD_CONST": lambda tx, inst: tx.push(
        constant(inst.argval) if isinstance(inst.argval, type(dis)) else ConstantVariable(inst.argval)),
    "DELETE_FAST": lambda tx, inst: tx.locals.pop(inst.argval, None),
    "LOAD_DEREF": lambda tx, inst: tx.push(tx.read_cell(tx.cells[inst.argval])),
    "STORE_DEREF": lambda tx, inst: tx.write_cell(tx.cells[inst.argval], tx.pop()),
    "LOAD_CLOSURE": lambda tx, inst: tx.push(tx.cells[inst.argval]),
    "STORE_GLOBAL": lambda tx, inst: tx.store_global(inst.argval, tx.pop()),
})
one_liners({"LOAD_FAST_AND_CLEAR": lambda tx, inst: tx.push(tx.locals.pop(inst.argval, NULL))}, min_version=(3, 12))


@handler("SWAP")
def _swap(tx, inst):
    stack = tx.stack
    stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def _load_fast(tx, inst):
    name = inst.argval
    if name not in tx.locals:
        raise UserException(UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value"))
    tx.push(tx.locals[name])


@handler("STORE_FAST")
def _store_fast(tx, inst):
    value = tx.pop()
    if isinstance(value, NullVariable):  # 3.12 comprehensions restore an unbound local this way
        tx.locals.pop(inst.argval, None)
    else:
        tx.locals[inst.argval] = value


@handler("LOAD_GLOBAL")
def _load_global(tx, inst):
    if inst.arg & 1:
        tx.push(NULL)
    tx.push(tx.load_global(inst.argval))


# -- attributes -----------------------------------------------------------------------------------------
@handler("LOAD_ATTR", "LOAD_METHOD")
def _load_attr(tx, inst):
    owner = tx.pop()
    if inst.opname == "LOAD_METHOD" or VERSION >= (3, 12) and inst.arg & 1:
        tx.push(NULL)
        tx.push(_method(tx, owner, inst.argval))
    else:
        tx.push(tx.load_attr(owner, inst.argval))


_MODULE_METHODS = {"parameters", "buffers", "children", "named_parameters", "named_buffers", "named_children",
                   "modules", "named_modules", "keys", "values", "items", "__len__", "__getitem__", "__iter__"}


def _method(tx, owner, name):
    if isinstance(owner, (TensorVariable, BaseListVariable, DictVariable, SetVariable, DictViewVariable)) or (
            isinstance(owner, NNModuleVariable) and name in _MODULE_METHODS):
        return MethodCallVariable(owner, name)
    return tx.load_attr(owner, name)


@handler("LOAD_SUPER_ATTR", min_version=(3, 12))
def _load_super_attr(tx, inst):
    _, cls, owner = tx.popn(3)  # (the global `super` first)
    super_var = SuperVariable(cls.as_python_constant(), owner)
    if inst.arg & 1:
        tx.push(NULL)
    tx.push(super_var.var_getattr(tx, inst.argval))


@handler("STORE_ATTR")
def _store_attr(tx, inst):
    value, owner = tx.popn(2)
    tx.store_attr(owner, inst.argval, value)


@handler("DELETE_ATTR")
def _delete_attr(tx, inst):
    raise Unsupported("del of an attribute")


# -- operators ---------------------------------------------------------------------------------------------
_UNARY = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert}
one_liners({
    "BINARY_OP": lambda tx, inst: tx.push(binary_op(tx, BINARY_OPERATORS[dis._nb_ops[inst.arg][1]], *tx.popn(2))),
    "COMPARE_OP": lambda tx, inst: tx.push(compare_op(tx, COMPARE_OPERATORS[inst.argval], *tx.popn(2))),
    "IS_OP": lambda tx, inst: tx.push(constant(is_op(tx, *tx.popn(2)) != bool(inst.arg))),
    **dict.fromkeys(_UNARY, lambda tx, inst: tx.push(unary_op(tx, _UNARY[inst.opname], tx.pop()))),
    "UNARY_NOT": lambda tx, inst: tx.push(constant(not tx.pop().truth(tx))),
    "BINARY_SUBSCR": lambda tx, inst: tx.push(tx.getitem(*tx.popn(2))),
})


@handler("CONTAINS_OP")
def _contains_op(tx, inst):
    item, container = tx.popn(2)
    result = contains(tx, container, item)
    if hasattr(result, "negate"):  # (an answer the glue reads from tensors: glue_values.py)
        tx.push(result.negate() if inst.arg else result)
        return
    tx.push(constant(result.as_python_constant() != bool(inst.arg)))


@handler("BINARY_SLICE", min_version=(3, 12))
def _binary_slice(tx, inst):
    container, start, stop = tx.popn(3)
    tx.push(tx.getitem(container, _slice(start, stop)))


@handler("STORE_SLICE", min_version=(3, 12))
def _store_slice(tx, inst):
    value, container, start, stop = tx.popn(4)
    _setitem(tx, container, _slice(start, stop), value)


def _slice(start, stop, step=None):
    parts = [start, stop, constant(None) if step is None else step]
    if any(isinstance(part, SymNodeVariable) for part in parts) and all(
            isinstance(part, SymNodeVariable) or part.is_python_constant() for part in parts):
        return SymSliceVariable(parts)
    if not all(part.is_python_constant() for part in parts):
        raise Unsupported("slice with non-constant bounds")
    return constant(slice(*[part.as_python_constant() for part in parts]))


def _setitem(tx, container, index, value):
    if isinstance(container, (ListVariable, DictVariable)):
        container.setitem(tx, index, value)
    else:  # (tensors and others)
        container.call_method(tx, "__setitem__", [index, value], {})


@handler("STORE_SUBSCR")
def _store_subscr(tx, inst):
    value, container, index = tx.popn(3)
    _setitem(tx, container, index, value)


@handler("DELETE_SUBSCR")
def _delete_subscr(tx, inst):
    container, index = tx.popn(2)
    if not isinstance(container, (ListVariable, DictVariable)):
        raise Unsupported(f"del on {container}")
    container.call_method(tx, "__delitem__", [index], {})


# -- building containers ----------------------------------------------------------------------------------
_SEQUENCES = {"BUILD_TUPLE": TupleVariable, "BUILD_LIST": ListVariable, "BUILD_SET": SetVariable}
one_liners({
    **dict.fromkeys(_SEQUENCES, lambda tx, inst: tx.push(_SEQUENCES[inst.opname](tx.popn(inst.arg)))),
    "BUILD_CONST_KEY_MAP": lambda tx, inst: tx.push(DictVariable(dict(zip(tx.pop().as_python_constant(),
                                                                          tx.popn(inst.arg))))),
    "BUILD_SLICE": lambda tx, inst: tx.push(_slice(*tx.popn(inst.arg))),
    "BUILD_STRING": lambda tx, inst: tx.push(constant("".join(part.as_python_constant()
                                                               for part in tx.popn(inst.arg)))),
})
one_liners({"LIST_TO_TUPLE": lambda tx, inst: tx.push(TupleVariable(tx.pop().items))}, max_version=(3, 11))


@handler("BUILD_MAP")
def _build_map(tx, inst):
    items = tx.popn(2 * inst.arg)
    result = DictVariable({})
    for key, value in zip(items[::2], items[1::2]):
        result.setitem(tx, key, value)
    tx.push(result)


@handler("FORMAT_VALUE", max_version=(3, 12))
def _format_value(tx, inst):
    flags = inst.arg
    spec = tx.pop().as_python_constant() if flags & 0x04 else ""
    value = tx.pop()
    conversion = flags & 0x03
    if not value.is_python_constant():
        if conversion == 2:
            value = to_text(tx, value, "__repr__")
        elif conversion == 1 or (conversion == 0 and not spec
                                 and getattr(value.python_type(), "__format__", None) is object.__format__):
            value = to_text(tx, value, "__str__")
        else:
            raise Unsupported(f"formatting {value} in an f-string")
        conversion = 0
    real = value.as_python_constant()
    if conversion:
        real = (str, repr, ascii)[conversion - 1](real)
    try:
        tx.push(constant(format(real, spec)))
    except Exception as error:
        raise UserException(error) from None


# Comprehension opcodes: the value popped goes into the container `inst.arg` deep (counted after the pop).
_COLLECT = {
    "LIST_APPEND": lambda tx, target, value: target.items.append(value),
    "LIST_EXTEND": lambda tx, target, value: target.items.extend(value.get_iter(tx).unpack_sequence(tx)),
    "SET_ADD": lambda tx, target, value: target.call_method(tx, "add", [value], {}),
    "SET_UPDATE": lambda tx, target, value: target.call_method(tx, "update", [value], {}),
}


@handler(*_COLLECT)
def _collect(tx, inst):
    value = tx.pop()
    _COLLECT[inst.opname](tx, tx.stack[-inst.arg], value)


@handler("MAP_ADD")
def _map_add(tx, inst):
    key, value = tx.popn(2)
    tx.stack[-inst.arg].setitem(tx, key, value)


@handler("DICT_UPDATE", "DICT_MERGE")
def _dict_update(tx, inst):
    other = tx.pop()
    target = tx.stack[-inst.arg]
    if inst.opname == "DICT_MERGE" and isinstance(other, DictVariable):
        for key in other.items:
            if key in target.items:
                raise UserException(TypeError(f"got multiple values for keyword argument '{key}'"))
    target.call_method(tx, "update", [other], {})


@handler("CALL_INTRINSIC_1", min_version=(3, 12))
def _call_intrinsic_1(tx, inst):
    name = inst.argrepr
    if name == "INTRINSIC_LIST_TO_TUPLE":
        tx.push(TupleVariable(tx.pop().items))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        tx.push(unary_op(tx, operator.pos, tx.pop()))
    elif name != "INTRINSIC_STOPITERATION_ERROR":
        raise Unsupported(f"intrinsic {name}")


@handler("UNPACK_SEQUENCE")
def _unpack_sequence(tx, inst):
    value = tx.pop()
    items = value.unpack_sequence(tx) if isinstance(getattr(value, "items", None), list) \
        else value.get_iter(tx).unpack_sequence(tx)
    if len(items) > inst.arg:
        raise UserException(ValueError(f"too many values to unpack (expected {inst.arg})"))
    if len(items) < inst.arg:
        raise UserException(ValueError(f"not enough values to unpack (expected {inst.arg}, got {len(items)})"))
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def _unpack_ex(tx, inst):
    before = inst.arg & 0xFF
    after = inst.arg >> 8
    items = tx.pop().get_iter(tx).unpack_sequence(tx)
    if len(items) < before + after:
        raise UserException(ValueError(
            f"not enough values to unpack (expected at least {before + after}, got {len(items)})"))
    middle = ListVariable(items[before:len(items) - after])
    for item in reversed(items[len(items) - after:]):
        tx.push(item)
    tx.push(middle)
    for item in reversed(items[:before]):
        tx.push(item)
