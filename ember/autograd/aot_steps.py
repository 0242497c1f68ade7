"""The AOT layer's steps (steps.py): rewrites of the captured graph, then per input signature
the joint trace, CSE and the partition.  pipeline.py lists them in the backend's order;
aot_function runs the joint ones on their own."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from .. import config as ember_config
from ..steps import Step, Work, fx_text, verify_fx
from .attention import contiguous_attention_masks
from .conv_layout import channels_last_convolutions
from .cse import eliminate_common_subexpressions
from .joint import JointSpec, trace_joint
from .partition import Partition


@dataclasses.dataclass
class CapturedWork(Work):
    gm: torch.fx.GraphModule | None = None
    example_inputs: list = dataclasses.field(default_factory=list)
    changed: int = 0  # what the last rewrite changed (nodes): its dump only then


@dataclasses.dataclass
class JointWork(Work):
    fn: Callable | None = None
    flat_args: list = dataclasses.field(default_factory=list)
    decompositions: dict | None = None
    needs_grad: bool = False
    dynamic_dims: dict | None = None
    partition_fn: Callable | None = None
    joint: torch.fx.GraphModule | None = None
    spec: JointSpec | None = None
    partition: Partition | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def _attention_masks(work: CapturedWork) -> None:
    work.changed = contiguous_attention_masks(work.gm)


def _channels_last(work: CapturedWork) -> None:
    devices = tuple(d.strip() for d in ember_config.channels_last_convolutions.split(",") if d.strip())
    work.changed = channels_last_convolutions(work.gm, devices) if devices else 0


def _rewritten(work: CapturedWork) -> str | None:
    return fx_text(work.gm) if work.changed else None


def _trace(work: JointWork) -> None:
    work.joint, work.spec = trace_joint(work.fn, work.flat_args, work.decompositions, with_backward=work.needs_grad,
                                        dynamic_dims=work.dynamic_dims)


def _partition(work: JointWork) -> None:
    if work.spec.diff_outputs:
        work.partition = work.partition_fn(work.joint, work.spec)


def _partition_text(work: JointWork) -> str | None:
    partition = work.partition
    return None if partition is None else \
        f"forward graph:\n{fx_text(partition.forward)}\nbackward graph:\n{fx_text(partition.backward)}"


def _verify_partition(work: JointWork) -> None:
    if work.partition is not None:
        verify_fx(work.partition.forward)
        verify_fx(work.partition.backward)


# (a captured graph is linted only: one handed over by hand may carry no example values)
ATTENTION_MASKS = Step("attention_masks", "captured", _attention_masks, dump=_rewritten,
                       verify=lambda w: w.gm.graph.lint())
CHANNELS_LAST = Step("channels_last", "captured", _channels_last, dump=_rewritten,
                     verify=lambda w: w.gm.graph.lint())
TRACE_JOINT = Step("trace_joint", "joint", _trace, dump=lambda w: fx_text(w.joint), verify=lambda w: verify_fx(w.joint))
CSE = Step("cse", "joint", lambda w: eliminate_common_subexpressions(w.joint),
           dump=lambda w: f"joint graph:\n{fx_text(w.joint)}", verify=lambda w: verify_fx(w.joint),
           also_logs=("graph_code",))
PARTITION = Step("partition", "joint", _partition, dump=_partition_text, verify=_verify_partition,
                 also_logs=("graph_code",))

# What aot_function and the aot_eager backend run: everything before the graphs' compilers.
AOT_STEPS = (ATTENTION_MASKS, CHANNELS_LAST, TRACE_JOINT, CSE, PARTITION)
