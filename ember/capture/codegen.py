"""Glue code: the Python function that runs in place of the captured frame.

After a capture stops (at `return` or at a planned graph break) this module turns the
interpreter's state into a readable Python function:

    def __ember_glue(__ember_closure, a, b):
        __ember_out = __ember_graph_0(a, b)         # the compiled graph
        __t0 = __ember_out[1]                        # values the rest of the frame needs
        __t1 = __ember_out[0]
        # graph break at toy.py:5: POP_JUMP_FORWARD_IF_FALSE (data-dependent branch)
        if __t0:
            return __ember_resume_0(__ember_closure, b, __t1)
        return __ember_resume_1(__ember_closure, b, __t1)

Order inside: run the graph; read every value needed into a temporary; replay Python side
effects; run the instruction the graph broke on; call the resume function for the rest.
"""
from __future__ import annotations

import ast
import collections
import dis
import functools
import itertools
import math
import sys
import types
from typing import Any, Callable

import torch

from . import bytecode_analysis as analysis
from .errors import SkipFrame, Unsupported
from .source_text import is_keyword_name, keyword_arguments
from .sources import CLOSURE, GLOBALS, CellContentsSource, ClosureSource
from .variables.base import BINARY_OPERATORS, ConstantVariable, VariableTracker, static_of
from .variables.containers import (
    BaseListVariable,
    DictVariable,
    DictViewVariable,
    ListIteratorVariable,
    ListVariable,
    NamedTupleVariable,
    RangeIteratorVariable,
    SetVariable,
    TupleVariable,
)
from .variables.collections_types import plain_dict_subclass_base
from .variables.glue_values import ObjectTextVariable, TensorNumberVariable, TensorTruthVariable
from .variables.functions import CellVariable, NestedFunctionVariable, PartialDictVariable, PartialVariable, \
    RealCellVariable, UserFunctionVariable, UserMethodVariable
from .variables.model_outputs import ModelOutputVariable
from .variables.number_or_tensor import NumberOrTensorVariable
from .variables.symbolic import SymNodeVariable
from .variables.objects import ExceptionVariable, NewObjectVariable
from .variables.tensor import TensorMethodVariable, TensorVariable
from .translator import MethodCallVariable
from .scalars import replay


