"""Ill-conditioned sums: where any summation order is as right as eager's.

`x.sum()` over values like [1.7e38, 0.3, -1.7e38, 0.5] has no well-defined float answer: whether
the small terms survive depends on the order of the additions (eager's cascade, a vectorized
kernel's lanes, even a float64 reference loses them). Compared element by element, such a
result says nothing about the compiler. While the float64 reference runs, this mode watches
every summing op and measures how much cancellation it does: the rounding error bound of a sum,
eps * sum(|terms|), against the size of the result. A program with a sum whose bound exceeds
its result (beyond the tolerance) is ill-conditioned: a value mismatch in it is reported as
such, not as a wrong result. So does a normalization (layer_norm, var, std) of a row whose
spread is rounding error or whose squares overflow float32 (eager's CPU layer_norm statistics
even come out NaN for a constant row of 1e20: the combine of its vector lanes multiplies
mean^2 = inf by a weight of 0; seed 19579), and sin/cos/tan of an argument so large that its
own rounding moves the result beyond the tolerance. Two more: a quotient (or root, log) of a
normalization's output that is 0 in exact arithmetic (an element equal to its row's mean: every
kernel gives 0 +- rounding noise, of either sign, and 1e-3 / noise is anything), and
fmod/remainder by a subnormal divisor (eager's vectorized kernel gives NaN there, its scalar
tail the exact value).
"""
from __future__ import annotations

import contextlib
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

aten = torch.ops.aten

# The precision eager sums in: float32 accumulation for float32/float16/bfloat16 programs.
ACCUMULATION_EPS = torch.finfo(torch.float32).eps
# Rounding error bound over result: above this the result is mostly rounding error.  Bounds
# below the fuzzer's float32 tolerance (ATOL, scaled like compare.py's) cannot make a mismatch.
CONDITION_LIMIT = 1.0
ATOL = 1e-5
# sin/cos/tan of arguments whose own rounding error exceeds this (10x ATOL: |x| above ~840).
_PERIODIC = (aten.sin.default, aten.cos.default, aten.tan.default)
PERIODIC_LIMIT = 1e-4
# A relative move of a result beyond float32's rtol (compare.py's).
SENSITIVE_RELATIVE_LIMIT = 2e-5


def _abs_twin(func, args, kwargs):
    """The same op over |terms|: the scale its rounding errors are relative to."""
    if func in (aten.mm.default, aten.bmm.default, aten.matmul.default):
        return func(args[0].abs(), args[1].abs())
    if func is aten.addmm.default:
        return aten.addmm.default(args[0].abs(), args[1].abs(), args[2].abs())
    if func is aten.convolution.default:  # (a sum of products per output, as a product's)
        bias = args[2].abs() if args[2] is not None else None
        return func(args[0].abs(), args[1].abs(), bias, *args[3:], **kwargs)
    if func in (aten.sum.default, aten.sum.dim_IntList, aten.nansum.default, aten.mean.default,
                aten.mean.dim, aten.cumsum.default):
        return func(torch.nan_to_num(args[0].abs(), nan=0.0), *args[1:], **kwargs)
    if func is aten._softmax_backward_data.default:
        # y * (g - sum(g * y)): a gradient of nearly equal elements cancels against its own sum
        # (autograd 16399: the variance of softmax values beside integers near 1e12 gives every
        # element a gradient of -1.3e10 + 0.01; eager 20.15, ember 0, float64 5e-4)
        g, y = args[0].double(), args[1].double()
        return y.abs() * (g.abs() + (g * y).sum(args[2], keepdim=True).abs())
    if func is aten._log_softmax_backward_data.default:  # g - exp(y) * sum(g)
        g, y = args[0].double(), args[1].double()
        return g.abs() + y.exp() * g.sum(args[2], keepdim=True).abs()
    return None


# Normalizations: statistics of rows whose spread is within the rounding noise of the values
# that the tolerance allows (a constant row: its normalized values are 0 +- noise), or whose
# squares overflow float32 (eager's and any other algorithm's inf/NaN differ: ATen's Welford,
# a two-pass decomposition).
_NORMS = (aten.native_layer_norm.default,)
_STATISTICS = (aten.var.correction, aten.std.correction, aten.var_mean.correction, aten.std_mean.correction)
_SQUARE_LIMIT = torch.finfo(torch.float32).max ** 0.5
_FLOAT32_MAX = torch.finfo(torch.float32).max
_SQUARES_SUM_LIMIT = torch.finfo(torch.float32).max / 4


def _rows_ill_conditioned(x: torch.Tensor, dims: list[int], exact_constant_rows_ok: bool = False) -> bool:
    """`exact_constant_rows_ok` (var/std): a row of equal values whose mean this run computes
    exactly is not noise: its variance is 0 and its gradient, 2 / (n - c) * (x - mean(x)), too, in
    every implementation that gets the mean right (issue 32: eager's var of 16 equal float64
    values had gradient 0, ember's 1e-5).  Where this run's own mean is inexact (eager sums 3 or
    9 equal values with rounding) the gradient is noise, and the row stays ill-conditioned."""
    original = x.detach()
    x = original.double()
    if x.numel() == 0:
        return False
    # Squares that overflow: even a row of one element, whose x - mean(x) is exactly 0 in
    # exact arithmetic, is NaN in eager's CPU layer_norm (it forms E[x^2]; autograd 4217:
    # layer_norm(9e307) over (1,) is NaN in float64, 0 in ember's two-pass statistics).
    finite = torch.isfinite(x)
    if bool((x[finite].abs() > _SQUARE_LIMIT).any()):
        return True
    if not dims or math.prod(x.shape[d] for d in dims) < 2:
        return False  # (otherwise x - mean(x) of one element is exactly 0 in every algorithm)
    # A sum of squared deviations near float32's limit: finite or inf by the order of the
    # additions (default 43535: 16 deviations of 4.6e18 sum to 3.35e38; eager's Welford
    # finite, ember's inf).
    squares = ((x - x.mean(dim=dims, keepdim=True)) ** 2).sum(dim=dims)
    if bool((squares[torch.isfinite(squares)] > _SQUARES_SUM_LIMIT).any()):
        return True
    # Normalizing divides by the spread: one rounding of an input (eps * |x|) moves a result
    # by eps * |x| / std, beyond the tolerance when the values sit far from 0 compared with
    # their spread (a constant row: 0 +- noise, its signs arbitrary).
    spread = x.std(dim=dims, correction=0)
    size = x.abs().amax(dim=dims)
    amplified = (ACCUMULATION_EPS * size > ATOL * spread) & (size > 0)
    if exact_constant_rows_ok and original.is_floating_point():
        constant = (x.amax(dim=dims) == x.amin(dim=dims)) & torch.isfinite(size)
        exact = (original.mean(dim=dims, keepdim=True) == original).all(dim=tuple(dims))
        if exact.shape == amplified.shape:
            amplified &= ~(constant & exact)
    return bool(amplified.any())


# argmax over values a few ulps apart: which one wins is the rounding's choice (eager's own
# vectorized lanes and its scalar tail round atan2(x, x) differently, and its argmax flips
# with them).  Exact ties are not counted (every implementation takes the first) unless the
# values come straight from a libm function: tanh of three equal inputs is three equal values
# in eager, but a vectorized loop's lanes and its scalar tail can round them 1 ulp apart
# (default 30821: `tanh(a).min(1)` of a row of equal values).
_ARG_REDUCTIONS = (aten.argmax.default, aten.argmin.default, aten.max.dim, aten.min.dim)
NEAR_TIE_ULPS = 8
_LIBM = tuple(getattr(aten, name).default for name in (
    "tanh", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sigmoid", "lgamma",
    "digamma")) + (aten.atan2.default, aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.gelu.default,
                   aten.silu.default, aten._log_softmax.default, aten._softmax.default)
# ops that pass a libm result's values through unchanged
_VALUE_KEEPING = (aten.clone.default, aten._to_copy.default, aten.view.default, aten.expand.default,
                  aten.permute.default, aten.t.default, aten.transpose.int, aten.unsqueeze.default,
                  aten.squeeze.dim, aten.squeeze.dims, aten.reshape.default, aten._unsafe_view.default,
                  aten.alias.default, aten.slice.Tensor, aten.select.int, aten.gather.default,
                  aten.index_select.default, aten.index_add.default, aten.repeat.default, aten.index.Tensor,
                  aten.flip.default, aten.roll.default)
# ...and into a list of tensors
_VALUE_SPLITTING = (aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, aten.chunk.default)


