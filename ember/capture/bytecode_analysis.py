"""Facts about a code object that the interpreter and the resume machinery need: its decoded
instructions (`Instructions`, no CACHE entries), the locals still read from an offset on
(`live_locals_at`: what a resume function receives), loop bodies (`in_loop`) and the exception
table (`handler_for`: try/with blocks)."""
from __future__ import annotations

import dis
import functools
import sys
import types

JUMP_OPS = set(dis.hasjrel) | set(dis.hasjabs)
UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP"}
TERMINAL = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_CLOSURE", "LOAD_DEREF"}
WRITES = {"STORE_FAST", "DELETE_FAST", "STORE_DEREF", "DELETE_DEREF"}


class Instructions:
    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.list = [inst for inst in dis.get_instructions(code) if inst.opname != "CACHE"]
        self.index_of = {inst.offset: index for index, inst in enumerate(self.list)}

    def __len__(self) -> int:
        return len(self.list)

    def __getitem__(self, index: int) -> dis.Instruction:
        return self.list[index]

    def next_offset(self, offset: int) -> int:
        return self.list[self.index_of[offset] + 1].offset


@functools.lru_cache(maxsize=512)
def instructions(code: types.CodeType) -> Instructions:
    return Instructions(code)


def handler_for(code: types.CodeType, offset: int):
    """The innermost exception-table entry covering `offset`, or None."""
    for entry in _entries(code):
        if entry.start <= offset < entry.end:
            return entry
    return None


@functools.lru_cache(maxsize=512)
def _entries(code: types.CodeType) -> tuple:
    return tuple(dis.Bytecode(code).exception_entries)


def _successors(insts: Instructions, index: int) -> list[int]:
    inst = insts[index]
    result = []
    name = inst.opname
    if inst.opcode in JUMP_OPS and isinstance(inst.argval, int):
        target = inst.argval
        if name == "FOR_ITER" and sys.version_info >= (3, 12):
            target_index = insts.index_of[target]
            if insts[target_index].opname == "END_FOR":
                target_index += 1
            result.append(target_index)
        else:
            result.append(insts.index_of[target])
    if name not in UNCONDITIONAL and name not in TERMINAL and index + 1 < len(insts):
        result.append(index + 1)
    entry = handler_for(insts.code, inst.offset)
    if entry is not None:
        result.append(insts.index_of[entry.target])
    return result


@functools.lru_cache(maxsize=512)
def _liveness(code: types.CodeType) -> list[frozenset]:
    insts = instructions(code)
    count = len(insts)
    live_in: list[frozenset] = [frozenset()] * count
    successors = [_successors(insts, i) for i in range(count)]
    changed = True
    while changed:
        changed = False
        for index in range(count - 1, -1, -1):
            inst = insts[index]
            live_out = frozenset().union(*(live_in[s] for s in successors[index])) if successors[index] else frozenset()
            current = live_out
            if isinstance(inst.argval, str) and inst.opname in READS:
                current = live_out | {inst.argval}
            elif isinstance(inst.argval, str) and inst.opname in WRITES:
                current = live_out - {inst.argval}
            if current != live_in[index]:
                live_in[index] = current
                changed = True
    return live_in


def live_locals_at(code: types.CodeType, offset: int) -> frozenset:
    return _liveness(code)[instructions(code).index_of[offset]]


@functools.lru_cache(maxsize=512)
def _loop_ranges(code: types.CodeType) -> tuple:
    insts = instructions(code)
    ranges = []
    for inst in insts.list:
        if inst.opname.startswith("JUMP_BACKWARD") or (
            inst.opcode in JUMP_OPS and isinstance(inst.argval, int) and inst.argval <= inst.offset
        ):
            ranges.append((inst.argval, inst.offset))
    return tuple(ranges)


def in_loop(code: types.CodeType, offset: int) -> bool:
    return any(start <= offset <= end for start, end in _loop_ranges(code))


def in_block(code: types.CodeType, offset: int) -> bool:
    return handler_for(code, offset) is not None