class GlueCodegen:
    def __init__(self, graph, refs: dict[str, Any]) -> None:
        self.graph = graph
        self.refs = refs  # shared with the guard function's namespace
        self._ref_names: dict[int, str] = {id(obj): name for name, obj in refs.items()}
        self.lines: list[str] = []
        self.outputs: dict[int, int] = {}  # id(TensorVariable) -> index in graph outputs
        self._memo: dict[int, str] = {}
        self._deferred: list[Callable[[], None]] = []
        self._temps = 0

    def ref(self, obj: Any, hint: str = "ref") -> str:
        key = id(obj)
        if key not in self._ref_names:
            name = f"__ember_{hint}_{len(self.refs)}"
            self.refs[name] = obj
            self._ref_names[key] = name
        return self._ref_names[key]

    def temp(self) -> str:
        self._temps += 1
        return f"__t{self._temps - 1}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    # -- reconstruction ----------------------------------------------------------------------------
    def materialize(self, variable: VariableTracker) -> str:
        """Evaluate `variable` into a temporary now (before side effects run)."""
        expr = self.reconstruct(variable)
        return expr if _is_simple(expr) else self._new(variable, expr)

    def reconstruct(self, variable: VariableTracker) -> str:
        memo = self._memo.get(id(variable))
        return memo if memo is not None else self._reconstruct(variable)

    def _reconstruct(self, v: VariableTracker) -> str:
        if isinstance(v, ConstantVariable):
            return self.literal(v.value)
        if isinstance(v, SymNodeVariable):  # (computed again from the frame's inputs)
            return replay(self, v.node, v.value)
        if isinstance(v, NumberOrTensorVariable):  # min()/max() between a tensor and a number
            return v.glue(self, *(self.reconstruct(part) for part in v.parts))
        if isinstance(v, TensorVariable):
            return v.source.expr() if v.source is not None else f"__ember_out[{self.outputs[id(v)]}]"
        if isinstance(v, NamedTupleVariable):
            items = ", ".join(self.reconstruct(item) for item in v.items)
            class_var = getattr(v, "class_var", None)  # a class made in the frame is made again
            cls = self.reconstruct(class_var) if class_var is not None else self.ref(v.tuple_class, "type")
            return f"{cls}{'._make' if hasattr(v.tuple_class, '_make') else ''}(({items},))"
        if isinstance(v, TupleVariable):
            if v.source is not None and not v.items:
                return "()"
            items = "".join(f"{self.reconstruct(item)}, " for item in v.items)
            return f"({items})"
        if isinstance(v, (ListVariable, DictVariable, SetVariable)) and v.source is not None:
            return v.source.expr()
        if isinstance(v, PartialDictVariable):  # (empty: writes to it are refused)
            return self._new(v, f"{self.reconstruct(v.owner)}.__dict__")
        if isinstance(v, ListVariable):
            return self._new(v, "[" + ", ".join(self.reconstruct(item) for item in v.items) + "]")
        if isinstance(v, DictVariable):
            body = "{" + self.dict_items(v) + "}"
            if v.dict_type is collections.OrderedDict:
                body = f"{self.ref(collections.OrderedDict, 'type')}({body})"
            elif v.dict_type is collections.defaultdict:
                factory = self.reconstruct(v.default_factory) if v.default_factory is not None else "None"
                body = f"{self.ref(collections.defaultdict, 'type')}({factory}, {body})"
            elif v.dict_type is not dict and plain_dict_subclass_base(v.dict_type) is not None:
                body = f"{self.ref(v.dict_type, 'type')}({body})"
            elif v.dict_type is not dict:
                raise Unsupported(f"rebuilding a {v.dict_type.__name__}")
            return self._new(v, body)
        if isinstance(v, SetVariable):
            items = ", ".join(self.reconstruct(item) for item in v.items.values())
            kind = "frozenset" if v.frozen else "set"
            return self._new(v, f"{kind}(({items},))" if items else f"{kind}()")
        if isinstance(v, RangeIteratorVariable):
            return f"iter({self.ref(v.remaining_range, 'range')})"
        if isinstance(v, ListIteratorVariable):
            if v.over is not None:  # still reading the list itself, from where it got to
                if v.index == 0:
                    return self._new(v, f"iter({self.reconstruct(v.over)})")
                return self._new(v, f"{self.ref(itertools.islice)}({self.reconstruct(v.over)}, {v.index}, None)")
            items = "".join(f"{self.reconstruct(item)}, " for item in v.remaining())
            return self._new(v, f"iter(({items}))")
        if isinstance(v, DictViewVariable):
            return f"{self.reconstruct(v.dict_var)}.{v.kind}()"
        if isinstance(v, NewObjectVariable):
            return self._new_object(v)
        if isinstance(v, TensorTruthVariable):
            answer = " or ".join([*(f"bool({self.reconstruct(term)})" for term in v.terms), repr(v.tail)])
            return f"(not ({answer}))" if v.negated else f"({answer})"
        if isinstance(v, TensorNumberVariable):
            return f"{self.ref(v.kind)}({self.reconstruct(v.tensor)})"
        if isinstance(v, ObjectTextVariable):
            return f"{self.ref(v.function)}({self.reconstruct(v.owner)})"
        if isinstance(v, ExceptionVariable):
            args = ", ".join(self.reconstruct(arg) for arg in v.args)
            return f"{self.ref(v.cls, 'type')}({args})"
        if isinstance(v, UserMethodVariable):
            return f"{self.ref(types.MethodType)}({self.reconstruct(v.function)}, {self.reconstruct(v.owner)})"
        if isinstance(v, PartialVariable) and v.source is None:
            args = "".join(f", {self.reconstruct(arg)}" for arg in v.args)
            kwargs = "".join(f", {text}" for text in keyword_arguments(
                (key, self.reconstruct(arg)) for key, arg in v.keywords.items()))
            return self._new(v, f"{self.ref(functools.partial)}({self.reconstruct(v.function)}{args}{kwargs})")
        if isinstance(v, NestedFunctionVariable):
            return self._nested_function(v)
        if isinstance(v, CellVariable):
            return self._new_cell(v)
        if isinstance(v, RealCellVariable):
            return self.cell_expr(v)
        if isinstance(v, ModelOutputVariable) and v.source is None:
            fields = ", ".join(f"{name}={self.reconstruct(value)}" for name, value in v.fields.items()
                               if not (isinstance(value, ConstantVariable) and value.value is None))
            return self._new(v, f"{self.ref(v.cls, 'type')}({fields})")
        if type(v).__name__ == "WithExitVariable":
            manager = v.manager
            if type(manager).__name__ != "GradModeVariable" or manager.prior is None:
                raise Unsupported(f"resuming inside a with-block of {manager}")
            return f"{self.ref(reenter_grad_mode)}({manager.prior}, {manager.target})"
        if isinstance(v, MethodCallVariable):
            return f"getattr({self.reconstruct(v.owner)}, {v.name!r})"
        if isinstance(v, TensorMethodVariable):
            return f"getattr({self.reconstruct(v.tensor)}, {v.name!r})"
        if v.source is not None:
            return v.source.expr()
        rebuild = getattr(v, "rebuild_expr", None)
        if rebuild is not None:
            return self._new(v, rebuild)
        rebuild_from = getattr(v, "reconstruct_expr", None)  # a variable that spells itself
        if rebuild_from is not None:
            return self._new(v, rebuild_from(self))
        real = getattr(v, "real_object", None)
        real = static_of(v) if real is None else real
        if real is None and isinstance(v, UserFunctionVariable):
            real = v.fn
        if real is None and hasattr(v, "function") and not isinstance(v, UserMethodVariable):
            real = v.function
        if real is None and hasattr(v, "cls"):
            real = v.cls
        if real is not None:
            return self.ref(real)
        raise Unsupported(f"cannot rebuild {v} after a graph break")

    def literal(self, value: Any) -> str:
        if value is None or type(value) in (bool, int, str, bytes) or type(value) is float and math.isfinite(value):
            return repr(value)
        return self.ref(value, "const")

    def dict_items(self, dict_var: DictVariable) -> str:
        """`key: value, ...` of a dict's items (keys made in the frame rebuilt, others literals)."""
        return ", ".join(f"{self._key(dict_var, key)}: {self.reconstruct(item)}"
                         for key, item in dict_var.items.items())

    def _key(self, dict_var: DictVariable, key: Any) -> str:
        key_var = dict_var.key_vars.get(key)
        return self.reconstruct(key_var) if key_var is not None else self.literal(key)

    def _new(self, variable: VariableTracker, expr: str) -> str:
        name = self.temp()
        self.emit(f"{name} = {expr}")
        self._memo[id(variable)] = name
        return name

    def _new_object(self, v: NewObjectVariable) -> str:
        name = self._new(v, f"{self.ref(object.__new__)}({self.ref(v.cls, 'type')})")

        def set_attributes() -> None:
            setter = self.ref(object.__setattr__)
            for attr, value in v.attrs.items():
                self.emit(f"{setter}({name}, {attr!r}, {self.reconstruct(value)})")

        self._deferred.append(set_attributes)
        return name

    def _new_cell(self, cell: CellVariable) -> str:
        """A cell made during capture, made again (its contents are set after: they may be a
        function that closes over this very cell)."""
        name = self._new(cell, f"{self.ref(types.CellType)}()")
        if cell.contents is not None:
            self._deferred.append(lambda: self.emit(f"{name}.cell_contents = {self.reconstruct(cell.contents)}"))
        return name

    def cell_expr(self, cell: RealCellVariable) -> str:
        """The cell object itself: read where the frame finds it, as the object differs per call."""
        source = cell.source
        if isinstance(source, ClosureSource):
            return f"{CLOSURE}[{source.index}]"
        if isinstance(source, CellContentsSource):
            return f"{source.base.expr()}.__closure__[{source.index}]"
        return self.ref(cell.cell, "cell")

    def _nested_function(self, v: NestedFunctionVariable) -> str:
        cells = [self.reconstruct(cell) for cell in v.closure_cells]
        closure = f"({''.join(c + ', ' for c in cells)})" if cells else "None"
        defaults = self.reconstruct(v.defaults) if v.defaults is not None else "None"
        function = (f"{self.ref(types.FunctionType)}({self.ref(v.code, 'code')}, {self.ref(v.f_globals, 'globals')}, "
                    f"{v.code.co_name!r}, {defaults}, {closure})")
        name = self._new(v, function)
        if v.kwdefaults is not None:
            self.emit(f"{name}.__kwdefaults__ = {self.reconstruct(v.kwdefaults)}")
        return name

    def flush_deferred(self) -> None:
        while self._deferred:
            pending, self._deferred = self._deferred, []
            for action in pending:
                action()


