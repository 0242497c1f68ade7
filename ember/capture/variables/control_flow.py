"""torch.cond: a constant (or size) predicate inlines the chosen branch; a tensor predicate captures
both branches as subgraphs and one graph node that selects at run time.

A symbolic predicate (a comparison of dynamic sizes, a Python bool in eager) is decided now, guarded.
With a one-element bool tensor each branch is speculated into a GraphModule (subgraphs.py): both must
return tensors of one structure, shapes and dtypes, change no Python state, write no tensor and draw
no random numbers (compiled, both run).  The node (`ember_cond_<n>`, target `CondSelect`) takes the
predicate, the operands and every value a branch closes over.  On real tensors it runs the taken
branch only; on fakes or under the AOT tracer it is `SelectBranches`, an autograd.Function that computes
both and picks outputs and gradients with torch.where (so an untaken branch's inf/NaN derivative never
reaches the taken one's); inside a captured vmap/grad it is torch.where, as torch.cond's batching rule.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker
from .subgraphs import call_node, flat_leaves, leaf_variables, random_op, rebuild, speculate, union, unique_name
from .symbolic import SymNodeVariable
from .tensor import TensorVariable


class CondVariable(VariableTracker):
    def static_value(self) -> Any:
        return torch.cond

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        names = ("pred", "true_fn", "false_fn", "operands")
        if len(args) > len(names) or any(key not in names for key in kwargs):
            raise Unsupported("torch.cond with these arguments")
        bound = dict(zip(names, args), **kwargs)
        if any(name not in bound for name in names[:3]):
            raise Unsupported("torch.cond without a predicate and two branches")
        pred = bound["pred"]
        operands = bound.get("operands")
        if operands is None:
            operand_list = []
        elif operands.python_type() in (tuple, list):
            operand_list = operands.unpack_sequence(tx)
        else:
            raise Unsupported("torch.cond with operands that are not a tuple or list")
        if isinstance(pred, TensorVariable):
            return _tensor_cond(tx, pred, bound["true_fn"], bound["false_fn"], operand_list)
        if isinstance(pred, SymNodeVariable):
            # a comparison of dynamic sizes: a Python bool in eager, decided now and guarded
            taken = pred.truth(tx)
        elif pred.is_python_constant() and type(pred.as_python_constant()) in (bool, int, float):
            taken = pred.as_python_constant()
        else:
            raise Unsupported(f"torch.cond with a predicate that is {pred}")
        branch = bound["true_fn"] if taken else bound["false_fn"]
        return branch.call_function(tx, operand_list, {})


def _tensor_cond(tx, pred, true_fn, false_fn, operands: list) -> VariableTracker:
    example = pred.example
    if example.dtype != torch.bool or example.numel() != 1:
        raise Unsupported("torch.cond with a tensor predicate that is not one bool element")
    if not all(isinstance(operand, TensorVariable) for operand in operands):
        raise Unsupported("torch.cond with operands that are not all tensors")

    regions = []
    for which, branch in (("true", true_fn), ("false", false_fn)):
        region = speculate(tx, f"torch.cond's {which} branch", branch, operands, [op.example for op in operands])
        region.check_writes(set())
        regions.append(region)
    taken, other = regions
    if taken.spec != other.spec or len(taken.leaves) != len(other.leaves):
        raise Unsupported("torch.cond's branches return different structures")
    for left, right in zip(taken.leaves, other.leaves):
        a, b = left.example, right.example
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            raise Unsupported(f"torch.cond's branches return different tensors ({tuple(a.shape)} {a.dtype} vs "
                              f"{tuple(b.shape)} {b.dtype})")
    if not taken.leaves:
        raise Unsupported("torch.cond's branches return no tensor")
    lifted = union(taken.lifted, other.lifted)
    name = unique_name("cond")
    select = CondSelect(taken.module(lifted, name + "_true"), other.module(lifted, name + "_false"))
    for which, module in (("true", select.true_module), ("false", select.false_module)):
        drawn = random_op(tx, module)
        if drawn is not None:
            # (compiled, both branches run: the random stream would not be eager's)
            raise Unsupported(f"torch.cond's {which} branch draws random numbers ({drawn})")
    select.__name__ = select.__qualname__ = name
    for region in reversed(regions):
        region.remove()
    result = call_node(tx, select, [pred, *operands, *lifted])
    return rebuild(leaf_variables(result, len(taken.leaves)), taken.spec)


class CondSelect:
    """The graph node's target: (pred, *inputs) -> a tuple of the taken branch's tensors."""

    def __init__(self, true_module: torch.fx.GraphModule, false_module: torch.fx.GraphModule) -> None:
        self.true_module = true_module
        self.false_module = false_module

    def __call__(self, pred: torch.Tensor, *inputs) -> tuple:
        if any(torch._C._functorch.is_functorch_wrapped_tensor(value) for value in (pred, *inputs)
               if isinstance(value, torch.Tensor)):
            # inside torch.vmap / torch.func.grad (a captured transform's subgraph): where over
            # both branches, as torch.cond's own batching rule does
            return self.where(pred.reshape(()), inputs)
        if _is_real(pred, inputs):
            return flat_leaves((self.true_module if bool(pred) else self.false_module)(*inputs))
        return SelectBranches.apply(pred, self, *inputs)

    def where(self, condition: torch.Tensor, inputs) -> tuple:
        """Both branches run, each output picked by the 0-d `condition`."""
        true_out = flat_leaves(self.true_module(*inputs))
        false_out = flat_leaves(self.false_module(*inputs))
        return tuple(torch.where(condition.to(a.device), a, b) for a, b in zip(true_out, false_out))


def _is_real(pred, inputs) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    if torch._C._len_torch_dispatch_stack() > 0 or type(pred) is not torch.Tensor or isinstance(pred, FakeTensor):
        return False
    return not any(isinstance(value, FakeTensor) for value in inputs)


class SelectBranches(torch.autograd.Function):
    """Both branches computed; outputs and gradients chosen by the predicate (torch.where)."""

    @staticmethod
    def forward(ctx, pred, select, *inputs):
        condition = pred.reshape(())
        ctx.select = select
        ctx.tensor_positions = [i for i, value in enumerate(inputs) if isinstance(value, torch.Tensor)]
        ctx.others = {i: value for i, value in enumerate(inputs) if not isinstance(value, torch.Tensor)}
        ctx.save_for_backward(condition, *[inputs[i] for i in ctx.tensor_positions])
        return select.where(condition, inputs)

    @staticmethod
    def backward(ctx, *grads):
        condition, *saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[2:]
        placed = {**dict(zip(ctx.tensor_positions, saved)), **ctx.others}
        inputs = [placed[i] for i in range(len(placed))]
        wanted = [i for i in ctx.tensor_positions if needs[i]]
        if not wanted:
            return (None, None, *[None] * len(inputs))
        per_branch = []
        for module in (ctx.select.true_module, ctx.select.false_module):
            with torch.enable_grad():
                leaves = list(inputs)
                for i in wanted:
                    leaves[i] = inputs[i].detach().requires_grad_(True)
                outs = flat_leaves(module(*leaves))
                pairs = [(out, grad) for out, grad in zip(outs, grads) if out.requires_grad and grad is not None]
                per_branch.append(torch.autograd.grad([o for o, _ in pairs], [leaves[i] for i in wanted],
                                                      [g for _, g in pairs], allow_unused=True)
                                  if pairs else [None] * len(wanted))
        result: list = [None] * len(inputs)
        for k, i in enumerate(wanted):
            on_true, on_false = per_branch[0][k], per_branch[1][k]
            if on_true is None and on_false is None:
                continue
            zeros = torch.zeros_like(inputs[i])
            on_true = zeros if on_true is None else on_true
            on_false = zeros if on_false is None else on_false
            result[i] = torch.where(condition.to(on_true.device), on_true, on_false)
        return (None, None, *result)
