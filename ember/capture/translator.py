"""The symbolic interpreter: runs CPython bytecode on variables instead of values.

`Translator` holds one frame's state (value stack, locals, cells) and runs the opcode handler
of each instruction (opcodes.py).  `RootTranslator` runs the compiled frame until it returns or
reaches a planned break, then hands its state to the glue generator (codegen.py);
`InliningTranslator` runs a called user function inside the same graph.

An instruction that cannot be captured raises `Unsupported`; at the root that becomes a
`RestartCapture` naming the offset, and the capture runs again with a break planned there
(nothing half-done is ever undone).
"""
from __future__ import annotations

import builtins
import dataclasses
import dis
import inspect
import linecache
import os
import types
from typing import Any

from . import bytecode_analysis as analysis
from .errors import RestartCapture, SkipFrame, Unsupported, UserException
from .graph import OutputGraph
from .sources import GLOBALS, ClosureSource, GlobalSource, ItemSource, LocalSource, Source
from .variables.base import ConstantVariable, VariableTracker, constant, static_of
from .variables.builder import wrap, wrap_constant_result, wrap_static
from .variables.containers import BaseListVariable, DictVariable, ListIteratorVariable
from .variables.functions import CellVariable, RealCellVariable, bind_arguments, real_cell
from .variables.model_outputs import ModelOutputVariable
from .variables.modules import NNModuleVariable
from .variables.objects import PythonObjectVariable, SuperVariable
from .variables.tensor import TensorVariable


class RefSource(Source):
    """A Python object embedded by reference (e.g. another module's globals dict)."""

    _expr, _name, _user = "{ref_name}", "{label}", "{label}"

    def __init__(self, graph: OutputGraph, obj: Any, label: str) -> None:
        self.ref_name = graph.guards.ref(obj)
        self.label = label

    def __eq__(self, other) -> bool:
        return isinstance(other, RefSource) and other.ref_name == self.ref_name

    def __hash__(self) -> int:
        return hash(self.ref_name)


class CaughtExceptionVariable(VariableTracker):
    def __init__(self, value: BaseException) -> None:
        super().__init__()
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def static_value(self) -> Any:
        return self.value

    def var_getattr(self, tx, name):
        return wrap_static(tx, getattr(self.value, name))