def reenter_grad_mode(prior: bool, target: bool):
    """The __exit__ of a grad-mode `with` block that a resume function continues inside."""
    torch._C._set_grad_enabled(prior)
    return torch.set_grad_enabled(target).__exit__


def _is_simple(expr: str) -> bool:
    if expr.isidentifier() or expr.startswith("__ember_out["):
        return True
    try:
        ast.literal_eval(expr)
        return True
    except Exception:
        return False


# The values each kind of variable holds, tried in order (the first class that matches).
_HELD_VALUES: list[tuple[type, Callable[[Any], Any]]] = [
    (NumberOrTensorVariable, lambda v: v.parts),
    (TensorVariable, lambda v: ()),
    (PartialDictVariable, lambda v: [v.owner]),
    (BaseListVariable, lambda v: v.known_items()),  # a list never read holds its old items: they are not outputs
    (DictVariable, lambda v: [*v.items.values(), *v.key_vars.values(), v.default_factory]),
    (SetVariable, lambda v: v.items.values()),
    (ListIteratorVariable, lambda v: [v.over, *v.remaining()]),
    (NewObjectVariable, lambda v: v.attrs.values()),
    (ObjectTextVariable, lambda v: [v.owner]),
    (TensorNumberVariable, lambda v: [v.tensor]),
    (TensorTruthVariable, lambda v: v.terms),
    (DictViewVariable, lambda v: [v.dict_var]),
    (UserMethodVariable, lambda v: [v.function, v.owner]),
    (PartialVariable, lambda v: [v.function, *v.args, *v.keywords.values()]),
    (NestedFunctionVariable, lambda v: [v.defaults, v.kwdefaults, *v.closure_cells]),
    (CellVariable, lambda v: [v.contents]),
    (ExceptionVariable, lambda v: v.args),
    (ModelOutputVariable, lambda v: v.fields.values()),
    (MethodCallVariable, lambda v: [v.owner]),
    (TensorMethodVariable, lambda v: [v.tensor]),
]


