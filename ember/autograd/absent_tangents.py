"""A backward graph for a call where autograd gave no gradient for some outputs.

Eager autograd never runs the backward of a path whose output the loss does not use.  A compiled
backward receives zeros for such an output instead, and its terms are then computed, not skipped:
`0 * exp(big)` is `0 * inf = NaN`, which eager never computes (fuzz index 1579: an output of a
graph before a graph break, unused after it).

A backward graph is linear in its tangents, so an absent tangent contributes nothing.  Here it is
a symbolic zero that is propagated through the graph by the rules below: an op linear in the zero
argument gives a zero, `a + zero` is `a`; an op with no rule gets real zeros (what every call
got before) so that nothing is ever dropped that is not zero.
"""
from __future__ import annotations

import operator

import torch
import torch.fx

aten = torch.ops.aten



def _packets(names: str) -> set:
    """The ATen op packets of these names that this torch has."""
    return {getattr(aten, name) for name in names.split() if hasattr(aten, name)}


# The result is zero when the first argument is: ops linear in it (the others are constants,
# indices or saved values of the forward).
_LINEAR_IN_FIRST = _packets("""
    neg div clone contiguous alias _to_copy sum mean view _unsafe_view reshape expand permute t
    transpose unsqueeze squeeze slice select narrow as_strided flip roll repeat index_select gather
    index cumsum diagonal unfold movedim expand_copy view_copy permute_copy squeeze_copy
    unsqueeze_copy select_backward slice_backward diagonal_backward expand_as sum_to_size
    _softmax_backward_data _log_softmax_backward_data threshold_backward gelu_backward silu_backward
    tanh_backward sigmoid_backward native_layer_norm_backward native_batch_norm_backward
    convolution_backward embedding_dense_backward avg_pool2d_backward
    max_pool2d_with_indices_backward mse_loss_backward nll_loss_backward hardtanh_backward
    leaky_relu_backward elu_backward softplus_backward unbind split split_with_sizes chunk
""")
# Zero when any tensor argument is zero (bilinear: products).
_LINEAR_IN_EACH = _packets("mul mm bmm matmul dot mv outer")
# Zero when every tensor argument is zero (sums).
_SUMS = _packets("cat stack")
# Zero when the base and the values written into it are (the first and the last tensor argument).
_WRITES = _packets("index_put index_add scatter_add slice_scatter select_scatter diagonal_scatter "
                   "as_strided_scatter")
# Zero whatever their argument (only its metadata is read).
_ZEROS = _packets("new_zeros zeros_like")


def _packet(target):
    return getattr(target, "overloadpacket", None)


class _Zero:
    """The value of a node that is zero for this call (its fake value gives shape and dtype)."""

    def __init__(self, node: torch.fx.Node) -> None:
        self.node = node


def without_tangents(backward: torch.fx.GraphModule, absent: set[int]) -> torch.fx.GraphModule:
    """A copy of `backward` where the tangents at positions `absent` (among the tangent
    placeholders) are zero and every term that only they feed is dropped."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node | _Zero] = {}
    tangent_position = 0
    for node in backward.graph.nodes:
        if node.op == "placeholder":
            new = graph.placeholder(node.name)
            new.meta = dict(node.meta)
            env[node] = new
            if node.name.startswith("tangents_"):
                if tangent_position in absent:
                    env[node] = _Zero(node)
                tangent_position += 1
            continue
        if node.op == "output":
            graph.output(torch.fx.node.map_arg(node.args[0], lambda n: _real(graph, env[n])))
            continue
        env[node] = _transfer(graph, node, env)
    graph.lint()
    return torch.fx.GraphModule(backward, graph)


def _transfer(graph: torch.fx.Graph, node: torch.fx.Node, env: dict):
    zeros = [n for n in node.all_input_nodes if isinstance(env[n], _Zero)]
    if zeros:
        zero_value = _zero_rule(graph, node, env, set(zeros))
        if zero_value is not None:
            return zero_value
    new = graph.node_copy(node, lambda n: _real(graph, env[n]))
    return new


def _zero_rule(graph, node, env, zeros: set):
    """The node's value when some of its inputs are zero, or None: compute it on real zeros."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return _Zero(node) if node.args[0] in zeros else None
    packet = _packet(node.target)
    tensor_args = [a for a in node.args if isinstance(a, torch.fx.Node)]
    if packet in _LINEAR_IN_FIRST and node.args and node.args[0] in zeros:
        return _Zero(node)
    if packet in _LINEAR_IN_EACH or packet in _ZEROS:
        return _Zero(node)
    if packet is aten.copy and len(node.args) >= 2 and node.args[1] in zeros:
        return _Zero(node)  # the destination's shape, the source's values
    if packet in _WRITES:
        values = [a for a in node.args[1:] if isinstance(a, torch.fx.Node)]
        if node.args[0] in zeros and values and values[-1] in zeros:
            return _Zero(node)
        return None
    if packet in _SUMS:
        items = node.args[0]
        if all(isinstance(a, torch.fx.Node) and a in zeros for a in items):
            return _Zero(node)
        return None
    if packet in (aten.add, aten.sub) and len(tensor_args) == 2 and not node.kwargs.get("alpha"):
        left, right = node.args[0], node.args[1]
        if left in zeros and right in zeros:
            return _Zero(node)
        if right in zeros:
            return _like(graph, env[left], node)
        if packet is aten.add:
            return _like(graph, env[right], node)
        negated = graph.call_function(aten.neg.default, (env[right],))
        negated.meta["val"] = _fake_of(env[right]).neg()
        return _like(graph, negated, node)
    if packet is aten.where and len(node.args) == 3:
        if node.args[1] in zeros and node.args[2] in zeros:
            return _Zero(node)
    return None


def _like(graph: torch.fx.Graph, value: torch.fx.Node, node: torch.fx.Node) -> torch.fx.Node:
    """`value` (one term of the sum `node`) with the sum's shape and dtype."""
    want = node.meta.get("val")
    have = _fake_of(value)
    if not isinstance(want, torch.Tensor) or not isinstance(have, torch.Tensor):
        raise NotImplementedError("a term without a recorded value")
    if tuple(have.shape) != tuple(want.shape):
        value = graph.call_function(aten.expand.default, (value, list(want.shape)))
        have = have.expand(want.shape)
        value.meta["val"] = have
    if have.dtype != want.dtype:
        value = graph.call_function(aten._to_copy.default, (value,), {"dtype": want.dtype})
        have = have.to(want.dtype)
        value.meta["val"] = have
    # The sum was fresh memory; a term may be a saved tensor or a view of one.
    out = graph.call_function(aten.clone.default, (value,))
    out.meta["val"] = want
    return out


def _fake_of(value):
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else None


def _real(graph: torch.fx.Graph, value):
    if not isinstance(value, _Zero):
        return value
    fake = value.node.meta.get("val")
    if isinstance(fake, (tuple, list)):
        raise NotImplementedError("zero tuple reaching a real use")
    node = graph.call_function(aten.zeros.default, (list(fake.shape),),
                               {"dtype": fake.dtype, "device": fake.device})
    node.meta["val"] = fake
    return node
