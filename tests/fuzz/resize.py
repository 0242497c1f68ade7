"""A program's inputs at other sizes, for the second-size call of the dynamic backends.

A graph compiled with symbolic sizes must give eager's results at every size its guards allow,
not only at the traced one: "ember_dynamic" calls the compiled program again on inputs grown
from the originals, and compares with eager at those sizes.  Every size of 2 or more grows by
the same amount in every input (sizes that were equal stay equal, so broadcasting still
lines up); sizes 0 and 1 stay (they are specialized, and broadcast).  Values are the originals
tiled (integer inputs that index stay in range), in the originals' memory order (expanded
dimensions stay expanded); a grad leaf is a leaf again, and a clone of one a clone.
"""
from __future__ import annotations

import torch

GROWTH = 3


def grown(inputs: list, leaves: list, growth: int = GROWTH) -> tuple[list, list]:
    sizes = {n for x in inputs if isinstance(x, torch.Tensor) for n in x.shape if n >= 2}
    mapping = {n: n + growth for n in sizes}
    new_inputs, new_leaves = [], []
    for x, leaf in zip(inputs, leaves):
        if not isinstance(x, torch.Tensor):
            new_inputs.append(x)
            new_leaves.append(leaf)
            continue
        if leaf is None:
            new_inputs.append(_grow(x, mapping))
            new_leaves.append(None)
            continue
        new_leaf = _grow(leaf, mapping).requires_grad_()
        new_inputs.append(new_leaf if x is leaf else new_leaf.clone())
        new_leaves.append(new_leaf)
    return new_inputs, new_leaves


def _grow(x: torch.Tensor, mapping: dict) -> torch.Tensor:
    data = x.detach()
    expanded = [d for d, (n, st) in enumerate(zip(x.shape, x.stride())) if st == 0 and n > 1]
    for d in expanded:
        data = data.narrow(d, 0, 1)
    for d, n in enumerate(x.shape):
        if d not in expanded and n in mapping:
            data = data.index_select(d, torch.arange(mapping[n]) % n)
    # the original's memory order, outermost first (dims of size 1 and expanded ones last)
    order = sorted(range(x.dim()), key=lambda d: (d in expanded, -x.stride(d)))
    target = [mapping.get(n, n) for n in x.shape]
    base = torch.empty([data.shape[d] for d in order], dtype=x.dtype, device=x.device).permute(
        tuple(order.index(d) for d in range(x.dim())))
    if x._base is None:
        # a tensor of its own as the original was, not a view: eager's autograd treats in-place
        # writes to a view of a leaf differently (inplace 10377: eager raised at the grown sizes only)
        base = torch.empty_strided(base.shape, base.stride(), dtype=x.dtype, device=x.device)
    base.copy_(data)
    return base.expand(target) if expanded else base