def _held_values(v: Any) -> Any:
    for cls, held in _HELD_VALUES:
        if isinstance(v, cls):
            return held(v)
    return v.contained_values() if hasattr(v, "contained_values") else ()


def collect_tensors(values: list[VariableTracker]) -> list[TensorVariable]:
    """Tensors without a source reachable from `values`: they must be graph outputs."""
    found: list[TensorVariable] = []
    seen: set[int] = set()

    def visit(v: Any) -> None:
        if v is None or id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, TensorVariable) and v.source is None:
            found.append(v)
        for item in _held_values(v):
            visit(item)

    for value in values:
        visit(value)
    return found


def side_effect_values(effects) -> list[VariableTracker]:
    values = [item for owner, _, value in effects.attr_writes.values() for item in (owner, value)]
    values += effects.global_writes.values()
    values += [value for _, value in effects.cell_writes.values()]
    return values + list(effects.mutated_containers.values())


def emit_side_effects(cg: GlueCodegen, effects, root_globals: dict, prepared: dict[int, str]) -> None:
    for container in effects.mutated_containers.values():
        target = prepared[id(container)]
        if isinstance(container, ListVariable) and container.unread is not None:
            items = "".join(f"{cg.reconstruct(item)}, " for item in container.known_items())
            cg.emit(f"{target}.extend(({items}))")  # only appended to: keeps what it holds then
        elif isinstance(container, ListVariable):
            items = ", ".join(cg.reconstruct(item) for item in container.items)
            cg.emit(f"{target}[:] = [{items}]")
        elif isinstance(container, DictVariable):
            body = cg.dict_items(container)
            cg.emit(f"{target}.clear()")
            cg.emit(f"{target}.update({{{body}}})")
        elif isinstance(container, SetVariable):
            items = ", ".join(cg.reconstruct(item) for item in container.items.values())
            cg.emit(f"{target}.clear()")
            if items:
                cg.emit(f"{target}.update(({items},))")
    for (owner, name, value) in effects.attr_writes.values():
        target = prepared[id(owner)]
        if is_keyword_name(name):
            cg.emit(f"{target}.{name} = {cg.reconstruct(value)}")
        else:
            cg.emit(f"setattr({target}, {name!r}, {cg.reconstruct(value)})")
    for (dict_id, name), value in effects.global_writes.items():
        globals_dict = effects.global_dicts[dict_id]
        target = GLOBALS if globals_dict is root_globals else cg.ref(globals_dict, "globals")
        cg.emit(f"{target}[{name!r}] = {cg.reconstruct(value)}")
    for cell, value in effects.cell_writes.values():
        cg.emit(f"{cg.cell_expr(cell)}.cell_contents = {cg.reconstruct(value)}")
    for owner, name, args, kwargs in effects.calls:
        arguments = [cg.reconstruct(arg) for arg in args] + keyword_arguments(
            (k, cg.reconstruct(v)) for k, v in kwargs.items())
        cg.emit(f"{cg.reconstruct(owner)}.{name}({', '.join(arguments)})")


