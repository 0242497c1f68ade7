"""Opcode handlers for control flow: jumps, iteration, calls, function objects, with blocks,
exceptions, imports and generators (registered into opcodes.HANDLERS as the data opcodes are)."""
from __future__ import annotations

from .errors import Unsupported, UserException
from .opcodes import VERSION, handler, one_liners
from .variables.base import NullVariable, VariableTracker, constant, is_none, static_of
from .variables.builder import wrap_static
from .variables.containers import DictVariable
from .variables.functions import NestedFunctionVariable
from .variables.objects import ClassVariable, ExceptionVariable, NewObjectVariable, UserObjectVariable


# -- control flow -------------------------------------------------------------------------------------------
def _return(tx, value) -> None:
    tx.return_value = value
    tx.done = True


one_liners({
    **dict.fromkeys(("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"),
                    lambda tx, inst: tx.jump(inst.argval)),
    "GET_ITER": lambda tx, inst: tx.push(tx.pop().get_iter(tx)),
    "GET_YIELD_FROM_ITER": lambda tx, inst: tx.push(tx.pop().get_iter(tx)),
    "RETURN_VALUE": lambda tx, inst: _return(tx, tx.pop()),
    "KW_NAMES": lambda tx, inst: setattr(tx, "kw_names", tx.code.co_consts[inst.arg]),
    "LOAD_ASSERTION_ERROR": lambda tx, inst: tx.push(ClassVariable(AssertionError)),
    "IMPORT_FROM": lambda tx, inst: tx.push(tx.load_attr(tx.stack[-1], inst.argval)),
})
one_liners({
    "RETURN_CONST": lambda tx, inst: _return(tx, constant(inst.argval)),
    "END_FOR": lambda tx, inst: tx.popn(2),
    "END_SEND": lambda tx, inst: tx.stack.pop(-2),
}, min_version=(3, 12))


def _conditional(truth_when_jump: bool | None, none_test: bool | None = None):
    def run(tx, inst):
        value = tx.pop()
        if none_test is not None:
            jump = is_none(value) == none_test
        else:
            jump = value.truth(tx) == truth_when_jump
        if jump:
            tx.jump(inst.argval)

    return run


# (3.11 names its jumps by direction, 3.12 does not: each skips the other's names)
handler("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE")(_conditional(True))
handler("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE")(_conditional(False))
handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_IF_NONE")(_conditional(None, True))
handler("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "POP_JUMP_IF_NOT_NONE")(
    _conditional(None, False))


@handler("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", max_version=(3, 11))
def _jump_or_pop(tx, inst):
    if tx.stack[-1].truth(tx) == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
        tx.jump(inst.argval)
    else:
        tx.pop()


@handler("FOR_ITER")
def _for_iter(tx, inst):
    iterator = tx.stack[-1]
    step = getattr(iterator, "next_value", None)
    if step is None:
        raise Unsupported(f"for-loop over {iterator}")
    value = step(tx)
    if value is not None:
        tx.push(value)
        return
    tx.pop()
    target = tx.insts.index_of[inst.argval]
    if VERSION >= (3, 12) and tx.insts[target].opname == "END_FOR":
        target += 1
    tx.ip = target


# -- calls ----------------------------------------------------------------------------------------------------
@handler("CALL")
def _call(tx, inst):
    args = tx.popn(inst.arg)
    first, second = tx.popn(2)
    if isinstance(first, NullVariable):
        function = second
    else:
        function, args = first, [second, *args]
    names = tx.kw_names or ()
    kwargs = dict(zip(names, args[len(args) - len(names):]))
    args = args[:len(args) - len(names)]
    tx.kw_names = None
    tx.push(tx.call(function, args, kwargs))


@handler("CALL_FUNCTION_EX")
def _call_function_ex(tx, inst):
    kwargs_var = tx.pop() if inst.arg & 1 else None
    args_var = tx.pop()
    function = tx.pop()
    below = tx.pop()
    # 3.11 method form: [callable, self] below the arguments tuple.
    function, args_prefix = (function, []) if isinstance(below, NullVariable) else (below, [function])
    args = [*args_prefix, *args_var.get_iter(tx).unpack_sequence(tx)]
    kwargs = {}
    if kwargs_var is not None:
        if not isinstance(kwargs_var, DictVariable):
            raise Unsupported("** of a non-dict")
        kwargs = dict(kwargs_var.items)
    tx.push(tx.call(function, args, kwargs))


@handler("MAKE_FUNCTION")
def _make_function(tx, inst):
    flags = inst.arg
    code = tx.pop().as_python_constant()
    closure = tx.pop() if flags & 0x08 else None
    annotations = tx.pop() if flags & 0x04 else None
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    cells = list(closure.items) if closure is not None else None
    tx.push(NestedFunctionVariable(code, tx.f_globals, code.co_qualname, defaults, kwdefaults, cells, annotations))


