"""Backends by name: a backend is any callable `(gm: torch.fx.GraphModule, example_inputs) -> callable`.

    "eager"      runs the captured FX graph as it is
    "aot_eager"  ember's ahead-of-time autograd, then the graphs as they are
    "ember"      AOT autograd, then ember's loop IR, scheduler and C++ or Triton kernels
    "inductor"   torch's own compiler, only as a side-by-side reference (reference.py)

`torch.compile(model, backend="ember")` runs the "ember" backend on Dynamo's graphs through the
entry point declared in pyproject.toml (torch_compile.py).
"""
from __future__ import annotations

from typing import Callable

import torch

from ..pipeline import aot_eager_backend as aot_eager
from ..pipeline import ember_backend
from .reference import inductor


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


BACKENDS: dict[str, Callable] = {
    "eager": eager,
    "aot_eager": aot_eager,
    "ember": ember_backend,
    "inductor": inductor,
}


def lookup_backend(backend) -> tuple[Callable, str]:
    if callable(backend):
        return backend, getattr(backend, "__name__", type(backend).__name__)
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(f"unknown ember backend {backend!r}; choose one of {', '.join(sorted(BACKENDS))} "
                             f"or pass a callable (gm, example_inputs) -> callable")
        return BACKENDS[backend], backend
    raise TypeError(f"backend must be a name or a callable, not {type(backend).__name__}")


def list_backends() -> list[str]:
    return sorted(BACKENDS)
