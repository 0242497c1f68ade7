"""Convolution-net ops: conv2d, batch_norm (training, with running statistics) and 2-D pooling
on 4-D float tensors.  The "conv" mode draws them with channels-last convolutions on for the CPU
(autograd/conv_layout.py, on by default only on CUDA), so the memory order they bring carries
through pointwise ops, reductions, views and in-place writes into what eager returns."""
from __future__ import annotations

import torch

from .ops_common import both, is_float, need, ranked
from .oppool import op


def _image(tensor) -> bool:
    return tensor.dtype in (torch.float32, torch.float64) and tensor.dim() == 4 and tensor.numel() > 0


@op("conv", 4)
def conv2d(builder):
    x = need(builder.pick(both(is_float, ranked(4, 4), _image)))
    tensor = builder.tensor(x)
    _, channels, height, width = tensor.shape
    kernel = builder.choice([k for k in (1, 1, 2, 3) if k <= max(height, width)] or [1])
    padding = builder.choice([0, 0, 1]) if kernel > 1 else 0
    if kernel > min(height, width) + 2 * padding:
        kernel, padding = 1, 0
    groups = builder.choice([1, 1, channels]) if channels > 1 else 1
    outputs = groups * builder.choice([1, 2]) if groups > 1 else builder.choice([1, 2, 3, 4, 8])
    weight = builder.new_input((outputs, channels // groups, kernel, kernel), tensor.dtype)
    bias = builder.new_input((outputs,), tensor.dtype) if builder.chance(0.6) else "None"
    stride = builder.choice([1, 1, 2])
    return builder.emit(f"F.conv2d({x}, {weight}, {bias}, stride={stride}, padding={padding}, groups={groups})",
                        "conv2d")


@op("conv", 2)
def batch_norm(builder):
    x = need(builder.pick(both(is_float, ranked(4, 4), _image)))
    tensor = builder.tensor(x)
    channels = tensor.shape[1]
    if tensor.numel() // channels < 2:
        return None
    weight = builder.new_input((channels,), tensor.dtype) if builder.chance(0.7) else "None"
    bias = builder.new_input((channels,), tensor.dtype) if builder.chance(0.7) else "None"
    stats = f"torch.zeros({channels}, dtype={x}.dtype, device={x}.device), " \
            f"torch.ones({channels}, dtype={x}.dtype, device={x}.device)"
    training = builder.choice(["True", "True", "False"])
    if training == "False" and weight != "None":
        # eager's CPU backward in eval mode (torch 2.13) reads a strided weight as contiguous when
        # grad_output is contiguous (fuzz conv 8549: weight g[::2], input grad b * invstd from
        # g[:4]); ember's gradient is the formula's, so the weight is given contiguous
        weight = f"{weight}.contiguous()"
    return builder.emit(f"F.batch_norm({x}, {stats}, {weight}, {bias}, training={training})", "batch_norm")


@op("conv", 1)
def pool2d(builder):
    x = need(builder.pick(both(is_float, ranked(4, 4), _image)))
    tensor = builder.tensor(x)
    if min(tensor.shape[2:]) < 2:
        return builder.emit(f"F.adaptive_avg_pool2d({x}, 1)", "adaptive_avg_pool2d")
    name = builder.choice(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"])
    if name == "adaptive_avg_pool2d":
        return builder.emit(f"F.adaptive_avg_pool2d({x}, 1)", name)
    return builder.emit(f"F.{name}({x}, 2)", name)