def _near_tie(func, args, kwargs, exact_ties: bool = False, noise: float | None = None) -> bool:
    """Do a row's top two values lie within rounding of each other (relative ulps, or twice an
    absolute `noise` the values are known to carry)?"""
    x = args[0].detach()
    if not x.is_floating_point() or x.numel() < 2:
        return False
    eps = ACCUMULATION_EPS if x.dtype == torch.float64 else torch.finfo(x.dtype).eps
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    x = x.double()
    if func in (aten.argmin.default, aten.min.dim):
        x = -x
    rows = x.reshape(1, -1) if dim is None else x.movedim(dim, -1).reshape(-1, x.shape[dim] if x.dim() else 1)
    if rows.shape[-1] < 2:
        return False
    top = rows.nan_to_num(nan=-float("inf")).topk(2, dim=-1).values
    gap = top[:, 0] - top[:, 1]
    limit = NEAR_TIE_ULPS * eps * top[:, 0].abs()
    if noise is not None:
        limit = torch.maximum(limit, torch.full_like(limit, 2 * noise))
    near = (gap >= (0 if exact_ties else 1e-300)) & (gap <= limit) & torch.isfinite(top[:, 0])
    return bool(near.any())


# Jumps: floor/trunc/round, floor and trunc division, remainder, comparisons, conversions to
# integers.  Applied to a value a few ulps from the jump (a quotient that is 5 +- rounding:
# expm1(1) / 0.3436... in float32 is 4.99999 with glibc's expm1, 5.00000 with eager's Sleef),
# the side it lands on is the rounding's choice, and whatever follows (a softmax over the row)
# carries the flip everywhere.  Values exactly on the jump are not counted: every
# implementation computes those exactly.
_ROUNDINGS = tuple(getattr(aten, name).default for name in ("floor", "ceil", "trunc", "round"))
_KINKED_AT_ZERO = (aten.sign.default, aten.relu.default, aten.abs.default)
_QUOTIENTS = (aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default, aten.remainder.Tensor,
              aten.remainder.Scalar, aten.fmod.Tensor, aten.fmod.Scalar)
_COMPARISONS = tuple(getattr(getattr(aten, name), overload)
                     for name in ("lt", "le", "gt", "ge", "eq", "ne") for overload in ("Tensor", "Scalar"))
NEAR_JUMP_ULPS = 8


def _float_operand(value):
    if isinstance(value, torch.Tensor):
        return value.detach().double() if value.is_floating_point() else None
    return torch.tensor(float(value), dtype=torch.float64) if isinstance(value, float) else None


def _eps_of(value) -> float:
    dtype = value.dtype if isinstance(value, torch.Tensor) and value.is_floating_point() else torch.float64
    return ACCUMULATION_EPS if dtype == torch.float64 else torch.finfo(dtype).eps


def _near(distance: torch.Tensor, scale: torch.Tensor, eps: float, exact: bool = False) -> bool:
    near = (distance >= (0 if exact else 1e-300)) & (distance <= NEAR_JUMP_ULPS * eps * scale) & \
        torch.isfinite(scale) & (scale > 0)
    return bool(near.any())


def _near_jump(func, args, kwargs, exact: bool = False) -> bool:
    """Is an operand within rounding of the jump (`exact`: or on it, for values from libm)?"""
    if func in _ROUNDINGS or (func is aten._to_copy.default and isinstance(kwargs.get("dtype"), torch.dtype)
                              and not kwargs["dtype"].is_floating_point and kwargs["dtype"] != torch.bool):
        x = _float_operand(args[0])
        return x is not None and _near((x - x.round()).abs(), x.abs(), _eps_of(args[0]), exact)
    a, b = (_float_operand(v) for v in args[:2]) if len(args) >= 2 else (None, None)
    if func in _QUOTIENTS:
        if a is None and b is None:
            return False
        a = a if a is not None else torch.as_tensor(args[0], dtype=torch.float64)
        b = b if b is not None else torch.as_tensor(args[1], dtype=torch.float64)
        quotient = a / b
        eps = max(_eps_of(args[0]), _eps_of(args[1]))
        return _near((quotient - quotient.round()).abs(), quotient.abs(), 2 * eps, exact)
    if func in _COMPARISONS and a is not None:
        b = b if b is not None else torch.as_tensor(args[1], dtype=torch.float64)
        return _near((a - b).abs(), torch.maximum(a.abs(), b.abs()), _eps_of(args[0]))
    return False


# Writes that add into float16/bfloat16 destinations, rounding after every addition (eager's
# index_put and index_add; the gradient of x[i] with repeated i is one of them).
_ACCUMULATING_WRITES = (aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default,
                        aten.index_add.default, aten.index_add_.default)


def _rounded_accumulation(func, args, kwargs, result) -> bool:
    """Destinations where n additions rounded to a half type (error up to n * eps * sum |terms|)
    can be as large as the result: the order of the additions decides it (inplace 7009 at
    grown sizes: 1.5 in eager, 1.59 in another order, 1.502 exactly)."""
    target = args[0]
    if target.dtype not in (torch.float16, torch.bfloat16):
        return False
    if func in (aten.index_add.default, aten.index_add_.default):
        dim, index, source = args[1], args[2], args[3]

        def accumulate(values):
            return aten.index_add.default(torch.zeros(target.shape, dtype=torch.float64, device=target.device), dim, index, values)
    else:
        indices, source = args[1], args[2]
        if not (args[3] if len(args) > 3 else kwargs.get("accumulate", False)):
            return False

        def accumulate(values):
            return aten.index_put.default(torch.zeros(target.shape, dtype=torch.float64, device=target.device), indices, values, True)
    terms = source.detach().double().abs()
    scale = accumulate(terms)
    count = accumulate(torch.ones_like(terms))
    from .compare import TOLERANCES

    bound = torch.finfo(target.dtype).eps * count * scale
    size = result.detach().double().abs()
    finite = torch.isfinite(bound) & torch.isfinite(size) & (count > 1)
    if not bool(finite.any()):
        return False
    # beyond what the comparison tolerates for that dtype: the order of additions shows
    atol, rtol = TOLERANCES[target.dtype]
    return bool((bound[finite] > rtol * size[finite] + atol).any())


_MATRIX_PRODUCTS = (aten.mm.default, aten.bmm.default, aten.matmul.default, aten.addmm.default)
_EXTREME_REDUCTIONS = (aten.amin.default, aten.amax.default, aten.min.default, aten.max.default)


def _zero_extreme_of_both_zeros(x, result) -> bool:
    """Does a min/max reduction return a zero of a tensor holding both 0.0 and -0.0?"""
    try:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not isinstance(result, torch.Tensor):
            return False
        values = x.detach()
        zeros = values == 0
        if not bool(zeros.any()):
            return False
        negative = torch.signbit(values) & zeros
        return bool(negative.any()) and bool((negative != zeros).any()) and bool((result.detach() == 0).any())
    except Exception:  # noqa: BLE001 - a watch must never change the run
        return False


def _opposite_zero_ties(args) -> bool:
    """Does max/min compare a 0.0 with a -0.0 anywhere (after broadcasting)?"""
    try:
        a, b = (torch.as_tensor(x).detach() for x in args[:2])
        if not (a.is_floating_point() or b.is_floating_point()):
            return False
        a, b = torch.broadcast_tensors(a.double(), b.double())
        return bool(((a == 0) & (b == 0) & (a.signbit() != b.signbit())).any())
    except Exception:  # noqa: BLE001 - a watch must never change the run
        return False


def _zero_meets_overflow(func, args) -> bool:
    """A product holding a zero whose other factors can overflow: 0 or inf * 0 = NaN, by the
    order of the multiplications (eager's vector lanes: 0; another order: NaN; default 74038)."""
    x = args[0].detach()
    if not x.is_floating_point() or x.numel() == 0:
        return False
    dims = list(range(x.dim())) if func is aten.prod.default else [args[1] % max(x.dim(), 1)]
    if x.dim() == 0:
        return False
    logs = torch.where(x != 0, x.double().abs().log(), 0.0).clamp(min=0)  # growth only
    growth = logs.sum(dims)
    zero = (x == 0).any(dims[0]) if len(dims) == 1 else (x == 0).any()
    return bool((zero & (growth > math.log(torch.finfo(x.dtype).max))).any())


def _overflow_by_order(func, args) -> bool:
    """A finite product whose factors above 1 multiply past the dtype's largest value (or those
    below 1 under its smallest): whether a partial product overflows (underflows) depends on the
    order of the multiplications (special 16832: 35 factors, 1.7e38 and 2.5 among them, the
    exact product -1.6e26; eager's order finite, ember's -inf)."""
    x = args[0].detach()
    if not x.is_floating_point() or x.numel() == 0 or x.dim() == 0:
        return False
    dims = list(range(x.dim())) if func is aten.prod.default else [args[1] % max(x.dim(), 1)]
    logs = torch.where(x != 0, x.double().abs().log(), 0.0)
    info = torch.finfo(x.dtype)
    exact = logs.sum(dims)
    finite = (exact < math.log(info.max)) & (exact > math.log(info.tiny)) & ~(x == 0).any(dims[0] if len(dims) == 1 else None)
    grows, shrinks = logs.clamp(min=0).sum(dims), logs.clamp(max=0).sum(dims)
    return bool((finite & ((grows > math.log(info.max)) | (shrinks < math.log(info.tiny)))).any())