class MethodCallVariable(VariableTracker):
    """`obj.name` loaded to be called: the call goes to obj.call_method(name, ...)."""

    def __init__(self, owner: VariableTracker, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.owner.call_method(tx, self.name, args, kwargs)


class Translator:
    def __init__(self, code: types.CodeType, f_globals: dict, graph: OutputGraph,
                 local_vars: dict[str, VariableTracker], cells: dict[str, VariableTracker],
                 parent: "Translator | None", config) -> None:
        self.code = code
        self.f_globals = f_globals
        self.graph = graph
        self.config = config
        self.locals = local_vars
        self.cells = cells
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.insts = analysis.instructions(code)
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.current: dis.Instruction | None = None
        self.kw_names: tuple | None = None
        self.exc_stack: list[VariableTracker] = []
        self.return_value: VariableTracker | None = None
        self.generated: list[VariableTracker] | None = None  # for generator materialization
        self.done = False
        self.instructions_run = 0

    # -- stack helpers ---------------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, count: int) -> list[VariableTracker]:
        if count == 0:
            return []
        items = self.stack[-count:]
        del self.stack[-count:]
        return items

    def jump(self, offset: int) -> None:
        self.ip = self.insts.index_of[offset]

    # -- provenance --------------------------------------------------------------------------------
    def lineno(self) -> int | None:
        inst = self.current
        if inst is None:
            return self.code.co_firstlineno
        if inst.positions is not None and inst.positions.lineno is not None:
            return inst.positions.lineno
        return inst.starts_line or self.code.co_firstlineno

    def stack_trace(self) -> str:
        frames = []
        tx: Translator | None = self
        while tx is not None:
            lineno = tx.lineno() or tx.code.co_firstlineno
            line = linecache.getline(tx.code.co_filename, lineno).strip()
            frames.append(f'  File "{tx.code.co_filename}", line {lineno}, in {tx.code.co_name}\n    {line}')
            tx = tx.parent
        return "\n".join(reversed(frames))

    def location(self) -> str:
        return f"{self.code.co_filename}:{self.lineno()}"

    def _line_text(self) -> str:
        """`file:line (`code`)` of the instruction being run (for messages)."""
        lineno = self.lineno() or self.code.co_firstlineno
        return f"{self.code.co_filename}:{lineno} (`{linecache.getline(self.code.co_filename, lineno).strip()}`)"

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        from .opcodes import HANDLERS
        from . import opcodes_flow  # noqa: F401  (registers the control-flow handlers)

        while not self.done:
            if self.ip >= len(self.insts):
                raise Unsupported("ran off the end of the bytecode")
            inst = self.insts[self.ip]
            if self.before_instruction(inst):
                return
            self.current = inst
            self.ip += 1
            root = self.root()
            root.instructions_run += 1
            if root.instructions_run > self.config.max_instructions:
                raise SkipFrame(f"more than {self.config.max_instructions} instructions")
            handler = HANDLERS.get(inst.opname)
            if handler is None:
                raise Unsupported(f"opcode {inst.opname} is not supported")
            try:
                handler(self, inst)
            except UserException as error:
                if not self.handle_exception(error, inst):
                    raise
            except Unsupported as error:
                if getattr(error, "where", None) is None:
                    # the chain of inlined frames, innermost first
                    chain, tx = [], self
                    while tx.parent is not None:
                        chain.append(tx.location())
                        tx = tx.parent
                    error.where = " <- ".join(chain) or None
                raise
            if self.graph.specialization_watch is not None:
                self.graph.specialization_watch.after(self._line_text)

    def before_instruction(self, inst: dis.Instruction) -> bool:
        return False

    def root(self) -> "Translator":
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    def handle_exception(self, error: UserException, inst: dis.Instruction) -> bool:
        """Route a user exception to this frame's handler, as CPython's exception table does."""
        entry = analysis.handler_for(self.code, inst.offset)
        if entry is None:
            return False
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(constant(inst.offset))
        self.push(CaughtExceptionVariable(error.value))
        self.jump(entry.target)
        return True

    # -- operations used by handlers and variables ------------------------------------------------
    def call(self, function: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        return function.call_function(self, args, kwargs)

    def load_attr(self, owner: VariableTracker, name: str) -> VariableTracker:
        try:
            return owner.var_getattr(self, name)
        except Unsupported:
            if callable(getattr(owner.python_type(), name, None)) and not isinstance(owner, ConstantVariable):
                return MethodCallVariable(owner, name)
            raise

    def store_attr(self, owner: VariableTracker, name: str, value: VariableTracker) -> None:
        store = getattr(owner, "store_attr", None)
        if store is None:
            raise Unsupported(f"setting attribute {name!r} on {owner}")
        store(self, name, value)

    def getitem(self, container: VariableTracker, index: VariableTracker) -> VariableTracker:
        if isinstance(container, TensorVariable):
            return container.call_method(self, "__getitem__", [index], {})
        if isinstance(container, (BaseListVariable, DictVariable, NNModuleVariable, ModelOutputVariable)):
            return container.getitem(self, index)
        generic = _generic_alias(container, index)
        if generic is not None:
            return generic
        if isinstance(container, ConstantVariable):
            if index.is_python_constant():
                try:
                    value = container.value[index.as_python_constant()]
                except Exception as error:
                    raise UserException(error) from None
                return wrap_constant_result(self, value)
            raise Unsupported(f"indexing a constant with {index}")
        return container.call_method(self, "__getitem__", [index], {})

    def inline_call(self, code: types.CodeType, f_globals: dict, args: list, kwargs: dict,
                    defaults: list, kwdefaults: dict, cells: list, name: str, function) -> VariableTracker:
        if self.depth + 1 > self.config.inline_depth_limit:
            raise Unsupported(f"call depth over {self.config.inline_depth_limit} (recursion?)")
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
            raise Unsupported("async code")
        if is_internal(code) and code not in TRACEABLE_EMBER_CODE:
            raise Unsupported("call into ember itself")
        bound = bind_arguments(code, name, args, kwargs, defaults, kwdefaults)
        cell_map: dict[str, VariableTracker] = dict(zip(code.co_freevars, cells))
        cell_map.update((var, CellVariable(bound.pop(var, None), var)) for var in code.co_cellvars)
        child = InliningTranslator(code, f_globals, self.graph, bound, cell_map, self, self.config)
        child.function = function
        if code.co_flags & inspect.CO_GENERATOR:
            child.generated = []
        child.run()
        if child.generated is None:
            return child.return_value
        iterator = ListIteratorVariable(child.generated)
        iterator.python_type = lambda: types.GeneratorType  # type: ignore[method-assign]
        iterator.return_value = child.return_value  # what `yield from` evaluates to
        return iterator

    def zero_arg_super(self) -> VariableTracker:
        cell = self.cells.get("__class__")
        if cell is None or not self.code.co_argcount:
            raise Unsupported("super() outside a method")
        cls_var = self.read_cell(cell)
        first = self.code.co_varnames[0]
        owner = self.locals.get(first)
        if owner is None and self.cells.get(first) is not None:
            owner = self.read_cell(self.cells[first])
        if owner is None:
            raise Unsupported("super() with no first argument")
        return SuperVariable(cls_var.as_python_constant(), owner)

    # -- cells and globals ---------------------------------------------------------------------------
    def read_cell(self, cell: VariableTracker) -> VariableTracker:
        if isinstance(cell, CellVariable):
            if cell.contents is None:
                raise UserException(NameError(f"free variable '{cell.name}' referenced before assignment"))
            return cell.contents
        if isinstance(cell, RealCellVariable):
            pending = self.graph.side_effects.pending_cell(cell)
            if pending is not None:
                return pending
            try:
                value = cell.cell.cell_contents
            except ValueError:
                raise UserException(NameError(f"free variable '{cell.name}' referenced before assignment")) from None
            return wrap(self, value, cell.source) if cell.source is not None else wrap_static(self, value)
        raise Unsupported(f"cell {cell}")

    def write_cell(self, cell: VariableTracker, value: VariableTracker) -> None:
        if isinstance(cell, CellVariable):
            cell.contents = value
        elif isinstance(cell, RealCellVariable):
            self.graph.side_effects.store_cell(cell, value)
        else:
            raise Unsupported(f"cell {cell}")

    def global_source(self, name: str) -> Source:
        if self.f_globals is self.root().f_globals:
            return GlobalSource(name)
        return ItemSource(RefSource(self.graph, self.f_globals, "globals"), name)

    def load_global(self, name: str) -> VariableTracker:
        pending = self.graph.side_effects.pending_global((id(self.f_globals), name))
        if pending is not None:
            return pending
        if name in self.f_globals:
            return wrap(self, self.f_globals[name], self.global_source(name))
        builtins_dict = self.f_globals.get("__builtins__", builtins.__dict__)
        if isinstance(builtins_dict, types.ModuleType):
            builtins_dict = builtins_dict.__dict__
        if name in builtins_dict:
            globals_source = _Expr(GLOBALS) if self.f_globals is self.root().f_globals else \
                RefSource(self.graph, self.f_globals, "globals")
            self.graph.guards.key_absent(globals_source, name)
            return wrap_static(self, builtins_dict[name])
        raise UserException(NameError(f"name '{name}' is not defined"))

    def store_global(self, name: str, value: VariableTracker) -> None:
        self.graph.side_effects.store_global((id(self.f_globals), name), value)
        self.graph.side_effects.global_dicts[id(self.f_globals)] = self.f_globals


# Builtin containers whose subscription makes a typing alias (`list[Tensor]` in a cast).
_GENERIC_BUILTINS = (list, tuple, dict, set, frozenset, type)


def _generic_alias(container: VariableTracker, index: VariableTracker) -> VariableTracker | None:
    """`list[Tensor]`: a types.GenericAlias, made for real (it only records its arguments)."""
    cls = static_of(container)
    if not any(cls is builtin for builtin in _GENERIC_BUILTINS) or not index.is_python_constant():
        return None
    return PythonObjectVariable(cls[index.as_python_constant()])


@dataclasses.dataclass(frozen=True)
class _Expr(Source):
    text: str
    _expr = _name = "{text}"


# ember functions that compiled code calls as if they were the user's, and capture inlines
# (compiled autograd's call_hook: the hook it calls is the user's)
TRACEABLE_EMBER_CODE: set = set()


_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the ember package


def is_internal(code: types.CodeType) -> bool:
    return code.co_filename.startswith(_EMBER_DIR)


class InliningTranslator(Translator):
    function = None


class RootTranslator(Translator):
    """The frame being compiled.  Stops at a planned break or at its return."""

    def __init__(self, code, f_globals, graph, local_vars, cells, config, break_plan: dict[int, str]) -> None:
        super().__init__(code, f_globals, graph, local_vars, cells, None, config)
        self.break_plan = break_plan
        self.stop: tuple[str, dis.Instruction | None, str | None] | None = None

    def before_instruction(self, inst: dis.Instruction) -> bool:
        if inst.offset in self.break_plan:
            self.current = inst
            self.stop = ("break", inst, self.break_plan[inst.offset])
            return True
        return False

    def run_root(self) -> None:
        try:
            self.run()
        except Unsupported as error:
            where = getattr(error, "where", None)
            self.break_at(self.current, f"{error.reason} (in {where})" if where and where != self.location()
                          else error.reason)
        except UserException as error:
            # User code raised and nothing in the frame caught it: let Python raise it for real.
            self.break_at(self.current, f"user code raised {type(error.value).__name__}: {error.value}",
                          user_raises=True)
        if self.stop is None and self.done:
            self.stop = ("return", None, None)

    def break_at(self, inst: dis.Instruction, reason: str, user_raises: bool = False) -> None:
        """`user_raises`: the frame raises the user's own exception here (not ember's limit:
        even under fullgraph=True it propagates as eager's, see convert_frame.py)."""
        code = self.code
        if analysis.in_loop(code, inst.offset):
            error = SkipFrame(f"graph break inside a loop: {reason}")
        elif self.exc_stack:
            error = SkipFrame(f"graph break inside an except/finally handler: {reason}")
        else:
            # Inside try and with blocks is fine: a resume function keeps the original exception
            # table, and the glue re-enters grad-mode context managers (codegen.py).
            error = RestartCapture(inst.offset, reason, self.lineno(), code.co_filename)
        error.user_raises = user_raises
        raise error


def make_root(code: types.CodeType, f_globals: dict, closure, args: tuple, graph: OutputGraph,
              config, break_plan: dict[int, str]) -> RootTranslator:
    local_vars: dict[str, VariableTracker] = {}
    cells: dict[str, VariableTracker] = {name: real_cell(graph, closure[index], ClosureSource(index, name), name)
                                         for index, name in enumerate(code.co_freevars)}
    cells.update((name, CellVariable(None, name)) for name in code.co_cellvars)
    root = RootTranslator(code, f_globals, graph, local_vars, cells, config, break_plan)
    # Arguments are wrapped in order so that graph inputs follow the signature.
    for name, value in zip(argument_names(code), args):
        local_vars[name] = wrap(root, value, LocalSource(name))
    return root


def argument_names(code: types.CodeType) -> list[str]:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])