# -- running the instruction a graph broke on ---------------------------------------------------------
class Branch:
    def __init__(self, condition: str | None, target: int, stack: list[str | None]) -> None:
        self.condition = condition
        self.target = target
        self.stack = stack  # expressions; None stands for NULL


def _next(tx, inst) -> int:
    return tx.insts.next_offset(inst.offset)


def _pushed(cg, tx, inst, rest: list, expr: str, *pushed_first) -> list[Branch]:
    """`expr` evaluated into a temporary, pushed (after `pushed_first`) for the next instruction."""
    result = cg.temp()
    cg.emit(f"{result} = {expr}")
    return [Branch(None, _next(tx, inst), [*rest, *pushed_first, result])]


def _emit_call(cg, tx, inst, stack):
    base = len(stack) - inst.arg - 2
    rest, (first, second), args = stack[:base], stack[base:base + 2], stack[base + 2:]
    function, args = (second, args) if first is None else (first, [second, *args])
    names = tx.kw_names or ()
    positional = args[:len(args) - len(names)]
    keywords = keyword_arguments(zip(names, args[len(args) - len(names):]))
    return _pushed(cg, tx, inst, rest, f"__ember_wrap({function})({', '.join([*positional, *keywords])})")


def _emit_call_ex(cg, tx, inst, stack):
    has_kwargs = inst.arg & 1
    kwargs = stack[-1] if has_kwargs else None
    below, function, args = stack[len(stack) - 3 - has_kwargs:len(stack) - has_kwargs]
    function, prefix = (below, f"{function}, ") if below is not None else (function, "")
    extra = f", **{kwargs}" if kwargs else ""
    return _pushed(cg, tx, inst, stack[:-3 - has_kwargs], f"__ember_wrap({function})({prefix}*{args}{extra})")


def _emit_jump(jump_if: bool | None, none_test: bool | None = None):
    def emitter(cg, tx, inst, stack):
        value, rest = stack[-1], stack[:-1]
        if none_test is not None:
            condition = f"{value} is None" if none_test else f"{value} is not None"
        else:
            condition = value if jump_if else f"not {value}"
        return [Branch(condition, inst.argval, rest), Branch(None, _next(tx, inst), rest)]

    return emitter


def _emit_jump_or_pop(cg, tx, inst, stack):
    value = stack[-1]
    condition = value if inst.opname == "JUMP_IF_TRUE_OR_POP" else f"not {value}"
    return [Branch(condition, inst.argval, stack), Branch(None, _next(tx, inst), stack[:-1])]


def _emit_result(make: Callable[[list[str], Any], str], pops: int, statement: bool = False):
    """An instruction spelled as one line: a statement, or an expression pushed as a temporary."""
    def emitter(cg, tx, inst, stack):
        operands, rest = stack[len(stack) - pops:], stack[:len(stack) - pops]
        if statement:
            cg.emit(make(operands, inst))
            return [Branch(None, _next(tx, inst), rest)]
        return _pushed(cg, tx, inst, rest, make(operands, inst))

    return emitter


def _emit_raise(cg, tx, inst, stack):
    if inst.arg == 1:
        cg.emit(f"raise {stack[-1]}")
    elif inst.arg == 2:
        cg.emit(f"raise {stack[-2]} from {stack[-1]}")
    else:
        raise SkipFrame("bare raise at a graph break")
    return []


def _emit_unpack(cg, tx, inst, stack):
    names = [cg.temp() for _ in range(inst.arg)]
    cg.emit(f"{', '.join(names)}, = {stack[-1]}")
    return [Branch(None, _next(tx, inst), [*stack[:-1], *reversed(names)])]


