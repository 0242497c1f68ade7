"""The stance in force (`ember.set_stance`, ember/stance.py) as the capture runtime reads it on
each call: the state, and what a call does under a stance other than the default one.

The runtime asks `current` on each call (capture/runtime.py); it is None for the default stance,
so the usual path costs one module-attribute read.  `ember.config.disable` is honoured there too.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable

from .. import config as ember_config


class RecompileError(RuntimeError):
    """A capture was needed under the "fail_on_recompile" stance."""


@dataclasses.dataclass(frozen=True)
class Stance:
    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    force_backend: Any = None
    backend_fn: Callable | None = None  # force_backend looked up
    backend_name: str | None = None


_DEFAULT = Stance()
# The stance in force; None while it is the default one without options (the fast path).
current: Stance | None = None


def get_stance() -> Stance:
    return current or _DEFAULT


def apply(stance: Stance) -> Stance:
    global current
    prior = get_stance()
    current = None if stance == _DEFAULT else stance
    return prior


def dispatch(runner, closure, args: tuple):
    """One call of a CodeRunner (capture/runtime.py) under a stance other than the default one,
    or with ember.config.disable set."""
    stance = get_stance()
    if stance.stance == "force_eager" or ember_config._config.disable:
        return runner.run_eagerly(closure, args)
    if stance.backend_fn is not None and stance.backend_fn is not runner.context.backend:
        runner = _forced_context(runner.context, stance).code_runner(runner.code, runner.f_globals)
    entries = runner.entries
    if stance.skip_guard_eval_unsafe and len(entries) == 1:
        return entries[0][1](closure, *args)
    for guard, run in entries:
        try:
            hit = guard(closure, *args)
        except Exception:
            hit = False
        if hit:
            return run(closure, *args)
    return runner.miss(closure, args)


def on_miss(runner, closure, args: tuple) -> bool:
    """Called where a miss would capture: True when the call is to run eagerly instead; raises
    under "fail_on_recompile"."""
    stance = current
    if stance is None or stance.stance == "default":
        return False
    if stance.stance == "fail_on_recompile":
        code = runner.code
        reasons = runner.failures(closure, args)
        why = ("; ".join(reasons) if reasons else "no cached entry yet (a first capture)")
        raise RecompileError(
            f"ember: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) would be recompiled under "
            f"ember.set_stance('fail_on_recompile'): {why}. Call it only with inputs it was compiled for, "
            f"or use the 'eager_on_recompile' or 'default' stance")
    return True  # eager_on_recompile (force_eager never gets here)


# The context each compile context uses under force_backend=..., one per (context, backend).
_forced: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _forced_context(context, stance: Stance):
    from .runtime import CompileContext

    per_backend = _forced.setdefault(context, {})
    key = id(stance.backend_fn)
    known = per_backend.get(key)
    if known is None or known[0] is not stance.backend_fn:
        forced = CompileContext(stance.backend_fn, stance.backend_name, context.fullgraph, context.dynamic,
                                context.mode, context.settings)
        known = per_backend[key] = (stance.backend_fn, forced)
    return known[1]
