"""ember: a PyTorch 2-style deep-learning compiler written in Python.

    import ember

    @ember.compile                      # or ember.compile(model), ember.compile(fn, backend="eager")
    def f(x, y):
        return (x.sin() + y).relu()

Public API (shaped like torch.compile): compile, reset, explain, graph_break, disable,
config, counters, list_backends, set_stance, allow_in_graph, disallow_in_graph, is_compiling.
"""
from __future__ import annotations

import sys

__version__ = "0.1.0"

_SUPPORTED_PYTHON = ((3, 11), (3, 12))
_SUPPORTED_TORCH = ((2, 11), (2, 13))


def _check_versions() -> None:
    python = sys.version_info[:2]
    if not _SUPPORTED_PYTHON[0] <= python <= _SUPPORTED_PYTHON[1]:
        raise RuntimeError(f"ember supports Python 3.11 and 3.12; this is Python {python[0]}.{python[1]}. "
                           f"Install ember under Python 3.11 or 3.12.")
    import torch

    parts = torch.__version__.split("+")[0].split(".")
    version = (int(parts[0]), int(parts[1]))
    if not _SUPPORTED_TORCH[0] <= version <= _SUPPORTED_TORCH[1]:
        raise RuntimeError(f"ember supports torch 2.11 to 2.13; found torch {torch.__version__}. "
                           f"Install a supported version, e.g. `pip install torch==2.13.0`.")


_check_versions()

from . import config, logs  # noqa: E402
from .api import OptimizedModule, compile, disable, explain, mark_dynamic, mark_static, reset  # noqa: E402
from .autograd import aot_function, aot_module  # noqa: E402
from .backends import list_backends  # noqa: E402
from .capture.errors import BackendCompilerFailed, CaptureError  # noqa: E402
from .capture.runtime import counters  # noqa: E402
from .capture.shapes import DynamicShapeError  # noqa: E402
from .codegen.triton.backend import check_index_errors  # noqa: E402
from . import compiled_autograd  # noqa: E402
from .in_graph import allow_in_graph, disallow_in_graph, graph_break, is_compiling  # noqa: E402
from .stance import RecompileError, set_stance  # noqa: E402

__all__ = [
    "check_index_errors", "compile", "reset", "explain", "graph_break", "disable", "mark_dynamic", "mark_static",
    "config", "logs", "counters", "list_backends", "aot_function", "aot_module", "OptimizedModule", "CaptureError",
    "BackendCompilerFailed", "DynamicShapeError", "set_stance", "RecompileError", "allow_in_graph",
    "disallow_in_graph", "is_compiling",
]
