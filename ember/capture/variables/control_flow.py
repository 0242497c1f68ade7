"""torch.cond with a predicate that is a Python constant (`x.shape[0] > 4` with static sizes).

Eager torch.cond given a bool/int/float predicate just calls the chosen branch on the operands;
under capture that branch is inlined the same way.  A tensor (or symbolic) predicate would need
both branches as subgraphs of a conditional node: a graph break, with that reason.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from .base import VariableTracker


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
        if not pred.is_python_constant() or type(pred.as_python_constant()) not in (bool, int, float):
            raise Unsupported("torch.cond with a tensor or symbolic predicate (both branches would be subgraphs)")
        operands = bound.get("operands")
        if operands is None:
            operand_list = []
        elif operands.python_type() in (tuple, list):
            operand_list = operands.unpack_sequence(tx)
        else:
            raise Unsupported("torch.cond with operands that are not a tuple or list")
        branch = bound["true_fn"] if pred.as_python_constant() else bound["false_fn"]
        return branch.call_function(tx, operand_list, {})
