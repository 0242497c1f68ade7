"""Named compiler steps and the one loop that runs them (the backend's list: pipeline.py).

A step updates in place the state of one unit of compilation: "captured" (the FX graph capture
hands the backend), "joint" (the joint graph of one input signature) or "graph" (each forward,
backward or inference graph).  The loop times every step (`state.timings`), logs its product
under its own EMBER_LOGS channel (or the older ones in `also_logs`), checks it under
`ember.config.verify_graphs`, and stops where a step settles the result early (`state.done`).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import torch

from . import config as ember_config
from . import logs

log_perf = logs.get("perf")

UNITS = ("captured", "joint", "graph")


@dataclasses.dataclass(frozen=True)
class Step:
    name: str                                    # its EMBER_LOGS channel and its timing's key
    unit: str                                    # one of UNITS
    run: Callable[[Any], None]                   # updates the unit's state in place
    dump: Callable[[Any], str] | None = None     # its product as readable text
    verify: Callable[[Any], None] | None = None  # raises AssertionError on a malformed product
    also_logs: tuple[str, ...] = ()              # older channels showing the dump (ir, output_code, ...)

    def __post_init__(self) -> None:
        assert self.unit in UNITS, self.unit


@dataclasses.dataclass
class Work:
    """What every unit's state has: the step running now, timings, and whether it is settled."""
    timings: dict = dataclasses.field(default_factory=dict)
    step: str = ""
    done: bool = False


def run_steps(steps: Sequence[Step], unit: str, state: Work, start: int = 0, pause_after: str | None = None) -> int:
    """Run the steps of `unit` from index `start`, in order; return the index to continue from
    (len(steps) when finished, or just after the step named `pause_after`)."""
    for index in range(start, len(steps)):
        step = steps[index]
        if step.unit != unit:
            continue
        if state.done:
            return len(steps)
        state.step = step.name
        started = time.perf_counter()
        step.run(state)
        state.timings[step.name] = state.timings.get(step.name, 0.0) + time.perf_counter() - started
        _log(step, state)
        if step.verify is not None and ember_config._config.verify_graphs and not state.done:
            step.verify(state)
        if step.name == pause_after:
            return index + 1
    return len(steps)


def _log(step: Step, state: Work) -> None:
    """The dump, once: under the first channel on of `also_logs` (what a user of the older
    channel, or the debug report, reads) and the step's own."""
    if step.dump is None or state.done:
        return
    logger = next((logs.get(name) for name in (*step.also_logs, step.name) if logs.enabled(name)), None)
    if logger is None:
        return
    text = step.dump(state)
    if text:
        logger.debug("%s", text)


# ---- checks several steps share --------------------------------------------------------------------

def verify_fx(gm: torch.fx.GraphModule, value_key: str = "val") -> None:
    """torch.fx's lint, and a value (a fake tensor, a number) on every computing node."""
    gm.graph.lint()
    for node in gm.graph.nodes:
        if node.op in ("call_function", "placeholder") and value_key not in node.meta:
            raise AssertionError(f"node {node.name} ({node.op} {node.target}) has no meta[{value_key!r}]")


def fx_text(gm: torch.fx.GraphModule) -> str:
    return gm.print_readable(print_output=False)
