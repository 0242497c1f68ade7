"""Running a partitioned graph pair from eager PyTorch: an autograd.Function per compiled entry.

    outputs = CompiledFunction.apply(*inputs)
      forward:  compiled_fw(*inputs) -> forward outputs, mutated inputs' new values, saved values
                (mutated inputs are written back with copy_; saved values go to ctx)
      backward: compiled on first use; compiled_bw(*saved, *grad_outputs) -> input gradients

When no input requires grad (or grad mode is off) the forward-only graph runs directly (the
inference path).  Outputs that alias an input come back as views of the real input.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from .. import logs
from .joint import JointSpec, replay_views

log = logs.get("graph_code")
log_fallbacks = logs.get("fallbacks")


class DoubleBackwardError(RuntimeError):
    pass


@dataclasses.dataclass
class CompiledPair:
    spec: JointSpec
    forward: Callable
    backward_graph: torch.fx.GraphModule | None
    bw_compiler: Callable | None
    num_saved: int
    saved_bytes: int
    _backward: Callable | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def backward(self, saved: list) -> Callable:
        """The compiled backward, compiled on first use for the layouts of `saved` (the forward's
        saved values of this call; a compiled forward makes them the same way every call)."""
        if self._backward is None:
            with self._lock:
                if self._backward is None:
                    placeholders = [n for n in self.backward_graph.graph.nodes if n.op == "placeholder"]
                    for node, value in zip(placeholders, saved):
                        _describe_layout_of(node, value)
                    inputs = [n.meta.get("val") for n in placeholders]
                    self._backward = self.bw_compiler(self.backward_graph, inputs)
        return self._backward

    @functools.cached_property
    def tangent_facts(self) -> tuple[list[set[int]], list]:
        """(for each gradient the backward returns, the tangents it depends on; each tangent's
        fake value).  An input whose gradient depends on no tangent that autograd gave gets
        None, as in eager, where autograd never reaches it."""
        placeholders = [n for n in self.backward_graph.graph.nodes if n.op == "placeholder"]
        tangents = [n for n in placeholders if n.name.startswith("tangents_")]
        depends: dict = {node: {position} for position, node in enumerate(tangents)}
        for node in self.backward_graph.graph.nodes:
            if node.op in ("call_function", "call_method"):
                depends[node] = set().union(*(depends.get(arg, set()) for arg in node.all_input_nodes))
        output = next(n for n in self.backward_graph.graph.nodes if n.op == "output")
        per_grad = [depends.get(value, set()) if isinstance(value, torch.fx.Node) else set()
                    for value in output.args[0]]
        return per_grad, [node.meta.get("val") for node in tangents]


def _describe_layout_of(node: torch.fx.Node, value) -> None:
    """Make the placeholder's fake value have `value`'s strides and storage offset.

    A compiled backward reads its inputs at the offsets and strides of their fake values. The
    forward's saved values can come back laid out otherwise: a view of an intermediate that
    ember's forward stored in another memory order (select of a permuted sum: fake offset 1,
    stride 15; ember's offset 5, stride 1), or a copy made before an in-place write.
    """
    fake = node.meta.get("val")
    if not (isinstance(value, torch.Tensor) and isinstance(fake, torch.Tensor)) or fake.shape != value.shape:
        return
    layout = (tuple(value.stride()), value.storage_offset())
    if layout == (tuple(fake.stride()), fake.storage_offset()) or getattr(fake, "fake_mode", None) is None:
        return
    extent = value.storage_offset() + 1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride()))
    with fake.fake_mode:
        storage = torch.empty(extent if value.numel() else value.storage_offset(), dtype=fake.dtype,
                              device=fake.device)
        node.meta["val"] = storage.as_strided(value.shape, value.stride(), value.storage_offset())


def _returned_outputs(spec: JointSpec) -> list[int]:
    """Forward outputs the graph hands back as tensors (constants, copies and views are filled in later)."""
    return [i for i in range(spec.num_fw_outputs)
            if i not in spec.constant_outputs and i not in spec.output_copies and i not in spec.output_aliases]


def _own_memory(values: list, indices: list[int], spec: JointSpec, args) -> list:
    """An autograd.Function's outputs may not be views (autograd would refuse in-place writes to
    them, and re-route gradients of an input returned as it is): a view of a graph intermediate
    is returned detached (its memory is its own: nobody else sees that intermediate), a tensor
    sharing an input's memory (one the runtime cannot re-make as a view) is copied."""
    inputs = None
    result = []
    for value, index in zip(values, indices):
        if isinstance(value, torch.Tensor):
            if index in spec.outputs_sharing_inputs:
                if inputs is None:
                    inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
                    inputs.discard(0)
                if value.untyped_storage().data_ptr() in inputs:
                    value = value.clone()
            if value._is_view():
                value = value.detach()
        result.append(value)
    return result


def _write_back(spec: JointSpec, args, new_values, skip=()) -> None:
    """Mutated inputs get their new values (what eager's in-place ops did to them)."""
    with torch.no_grad():
        for position, (index, value) in enumerate(zip(spec.mutated_inputs, new_values)):
            if position not in skip:
                args[index].copy_(value)


def _before_writes(spec: JointSpec, args, saved: list) -> list:
    """Saved values that share memory with an input about to be written are copied first: the
    backward needs them as they were (min-cut may recompute from such an input)."""
    written = {args[index].untyped_storage().data_ptr() for index in spec.mutated_inputs}
    return [value.clone() if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in written
            else value for value in saved]


