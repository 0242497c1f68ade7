"""Graph patterns that more than one stage must agree on."""
from __future__ import annotations

import operator

import torch

aten = torch.ops.aten

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


def compared_with_its_extremum(graph: torch.fx.Graph) -> set:
    """Values `x` that an `x == max(x)` mask (the backward of max/min/amax/amin) compares with
    their own extremum.  Recomputed in the backward by another kernel, `x` can round differently
    from the forward's copy (sin in a vectorized loop's lanes and in a scalar loop differ by an
    ulp): no element equals the saved max, the mask is empty and the gradient is 0/0 = NaN
    (fuzz autograd 2104).  The partitioner keeps such values in the forward, and the lowering
    stores them once so that the reduction and the comparison read the same values."""
    pinned = set()
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _EQUALITIES:
            continue
        sides = [_through_views(arg) for arg in node.args[:2]]
        for value, other in (sides, sides[::-1]):
            if (isinstance(other, torch.fx.Node) and other.op == "call_function" and other.target in _EXTREMA
                    and _through_views(other.args[0]) is value):
                pinned.add(value)
    return pinned