def _infinity_by_order(x: torch.Tensor, dims: list[int]) -> bool:
    """A row of more than one value whose Welford mean is inf or NaN by the order the partial
    means combine in (inf + (finite - inf) * w is NaN, finite + (inf - finite) * w inf).  On the
    CPU eager updates a row in order, so only a row whose one infinity is last is ambiguous (conv
    10231: inf there, NaN where it is combined with others, as ember's Triton kernels do).  On
    CUDA eager's tree of partial results follows its launch shape (a row of 3 in 2 threads:
    [0, inf, 1] is inf, default 703671; ember's Triton kernels NaN): a row's one infinity is,
    wherever it stands.  Two infinities give NaN in every order (inf - inf where they meet), so
    such rows excuse nothing (lowp 700735: a column of -inf hid a wrong finite column)."""
    if not x.is_floating_point() or not dims or math.prod(x.shape[d] for d in dims) < 2:
        return False
    rows = x.detach().movedim(dims, list(range(x.dim() - len(dims), x.dim())))
    rows = rows.reshape(*rows.shape[:x.dim() - len(dims)], -1)
    infinite = torch.isinf(rows)
    if x.device.type == "cuda":
        return bool((infinite.sum(-1) == 1).any())
    return bool((infinite[..., -1] & ~infinite[..., :-1].any(-1)).any())


def _mean_noise_zeros(x: torch.Tensor, dims: list[int], keepdim: bool, mean: torch.Tensor) -> torch.Tensor | None:
    """Where a Welford mean is 0 in exact arithmetic up to its rounding error (eps * sum |x|):
    the running update leaves 0 +- noise of either sign (reductions 703664: the mean of integers
    summing to 0 is -1e-8 in eager's CUDA kernel, exactly 0 from a sum; rsqrt gives NaN or inf)."""
    if not x.is_floating_point() or not dims:
        return None
    bound = ACCUMULATION_EPS * torch.nan_to_num(x.detach().double().abs(), nan=0.0).sum(dims, keepdim=keepdim)
    size = mean.detach().double().abs()
    if bound.shape != size.shape:
        return None
    mask = torch.isfinite(bound) & (size <= bound)
    return mask if bool(mask.any()) else None


def _non_finite_convolution_operand(operands) -> bool:
    """A convolution over a NaN or inf: which other elements it reaches (through 0 * NaN, a
    padded or strided position's zero times it) is the algorithm's choice, which follows the
    memory order: on a GPU cuDNN's (conv 705295: a NaN weight made the input gradient NaN at 30
    of 360 elements in eager's NCHW kernels, at 120 in its own NHWC ones, as ember's), on the
    CPU oneDNN's channels-last kernel skips the padding where the NCHW one multiplies it (conv
    15795: a NaN weight of a grouped conv2d, padding 1: NaN at 45 of 270 outputs from a
    contiguous input, at 24 from a channels-last one, as ember's)."""
    tensors = [t for t in operands if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return any(not bool(torch.isfinite(t).all()) for t in tensors)


def _normalization_overflows(func, args) -> bool:
    """batch_norm of values near the dtype's limit: x * invstd overflows while (x - mean) * invstd
    does not, so the result is finite or NaN by the order of the operations (conv 10072: a
    channel of -1.7e38, eager's kernel 1, a decomposition's x * invstd - mean * invstd NaN)."""
    x = args[0].detach()
    if not x.is_floating_point() or x.dim() < 2 or x.numel() == 0:
        return False
    training = _batch_norm_training(func, args)
    eps = args[-1] if func in (aten._batch_norm_with_update.default, aten._native_batch_norm_legit.no_stats) \
        else args[7]
    running_var = None if func is aten._native_batch_norm_legit.no_stats else args[4]
    dims = [0, *range(2, x.dim())]
    values = x.double()
    if training or running_var is None:
        variance = values.var(dims, unbiased=False)
    else:
        variance = running_var.detach().double()
    invstd = (variance + eps).rsqrt()
    largest = values.abs().amax(dims)
    return bool((largest * invstd > torch.finfo(x.dtype).max).any())


def _eager_eval_batch_norm_misreads(args, result) -> bool:
    """Eager's CPU batch_norm backward in eval mode is wrong for some inputs whose strides are
    channels-last only by their size-1 dims ([1, 2, 3, 1] with strides (2, 1, 2, 6), torch 2.13:
    its input gradient is not grad * weight * invstd at 4 of 6 elements; conv 10155, every
    backend "wrong" where ember had the exact gradient).  There is no answer to hold ember to: the
    gradient is checked against its formula, computed here in float64."""
    try:
        grad, x, weight, running_var, train, eps = args[0], args[1], args[2], args[4], args[7], args[8]
        if train or result[0] is None or running_var is None or x.device.type != "cpu" or x.dim() < 2:
            return False
        shape = [1, -1] + [1] * (x.dim() - 2)
        scale = (running_var.detach().double() + eps).rsqrt()
        if weight is not None:
            scale = scale * weight.detach().double()
        expected = grad.detach().double() * scale.view(shape)
        got = result[0].detach().double()
        both_finite = torch.isfinite(expected) & torch.isfinite(got)
        tolerance = max(1e-3, 4 * torch.finfo(result[0].dtype).eps)  # (a half-precision result's rounding)
        return bool(((got - expected).abs() > tolerance * (1 + expected.abs()))[both_finite].any())
    except Exception:  # noqa: BLE001 - a watch must never change the run
        return False


# every backward of batch norm eager may call (CUDA's eval mode: batch_norm_backward)
_BATCH_NORM_BACKWARDS = (aten.native_batch_norm_backward.default, aten.batch_norm_backward.default,
                         aten.cudnn_batch_norm_backward.default)


def _eager_batch_norm_bias_gradient_wrong(args, result) -> bool:
    """A bias gradient that is not the sum of the output gradient over the batch and spatial dims,
    which it is by definition: eager's CUDA eval-mode backward of an input [6, 1, 1, 1] with
    strides (1, 6, 6, 6) (channels-last by its size-1 dims) and no weight gave 0 where the sum
    is -3.85 (conv 703382, torch 2.11; float64 too).  Eager's error, not one to hold ember to."""
    try:
        grad, x = args[0], args[1]
        if len(result) < 3 or result[2] is None or x.dim() < 2:
            return False
        want = grad.detach().double().sum([0, *range(2, x.dim())])
        got = result[2].detach().double()
        if got.numel() == 0 and want.numel() > 0:
            return True  # (eager's CUDA eval backward without a weight returns an empty bias gradient)
        if got.shape != want.shape:
            return False
        both_finite = torch.isfinite(got) & torch.isfinite(want)
        tolerance = max(1e-3, 4 * torch.finfo(result[2].dtype).eps)
        scale = 1 + grad.detach().double().abs().sum([0, *range(2, x.dim())])
        return bool(((got - want).abs() > tolerance * scale)[both_finite].any())
    except Exception:  # noqa: BLE001 - a watch must never change the run
        return False


def _layer_norm_backward_cancels(args) -> bool:
    """layer_norm's input gradient rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w, is
    a difference of terms that cancel (over two elements xhat is +-1 and the gradient is eps's
    doing only): its rounding bound against the tolerance of its size.  Unlike a sum's bound,
    this one is what the kernels show: ATen's fused kernel and a decomposition of it differ by
    that much (reductions 4374: two elements, a weight of -921; the bound is 1e-4 of the result,
    eager -3.64124, aot_eager's decomposition -3.64111)."""
    dy, x, shape, mean, rstd, weight = (a.detach().double() if isinstance(a, torch.Tensor) else a
                                        for a in args[:6])
    dims = list(range(x.dim() - len(shape), x.dim()))
    g = dy * weight if isinstance(weight, torch.Tensor) else dy
    xhat = (x - mean) * rstd
    terms = g.abs() + g.abs().mean(dims, keepdim=True) + xhat.abs() * (g * xhat).abs().mean(dims, keepdim=True)
    result = g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True)
    return _beyond_tolerance(result, terms)


def _beyond_tolerance(result, terms) -> bool:
    """Is the rounding bound of `result` (a sum of `terms`' sizes) beyond what the comparison
    tolerates at its size?"""
    bound = ACCUMULATION_EPS * terms
    finite = torch.isfinite(bound) & torch.isfinite(result)
    if not bool(finite.any()):
        return False
    floor = ATOL * max(1.0, float(result.abs()[finite].median()))
    return bool((bound[finite] > SENSITIVE_RELATIVE_LIMIT * result.abs()[finite] + floor).any())


def _batch_norm_backward_terms(args):
    """A training batch_norm backward's pieces in float64: (dy, xhat, g = dy * weight, invstd,
    reduced dims, a channel's broadcast shape), or None (eval mode, no statistics)."""
    dy, x, weight, _, _, mean, invstd, train = (a.detach().double() if isinstance(a, torch.Tensor) else a
                                               for a in args[:8])
    if not train or not isinstance(mean, torch.Tensor) or not isinstance(invstd, torch.Tensor) or x.dim() < 2:
        return None
    dims = [0, *range(2, x.dim())]
    shape = [1, -1] + [1] * (x.dim() - 2)
    xhat = (x - mean.view(shape)) * invstd.view(shape)
    g = dy * weight.view(shape) if isinstance(weight, torch.Tensor) else dy
    return dy, xhat, g, invstd, dims, shape


