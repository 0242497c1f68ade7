"""Graph patterns that more than one stage must agree on."""
from __future__ import annotations

import operator

import torch

aten = torch.ops.aten
# node.meta key: a mean the partitioner found subtracted from its own input (centering_means)
CENTERS_ITS_INPUT = "ember_centers_its_input"

_EXTREMA = {aten.amax.default, aten.amin.default, aten.max.default, aten.min.default, aten.max.dim,
            aten.min.dim}
_EQUALITIES = {aten.eq.Tensor, aten.ne.Tensor}
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
          aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.permute.default,
          aten.alias.default, operator.getitem}


def _through_views(node):
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in _VIEWS:
        node = node.args[0]
    return node


def _extremum_of(other, value) -> bool:
    """Is `other` max/min (amax, amin, ...) of `value` (through views)?"""
    return (isinstance(other, torch.fx.Node) and other.op == "call_function" and other.target in _EXTREMA
            and _through_views(other.args[0]) is value)


def compared_with_its_extremum(graph: torch.fx.Graph) -> set:
    """Values `x` that an `x == max(x)` mask (max/min's backward) compares with their own extremum.
    Recomputed by another kernel, `x` can round an ulp differently (vector lanes, scalar loops):
    the mask is then empty and the gradient NaN (test_max_min_backward_masks_the_values_the_forward_reduced).
    The partitioner keeps them in the forward; the lowering stores them once."""
    pinned = set()
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _EQUALITIES:
            continue
        sides = [_through_views(arg) for arg in node.args[:2]]
        pinned.update(value for value, other in (sides, sides[::-1]) if _extremum_of(other, value))
    return pinned


# Functions whose vectorized (libmvec) and scalar (libm) C++ versions can differ by an ulp.
_TRANSCENDENTAL = {getattr(aten, name).default for name in (
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "sigmoid", "atan2")} | {
    aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar}


def _from_transcendental(node, depth: int = 8) -> bool:
    """Is `node` computed (through pointwise ops, up to `depth` deep) by a libm function?"""
    if depth == 0 or not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if node.target in _TRANSCENDENTAL:
        return True
    if node.target not in _VIEWS and torch.Tag.pointwise not in getattr(node.target, "tags", ()):
        return False
    return any(_from_transcendental(arg, depth - 1) for arg in node.all_input_nodes)


def subtracted_from_its_extremum(graph: torch.fx.Graph) -> set:
    """Values `x` of a libm function that `x - max(x)` (softmax, log_softmax) subtracts from their own
    extremum: recomputed inline, the two loops round `x` differently, and `x - max(x)` at the maximum
    is an ulp off 0 (test_log_softmax_of_a_libm_result_is_zero_at_its_maximum).  The lowering stores them once."""
    pinned = set()
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not aten.sub.Tensor:
            continue
        value, other = (_through_views(arg) for arg in node.args[:2])
        if _extremum_of(other, value) and _from_transcendental(value):
            pinned.add(value)
    return pinned


def centers_its_input(mean: torch.fx.Node) -> bool:
    """Is `mean(x)` subtracted from that same x (`x - x.mean(dims, keepdim=True)`, var's and std's
    backward)?  The lowering makes such a mean exact for a row of equal values (their difference
    must be exactly 0, as in eager)."""
    return any(user.target is aten.sub.Tensor and len(user.args) == 2 and user.args[0] is mean.args[0]
               and user.args[1] is mean and not user.kwargs for user in mean.users)


def centering_means(graph: torch.fx.Graph) -> set:
    """The means of `graph` that center their input, marked by the partitioner on the joint graph
    (CENTERS_ITS_INPUT): the forward may keep the mean and the backward recompute x
    (test_a_mean_the_partitioner_keeps_in_the_forward_stays_exact_for_equal_values)."""
    return {node for node in graph.nodes
            if node.op == "call_function" and node.target in (aten.mean.dim, aten.mean.default)
            and centers_its_input(node)}
