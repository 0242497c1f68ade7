"""One capture: from a code object and the arguments of a call to a guarded cache entry.

    capture_frame(context, code, globals, closure, args)
        -> symbolic execution (translator.py), restarted at each newly found graph break
        -> graph finished and compiled by the backend
        -> glue function (codegen.py) and guard function (guards.py)

Returns a `CacheEntry`, or `None` when the frame should simply run eagerly (with the
reason logged).
"""
from __future__ import annotations

import dataclasses
import logging
import operator
import time
import types
from typing import Any, Callable

import torch
import torch.fx

from .. import config as ember_config
from .. import logs
from . import bytecode_analysis as analysis
from .codegen import EMITTERS, Branch, GlueCodegen, collect_tensors, emit_side_effects, frame_cells, live_locals, \
    side_effect_values
from .errors import BackendCompilerFailed, CaptureError, RestartCapture, SkipFrame, Unsupported
from .graph import OutputGraph
from .graph_reuse import compile_or_reuse
from .resume import make_resume_code, original_code
from .scalars import demote_scalars, note_written_scalars
from .shapes import DynamicShapeError, ShapePlan, ShapeState, StaticShapesNeeded, shape_guards
from .source_text import comment, compile_as_user_code
from .sources import CLOSURE, GLOBALS
from .translator import argument_names, make_root
from .variables.base import NullVariable
from .variables.containers import BaseListVariable

log_breaks = logs.get("graph_breaks")
log_guards = logs.get("guards")
log_graph = logs.get("graph_code")
log_bytecode = logs.get("bytecode")
log_fallbacks = logs.get("fallbacks")
log_perf = logs.get("perf")
log_recompiles = logs.get("recompiles")


EAGER_THIS_CALL = object()  # capture_frame's answer: run this call eagerly, capture the next again


@dataclasses.dataclass
class GraphBreak:
    reason: str
    filename: str
    lineno: int | None
    code_name: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.code_name}: {self.reason}"


@dataclasses.dataclass
class CacheEntry:
    guard: Callable[..., bool]
    run: Callable[..., Any]
    guard_source: str
    guard_set: Any


