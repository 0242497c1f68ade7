"""torch's own compiler (Inductor), used only as a side-by-side reference for comparisons."""
from __future__ import annotations

from typing import Callable

import torch


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)
