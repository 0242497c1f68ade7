"""Activation functions and their backwards."""
import math

import torch

from . import downcast, register, upcast

aten = torch.ops.aten


@register(aten.gelu.default)
def gelu(x, *, approximate="none"):
    dtype = x.dtype
    (x,) = upcast(x)
    if approximate == "tanh":
        inner = aten.mul.Tensor(aten.add.Tensor(x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, 3), 0.044715)),
                                math.sqrt(2 / math.pi))
        return downcast(aten.mul.Tensor(aten.mul.Tensor(x, 0.5), aten.add.Tensor(aten.tanh.default(inner), 1)), dtype)
    erf = aten.erf.default(aten.mul.Tensor(x, 1 / math.sqrt(2)))
    return downcast(aten.mul.Tensor(aten.mul.Tensor(x, 0.5), aten.add.Tensor(erf, 1)), dtype)


@register(aten.gelu_backward.default)
def gelu_backward(grad, x, *, approximate="none"):
    dtype = grad.dtype
    grad, x = upcast(grad, x)
    if approximate == "tanh":
        k_beta = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5
        x_sq = aten.mul.Tensor(x, x)
        x_cube = aten.mul.Tensor(x_sq, x)
        inner = aten.mul.Tensor(aten.add.Tensor(x, aten.mul.Tensor(x_cube, 0.044715)), k_beta)
        tanh_inner = aten.tanh.default(inner)
        left = aten.mul.Tensor(x, 0.5)
        right = aten.add.Tensor(tanh_inner, 1)
        left_derivative = aten.mul.Tensor(right, 0.5)
        tanh_derivative = aten.rsub.Scalar(aten.mul.Tensor(tanh_inner, tanh_inner), 1)
        inner_derivative = aten.mul.Tensor(aten.add.Tensor(aten.mul.Tensor(x_sq, 3 * 0.044715), 1), k_beta)
        right_derivative = aten.mul.Tensor(aten.mul.Tensor(left, tanh_derivative), inner_derivative)
        return downcast(aten.mul.Tensor(grad, aten.add.Tensor(left_derivative, right_derivative)), dtype)
    cdf = aten.mul.Tensor(aten.add.Tensor(aten.erf.default(aten.mul.Tensor(x, 1 / math.sqrt(2))), 1), 0.5)
    pdf = aten.mul.Tensor(aten.exp.default(aten.mul.Tensor(aten.mul.Tensor(x, x), -0.5)),
                          1 / math.sqrt(2 * math.pi))
    return downcast(aten.mul.Tensor(grad, aten.add.Tensor(cdf, aten.mul.Tensor(x, pdf))), dtype)


@register(aten.silu.default)
def silu(x):
    dtype = x.dtype
    (x,) = upcast(x)
    return downcast(aten.mul.Tensor(x, aten.sigmoid.default(x)), dtype)


@register(aten.silu_backward.default)
def silu_backward(grad, x):
    dtype = grad.dtype
    grad, x = upcast(grad, x)
    sigmoid = aten.sigmoid.default(x)
    one_minus = aten.rsub.Scalar(sigmoid, 1)
    result = aten.mul.Tensor(grad, aten.mul.Tensor(sigmoid, aten.add.Tensor(aten.mul.Tensor(x, one_minus), 1)))
    return downcast(result, dtype)


@register(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    """grad * (1 - tanh^2), from tanh's output, computed in float32 for half inputs as eager's
    kernel does (GPT-2's GELU: an ATen call that split the kernels around it)."""
    if grad_output.is_complex() or output.is_complex():
        return NotImplemented
    dtype = torch.result_type(grad_output, output)
    grad, out = upcast(grad_output, output)
    if out.dtype == torch.float32:
        # eager's kernels compute 1 - b*b as one fused multiply-add (rounded once): in float64,
        # exactly rounded to float32, it is the same number
        wide = aten._to_copy.default(out, dtype=torch.float64)
        one_minus = aten._to_copy.default(aten.rsub.Scalar(aten.mul.Tensor(wide, wide), 1), dtype=torch.float32)
    else:
        one_minus = aten.rsub.Scalar(aten.mul.Tensor(out, out), 1)
    return downcast(aten.mul.Tensor(grad, one_minus), dtype)


@register(aten.threshold_backward.default)
def threshold_backward(grad_output, x, threshold):
    """ReLU's backward: the gradient where the input is above the threshold, else 0."""
    return aten.where.self(aten.le.Scalar(x, threshold), aten.scalar_tensor.default(
        0, dtype=grad_output.dtype, device=grad_output.device), grad_output)
