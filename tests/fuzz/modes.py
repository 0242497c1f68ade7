"""Generator modes: how often each op family, dtype, layout and special value is drawn.

"default" is the broad mix; the others lean on one area where the project has seen bugs (each
names the issue-report bug classes it targets). A mode is the default profile with overrides.
"""
from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    family_weights: dict = dataclasses.field(default_factory=dict)
    dtype_weights: dict = dataclasses.field(default_factory=dict)
    layout_weights: dict = dataclasses.field(default_factory=dict)
    sizes: tuple = (1, 2, 3, 4, 5, 7, 8, 16, 31)
    size_weights: tuple = (10, 8, 10, 7, 8, 7, 5, 4, 4)
    rare_sizes: tuple = (17, 33, 64, 100)
    rare_size_prob: float = 0.04
    zero_size_prob: float = 0.02
    rank_weights: tuple = (8, 25, 35, 22, 10)      # ranks 0..4
    n_inputs: tuple = (1, 4)
    n_ops: tuple = (2, 15)
    special_prob: float = 0.15       # an input gets some special values
    grad_prob: float = 0.2           # a float input requires grad
    nonleaf_prob: float = 0.25       # ... and is a clone of the leaf (not a leaf itself)
    special_scalar_prob: float = 0.1
    wide_int_prob: float = 0.35      # integer inputs over the full range of narrow types
    keep_error_prob: float = 0.01    # keep a statement that raises in eager as the last one
    oob_index_prob: float = 0.0      # index tensors with an out-of-range entry
    # After a statement with a bool or integer result, convert it (`.float()`, ...) right away:
    # fused conversions show values a bool/narrow-int buffer would have normalized or wrapped.
    convert_after_prob: float = 0.0


FAMILIES = ("unary", "binary", "compare", "logical", "bitwise", "where", "clamp", "convert", "reduce",
            "softmax", "norm", "view", "join", "index", "scatter", "matmul", "cumsum", "inplace", "alias",
            "factory", "narrow", "strided", "conv", "intmm", "stats", "normview")
# Families added after the first runs: drawn only by modes that name them, so that the programs
# of existing seeds (and the expected failures keyed by seed) stay the same.  A new family goes
# at the end of FAMILIES (a weight of 0 there leaves every earlier draw as it was).
LATER_FAMILIES = ("narrow", "strided", "conv", "intmm", "stats", "normview")

DEFAULT_FAMILY_WEIGHTS = {
    "unary": 12, "binary": 16, "compare": 4, "logical": 2, "bitwise": 2, "where": 3, "clamp": 2,
    "convert": 5, "reduce": 10, "softmax": 4, "norm": 2, "view": 12, "join": 3, "index": 4,
    "scatter": 3, "matmul": 3, "cumsum": 2, "inplace": 8, "alias": 3, "factory": 1,
}

DEFAULT_DTYPE_WEIGHTS = {
    torch.float32: 40, torch.float64: 6, torch.float16: 6, torch.bfloat16: 5, torch.int64: 8,
    torch.int32: 4, torch.int16: 2, torch.int8: 3, torch.uint8: 3, torch.bool: 4,
}

DEFAULT_LAYOUT_WEIGHTS = {"contiguous": 60, "permuted": 12, "strided": 8, "offset": 8, "expanded": 8}


