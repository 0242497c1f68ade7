"""`ember.set_stance`: how compiled functions behave on their next calls, as torch.compiler.set_stance.

    ember.set_stance("force_eager")            # a plain call: from now on
    with ember.set_stance("fail_on_recompile"):  # a scope
        ...
    @ember.set_stance("eager_on_recompile")    # while the decorated function runs
    def serve(batch): ...

Stances:
  "default"             capture on a cache miss (the usual behaviour)
  "force_eager"         every compiled function runs its original code eagerly; nothing is
                        captured and the cache is left as it is
  "eager_on_recompile"  a call that a cached entry's guards accept runs compiled; a call that
                        would capture (a first capture too, as in torch) runs eagerly instead
  "fail_on_recompile"   a call that would capture raises RecompileError naming the function
                        and the guard that failed

`force_backend` (with the "default" stance only, as in torch): new captures are compiled with
that backend, and only entries compiled with it are used; `skip_guard_eval_unsafe=True`: a code
object with exactly one cached entry runs it without checking its guards (unsafe: for a warmed-up
program whose inputs no longer change); with several entries guards still pick one.

The runtime asks `current` on each call (capture/runtime.py); it is None for the default stance,
so the usual path costs one module-attribute read.  `ember.config.disable` is honoured there too.
"""
from __future__ import annotations

import dataclasses
import functools
import weakref
from typing import Any, Callable

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


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


def _make(stance: Any, skip_guard_eval_unsafe: Any, force_backend: Any) -> Stance:
    if not isinstance(stance, str) or stance not in STANCES:
        extra = " (ember does not implement torch's eager_then_compile stances)" \
            if isinstance(stance, str) and stance.endswith("then_compile") else ""
        raise ValueError(f"ember.set_stance: unknown stance {stance!r}{extra}; valid stances: {', '.join(STANCES)}")
    if not isinstance(skip_guard_eval_unsafe, bool):
        raise TypeError(f"ember.set_stance: skip_guard_eval_unsafe must be True or False, "
                        f"got {skip_guard_eval_unsafe!r}")
    backend_fn = backend_name = None
    if force_backend is not None:
        if stance != "default":
            raise ValueError(f"ember.set_stance: force_backend is only allowed with the 'default' stance, "
                             f"not {stance!r} (as in torch.compiler.set_stance)")
        from .backends import lookup_backend

        backend_fn, backend_name = lookup_backend(force_backend)
    return Stance(stance, skip_guard_eval_unsafe, force_backend, backend_fn, backend_name)


def _apply(stance: Stance) -> Stance:
    global current
    prior = get_stance()
    current = None if stance == _DEFAULT else stance
    return prior


class set_stance:
    """Set the stance of every ember-compiled function (see this module's docstring): as a call
    (in force until changed), as a context manager (restored on exit) or as a decorator (in force
    while the decorated function runs)."""

    # Called inside a captured function it runs as plain Python (a graph break), as it must.
    _ember_disabled = True

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: Any = None) -> None:
        self.stance = _make(stance, skip_guard_eval_unsafe, force_backend)
        self.prior = _apply(self.stance)

    def __enter__(self) -> None:
        _apply(self.stance)  # (already in force since __init__, as in torch)

    def __exit__(self, *exc) -> None:
        _apply(self.prior)  # the stance found when set_stance(...) was called

    def __call__(self, fn: Callable) -> Callable:
        _apply(self.prior)  # as a decorator it is in force only while `fn` runs
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            outer = _apply(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _apply(outer)

        with_stance._ember_disabled = True
        return with_stance


# -- the runtime's side -------------------------------------------------------------------------
def dispatch(runner, closure, args: tuple):
    """One call of a CodeRunner (capture/runtime.py) under a stance other than the default one,
    or with ember.config.disable set."""
    from . import config as ember_config

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
    from .capture.runtime import CompileContext

    per_backend = _forced.setdefault(context, {})
    key = id(stance.backend_fn)
    known = per_backend.get(key)
    if known is None or known[0] is not stance.backend_fn:
        forced = CompileContext(stance.backend_fn, stance.backend_name, context.fullgraph, context.dynamic,
                                context.mode, context.settings)
        known = per_backend[key] = (stance.backend_fn, forced)
    return known[1]
