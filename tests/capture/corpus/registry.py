"""Registry and input helpers for the capture-frontend test corpus.

Every corpus program is a plain Python function registered with ``@program(make_inputs)``.
``make_inputs(step)`` returns ``(args_tuple, kwargs_dict)`` for call number ``step``; the
harness (tests/capture/test_corpus.py) seeds torch's RNG from the program name and the step
before calling it, so inputs are reproducible yet differ from call to call.

Optional hooks for programs with side effects outside their arguments:

* ``reset(step)`` puts module-level state (globals, module-level objects, shared
  nn.Modules) into a known state before *each* run (eager and compiled).  It may use the
  step to vary that state between calls (e.g. flip a global read by the program).
* ``state()`` returns the module-level state to compare after each run.  The harness
  copies what it returns (containers rebuilt, tensors detached and cloned), so returning
  live objects is fine as long as ``reset`` rebinds or overwrites them.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, Callable

import torch

MakeInputs = Callable[[int], "tuple[tuple, dict]"]


@dataclasses.dataclass
class Program:
    name: str  # "<theme>.<function name>"
    theme: str
    fn: Callable[..., Any]
    make_inputs: MakeInputs
    reset: Callable[[int], None] | None = None
    state: Callable[[], Any] | None = None
    rtol: float = 0.0
    atol: float = 0.0
    steps: int = 6


PROGRAMS: dict[str, Program] = {}


def program(
    make_inputs: MakeInputs,
    *,
    reset: Callable[[int], None] | None = None,
    state: Callable[[], Any] | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
):
    """Register ``fn`` as a corpus program; returns ``fn`` unchanged."""

    def deco(fn):
        theme = fn.__module__.rsplit(".", 1)[-1].removeprefix("programs_")
        name = f"{theme}.{fn.__name__}"
        if name in PROGRAMS:
            raise ValueError(f"duplicate corpus program {name}")
        PROGRAMS[name] = Program(name, theme, fn, make_inputs, reset, state, rtol, atol)
        return fn

    return deco


def load_all() -> dict[str, Program]:
    """Import every ``programs_*`` module of this package and return the registry."""
    package = importlib.import_module(__package__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("programs_"):
            importlib.import_module(f"{__package__}.{info.name}")
    return PROGRAMS


# ---------------------------------------------------------------------------------------
# input helpers (all use torch's global RNG, which the harness seeds per program and step)
# ---------------------------------------------------------------------------------------

def args(*a, **kw):
    """Build the ``(args_tuple, kwargs_dict)`` pair that make_inputs returns."""
    return a, kw


def randn(*shape, dtype=torch.float32, requires_grad=False):
    t = torch.randn(*shape, dtype=dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def randint(lo, hi, shape, dtype=torch.int64):
    return torch.randint(lo, hi, tuple(shape), dtype=dtype)


def pick(step: int, options):
    """Cycle through ``options`` with the step number."""
    return options[step % len(options)]


# steps 0..5 -> True, True, False, True, False, False: both branches, each seen repeatedly
_FLIPS = (True, True, False, True, False, False)


def flip(step: int) -> bool:
    return _FLIPS[step % len(_FLIPS)]


def signed(step: int, *shape):
    """A tensor whose elements are all positive when flip(step), else all negative."""
    t = torch.rand(*shape) + 0.1
    return t if flip(step) else -t


def tensors(*shapes, vary=False, requires_grad=False, dtype=torch.float32) -> MakeInputs:
    """make_inputs giving one fresh randn tensor per shape.

    With ``vary=True`` every dimension grows by ``step // 2`` (steps 0-1 base shape, 2-3 +1,
    4-5 +2), consistently across tensors so broadcasting programs stay valid.
    """

    def make(step):
        k = step // 2 if vary else 0
        return (
            tuple(
                randn(*(d + k for d in s), dtype=dtype, requires_grad=requires_grad)
                for s in shapes
            ),
            {},
        )

    return make


def seeded(seed: int, ctor: Callable[[], Any]):
    """Construct ``ctor()`` (e.g. an nn.Module) under a fixed seed, leaving the RNG alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ctor()
