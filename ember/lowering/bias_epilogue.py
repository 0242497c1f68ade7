"""A product plus a row bias as one library call where the sum is stored anyway.

The decompositions split `addmm(bias, a, b)` into `mm(a, b) + bias` so that the bias joins the
kernel of the pointwise op that comes next.  Where the sum is stored anyway (an output or a
library call reads it, through views) that add's kernel would read and write the whole product,
while cuBLASLt adds a bias in the product's epilogue for almost nothing: on CUDA such an add
goes back to `addmm`, as eager's `F.linear` calls it.
"""
from __future__ import annotations

import operator

import torch

from .graph import users_through

aten = torch.ops.aten
DEVICES = {"cuda"}  # (cuBLASLt's bias epilogue; tests add "cpu" to run the rewrite in CI)

# Ops that hand on their input's memory: the sum is still what their users read.
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
          aten.transpose.int, aten.t.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
          aten.alias.default, aten.slice.Tensor, aten.select.int, aten.split.Tensor, aten.split_with_sizes.default,
          aten.unbind.int, aten.expand.default, operator.getitem}


def use_bias_epilogues(graph: torch.fx.Graph) -> int:
    """Rewrite each `mm(a, b) + bias` whose sum is stored anyway into `addmm`; returns how many."""
    rewritten = 0
    for node in list(graph.nodes):
        match = _match(node)
        if match is None:
            continue
        product, bias = match
        with graph.inserting_before(node):
            fused = graph.call_function(aten.addmm.default, (bias, *product.args[:2]))
        fused.meta = dict(node.meta)
        node.replace_all_uses_with(fused)
        graph.erase_node(node)
        graph.erase_node(product)
        rewritten += 1
    return rewritten


def _match(node: torch.fx.Node):
    if node.op != "call_function" or node.target is not aten.add.Tensor or node.kwargs or len(node.args) != 2:
        return None
    for product, bias in (node.args, node.args[::-1]):
        if not (isinstance(product, torch.fx.Node) and product.op == "call_function"
                and product.target is aten.mm.default and len(product.users) == 1 and isinstance(bias, torch.fx.Node)):
            continue
        value, row = product.meta.get("val"), bias.meta.get("val")
        if not (isinstance(value, torch.Tensor) and isinstance(row, torch.Tensor)) or value.device.type not in DEVICES:
            continue
        if row.dim() != 1 or row.dtype != value.dtype or row.stride() != (1,) or value.dim() != 2 or \
                not isinstance(value.shape[1], int) or row.shape[0] != value.shape[1] or value.shape[1] < 2:
            continue
        result = node.meta.get("val")
        if not isinstance(result, torch.Tensor) or result.dtype != value.dtype or result.shape != value.shape:
            continue
        if _stored_anyway(node):
            return product, bias
    return None


def _stored_anyway(node: torch.fx.Node) -> bool:
    """Is the sum stored whatever the kernels do: does an output or a library call (an op without
    a lowering) read it, through views?  Then `addmm` writes it in place of the product."""
    from .lowerings import EXTERN_OPS, LOWERINGS

    return any(user.op == "output" or (user.op == "call_function" and user.target not in _VIEWS
                                       and (user.target in EXTERN_OPS or user.target not in LOWERINGS))
               for user in users_through(node, _VIEWS))