def capture_frame(context, code: types.CodeType, f_globals: dict, closure, args: tuple,
                  shapes: ShapeState | None = None) -> CacheEntry | None:
    """`shapes`: the code's record of sizes seen changing between calls (made dynamic), and
    whether its captures need static shapes."""
    started = time.perf_counter()
    shapes = shapes or ShapeState()
    plan = ShapePlan(getattr(context, "dynamic", None), shapes.automatic, static=shapes.static, state=shapes)
    params = argument_names(code)
    break_plan: dict[int, str] = {}
    breaks: list[GraphBreak] = []
    grad_at_entry = torch.is_grad_enabled()
    frame_config = context.config
    for _attempt in range(64):
        graph = OutputGraph(frame_config)
        graph.shape_plan = plan
        graph.guards.global_state()
        try:
            try:
                root = make_root(code, f_globals, closure, args, graph, frame_config, break_plan)
                root.run_root()
                entry = _finish(context, root, params, f_globals)
            finally:
                torch._C._set_grad_enabled(grad_at_entry)
                for manager in reversed(graph.entered_contexts):
                    manager.__exit__(None, None, None)
                _check_no_real_writes(graph)
        except StaticShapesNeeded as need:
            if demote_scalars(graph, shapes, need, code.co_name):
                continue
            if plan.static and graph.captures_data_dependent:
                # An .item() value or nonzero's size leaves the graph (returned, or live across a
                # break): this frame breaks at them instead, as without the two capture flags.
                log_fallbacks.info("%s: %s; capturing .item() and data-dependent shapes as breaks",
                                   code.co_name, need.reason)
                frame_config = dataclasses.replace(frame_config, capture_scalar_outputs=False,
                                                   capture_dynamic_output_shape_ops=False)
                continue
            if plan.static:
                raise RuntimeError(f"symbolic sizes in a static capture: {need.reason}") from None
            log_recompiles.debug("%s: capturing with static shapes: %s", code.co_name, need.reason)
            plan.static = shapes.static = True  # (later captures of this code too)
            continue
        except RestartCapture as restart:
            record = GraphBreak(restart.reason, restart.filename, restart.lineno, code.co_name)
            if context.fullgraph and not getattr(restart, "user_raises", False):
                # (the frame raising the user's exception is no break: the graph before it, then
                # the glue runs the raising instruction and the exception propagates as eager's)
                raise CaptureError(
                    f"graph break with fullgraph=True at {restart.filename}:{restart.lineno}: {restart.reason}"
                ) from None
            if restart.offset in break_plan:
                raise SkipFrame(f"no progress at offset {restart.offset}: {restart.reason}")
            break_plan[restart.offset] = restart.reason
            breaks.append(record)
            log_breaks.debug("graph break: %s", record)
            continue
        except Unsupported as error:
            # Raised while finishing (e.g. a value the glue cannot rebuild): run eagerly.
            skip_reason = f"cannot finish the capture: {error.reason}"
            if context.fullgraph:
                raise CaptureError(f"cannot capture {code.co_name}: {skip_reason}") from None
            return _eager(context, code, skip_reason)
        except (CaptureError, BackendCompilerFailed, DynamicShapeError):
            raise
        except SkipFrame as skip:
            if getattr(skip, "user_raises", False):
                # The frame raises the user's exception where no break can resume (in a loop, a
                # handler): this call runs eagerly and raises it; later calls capture again.
                return _eager(context, code, str(skip), EAGER_THIS_CALL, " this call")
            if context.fullgraph:
                raise CaptureError(f"cannot capture {code.co_name} ({code.co_filename}:{code.co_firstlineno}) "
                                   f"with fullgraph=True: {skip}") from None
            return _eager(context, code, str(skip))
        except Exception as error:  # an ember bug: never let it change the user's result
            if context.fullgraph or ember_config._config.raise_capture_errors:
                raise
            reason = f"internal error {type(error).__name__}: {error}"
            log_fallbacks.warning("ember could not capture %s (%s:%s), running it eagerly: %s",
                                  code.co_name, code.co_filename, code.co_firstlineno, reason)
            context.record_skip(code, reason)
            return None
        for record in breaks:
            context.record_break(record)
        log_perf.debug("captured %s in %.1f ms", code.co_name, 1000 * (time.perf_counter() - started))
        return entry
    raise SkipFrame("too many graph breaks")


def _eager(context, code: types.CodeType, reason: str, answer: Any = None, when: str = "") -> Any:
    log_fallbacks.debug("running %s eagerly%s: %s", code.co_name, when, reason)
    context.record_skip(code, reason)
    return answer


