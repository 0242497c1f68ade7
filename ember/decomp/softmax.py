"""softmax / log_softmax and their backwards (computed in float32 for half inputs)."""
import torch

from . import downcast, register, upcast

aten = torch.ops.aten


@register(aten._softmax.default)
def softmax(x, dim, half_to_float):
    if not x.is_floating_point():
        return NotImplemented  # (eager runs it only on an empty tensor: one ATen call, as eager)
    (compute,) = upcast(x)  # (half_to_float is for float16/bfloat16 inputs only)
    shifted = aten.sub.Tensor(compute, aten.amax.default(compute, [dim], True))
    exps = aten.exp.default(shifted)
    result = aten.div.Tensor(exps, aten.sum.dim_IntList(exps, [dim], True))
    return result if half_to_float else downcast(result, x.dtype)


@register(aten._log_softmax.default)
def log_softmax(x, dim, half_to_float):
    if not x.is_floating_point():
        return NotImplemented  # (eager runs it only on an empty tensor: one ATen call, as eager)
    (compute,) = upcast(x)  # (half_to_float is for float16/bfloat16 inputs only)
    shifted = aten.sub.Tensor(compute, aten.amax.default(compute, [dim], True))
    logsum = aten.log.default(aten.sum.dim_IntList(aten.exp.default(shifted), [dim], True))
    result = aten.sub.Tensor(shifted, logsum)
    return result if half_to_float else downcast(result, x.dtype)


@register(aten._softmax_backward_data.default)
def softmax_backward(grad_output, output, dim, input_dtype):
    grad_output, output = upcast(grad_output, output)
    product = aten.mul.Tensor(grad_output, output)
    result = aten.sub.Tensor(product, aten.mul.Tensor(output, aten.sum.dim_IntList(product, [dim], True)))
    return downcast(result, input_dtype)


@register(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad_output, output, dim, input_dtype):
    grad_output, output = upcast(grad_output, output)
    total = aten.sum.dim_IntList(grad_output, [dim], True)
    result = aten.sub.Tensor(grad_output, aten.mul.Tensor(aten.exp.default(output), total))
    return downcast(result, input_dtype)
