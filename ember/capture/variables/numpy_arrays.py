"""numpy inside captured frames: ndarrays backed by traced tensors, through torch._numpy.

As with torch.compile, an ndarray in a captured frame is a tensor in the graph: `x.numpy()` is a
view_as of x; a numpy.ndarray input is read as torch.from_numpy(a) (guarded: type, dtype, strides
numpy can share, writeable); `np.mean(a, 1)`, `a.T`, `a + a` run torch._numpy's function on
tnp.ndarray wrappers of the fakes under `_Recorder` (each torch call a graph node), then numpy itself
on stand-ins (numpy_check.py) for dtypes, shapes, scalars, views and flags; an ndarray leaving the
graph is `tensor.numpy(force=True)` in the glue.  numpy dtypes, finfo/iinfo and scalars are constants.
What torch._numpy lacks or gets otherwise than numpy, value reads (bool(a), a.item()), numpy's random
generator and ndarray/tensor mixes (eager's result type depends on operand order) break the graph.
"""
from __future__ import annotations

import dataclasses
import operator
import types
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..errors import Unsupported, UserException
from ..shapes import StaticShapesNeeded, has_symbols
from ..sources import Source
from .base import (INPLACE_TO_BINARY, ConstantVariable, SpelledMethodVariable, VariableTracker, constant,
                   is_constant_value, run_for_real, static_of)
from .builder import _remember, wrap_static
from .containers import BaseListVariable, ListVariable, NamedTupleVariable, TupleVariable
from .numpy_check import Reference, _np, _tnp, as_numpy_gives, numpy_dtype, numpy_reference
from .tensor import TensorVariable
from .torch_functions import CallableValueVariable, _same_object_as_argument

# -- which numpy objects ember models ------------------------------------------------------------
_NUMPY_MAP: dict[int, tuple[Any, Any]] | None = None  # id(numpy callable) -> (it, torch._numpy's)
# numpy calls run for real when every argument is a constant (they compute on dtypes only).
_FOLDED_NAMES = ("dtype", "finfo", "iinfo", "result_type", "promote_types", "can_cast", "issubdtype",
                 "isdtype", "min_scalar_type")


def _numpy_map() -> dict[int, tuple[Any, Any]]:
    global _NUMPY_MAP
    if _NUMPY_MAP is None:
        np, tnp = _np(), _tnp()
        table: dict[int, tuple[Any, Any]] = {}
        for np_module, tnp_module in ((np, tnp), (np.fft, tnp.fft), (np.linalg, tnp.linalg)):
            for name in dir(tnp_module):
                if name.startswith("_"):
                    continue
                ours, theirs = getattr(tnp_module, name), getattr(np_module, name, None)
                if theirs is None or not callable(theirs) or isinstance(theirs, types.ModuleType):
                    continue
                if isinstance(theirs, type) and not _is_scalar_type(theirs):
                    continue  # np.ndarray, np.dtype, np.generic, ...: not mapped
                table[id(theirs)] = (theirs, ours)
        _NUMPY_MAP = table
    return _NUMPY_MAP


def _is_scalar_type(cls: type) -> bool:
    """np.float32, np.int64, np.bool_ ... (concrete numpy scalar types)."""
    np = _np()
    if not (isinstance(cls, type) and issubclass(cls, np.generic)):
        return False
    try:
        return np.dtype(cls).kind in "biufc"
    except TypeError:
        return False


def _is_random(value: Any) -> bool:
    np = _np()
    module = getattr(value, "__module__", None) or ""
    owner = getattr(value, "__self__", None)
    return module.startswith("numpy.random") or isinstance(owner, (np.random.RandomState, np.random.Generator))


def is_numpy_constant(value: Any) -> bool:
    """A numpy value ember holds as a constant: a scalar (np.float32(1.5)), a dtype, finfo/iinfo."""
    np = _np()
    return np is not None and isinstance(value, (np.generic, np.dtype, np.finfo, np.iinfo))


def wrap_numpy_static(tx, value: Any) -> VariableTracker | None:
    """The variable for a numpy object without a source (builder.wrap_static), or None."""
    np = _np()
    if np is None or not _from_numpy_package(value):
        return None
    if is_numpy_constant(value):
        return ConstantVariable(value)
    if _is_random(value) and callable(value):
        return NumpyFunctionVariable(value, None)
    folded = getattr(value, "__name__", None) in _FOLDED_NAMES and getattr(np, value.__name__, None) is value
    entry = _numpy_map().get(id(value))
    mapped = entry is not None and entry[0] is value
    if folded or mapped:  # (a folded function: np.result_type of arrays is torch._numpy's)
        return NumpyFunctionVariable(value, entry[1] if mapped else None)
    return None


