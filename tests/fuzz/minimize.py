"""Shrinking a failing program to the fewest statements and smallest inputs that fail the same way.

Greedy delta debugging: each pass proposes smaller variants (fewer outputs; a statement dropped;
an intermediate replaced by a new input holding its value; an input made contiguous, without
grad or special values; a dimension shrunk; small inputs written out as literals), and the first
variant that still fails the same way (same class and check, same exception for crashes) becomes
the new program. Stops when no variant is accepted, or at the evaluation/time budget.

    python3 -m tests.fuzz.minimize --seed 5 --mode default --backend ember
"""
from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import time

import torch

from .harness import Outcome, normalize_message, run_program
from .inputs import InputSpec, literal_of
from .program import Program

LITERAL_LIMIT = 64        # inputs up to this many elements are written out as values
REPLACE_LIMIT = 4096      # larger intermediates are replaced by random inputs of their shape


def _isolated_child(connection, program: Program, backend: str) -> None:
    import warnings
    warnings.simplefilter("ignore")
    connection.send(run_program(program, (backend,))[0])


def evaluate_isolated(program: Program, backend: str, timeout: float = 180.0) -> Outcome:
    """run_program in a fresh process: a candidate that kills its process (a C++ abort, a
    segfault in a kernel) comes back as class worker_died instead of taking the minimizer down."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_isolated_child, args=(child, program, backend), daemon=True)
    process.start()
    child.close()
    try:
        if parent.poll(timeout):
            return parent.recv()
    except EOFError:
        pass
    finally:
        process.join(timeout=1)
        if process.is_alive():
            process.kill()
            process.join()
    died = process.exitcode is not None and process.exitcode != 0
    return Outcome(seed=program.seed, mode=program.mode, backend=backend, cls="worker_died" if died else "timeout",
                   detail=f"exit code {process.exitcode}" if died else f"over {timeout:.0f} s", ops=program.ops())


def same_failure(outcome: Outcome, target: Outcome) -> bool:
    if outcome.cls != target.cls or outcome.check != target.check:
        return False
    if target.cls == "crash":
        return normalize_message(outcome.exception or "") == normalize_message(target.exception or "")
    return True


def _fresh_input_name(program: Program) -> str:
    taken = {spec.name for spec in program.inputs}
    return next(f"z{i}" for i in range(1000) if f"z{i}" not in taken)


def _input_from_value(program: Program, tensor: torch.Tensor) -> InputSpec | None:
    if tensor.numel() > REPLACE_LIMIT:
        return None
    grad = "leaf" if tensor.requires_grad and tensor.dtype.is_floating_point else ""
    spec = InputSpec(name=_fresh_input_name(program), shape=tuple(tensor.shape), dtype=tensor.dtype,
                     seed=program.seed * 100 + 99, grad=grad)
    if tensor.numel() <= LITERAL_LIMIT * 4:
        spec.values, spec.literal = "literal", literal_of(tensor)
    return spec


# ---- passes: each yields smaller candidate programs ------------------------------------------

def fewer_outputs(program: Program):
    if len(program.outputs) > 1:
        for name in program.outputs:
            yield dataclasses.replace(program, outputs=[name])
        for name in program.outputs:
            yield dataclasses.replace(program, outputs=[n for n in program.outputs if n != name])


def without_dead_code(program: Program):
    """One candidate: every statement whose results nothing reads and that writes nothing, dropped."""
    statements = list(program.statements)
    changed = True
    while changed:
        changed = False
        needed = set(program.outputs)
        for statement in statements:
            needed.update(statement.uses)
            needed.update(statement.mutates)
        for position in reversed(range(len(statements))):
            statement = statements[position]
            if statement.defs and not statement.mutates and not any(name in needed for name in statement.defs):
                del statements[position]
                changed = True
                break
    if len(statements) < len(program.statements):
        yield dataclasses.replace(program, statements=statements)


def fewer_statements(program: Program):
    statements = program.statements
    for position in reversed(range(len(statements))):
        statement = statements[position]
        later_uses = {name for later in statements[position + 1:] for name in later.uses + later.mutates}
        if any(name in later_uses for name in statement.defs):
            continue
        outputs = [name for name in program.outputs if name not in statement.defs]
        if not outputs:
            continue
        yield dataclasses.replace(program, statements=statements[:position] + statements[position + 1:],
                                  outputs=outputs)


def replace_intermediates(program: Program):
    inputs = {spec.name for spec in program.inputs}
    for position, statement in enumerate(program.statements):
        for name in statement.uses:
            if name in inputs:
                continue
            namespace = program.run_statements(position)
            value = namespace.get(name)
            if not isinstance(value, torch.Tensor):
                continue
            spec = _input_from_value(program, value)
            if spec is None:
                continue
            renamed = statement.renamed({name: spec.name})
            statements = list(program.statements)
            statements[position] = renamed
            yield dataclasses.replace(program, inputs=program.inputs + [spec], statements=statements)


def _with_input(program: Program, index: int, **changes) -> Program:
    inputs = list(program.inputs)
    inputs[index] = dataclasses.replace(inputs[index], **changes)
    return dataclasses.replace(program, inputs=inputs)


def simpler_inputs(program: Program):
    for index, spec in enumerate(program.inputs):
        if spec.is_index:
            continue
        if spec.layout != "contiguous":
            yield _with_input(program, index, layout="contiguous", layout_arg=())
        if spec.grad:
            yield _with_input(program, index, grad="")
        if spec.grad == "nonleaf":
            yield _with_input(program, index, grad="leaf")
        if spec.special:
            yield _with_input(program, index, special=())
            for position in range(len(spec.special)):
                if len(spec.special) > 1:
                    yield _with_input(program, index, special=spec.special[:position] + spec.special[position + 1:])
        if spec.scale != 1.0:
            yield _with_input(program, index, scale=1.0)


def _shrunk_literal(literal, dim: int, size: int):
    if dim == 0:
        return literal[:size]
    return [_shrunk_literal(row, dim - 1, size) for row in literal]


def smaller_shapes(program: Program):
    for index, spec in enumerate(program.inputs):
        if spec.is_index:
            continue
        for dim, size in enumerate(spec.shape):
            for smaller in sorted({1, 2, size // 2, size - 1}):
                if not 0 < smaller < size:
                    continue
                shape = spec.shape[:dim] + (smaller,) + spec.shape[dim + 1:]
                if spec.values == "literal":
                    if spec.layout != "contiguous":
                        continue
                    yield _with_input(program, index, shape=shape, literal=_shrunk_literal(spec.literal, dim, smaller))
                    continue
                numel = 1
                for s in shape:
                    numel *= s
                special = tuple((p, v) for p, v in spec.special if p < numel)
                yield _with_input(program, index, shape=shape, special=special)


def literal_inputs(program: Program):
    namespace = program.run_statements(0)
    for index, spec in enumerate(program.inputs):
        if spec.is_index or spec.values == "literal":
            continue
        tensor = namespace[spec.name]
        if tensor.numel() <= LITERAL_LIMIT:
            yield _with_input(program, index, values="literal", literal=literal_of(tensor), layout="contiguous",
                              layout_arg=(), special=(), scale=1.0)


PASSES = (without_dead_code, fewer_outputs, fewer_statements, replace_intermediates, simpler_inputs, smaller_shapes, literal_inputs)


def minimize(program: Program, target: Outcome, evaluate=None, *, max_evaluations: int = 120,
             max_seconds: float = 240.0, log=None) -> tuple[Program, Outcome, int]:
    """(smallest failing program found, its outcome, evaluations spent)."""
    if evaluate is None and target.cls in ("worker_died", "timeout"):
        def evaluate(candidate):
            return evaluate_isolated(candidate, target.backend)
    elif evaluate is None:
        def evaluate(candidate):
            return run_program(candidate, (target.backend,))[0]
    started = time.perf_counter()
    seen: dict[str, bool] = {}
    current, current_outcome = program, target
    evaluations = 0
    improved = True
    while improved:
        improved = False
        for make in PASSES:
            for candidate in make(current):
                if evaluations >= max_evaluations or time.perf_counter() - started > max_seconds:
                    return current.tidy(), current_outcome, evaluations
                candidate = candidate.tidy()
                key = candidate.source()
                if key in seen:
                    continue
                evaluations += 1
                try:
                    outcome = evaluate(candidate)
                except Exception:  # noqa: BLE001 - a candidate the harness cannot run is not smaller
                    seen[key] = False
                    continue
                seen[key] = same_failure(outcome, target)
                if seen[key]:
                    current, current_outcome = candidate, outcome
                    improved = True
                    if log:
                        log(f"  [{evaluations}] {make.__name__}: {len(current.statements)} statements")
                    break
            if improved:
                break
    return current.tidy(), current_outcome, evaluations


def main() -> None:
    from .generator import generate
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--backend", default="ember")
    parser.add_argument("--max-evaluations", type=int, default=200)
    arguments = parser.parse_args()
    program = generate(arguments.seed, arguments.mode)
    outcome = evaluate_isolated(program, arguments.backend)
    print(f"seed {arguments.seed}: {outcome.cls} {outcome.check or ''} {outcome.exception or outcome.detail}")
    if outcome.cls not in ("wrong", "crash", "worker_died"):
        print(program.source(main_backend=arguments.backend))
        return
    small, small_outcome, spent = minimize(program, outcome, max_evaluations=arguments.max_evaluations, log=print)
    print(f"minimized in {spent} evaluations: {small_outcome.cls} {small_outcome.check or ''} "
          f"{small_outcome.exception or small_outcome.detail}")
    print(small.source(main_backend=arguments.backend))


if __name__ == "__main__":
    main()
