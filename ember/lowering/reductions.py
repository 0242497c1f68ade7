"""Reductions: `reduction()` builds a Reduction over the reduced dims; sum, mean, var/std
(Welford), amax/amin, prod, any/all, argmax/argmin."""
from __future__ import annotations

import sympy
import torch

from ..graph_patterns import CENTERS_ITS_INPUT, centers_its_input
from .indexing import view_reindex
from .ir import Pointwise, Reduction, ReductionSpec, View
from .pointwise import pointwise
from .registry import _dim, FallbackNeeded, _LOW_PRECISION, _may_be_zero, register, _size, _val
from .symbolic import ShapesNotSupported, is_symbolic, provably_nonnegative

aten = torch.ops.aten

_NO_IDENTITY = ("max", "min", "argmax", "argmin")


def reduction(ctx, node, x, dims, keepdim: bool, reduction_type: str, dtype: torch.dtype | None = None,
              out=None, result_dtype: torch.dtype | None = None):
    """`x` reduced over `dims`, stored; `out` (default: the node's value) gives the result's
    shape and, unless `result_dtype` says otherwise, its dtype."""
    out = _val(node) if out is None else out
    size = x.get_size()
    rank = len(size)
    dims = sorted({_dim(d, rank) for d in (range(rank) if dims is None or dims == [] else dims)})
    if rank == 0:
        dims = []  # dim 0 or -1 of a 0-d tensor: its one element
    kept = [d for d in range(rank) if d not in dims]
    reduction_ranges = [size[d] for d in dims] or [sympy.Integer(1)]
    if reduction_type in _NO_IDENTITY and any(r == 0 for r in reduction_ranges):
        # eager raises; so does the ATen call, on every run (test_max_min_over_an_empty_dim_raises_as_eager)
        raise FallbackNeeded(f"{reduction_type} over an empty dim has no value")
    if reduction_type in _NO_IDENTITY + ("welford_mean", "welford_m2") and any(_may_be_zero(r) for r in reduction_ranges):
        raise ShapesNotSupported(f"{reduction_type} over {reduction_ranges} elements, which may be none")
    out_size = _size(out)
    loader = x.make_loader()
    compute = dtype or (out.dtype if reduction_type not in ("argmax", "argmin") else x.dtype)
    compute = _LOW_PRECISION.get(compute, compute)  # accumulate float16/bfloat16 in float32

    def inner_fn(ops, index, rindex):
        full = [None] * rank
        out_positions = [d for d in range(rank) if keepdim or d in kept]
        index_by_dim = dict(zip(out_positions, index))
        for d in kept:
            full[d] = index_by_dim[d]
        for d, r in zip(dims, rindex):
            full[d] = r
        value = loader(ops, full)
        return ops.to_dtype(value, compute) if x.dtype != compute else value

    spec = ReductionSpec(reduction_type, reduction_ranges, compute)
    node_ir = Reduction(out.device, result_dtype or out.dtype, out_size, inner_fn, spec, ctx.origin())
    return ctx.store(node_ir)


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(ctx, node, x, dims=None, keepdim=False, *, dtype=None):
    out = _val(node)
    return reduction(ctx, node, x, dims, keepdim, "sum", out.dtype)


def _count_value(ops, count, dtype):
    """An element count as a value of `dtype` (a size expression computed in the kernel)."""
    return ops.index_expr(count, dtype) if is_symbolic(count) else ops.constant(float(count), dtype)


def _reduced_count(x, dims):
    """How many elements of `x` each output of a reduction over `dims` (None or []: all) combines
    (an int, or a sympy expression of the sizes)."""
    size = x.get_size()
    rank = len(size)
    count = sympy.Integer(1)
    for d in (range(rank) if not dims or rank == 0 else {_dim(d, rank) for d in dims}):
        count = count * size[d]
    return int(count) if count.is_number else count