MODES = {
    "default": Mode("default"),
    # log_softmax/softmax over a leading dim, var_mean over an empty dim, reductions over several
    # and non-innermost dims, sizes that are not a multiple of a vector width.
    "reductions": Mode(
        "reductions",
        family_weights={"reduce": 30, "softmax": 15, "norm": 6, "cumsum": 4, "view": 8, "unary": 4, "binary": 6},
        sizes=(1, 2, 3, 5, 7, 8, 16, 31, 33), size_weights=(6, 4, 6, 6, 6, 4, 8, 8, 4),
        zero_size_prob=0.08, rank_weights=(4, 15, 45, 26, 10)),
    # uint8 `7 - 200`, `(b + True).float()`, `0 ** -1`, int division and modulo, narrow-int wraparound.
    "intmath": Mode(
        "intmath",
        family_weights={"binary": 30, "unary": 8, "bitwise": 8, "logical": 4, "compare": 6, "convert": 10,
                        "reduce": 6, "cumsum": 3, "inplace": 6, "where": 3, "clamp": 3},
        dtype_weights={torch.int64: 10, torch.int32: 8, torch.int16: 6, torch.int8: 10, torch.uint8: 10,
                       torch.bool: 10, torch.float32: 8, torch.float16: 2},
        special_prob=0.4, special_scalar_prob=0.4, wide_int_prob=0.6, keep_error_prob=0.05),
    # inf // 0.5, sign(nan), 1 / x.long() for x = -0.0, NaN propagation through min/max/clamp.
    "special": Mode(
        "special",
        family_weights={"unary": 20, "binary": 20, "compare": 4, "where": 4, "clamp": 4, "convert": 8,
                        "reduce": 8, "softmax": 3, "cumsum": 2},
        special_prob=0.8, special_scalar_prob=0.35),
    # float16/bfloat16: var/std overflow, gelu/silu decompositions, fused rounding.
    "lowp": Mode(
        "lowp",
        family_weights={"unary": 18, "binary": 12, "reduce": 14, "softmax": 6, "norm": 5, "convert": 6,
                        "matmul": 3, "cumsum": 2, "view": 6},
        dtype_weights={torch.float16: 40, torch.bfloat16: 30, torch.float32: 10},
        special_prob=0.3, grad_prob=0.3),
    # returned x.detach(), in-place on non-leaf inputs that require grad, min/amin/prod backward
    # with inf/NaN, gradients through views and in-place ops.
    "autograd": Mode(
        "autograd",
        family_weights={"inplace": 14, "alias": 10, "reduce": 12, "unary": 10, "binary": 10, "view": 10,
                        "softmax": 4, "norm": 3, "matmul": 3, "index": 3, "scatter": 2, "where": 3, "clamp": 3},
        dtype_weights={torch.float32: 40, torch.float64: 10, torch.float16: 3, torch.int64: 3, torch.bool: 2},
        grad_prob=0.85, nonleaf_prob=0.4, special_prob=0.3),
    # in-place ops on inputs and intermediates, through views, with dtype promotion.
    "inplace": Mode(
        "inplace",
        family_weights={"inplace": 30, "view": 12, "binary": 8, "unary": 6, "alias": 5, "convert": 4,
                        "reduce": 4, "index": 3, "scatter": 3},
        grad_prob=0.25, keep_error_prob=0.03),
    # The issue report's list, all at once: bool/narrow-int arithmetic with scalars followed by a
    # conversion ((b + True).float(), uint8 7 - 200, 1 / x.long() for x = -0.0), special values
    # (inf // 0.5, sign(nan)), var_mean over empty dims, float16 var/std, detach, in-place on
    # inputs, min/amin/prod backward with inf/NaN, gelu/silu in low precision, bad indices.
    "known": Mode(
        "known",
        family_weights={"binary": 20, "unary": 12, "convert": 8, "reduce": 12, "softmax": 5, "inplace": 6,
                        "alias": 5, "index": 4, "compare": 3, "logical": 3, "bitwise": 3, "where": 2,
                        "narrow": 10},
        dtype_weights={torch.float32: 20, torch.float16: 8, torch.bfloat16: 5, torch.int64: 6, torch.int32: 3,
                       torch.int16: 3, torch.int8: 4, torch.uint8: 6, torch.bool: 8},
        zero_size_prob=0.06, special_prob=0.5, special_scalar_prob=0.3, grad_prob=0.35, nonleaf_prob=0.4,
        wide_int_prob=0.6, oob_index_prob=0.05, keep_error_prob=0.02, convert_after_prob=0.4, n_ops=(2, 8)),
    # Views whose strides or values show how their input is laid out in memory (diagonal with an
    # offset, unfold, as_strided) of intermediates that eager lays out in a permuted input's
    # order: a view run as an ATen call of a buffer ember stored otherwise read the wrong elements.
    "layout": Mode(
        "layout",
        family_weights={"strided": 14, "binary": 12, "unary": 6, "view": 8, "reduce": 6, "inplace": 3,
                        "join": 2, "where": 2},
        layout_weights={"contiguous": 30, "permuted": 30, "strided": 12, "offset": 12, "expanded": 6}),
    # Convolution nets with channels-last convolutions on the CPU (the harness turns them on for
    # this mode): conv2d, batch norm with running statistics, pooling, then pointwise ops,
    # reductions, views and in-place writes of channels-last values; gradients of the weights.
    "conv": Mode(
        "conv",
        family_weights={"conv": 20, "unary": 6, "binary": 10, "reduce": 6, "view": 6, "inplace": 4, "alias": 2,
                        "softmax": 2, "where": 2},
        dtype_weights={torch.float32: 30, torch.float64: 4},
        layout_weights={"contiguous": 50, "permuted": 20, "strided": 8, "offset": 8},
        sizes=(1, 2, 3, 4, 5, 6, 8), size_weights=(4, 8, 8, 8, 6, 6, 4), rank_weights=(0, 2, 4, 6, 30),
        grad_prob=0.5, n_ops=(2, 10)),
    # Issue 32's classes: statistics of equal values (var/std/var_mean over the dims an input is
    # expanded along, over a value broadcast back along a dim, var of var) and their gradients,
    # which are exactly 0 where eager's are; batch/layer/instance/group norms of selected, sliced,
    # narrowed or transposed views, then sums over the normalized dims and quotients of them.
    "stats": Mode(
        "stats",
        family_weights={"stats": 14, "normview": 10, "reduce": 5, "binary": 6, "unary": 4, "view": 5, "narrow": 2},
        dtype_weights={torch.float64: 30, torch.float32: 30, torch.float16: 3, torch.int64: 2},
        layout_weights={"contiguous": 40, "expanded": 30, "permuted": 10, "strided": 10, "offset": 10},
        sizes=(1, 2, 3, 4, 5, 8, 9, 16, 31), size_weights=(4, 8, 8, 8, 6, 6, 6, 6, 4), rank_weights=(2, 15, 40, 30, 13),
        grad_prob=0.5, n_ops=(2, 10)),
    # Issue 32's integer matrix products: addmm/addmv/baddbmm/addbmm of integer tensors with scalar
    # beta/alpha (floats truncate to the dtype in eager: int8 addmm with beta=0.5 stays int8),
    # mm/bmm/matmul of integers, narrow integers wrapping, a conversion right after.
    "intmm": Mode(
        "intmm",
        family_weights={"intmm": 20, "binary": 6, "convert": 4, "reduce": 3, "view": 4, "unary": 2},
        dtype_weights={torch.int8: 10, torch.uint8: 6, torch.int16: 6, torch.int32: 6, torch.int64: 10,
                       torch.float32: 4, torch.float64: 2},
        special_prob=0.2, wide_int_prob=0.5, n_ops=(2, 8)),
    # embedding/gather/index with out-of-range indices, index_put/scatter/index_add.
    "index": Mode(
        "index",
        family_weights={"index": 25, "scatter": 20, "view": 8, "reduce": 4, "binary": 6, "inplace": 6,
                        "join": 4},
        oob_index_prob=0.12, keep_error_prob=0.02),
}


def get_mode(name: str) -> Mode:
    if name not in MODES:
        raise SystemExit(f"unknown fuzz mode {name!r}; modes: {', '.join(MODES)}")
    return MODES[name]


def family_weights(mode: Mode) -> dict:
    if not mode.family_weights:
        return dict(DEFAULT_FAMILY_WEIGHTS)
    return {family: mode.family_weights.get(family, 0.0 if family in LATER_FAMILIES else 0.5)
            for family in FAMILIES}


def dtype_weights(mode: Mode) -> dict:
    return dict(mode.dtype_weights or DEFAULT_DTYPE_WEIGHTS)


def layout_weights(mode: Mode) -> dict:
    return dict(mode.layout_weights or DEFAULT_LAYOUT_WEIGHTS)
