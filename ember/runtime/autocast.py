"""ATen-level graphs run as traced: with every autocast dispatch key excluded.  A graph traced
below autocast holds its casts as ops, and ops a composite ran below autocast keep their dtypes
(sdpa's math path in float32 under bf16): run again under the caller's autocast they would be
cast once more (a kernel reading a bf16 result as float32 reads past its end).  Generated
wrappers exclude the keys themselves; graphs run op by op go through `as_traced`.
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

    return without_autocast