def _input_gradient_terms(g, xhat, dims):
    """The input gradient over invstd, g - mean(g) - xhat * mean(g * xhat), and its terms' sizes."""
    return (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True),
            g.abs() + g.abs().mean(dims, keepdim=True) + xhat.abs() * (g * xhat).abs().mean(dims, keepdim=True))


def _batch_norm_backward_cancels(args) -> bool:
    """batch_norm's gradients in training are sums that cancel by construction: the weight's,
    sum(dy * xhat), is 0 in exact arithmetic when dy comes from another batch_norm over the same
    channels (it removes every component along xhat), and the input's, w * invstd * (dy -
    mean(dy) - xhat * mean(dy * xhat)), like layer_norm's.  Each against its rounding bound (conv
    7934: two batch_norms in a row, the first one's weight gradient is eager 3.8e-6, ember
    -1.6e-4, exactly -5e-13)."""
    parts = _batch_norm_backward_terms(args)
    if parts is None:
        return False
    dy, xhat, g, _, dims, _ = parts
    # (the weight's sum adds up terms that carry dy's own rounding, independent errors: its
    # bound grows with the square root of the count of terms)
    count = dy.numel() // max(dy.shape[1], 1)
    checks = [((dy * xhat).sum(dims), math.sqrt(count) * (dy * xhat).abs().sum(dims)),
              _input_gradient_terms(g, xhat, dims)]
    return any(_beyond_tolerance(result, terms) for result, terms in checks)


def _batch_norm_input_gradient_bound(args) -> torch.Tensor | None:
    """The rounding bound of each element of a training batch_norm's input gradient, invstd * (g -
    mean(g) - xhat * mean(g * xhat)): its terms' sizes times eps.  The gradient sums to 0 over a
    channel by construction, so what adds it up inherits these bounds (conv 9853: the bias
    gradient of the convolution before it is eager 0, ember 1.5e-5, exactly 0, with |dy| ~ 100)."""
    parts = _batch_norm_backward_terms(args)
    if parts is None:
        return None
    _, xhat, g, invstd, dims, shape = parts
    _, terms = _input_gradient_terms(g, xhat, dims)
    return torch.nan_to_num(ACCUMULATION_EPS * terms * invstd.abs().view(shape), nan=0.0, posinf=0.0)


_NORM_BACKWARD_CANCELS = {aten.native_batch_norm_backward.default: _batch_norm_backward_cancels,
                          aten.native_layer_norm_backward.default: _layer_norm_backward_cancels}


def _as_native_batch_norm_backward(func, args):
    """The arguments of any batch norm backward in native_batch_norm_backward's order (grad_out,
    input, weight, running_mean, running_var, save_mean, save_invstd, train, ...), or None.  On
    CUDA the reference's float64 backward is cudnn's (input first) or batch_norm_backward, whose
    save_var is the inverse std as well; both are training backwards where save_mean is set (conv
    716737 and 717045 on the GPU: a bias gradient before a batch_norm, eager 0, ember 1.5e-5, went
    unwatched and read as wrong)."""
    if func is aten.native_batch_norm_backward.default:
        return args
    if func is aten.cudnn_batch_norm_backward.default:
        args = (args[1], args[0], *args[2:7])
    elif func is not aten.batch_norm_backward.default:
        return None
    save_mean = args[5]
    train = isinstance(save_mean, torch.Tensor) and save_mean.numel() > 0
    return (*args[:7], train)


# Fmod/remainder by a subnormal divisor, or with a quotient beyond the dtype's range (-9e307
# fmod 1e-30: special 1733): ATen's vectorized lanes (a - trunc(a / b) * b) give NaN, its scalar
# tail (and any exact implementation) the remainder, so eager disagrees with itself by position.
_REMAINDERS = (aten.fmod.Tensor, aten.fmod.Scalar, aten.remainder.Tensor, aten.remainder.Scalar,
               aten.remainder.Scalar_Tensor)


def _subnormal_divisor(args) -> bool:
    divisor = args[1]  # (a Python number in the .Scalar overloads)
    dtype = torch.result_type(args[0], divisor)
    if dtype not in (torch.float32, torch.float64):
        return False  # (float16/bfloat16 kernels compute in float32, where their subnormals are normal)
    if not isinstance(divisor, torch.Tensor):
        divisor = torch.tensor(float(divisor), dtype=torch.float64)
    magnitude = divisor.detach().abs().to(dtype)
    if bool(((magnitude > 0) & (magnitude < torch.finfo(dtype).tiny)).any()):
        return True
    dividend = args[0]
    if not isinstance(dividend, torch.Tensor):
        dividend = torch.tensor(float(dividend), dtype=torch.float64)
    dividend = dividend.detach().double().abs()
    quotient = dividend / magnitude.double()
    return bool((torch.isfinite(dividend) & (magnitude > 0) & (quotient > torch.finfo(dtype).max)).any())


def _beyond_its_period(dividend) -> bool:
    """A remainder is periodic in its dividend: a libm result whose own rounding (an ulp apart
    between kernels) exceeds the tolerance leaves the remainder anything (intmath 3144:
    expm1(100) % (pi / 4) is 0.078 or 0.186 after a 1-ulp different expm1), as sin of one does."""
    x = dividend.detach().double().abs()
    return bool((ACCUMULATION_EPS * x[torch.isfinite(x)] > PERIODIC_LIMIT).any())


# Noise zeros: elements that exact arithmetic makes 0 but kernels make 0 +- rounding noise of
# either sign.  A layer_norm element equal to its row's mean is one (ATen computes
# x * (rstd * w) - mean * (rstd * w), not (x - mean) * rstd * w); products and views of it
# stay one.  Dividing by one (or its root, its log) is noise amplified without bound.
_NOISE_KEEPING = (aten.mul.Tensor, aten.mul.Scalar, aten.div.Scalar, aten.neg.default, aten.clone.default,
                  aten._to_copy.default) + tuple(
    # functions with f(0) = 0 and f'(0) > 0: 0 +- noise stays 0 +- noise, of the same sign (GPU
    # autograd 714661: floor(tanh(mean(softmax) @ c) / a), where a column of c sums to 0)
    getattr(aten, name).default for name in ("tanh", "sin", "tan", "asin", "atan", "sinh", "asinh", "atanh",
                                             "erf", "erfinv", "expm1", "log1p"))
_ADDITIONS = (aten.add.Tensor, aten.sub.Tensor, aten.add_.Tensor, aten.sub_.Tensor)
_RELATIVE_NOISE = 1000  # |y| below this many eps: an ulp of rounding is beyond the relative tolerance
_LOGICAL = (aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default,
            aten.logical_not.default)
# views that reshape their operand itself
_INPLACE_VIEWS = (aten.squeeze_.default, aten.squeeze_.dim, aten.squeeze_.dims, aten.unsqueeze_.default,
                  aten.t_.default, aten.transpose_.default)
_ROW_SUMS = (aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim)
# Accumulations whose result exact arithmetic may put on an integer while float32 kernels round
# it to either side (a row sum of softmax values is 1 +- ulps in every kernel, and as often as
# not exactly 1.0 in a float64 reference): see ConditionWatch.inexact.
_ACCUMULATIONS = _ROW_SUMS + (aten.cumsum.default, aten.prod.default, aten.prod.dim_int, aten.mm.default,
                              aten.bmm.default, aten.addmm.default)
# Quotients whose divisor may be a noise zero: 1 / noise is anything, and 0 / 0 is NaN where a
# kernel's noise came out exactly 0 (issue 32: div(v, v, rounding_mode='trunc') of a batch
# norm output's column sums, 1 or NaN by element in eager, ember and the float64 reference alike).
_DIVISIONS = (aten.div.Tensor, aten.div.Tensor_mode, aten.floor_divide.default, aten.remainder.Tensor,
              aten.fmod.Tensor)
_ROUNDED_QUOTIENTS = (aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default,
                      aten.remainder.Tensor, aten.remainder.Scalar)
# (on a GPU eager's batch_norm reaches cuDNN's or the update op's kernel, not native_batch_norm:
# the rules below missed them there, conv 705710)
_BATCH_NORMS = (aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
                aten._native_batch_norm_legit_functional.default, aten._native_batch_norm_legit.no_stats,
                aten.cudnn_batch_norm.default, aten._batch_norm_with_update.default)


def _batch_norm_training(func, args) -> bool:
    if func is aten._batch_norm_with_update.default:
        return True
    return bool(args[3] if func is aten._native_batch_norm_legit.no_stats else args[5])