# -- with blocks and exceptions --------------------------------------------------------------------------
class WithExitVariable(VariableTracker):
    def __init__(self, manager) -> None:
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        return self.manager.exit(tx)


@handler("BEFORE_WITH")
def _before_with(tx, inst):
    manager = tx.pop()
    enter = getattr(manager, "enter", None)
    if enter is None:
        raise Unsupported(f"with-statement on {manager}")
    tx.push(WithExitVariable(manager))
    tx.push(enter(tx))


@handler("PUSH_EXC_INFO")
def _push_exc_info(tx, inst):
    value = tx.pop()
    tx.push(tx.exc_stack[-1] if tx.exc_stack else constant(None))
    tx.push(value)
    tx.exc_stack.append(value)


@handler("POP_EXCEPT")
def _pop_except(tx, inst):
    tx.pop()
    if tx.exc_stack:
        tx.exc_stack.pop()


@handler("CHECK_EXC_MATCH")
def _check_exc_match(tx, inst):
    expected = tx.pop()
    value = tx.stack[-1]
    classes = static_of(expected)
    if classes is None:
        classes = expected.as_python_constant()
    real = getattr(value, "value", None)
    if not isinstance(real, BaseException):
        raise Unsupported("except clause on an unknown exception")
    tx.push(constant(isinstance(real, classes)))


@handler("RERAISE")
def _reraise(tx, inst):
    value = tx.pop()
    if inst.arg:
        tx.pop()  # lasti
    real = getattr(value, "value", None)
    if isinstance(real, BaseException):
        raise UserException(real)
    raise Unsupported("re-raise of an unknown exception")


@handler("RAISE_VARARGS")
def _raise_varargs(tx, inst):
    if inst.arg == 0:
        if tx.exc_stack and isinstance(getattr(tx.exc_stack[-1], "value", None), BaseException):
            raise UserException(tx.exc_stack[-1].value)
        raise Unsupported("bare raise")
    cause = tx.pop() if inst.arg == 2 else None
    value = tx.pop()
    if isinstance(value, ClassVariable) and issubclass(value.cls, BaseException):
        value = ExceptionVariable(value.cls, [])
    if isinstance(value, ExceptionVariable):
        if not all(arg.is_python_constant() for arg in value.args):
            raise Unsupported("raise with non-constant arguments")
        real = value.real()
    elif isinstance(getattr(value, "value", None), BaseException):
        real = value.value
    else:
        raise Unsupported(f"raise of {value}")
    if cause is not None:
        cause_value = getattr(cause, "value", None)
        real.__cause__ = cause_value if isinstance(cause_value, BaseException) else None
    raise UserException(real)


@handler("WITH_EXCEPT_START")
def _with_except_start(tx, inst):
    value = tx.stack[-1]
    exit_function = tx.stack[-4]
    if isinstance(getattr(exit_function, "manager", None), (UserObjectVariable, NewObjectVariable)):
        # A user __exit__ sees the exception and may swallow it: not modelled.
        raise Unsupported("an exception leaving the with-block of a user context manager")
    result = exit_function.call_function(tx, [], {})
    real = getattr(value, "value", None)
    if not isinstance(real, BaseException):
        raise Unsupported("with-block exit on an unknown exception")
    tx.push(result)


@handler("IMPORT_NAME")
def _import_name(tx, inst):
    fromlist = tx.pop().as_python_constant()
    level = tx.pop().as_python_constant()
    if level != 0:
        raise Unsupported("relative import inside a compiled function")
    module = __import__(inst.argval, tx.f_globals, None, fromlist, level)
    tx.push(wrap_static(tx, module))


# -- generators (materialized when inlined) ---------------------------------------------------------------
@handler("RETURN_GENERATOR")
def _return_generator(tx, inst):
    if tx.generated is None:
        raise Unsupported("generator frame at the root")
    tx.push(constant(None))


@handler("YIELD_VALUE")
def _yield_value(tx, inst):
    if tx.generated is None:
        raise Unsupported("yield outside a materialized generator")
    tx.generated.append(tx.pop())
    tx.push(constant(None))


@handler("SEND")
def _send(tx, inst):
    tx.pop()  # the value sent in (always None when materializing)
    iterator = tx.stack[-1]
    value = iterator.next_value(tx)
    if value is not None:
        tx.push(value)
        return
    result = getattr(iterator, "return_value", None) or constant(None)
    if VERSION < (3, 12):
        tx.pop()
    tx.push(result)
    tx.jump(inst.argval)


@handler("CLEANUP_THROW", min_version=(3, 12))
def _cleanup_throw(tx, inst):
    raise Unsupported("generator throw")
