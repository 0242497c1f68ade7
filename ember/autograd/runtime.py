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
import logging
import threading
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from .. import logs
from .joint import JointSpec

log = logs.get("graph_code")


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

    def backward(self) -> Callable:
        if self._backward is None:
            with self._lock:
                if self._backward is None:
                    inputs = [n.meta.get("val") for n in self.backward_graph.graph.nodes if n.op == "placeholder"]
                    self._backward = self.bw_compiler(self.backward_graph, inputs)
        return self._backward


def make_autograd_function(pair: CompiledPair) -> Callable:
    spec = pair.spec
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    tensor_outputs = [i for i in range(num_outputs) if i not in spec.constant_outputs]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            results = pair.forward(*args)
            outputs = list(results[:num_outputs])
            new_values = results[num_outputs:num_outputs + num_mutated]
            saved = results[num_outputs + num_mutated:]
            with torch.no_grad():
                for index, value in zip(spec.mutated_inputs, new_values):
                    args[index].copy_(value)
            ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
            ctx.saved_layout = [isinstance(s, torch.Tensor) for s in saved]
            ctx.saved_other = [s for s in saved if not isinstance(s, torch.Tensor)]
            non_diff = [outputs[i] for i in tensor_outputs if i not in spec.diff_outputs and outputs[i] is not None]
            if non_diff:
                ctx.mark_non_differentiable(*non_diff)
            return tuple(outputs[i] for i in tensor_outputs)

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
            position_of = {index: k for k, index in enumerate(tensor_outputs)}
            tangents = []
            for index in spec.diff_outputs:
                grad = grad_outputs[position_of[index]]
                tangents.append(grad.contiguous() if grad is not None else None)
            grads = pair.backward()(*saved, *tangents)
            result: list = [None] * spec.num_primals
            for index, grad in zip(spec.grad_inputs, grads):
                result[index] = grad
            return tuple(result)

    def run(*args):
        outputs = CompiledFunction.apply(*args)
        return _assemble(spec, list(outputs), tensor_outputs, args)

    run.autograd_function = CompiledFunction
    return run


def make_inference_function(spec: JointSpec, forward: Callable) -> Callable:
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    tensor_outputs = [i for i in range(num_outputs) if i not in spec.constant_outputs]

    def run(*args):
        results = forward(*args)
        outputs = [results[i] for i in tensor_outputs]
        new_values = results[num_outputs:num_outputs + num_mutated]
        with torch.no_grad():
            for index, value in zip(spec.mutated_inputs, new_values):
                args[index].copy_(value)
        return _assemble(spec, outputs, tensor_outputs, args)

    return run


def _assemble(spec: JointSpec, tensor_values: list, tensor_outputs: list[int], args) -> Any:
    flat: list = [None] * spec.num_fw_outputs
    for position, index in enumerate(tensor_outputs):
        flat[index] = tensor_values[position]
    for index, value in spec.constant_outputs.items():
        flat[index] = value
    for index, (kind, source, size, stride, offset) in spec.output_aliases.items():
        real = args[source]
        if real.requires_grad and flat[index] is not None and flat[index].requires_grad:
            continue  # a view of a differentiable input keeps the graph's (differentiable) output
        flat[index] = real.as_strided(size, stride, offset)
    return pytree.tree_unflatten(flat, spec.out_spec)
