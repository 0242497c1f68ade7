"""ATen-level graphs run as traced: with every autocast dispatch key excluded.

A graph traced below the dispatcher's autocast keys holds autocast's casts as ops of their own,
and the ops a composite ran below autocast keep the dtypes they had there (sdpa's math path
multiplies in float32 under bf16 autocast).  Run again under the caller's autocast, such an op
would be cast once more: a bf16 product where the graph planned float32 (a kernel reading it
as float32 read past its end).  The generated wrappers exclude the keys themselves
(codegen/wrapper.py); graphs run op by op (aot_eager, fallbacks) go through `as_traced`.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch


def _autocast_keys() -> "torch._C.DispatchKeySet":
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
    for name in dir(torch._C.DispatchKey):
        if name.startswith("Autocast"):
            keys = keys | torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, name))
    return keys


AUTOCAST_KEYS = _autocast_keys()
exclude_keys = torch._C._ExcludeDispatchKeyGuard


def as_traced(run: Callable) -> Callable:
    """`run` (an ATen-level graph's forward) with autocast excluded."""
    @functools.wraps(run)
    def without_autocast(*args):
        with exclude_keys(AUTOCAST_KEYS):
            return run(*args)

    without_autocast.ember_as_traced = run
    return without_autocast