def wrap_numpy(tx, value: Any, source) -> VariableTracker | None:
    """The variable for a numpy object found at `source` (builder.wrap), with its guards; None
    for what numpy_arrays does not model (it is wrapped as any other object)."""
    np = _np()
    if np is None or not _from_numpy_package(value):
        return None
    guards = tx.graph.guards
    if type(value) is np.ndarray:
        return _array_input(tx, value, source)
    if isinstance(value, (np.generic, np.dtype)):
        guards.constant(source, value)  # same type and an equal value (np.dtype('float64') == float)
        return ConstantVariable(value, source=source)
    if isinstance(value, (np.finfo, np.iinfo)):
        return None  # (an object: its attributes are read and guarded one by one)
    variable = wrap_numpy_static(tx, value)
    if variable is not None:
        guards.identity(source, value)
        variable.source = source
    return variable


def _from_numpy_package(value: Any) -> bool:
    def numpy_module(name) -> bool:
        return isinstance(name, str) and (name == "numpy" or name.startswith("numpy."))

    if numpy_module(getattr(type(value), "__module__", None)):
        return True
    return isinstance(value, (type, types.BuiltinFunctionType, types.FunctionType, types.MethodType)) and \
        numpy_module(getattr(value, "__module__", None))


# -- ndarray inputs --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NumpyTensorSource(Source):
    """torch.from_numpy(<base>): the tensor a numpy input is read as (shares its memory)."""

    base: Source

    def expr(self) -> str:
        return f"__import__('torch').from_numpy({self.base.expr()})"

    def name(self) -> str:
        return self.base.name()

    def root(self) -> Source:
        return self.base.root()


def _shareable(array: Any, dtype: Any) -> bool:
    """What the guards need before torch.from_numpy can read `array`: the dtype seen at capture,
    strides torch can hold (non-negative, whole elements), writeable (eager refuses writes)."""
    return array.dtype == dtype and array.flags.writeable and all(
        stride >= 0 and stride % array.itemsize == 0 for stride in array.strides)


def _array_input(tx, value: Any, source) -> VariableTracker:
    if not _shareable(value, value.dtype):
        raise Unsupported("a numpy input torch.from_numpy cannot share (read-only, negative strides)")
    try:
        tensor = torch.from_numpy(value)
    except (TypeError, RuntimeError, ValueError) as error:
        raise Unsupported(f"a numpy input of dtype {value.dtype}: {error}") from None
    guards = tx.graph.guards
    guards.type_match(source, value)
    guards.add(f"{guards.ref(_shareable)}({source.expr()}, {guards.ref(value.dtype)})",
               f"{source.expr()} is a writeable {value.dtype} ndarray torch.from_numpy can share")
    tensor_variable = tx.graph.tensor_input(tensor, NumpyTensorSource(source))
    return _remember(tx.graph, value, NdarrayVariable(tensor_variable, source=source))


# -- tracing torch._numpy ----------------------------------------------------------------------------
_TENSOR_CLASSES = (torch._C.TensorBase, torch.Tensor)