def _finish(context, root, params: list[str], f_globals: dict) -> CacheEntry:
    graph = root.graph
    kind, inst, reason = root.stop
    refs = graph.guards.refs
    cg = GlueCodegen(graph, refs)

    # Values the rest of the frame needs, before anything runs.
    if kind == "return":
        needed = [root.return_value]
        branch_offsets: list[int] = []
    else:
        if analysis.in_block(root.code, inst.offset):
            # Inside a try/with block the breaking instruction must run under the frame's own
            # exception handlers: the rest of the frame resumes *at* it and runs eagerly.
            branch_offsets = [inst.offset]
        elif inst.opname not in EMITTERS:
            raise SkipFrame(f"graph break on {inst.opname}, which the glue cannot run: {reason}")
        else:
            branch_offsets = _successor_offsets(root, inst)
        live = sorted({name for offset in branch_offsets for name in live_locals(root, offset)},
                      key=root.code.co_varnames.index)
        needed = [root.locals[name] for name in live] + [v for v in root.stack if not isinstance(v, NullVariable)]
        needed += frame_cells(root)
    effects = graph.side_effects
    output_tensors = collect_tensors(needed + side_effect_values(effects))
    cg.outputs.update((id(tensor), index) for index, tensor in enumerate(output_tensors))

    compiled = _compile_graph(context, graph, output_tensors, root)

    lines_head: list[str] = []
    if compiled is not None:
        refs_name = cg.ref(compiled, "graph")
        inputs = ", ".join(graph_input.source.expr() for graph_input in graph.inputs)
        lines_head.append(f"__ember_out = {refs_name}({inputs})")

    # Read values into temporaries (materialize), then side effects, then the instruction.
    owners = [owner for owner, _, _ in effects.attr_writes.values()] + list(effects.mutated_containers.values())
    prepared = {id(owner): cg.materialize(owner) for owner in owners}
    # Every value written back is read now, before any write can change what a source sees.
    for container in effects.mutated_containers.values():
        items = container.known_items() if isinstance(container, BaseListVariable) else container.items.values()
        for item in [*items, *getattr(container, "key_vars", {}).values()]:
            cg.materialize(item)
    written = [value for _, _, value in effects.attr_writes.values()] + list(effects.global_writes.values())
    for value in written + [value for _, value in effects.cell_writes.values()]:
        cg.materialize(value)

    if kind == "return":
        result = cg.materialize(root.return_value)
        cg.flush_deferred()
        emit_side_effects(cg, effects, f_globals, prepared)
        cg.emit(f"return {result}")
    else:
        # The frame's cells, made anew and shared by the resume function and the nested functions
        # made before the break (see resume.py).
        cell_exprs = [cg.reconstruct(root.cells[name]) for name in root.code.co_cellvars]
        stack_exprs = [None if isinstance(v, NullVariable) else cg.materialize(v) for v in root.stack]
        local_exprs = {name: cg.materialize(root.locals[name])
                       for offset in branch_offsets for name in live_locals(root, offset)}
        cg.flush_deferred()
        emit_side_effects(cg, effects, f_globals, prepared)
        location = f"{root.code.co_filename}:{root.lineno()}"
        cg.emit("# " + comment(f"graph break at {location}: {inst.opname} ({reason})"))
        if branch_offsets == [inst.offset]:
            cg.emit("# inside a try/with block: the rest runs eagerly, starting at this instruction")
            branches = [Branch(None, inst.offset, _wrap_callee(root, inst, stack_exprs))]
        else:
            branches = EMITTERS[inst.opname](cg, root, inst, stack_exprs)
        for branch in branches:
            call = _resume_call(context, cg, root, branch, local_exprs, cell_exprs)
            if branch.condition is not None:
                cg.emit(f"if {branch.condition}:")
                cg.emit(f"    return {call}")
            else:
                cg.emit(f"return {call}")

    body = lines_head + cg.lines
    signature = ", ".join([CLOSURE, *params])
    source = f"def __ember_glue({signature}):\n" + "\n".join(f"    {line}" for line in body) + "\n"
    # Logged before anything is compiled, so that a glue or guard that fails to compile is seen.
    if log_bytecode.isEnabledFor(logging.DEBUG):
        log_bytecode.debug("glue for %s:\n%s", root.code.co_name, source)
    if graph.specialization_watch is not None:
        graph.specialization_watch.check()
    if graph.symbolic_inputs:
        fakes, exprs = zip(*graph.symbolic_inputs)
        for expr in shape_guards(graph.fake_mode.shape_env, list(fakes), list(exprs)):
            graph.guards.add(expr, f"dynamic sizes: {expr}")
    note_written_scalars(graph)
    guard_source = graph.guards.source_code(params)
    if log_guards.isEnabledFor(logging.DEBUG):
        log_guards.debug("guards for %s:\n%s", root.code.co_name, guard_source)
    namespace = {**refs, GLOBALS: f_globals, "__ember_wrap": context.wrap_callable, "__ember_operator": operator,
                 "__builtins__": __builtins__}
    glue = compile_as_user_code(source, "__ember_glue", root.code, root.lineno(), namespace,
                                original_code(root.code))
    guard = graph.guards.compile(params, f_globals, guard_source)
    return CacheEntry(guard, glue, guard_source, graph.guards)


