"""Small predicates and helpers shared by the op builders."""
from __future__ import annotations

import math

import torch

from .inputs import FLOAT_DTYPES, INT_DTYPES, dtype_name


class BuildSkipped(Exception):
    """The builder found nothing to build from; the generator draws another op."""


def need(value):
    """The value, or BuildSkipped when it is None (no operand fits)."""
    if value is None:
        raise BuildSkipped
    return value


def is_float(tensor) -> bool:
    return tensor.dtype in FLOAT_DTYPES


def is_int(tensor) -> bool:
    return tensor.dtype in INT_DTYPES


def is_bool(tensor) -> bool:
    return tensor.dtype == torch.bool


def is_integral(tensor) -> bool:
    return tensor.dtype in INT_DTYPES or tensor.dtype == torch.bool


def nonempty(tensor) -> bool:
    return tensor.numel() > 0


def ranked(low: int, high: int = 9):
    return lambda tensor: low <= tensor.dim() <= high


def both(*predicates):
    return lambda tensor: all(predicate(tensor) for predicate in predicates)


def float_to_int_defined(tensor: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether converting this tensor to `dtype` is defined: a float going to an integer type must
    be finite and in range after truncation (C++ leaves other conversions undefined)."""
    if tensor.dtype not in FLOAT_DTYPES or dtype not in INT_DTYPES:
        return True
    values = tensor.detach().double()
    if not torch.isfinite(values).all():
        return False
    info = torch.iinfo(dtype)
    truncated = values.trunc()
    return bool(((truncated >= info.min) & (truncated <= info.max)).all())


def shape_text(shape) -> str:
    shape = tuple(shape)
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(size) for size in shape) + ")"


def dims_text(dims) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def numel(shape) -> int:
    return math.prod(shape)


__all__ = ["BuildSkipped", "need", "is_float", "is_int", "is_bool", "is_integral", "nonempty", "ranked", "both",
           "float_to_int_defined", "shape_text", "dims_text", "numel", "dtype_name"]