def _emit_load_attr(cg, tx, inst, stack):
    with_null = inst.opname == "LOAD_METHOD" or (inst.opname == "LOAD_ATTR" and tx.code is not None
                                                  and sys.version_info >= (3, 12) and inst.arg & 1)
    null = [None] if with_null else []
    return _pushed(cg, tx, inst, stack[:-1], f"getattr({stack[-1]}, {inst.argval!r})", *null)


def _binary_expr(operands, inst):
    symbol = dis._nb_ops[inst.arg][1]
    if symbol.endswith("=") and symbol not in ("==", "!="):
        # a += b must keep in-place semantics: operator.iadd returns the new binding.
        function = BINARY_OPERATORS[symbol]
        return f"__ember_operator.{function.__name__}({operands[0]}, {operands[1]})"
    return f"({operands[0]} {symbol} {operands[1]})"


def _format_expr(operands, inst):
    value, spec = operands[0], operands[1] if inst.arg & 0x04 else "''"
    conversion = {0: "", 1: "str", 2: "repr", 3: "ascii"}[inst.arg & 0x03]
    inner = f"{conversion}({value})" if conversion else value
    return f"format({inner}, {spec})"


def _emit_format(cg, tx, inst, stack):
    pops = 2 if inst.arg & 0x04 else 1
    return _emit_result(_format_expr, pops)(cg, tx, inst, stack)


_JUMP_IF_TRUE, _JUMP_IF_FALSE = _emit_jump(True), _emit_jump(False)
EMITTERS: dict[str, Callable] = {
    "CALL": _emit_call,
    "CALL_FUNCTION_EX": _emit_call_ex,
    **dict.fromkeys(("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE"), _JUMP_IF_TRUE),
    **dict.fromkeys(("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE"), _JUMP_IF_FALSE),
    **dict.fromkeys(("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_IF_NONE"), _emit_jump(None, True)),
    **dict.fromkeys(("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_IF_NOT_NONE"), _emit_jump(None, False)),
    **dict.fromkeys(("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"), _emit_jump_or_pop),
    "BINARY_OP": _emit_result(_binary_expr, 2),
    "COMPARE_OP": _emit_result(lambda o, i: f"({o[0]} {i.argval} {o[1]})", 2),
    "CONTAINS_OP": _emit_result(lambda o, i: f"({o[0]} {'not in' if i.arg else 'in'} {o[1]})", 2),
    "IS_OP": _emit_result(lambda o, i: f"({o[0]} {'is not' if i.arg else 'is'} {o[1]})", 2),
    "BINARY_SUBSCR": _emit_result(lambda o, i: f"{o[0]}[{o[1]}]", 2),
    "UNARY_NOT": _emit_result(lambda o, i: f"(not {o[0]})", 1),
    "UNARY_NEGATIVE": _emit_result(lambda o, i: f"(-{o[0]})", 1),
    "UNARY_INVERT": _emit_result(lambda o, i: f"(~{o[0]})", 1),
    "GET_ITER": _emit_result(lambda o, i: f"iter({o[0]})", 1),
    "FORMAT_VALUE": _emit_format,
    "STORE_SUBSCR": _emit_result(lambda o, i: f"{o[1]}[{o[2]}] = {o[0]}", 3, statement=True),
    "DELETE_SUBSCR": _emit_result(lambda o, i: f"del {o[0]}[{o[1]}]", 2, statement=True),
    "STORE_ATTR": _emit_result(lambda o, i: f"setattr({o[1]}, {i.argval!r}, {o[0]})", 2, statement=True),
    "LOAD_ATTR": _emit_load_attr,
    "LOAD_METHOD": _emit_load_attr,
    "RAISE_VARARGS": _emit_raise,
    "UNPACK_SEQUENCE": _emit_unpack,
}


def live_locals(tx, offset: int) -> list[str]:
    live = analysis.live_locals_at(tx.code, offset)
    return [name for name in tx.code.co_varnames
            if name in live and name in tx.locals and name not in tx.code.co_cellvars]


def frame_cells(tx) -> list[VariableTracker]:
    """The contents of the frame's own cells (the glue makes the cells again, see resume.py)."""
    return [cell.contents for cell in tx.cells.values()
            if isinstance(cell, CellVariable) and cell.contents is not None]
