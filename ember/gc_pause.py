"""Python's cyclic garbage collector paused while ember compiles.

A compile allocates millions of small objects (fake tensors, FX nodes, sympy expressions) and
frees few of them before it ends, so the collector's generational passes walk them again and
again for nothing: GPT-2's training step spent 0.6 s of a 3.9 s capture and trace in it (CPU,
2026-11-24).  The pause nests (a graph break compiles again inside a compile; the backward begun
with the forward compiles in another thread) and ends with the outermost compile; what the
compile left in cycles is collected by the next automatic pass after that.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