@register(aten.mean.dim, aten.mean.default)
def mean(ctx, node, x, dims=None, keepdim=False, *, dtype=None):
    out = _val(node)
    # ATen's CPU mean of float16/bfloat16 sums and divides in float32 and rounds once (a sum
    # rounded first overflows float16, or rounds twice).
    compute = _LOW_PRECISION.get(out.dtype, out.dtype)
    total = reduction(ctx, node, x, dims, keepdim, "sum", out.dtype, result_dtype=compute)
    count = _reduced_count(x, dims)
    if not _centers_its_input(node) or _may_be_zero(count):
        return pointwise(ctx, node, "truediv", [total, count if is_symbolic(count) else float(count)],
                         input_dtypes=[compute, compute])
    # x - mean(x) (a centering, as var's backward): a row of equal values must give exactly 0, as
    # eager's pairwise-summed mean does, but a running sum rounds.  Where the row's largest and
    # smallest values are equal (and the sum finite) the mean is that value (+0 for -0.0s).
    largest = reduction(ctx, node, x, dims, keepdim, "max", compute, result_dtype=compute)
    smallest = reduction(ctx, node, x, dims, keepdim, "min", compute, result_dtype=compute)
    loaders = [value.make_loader() for value in (total, largest, smallest)]

    def exact_if_equal(ops, index):
        sum_value, high, low = (load(ops, index) for load in loaders)
        mean_value = ops.truediv(sum_value, _count_value(ops, count, compute))
        equal = ops.logical_and(ops.eq(high, low), ops.logical_not(ops.isinf(sum_value)))
        value = ops.where(equal, ops.add(high, ops.constant(0.0, compute)), mean_value)
        return ops.to_dtype(value, out.dtype) if compute != out.dtype else value

    return Pointwise(out.device, out.dtype, _size(out), exact_if_equal, ctx.origin())


def _centers_its_input(node) -> bool:
    """Is `mean(x)` subtracted from that same x, here or, before the joint graph was partitioned,
    in the backward (graph_patterns.centering_means)?"""
    return bool(node.meta.get(CENTERS_ITS_INPUT)) or centers_its_input(node)


def _welford(ctx, node, x, dims, correction, keepdim, out, root: bool = False):
    """mean and the sum of squared deviations (m2) in one Welford pass, then var = m2 / (n - correction)
    (its square root, the std, if `root`).  Both kept in float32 for half inputs (m2 overflows
    float16); the variance is rounded to the output dtype only after the square root."""
    count = _reduced_count(x, dims)
    dims = None if not dims else list(dims)
    stats_dtype = _LOW_PRECISION.get(out.dtype, out.dtype)
    mean = reduction(ctx, node, x, dims, keepdim, "welford_mean", out=out, result_dtype=stats_dtype)
    m2 = reduction(ctx, node, x, dims, keepdim, "welford_m2", out=out, result_dtype=stats_dtype)
    m2.data.partner = mean.data.partner = (mean.name, m2.name)
    correction = 1 if correction is None else correction
    if is_symbolic(count):
        if not provably_nonnegative(count - correction):
            raise ShapesNotSupported(f"{node.target} with correction {correction} over {count} elements")
        divisor = sympy.expand(count - correction)
    else:
        divisor = float(max(count - correction, 0))

    m2_loader, mean_loader = m2.make_loader(), mean.make_loader()

    def variance(ops, index):
        value = ops.truediv(m2_loader(ops, index), _count_value(ops, divisor, stats_dtype))
        value = ops.sqrt(value) if root else value
        return ops.to_dtype(value, out.dtype) if stats_dtype != out.dtype else value

    def mean_value(ops, index):
        if count == 0:  # the mean of nothing is NaN, as in eager
            return ops.constant(float("nan"), out.dtype)
        value = mean_loader(ops, index)
        return ops.to_dtype(value, out.dtype) if stats_dtype != out.dtype else value

    var = Pointwise(out.device, out.dtype, _size(out), variance, ctx.origin())
    mean_result = Pointwise(out.device, out.dtype, _size(out), mean_value, ctx.origin()) \
        if count == 0 or stats_dtype != out.dtype else mean
    return var, mean_result


