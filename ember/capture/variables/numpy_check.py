"""numpy's own answer for each numpy call a capture traces (numpy_arrays.py), on stand-ins.

torch._numpy does not follow numpy everywhere (int8 sqrt is float64, reductions give 0-d arrays where
numpy gives scalars, flatten() is a view, linalg.inv is column-major...).  So each traced call runs once
more in numpy on zero-filled arrays of the same shapes, strides and dtypes (identity matrices where
numpy.linalg finds zeros singular): a result that differs breaks the graph, and numpy's answer says which
results are scalars, copies in numpy's layout, or read-only.  Stand-ins total at most _CHECK_LIMIT elements.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker, constant, static_of
from .containers import BaseListVariable
from .tensor import TensorVariable


def _np():
    return sys.modules.get("numpy")


def _tnp():
    import torch._numpy as tnp

    return tnp


_CHECK_LIMIT = 1 << 24


class Reference:
    """numpy's result on stand-ins; `standins`: (stand-in, variable) for each array argument."""

    def __init__(self, value: Any, standins: list) -> None:
        self.value = value
        self.standins = standins

    def numpy_views(self, result: Any) -> bool:
        """Whether numpy's `result` shares memory with an argument."""
        np = _np()
        return any(not isinstance(standin, np.generic) and np.may_share_memory(result, standin)
                   for standin, _ in self.standins)

    def traced_views(self, tensor: torch.Tensor) -> bool:
        """Whether torch._numpy's result (its fake) shares memory with an argument."""
        return any(torch._C._is_alias_of(tensor, (variable if isinstance(variable, TensorVariable)
                                                  else variable.tensor).example)
                   for _, variable in self.standins)


def numpy_dtype(dtype: torch.dtype) -> Any:
    return torch.empty(0, dtype=dtype).numpy().dtype


def numpy_reference(numpy_function: Any, args: list, kwargs: dict, result: Any, what: str) -> Reference | None:
    np = _np()
    standins: list = []
    if _element_count(result) > _CHECK_LIMIT:
        raise Unsupported(f"{what}: arrays over {_CHECK_LIMIT} elements (torch._numpy not checked against numpy)")
    for eye in (False, True):  # (zeros are singular: numpy.linalg gets identity matrices next)
        standins.clear()
        memo: dict = {}
        budget = [_CHECK_LIMIT - _element_count(result)]
        np_args = [_standin(arg, budget, standins, memo, what, eye) for arg in args]
        np_kwargs = {key: _standin(arg, budget, standins, memo, what, eye) for key, arg in kwargs.items()}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                value = numpy_function(*np_args, **np_kwargs)
                break
            except np.linalg.LinAlgError as error:
                if eye:
                    raise Unsupported(f"numpy's {what} raises LinAlgError on stand-ins: {error}") from None
            except Exception as error:
                raise Unsupported(f"numpy's {what} raises {type(error).__name__} on these dtypes and shapes: "
                                  f"{error}") from None
    _compare(result, value, what)
    return Reference(value, standins)


def _element_count(value: Any) -> int:
    tnp = _tnp()
    if isinstance(value, tnp.ndarray):
        return int(value.tensor.numel())
    if isinstance(value, (tuple, list)):
        return sum(_element_count(item) for item in value)
    return 0


