"""`ember.set_stance`: how compiled functions behave on their next calls, as torch.compiler.set_stance.

    ember.set_stance("force_eager")            # a plain call: from now on
    with ember.set_stance("fail_on_recompile"):  # a scope
        ...
    @ember.set_stance("eager_on_recompile")    # while the decorated function runs
    def serve(batch): ...

Stances: "default" (capture on a cache miss); "force_eager" (every compiled function runs its
original code, nothing is captured); "eager_on_recompile" (a call that would capture, a first
one too, runs eagerly); "fail_on_recompile" (a call that would capture raises RecompileError
naming the function and the failed guard).  `force_backend` (with "default" only): new captures
use that backend and only its entries are used; `skip_guard_eval_unsafe=True`: a code object
with exactly one cached entry runs it without checking its guards.  The runtime's side of the
stances is capture/stance.py; this module parses and applies what the user asked for.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .capture.stance import RecompileError, Stance, apply as _apply, get_stance  # noqa: F401

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


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
