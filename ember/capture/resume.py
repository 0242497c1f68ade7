"""Resume functions: the rest of a function after a graph break, as a new code object.

A resume function is the original bytecode with a prologue that pushes the values on the stack
at the break (arguments `__ember_stack0`, ...; NULL slots by PUSH_NULL) and jumps to where
execution goes on.  Its other arguments are the locals still live there, under their own names.
Resume code is cached per (code, offset, stack layout, live locals), so a break always resumes
into the same code and capture cache.

    def __resume_at_30(b, x):          # prologue: (stack empty) JUMP_FORWARD to offset 30
        ...original bytecode from offset 30 on...
"""
from __future__ import annotations

import inspect
import types

import bytecode as bytecode_lib
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from . import bytecode_analysis as analysis

_CACHE: dict[tuple, types.CodeType] = {}
_ORIGINS: dict[types.CodeType, types.CodeType] = {}  # resume code -> the user's code it continues
_PROLOGUE_OPS = {"COPY_FREE_VARS", "MAKE_CELL", "RESUME"}


def stack_arg_name(index: int) -> str:
    return f"__ember_stack{index}"


def make_resume_code(code: types.CodeType, offset: int, stack_nulls: tuple[bool, ...],
                     live_locals: tuple[str, ...]) -> types.CodeType:
    """The rest of `code` from `offset`, taking the stack values and the live locals.  The cells of
    `code` become free variables after its own: the glue passes the very cells that functions made
    before the break hold (`closure = code's closure + its cells`, in `co_cellvars` order)."""
    key = (code, offset, stack_nulls, live_locals)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached

    program = Bytecode.from_code(code)
    dis_insts = [inst for inst in analysis.instructions(code).list if inst.opname != "EXTENDED_ARG"]
    target_position = next(i for i, inst in enumerate(dis_insts) if inst.offset == offset)

    label = Label()
    body: list = []
    prologue: list = []
    seen_real = 0
    in_leading = True
    for item in program:
        if isinstance(item, Instr):
            if in_leading and item.name in _PROLOGUE_OPS:
                if item.name == "RESUME":
                    prologue.append(item)  # COPY_FREE_VARS and MAKE_CELL are made again below
                seen_real += 1
                continue
            in_leading = False
            if seen_real == target_position:
                if dis_insts[seen_real].opname != item.name:
                    raise RuntimeError(
                        f"resume target mismatch at offset {offset}: {dis_insts[seen_real].opname} vs {item.name}")
                body.append(label)
            seen_real += 1
            if isinstance(item.arg, CellVar):
                item.arg = FreeVar(item.arg.name)
        body.append(item)
    if label not in body:
        raise RuntimeError(f"resume target offset {offset} not found in {code.co_name}")

    freevars = list(code.co_freevars) + list(code.co_cellvars)
    if freevars:
        prologue.insert(0, Instr("COPY_FREE_VARS", len(freevars), lineno=code.co_firstlineno))
    lineno = code.co_firstlineno
    stack_names = [stack_arg_name(index) for index, is_null in enumerate(stack_nulls) if not is_null]
    prologue += [Instr("PUSH_NULL", lineno=lineno) if is_null else
                 Instr("LOAD_FAST", stack_arg_name(index), lineno=lineno) for index, is_null in enumerate(stack_nulls)]
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))

    program.clear()
    program.extend(prologue + body)
    program.cellvars = []
    program.freevars = freevars
    program.argnames = stack_names + list(live_locals)
    program.argcount = len(program.argnames)
    program.posonlyargcount = program.kwonlyargcount = 0
    program.flags = bytecode_lib.CompilerFlags(program.flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))
    program.name = f"__resume_at_{offset}"
    program.qualname = f"{code.co_qualname}.__resume_at_{offset}"
    resumed = program.to_code()
    if resumed.co_freevars != tuple(freevars):
        raise RuntimeError(f"resume code of {code.co_name} orders its free variables {resumed.co_freevars}, "
                           f"not {tuple(freevars)}")
    _CACHE[key] = resumed
    _ORIGINS[resumed] = original_code(code)
    return resumed


def original_code(code: types.CodeType) -> types.CodeType:
    """The user's code object that `code` resumes (itself when it is not a resume function)."""
    return _ORIGINS.get(code, code)


def clear_cache() -> None:
    _CACHE.clear()
    _ORIGINS.clear()