def _rounds_quotient(func, kwargs) -> bool:
    """Does `func` floor its quotient (div with rounding_mode "floor", floor_divide, remainder)?"""
    if func in (aten.div.Tensor_mode, aten.div.Scalar_mode):
        return (kwargs or {}).get("rounding_mode") == "floor"
    return True


def _batch_norm_zero_sum_dims(func, args) -> set | None:
    """A training batch norm without bias normalizes each channel to mean 0: its sum over the
    batch and spatial dims is 0 +- rounding noise (times the channel's weight, if any)."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not _batch_norm_training(func, args) or \
            args[2] is not None:
        return None
    return {0, *range(2, x.dim())}
_NOISE_AMPLIFYING = (aten.reciprocal.default, aten.rsqrt.default, aten.sqrt.default, aten.log.default,
                     aten.log2.default, aten.log10.default)


def _amplifying_exponent(exponent) -> bool:
    """x ** e of a noise zero is noise amplified (e < 0) or NaN by its sign (e not an integer)."""
    return float(exponent) < 0 or float(exponent) != int(exponent)


def _layer_norm_noise_zeros(args) -> torch.Tensor | None:
    x, normalized_shape = args[0].detach(), args[1]
    bias = args[3] if len(args) > 3 else None
    if x.numel() == 0 or not x.is_floating_point():
        return None
    rows = x.double().reshape(-1, math.prod(normalized_shape) if normalized_shape else 1)
    if rows.shape[-1] < 2:
        return None
    # x == mean, as n * x == sum (exact for the fuzzer's float32 and narrower values)
    mask = (rows * rows.shape[-1] == rows.sum(-1, keepdim=True)) & torch.isfinite(rows)
    mask = mask.reshape(x.shape)
    if bias is not None:
        mask &= bias.detach() == 0  # (b + noise is not near 0)
    return mask if bool(mask.any()) else None


def _layer_norm_noise(args) -> torch.Tensor | None:
    """Each layer_norm output's rounding noise: x - mean carries eps * |x|, and dividing by the
    row's std scales it to eps * max|x| / std (times |weight| under an affine transform)."""
    x, normalized_shape = args[0].detach(), args[1]
    weight = args[2] if len(args) > 2 else None
    if x.numel() == 0 or not x.is_floating_point() or not normalized_shape:
        return None
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    rows = x.double()
    spread = rows.std(dim=dims, correction=0, keepdim=True)
    size = rows.abs().amax(dim=dims, keepdim=True)
    noise = (ACCUMULATION_EPS * size / spread).expand(x.shape)
    if weight is not None:
        noise = noise * weight.detach().double().abs()
    return torch.nan_to_num(noise, nan=0.0, posinf=0.0)


# Ops whose result moves far for a small move of their first operand: evaluated at x +- its
# noise, a result beyond the tolerance means the rounding of x, not the compiler, decides it.
_MASKED_FILLS = (aten.masked_fill.Scalar, aten.masked_fill.Tensor)
_SENSITIVE = _NOISE_AMPLIFYING + (aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.log1p.default,
                                  aten.exp.default, aten.expm1.default)


# The derivatives (by the first operand) of the sensitive ops: a gradient through one moves
# with x as the derivative does, which for 1/x is twice as fast as the value.
_DERIVATIVES = {
    aten.reciprocal.default: lambda x: -1 / (x * x),
    aten.rsqrt.default: lambda x: -0.5 * x ** -1.5,
    aten.sqrt.default: lambda x: 0.5 * x ** -0.5,
    aten.log.default: lambda x: 1 / x,
    aten.log2.default: lambda x: 1 / (x * math.log(2)),
    aten.log10.default: lambda x: 1 / (x * math.log(10)),
    aten.log1p.default: lambda x: 1 / (1 + x),
    aten.exp.default: torch.exp,
    aten.expm1.default: torch.exp,
    aten.pow.Tensor_Scalar: lambda x, e: e * x ** (e - 1),
    aten.pow.Tensor_Tensor: lambda x, e: e * x ** (e - 1),
}


def _moves_beyond_tolerance(func, args, noise: torch.Tensor) -> bool:
    """f(x +- dx) against f(x), in float64 (default 51087: layer_norm outputs 8 ulps apart, raised
    to the 116th power, 4.5e-5 apart; reductions 4284: rsqrt of a layer_norm output of 0.0093
    that carries 2e-6 of noise under a weight of 6); where x requires grad, f'(x +- dx) too (GPU
    conv 710199: 1 / v of a convolution's output that cancels to 1e-3 of its terms' size moved by
    1.4e-5, within the tolerance, and its gradient -1 / v^2 by twice that, beyond it)."""
    x = args[0].detach().double()
    rest = [a.detach().double() if isinstance(a, torch.Tensor) else a for a in args[1:]]
    functions = [func]
    if args[0].requires_grad and func in _DERIVATIVES:
        functions.append(_DERIVATIVES[func])
    for function in functions:
        at = function(x, *rest).abs()
        moved = torch.maximum((function(x + noise, *rest).abs() - at).abs(),
                              (function(x - noise, *rest).abs() - at).abs())
        moved = torch.nan_to_num(moved, nan=math.inf)
        finite = torch.isfinite(at)
        if bool((moved[finite] > (ATOL + SENSITIVE_RELATIVE_LIMIT * at)[finite]).any()):
            return True
    return False


def _normalized_dims(func, args, kwargs) -> list[int]:
    x = args[0]
    if func in _NORMS:
        return list(range(x.dim() - len(args[1]), x.dim()))
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if dim is None:
        return list(range(x.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [d % max(x.dim(), 1) for d in dims] if x.dim() else []


def _shares_places(tensor: torch.Tensor) -> bool:
    """Do two of the tensor's elements sit at one place of its storage (an unfold's windows)?"""
    if tensor.numel() < 2 or tensor.numel() > 1 << 20:
        return False
    extent = tensor.storage_offset() + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride())) + 1
    places = torch.arange(extent).as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
    return places.unique().numel() < tensor.numel()


# Writes of one place from two elements of the index: on a GPU, eager's threads race and which
# value lands is the scheduler's choice (GPU index 712532: index_put with indices [3, 2, -1] into
# 4 rows, -1 being row 3 again; eager kept the first value, ember's kernel the last).
_INDEX_PUTS = (aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default)
_SCATTERS = (aten.scatter.src, aten.scatter_.src, aten.index_copy.default, aten.index_copy_.default)


def _writes_a_place_twice(func, args, kwargs) -> bool:
    target = args[0] if args else None
    if not isinstance(target, torch.Tensor):
        return False
    if func in _INDEX_PUTS:
        indices, values = args[1], args[2]
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate or not isinstance(values, torch.Tensor) or values.numel() <= 1:
            return False  # (one value everywhere: every order writes the same)
        if any(i is not None and (i.dtype == torch.bool or i.dtype == torch.uint8) for i in indices):
            return False  # (a mask names each place once)
        given = [(dim, i) for dim, i in enumerate(indices) if i is not None]
        if not given:
            return False
        broadcast = torch.broadcast_tensors(*[i.cpu() for _, i in given])
        linear = torch.zeros(broadcast[0].shape, dtype=torch.int64)
        for (dim, _), index in zip(given, broadcast):
            size = target.shape[dim]
            linear = linear * max(size, 1) + torch.where(index < 0, index + size, index)
        return linear.unique().numel() < linear.numel()
    if func in _SCATTERS:
        dim, index = args[1], args[2]
        if func in (aten.index_copy.default, aten.index_copy_.default):
            normalized = index.cpu() % max(target.shape[dim] if target.dim() else 1, 1)
            return normalized.unique().numel() < normalized.numel()
        index = index.cpu()
        if index.numel() < 2:
            return False
        dim = dim % max(index.dim(), 1)
        coords = torch.meshgrid(*[torch.arange(n) for n in index.shape], indexing="ij")
        places = [index if d == dim else coords[d] for d in range(index.dim())]
        linear = torch.zeros(index.shape, dtype=torch.int64)
        for d, place in enumerate(places):
            linear = linear * max(target.shape[d], index.shape[d], 1) + place
        return linear.unique().numel() < linear.numel()
    return False


