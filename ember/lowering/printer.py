"""Readable dumps of the lowered IR and of the schedule (EMBER_LOGS=ir,schedule).

A loop body is printed by running it with `PrintingOps`, which writes one line of Python per
operation:

    buf3 = Pointwise(float32, [64, 512], contiguous)  # gelu = aten.gelu.default  (model.py:12  x = act(x))
        def inner_fn(i0, i1):
            tmp0 = ops.load('buf2', 512*i0 + i1)
            tmp1 = ops.mul(tmp0, ops.constant(0.5, float32))
            ...
            return tmp5
"""
from __future__ import annotations

import os

import sympy
import torch

from .ir import ComputedBuffer, ExternBuffer, InputBuffer, Reduction, Scatter, index_vars


def user_line(stack_trace: str) -> str:
    """`model.py:12  x = act(x)`: the innermost frame of a captured node's stack trace that is
    not inside torch itself (else the innermost frame)."""
    lines = [line.strip() for line in (stack_trace or "").strip().splitlines() if line.strip()]
    frames = [(lines[i], lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("File ") else "")
              for i in range(len(lines)) if lines[i].startswith("File ")]
    if not frames:
        return ""
    chosen = next((frame for frame in reversed(frames) if _TORCH_DIR not in frame[0]), frames[-1])
    header, code = chosen
    parts = header.split('"')
    if len(parts) < 3:
        return ""
    filename = parts[1].rsplit("/", 1)[-1]
    lineno = parts[2].split(",")[1].replace("line", "").strip() if "," in parts[2] else "?"
    return f"{filename}:{lineno}  {code}".rstrip()


_TORCH_DIR = os.path.dirname(torch.__file__)


def provenance(buffer) -> str:
    """`origin  (user line)` for comments in every dump."""
    origin = getattr(buffer, "origin", "") or getattr(getattr(buffer, "kernel", None), "origin", "")
    line = user_line(getattr(buffer, "stack_trace", ""))
    return f"{origin}  ({line})" if line else origin


class PrintingOps:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0

    def _emit(self, text: str) -> str:
        name = f"tmp{self._count}"
        self._count += 1
        self.lines.append(f"{name} = {text}")
        return name

    def load(self, name, index):
        return self._emit(f"ops.load({name!r}, {sympy.sympify(index)})")

    def constant(self, value, dtype):
        return f"ops.constant({value!r}, {str(dtype).replace('torch.', '')})"

    def index_expr(self, expr, dtype):
        return self._emit(f"ops.index_expr({expr}, {str(dtype).replace('torch.', '')})")

    def to_dtype(self, value, dtype):
        return self._emit(f"ops.to_dtype({value}, {str(dtype).replace('torch.', '')})")

    def indirect_indexing(self, value, size, site="", wrap_negative=True):
        name = self._emit(f"ops.indirect_indexing({value}, {size})")
        return sympy.Symbol(name, integer=True, nonnegative=True)

    def masked(self, mask, body, other, dtype):
        start = len(self.lines)
        result = body()
        inner = self.lines[start:]
        del self.lines[start:]
        self.lines.append(f"with ops.masked({mask}, other={other!r}):")
        self.lines.extend("    " + line for line in inner)
        return self._emit(f"ops.masked_result({result})")

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def operation(*args):
            return self._emit(f"ops.{name}({', '.join(str(a) for a in args)})")

        return operation


def _layout_text(layout) -> str:
    return f"{str(layout.dtype).replace('torch.', '')}, size={sizes(layout.size)}, stride={sizes(layout.stride)}"


def sizes(values) -> list:
    """Sizes for dumps: ints, or readable expressions of the size symbols (s0*s1)."""
    return [int(v) if sympy.sympify(v).is_number else sympy.sympify(v) for v in values]


def _body(data) -> list[str]:
    ops = PrintingOps()
    index = index_vars(len(data.ranges))

    def function(header: str, last: str) -> list[str]:  # (the lines printed since the last one)
        lines, ops.lines = ops.lines, []
        return [header, *("    " + line for line in lines), f"    {last}"]

    if isinstance(data, Scatter):
        out_index = index_vars(len(data.out_ranges), "o")
        base = function(f"def base({', '.join(map(str, out_index))}):", f"return {data.base(ops, out_index)}")
        target, value = data.target(ops, index), data.inner_fn(ops, index)
        return base + function(f"def update({', '.join(map(str, index))}):  # in order over {list(data.ranges)}",
                               f"out[{target}] {'+=' if data.accumulate else '='} {value}")
    if isinstance(data, Reduction):
        rindex = index_vars(len(data.spec.reduction_ranges), "r")
        value = data.inner_fn(ops, index, rindex)
        return function(f"def inner_fn({', '.join(map(str, index + rindex))}):  "
                        f"# {data.spec.reduction_type} over {sizes(data.spec.reduction_ranges)}", f"return {value}")
    value = data.inner_fn(ops, index)
    return function(f"def inner_fn({', '.join(map(str, index))}):", f"return {value}")


def ir_text(graph) -> str:
    """Every buffer of a GraphLowering: inputs, computed loops with their bodies, extern calls."""
    lines = []
    for buffer in graph.inputs:
        lines.append(f"{buffer.name} = InputBuffer({_layout_text(buffer.layout)})")
    for buffer in graph.buffers:
        if isinstance(buffer, ComputedBuffer):
            kind = type(buffer.data).__name__
            lines.append(f"{buffer.name} = {kind}({_layout_text(buffer.layout)})  # {provenance(buffer)}")
            lines.extend("    " + line for line in _body(buffer.data))
        elif isinstance(buffer, ExternBuffer):
            call = buffer.kernel
            reason = f" ({call.reason})" if call.reason else ""
            lines.append(f"{buffer.name} = ExternCall({call.target})  # {call.origin}{reason}")
        elif not isinstance(buffer, InputBuffer):
            lines.append(f"{buffer.name} = {type(buffer).__name__}  # {provenance(buffer)}")
    outputs = ", ".join(getattr(v, "name", None) or getattr(getattr(v, "buffer", None), "name", repr(v))
                        for v in graph.outputs)
    lines.append(f"outputs = ({outputs})")
    return "\n".join(lines)
