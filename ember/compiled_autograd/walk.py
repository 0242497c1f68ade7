"""The autograd graph a backward call would run: its nodes in the engine's order, and what each
holds that a captured graph depends on (the cache key)."""
from __future__ import annotations

import heapq
import weakref

import torch

# The hook dictionaries of nodes that hooks were registered on directly (grad_fn.register_hook,
# register_prehook): Python cannot see which node holds which, so while one holds a hook no
# backward is captured (__init__.py notes each; module hooks, which ember traces, are not noted).
NODE_HOOKS: dict[int, weakref.ref] = {}  # id -> the dictionary, weakly (it dies with its node)


def note_node_hooks(hooks: dict) -> None:
    key = id(hooks)
    NODE_HOOKS[key] = weakref.ref(hooks, lambda _: NODE_HOOKS.pop(key, None))


def node_hooks_alive() -> bool:
    return any(ref() for ref in list(NODE_HOOKS.values())) if NODE_HOOKS else False


def gradient_edge(tensor: torch.Tensor) -> tuple:
    """(node, input number) a root tensor's gradient enters the graph at."""
    edge = torch.autograd.graph.get_gradient_edge(tensor)
    return edge.node, edge.output_nr


def nodes_in_order(roots: list) -> list:
    """Every node reachable from `roots`, each after all the nodes that feed it gradients; among
    the ready ones, the most recently created first (as autograd's engine picks them)."""
    reachable, stack = {}, [node for node in roots if node is not None]
    dependencies: dict = {}
    while stack:
        node = stack.pop()
        if node in reachable:
            continue
        reachable[node] = True
        for next_node, _ in node.next_functions:
            if next_node is not None:
                dependencies[next_node] = dependencies.get(next_node, 0) + 1
                stack.append(next_node)
    # ties (every AccumulateGrad has the same sequence number) go by discovery order, which
    # the graph's structure fixes: the same structure walks in the same order every call
    found = {node: index for index, node in enumerate(reachable)}
    ready = [(-_sequence(node), found[node], node) for node in dict.fromkeys(root for root in roots if root is not None)
             if dependencies.get(node, 0) == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for next_node, _ in node.next_functions:
            if next_node is not None:
                dependencies[next_node] -= 1
                if dependencies[next_node] == 0:
                    heapq.heappush(ready, (-_sequence(next_node), found[next_node], next_node))
    if len(order) != len(reachable):
        raise RuntimeError("ember compiled autograd: the autograd graph has a node no root reaches first")
    return order


def _sequence(node) -> int:
    try:
        return node._sequence_nr()
    except (AttributeError, RuntimeError):
        return 0


_SAVED_NAMES: dict[type, list[str]] = {}


def saved_names(node) -> list[str]:
    """A built-in node's saved attributes (`_saved_self`, `_saved_dim`, ...), per node type."""
    kind = type(node)
    if kind not in _SAVED_NAMES:
        _SAVED_NAMES[kind] = sorted(name for name in dir(node) if name.startswith("_saved_"))
    return _SAVED_NAMES[kind]


def describe(value):
    """What a saved value contributes to the cache key: tensors by metadata, the rest as is."""
    if isinstance(value, torch.Tensor):  # (torch.Size is a tuple: kept as it is, equal to and hashed as one)
        return ("tensor", value.shape, value.stride(), value.dtype, value.device, value.requires_grad)
    if isinstance(value, (list, tuple)):
        return tuple(describe(item) for item in value)
    if isinstance(value, (int, float, bool, str, type(None), torch.dtype, torch.device, torch.Size)):
        return value
    # (another object, e.g. a memory format: by its repr, so that a different value is another
    # key; one whose repr names its address never matches, and recaptures: slow, never wrong)
    return (type(value).__name__, repr(value))
