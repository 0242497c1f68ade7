"""Recording a backward pass as one FX graph of ATen ops.

The backward runs for real, once, under `BackwardTracer` (a TorchDispatchMode): each ATen op
becomes a graph node, its arguments looked up by the identity of the tensors that flow in.  A
tensor the graph did not compute is an input (root gradients, saved values, a leaf's `.grad`),
registered with how to fetch it at the next backward (`InputSource`); one nobody registered makes
the capture fail (`CannotCapture`) and autograd's engine runs that backward.  Hooks are not run
while tracing: the graph calls them (`call_hook`), and the trace goes on with a stand-in.
"""
from __future__ import annotations

import dataclasses
import operator
import weakref
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ..errors import CannotCapture


@dataclasses.dataclass(frozen=True)
class InputSource:
    """Where a graph input comes from at each backward, relative to the walk's node list:
    ("root", k) the k-th root gradient, ("saved", node, attribute, item) a built-in node's saved
    tensor, ("ctx", node, k) a Python Function's k-th saved tensor, ("grad", node) an
    AccumulateGrad variable's `.grad`, ("attr", node, target) a tensor an ember region's backward
    graph holds."""

    kind: str
    node: int = -1
    name: str = ""
    item: int = -1


def call_hook(hooks: list, index: int, grad):
    """A tensor hook's call in the captured graph: its result, or the gradient it left as it was."""
    result = hooks[index](grad)
    return grad if result is None else result


def call_module_pre_hooks(hooks: list, index: int, *grads):
    """A module's full backward pre-hooks (torch.utils.hooks.BackwardHook `hooks[index]`) on the
    gradients of its outputs: the gradients of every output (None for non-tensors), as the hooks
    left them."""
    state = hooks[index]
    grad_outputs = tuple(state._pack_with_none(state.output_tensors_index, grads, state.n_outputs))
    for hook in state.user_pre_hooks:
        result = hook(state.module, grad_outputs)
        if result is not None:
            if len(result) != len(grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(result)}, "
                                   f"but expected {len(grad_outputs)}")
            grad_outputs = tuple(result)
    return grad_outputs


def call_module_hooks(hooks: list, index: int, count: int, *grads):
    """A module's full backward hooks on the gradients of its inputs (`grads[:count]`, one per
    tensor input) and outputs (`grads[count:]`, every output): the tensor inputs' gradients."""
    state = hooks[index]
    grad_inputs = tuple(state._pack_with_none(state.input_tensors_index, grads[:count], state.n_inputs))
    grad_outputs = tuple(grads[count:])
    for hook in state.user_hooks:
        result = hook(state.module, grad_inputs, grad_outputs)
        if result is not None:
            if len(result) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(result)}, but "
                                   f"expected {len(grad_inputs)}")
            grad_inputs = tuple(result)
    return tuple(grad_inputs[i] for i in state.input_tensors_index)