class _Recorder(TorchFunctionMode):
    """Every torch call torch._numpy makes on the fakes becomes a graph node (OutputGraph.call);
    the call returns the node's fake, so the numpy code goes on with metadata only."""

    def __init__(self, tx) -> None:
        super().__init__()
        self.tx = tx
        self.known: dict[int, tuple[torch.Tensor, VariableTracker]] = {}
        self.error: BaseException | None = None

    # variables <-> the Python values torch._numpy sees
    def fake_of(self, variable) -> torch.Tensor:
        example = variable.example
        with torch._C.DisableTorchFunction():
            if has_symbols(example.shape):
                raise StaticShapesNeeded("numpy on a tensor with dynamic sizes")
        self.known[id(example)] = (example, variable)
        return example

    def variable_of(self, tensor: torch.Tensor) -> VariableTracker:
        entry = self.known.get(id(tensor))
        if entry is None or entry[0] is not tensor:
            raise Unsupported("torch._numpy used a tensor made outside the traced torch calls")
        return entry[1]

    def _to_variable(self, value: Any) -> VariableTracker:
        if isinstance(value, torch.Tensor):
            return self.variable_of(value)
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise StaticShapesNeeded("a symbolic size inside torch._numpy")
        if type(value) is tuple:
            return TupleVariable([self._to_variable(item) for item in value])
        if type(value) is list:
            return ListVariable([self._to_variable(item) for item in value])
        if isinstance(value, torch.Size) or is_constant_value(value):
            return constant(value)
        if type(value) in (torch.finfo, torch.iinfo):
            return wrap_static(self.tx, value)
        raise Unsupported(f"torch._numpy passed a {type(value).__name__} to a torch call")

    def _to_python(self, variable: VariableTracker) -> Any:
        if isinstance(variable, TensorVariable):
            self.known[id(variable.example)] = (variable.example, variable)
            return variable.example
        if isinstance(variable, ConstantVariable):
            return variable.value
        if isinstance(variable, NamedTupleVariable):
            items = [self._to_python(item) for item in variable.items]
            cls = variable.tuple_class
            return cls(items) if cls.__module__ == "torch.return_types" else cls(*items)
        if isinstance(variable, BaseListVariable):
            items = [self._to_python(item) for item in variable.items]
            return items if variable.python_type() is list else tuple(items)
        raise StaticShapesNeeded("a symbolic size inside torch._numpy") if type(variable).__name__ == \
            "SymNodeVariable" else Unsupported(f"torch call gave {variable} inside torch._numpy")

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            kind, target, args = _graph_target(func, args)
            if _is_true_divide(func, kwargs) and not any(
                    isinstance(arg, torch.Tensor) and (arg.is_floating_point() or arg.is_complex()) for arg in args):
                # numpy divides integers in float64; torch in its default dtype
                args = tuple(self.__torch_function__(torch.Tensor.to, (), (arg, torch.float64))
                             if isinstance(arg, torch.Tensor) else arg for arg in args)
            arg_vars = [self._to_variable(arg) for arg in args]
            kwarg_vars = {key: self._to_variable(value) for key, value in kwargs.items()}
            result = self.tx.graph.call(self.tx, kind, target, arg_vars, kwarg_vars)
            result = _same_object_as_argument(result, [*arg_vars, *kwarg_vars.values()])
            return self._to_python(result)
        except (Unsupported, StaticShapesNeeded) as error:
            self.error = self.error or error  # (raised even where torch._numpy catches it)
            raise


_TRUE_DIVIDES = {torch.true_divide, torch.div, torch.divide, torch.Tensor.div, torch.Tensor.true_divide,
                 torch.Tensor.divide, torch.Tensor.__truediv__, torch.Tensor.__rtruediv__}


def _is_true_divide(func, kwargs: dict) -> bool:
    return func in _TRUE_DIVIDES and kwargs.get("rounding_mode") is None


def _graph_target(func, args) -> tuple[str, Any, tuple]:
    name = getattr(func, "__name__", "")
    owner = getattr(func, "__self__", None)
    if name == "__get__" and getattr(owner, "__objclass__", None) in _TENSOR_CLASSES:
        return "call_function", getattr, (args[0], owner.__name__)  # a property: t.shape, t.T
    if func in (torch.Tensor.__getitem__, torch._C.TensorBase.__getitem__):
        return "call_function", operator.getitem, args
    if func in (torch.Tensor.__setitem__, torch._C.TensorBase.__setitem__):
        return "call_function", operator.setitem, args
    if getattr(func, "__objclass__", None) in _TENSOR_CLASSES or (
            isinstance(func, types.FunctionType) and getattr(torch.Tensor, name, None) is func):
        return "call_method", name, args
    return "call_function", func, args


def call_numpy(tx, function: Any, args: list, kwargs: dict, what: str, numpy_function: Any) -> VariableTracker:
    """`function` (of torch._numpy, or a method of a tnp.ndarray) on these variables, traced; then
    checked against `numpy_function` (what eager runs) on stand-ins (see `_numpy_reference`)."""
    recorder = _Recorder(tx)
    wrappers: list[tuple[Any, NdarrayVariable]] = []
    with recorder:
        try:
            py_args = [_to_numpy_value(tx, recorder, arg, wrappers) for arg in args]
            py_kwargs = {key: _to_numpy_value(tx, recorder, arg, wrappers) for key, arg in kwargs.items()}
            result = function(*py_args, **py_kwargs)
        except (Unsupported, StaticShapesNeeded, UserException):
            raise
        except Exception as error:
            if recorder.error is not None:
                raise recorder.error from None
            # eager numpy raises its own error (or none: torch._numpy differs): run it eagerly
            raise Unsupported(f"torch._numpy's {what} raised {type(error).__name__}: {error}") from None
    if recorder.error is not None:
        raise recorder.error
    for wrapper, variable in wrappers:  # (a method that replaced its ndarray's tensor)
        if wrapper.tensor is not variable.tensor.example:
            variable.tensor = recorder.variable_of(wrapper.tensor)
            variable.source = None
    reference = numpy_reference(numpy_function, args, kwargs, result, what)
    return _from_numpy_value(tx, recorder, result, wrappers, reference, what)


