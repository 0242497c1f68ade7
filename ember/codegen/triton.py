"""Triton kernels from the same loop IR and schedule as the C++ ones (GPU code generation).

First floor: a scheduled kernel whose nodes are all pointwise over one iteration space becomes
one Triton kernel over a flat `xindex` (blocks of XBLOCK elements, masked at the end); each
node's index variables are `xindex` unflattened over the kernel's ranges, its loads and stores
are `tl.load`/`tl.store` at the node's layout indices, and sizes enter as arguments (`xnumel`,
and size symbols by name).  float16/bfloat16 are loaded as float32 and stored in their own dtype.
Op spellings live in the `TRITON_OPS` table (the C++ generator's `CPP_OPS` counterpart); both
generators implement the same ops interface the lowerings call (load, constant, index_expr,
to_dtype, masked, and the table's names).

Not yet here (raise NotImplementedError, so a caller keeps another path): reductions, scatters,
indirect indexing, kernels whose nodes iterate different spaces.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from typing import Callable

import sympy
import torch

from ..lowering.ir import ComputedBuffer, Pointwise
from ..lowering.symbolic import is_size_symbol
from ..scheduling.scheduler import Kernel, squeeze
from .common import KernelArguments

TRITON_OPS: dict[str, str] = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "truediv": "({0} / {1})",
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})",
    "log": "tl.log({0})", "log2": "tl.log2({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})",
    "sin": "tl.sin({0})", "cos": "tl.cos({0})", "erf": "tl.erf({0})",
    "sigmoid": "tl.sigmoid({0})", "relu": "tl.maximum({0}, 0)", "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})", "reciprocal": "(1 / {0})", "isnan": "({0} != {0})",
    "square": "({0} * {0})", "identity": "{0}", "logical_not": "({0} == 0)",
    # NaN wins, as in eager (tl.maximum alone may drop it)
    "maximum": "tl.where(({0} != {0}) | ({0} > {1}), {0}, {1})",
    "minimum": "tl.where(({0} != {0}) | ({0} < {1}), {0}, {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "where": "tl.where({0}, {1}, {2})",
}

TL_DTYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
    torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def texpr(expr) -> str:
    """A sympy index expression as Triton (Python) source: floor division and modulo."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(texpr(arg) for arg in expr.args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(texpr(arg) for arg in expr.args) + ")"
    if isinstance(expr, sympy.floor):
        numerator, denominator = sympy.fraction(sympy.together(expr.args[0]))
        return f"({texpr(numerator)} // {texpr(denominator)})"
    if isinstance(expr, sympy.Mod):
        return f"({texpr(expr.args[0])} % {texpr(expr.args[1])})"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return "(" + " * ".join([texpr(expr.base)] * int(expr.exp)) + ")"
    raise NotImplementedError(f"index expression {expr} in a Triton kernel")


