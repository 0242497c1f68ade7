"""Random ops: native_dropout as bernoulli + scale (the same random stream as eager's CPU kernel)."""
import torch

from . import register

aten = torch.ops.aten


@register(aten.native_dropout.default)
def native_dropout(x, p, train):
    if not train or p == 0:
        return aten.clone.default(x), aten.ones_like.default(x, dtype=torch.bool)
    if x.device.type != "cpu":
        return NotImplemented  # the fused GPU kernel draws its numbers differently
    keep = 1 - p
    mask = aten.bernoulli.p(aten.empty_like.default(x), keep)
    scale = 0.0 if keep == 0 else 1.0 / keep
    output = aten.mul.Tensor(aten.mul.Tensor(x, mask), scale)
    return output, aten._to_copy.default(mask, dtype=torch.bool)


@register(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    return aten.mul.Tensor(aten.mul.Tensor(grad_output, aten._to_copy.default(mask, dtype=grad_output.dtype)), scale)
