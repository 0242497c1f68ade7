"""Loss functions: nll_loss and mse_loss with their backwards."""
import torch

from . import register

aten = torch.ops.aten
_NONE, _MEAN, _SUM = 0, 1, 2


def _zero(x):
    return aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device)


def _valid_targets(target, ignore_index):
    """(target != ignore_index, the target with 0 where it is ignore_index)."""
    valid = aten.ne.Scalar(target, ignore_index)
    zero = aten.scalar_tensor.default(0, dtype=target.dtype, device=target.device)
    return valid, aten.where.self(valid, target, zero)


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
    dim = 1 if x.dim() == 2 else 0
    valid, safe_target = _valid_targets(target, ignore_index)
    picked = aten.squeeze.dim(aten.gather.default(x, dim, aten.unsqueeze.default(safe_target, dim)), dim)
    losses = aten.where.self(valid, aten.neg.default(picked), _zero(x))
    total_weight = aten.sum.default(aten._to_copy.default(valid, dtype=x.dtype))
    if reduction == _NONE:
        return losses, _zero(x)
    total = aten.sum.default(losses)
    if reduction == _MEAN:
        total = aten.div.Tensor(total, total_weight)
    return total, total_weight


@register(aten.nll_loss_backward.default)
def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    if x.dim() > 2 or weight is not None:
        return NotImplemented
    batched = x.dim() == 2
    valid, safe_target = _valid_targets(target, ignore_index)
    grad = aten.div.Tensor(grad_output, total_weight) if reduction == _MEAN else grad_output
    scale = aten.neg.default(grad)
    scale = aten.where.self(valid, scale if reduction == _NONE else aten.expand.default(scale, list(target.shape)),
                            _zero(x))
    # A one-hot select rather than a scatter: pointwise, so it fuses into log_softmax's backward.
    dim = 1 if batched else 0
    classes = aten.arange.default(x.shape[dim], dtype=target.dtype, device=x.device)
    if batched:
        classes = aten.unsqueeze.default(classes, 0)
    hit = aten.eq.Tensor(aten.unsqueeze.default(safe_target, dim), classes)
    return aten.where.self(hit, aten.unsqueeze.default(scale, dim), _zero(x))