def make_autograd_function(pair: CompiledPair) -> Callable:
    spec = pair.spec
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    returned = _returned_outputs(spec)
    # Inputs written in place that require grad (non-leaves): their new values leave the Function
    # as differentiable outputs and are copied into the inputs outside it, where autograd sees it.
    grad_mutations = [k for k in range(num_mutated) if spec.mutation_is_differentiable(k)]
    function_outputs = returned + [num_outputs + k for k in grad_mutations]  # indices into outputs + new values
    position_of = {index: k for k, index in enumerate(function_outputs)}

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            results = pair.forward(*args)
            values = list(results[:num_outputs + num_mutated])  # outputs, then new values of mutated inputs
            saved = list(results[num_outputs + num_mutated:])
            if num_mutated:
                saved = _before_writes(spec, args, saved)
            _write_back(spec, args, values[num_outputs:], skip=set(grad_mutations))
            ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
            ctx.saved_layout = [isinstance(s, torch.Tensor) for s in saved]
            ctx.saved_other = [s for s in saved if not isinstance(s, torch.Tensor)]
            outputs = _own_memory([values[i] for i in function_outputs], function_outputs, spec, args)
            non_diff = [out for i, out in zip(function_outputs, outputs) if i not in spec.diff_outputs and out is not None]
            if non_diff:
                ctx.mark_non_differentiable(*non_diff)
            ctx.set_materialize_grads(False)  # an output the loss does not use has no gradient: None
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *grad_outputs):
            if torch.is_grad_enabled():  # create_graph=True: a graph of this backward is wanted
                raise DoubleBackwardError(
                    "ember: double backward through a compiled region is not supported; compute the "
                    "higher-order gradient outside ember.compile, or call torch.autograd.grad without "
                    "create_graph=True")
            tensors = iter(ctx.saved_tensors)
            others = iter(ctx.saved_other)
            saved = [next(tensors) if is_tensor else next(others) for is_tensor in ctx.saved_layout]
            tangents = [grad_outputs[position_of[index]] if index in position_of else None
                        for index in spec.diff_outputs]  # (a copy's gradient arrives through its original)
            given = {position for position, tangent in enumerate(tangents) if tangent is not None}
            result: list = [None] * spec.num_primals
            if not given:
                return tuple(result)
            per_grad, fakes = pair.tangent_facts
            tangents = [tangent.contiguous() if tangent is not None else
                        torch.zeros(fake.shape, dtype=fake.dtype, device=fake.device)
                        for tangent, fake in zip(tangents, fakes)]
            grads = pair.backward(saved)(*saved, *tangents)
            for index, grad, needs in zip(spec.grad_inputs, grads, per_grad):
                result[index] = grad if needs & given else None
            return tuple(result)

    def run(*args):
        values = CompiledFunction.apply(*args)
        for k, value in zip(grad_mutations, values[len(returned):]):
            args[spec.mutated_inputs[k]].copy_(value)  # recorded by autograd, as eager's in-place op was
        return _assemble(spec, list(values[:len(returned)]), returned, args)

    run.autograd_function = CompiledFunction
    return run


def make_inference_function(spec: JointSpec, forward: Callable) -> Callable:
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    returned = _returned_outputs(spec)

    def run(*args):
        # No output requires grad (detach nodes are gone from the graph, so ATen calls on inputs
        # that require grad would build an autograd graph eager's results do not have).
        with torch.no_grad():
            results = forward(*args)
        _write_back(spec, args, results[num_outputs:num_outputs + num_mutated])
        return _assemble(spec, [results[i] for i in returned], returned, args)

    return run


def _assemble(spec: JointSpec, values: list, returned: list[int], args) -> Any:
    """The user's outputs: the graph's tensors, constants, copies, and views of inputs and of
    other outputs (made here, on the real tensors, as eager made them)."""
    flat: list = [None] * spec.num_fw_outputs
    for position, index in enumerate(returned):
        flat[index] = values[position]
    for index, value in spec.constant_outputs.items():
        flat[index] = value
    requires_grad = spec.output_requires_grad or [True] * spec.num_fw_outputs
    for index, source in spec.output_copies.items():
        value = flat[source]
        flat[index] = value if requires_grad[index] or not value.requires_grad else value.detach()
    if spec.output_aliases:
        _make_views(spec, flat, requires_grad, args)
    return pytree.tree_unflatten(flat[:spec.num_user_outputs], spec.out_spec)


def _make_views(spec: JointSpec, flat: list, requires_grad: list[bool], args) -> None:
    fixed: set[int] = set()
    for alias in spec.output_aliases.values():  # bases first: every view of one shares its memory
        if alias.kind == "output" and alias.chain != () and alias.source not in fixed:
            flat[alias.source] = _with_layout(flat[alias.source], alias)
            fixed.add(alias.source)
    for index, alias in spec.output_aliases.items():
        source = args[alias.source] if alias.kind == "input" else flat[alias.source]
        if not requires_grad[index] and source.requires_grad:
            source = source.detach()
        if alias.chain is not None:
            source = replay_views(alias.chain, source)
        else:
            if alias.dtype is not None:
                source = source.view(alias.dtype)
            source = source.as_strided(alias.size, alias.stride, source.storage_offset() + alias.offset)
        flat[index] = source


def _with_layout(base: torch.Tensor, alias) -> torch.Tensor:
    """The base the views' geometry was planned for: the compiled value itself when its layout
    is the traced one (as compiled graphs return it), else a copy in that layout."""
    size, stride = alias.source_size, alias.source_stride
    same = tuple(base.shape) == size and all(
        a == b for a, b, n in zip(base.stride(), stride, size) if n != 1)
    if same:
        return base
    log_fallbacks.debug("ember: an output base came back with strides %s instead of %s: copied",
                        base.stride(), stride)
    fixed = torch.empty_strided(size, stride, dtype=base.dtype, device=base.device)
    fixed.copy_(base)  # (recorded by autograd when the base requires grad)
    return fixed