@register(aten.var_mean.correction, aten.var.correction, aten.std.correction)
def var_std(ctx, node, x, dims=None, *, correction=None, keepdim=False):
    if not x.dtype.is_floating_point:
        raise FallbackNeeded(f"{node.target} of an integer tensor")
    value = _val(node)
    variance, mean = _welford(ctx, node, x, dims, correction, keepdim, value[0] if isinstance(value, tuple) else value,
                              root=node.target is aten.std.correction)
    if node.target is not aten.var_mean.correction:
        return variance
    count = _reduced_count(x, dims)
    rank = len(x.get_size())
    every_dim = not dims or rank == 0 or len({_dim(d, rank) for d in dims}) == rank
    if count != 0 and every_dim:
        # Over every dim eager's mean is sum / n (over some dims it is Welford's, as here), which
        # Welford's running mean, rounding at every step, is not (test_var_mean_returns_the_mean_eager_returns).
        # The sum fuses into the Welford kernel.
        want = _val(node)[1]
        stats_dtype = _LOW_PRECISION.get(want.dtype, want.dtype)
        # ATen's CPU Welford accumulates in double (test_var_mean_over_every_dim_sums_in_double_as_eager)
        if want.device.type == "cpu":
            stats_dtype = torch.float64
        total = reduction(ctx, node, x, None if not dims else list(dims), keepdim, "sum", stats_dtype, out=want,
                          result_dtype=stats_dtype)

        welford_mean, running_loader, total_loader = mean, mean.make_loader(), total.make_loader()

        def mean_value(ops, index):
            value = ops.truediv(total_loader(ops, index), _count_value(ops, count, stats_dtype))
            # A sum that is not finite (an inf or NaN, or an overflow) gives way to Welford's mean,
            # as eager's (test_var_mean_of_a_row_with_inf_gives_eagers_nan_or_inf).
            running = running_loader(ops, index)
            if welford_mean.dtype != stats_dtype:
                running = ops.to_dtype(running, stats_dtype)
            value = ops.where(ops.isinf(value), running, ops.where(ops.isnan(value), running, value))
            return ops.to_dtype(value, want.dtype) if stats_dtype != want.dtype else value

        mean = Pointwise(want.device, want.dtype, _size(want), mean_value, ctx.origin())
    return variance, mean


@register(aten.amax.default, aten.max.default, aten.amin.default, aten.min.default)
def amax(ctx, node, x, dims=(), keepdim=False):
    kind = "max" if node.target in (aten.amax.default, aten.max.default) else "min"
    return reduction(ctx, node, x, list(dims), keepdim, kind)


@register(aten.prod.default, aten.prod.dim_int)
def prod(ctx, node, x, dim=None, keepdim=False, *, dtype=None):
    dims = None if dim is None or isinstance(dim, torch.dtype) else [dim]
    return reduction(ctx, node, x, dims, keepdim, "prod", _val(node).dtype)


@register(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim, aten.all.dims)
def any_all(ctx, node, x, dim=None, keepdim=False):
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    kind = "any" if node.target in (aten.any.default, aten.any.dim, aten.any.dims) else "all"
    return reduction(ctx, node, x, dims, keepdim, kind, torch.bool)


@register(aten.argmax.default, aten.argmin.default)
def argmax(ctx, node, x, dim=None, keepdim=False):
    kind = "argmax" if node.target is aten.argmax.default else "argmin"
    if dim is None:
        flat = View(x, [x.numel()], view_reindex(x.get_size(), [x.numel()]))
        return reduction(ctx, node, flat, [0], False, kind)
    return reduction(ctx, node, x, [dim], keepdim, kind)