def _standin(variable: VariableTracker, budget: list, standins: list, memo: dict, what: str, eye: bool) -> Any:
    """A real numpy value with the variable's type, dtype, shape and strides (zeros; `eye`: identity
    matrices in the last two dimensions); one per variable, as one object is one array."""
    from .numpy_arrays import NdarrayVariable

    np = _np()
    if id(variable) in memo:
        return memo[id(variable)]
    if isinstance(variable, (NdarrayVariable, TensorVariable)):
        example = (variable.tensor if isinstance(variable, NdarrayVariable) else variable).example
        budget[0] -= int(example.numel())
        if budget[0] < 0:
            raise Unsupported(f"{what}: arrays over {_CHECK_LIMIT} elements (torch._numpy not checked against numpy)")
        shape = tuple(int(n) for n in example.shape)
        if isinstance(variable, TensorVariable):  # (numpy's functions treat a tensor as eager does)
            array = torch.zeros(shape, dtype=example.dtype)
        else:
            array = _zeros_like_layout(shape, tuple(int(n) for n in example.stride()), numpy_dtype(example.dtype))
        if eye and array.ndim >= 2:
            diagonal = np.arange(min(shape[-2:]))
            array[..., diagonal, diagonal] = 1
        if isinstance(variable, NdarrayVariable):
            if variable.scalar:
                array = array[()]
            elif variable.readonly:
                array.flags.writeable = False
        standins.append((array, variable))
        memo[id(variable)] = array
        return array
    if isinstance(variable, BaseListVariable) and variable.python_type() in (list, tuple):
        items = [_standin(item, budget, standins, memo, what, eye) for item in variable.items]
        return items if variable.python_type() is list else tuple(items)
    value = static_of(variable)
    if value is None and variable.is_python_constant():
        value = variable.as_python_constant()
    return value


def _zeros_like_layout(shape: tuple, strides: tuple, dtype: Any) -> Any:
    """Zeros of this shape laid out with these strides (in elements), as the traced tensor is."""
    np = _np()
    span = 1 + sum((n - 1) * stride for n, stride in zip(shape, strides)) if all(shape) else 0
    buffer = np.zeros(max(span, 1), dtype)
    return np.lib.stride_tricks.as_strided(buffer, shape, tuple(stride * buffer.itemsize for stride in strides))


def _compare(value: Any, reference: Any, what: str) -> None:
    np, tnp = _np(), _tnp()

    def differs(ours: str, theirs: str) -> Unsupported:
        return Unsupported(f"torch._numpy's {what} gives {ours} where numpy gives {theirs}")

    if isinstance(value, tnp.ndarray):
        if not isinstance(reference, (np.ndarray, np.generic)):
            raise differs("an ndarray", type(reference).__name__)
        ours = (np.dtype(value.dtype.name), tuple(value.shape))
        if ours != (reference.dtype, reference.shape):
            raise differs(f"{ours[0]}{list(ours[1])}", f"{reference.dtype}{list(reference.shape)}")
        return
    if isinstance(value, (tuple, list)):
        if type(reference) not in (tuple, list) or len(reference) != len(value):  # (the type: numpy's)
            raise differs(type(value).__name__, type(reference).__name__)
        for item, expected in zip(value, reference):
            _compare(item, expected, what)
        return
    if isinstance(value, tnp.DType):
        if not isinstance(reference, np.dtype) or reference != np.dtype(value.name):
            raise differs(str(value), repr(reference))
        return
    if type(value) is not type(reference) or value != reference:
        raise differs(repr(value), repr(reference))


def as_numpy_gives(tx, tensor, fake: torch.Tensor, expected: Any, reference: Reference, what: str):
    """The result as numpy lays it out: a view where numpy's is one (else the graph breaks), a copy
    in numpy's strides where numpy copies (flatten(), linalg.inv's row-major result)."""
    ours, theirs = reference.traced_views(fake), reference.numpy_views(expected)
    if theirs and not ours:
        raise Unsupported(f"numpy's {what} returns a view, torch._numpy's a copy")
    itemsize = expected.itemsize
    if any(stride % itemsize for stride in expected.strides):
        raise Unsupported(f"numpy's {what} gives strides {expected.strides} (not whole elements)")
    wanted = tuple(stride // itemsize for stride in expected.strides)
    same_layout = all(size <= 1 or int(mine) == theirs
                      for size, mine, theirs in zip(expected.shape, fake.stride(), wanted))
    if same_layout and ours == theirs:
        return tensor
    if ours and theirs:  # (both views: of other strides)
        raise Unsupported(f"torch._numpy's {what} gives strides {tuple(fake.stride())} where numpy gives {wanted}")
    fresh = tx.graph.call(tx, "call_function", torch.empty_strided,
                          [constant(tuple(expected.shape)), constant(wanted)],
                          {"dtype": constant(fake.dtype), "device": constant(fake.device)})
    return tx.graph.call(tx, "call_method", "copy_", [fresh, tensor], {})
