"""The ember backend: one ordered list of named steps (steps.py), from the graph capture hands
over to the callable that runs it; adding a pass is adding its line here.  `EMBER_LOGS=<step>`
prints a step's product, every step's time is in the perf log, and `ember.config.verify_graphs`
checks what each step made.  "aot_eager" runs the same list up to the graphs' compilers.
"""
from __future__ import annotations

from typing import Callable

import torch

from .autograd import aot_steps
from .autograd.api import _identity_compiler, aot_backend
from .codegen import compile as graph_steps

STEPS = (
    aot_steps.ATTENTION_MASKS,    # attention masks made contiguous (autograd/attention.py)
    aot_steps.CHANNELS_LAST,      # convolutions' operands channels-last on chosen devices (autograd/conv_layout.py)
    aot_steps.TRACE_JOINT,        # forward and backward traced together, functionalized (autograd/joint.py)
    aot_steps.CSE,                # common subexpressions merged (autograd/cse.py)
    aot_steps.PARTITION,          # min-cut into forward and backward (autograd/partition.py)
    graph_steps.CPU_SCALARS,      # CPU scalars a GPU graph reads copied to the device once
    graph_steps.SUPPORTED,        # graphs the kernels do not take run as ATen calls
    graph_steps.BIAS_EPILOGUE,    # a linear's bias add folded into its matmul (lowering/bias_epilogue.py)
    graph_steps.LOWER,            # ATen -> loop IR (lowering/)
    graph_steps.SCHEDULE,         # fusion, dead code, buffer lifetimes (scheduling/)
    graph_steps.KERNELS,          # C++ or Triton source per kernel (codegen/cpp/kernel.py, triton/kernel.py)
    graph_steps.BUILD,            # compiles begun (g++, Triton's workers)
    graph_steps.LOAD,             # compiled kernels loaded
    graph_steps.WRAPPER,          # the Python call that runs them (codegen/wrapper.py)
    graph_steps.CUDAGRAPHS,       # replayed as a CUDA graph (ember.config.cudagraphs)
)
STEP_NAMES = tuple(step.name for step in STEPS)
assert len(set(STEP_NAMES)) == len(STEP_NAMES), "step names are their log channels: one each"

_ember = aot_backend(graph_steps.graph_compiler(STEPS), steps=STEPS)
_aot_eager = aot_backend(_identity_compiler, steps=tuple(step for step in STEPS if step.unit != "graph"))


def ember_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """ember end to end: AOT autograd, then loop IR, fusion and C++ or Triton kernels."""
    graph_steps.prepare(example_inputs)
    return _ember(gm, example_inputs)


def aot_eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """ember's tracing, functionalization, decompositions and min-cut partition; graphs run as they are."""
    return _aot_eager(gm, example_inputs)
