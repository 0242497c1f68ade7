"""Lowerings for 2-d max pooling and its backward, unrolled over the window (large windows are
left to ATen).

Forward: each output element scans its window in row-major order with ATen's rule (a value
replaces the best when it is greater or NaN), so values and indices match eager exactly.
Backward: each input element gathers, from the few output windows that can contain it, the
gradients whose recorded index is this element: a pointwise loop with no scatter.
"""
from __future__ import annotations

import functools
import math

import sympy
import torch

from .symbolic import static_int
from .ir import Pointwise
from .registry import FallbackNeeded, _size, _val, register

aten = torch.ops.aten
MAX_WINDOW = 49  # positions unrolled per output element


def _pair(value, default=None):
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return [value, value]
    if len(value) == 1:
        return [value[0], value[0]]
    return list(value)


def _params(kernel_size, stride, padding, dilation):
    kernel = _pair(kernel_size)
    return kernel, _pair(stride, kernel), _pair(padding), _pair(dilation)


def _int64(ops, expr):
    return ops.index_expr(sympy.sympify(expr), torch.int64)


def _in_range(ops, expr, low_ok: bool, high_ok: bool, size: int):
    """A bool value `0 <= expr < size`, or None when both sides are known to hold."""
    checks = []
    if not low_ok:
        checks.append(ops.ge(_int64(ops, expr), ops.constant(0, torch.int64)))
    if not high_ok:
        checks.append(ops.lt(_int64(ops, expr), ops.constant(size, torch.int64)))
    return _all(ops, checks)


def _all(ops, checks):
    """The conjunction of the checks that are not None (None if there are none)."""
    checks = [c for c in checks if c is not None]
    return functools.reduce(ops.logical_and, checks) if checks else None


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx, node, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    kernel, stride, padding, dilation = _params(kernel_size, stride, padding, dilation)
    if kernel[0] * kernel[1] > MAX_WINDOW:
        raise FallbackNeeded(f"pooling window of {kernel[0] * kernel[1]} positions (unrolled up to {MAX_WINDOW})")
    values_fake, indices_fake = _val(node)
    out_size = _size(values_fake)
    in_size = x.get_size()
    height, width = static_int(in_size[-2], "max pooling"), static_int(in_size[-1], "max pooling")
    out_h, out_w = static_int(out_size[-2], "max pooling"), static_int(out_size[-1], "max pooling")
    loader = x.make_loader()
    dtype = x.dtype
    if not dtype.is_floating_point:
        raise FallbackNeeded("integer max pooling")

    # For each window offset, whether the row/column is inside the input for every output.
    def inside(k, dim):
        size, out, s, p, d = (height, width)[dim], (out_h, out_w)[dim], stride[dim], padding[dim], dilation[dim]
        return -p + k * d >= 0, (out - 1) * s - p + k * d < size

    def window(ops, index):
        """(value, flat input index, validity or None) per window position, row-major."""
        *batch, oh, ow = index
        positions = []
        for kh in range(kernel[0]):
            h = oh * stride[0] - padding[0] + kh * dilation[0]
            h_low, h_high = inside(kh, 0)
            for kw in range(kernel[1]):
                w = ow * stride[1] - padding[1] + kw * dilation[1]
                w_low, w_high = inside(kw, 1)
                valid = _all(ops, [_in_range(ops, h, h_low, h_high, height),
                                   _in_range(ops, w, w_low, w_high, width)])
                if valid is None:
                    value = loader(ops, [*batch, h, w])
                else:  # outside the input reads -inf, which never wins
                    value = ops.masked(valid, lambda h=h, w=w: loader(ops, [*batch, h, w]), float("-inf"), dtype)
                positions.append((value, h * width + w, valid))
        return positions

    def maximum(ops, positions):
        best = None
        for value, _, _ in positions:  # NaN-propagating max, as ATen's scan computes it
            best = value if best is None else ops.maximum(value, best)
        return best

    def indices_fn(ops, index):
        # ATen replaces the best when a value is greater or NaN, so the index is the last NaN's
        # if there is one, else the first position holding the max (a -inf max included).
        # Written as one compare and select per position so that it vectorizes.
        positions = window(ops, index)
        best = maximum(ops, positions)
        first_max = None
        for value, flat, valid in reversed(positions):
            if first_max is None and valid is None:
                first_max = _int64(ops, flat)
                continue
            if first_max is None:
                first_max = ops.constant(0, torch.int64)
            hit = ops.eq(value, best)
            if valid is not None:
                hit = ops.logical_and(valid, hit)
            first_max = ops.where(hit, _int64(ops, flat), first_max)
        last_nan = ops.constant(0, torch.int64)
        for value, flat, _ in positions:
            last_nan = ops.where(ops.isnan(value), _int64(ops, flat), last_nan)
        return ops.where(ops.isnan(best), last_nan, first_max)

    return (Pointwise(values_fake.device, dtype, out_size, lambda ops, index: maximum(ops, window(ops, index)),
                      ctx.origin()),
            Pointwise(indices_fake.device, torch.int64, out_size, indices_fn, ctx.origin()))


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(ctx, node, grad_output, x, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    kernel, stride, padding, dilation = _params(kernel_size, stride, padding, dilation)
    if dilation != [1, 1]:
        raise FallbackNeeded("dilated max pooling backward")
    out = _val(node)
    in_size = _size(out)
    height, width = static_int(in_size[-2], "max pooling backward"), static_int(in_size[-1], "max pooling backward")
    out_size = grad_output.get_size()
    out_h, out_w = static_int(out_size[-2], "max pooling backward"), static_int(out_size[-1], "max pooling backward")
    grad_loader = grad_output.make_loader()
    index_loader = indices.make_loader()
    dtype = out.dtype
    candidates = [math.ceil(kernel[d] / stride[d]) for d in range(2)]

    def candidate_checks(ops, coordinate, j, dim):
        """Output row/column `floor((coordinate + p) / s) - j`, and a bool (or None) for its validity."""
        s, p, k, size, out = stride[dim], padding[dim], kernel[dim], (height, width)[dim], (out_h, out_w)[dim]
        position = sympy.floor((coordinate + p) / s) - j if s != 1 else coordinate + p - j
        checks = []
        if p // s - j < 0:
            checks.append(ops.ge(_int64(ops, position), ops.constant(0, torch.int64)))
        if (size - 1 + p) // s - j >= out:
            checks.append(ops.lt(_int64(ops, position), ops.constant(out, torch.int64)))
        if (s - 1) + j * s > k - 1:  # the window of that output may end before `coordinate`
            offset = coordinate + p - position * s
            checks.append(ops.le(_int64(ops, offset), ops.constant(k - 1, torch.int64)))
        return position, checks

    def inner_fn(ops, index):
        *batch, h, w = index
        here = _int64(ops, h * width + w)
        total = None
        for jh in range(candidates[0]):
            for jw in range(candidates[1]):
                oh, h_checks = candidate_checks(ops, h, jh, 0)
                ow, w_checks = candidate_checks(ops, w, jw, 1)
                valid = _all(ops, h_checks + w_checks)

                def contribution(oh=oh, ow=ow):
                    picked = ops.eq(index_loader(ops, [*batch, oh, ow]), here)
                    return ops.where(picked, grad_loader(ops, [*batch, oh, ow]), ops.constant(0.0, dtype))

                term = contribution() if valid is None else ops.masked(valid, contribution, 0.0, dtype)
                total = term if total is None else ops.add(total, term)
        return total

    return Pointwise(out.device, dtype, in_size, inner_fn, ctx.origin())
