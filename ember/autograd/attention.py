"""Attention masks laid out for the fused attention kernels, before the captured graph is traced.

scaled_dot_product_attention picks its kernel from its arguments' layouts: a mask whose last
dimension is broadcast (stride 0: BERT's, expanded from [batch, 1, query, 1]) rules out the fused
kernels, and the math path materializes the whole attention matrix.  Such a mask is passed as a
contiguous copy: the same values, and the fused kernels accept it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .view_geometry import has_symbols

_ATTENTION = {F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}
_MASK_POSITION = 3


def contiguous_attention_masks(gm: torch.fx.GraphModule) -> int:
    """Inserts `.contiguous()` before masks whose last dimension is broadcast; returns how many."""
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _ATTENTION:
            continue
        if "attn_mask" in node.kwargs:
            mask, where = node.kwargs["attn_mask"], "kwarg"
        elif len(node.args) > _MASK_POSITION:
            mask, where = node.args[_MASK_POSITION], "arg"
        else:
            continue
        value = mask.meta.get("example_value") if isinstance(mask, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.stride()[-1] == 1 or value.shape[-1] == 1:
            continue
        with gm.graph.inserting_before(node):
            copy = gm.graph.call_method("contiguous", (mask,))
        copy.meta["example_value"] = value.contiguous() if not has_symbols(value) else value
        if where == "kwarg":
            node.kwargs = {**node.kwargs, "attn_mask": copy}
        else:
            node.args = (*node.args[:_MASK_POSITION], copy, *node.args[_MASK_POSITION + 1:])
        changed += 1
    if changed:
        gm.recompile()
    return changed