def _check_no_real_writes(graph: OutputGraph) -> None:
    """Capture writes only to its side-effect log: a real object it read must be unchanged."""
    changed = graph.side_effects.real_objects.changed()
    if changed:
        raise RuntimeError(f"ember bug: capture wrote into real objects: {', '.join(changed[:5])}")


def _successor_offsets(root, inst) -> list[int]:
    if inst.opname in ("RAISE_VARARGS",):
        return []
    offsets = [root.insts.next_offset(inst.offset)] if inst.opname not in ("JUMP_FORWARD",) else []
    if inst.opname.startswith("POP_JUMP") or inst.opname.startswith("JUMP_IF"):
        offsets.append(inst.argval)
    return offsets


def _resume_call(context, cg: GlueCodegen, root, branch: Branch, local_exprs: dict[str, str],
                 cell_exprs: list[str]) -> str:
    live = live_locals(root, branch.target)
    nulls = tuple(expr is None for expr in branch.stack)
    code = make_resume_code(root.code, branch.target, nulls, tuple(live))
    runner = context.code_runner(code, root.f_globals)
    if branch.target == root.current.offset and root.stop and root.stop[0] == "break":
        runner.eager = True  # resumes at the breaking instruction itself: never captured
    args = [expr for expr in branch.stack if expr is not None] + [local_exprs[name] for name in live]
    closure = CLOSURE
    if cell_exprs:  # the resume code's free variables: the frame's own, then its cells
        cells = "(" + "".join(f"{expr}, " for expr in cell_exprs) + ")"
        closure = f"{CLOSURE} + {cells}" if root.code.co_freevars else cells
    return f"{cg.ref(runner, 'resume')}({', '.join([closure, *args])})"


def _wrap_callee(root, inst, stack: list) -> list:
    """The stack for an eager resume at a call: the callee goes through ember's wrapper."""
    stack = list(stack)
    if inst.opname == "CALL":
        position = len(stack) - inst.arg - 2
        slot = position + 1 if stack[position] is None else position
        stack[slot] = f"__ember_wrap({stack[slot]})"
    elif inst.opname == "CALL_FUNCTION_EX":
        position = len(stack) - 2 - (inst.arg & 1)
        slot = position - 1 if stack[position - 1] is not None else position
        stack[slot] = f"__ember_wrap({stack[slot]})"
    return stack


def _compile_graph(context, graph: OutputGraph, outputs, root):
    gm_graph = graph.graph
    gm_graph.output(tuple(tensor.node for tensor in outputs))
    # A capture that recorded operations goes to the backend even when all are dead (`x + 1` dropped),
    # as torch.compile counts graphs; nothing recorded and nothing computed: no graph.
    recorded_ops = graph.op_count() > 0
    graph.remove_dead_code()
    graph.prune_unused_inputs()
    if not recorded_ops and all(t.node.op == "placeholder" for t in outputs):
        return None
    module = torch.fx.GraphModule(torch.nn.Module(), gm_graph)
    if context.config.verify_graphs:
        gm_graph.lint()
    example_inputs = [graph_input.example for graph_input in graph.inputs]
    if log_graph.isEnabledFor(logging.DEBUG):
        log_graph.debug("graph for %s:\n%s", root.code.co_name, module.print_readable(print_output=False))
    state = graph.shape_plan.state if graph.shape_plan is not None else None
    # (only where numbers are dynamic: their branches recapture the same graph; elsewhere one
    # backend compile per capture, as torch.compile counts them)
    return compile_or_reuse(context, state.compiled if state is not None and state.scalars else None,
                            module, example_inputs)