def _to_numpy_value(tx, recorder: _Recorder, variable: VariableTracker, wrappers: list) -> Any:
    np, tnp = _np(), _tnp()
    if isinstance(variable, NdarrayVariable):
        wrapper = tnp.ndarray(recorder.fake_of(variable.tensor))
        wrappers.append((wrapper, variable))
        return wrapper
    if isinstance(variable, TensorVariable):
        with torch._C.DisableTorchFunction():
            check_numpy_convertible(variable, "a numpy function of a tensor")
        return recorder.fake_of(variable)
    if isinstance(variable, BaseListVariable) and variable.python_type() in (list, tuple):
        items = [_to_numpy_value(tx, recorder, item, wrappers) for item in variable.items]
        return items if variable.python_type() is list else tuple(items)
    value = static_of(variable)
    if value is None and variable.is_python_constant():
        value = variable.as_python_constant()
        if value is None:
            return None
    if value is None:
        raise Unsupported(f"{variable} passed to a numpy function")
    if isinstance(value, np.dtype) or (isinstance(value, type) and _is_scalar_type(value)) or \
            value in (float, int, bool, complex):  # (dtype=float: numpy's float64)
        return tnp.dtype(np.dtype(value).name)
    if isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            return bool(value)
        return getattr(tnp, np.dtype(type(value)).name)(value.item())
    if isinstance(value, (int, float, complex, bool, str, slice, type(Ellipsis))) or is_constant_value(value):
        if isinstance(value, tuple):
            return tuple(_to_numpy_value(tx, recorder, constant(item), wrappers) for item in value)
        return value
    raise Unsupported(f"a {type(value).__name__} passed to a numpy function")


def _from_numpy_value(tx, recorder: _Recorder, value: Any, wrappers: list, reference: Reference | None,
                      what: str, expected: Any = None) -> VariableTracker:
    np, tnp = _np(), _tnp()
    if reference is not None and expected is None:
        expected = reference.value
    if isinstance(value, tnp.ndarray):
        scalar = isinstance(expected, np.generic)
        readonly = isinstance(expected, np.ndarray) and not expected.flags.writeable
        for wrapper, variable in wrappers:
            if wrapper is value:  # (in-place methods and np.asarray return their argument)
                same = reference is None or any(expected is array and owner is variable
                                                for array, owner in reference.standins)
                return variable if same else NdarrayVariable(variable.tensor, scalar=scalar, readonly=readonly)
        tensor = recorder.variable_of(value.tensor)
        if reference is not None and isinstance(expected, np.ndarray):
            tensor = as_numpy_gives(tx, tensor, value.tensor, expected, reference, what)
        return NdarrayVariable(tensor, scalar=scalar, readonly=readonly)
    if isinstance(value, torch.Tensor):
        return recorder.variable_of(value)
    if isinstance(value, tnp.DType):
        return ConstantVariable(np.dtype(value.name))
    if isinstance(value, type) and issubclass(value, tnp.generic):
        return ConstantVariable(getattr(np, value.__name__))
    if type(value) in (tuple, list):
        parts = expected if isinstance(expected, (tuple, list)) else [None] * len(value)
        items = [_from_numpy_value(tx, recorder, item, wrappers, reference, what, part)
                 for item, part in zip(value, parts)]
        kind = type(expected) if type(expected) in (tuple, list) else type(value)  # (meshgrid: numpy's tuple)
        return TupleVariable(items) if kind is tuple else ListVariable(items)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise StaticShapesNeeded("a symbolic size from torch._numpy")
    if is_constant_value(value):
        return constant(value)
    raise Unsupported(f"torch._numpy returned a {type(value).__name__}")