def _races_on_a_gpu(func, args, kwargs) -> bool:
    """An op writing a GPU tensor whose elements share places: eager's threads write each place
    once per element, concurrently, so which write lands (or, accumulating, which updates are
    lost) changes from run to run (GPU layout 710111: index_put_(accumulate=True) into
    a.unfold(0, 46, 2) came out different in each of 200 eager runs)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return False
    if args and isinstance(args[0], torch.Tensor) and args[0].is_cuda and _writes_a_place_twice(func, args, kwargs):
        return True
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[index] if index < len(args) else kwargs.get(argument.name)
        for tensor in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(tensor, torch.Tensor) and tensor.is_cuda and _shares_places(tensor):
                return True
    return False


class ConditionWatch(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ill_conditioned = False
        self.racy = False  # eager's GPU kernels wrote one place from several threads: not repeatable
        self.noise_zeros = WeakIdKeyDictionary()  # tensor -> bool mask of its noise zeros
        self.zero_sum_dims = WeakIdKeyDictionary()  # a layer_norm output (no affine) -> its normalized dims
        self.from_libm = WeakIdKeyDictionary()  # tensors holding a libm function's results
        # values accumulated from libm results, and whatever is computed from them: on a jump
        # exactly, they are not exact in another kernel (GPU autograd 715038: floor(cumsum(sum of
        # softmax rows) ** 2), the reference's sums exactly 1.0, eager's 1.0000001, ember's 0.99999994)
        self.inexact = WeakIdKeyDictionary()
        self.sum_bounds = WeakIdKeyDictionary()  # a sum's result -> its rounding error bound
        self.abs_noise = WeakIdKeyDictionary()  # a normalization's output -> its absolute rounding noise
        self.log_prob_dims = WeakIdKeyDictionary()  # a log_softmax output -> the dim its rows sum over
        self.libm_noise = WeakIdKeyDictionary()  # a value computed from libm results -> its absolute noise

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.racy:
            try:
                self.racy = _races_on_a_gpu(func, args, kwargs)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
        result = func(*args, **kwargs)
        if self.ill_conditioned:
            return result
        if func in _INPLACE_VIEWS:
            self._follow_inplace_view(func, args)
        try:
            if self._libm_noise_cancels(func, args, result):
                self.ill_conditioned = True
                return result
        except Exception:  # noqa: BLE001 - a watch must never change the run
            pass
        if isinstance(result, torch.Tensor) and (
                func in _LIBM or ((func in _VALUE_KEEPING or func.is_view) and args and self._from_libm(args[0]))):
            # (every view too: layout 16454, max over an as_strided of cos(c) whose columns hold cos(1)
            # and cos(-1), equal in eager, 1 ulp apart in ember's vectorized cos)
            self.from_libm[result] = True
        if func is aten.cat.default and isinstance(result, torch.Tensor) and \
                any(self._from_libm(t) for t in args[0]):
            self.from_libm[result] = True
        if func in _VALUE_SPLITTING and isinstance(result, (list, tuple)) and self._from_libm(args[0]):
            for item in result:
                self.from_libm[item] = True
        if isinstance(result, torch.Tensor) and result.is_floating_point() and func not in _ROUNDINGS and any(
                isinstance(a, torch.Tensor) and (a in self.inexact or func in _ACCUMULATIONS and self._from_libm(a))
                for a in args[:3]):
            self.inexact[result] = True
        if func in _BATCH_NORMS and isinstance(args[1], torch.Tensor) and bool((args[1].detach().double().abs() > _SQUARE_LIMIT).any()):
            # a weight beyond sqrt(float32 max): its products with the normalized values and the
            # gradients reach float32's limit, finite or inf by the order of the multiplications
            # (conv 125: eager's backward kernel -2.1e38, a decomposition's -inf)
            self.ill_conditioned = True
            return result
        if func in _BATCH_NORMS:
            try:
                # a training batch_norm normalizes each channel by its spread, as layer_norm does
                # its rows: a channel of values far from 0 compared with their spread (a constant
                # one: 0 +- rounding noise times 1/sqrt(eps); conv 10541, ember's x * invstd -
                # mean * invstd contracted to an FMA: 7e-4 off) is ill-conditioned the same way
                channels = [0, *range(2, args[0].dim())]
                if _normalization_overflows(func, args) or (_batch_norm_training(func, args) and args[0].dim() >= 2 and
                                                      _rows_ill_conditioned(args[0], channels)):
                    self.ill_conditioned = True
                    return result
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
        try:
            if self._amplifies_noise(func, args, result, kwargs) or (
                    func in _REMAINDERS and (_subnormal_divisor(args) or (
                        self._from_libm(args[0]) and _beyond_its_period(args[0])))):
                self.ill_conditioned = True
                return result
        except Exception:  # noqa: BLE001 - a watch must never change the run
            pass
        if (func in _NORMS or func in _STATISTICS) and isinstance(args[0], torch.Tensor):
            try:
                dims = _normalized_dims(func, args, kwargs)
                if _rows_ill_conditioned(args[0], dims, exact_constant_rows_ok=func in _STATISTICS) or (
                        func in _STATISTICS and _infinity_by_order(args[0], dims)):
                    self.ill_conditioned = True
                if func in (aten.var_mean.correction, aten.std_mean.correction):
                    mask = _mean_noise_zeros(args[0], dims, bool(kwargs.get("keepdim", False)), result[1])
                    if mask is not None:
                        self.noise_zeros[result[1]] = mask
                if func in (aten.var_mean.correction, aten.std_mean.correction) and args[0] in self.abs_noise:
                    # the mean of values with absolute noise carries at most the largest of it
                    # (the mean of a layer_norm's row is 0 +- that noise)
                    dims = _normalized_dims(func, args, kwargs)
                    noise = self.abs_noise[args[0]].double()
                    self.abs_noise[result[1]] = noise.amax(dim=dims, keepdim=bool(kwargs.get("keepdim", False))) \
                        if dims else noise
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func is aten.native_batch_norm_backward.default and _eager_eval_batch_norm_misreads(args, result):
            self.ill_conditioned = True
            return result
        if func in _BATCH_NORM_BACKWARDS and _eager_batch_norm_bias_gradient_wrong(
                (args[1], args[0]) if func is aten.cudnn_batch_norm_backward.default else args, result):
            # (cudnn's takes the input first)
            self.ill_conditioned = True
            return result
        batch_norm_args = _as_native_batch_norm_backward(func, args)
        if func in _NORM_BACKWARD_CANCELS or batch_norm_args is not None:
            try:
                if batch_norm_args is None:
                    self.ill_conditioned = _NORM_BACKWARD_CANCELS[func](args)
                else:
                    self.ill_conditioned = _batch_norm_backward_cancels(batch_norm_args)
                if batch_norm_args is not None and result[0] is not None:
                    bound = _batch_norm_input_gradient_bound(batch_norm_args)
                    if bound is not None and bound.shape == result[0].shape:
                        self.sum_bounds[result[0]] = bound
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func in (aten.convolution.default, aten.convolution_backward.default) and \
                _non_finite_convolution_operand(args[:3]):
            self.ill_conditioned = True
            return result
        if func is aten.convolution_backward.default:
            # (a tuple: before the tensor-only checks below)
            try:  # its gradients are sums of products too: past float32's largest value, see below
                twins = func(args[0].abs(), args[1].abs(), args[2].abs(), *args[3:], **kwargs)
                self.ill_conditioned = any(t is not None and bool((t.double() > _FLOAT32_MAX).any()) for t in twins)
                # the input and weight gradients are sums of products too: where they cancel far
                # beyond the tolerance, a few ulps of difference in the output gradient (another
                # kernel's rounding) show (conv 703949: a weight gradient of -2.7e8 out of terms
                # adding up to 1.7e11 in size; eager -2.68749e8, ember -2.68759e8)
                for got, twin in zip(result[:2], twins[:2]):
                    if not self.ill_conditioned and got is not None and twin is not None and \
                            got.shape == twin.shape and got.is_floating_point():
                        self.ill_conditioned = _beyond_tolerance(got.detach().double(), twin.double())
                bounds = self.sum_bounds.get(args[0])
                if not self.ill_conditioned and bounds is not None and result[2] is not None:
                    # the bias gradient adds up the output gradient, and its terms' own rounding
                    # with it: independent errors, so their expected size (root of the sum of squares)
                    dims = [0, *range(2, args[0].dim())]
                    dy = args[0].detach().double()
                    noise = ((bounds ** 2).sum(dims) + ACCUMULATION_EPS ** 2 * (dy ** 2).sum(dims)).sqrt()
                    self.ill_conditioned = _beyond_tolerance(result[2].detach().double(), noise / ACCUMULATION_EPS)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func in _ARG_REDUCTIONS and isinstance(args[0], torch.Tensor):
            try:
                noise = self.abs_noise.get(args[0])
                self.ill_conditioned = _near_tie(func, args, kwargs, exact_ties=self._from_libm(args[0]),
                                                 noise=None if noise is None else float(noise.max()))
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func in _ROUNDINGS or func in _QUOTIENTS or func in _COMPARISONS or func is aten._to_copy.default:
            try:
                # A quotient exactly on the jump is one too where its operands come from libm: eager
                # divides a value by itself (1.0), a compiler that recomputes the value in two
                # kernels may round it 1 ulp apart in the two (a vectorized log and a scalar one:
                # default 14324, `trunc(v / log_softmax(a))` with v gathered from the same values)
                # (and any jump of a value accumulated from libm results: self.inexact)
                exact = func in _QUOTIENTS and (self._from_libm(args[0]) or
                                                len(args) > 1 and self._from_libm(args[1])) or \
                    any(isinstance(a, torch.Tensor) and a in self.inexact for a in args[:2])
                self.ill_conditioned = _near_jump(func, args, kwargs, exact)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if not isinstance(result, torch.Tensor) or not result.is_floating_point():
            return result
        if func in _ADDITIONS:
            try:
                self.ill_conditioned = self._sums_cancel(args, result)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func is aten.gelu.default and kwargs.get("approximate", "none") == "none" and \
                bool((args[0].detach() == math.inf).any()):
            # eager's own gelu(inf) is inf on its scalar path and NaN on its vectorized one (float32,
            # float16, bfloat16: a tensor of one inf gives inf, of three NaN; default 37283)
            self.ill_conditioned = True
            return result
        if func in _PERIODIC and isinstance(args[0], torch.Tensor):
            # sin(x) moves by up to |dx|: one rounding of a large argument (eps * |x|) moves
            # the result beyond any tolerance (sin(exp(10)) after a 1-ulp different exp).
            x = args[0].detach().double().abs()
            if bool((ACCUMULATION_EPS * x[torch.isfinite(x)] > PERIODIC_LIMIT).any()):
                self.ill_conditioned = True
            return result
        if func in _EXTREME_REDUCTIONS and _zero_extreme_of_both_zeros(args[0], result):
            # amin/amax over 0.0 and -0.0: which zero is the extreme is the kernel's choice (conv
            # 12457: eager's amin -0.0, ember's +0.0; a division by it gives -inf or inf)
            self.ill_conditioned = True
            return result
        if func in (aten.maximum.default, aten.minimum.default) and _opposite_zero_ties(args):
            # eager's own choice between 0.0 and -0.0 differs by path (float64 vector lanes take
            # the second, its scalar loop and float32 the first); a division shows it (default 9031)
            self.ill_conditioned = True
            return result
        if func in _ACCUMULATING_WRITES and isinstance(args[0], torch.Tensor):
            try:
                self.ill_conditioned = _rounded_accumulation(func, args, kwargs, result)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        if func in (aten.prod.default, aten.prod.dim_int) and isinstance(args[0], torch.Tensor):
            try:
                self.ill_conditioned = _zero_meets_overflow(func, args) or _overflow_by_order(func, args)
            except Exception:  # noqa: BLE001 - a watch must never change the run
                pass
            return result
        try:
            scale = _abs_twin(func, args, kwargs)
        except Exception:  # noqa: BLE001 - a watch must never change the run
            return result
        if scale is not None and scale.numel():
            if bool((scale.double() > _FLOAT32_MAX).any()):
                # |terms| adding past float32's largest value: a partial sum overflows or not by
                # the order of the additions (conv 167: channels-last gave -inf, eager -1.4e38)
                self.ill_conditioned = True
                return result
            bound = ACCUMULATION_EPS * scale.double()
            size = result.detach().double().abs()
            finite = torch.isfinite(bound) & torch.isfinite(size)
            if not bool(finite.any()):
                return result
            floor = ATOL * max(1.0, float(size[finite].median()))
            if bool((bound[finite] > CONDITION_LIMIT * size[finite] + floor).any()):
                self.ill_conditioned = True
                return result
            # Within the tolerance, but results that are their own rounding error are noise
            # zeros: a root or quotient of one is not (default 35543: a cumsum of +-pi/4 is
            # 6e-8 in eager, -1e-7 after ember's 1-ulp different atan2, and sqrt makes 2e-4 or NaN).
            noisy = finite & (bound > CONDITION_LIMIT * size)
            if noisy.shape == result.shape and bool(noisy.any()):
                self.noise_zeros[result] = noisy
            if bound.shape == result.shape:
                self.sum_bounds[result] = torch.where(torch.isfinite(bound), bound, 0)
                if func in _MATRIX_PRODUCTS or func is aten.convolution.default or func in _ROW_SUMS:
                    # a product's rounding (its own order of additions) carried into a sensitive
                    # op after it (layout 12594: -2 / (v.T @ v) where the 7-term products cancel to
                    # -0.0046: eager -431.846, ember's another order -431.857); a convolution's
                    # too (GPU conv 710199: the reciprocal of a 1x1 convolution plus its bias),
                    # and a sum's or mean's (GPU autograd 712619: fmod(3000, mean of 8 values near
                    # 0.05), where an ulp of the divisor moves the remainder by 2e-4)
                    self.abs_noise[result] = torch.where(torch.isfinite(bound), bound, 0)
        return result

    def _libm_noise_cancels(self, func, args, result) -> bool:
        """Follows the rounding noise of libm results (an ulp or two: eager's Sleef and ember's
        libm round differently) through products, quotients and views; True where an addition
        cancels so much that the noise of its terms exceeds the tolerance of the result (special
        16643: the gradient of c / tanh(c) at |c| ~ 0.01 is a difference of two terms of size
        1 / c; over its 48 elements eager's and ember's are both up to 3e-4 off float64, for
        gradients of 4e-3)."""
        if not isinstance(result, torch.Tensor) or not result.is_floating_point():
            return False
        if func in _LIBM:
            self.libm_noise[result] = torch.nan_to_num(
                2 * ACCUMULATION_EPS * result.detach().double().abs(), nan=0.0, posinf=0.0)
            return False
        noises = [self.libm_noise.get(a) if isinstance(a, torch.Tensor) else None for a in args[:2]]
        if all(n is None for n in noises):
            return False
        if func.is_view or func in (aten.clone.default, aten._to_copy.default, aten.neg.default):
            if noises[0] is not None:
                self.libm_noise[result] = func(noises[0], *args[1:]) if func.is_view else noises[0]
            return False
        if len(args) < 2:
            return False
        values = [a.detach().double() if isinstance(a, torch.Tensor) else torch.tensor(float(a), dtype=torch.float64)
                  for a in args[:2]]
        noise = [n if n is not None else torch.zeros((), dtype=torch.float64) for n in noises]
        size = result.detach().double().abs()
        if func in (aten.mul.Tensor, aten.mul_.Tensor):
            bound = values[1].abs() * noise[0] + values[0].abs() * noise[1]
        elif func in (aten.div.Tensor, aten.div_.Tensor):  # (a rounded quotient is div.Tensor_mode)
            bound = noise[0] / values[1].abs() + values[0].abs() * noise[1] / values[1] ** 2
        elif func in _ADDITIONS:
            bound = noise[0] + noise[1]
        else:
            return False
        bound = torch.nan_to_num((bound + ACCUMULATION_EPS * size).expand(result.shape), nan=0.0, posinf=0.0)
        self.libm_noise[result] = bound
        if func not in _ADDITIONS:
            return False
        finite = torch.isfinite(size)
        return bool((bound[finite] > (ATOL + SENSITIVE_RELATIVE_LIMIT * size)[finite]).any())

    def _sums_cancel(self, args, result) -> bool:
        """A sum of sums (autograd adding two reduced gradient contributions) that cancel: each
        is well-conditioned, but its rounding error survives their difference (default 40936:
        b's gradient through b / a and through atan2(., b) is 0 in exact arithmetic; eager
        -1.2e-4, ember's vectorized sums +1.2e-4)."""
        bounds = [self.sum_bounds.get(arg) for arg in args[:2] if isinstance(arg, torch.Tensor)]
        if not any(bound is not None for bound in bounds):
            return False
        size = result.detach().double().abs()
        bound = sum(b.expand(result.shape) for b in bounds if b is not None) + ACCUMULATION_EPS * size
        finite = torch.isfinite(bound) & torch.isfinite(size)
        if not bool(finite.any()):
            return False
        floor = ATOL * max(1.0, float(size[finite].median()))
        if bool((bound[finite] > CONDITION_LIMIT * size[finite] + floor).any()):
            return True
        self.sum_bounds[result] = torch.where(finite, bound, 0)
        return False

    def _follow_inplace_view(self, func, args) -> None:
        """x.squeeze_() (matmul of a vector ends with one) reshapes x itself: what is tracked of
        x's elements takes the same shape (GPU autograd 714661: the mm's noise zeros, lost)."""
        name = func._schema.name.split("::")[1].rstrip("_")
        view = getattr(getattr(aten, name), func._overloadname)
        for tracked in (self.noise_zeros, self.abs_noise, self.sum_bounds, self.libm_noise):
            value = tracked.get(args[0])
            if value is not None and value.dim() == len(args[0].shape) + (
                    0 if name in ("t", "transpose") else (1 if name == "squeeze" else -1)):
                with contextlib.suppress(Exception):  # (a watch must never change the run)
                    tracked[args[0]] = view(value, *args[1:])

    def _from_libm(self, value) -> bool:
        return isinstance(value, torch.Tensor) and value in self.from_libm

    def _noise_mask(self, value) -> torch.Tensor | None:
        return self.noise_zeros.get(value) if isinstance(value, torch.Tensor) else None

    def _amplifies_noise(self, func, args, result, kwargs=None) -> bool:
        """Track noise zeros through `func`; True where it divides by one (or roots, logs one)."""
        if func is aten.native_layer_norm.default:
            mask = _layer_norm_noise_zeros(args)
            if mask is not None:
                self.noise_zeros[result[0]] = mask
            if (len(args) < 3 or args[2] is None) and (len(args) < 4 or args[3] is None) and args[1]:
                # each normalized row sums to 0 in exact arithmetic: a sum over whole rows is noise
                self.zero_sum_dims[result[0]] = set(range(args[0].dim() - len(args[1]), args[0].dim()))
            noise = _layer_norm_noise(args)
            if noise is not None:
                self.abs_noise[result[0]] = noise
                # an output that is its rounding noise beyond the tolerance: an element equal to its
                # row's mean (0 +- eps) times a weight of 9e307 is 0.5 (the bias) or 3e291 by the
                # kernel (special 706390: eager's CUDA layer_norm 3e291, its CPU one 0.5)
                out = result[0].detach().double()
                finite = torch.isfinite(out) & torch.isfinite(noise)
                if bool(finite.any()):
                    floor = ATOL * max(1.0, float(out[finite].abs().median()))
                    return bool((noise[finite] > floor + SENSITIVE_RELATIVE_LIMIT * out[finite].abs()).any())
            return False
        if func in _BATCH_NORMS:
            dims = _batch_norm_zero_sum_dims(func, args)
            if dims is not None:
                self.zero_sum_dims[result[0]] = dims
            return False
        if func in _REMAINDERS and len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1] in self.abs_noise:
            # x mod y moves by (x // y) * dy for a move dy of y: a normalized divisor's rounding
            # noise times a large quotient (default 11412: fmod(1, 0.0156), 64 times the noise)
            noise = self.abs_noise[args[1]]
            if _moves_beyond_tolerance(lambda y, x, *rest: func(x, y, *rest), [args[1], args[0], *args[2:]], noise):
                return True
        if func in _SENSITIVE and self._from_libm(args[0]) and args[0] not in self.abs_noise and \
                args[0].is_floating_point():
            # a libm function's result is good to an ulp or so, and implementations round
            # differently (eager's Sleef, ember's libmvec): an op that amplifies an ulp beyond the
            # tolerance makes any of them as right as eager's (layout 13050: log1p(sin(x)) at
            # sin(x) = -0.99989, condition number 1e3; ember's sin 1 ulp from eager's moved the
            # result by 6e-5 relative)
            # (float32's ulp: a float16/bfloat16 result is the same float32 value rounded alike)
            noise = torch.nan_to_num(ACCUMULATION_EPS * args[0].detach().double().abs(), nan=0.0, posinf=0.0)
            if _moves_beyond_tolerance(func, args, noise):
                return True
        if args and isinstance(args[0], torch.Tensor) and args[0] in self.abs_noise:
            noise = self.abs_noise[args[0]]
            if func in _SENSITIVE:
                # (within the tolerance: the rules below may still apply, a noise zero's power)
                if _moves_beyond_tolerance(func, args, noise):
                    return True
            elif (func.is_view or func is aten._unsafe_view.default) and isinstance(result, torch.Tensor):
                self.abs_noise[result] = func(noise, *args[1:])
            elif func in (aten.clone.default, aten._to_copy.default) and isinstance(result, torch.Tensor):
                self.abs_noise[result] = noise
            elif func in _MASKED_FILLS and isinstance(result, torch.Tensor) and len(args) > 1 and \
                    isinstance(args[1], torch.Tensor) and not args[1].is_floating_point():
                # the filled places hold the (exact) fill value, the others keep their noise
                self.abs_noise[result] = torch.where(args[1].broadcast_to(result.shape), 0.0,
                                                     noise.double().broadcast_to(result.shape))
        if func is aten.logsumexp.default and args[0] in self.log_prob_dims:
            # the logsumexp of log-probabilities over their rows is log(1 +- eps): 0 +- noise
            # (reductions 705951: v / v of it, NaN or 1 by the kernel's rounding)
            dims = {d % max(args[0].dim(), 1) for d in args[1]} if args[1] else set(range(args[0].dim()))
            if self.log_prob_dims[args[0]] <= dims:
                self.noise_zeros[result] = torch.ones(result.shape, dtype=torch.bool, device=result.device)
            return False
        if func is aten._log_softmax.default and isinstance(result, torch.Tensor):
            self.log_prob_dims[result] = {args[1] % max(args[0].dim(), 1)}
            # log_softmax near 0 (the max of a row whose other terms are tiny) is -log(sum) of a
            # sum near 1: an ulp of the sum is a relative error of eps / |y|, and dividing by y
            # shows it (default 49189: eager -1.278e6, ember -1.266e6)
            mask = result.detach().double().abs() < _RELATIVE_NOISE * ACCUMULATION_EPS
            if bool(mask.any()):
                self.noise_zeros[result] = mask
            return False
        if func is aten.gelu.default and isinstance(result, torch.Tensor) and result.is_floating_point():
            # gelu's left tail: x/2 * (1 + erf(x / sqrt 2)) where 1 + erf cancels; every float32
            # kernel gives noise of size |x| * eps there (known 2525: eager 2.11 -1e-7, ember 0)
            x, y = args[0].detach().double(), result.detach().double()
            mask = torch.isfinite(x) & (y.abs() < 4 * ACCUMULATION_EPS * x.abs())
            if bool(mask.any()):
                self.noise_zeros[result] = mask
            return False
        if func in _ROW_SUMS and isinstance(result, torch.Tensor) and args[0] in self.zero_sum_dims:
            # the sum (mean) of a layer_norm output over whole rows: 0 +- noise, of either sign
            # (lowp 11128: its mean raised to the output's powers, NaN for eager's -1e-9 and
            # 3e16 for ember's +1e-9)
            dims = args[1] if len(args) > 1 and args[1] is not None else list(range(args[0].dim()))
            dims = {d % max(args[0].dim(), 1) for d in ([dims] if isinstance(dims, int) else dims)} or \
                set(range(args[0].dim()))
            if self.zero_sum_dims[args[0]] <= dims:
                self.noise_zeros[result] = torch.ones(result.shape, dtype=torch.bool, device=result.device)
            return False
        if not self.noise_zeros or not args:
            return False
        first, second = self._noise_mask(args[0]), self._noise_mask(args[1] if len(args) > 1 else None)
        if func is aten.pow.Tensor_Tensor and first is not None and bool(first.any()):
            exponent = args[1].detach().double().expand(result.shape)[first.expand(result.shape)]
            if bool(((exponent < 0) | (exponent != exponent.round())).any()):
                return True
        if func in (aten.pow.Tensor_Tensor, aten.pow.Scalar) and second is not None and bool(second.any()):
            # b ** (0 +- noise) for b <= 0 is 1 at exactly 0 and NaN (b < 0) or 0 / inf (b = 0) by
            # the noise's sign (autograd 708256: a negative base to a layer_norm element equal to its
            # row's mean: eager's CUDA kernel and the float64 reference NaN, ember 1)
            base = args[0].detach().double() if isinstance(args[0], torch.Tensor) else torch.tensor(float(args[0]))
            base = base.expand(result.shape)[second.expand(result.shape)]
            return bool((base <= 0).any())
        if func is aten._to_copy.default and (kwargs or {}).get("dtype") is torch.bool:
            return first is not None and bool(first.any())  # bool() of noise: True or False by chance
        if func in _ROUNDINGS or func in _KINKED_AT_ZERO:
            # floor/ceil of 0 +- noise is 0 or -1 by the noise's sign (default 60988: floor of a
            # layer_norm element equal to its row's mean: eager 0, ember -1); relu's and abs's
            # derivatives jump there (conv 706351: relu of a Welford mean of integers summing to
            # 0, eager's CUDA kernel +1e-17 and gradient 1, its CPU one 0 and gradient 0)
            return first is not None and bool(first.any())
        if func in _LOGICAL:  # (default 36491: logical_and of a layer_norm output's nansum)
            return any(mask is not None and bool(mask.any()) for mask in (first, second))
        if func in _NOISE_AMPLIFYING or (func is aten.pow.Tensor_Scalar and _amplifying_exponent(args[1])):
            return first is not None and bool(first.any())
        if func in _DIVISIONS and second is not None:
            return bool(second.any())
        if func in _ROUNDED_QUOTIENTS and first is not None and _rounds_quotient(func, kwargs):
            # floor(noise / y) is 0 or -1, noise mod y is noise or y - noise, by the noise's sign
            return bool(first.any())
        if not isinstance(result, torch.Tensor) or first is None and second is None:
            return False
        if func in _NOISE_KEEPING or func is aten.div.Tensor:
            masks = [first, second] if func is aten.mul.Tensor else [first]
            mask = torch.zeros(result.shape, dtype=torch.bool, device=result.device)
            for operand in masks:
                if operand is not None:
                    mask = mask | operand.expand(result.shape)
            self.noise_zeros[result] = mask
        elif func.is_view and first is not None:
            self.noise_zeros[result] = func(first, *args[1:])
        return False
