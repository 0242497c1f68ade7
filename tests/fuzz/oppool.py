"""The op pool: every op builder, registered by family with a relative weight.

A builder takes the Builder (values at hand, helpers) and returns a Statement, or None when no
value suits it. Validity is decided by running the statement eagerly (generator.py), so builders
only need to make valid statements likely, not certain.
"""
from __future__ import annotations

OPS_BY_FAMILY: dict[str, dict] = {}


def op(family: str, weight: float = 1.0):
    """Register an op builder under `family` (see modes.FAMILIES)."""
    from .modes import FAMILIES
    if family not in FAMILIES:
        raise ValueError(f"unknown op family {family!r}; families: {', '.join(FAMILIES)}")

    def register(build):
        table = OPS_BY_FAMILY.setdefault(family, {})
        if build in table:
            raise ValueError(f"{build.__name__} registered twice")
        table[build] = weight
        return build
    return register


def _load_builders() -> None:
    from . import ops_conv, ops_index, ops_inplace, ops_pointwise, ops_reduce, ops_shape, ops_stats  # noqa: F401


_load_builders()
