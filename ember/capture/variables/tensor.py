"""Tensors during capture: an FX node plus a fake tensor with the same metadata.

Every operation adds a node and runs on fake tensors (FakeTensorMode) to learn the result's dtype,
shape and strides.  Facts that depend on values (`bool(t)`, `t.item()`) break the graph.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from ..errors import Unsupported, UserException
from ..shapes import StaticShapesNeeded, has_symbols
from ..sources import AttrSource
from .base import ConstantVariable, VariableTracker, constant, constant_args
from .builder import wrap, wrap_static

# Attributes answered from metadata (static shapes): no node, just a constant.
_METADATA_ATTRS = {
    "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_cpu", "is_sparse", "is_quantized",
    "is_meta", "is_mkldnn", "is_complex_", "layout", "is_nested", "itemsize", "is_leaf",
}
# Attributes that are tensors computed from the tensor: a getattr node.
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
# Methods answered from metadata.
_METADATA_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "element_size",
    "is_floating_point", "is_complex", "get_device", "storage_offset", "is_signed",
    "is_inference", "__len__", "has_names",
}
# Methods whose result depends on tensor values or that reach outside the graph.
_BREAKING_METHODS = {
    "item": "Tensor.item() reads a value (set capture_scalar_outputs to capture it)",
    "tolist": "Tensor.tolist() reads values",
    **{f"__{kind}__": f"{kind}() of a tensor depends on its value" for kind in ("bool", "int", "float")},
    "__index__": "using a tensor as an index depends on its value",
    "data_ptr": "Tensor.data_ptr() is an address",
    "backward": "Tensor.backward() runs autograd",
    "register_hook": "Tensor.register_hook() installs a Python hook",
    "retain_grad": "Tensor.retain_grad() changes autograd state",
    "requires_grad_": "Tensor.requires_grad_() changes an input's autograd state",
    "untyped_storage": "storage access", "storage": "storage access",
    "set_": "Tensor.set_() swaps storage",
    "resize_": "Tensor.resize_() reallocates",
    "share_memory_": "shared memory", "pin_memory": "pinned memory", "record_stream": "streams",
    "__setstate__": "pickling", "__reduce_ex__": "pickling", "__deepcopy__": "copying",
}

# In-place ops whose `value=` must be a Python number.  A tensor there (Adam's step size while compiling)
# is spelled as self.add_(combine(tensor1, tensor2) * value), which takes tensors.
_TENSOR_VALUE_REWRITES = {"addcdiv_": torch.div, "addcmul_": torch.mul}


class TensorVariable(VariableTracker):
    # The real tensor of a graph input (None for tensors the graph computes).
    real_tensor: torch.Tensor | None = None

    def __init__(self, node: torch.fx.Node, example: torch.Tensor, source=None, class_type: type | None = None):
        super().__init__(source)
        self.node = node
        self.example = example
        self.class_type = class_type or torch.Tensor

    def python_type(self) -> type:
        return self.class_type

    def as_proxy(self) -> torch.fx.Node:
        return self.node

    def identity_key(self) -> Any:
        """The tensor as a dict key or set item: one variable stands for one tensor object."""
        return ("tensor", id(self))

    def truth(self, tx) -> bool:
        raise Unsupported("data-dependent branch: bool() of a tensor depends on its value")

    def known_value(self) -> torch.Tensor | None:
        """The value of a small tensor made from constants in the frame (`torch.as_tensor(2)`),
        which fake tensors keep until something writes into it; None when unknown."""
        value = getattr(self.example, "constant", None)
        return value if isinstance(value, torch.Tensor) else None

    # -- attributes ----------------------------------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        example = self.example
        if name == "shape":
            if has_symbols(example.shape):
                return tx.graph.call(tx, "call_method", "size", [self], {})
            return constant(torch.Size(example.shape))
        if name in _METADATA_ATTRS:
            value = getattr(example, name)
            if name == "device" and example.device.type == "meta":
                raise Unsupported("meta device")
            return constant(value)
        if name in _TENSOR_ATTRS:
            return tx.graph.call(tx, "call_function", getattr, [self, constant(name)], {})
        if name == "grad" and self.source is not None and self.real_tensor is not None:
            # An input's .grad is read as it is now (an optimizer after the backward break):
            # another input, or None, guarded like any value found at a source.
            return wrap(tx, self.real_tensor.grad, AttrSource(self.source, "grad"))
        if name in ("grad", "data", "_version", "grad_fn", "_base", "names"):
            raise Unsupported(f"Tensor.{name} reads autograd or storage state")
        if name == "__class__":
            return wrap_static(tx, self.class_type)
        if hasattr(torch.Tensor, name) and callable(getattr(torch.Tensor, name)):
            return TensorMethodVariable(self, name)
        if not hasattr(torch.Tensor, name) and (self.source is not None or self.class_type is torch.Tensor):
            if self.source is not None:
                # A plain tensor has no such attribute unless someone set it on this object.
                tx.graph.guards.add(f"{name!r} not in {self.source.expr()}.__dict__",
                                    f"{self.source.expr()} has no attribute {name!r}")
            raise UserException(AttributeError(f"'Tensor' object has no attribute '{name}'"))
        raise Unsupported(f"attribute Tensor.{name}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "requires_grad_" and self._asks_for_its_own_requires_grad(args, kwargs):
            return self  # a no-op (transformers' enable_input_require_grads hook on an embedding)
        if name == "numpy":  # an ndarray on this tensor's memory (numpy_arrays.py)
            from .numpy_arrays import tensor_to_ndarray

            return tensor_to_ndarray(tx, self, args, kwargs)
        if name in _BREAKING_METHODS:
            if not (name == "item" and tx.config.capture_scalar_outputs):
                raise Unsupported(_BREAKING_METHODS[name])
        if name in _METADATA_METHODS:
            const_args, const_kwargs = constant_args(args, kwargs)
            if name == "__len__" and self.example.dim() == 0:
                raise Unsupported("len() of a 0-d tensor")
            value = getattr(self.example, name)(*const_args, **const_kwargs)
            if has_symbols(value):  # dynamic sizes: graph nodes holding the ShapeEnv's symbols
                if name == "__len__":
                    return tx.graph.call(tx, "call_method", "size", [self, constant(0)], {})
                if name in ("size", "stride", "numel", "nelement"):
                    method = "numel" if name == "nelement" else name
                    return tx.graph.call(tx, "call_method", method, [self, *args], kwargs)
                raise StaticShapesNeeded(f"Tensor.{name}() of a tensor with dynamic sizes")
            if isinstance(value, torch.Size):
                value = torch.Size(value)
            return constant(value)
        rewrite = _TENSOR_VALUE_REWRITES.get(name)
        if rewrite is not None and len(args) == 2 and isinstance(kwargs.get("value"), TensorVariable):
            combined = tx.graph.call(tx, "call_function", rewrite, list(args), {})
            scaled = tx.graph.call(tx, "call_function", torch.mul, [combined, kwargs["value"]], {})
            return self.call_method(tx, "add_", [scaled], {})
        if name == "type" and not args and not kwargs:
            return constant(self.example.type())
        if name == "__getitem__":
            return tx.graph.call(tx, "call_function", operator.getitem, [self, *args], {})
        if name == "__setitem__":
            tx.graph.call(tx, "call_function", operator.setitem, [self, *args], {})
            return constant(None)
        if name == "__contains__":
            raise Unsupported("`in` on a tensor depends on its values")
        result = tx.graph.call(tx, "call_method", name, [self, *args], kwargs)
        if is_inplace_method(name) and isinstance(result, TensorVariable):
            # In-place ops return their first argument: keep Python identity.
            self.node, self.example = result.node, result.example
            return self
        # `x.float()`, `x.contiguous()`, `x.to(x.dtype)` return x itself when nothing changes
        # (the fake op returns the same fake): `is` answers as in eager.
        from .torch_functions import _same_object_as_argument

        return _same_object_as_argument(result, [self, *args, *kwargs.values()])

    def _asks_for_its_own_requires_grad(self, args: list, kwargs: dict) -> bool:
        """`t.requires_grad_(flag)` where t already is so: nothing changes, nothing to break for."""
        flag = kwargs.get("requires_grad", args[0] if args else None)
        if flag is None:
            requested = True
        elif isinstance(flag, ConstantVariable):
            requested = bool(flag.value)
        else:
            return False
        return len(args) + len(kwargs) <= 1 and requested == self.example.requires_grad

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        if self.example.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor")
        return [tx.graph.call(tx, "call_function", operator.getitem, [self, constant(index)], {})
                for index in range(self.example.shape[0])]

    def __repr__(self) -> str:
        shape = list(self.example.shape)
        return f"TensorVariable({self.node.name}: {str(self.example.dtype).replace('torch.', '')}{shape})"


class TensorMethodVariable(VariableTracker):
    """`t.add` before it is called."""

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        super().__init__()
        self.tensor = tensor
        self.name = name

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.tensor.call_method(tx, self.name, args, kwargs)

    def python_type(self) -> type:
        return type(torch.empty(0).add)


def is_inplace_method(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__") and name not in ("requires_grad_",)
