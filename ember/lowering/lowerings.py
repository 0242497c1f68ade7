"""Lowerings: one rule per ATen overload, from IR values to IR values, in one module per op
family (pointwise.py, views.py, gathers.py, reductions.py, division.py, pooling.py, scatter.py),
all registered in one table (registry.py).  Importing this module registers every rule."""
from __future__ import annotations

from . import division, gathers, pointwise, pooling, reductions, scatter, views  # noqa: F401  (register their rules)
from .registry import EXTERN_OPS, LOWERINGS, FallbackNeeded  # noqa: F401