def check_numpy_convertible(tensor, what: str) -> None:
    """What eager's Tensor.numpy() (and numpy's conversion of a tensor) accepts; else eager raises."""
    example = tensor.example
    if example.requires_grad:
        raise Unsupported(f"{what} that requires grad (eager raises)")
    if example.device.type != "cpu":
        raise Unsupported(f"{what} on {example.device} (eager raises)")
    if example.layout != torch.strided or example.is_conj() or example.is_neg():
        raise Unsupported(f"{what}: not a plain strided tensor")
    if example.dtype in (torch.bfloat16, torch.complex32) or example.dtype.is_floating_point and \
            example.dtype.itemsize == 1 or example.dtype in (torch.uint16, torch.uint32, torch.uint64):
        raise Unsupported(f"{what} of dtype {example.dtype}, which numpy lacks (eager raises)")


def tensor_to_ndarray(tx, tensor, args: list, kwargs: dict) -> VariableTracker:
    """Tensor.numpy(): an ndarray on the same memory."""
    force = kwargs.get("force", args[0] if args else constant(False))
    if len(args) + len(kwargs) > 1 or not force.is_python_constant():
        raise Unsupported("Tensor.numpy() with these arguments")
    check_numpy_convertible(tensor, "Tensor.numpy() of a tensor")  # (force=True would copy: same checks)
    # A new tensor object on the same memory (as torch.compile records it: a view_as node).
    return NdarrayVariable(tx.graph.call(tx, "call_method", "view_as", [tensor, tensor], {}))


# -- variables ------------------------------------------------------------------------------------------
# What numpy has and torch._numpy lacks or cannot do on a traced tensor.
_BREAKING_METHODS = {
    "item": "ndarray.item() reads a value", "tolist": "ndarray.tolist() reads values",
    "__bool__": "bool() of an ndarray depends on its values", "__int__": "int() of an ndarray reads a value",
    "__float__": "float() of an ndarray reads a value", "__complex__": "complex() of an ndarray reads a value",
    "__index__": "an ndarray as an index reads a value", "is_integer": "reads a value",
    "__contains__": "`in` on an ndarray depends on its values", "__str__": "printing reads values",
    "__repr__": "printing reads values", "__dlpack__": "dlpack", "__dlpack_device__": "dlpack",
    "resize": "ndarray.resize() reallocates in place",
}


_METADATA = {
    "shape": lambda t: tuple(int(n) for n in t.shape), "ndim": lambda t: t.dim(), "size": lambda t: int(t.numel()),
    "itemsize": lambda t: t.element_size(), "nbytes": lambda t: int(t.numel()) * t.element_size(),
    "dtype": lambda t: numpy_dtype(t.dtype),
}