def literal(value, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        value = float(value)
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    return str(int(value))


class TritonOps:
    """The ops handler that writes Triton."""

    def __init__(self, kernel: "TritonKernel") -> None:
        self.kernel = kernel

    def load(self, name: str, index) -> str:
        kernel = self.kernel
        pointer = kernel.input_pointer(name)
        value = kernel.emit(f"tl.load({pointer} + {texpr(index)}, {kernel.mask})")
        if kernel.buffer_dtypes.get(name) in _LOW_PRECISION:
            value = kernel.emit(f"{value}.to(tl.float32)")
        return value

    def constant(self, value, dtype) -> str:
        """A block of one value, typed (a bare Python number has no `.to`); half constants are
        rounded to their dtype here and computed in float32."""
        if dtype in _LOW_PRECISION:
            value, dtype = float(torch.tensor(float(value), dtype=dtype)), torch.float32
        return self.kernel.emit(f"tl.full([XBLOCK], {literal(value, dtype)}, {TL_DTYPES[dtype]})")

    def index_expr(self, expr, dtype) -> str:
        return self.kernel.emit(f"({texpr(expr)}).to({TL_DTYPES[dtype]})")

    def to_dtype(self, value: str, dtype) -> str:
        if dtype in _LOW_PRECISION:  # round to the half type, compute on in float32
            return self.kernel.emit(f"{value}.to({TL_DTYPES[dtype]}).to(tl.float32)")
        return self.kernel.emit(f"{value}.to({TL_DTYPES[dtype]})")

    def indirect_indexing(self, value, size, site: str = "", wrap_negative: bool = True):
        raise NotImplementedError("indirect indexing in a Triton kernel")

    def masked(self, mask: str, body: Callable, other, dtype) -> str:
        kernel = self.kernel
        outer = kernel.mask
        kernel.mask = f"({outer}) & ({mask})"
        try:
            value = body()
        finally:
            kernel.mask = outer
        return kernel.emit(f"tl.where({mask}, {value}, {literal(other, dtype)})")

    def __getattr__(self, name: str):
        template = TRITON_OPS.get(name)
        if template is None:
            raise NotImplementedError(f"no Triton spelling for ops.{name}")

        def operation(*args):
            return self.kernel.emit(template.format(*args))

        return operation


class TritonKernel(KernelArguments):
    """One scheduled kernel (pointwise nodes over one iteration space) as Triton source."""

    def __init__(self, kernel: Kernel, buffer_dtypes: dict[str, torch.dtype]) -> None:
        self.kernel = kernel
        self.buffer_dtypes = buffer_dtypes
        self.inputs: list[str] = []
        self.outputs = [node.name for node in kernel.nodes]
        self.lines: list[str] = []
        self.mask = "xmask"
        self._temps = 0
        self.size_args: list[str] = []

    def emit(self, expr: str) -> str:
        self._temps += 1
        name = f"tmp{self._temps}"
        self.lines.append(f"{name} = {expr}")
        return name

    def _ranges(self) -> list:
        spaces = set()
        for node in self.kernel.nodes:
            if not isinstance(node, ComputedBuffer) or not isinstance(node.data, Pointwise):
                raise NotImplementedError("a Triton kernel of reductions or scatters")
            spaces.add(tuple(squeeze(node.data.ranges)))
        if len(spaces) != 1:
            raise NotImplementedError("a Triton kernel whose nodes iterate different spaces")
        return list(spaces.pop())

    def generate(self, name: str) -> str:
        ranges = self._ranges()
        variables = [sympy.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(len(ranges))]
        body = []
        stride = sympy.Integer(1)
        for var, size in reversed(list(zip(variables, ranges))):
            part = "xindex" if stride == 1 else f"(xindex // {texpr(stride)})"
            body.append(f"{var.name} = {part}" + ("" if var is variables[0] else f" % {texpr(size)}"))
            stride = stride * size
        body.reverse()
        ops = TritonOps(self)
        for node in self.kernel.nodes:
            available = list(variables)
            index = [sympy.Integer(0) if size == 1 else available.pop(0) for size in node.data.ranges]
            value = node.data.inner_fn(ops, index)
            position = self.outputs.index(node.name)
            self.lines.append(f"tl.store(out_ptr{position} + {texpr(node.layout.index(index))}, {value}, xmask)")
        symbols = sorted({s.name for size in ranges for s in sympy.sympify(size).free_symbols if is_size_symbol(s)}
                         | {s.name for node in self.kernel.nodes
                            for e in (*node.layout.stride, node.layout.offset)
                            for s in sympy.sympify(e).free_symbols if is_size_symbol(s)})
        self.size_args = symbols
        parameters = [f"in_ptr{k}" for k in range(len(self.inputs))] + \
            [f"out_ptr{k}" for k in range(len(self.outputs))] + ["xnumel", *symbols, "XBLOCK: tl.constexpr"]
        lines = ["@triton.jit", f"def {name}({', '.join(parameters)}):",
                 "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)",
                 "    xmask = xindex < xnumel"]
        lines += ["    " + line for line in body + self.lines]
        self.numel = sympy.Integer(1)
        for size in ranges:
            self.numel = self.numel * size
        return "\n".join(lines) + "\n"


def load_kernel(source: str, name: str) -> Callable:
    """The @triton.jit function `name` defined by `source`, imported from a file in ember's cache
    (Triton reads a kernel's source from its file; the same source is written once)."""
    from .cpp_build import cache_dir

    text = "import triton\nimport triton.language as tl\n\n\n" + source
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    folder = os.path.join(cache_dir(), "triton")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"t_{key}.py")
    if not os.path.exists(path):
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w") as handle:
            handle.write(text)
        os.replace(partial, path)  # (atomic: a concurrent process writes the same text)
    spec = importlib.util.spec_from_file_location(f"ember_triton_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)
