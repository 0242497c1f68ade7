"""Naming the statement where a failing program first goes wrong, with one extra run.

For a wrong value: the program is run again returning every intermediate, in statement order,
and the first output that differs names the culprit statement (returning more values changes
ember's fusion, so this can miss: then there is no culprit). For a crash: the last line of the
program named in the exception or its traceback. The culprit's op refines the failure signature,
so that different bugs with the same check fall into different groups without minimizing.
"""
from __future__ import annotations

import dataclasses
import re

from .harness import Outcome, run_program
from .program import Program

LINE_IN_PROGRAM = re.compile(r'<fuzz [^>]*>", line (\d+)')


def crash_culprit(program: Program, outcome: Outcome) -> str | None:
    lines = LINE_IN_PROGRAM.findall((outcome.exception or "") + "\n" + (outcome.trace or ""))
    if not lines:
        return None
    statement = program.statement_at_line(int(lines[-1]))
    return statement.op if statement else None


def value_culprit(program: Program, outcome: Outcome) -> str | None:
    defined = [name for statement in program.statements for name in statement.defs]
    if not defined or outcome.check is None or "grad" in outcome.check or "exception" in outcome.check:
        return None
    probe = dataclasses.replace(program, outputs=defined + [n for n in program.outputs if n not in defined],
                                single_output=False)
    result = run_program(probe, (outcome.backend,))[0]
    if result.cls != "wrong" or not result.where or not result.where.startswith("output "):
        return None
    match = re.match(r"output (\d+) \((\w+)\)", result.where)
    if not match:
        return None
    name = match.group(2)
    for statement in program.statements:
        if name in statement.defs:
            return statement.op
    return None


def culprit(program: Program, outcome: Outcome) -> str | None:
    if outcome.cls == "crash":
        return crash_culprit(program, outcome)
    if outcome.cls == "wrong" and outcome.check and outcome.check.endswith(("values", "nan_positions", "dtype",
                                                                           "shape", "requires_grad")):
        return value_culprit(program, outcome)
    return None
