"""Python's cyclic garbage collector paused while ember compiles: a compile allocates millions of
small objects and frees few before it ends, so the collector's passes walk them again and again
(0.6 s of GPT-2's 3.9 s capture and trace).  The pause nests (compiles in compiles, the backward
compiled in another thread) and ends with the outermost compile.
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
