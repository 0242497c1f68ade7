"""SVG drawings of the joint, forward and backward graphs.

    ember.autograd.draw.write_svg(gm, "forward.svg")     # needs pydot and graphviz's `dot`
"""
from __future__ import annotations

import torch.fx


def write_svg(gm: torch.fx.GraphModule, path: str, name: str = "graph") -> str:
    try:
        from torch.fx.passes.graph_drawer import FxGraphDrawer
    except ImportError as error:  # pragma: no cover - pydot missing
        raise RuntimeError("drawing graphs needs pydot: pip install pydot (and graphviz's `dot`)") from error
    drawer = FxGraphDrawer(gm, name)
    try:
        svg = drawer.get_dot_graph().create_svg()
    except FileNotFoundError as error:
        raise RuntimeError("drawing graphs needs graphviz's `dot` program: apt-get install graphviz") from error
    with open(path, "wb") as handle:
        handle.write(svg)
    return path
