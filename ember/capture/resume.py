"""Resume functions: the rest of a function after a graph break, as a new code object.

A resume function is the original bytecode with a short prologue: it pushes the values
that were on the stack at the break (passed in as arguments `__ember_stack0`, ...; NULL
slots are re-created with PUSH_NULL) and jumps to the instruction where execution goes on.
Its other arguments are the locals that are still live there, under their own names, so
the copied bytecode reads them unchanged.  Resume code objects are cached per (code,
offset, stack layout, live locals), so the same break always resumes into the same code and
its own capture cache.

    def __resume_at_30(b, x):          # prologue: (stack empty) JUMP_FORWARD to offset 30
        ...original bytecode from offset 30 on...
"""
from __future__ import annotations

import inspect
import types

import bytecode as bytecode_lib
from bytecode import Bytecode, Instr, Label

from . import bytecode_analysis as analysis

_CACHE: dict[tuple, types.CodeType] = {}
_ORIGINS: dict[types.CodeType, types.CodeType] = {}  # resume code -> the user's code it continues
_PROLOGUE_OPS = {"COPY_FREE_VARS", "MAKE_CELL", "RESUME"}


def stack_arg_name(index: int) -> str:
    return f"__ember_stack{index}"


def cell_arg_name(name: str) -> str:
    return f"__ember_cell_{name}"


def make_resume_code(code: types.CodeType, offset: int, stack_nulls: tuple[bool, ...],
                     live_locals: tuple[str, ...], live_cells: tuple[str, ...] = ()) -> types.CodeType:
    """`live_cells` are cell variables of `code` whose contents are passed in (as
    `__ember_cell_<name>`) and stored into fresh cells by the prologue."""
    key = (code, offset, stack_nulls, live_locals, live_cells)
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
                prologue.append(item)
                seen_real += 1
                continue
            in_leading = False
            if seen_real == target_position:
                if dis_insts[seen_real].opname != item.name:
                    raise RuntimeError(
                        f"resume target mismatch at offset {offset}: {dis_insts[seen_real].opname} vs {item.name}")
                body.append(label)
            seen_real += 1
        body.append(item)
    if label not in body:
        raise RuntimeError(f"resume target offset {offset} not found in {code.co_name}")

    from bytecode import CellVar

    stack_names = []
    lineno = code.co_firstlineno
    for name in live_cells:
        prologue.append(Instr("LOAD_FAST", cell_arg_name(name), lineno=lineno))
        prologue.append(Instr("STORE_DEREF", CellVar(name), lineno=lineno))
    for index, is_null in enumerate(stack_nulls):
        if is_null:
            prologue.append(Instr("PUSH_NULL", lineno=lineno))
        else:
            name = stack_arg_name(index)
            stack_names.append(name)
            prologue.append(Instr("LOAD_FAST", name, lineno=lineno))
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))

    program.clear()
    program.extend(prologue + body)
    program.argnames = stack_names + list(live_locals) + [cell_arg_name(name) for name in live_cells]
    program.argcount = len(program.argnames)
    program.posonlyargcount = 0
    program.kwonlyargcount = 0
    flags = program.flags
    flags &= ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    program.flags = bytecode_lib.CompilerFlags(flags)
    program.name = f"__resume_at_{offset}"
    program.qualname = f"{code.co_qualname}.__resume_at_{offset}"
    resumed = program.to_code()
    _CACHE[key] = resumed
    _ORIGINS[resumed] = original_code(code)
    return resumed


def original_code(code: types.CodeType) -> types.CodeType:
    """The user's code object that `code` resumes (itself when it is not a resume function)."""
    return _ORIGINS.get(code, code)


def clear_cache() -> None:
    _CACHE.clear()
    _ORIGINS.clear()
