"""Loss functions: nll_loss and mse_loss with their backwards."""
import torch

from . import register

aten = torch.ops.aten
_NONE, _MEAN, _SUM = 0, 1, 2


def _reduce(value, reduction):
    if reduction == _MEAN:
        return aten.mean.default(value)
    if reduction == _SUM:
        return aten.sum.default(value)
    return value


@register(aten.mse_loss.default)
def mse_loss(x, target, reduction=_MEAN):
    difference = aten.sub.Tensor(x, target)
    return _reduce(aten.mul.Tensor(difference, difference), reduction)


@register(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, x, target, reduction):
    difference = aten.sub.Tensor(x, target)
    if reduction == _MEAN and isinstance(x.numel(), torch.SymInt):  # (dynamic shapes: no SymFloat scale)
        return aten.mul.Tensor(aten.div.Tensor(aten.mul.Tensor(difference, 2.0), x.numel()), grad_output)
    scale = 2.0 / x.numel() if reduction == _MEAN else 2.0
    return aten.mul.Tensor(aten.mul.Tensor(difference, scale), grad_output)


@register(aten.nll_loss_forward.default)
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    if x.dim() > 2 or (weight is not None):
        return NotImplemented
    batched = x.dim() == 2
    safe_target = target
    valid = aten.ne.Scalar(target, ignore_index)
    safe_target = aten.where.self(valid, target, aten.scalar_tensor.default(0, dtype=target.dtype, device=target.device))
    if batched:
        picked = aten.gather.default(x, 1, aten.unsqueeze.default(safe_target, 1))
        picked = aten.squeeze.dim(picked, 1)
    else:
        picked = aten.gather.default(x, 0, aten.unsqueeze.default(safe_target, 0))
        picked = aten.squeeze.dim(picked, 0)
    losses = aten.neg.default(picked)
    zero = aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device)
    losses = aten.where.self(valid, losses, zero)
    total_weight = aten.sum.default(aten._to_copy.default(valid, dtype=x.dtype))
    if reduction == _NONE:
        return losses, aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device)
    total = aten.sum.default(losses)
    if reduction == _MEAN:
        total = aten.div.Tensor(total, total_weight)
    return total, total_weight


@register(aten.nll_loss_backward.default)
def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    if x.dim() > 2 or weight is not None:
        return NotImplemented
    batched = x.dim() == 2
    valid = aten.ne.Scalar(target, ignore_index)
    safe_target = aten.where.self(valid, target, aten.scalar_tensor.default(0, dtype=target.dtype, device=target.device))
    grad = grad_output
    if reduction == _MEAN:
        grad = aten.div.Tensor(grad, total_weight)
    scale = aten.neg.default(grad)
    if reduction == _NONE:
        scale = aten.where.self(valid, scale, aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device))
    else:
        scale = aten.where.self(valid, aten.expand.default(scale, list(target.shape)),
                                aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device))
    # A one-hot select rather than a scatter: pointwise, so it fuses into log_softmax's backward.
    dim = 1 if batched else 0
    classes = aten.arange.default(x.shape[dim], dtype=target.dtype, device=x.device)
    if batched:
        classes = aten.unsqueeze.default(classes, 0)
    hit = aten.eq.Tensor(aten.unsqueeze.default(safe_target, dim), classes)
    return aten.where.self(hit, aten.unsqueeze.default(scale, dim),
                           aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device))