class NdarrayVariable(VariableTracker):
    """A numpy.ndarray in the frame: `tensor` (a TensorVariable) holds its values and metadata.
    `scalar`: numpy has a scalar here (np.float32: a.sum(), a[0, 1]), a 0-d ndarray to torch._numpy."""

    def __init__(self, tensor, source=None, scalar: bool = False, readonly: bool = False) -> None:
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar
        self.readonly = readonly  # (numpy's a.imag of a real array: writes raise there)

    def python_type(self) -> type:
        if self.scalar:
            return numpy_dtype(self.tensor.example.dtype).type
        return _np().ndarray

    def truth(self, tx) -> bool:
        raise Unsupported("bool() of an ndarray depends on its values")

    def contained_values(self) -> list:
        return [self.tensor]

    def reconstruct_expr(self, codegen) -> str:
        return f"{codegen.reconstruct(self.tensor)}.numpy(force=True){'[()]' if self.scalar else ''}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METADATA:  # (from the fake: no stand-in, whatever the array's size)
            example = self.tensor.example
            if has_symbols(example.shape) or has_symbols(example.stride()):
                raise StaticShapesNeeded(f"ndarray.{name} of a tensor with dynamic sizes")
            return ConstantVariable(_METADATA[name](example))
        attribute = _tnp_attribute(name)
        if name in ("flags", "data", "flat", "base"):
            raise Unsupported(f"ndarray.{name} reaches the array's memory")
        if isinstance(attribute, property):
            read = lambda array: getattr(array, name)  # noqa: E731 (the same on tnp and numpy arrays)
            return call_numpy(tx, read, [self], {}, f"ndarray.{name}", read)
        if callable(attribute):
            return SpelledMethodVariable(self, name)  # (`a.reshape` before it is called)
        raise Unsupported(f"ndarray.{name}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in _BREAKING_METHODS:
            raise Unsupported(_BREAKING_METHODS[name])
        if name == "__len__":
            if not self.tensor.example.dim():
                raise UserException(TypeError("len() of unsized object"))
            return constant(int(self.tensor.example.shape[0]))
        if name in ("__getitem__", "__setitem__"):
            _check_index(args[0])
        _tnp_attribute(name)

        def method(array, *rest, **named):  # (the same on tnp and numpy arrays)
            return getattr(array, name)(*rest, **named)

        return call_numpy(tx, method, [self, *args], kwargs, f"ndarray.{name}", method)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        example = self.tensor.example
        if example.dim() == 0:
            raise UserException(TypeError("iteration over a 0-d array"))
        return [self.call_method(tx, "__getitem__", [constant(index)], {}) for index in range(example.shape[0])]

    def __repr__(self) -> str:
        return f"NdarrayVariable({self.tensor!r})"


def _tnp_attribute(name: str) -> Any:
    """tnp.ndarray's attribute `name`; else a break (numpy has it) or eager's AttributeError."""
    attribute = getattr(_tnp().ndarray, name, None)
    if attribute is None:
        if hasattr(_np().ndarray, name):
            raise Unsupported(f"ndarray.{name} (not in torch._numpy)")
        raise UserException(AttributeError(f"'numpy.ndarray' object has no attribute '{name}'"))
    return attribute


def _check_index(index: VariableTracker) -> None:
    """Indices numpy and torch._numpy agree on: constants, slices, ndarrays, tuples of those."""
    if isinstance(index, TupleVariable):
        for item in index.items:
            _check_index(item)
    elif isinstance(index, TensorVariable):
        raise Unsupported("indexing an ndarray with a tensor")


class NumpyFunctionVariable(CallableValueVariable):
    """A numpy function, ufunc or scalar type; `counterpart`: torch._numpy's (None: folded or
    not captured)."""

    def __init__(self, function: Any, counterpart: Any, source=None) -> None:
        super().__init__(function, source)
        self.counterpart = counterpart

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        function = self.function
        name = getattr(function, "__qualname__", None) or getattr(function, "__name__", repr(function))
        if _is_random(function):
            raise Unsupported(f"numpy.random.{getattr(function, '__name__', name)} uses numpy's global generator "
                              f"(not captured: torch's generator would give other numbers)")
        values = [*args, *kwargs.values()]
        constant_args = all(value.is_python_constant() for value in values)
        if constant_args and (self.counterpart is None or isinstance(function, type) or
                              getattr(function, "__name__", None) in _FOLDED_NAMES):
            # np.dtype('float'), np.finfo(np.float32), np.float32(1.5): computed on constants
            return run_for_real(tx, function, args, kwargs)
        if self.counterpart is None:
            raise Unsupported(f"numpy.{name} (no torch._numpy counterpart, or non-constant arguments)")
        if isinstance(function, type):
            raise Unsupported(f"numpy.{name} of an array")
        return call_numpy(tx, self.counterpart, args, kwargs, f"numpy.{name}", function)

    def __repr__(self) -> str:
        return f"NumpyFunctionVariable({getattr(self.function, '__name__', self.function)})"


class FromNumpyVariable(VariableTracker):
    """torch.from_numpy: the ndarray's tensor, as a new tensor object on the same memory."""

    def static_value(self) -> Any:
        return torch.from_numpy

    def python_type(self) -> type:
        return type(torch.from_numpy)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs or not isinstance(args[0], NdarrayVariable):
            raise Unsupported("torch.from_numpy of something other than an ndarray of the frame")
        tensor = args[0].tensor
        return tx.graph.call(tx, "call_method", "view_as", [tensor, tensor], {})


def ndarray_binary_op(tx, function, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """`a + b`, `a += 1`, `a < b` where an operand is an ndarray; None when neither is."""
    if not (isinstance(left, NdarrayVariable) or isinstance(right, NdarrayVariable)):
        return None
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        raise Unsupported("an operator between an ndarray and a tensor")
    if isinstance(left, NdarrayVariable) and left.scalar and function in INPLACE_TO_BINARY:
        function = INPLACE_TO_BINARY[function]  # (a numpy scalar is immutable: `s += 1` makes a new one)
    return call_numpy(tx, function, [left, right], {}, f"operator.{function.__name__}", function)


def ndarray_unary_op(tx, function, value: VariableTracker) -> VariableTracker | None:
    if not isinstance(value, NdarrayVariable):
        return None
    return call_numpy(tx, function, [value], {}, f"operator.{function.__name__}", function)


def graph_scalar(value: Any) -> Any:
    """A numpy scalar handed to a torch operator: the Python number torch reads it as."""
    np = _np()
    if np is not None and isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            raise Unsupported("a numpy bool passed to a torch operator")
        return value.item()
    return value