class BackwardTracer(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.graph = torch.fx.Graph()
        # id(tensor) -> (weak reference to it, its node): a value dies when the backward drops it
        # (holding every intermediate would take the whole backward's memory at once), and a
        # dead entry cannot match a new tensor at the same id
        self.values: dict[int, tuple[weakref.ref, torch.fx.Node]] = {}
        self.kept: list[torch.Tensor] = []  # inputs (saved values, root gradients): alive anyway
        self.sources: list[InputSource] = []
        self.placeholders: list[torch.fx.Node] = []
        self.hooks: list[Callable] = []
        self.hooks_node: torch.fx.Node | None = None
        self.prefix = ""  # e.g. "aot0_": nodes of ember's compiled backward 0
        self.origin = ""  # the autograd node being traced (a comment in the dump)
        self.position = -1  # its position in the walk
        self.name_hint: str | None = None
        self.resolve: Callable[[torch.Tensor], torch.fx.Node | None] = lambda tensor: None

    # -- inputs ----------------------------------------------------------------------------------------
    def placeholder(self, tensor: torch.Tensor, source: InputSource, name: str) -> torch.fx.Node:
        with self._before_ops():
            node = self.graph.placeholder(name)
        node.meta["ember_source"] = source
        self.sources.append(source)
        self.placeholders.append(node)
        self.kept.append(tensor)
        self.bind(tensor, node)
        return node

    def hooks_input(self) -> torch.fx.Node:
        if self.hooks_node is None:
            with self._before_ops():
                self.hooks_node = self.graph.placeholder("hooks")
        return self.hooks_node

    def _before_ops(self):
        if self.hooks_node is not None:
            return self.graph.inserting_before(self.hooks_node)
        if self.placeholders:
            return self.graph.inserting_after(self.placeholders[-1])
        return self.graph.inserting_before(None)  # (the start of the graph)

    def node_of(self, tensor: torch.Tensor) -> torch.fx.Node:
        known = self.values.get(id(tensor))
        if known is not None and known[0]() is tensor:
            return known[1]
        node = self.resolve(tensor)
        if node is None:
            raise CannotCapture(f"{self.origin or 'the backward'} reads a tensor ({tuple(tensor.shape)}, "
                                f"{tensor.dtype}) that is neither a saved value nor computed in the backward")
        self.bind(tensor, node)
        return node

    def bind(self, tensor: torch.Tensor, node: torch.fx.Node) -> None:
        self.values[id(tensor)] = (weakref.ref(tensor), node)

    # -- ops -------------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            raise CannotCapture(f"{self.origin or 'the backward'} reads a tensor's value on the host (.item())")
        # (devices as strings: the graph's code then needs no torch.device calls, which capture
        # would have to trace)
        node_args, node_kwargs = pytree.tree_map_only(
            torch.device, str, pytree.tree_map_only(torch.Tensor, self.node_of, (args, kwargs)))
        out = func(*args, **kwargs)
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs), name=self._name(func))
        node.meta["ember_origin"] = self.origin
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
        elif isinstance(out, (tuple, list)):
            for index, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    self.bind(item, self.graph.call_function(operator.getitem, (node, index),
                                                             name=f"{node.name}_{index}"))
        # (an op writing into an argument leaves the tensor object as it was: its value is now the
        # op's result, so later reads see the write)
        if func._schema.is_mutable:
            for argument, value in zip(func._schema.arguments, args):
                if argument.alias_info is not None and argument.alias_info.is_write and isinstance(value, torch.Tensor):
                    self.bind(value, node)
        return out

    def _name(self, func) -> str:
        base = self.name_hint or func.__name__.split(".")[0]
        return self.prefix + base

    # -- graph-level calls ----------------------------------------------------------------------------
    def call_hook(self, hook: Callable, grad: torch.Tensor, kind: str) -> torch.Tensor:
        """`hook(grad)` as a call in the graph; the trace goes on with a stand-in of grad."""
        return self._stand_in(grad, self._call_with_hooks(call_hook, hook, (self.node_of(grad),), kind))

    def _call_with_hooks(self, function: Callable, hook, arguments: tuple, kind: str) -> torch.fx.Node:
        """`function(hooks, i, *arguments)` in the graph, `hooks[i]` being `hook`."""
        self.hooks.append(hook)
        node = self.graph.call_function(function, (self.hooks_input(), len(self.hooks) - 1, *arguments),
                                        name=f"call_{kind}")
        node.meta["ember_origin"] = self.origin
        return node

    def _stand_in(self, like: torch.Tensor, node: torch.fx.Node) -> torch.Tensor:
        """A new tensor like `like` (a view, no memory), whose value is `node`'s."""
        with _disable_current_modes():
            stand_in = like.view_as(like)
        self.bind(stand_in, node)
        return stand_in

    def call_tuple(self, function: Callable, hook, head: tuple, arguments: list, likes: list, kind: str) -> list:
        """`function(hooks, i, *head, *arguments)` in the graph, returning a tuple; the trace goes
        on with a stand-in of `likes[k]` for its item k (None where that is None)."""
        values = [self.node_of(a) if isinstance(a, torch.Tensor) else a for a in arguments]
        node = self._call_with_hooks(function, hook, (*head, *values), kind)
        return [self._stand_in(like, self.graph.call_function(operator.getitem, (node, position),
                                                              name=f"{node.name}_{position}"))
                if isinstance(like, torch.Tensor) else None for position, like in enumerate(likes)]

    def run_region(self, gm: torch.fx.GraphModule, args: list, prefix: str) -> Any:
        """An ember region's backward graph (its Function's `ember_traceable_backward`), node by
        node, each recorded op named `prefix` + its node's name (`aot0_mul_3` is `mul_3` of backward
        graph 0).  Tensors the graph holds become inputs, read from the region's node at each backward."""
        tracer = self

        class Named(torch.fx.Interpreter):
            def run_node(self, node):
                tracer.name_hint = node.name
                try:
                    return super().run_node(node)
                finally:
                    tracer.name_hint = None

            def get_attr(self, target, args, kwargs):
                value = super().get_attr(target, args, kwargs)
                if isinstance(value, torch.Tensor):
                    known = tracer.values.get(id(value))
                    if known is None or known[0]() is not value:
                        tracer.placeholder(value, InputSource("attr", tracer.position, target),
                                           prefix + target.replace(".", "_"))
                return value

        previous, self.prefix = self.prefix, prefix
        try:
            return Named(gm).run(*args)
        finally:
            self.prefix = previous
