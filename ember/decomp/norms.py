"""layer_norm (forward, backward) and batch_norm (forward with running statistics, backward)."""
import math

import torch

from . import divide_by_count, downcast, register, upcast

aten = torch.ops.aten


@register(aten.native_layer_norm.default)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    axis = x.dim() - len(normalized_shape)
    dims = list(range(axis, x.dim()))
    (compute,) = upcast(x)
    var, mean = aten.var_mean.correction(compute, dims, correction=0, keepdim=True)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = aten.mul.Tensor(aten.sub.Tensor(compute, mean), rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    # Eager's kernel adds a bias of +0 when there is none, which turns the -0 of a centered 0 times
    # a negative weight into +0 (1 / out is then inf, not -inf).
    out = downcast(aten.add.Tensor(out, bias if bias is not None else 0.0), x.dtype)
    # Eager's CPU kernel stores the statistics in the input's dtype (its backward reads them so), or
    # float32 for a half input with float32 parameters; its CUDA kernel always in float32.
    stats_dtype = x.dtype
    if x.dtype in (torch.float16, torch.bfloat16) and (x.device.type != "cpu" or any(
            p is not None and p.dtype == torch.float32 for p in (weight, bias))):
        stats_dtype = torch.float32
    return out, downcast(mean, stats_dtype), downcast(rstd, stats_dtype)


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad_out, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    """Eager's CPU kernel's formulas, term for term (in float32 for float16/bfloat16), so that
    infinities and NaNs end up where eager's do:

        ds = sum(dy * x * w), db = sum(dy * w)               (over the normalized dims)
        b = (db * mean - ds) * rstd^3 / N,  c = -b * mean - db * rstd / N
        dx = rstd * dy * w + b * x + c
        dw = sum(dy * (rstd * x - rstd * mean)),  dbias = sum(dy)   (over the other dims)

    (x_hat-based ones are the same algebra, but a weight of -inf then gives inf where eager's is
    inf - inf = NaN.)  Every term multiplies the one product g = dy * w, so that over one element
    the terms cancel exactly, as in eager's FMA-contracted kernel, leaving no rounding residue."""
    input_dtype = x.dtype
    grad_out, x, mean, rstd, weight_value = upcast(grad_out, x, mean, rstd, weight)
    axis = x.dim() - len(normalized_shape)
    inner_dims = list(range(axis, x.dim()))
    outer_dims = list(range(axis))
    count = math.prod(normalized_shape)
    grad_input = None
    if output_mask[0] and x.device.type == "cuda":
        grad_input = downcast(_cuda_layer_norm_grad_input(grad_out, x, mean, rstd, weight_value, inner_dims, count),
                              input_dtype)
    elif output_mask[0]:
        scaled_grad = aten.mul.Tensor(grad_out, weight_value) if weight is not None else grad_out
        ds = aten.sum.dim_IntList(aten.mul.Tensor(scaled_grad, x), inner_dims, True)
        db = aten.sum.dim_IntList(scaled_grad, inner_dims, True)
        b = aten.sub.Tensor(aten.mul.Tensor(db, mean), ds)
        for _ in range(3):
            b = aten.mul.Tensor(b, rstd)
        b = divide_by_count(b, count)
        c = aten.sub.Tensor(aten.mul.Tensor(aten.neg.default(b), mean),
                            divide_by_count(aten.mul.Tensor(db, rstd), count))
        term = aten.mul.Tensor(scaled_grad, rstd)
        grad_input = downcast(aten.add.Tensor(aten.add.Tensor(term, aten.mul.Tensor(b, x)), c), input_dtype)
    grad_weight = None
    if output_mask[1] and weight is not None:
        if x.device.type == "cuda":  # (its CUDA kernel: dy * ((x - mean) * rstd))
            normalized = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
        else:
            normalized = aten.add.Tensor(aten.mul.Tensor(rstd, x), aten.mul.Tensor(aten.neg.default(rstd), mean))
        grad_weight = aten.mul.Tensor(grad_out, normalized)
        grad_weight = downcast(aten.sum.dim_IntList(grad_weight, outer_dims, False) if outer_dims else grad_weight,
                               weight.dtype)
    grad_bias = None
    if output_mask[2] and bias is not None:
        grad_bias = downcast(aten.sum.dim_IntList(grad_out, outer_dims, False) if outer_dims
                             else aten.clone.default(grad_out), bias.dtype)
    return grad_input, grad_weight, grad_bias


def _cuda_layer_norm_grad_input(grad_out, x, mean, rstd, weight, inner_dims, count):
    """Eager's CUDA kernel's input gradient, term for term (x_hat-based, unlike its CPU kernel's):

        s1 = sum(dy * w), s2 = sum(dy * w * (x - mean) * rstd)
        dx = (N * w * dy - (x - mean) * rstd * s2 - s1) * (rstd / N)

    so that a weight of -inf gives -inf where eager's does, not the CPU formula's NaN."""
    scaled_grad = aten.mul.Tensor(grad_out, weight) if weight is not None else grad_out
    normalized = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    s1 = aten.sum.dim_IntList(scaled_grad, inner_dims, True)
    s2 = aten.sum.dim_IntList(aten.mul.Tensor(scaled_grad, normalized), inner_dims, True)
    scaled_count = aten.mul.Tensor(weight, float(count)) if weight is not None else float(count)
    grad = aten.mul.Tensor(grad_out, scaled_count)
    grad = aten.sub.Tensor(aten.sub.Tensor(grad, aten.mul.Tensor(normalized, s2)), s1)
    return aten.mul.Tensor(grad, aten.mul.Tensor(rstd, 1.0 / count))


def _stats_dtype(x, *params):
    """Eager keeps batch-norm statistics in the parameters' dtype (float32 running stats of a
    float16 input stay float32), else in the input's; its CUDA kernels save them in float32
    for a float16 or bfloat16 input whatever the parameters'."""
    if x.device.type == "cuda" and x.dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return next((p.dtype for p in params if p is not None), x.dtype)


def _cpu_vectorized(x) -> bool:
    """Does eager's CPU batch norm take its vectorized kernel for this input (contiguous, or
    channels-last), not its generic one?"""
    if x.is_contiguous():
        return True
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    return x.dim() in formats and x.is_contiguous(memory_format=formats[x.dim()])


def _channel_dims(x):
    """The dims batch norm reduces over (all but the channels, dim 1), and a function viewing a
    per-channel vector so that it broadcasts against x."""
    broadcast = [1, x.shape[1]] + [1] * (x.dim() - 2)
    return [0] + list(range(2, x.dim())), lambda value: aten.view.default(value, broadcast)


@register(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    input_dtype = x.dtype
    stats_dtype = _stats_dtype(x, weight, bias, running_mean, running_var)
    x, weight, bias = upcast(x, weight, bias)
    reduce_dims, per_channel = _channel_dims(x)
    if training:
        # Eager's CPU kernel sums a float32 input's statistics in double (squares near 1e38 overflow
        # float); its vectorized kernel (contiguous or channels-last input) then goes on in float,
        # its generic one takes invstd in double too
        # (test_batch_norm_statistics_of_huge_float32_values_on_the_cpu_are_summed_wide).
        wide = x.device.type == "cpu" and x.dtype == torch.float32
        var, mean = aten.var_mean.correction(aten._to_copy.default(x, dtype=torch.float64) if wide else x,
                                             reduce_dims, correction=0, keepdim=False)
        if wide and _cpu_vectorized(x):
            var, mean = downcast(var, torch.float32), downcast(mean, torch.float32)
        invstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
        if wide:
            mean, invstd = downcast(mean, torch.float32), downcast(invstd, torch.float32)
        count = x.numel() // x.shape[1]
        if running_mean is not None:
            (old_mean,) = upcast(running_mean)
            updated = aten.add.Tensor(aten.mul.Tensor(old_mean, 1 - momentum), aten.mul.Tensor(mean, momentum))
            aten.copy_.default(running_mean, updated)
        if running_var is not None:
            (old_var,) = upcast(running_var)
            unbiased = aten.mul.Tensor(var, count / max(count - 1, 1))
            updated = aten.add.Tensor(aten.mul.Tensor(old_var, 1 - momentum), aten.mul.Tensor(unbiased, momentum))
            aten.copy_.default(running_var, updated)
        center, scale = mean, invstd
        save_mean, save_invstd = downcast(mean, stats_dtype), downcast(invstd, stats_dtype)
    else:
        center, running_var_value = upcast(running_mean, running_var)
        scale = aten.rsqrt.default(aten.add.Tensor(running_var_value, eps))
        save_mean = aten.new_zeros.default(running_mean, [0])
        save_invstd = aten.new_zeros.default(running_mean, [0])
    if x.device.type == "cpu" and _cpu_vectorized(x):
        # Eager's vectorized CPU kernel computes x * alpha + beta per channel, alpha = invstd * weight,
        # beta = bias - mean * alpha: with invstd 0 that is 0 where (x - mean) * invstd is inf * 0
        alpha = scale if weight is None else aten.mul.Tensor(scale, weight)
        # (no bias: 0 - mean * alpha, written -(mean * alpha) + 0 so that a 0 comes out +0)
        beta = aten.add.Tensor(aten.neg.default(aten.mul.Tensor(center, alpha)), 0.0) if bias is None else \
            aten.sub.Tensor(bias, aten.mul.Tensor(center, alpha))
        out = aten.add.Tensor(aten.mul.Tensor(x, per_channel(alpha)), per_channel(beta))
        return downcast(out, input_dtype), save_mean, save_invstd
    out = aten.mul.Tensor(aten.sub.Tensor(x, per_channel(center)), per_channel(scale))
    if weight is not None:
        out = aten.mul.Tensor(out, per_channel(weight))
    # Eager's kernel computes x * alpha + (bias - mean * alpha), bias 0 when there is none: a
    # centered 0 comes out +0 whatever the weight's sign (see native_layer_norm).
    out = aten.add.Tensor(out, per_channel(bias) if bias is not None else 0.0)
    return downcast(out, input_dtype), save_mean, save_invstd


@register(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(grad_out, x, weight, running_mean, running_var, save_mean, save_invstd, train,
                               eps, output_mask):
    input_dtype = x.dtype
    grad_out, x, weight_value, running_mean, running_var, save_mean, save_invstd = upcast(
        grad_out, x, weight, running_mean, running_var, save_mean, save_invstd)
    reduce_dims, per_channel = _channel_dims(x)
    count = x.numel() // x.shape[1]
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean, invstd = running_mean, aten.rsqrt.default(aten.add.Tensor(running_var, eps))
    centered = aten.sub.Tensor(x, per_channel(mean))
    grad_sum = aten.sum.dim_IntList(grad_out, reduce_dims)
    dot = aten.sum.dim_IntList(aten.mul.Tensor(grad_out, centered), reduce_dims)
    scale = invstd if weight is None else aten.mul.Tensor(invstd, weight_value)
    grad_input = None
    if output_mask[0]:
        if train:
            projection = aten.mul.Tensor(divide_by_count(dot, count), aten.mul.Tensor(invstd, invstd))
            grad_mean = divide_by_count(grad_sum, count)
            inner = aten.sub.Tensor(aten.sub.Tensor(grad_out, aten.mul.Tensor(centered, per_channel(projection))),
                                    per_channel(grad_mean))
            grad_input = aten.mul.Tensor(inner, per_channel(scale))
        else:
            grad_input = aten.mul.Tensor(grad_out, per_channel(scale))
        grad_input = downcast(grad_input, input_dtype)
    param_dtype = weight.dtype if weight is not None else input_dtype
    grad_weight = downcast(aten.mul.Tensor(dot, invstd), param_dtype) if output_mask[1] else None
    grad_bias = downcast(grad_sum, param_dtype) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


@register(aten.batch_norm_backward.default)
def batch_norm_backward(grad_out, x, weight, running_mean, running_var, save_mean, save_invstd, update, eps,
                        output_mask, reserve):
    return native_batch_norm_backward(grad_out, x, weight, running_mean, running_var, save_mean, save_invstd,
                                      update, eps, output_mask)


@register(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    return native_batch_norm(x, weight, bias, None, None, True, momentum, eps)


def _with_reserve(x, *args):
    """native_batch_norm's results and an empty reserve space (only ever read by the backwards,
    decomposed here too)."""
    return *native_batch_norm(x, *args), aten.empty.memory_format([0], dtype=torch.uint8, device=x.device)


@register(aten._batch_norm_with_update.default)
def batch_norm_with_update(x, weight, bias, running_mean, running_var, momentum, eps):
    return _with_reserve(x, weight, bias, running_mean, running_var, True, momentum, eps)


@register(aten._batch_norm_no_update.default)
def batch_norm_no_update(x, weight, bias, running_mean, running_var, momentum, eps):
    return _with_reserve(x, weight, bias, running_mean, running_var, False, momentum, eps)


@register(aten.cudnn_batch_norm.default)
def cudnn_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """cuDNN's batch norm (what F.batch_norm picks for some CUDA inputs): the same statistics."""
    return _with_reserve(x, weight, bias, running_mean, running_var, training, momentum, eps)


@register(aten.cudnn_batch_norm_backward.default)
def cudnn_batch_norm_backward(x, grad_out, weight, running_mean, running_var, save_mean, save_invstd, eps, reserve):
    """(cuDNN's backward is only recorded for training: it reads the batch statistics.)"""
    return native_batch_norm_backward(grad_out, x, weight, running_mean, running_var, save_mean, save_invstd,
                                      True, eps, [True, True, True])
