"""Triton kernels from the same loop IR and schedule as the C++ ones (GPU code generation).

A scheduled kernel (codegen input: `Kernel`, nodes sharing outer loop ranges) becomes one or
more Triton kernels:

    pointwise only, one space   a flat `xindex` over every element: blocks of XBLOCK, masked
    with inner loops/reductions a 2-D block [XBLOCK, RBLOCK]: x runs over the outer ranges,
                                r over the inner (reduction) ranges.  Persistent when the row
                                fits in one block (RBLOCK >= rnumel: no loop, every value stays in
                                registers), else looped: `for roffset in range(0, rnumel, RBLOCK)`
                                per loop group, accumulators [XBLOCK, RBLOCK] reduced after it.

A node reading a kernel-mate's output must find that value in registers (another thread of
the block may hold the element; stores are not visible to it): where it cannot (a different
index, a value from an earlier loop), the kernel is split there and the rest becomes the next
kernel, which reads the value from memory.

Each node's index variables are `xindex`/`rindex` unflattened over its ranges; loads and stores
use the node's layout indices less the storage offset the graph planned for that buffer (the
wrapper passes tensors: Triton indexes from their data pointer).  float16/bfloat16 are loaded as
float32 and stored in their own dtype; values rounded where eager rounds.  Op spellings live in
`TRITON_OPS` (the C++ generator's `CPP_OPS` counterpart); reductions in `_REDUCE`.

Data-dependent indices (embedding, gather, x[idx]) are bounds-checked: an index out of range
reads row 0 and sets a flag the wrapper turns into eager's IndexError after the graph ran.

Scatters (index_put, scatter, embedding's backward) are two kernels: the base copy, then the
updates (accumulating ones with atomic adds).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
from typing import Callable

import sympy
import torch

from .. import config as ember_config
from ..lowering.analysis import record
from ..lowering.indexing import simplify_index
from ..lowering.ir import ComputedBuffer, Pointwise, Reduction, store_layout
from ..lowering.printer import provenance
from ..lowering.symbolic import is_size_symbol
from ..scheduling.scheduler import Kernel, LoopGroup, squeeze
from .common import KernelArguments

TRITON_OPS: dict[str, str] = {
    # (division and square root rounded as IEEE (and eager) round them: Triton's `/` and
    # tl.sqrt are approximate on a GPU, and x / x then truncates to 0)
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "truediv": "tl.div_rn({0}, {1})",
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})",
    "log": "tl.log({0})", "log2": "tl.log2({0})", "sqrt": "tl.sqrt_rn({0})", "rsqrt": "tl.rsqrt({0})",
    "sin": "tl.sin({0})", "cos": "tl.cos({0})", "erf": "tl.erf({0})",
    "sigmoid": "tl.sigmoid({0})", "relu": "tl.where({0} < 0, 0, {0})", "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})", "reciprocal": "tl.div_rn(1.0, {0})", "isnan": "({0} != {0})",
    "square": "({0} * {0})", "identity": "{0}", "logical_not": "({0} == 0)",
    # NaN wins; between equal values the first stays (the sign of a zero shows), as in eager
    "maximum": "tl.where(({0} != {0}) | (({1} == {1}) & ({1} <= {0})), {0}, {1})",
    "minimum": "tl.where(({0} != {0}) | (({1} == {1}) & ({1} >= {0})), {0}, {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) != ({1} != 0))",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "where": "tl.where({0}, {1}, {2})",
    # (not where(x > 0, 1, where(x < 0, -1, 0)): Triton 3.6 on an H200 gave +1 for negative
    # bfloat16 values there, once fused with a log_softmax; lowp 700735)
    "sign": "(({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype))",
    "isinf": "(tl.abs({0}) == float('inf'))",
    # CUDA's libdevice (not in Triton's interpreter: kernels using these run on a GPU only)
    "tanh": "libdevice.tanh({0})", "expm1": "libdevice.expm1({0})", "log1p": "libdevice.log1p({0})",
    "log10": "libdevice.log10({0})", "tan": "libdevice.tan({0})", "sinh": "libdevice.sinh({0})",
    "cosh": "libdevice.cosh({0})", "asin": "libdevice.asin({0})", "acos": "libdevice.acos({0})",
    "atan": "libdevice.atan({0})", "asinh": "libdevice.asinh({0})", "acosh": "libdevice.acosh({0})",
    "atanh": "libdevice.atanh({0})", "erfc": "libdevice.erfc({0})", "round": "libdevice.nearbyint({0})",
    "signbit": "(libdevice.signbit({0}) != 0)", "pow": "libdevice.pow({0}, {1})",
    "atan2": "libdevice.atan2({0}, {1})", "fmod": "libdevice.fmod({0}, {1})",
    # truncation from floor and ceil (keeps -0.0 and NaN)
    "trunc": "tl.where({0} < 0, tl.ceil({0}), tl.floor({0}))",
    "truncdiv": "tl.where(tl.div_rn({0}, {1}) < 0, tl.ceil(tl.div_rn({0}, {1})), tl.floor(tl.div_rn({0}, {1})))",
}
# ops whose result is a boolean, whatever their operands
_PREDICATES = {"isnan", "isinf", "signbit", "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
               "logical_or", "logical_xor"}
# ops that Triton computes as C does only on floating-point operands (libdevice takes float32
# and float64; Triton's `/` of integers is a float division, C's truncates)
_FLOAT_ONLY = {"truediv", "reciprocal", "truncdiv", "sqrt"}
# where an operand is float64 (tl.div_rn and tl.sqrt_rn take float32; float64 `/` and tl.sqrt
# round exactly)
_FLOAT64_OPS = {"truediv": "({0} / {1})", "reciprocal": "(1.0 / {0})", "sqrt": "tl.sqrt({0})",
                "truncdiv": "tl.where(({0} / {1}) < 0, tl.ceil({0} / {1}), tl.floor({0} / {1}))"}

# On a GPU, libm-accurate spellings (as eager's kernels round): tl.exp, tl.log, tl.sin, tl.cos
# compile to approximate instructions there (log_softmax 3e-5 off, sin of 30 off by 0.05).
# Triton's interpreter computes these with numpy (accurate) and has no libdevice.
_ACCURATE = {"exp": "libdevice.exp({0})", "log": "libdevice.log({0})", "sin": "libdevice.sin({0})",
             "cos": "libdevice.cos({0})", "exp2": "libdevice.exp2({0})", "log2": "libdevice.log2({0})",
             "erf": "libdevice.erf({0})",
             # tl.rsqrt is the approximate instruction, which flushes subnormals (inf for 1.5e-39,
             # eager 2.6e19); libdevice's floor/ceil keep them (ceil(1e-40) is 1)
             "rsqrt": "libdevice.rsqrt({0})", "floor": "libdevice.floor({0})", "ceil": "libdevice.ceil({0})"}

TL_DTYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
    torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)

# Helpers every kernel file defines (reduction combines with eager's NaN and tie rules).
PRELUDE = '''
@triton.jit
def _ember_max(a, b):
    return tl.where((a != a) | (a > b), a, b)


@triton.jit
def _ember_min(a, b):
    return tl.where((a != a) | (a < b), a, b)


@triton.jit
def _ember_mul(a, b):
    return a * b


@triton.jit
def _ember_argmax(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    pick_a = (a > b) | (a_nan & ~b_nan) | (((a == b) | (a_nan & b_nan)) & (ia < ib))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


@triton.jit
def _ember_argmin(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    pick_a = (a < b) | (a_nan & ~b_nan) | (((a == b) | (a_nan & b_nan)) & (ia < ib))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


@triton.jit
def _ember_welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    share = tl.where(n == 0, 0.0, n_b / tl.where(n == 0, 1.0, n))
    return mean_a + delta * share, m2_a + m2_b + delta * delta * n_a * share, n
'''

def _exact_quotient(total: str, count: str, dtype: torch.dtype) -> str:
    """total / count, rounded once: Triton's `/` on float32 is the GPU's approximate division
    (8 equal values' sum / 8 came out 1 ulp off their value, so their variance was not 0 and
    a quotient of it jumped: fuzz stats 702024 on an H200)."""
    if dtype == torch.float32:
        return f"tl.div_rn({total}, tl.full([1, 1], {count}, tl.float32))"
    return f"({total} / {count})"


PERSISTENT_RNUMEL = 2048  # rows up to this many elements are reduced in one block, without a loop


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


class _Stored(Exception):
    """A kernel value meant to stay in registers is read where the kernel holds none of it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Split(Exception):
    """The node at `position` cannot share the kernel with the nodes before it."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position


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
    if isinstance(value, float) and not math.isfinite(value):  # (eager's cast of it is the CPU's)
        raise NotImplementedError(f"the constant {value} as {dtype}")
    value = int(value)
    if dtype in _INT_BITS:  # wrapped into the dtype's range, as a C cast wraps (-2 as uint8: 254)
        bits, signed = _INT_BITS[dtype]
        value %= 1 << bits
        if signed and value >= 1 << (bits - 1):
            value -= 1 << bits
    return str(value)


_INT_BITS = {torch.uint8: (8, False), torch.int8: (8, True), torch.int16: (16, True), torch.int32: (32, True),
             torch.int64: (64, True)}


@dataclasses.dataclass
class TritonSource:
    """One generated Triton kernel and how to launch it."""

    name: str
    source: str  # the @triton.jit function (the file adds imports and PRELUDE)
    inputs: list[str]  # buffers read, in argument order
    outputs: list[str]  # buffers written, after the inputs
    size_args: list[str]  # size symbols, after xnumel (and rnumel)
    xnumel: sympy.Expr
    rnumel: sympy.Expr | None  # None: a 1-D kernel
    XBLOCK: int
    RBLOCK: int | None
    num_warps: int
    index_checks: list[str] = dataclasses.field(default_factory=list)  # then one more argument: oob_ptr
    grid_y: int = 1  # split reductions: programs along the reduction (each reduces one chunk)
    # scratch tensors the wrapper allocates for this kernel and its followers: (name, numel, dtype),
    # passed after the outputs
    workspaces: list = dataclasses.field(default_factory=list)
    constexprs: dict = dataclasses.field(default_factory=dict)  # more constexpr arguments (RCHUNK)
    pointer_dtypes: list | None = None  # on a GPU: the tensors' dtypes, for compiling ahead of the call
    pointer_numels: list | None = None  # elements each pointer reaches (None: not known statically)
    # which block sizes the kernel's code allows (triton_tune.py): "flat" (pointwise), "rows" /
    # "columns" (looped reductions), "rows_persistent" / "columns_persistent" (RBLOCK holds the
    # whole row), "fixed" (scatters with atomics, combining kernels: as generated)
    tuning: str = "fixed"
    elided: list = dataclasses.field(default_factory=list)  # values of the kernel never stored


class _Scope:
    """Lines at one indentation (the kernel body or one r loop) and what they computed."""

    _serial = 0

    def __init__(self, parent: "_Scope | None") -> None:
        self.parent = parent
        _Scope._serial += 1
        self.serial = _Scope._serial
        self.lines: list[str] = []
        self.cse: dict[str, str] = {}
        self.stored: dict[tuple[str, str], str] = {}

    def find(self, table: str, key):
        scope = self
        while scope is not None:
            found = getattr(scope, table).get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


class TritonOps:
    """The ops handler that writes Triton."""

    def __init__(self, kernel: "TritonKernel") -> None:
        self.kernel = kernel

    def load(self, name: str, index) -> str:
        kernel = self.kernel
        index = kernel.simplified(index)
        if name in kernel.own:  # a kernel-mate's value: from registers, or the kernel splits
            value = kernel.scope.find("stored", (name, kernel.tex(index)))
            if value is None:
                if name in kernel.internal:  # (generated again with it stored)
                    raise _Stored(name)
                raise _Split(kernel.position, f"{name} is read where this kernel holds no value of it")
            return value
        pointer = kernel.input_pointer(name)
        kernel.note_contiguity(index)
        address, mask = kernel.address(index - kernel.offsets.get(name, 0), everywhere=name in kernel.maybe_empty)
        masked = f", {mask}, other=0" if mask else ""
        value = kernel.emit(f"tl.load({pointer} + {address}{masked})", kernel.buffer_dtypes.get(name))
        if kernel.buffer_dtypes.get(name) in _LOW_PRECISION:
            value = kernel.emit(f"{value}.to(tl.float32)", torch.float32)
        return value

    def constant(self, value, dtype) -> str:
        """A block of one value, typed; half constants are rounded to their dtype here and
        computed in float32."""
        if dtype in _LOW_PRECISION:
            value, dtype = float(torch.tensor(float(value), dtype=dtype)), torch.float32
        if dtype.is_floating_point and float(value) == 0 and math.copysign(1.0, float(value)) < 0:
            # (Triton's unary minus is 0 - x, which makes -0.0 of +0.0: x / -0.0 must be -inf for x > 0)
            return self.kernel.emit(f"(tl.full({self.kernel.unit_shape}, 0.0, {TL_DTYPES[dtype]}) * -1.0)", dtype)
        return self.kernel.emit(f"tl.full({self.kernel.unit_shape}, {literal(value, dtype)}, {TL_DTYPES[dtype]})",
                                dtype)

    def index_expr(self, expr, dtype) -> str:
        expr = self.kernel.simplified(expr)
        if expr.is_number:
            return self.constant(int(expr), dtype)
        text = self.kernel.tex(expr)
        if all(is_size_symbol(s) for s in expr.free_symbols):
            text = f"tl.full({self.kernel.unit_shape}, {text}, tl.int64)"  # sizes only: a scalar
        value = self.kernel.emit(f"({text}).to({TL_DTYPES[dtype]})", dtype)
        if dtype in _LOW_PRECISION:
            value = self.kernel.emit(f"{value}.to(tl.float32)", torch.float32)
        return value

    def to_dtype(self, value: str, dtype) -> str:
        if dtype in _LOW_PRECISION:  # round to the half type, compute on in float32
            if self.kernel.value_dtypes.get(value) != torch.float32 and os.environ.get("TRITON_INTERPRET") == "1":
                # (the interpreter converts float64 or integers to bfloat16 as if they were float32 bits)
                value = self.kernel.emit(f"{value}.to(tl.float32)", torch.float32)
            return self.kernel.emit(f"{value}.to({TL_DTYPES[dtype]}).to(tl.float32)", torch.float32)
        if dtype == torch.bool:
            return self.kernel.emit(f"({value} != 0)", torch.bool)
        return self.kernel.emit(f"{value}.to({TL_DTYPES[dtype]})", dtype)

    def indirect_indexing(self, value, size, site: str = "", wrap_negative: bool = True) -> sympy.Symbol:
        """A data-dependent index, bounds-checked: one outside [0, size) (or [-size, size) where
        negative indices count from the end) sets this site's flag in `oob_ptr` (the wrapper
        raises after the graph) and reads row 0 instead: memory outside a buffer is never touched."""
        kernel = self.kernel
        kernel._temps += 1
        name = f"idx{kernel._temps}"
        size_text = kernel.tex(size)
        lines = kernel.scope.lines
        lines.append(f"{name} = {value}.to(tl.int64)")
        if wrap_negative:
            lines.append(f"{name} = tl.where({name} < 0, {name} + {size_text}, {name})")
        lines.append(f"{name}_bad = ({name} < 0) | ({name} >= {size_text})")
        if ember_config.bounds_checks:
            position = kernel.index_check_site(site)
            # (every lane holds the flag's address; the lanes inside the kernel's masks report)
            masks = " & ".join([f"{dim}mask" for dim in kernel.dims] + [f"({c})" for c in kernel.conditions])
            spread = "".join(f" + 0 * {dim}index" for dim in kernel.dims)
            lines.append(f"tl.store(oob_ptr + {position} + 0 * {name}{spread}, 1, {masks} & {name}_bad)")
        lines.append(f"{name} = tl.where({name}_bad, 0, {name})")
        symbol = sympy.Symbol(name, integer=True, nonnegative=True)
        kernel.indirect_dims[name] = set(kernel.dims)
        kernel.bounds[symbol] = sympy.sympify(size) - 1  # (checked, and 0 where it was not in range)
        return symbol

    def masked(self, mask: str, body: Callable, other, dtype) -> str:
        kernel = self.kernel
        kernel.conditions.append(mask)
        try:
            value = body()
        finally:
            kernel.conditions.pop()
        if dtype in _LOW_PRECISION:
            dtype = torch.float32
        if dtype == torch.bool:  # (a Python 0 would make the block int32)
            return kernel.emit(f"(tl.where({mask}, {value}, {literal(other, dtype)}) != 0)", dtype)
        return kernel.emit(f"tl.where({mask}, {value}, {literal(other, dtype)})", dtype)

    def __getattr__(self, name: str):
        template = TRITON_OPS.get(name)
        if template is None:
            raise NotImplementedError(f"no Triton spelling for ops.{name}")
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        if name in _ACCURATE and not interpreted:
            template = _ACCURATE[name]
        if name == "relu" and not interpreted:
            # eager's CUDA relu (clamp_min's fmax) makes -0.0 +0.0, its CPU kernel keeps -0.0
            # (the interpreter checks against the CPU's); atan2 of it showed (fuzz special 705232)
            template = "tl.where({0} <= 0, 0, {0})"
        libdevice = "libdevice." in template
        if libdevice and interpreted:
            raise NotImplementedError(f"ops.{name} needs CUDA's libdevice, which Triton's interpreter lacks")
        kernel = self.kernel

        def operation(*args):
            dtypes = [kernel.value_dtypes.get(arg) for arg in args]
            if (libdevice or name in _FLOAT_ONLY) and any(
                    d is None or d not in (torch.float32, torch.float64) for d in dtypes):
                raise NotImplementedError(f"ops.{name} of {dtypes} in a Triton kernel")
            if name in ("add", "mul", "maximum", "minimum") and all(d == torch.bool for d in dtypes):
                # booleans add as `or` and multiply as `and` (int1 arithmetic would wrap 1 + 1 to 0)
                either = name in ("add", "maximum")
                return kernel.emit(f"({args[0]} {'|' if either else '&'} {args[1]})", torch.bool)
            if name == "sign" and dtypes[0] == torch.bool:
                return args[0]  # (the sign of a bool is itself; int1 does not subtract)
            if name == "neg" and dtypes[0] is not None and dtypes[0].is_floating_point:
                # Triton's unary minus is 0 - x: -(+0.0) would be +0.0
                return kernel.emit(f"({args[0]} * -1.0)", dtypes[0])
            if name in _PREDICATES:
                result = torch.bool
            elif any(d is None for d in dtypes[1 if name == "where" else 0:]):
                result = None
            else:
                result = dtypes[1 if name == "where" else 0]
                for d in dtypes[2 if name == "where" else 1:]:
                    result = torch.promote_types(result, d)
            spelling = _FLOAT64_OPS[name] if name in _FLOAT64_OPS and torch.float64 in dtypes else template
            return kernel.emit(spelling.format(*args), result)

        return operation


class TritonKernel(KernelArguments):
    """Nodes of one scheduled kernel as one Triton kernel (`generate` raises _Split where a
    node cannot join the nodes before it)."""

    def __init__(self, nodes: list[ComputedBuffer], outer: list, buffer_dtypes: dict[str, torch.dtype],
                 offsets: dict | None = None, int64: bool = False, maybe_empty: frozenset = frozenset(),
                 internal: frozenset = frozenset()) -> None:
        self.nodes = nodes
        self.maybe_empty = maybe_empty  # buffers that may hold no element (a size 0)
        self.split = 0  # > 0: reduce the rows in this many chunks, one program each (split_reduction)
        self.partials: list = []  # split: (node, reduction kind, accumulator dtype) per workspace
        self.outer = list(outer)
        self.buffer_dtypes = buffer_dtypes
        self.offsets = offsets or {}  # buffer -> storage offset the graph planned (wrapper passes tensors)
        self.int64 = int64
        self.inputs: list[str] = []
        self.own = {node.name for node in nodes}
        # Values only this kernel reads, each read where it is computed: kept in registers, never
        # stored (`elided`; the wrapper allocates no buffer for them).  The caller offers a
        # reduction's result only for a kernel that is neither split nor cut.
        self.internal = {node.name for node in nodes if node.name in internal
                         and isinstance(node.data, (Pointwise, Reduction))}
        self.outputs = [node.name for node in nodes if node.name not in self.internal]
        self.conditions: list[str] = []  # masks of enclosing ops.masked
        self.size_symbols: set[str] = set()
        self._temps = 0
        self.position = 0  # the node being generated
        self.emitted: set[str] = set()
        self.value_dtypes: dict[str, torch.dtype] = {}  # temporary -> its dtype, where known
        self.index_checks: list[str] = []  # sites of bounds-checked indexing: oob_ptr[k] is site k
        self.loads_along = {"x": 0, "r": 0}  # loads contiguous in the innermost x / r variable
        self.indirect_dims: dict[str, set[str]] = {}  # data-dependent index -> its block dimensions
        self.bounds: dict = {}  # x/r variable -> its largest value (index simplification)

    # -- text helpers -----------------------------------------------------------------------------
    def tex(self, expr) -> str:
        expr = sympy.sympify(expr)
        self.size_symbols.update(s.name for s in expr.free_symbols if is_size_symbol(s))
        return texpr(expr)

    def simplified(self, index):
        """The index without the floors and mods its variables' ranges make idle (a view's
        `(x2 + x1 // 512) % 512` with x1, x2 < 512 is x2): fewer integer divisions per element,
        and the contiguity of the address shows."""
        index = sympy.sympify(index)
        if not self.bounds or not index.has(sympy.floor, sympy.Mod):
            return index
        return simplify_index(index, self.bounds)

    def emit(self, expr: str, dtype: torch.dtype | None = None) -> str:
        """A temporary holding `expr` (reused where the same text was computed in scope); its
        dtype, where known, lets ops refuse operands Triton would treat otherwise than C."""
        found = self.scope.find("cse", expr)
        if found is not None:
            return found
        self._temps += 1
        name = f"tmp{self._temps}"
        self.scope.lines.append(f"{name} = {expr}")
        self.scope.cse[expr] = name
        if dtype is not None:
            self.value_dtypes[name] = dtype
        return name

    @property
    def unit_shape(self) -> str:
        return "[1]" if self.rnumel is None else "[1, 1]"

    def note_contiguity(self, index) -> None:
        """Count loads whose address steps by one element with the innermost x or r variable
        (in 2-D kernels, loads that span both)."""
        expr = sympy.expand(sympy.sympify(index))
        symbols = sorted((s for s in expr.free_symbols if not is_size_symbol(s)), key=lambda s: s.name)
        xs = [s for s in symbols if s.name.startswith("x") and s.name not in self.indirect_dims]
        rs = [s for s in symbols if s.name.startswith("r") and s.name not in self.indirect_dims]
        if self.rnumel is not None and not (xs and rs):
            return  # (a row's or a column's vector: the same elements for every block, cached)
        if rs and expr.coeff(rs[-1]) == 1:
            self.loads_along["r"] += 1
        elif xs and expr.coeff(xs[-1]) == 1:
            self.loads_along["x"] += 1

    def _dims_of(self, expr) -> tuple[set[str], set[str]]:
        """The block dimensions an index spans: through x/r variables (its shape has them), and
        through data-dependent indices (it may: such a value's shape is not known here)."""
        names = {s.name for s in sympy.sympify(expr).free_symbols if not is_size_symbol(s)}
        indirect = set()
        for name in names:
            indirect |= self.indirect_dims.get(name, set())
        direct = {dim for dim in ("x", "r")
                  if any(name.startswith(dim) for name in names if name not in self.indirect_dims)}
        return direct, indirect

    def address(self, index, everywhere: bool = False) -> tuple[str, str]:
        """(index text, mask text) for a load: masked in the dimensions the index uses (and in
        all of the scope's under ops.masked, whose condition may vary in each, and for a buffer
        that may be empty: `everywhere`, as an index need not name a dimension of size 0); the
        index is spread over every masked dimension, so that the pointer block has the mask's
        shape.  An index of no dimension reads one element, which a non-empty buffer has."""
        direct, indirect = self._dims_of(index)
        needed = direct | indirect | (set(self.dims) if self.conditions or everywhere else set())
        text = self.tex(index)
        for dim in sorted(needed - direct):
            text = f"{text} + 0 * {dim}index"
        if not needed and not direct:  # one element, as a [1] / [1, 1] block (never a 0-d value)
            text = f"{text} + tl.zeros({self.unit_shape}, tl.int32)"
        masks = [f"{dim}mask" for dim in ("x", "r") if dim in needed] + [f"({c})" for c in self.conditions]
        return text, " & ".join(masks)

    def store(self, node: ComputedBuffer, index, value: str) -> None:
        address = self.simplified(store_layout(node).index(index))
        direct, _ = self._dims_of(address)
        text = self.tex(address)
        for dim in self.dims:
            if dim not in direct:
                text = f"{text} + 0 * {dim}index"
        mask = " & ".join(f"{dim}mask" for dim in self.dims)
        if node.name not in self.internal:
            position = self.outputs.index(node.name)
            self.scope.lines.append(f"tl.store(out_ptr{position} + {text}, {value}, {mask})")
        if node.dtype in _LOW_PRECISION:  # later readers in this kernel see the stored precision
            value = self.emit(f"{value}.to({TL_DTYPES[node.dtype]}).to(tl.float32)", torch.float32)
        self.scope.stored[(node.name, self.tex(address))] = value
        self.emitted.add(node.name)

    # -- generation -------------------------------------------------------------------------------
    def generate(self, name: str) -> TritonSource:
        groups = Kernel(name, self.outer, self.nodes).groups()
        positions = {node.name: k for k, node in enumerate(self.nodes)}
        r_groups = [g for g in groups if g.reduction or g.inner]
        self.rnumel = None
        if r_groups:
            self.rnumel = _numel(_group_inner(r_groups[0]))
            for group in r_groups[1:]:
                if sympy.expand(_numel(_group_inner(group)) - self.rnumel) != 0:
                    raise _Split(positions[group.nodes[0].name], "inner loops of another size")
        xranges = self.outer if r_groups else squeeze(self.nodes[0].data.ranges)
        self.xnumel = _numel(xranges)
        persistent = self.rnumel is not None and sympy.sympify(self.rnumel).is_number and \
            int(self.rnumel) <= PERSISTENT_RNUMEL
        self.persistent = persistent
        self.kernel_scope = self.scope = _Scope(None)
        self.dims: tuple[str, ...] = ("x",)  # the block dimensions of the group being generated
        self.ops = TritonOps(self)
        index_type = "tl.int64" if self.int64 else "tl.int32"
        head = []
        if self.rnumel is None:
            head += [f"xoffset = tl.program_id(0).to({index_type}) * XBLOCK",
                     f"xindex = xoffset + tl.arange(0, XBLOCK).to({index_type})", "xmask = xindex < xnumel"]
        else:
            head += [f"xoffset = tl.program_id(0).to({index_type}) * XBLOCK",
                     f"xindex = xoffset + tl.arange(0, XBLOCK)[:, None].to({index_type})", "xmask = xindex < xnumel",
                     f"rbase = tl.arange(0, RBLOCK)[None, :].to({index_type})"]
            if persistent:
                head += ["rindex = rbase", "rmask = rindex < rnumel"]
            if self.split:  # this program's chunk of the rows (RCHUNK: a multiple of RBLOCK)
                head += [f"rstart = tl.program_id(1).to({index_type}) * RCHUNK",
                         "rend = tl.minimum(rstart + RCHUNK, rnumel)"]
        order = _store_order(self.nodes[0], xranges) if self.rnumel is None else None
        if order is None:
            self.xvars = _unflatten("x", "xindex", xranges, head, self)
        else:  # xindex walks the first output's memory in order (neighbouring lanes, neighbouring bytes)
            walked = _unflatten("x", "xindex", [xranges[d] for d in order], head, self)
            self.xvars = [walked[order.index(d)] for d in range(len(xranges))]
        self.kernel_scope.lines += head
        self._rvars: dict[tuple, list] = {}
        runs = _shared_passes(groups, self.persistent)
        prologue = None
        for position, run in enumerate(runs):
            group = run[0]
            self.position = positions[group.nodes[0].name]
            self.dims = ("x", "r") if group.reduction or group.inner else ("x",)
            if group.reduction:
                self._reductions(run, prologue)
                prologue = None
            elif group.inner and not self.persistent and position + 1 < len(runs) and \
                    _same_rows(group, runs[position + 1][0]):
                # (computed in the next reduction's loop: the reduction reads it from registers,
                # in one pass over the rows instead of a store, a split and a load)
                prologue = group
            elif group.inner:
                self._loop(group, lambda: self._pointwise(group))
            else:
                self._pointwise(group)
        return self._finish(name)

    def generate_scatter(self, name: str, phase: str) -> TritonSource:
        """A Scatter node's two passes as two kernels, launched in order: "base" writes the
        input's values over the output's ranges; "update" writes (or, accumulating, atomically
        adds) each update at its data-dependent target.  Colliding plain writes land in an
        undefined order, as in eager's CUDA kernels; the fuzzer's scatters write each place once."""
        (node,) = self.nodes
        data = node.data
        ranges = data.out_ranges if phase == "base" else data.ranges
        self.rnumel = None
        self.persistent = False
        xranges = squeeze(ranges)
        self.xnumel = _numel(xranges)
        self.kernel_scope = self.scope = _Scope(None)
        self.dims = ("x",)
        self.ops = TritonOps(self)
        index_type = "tl.int64" if self.int64 else "tl.int32"
        head = [f"xoffset = tl.program_id(0).to({index_type}) * XBLOCK",
                f"xindex = xoffset + tl.arange(0, XBLOCK).to({index_type})", "xmask = xindex < xnumel"]
        self.xvars = _unflatten("x", "xindex", xranges, head, self)
        self.kernel_scope.lines += head
        available = list(self.xvars)
        index = [sympy.Integer(0) if size == 1 else available.pop(0) for size in ranges]
        if phase == "base":
            self.store(node, index, data.base(self.ops, index))
            return self._finish(name)
        target = data.target(self.ops, index)
        value = data.inner_fn(self.ops, index)
        if data.accumulate and node.dtype not in (torch.float32, torch.float64, torch.int32, torch.int64):
            raise NotImplementedError(f"an accumulating scatter into {node.dtype} (no atomic add)")
        address = node.layout.index(target)
        direct, _ = self._dims_of(address)
        text = self.tex(address) + ("" if "x" in direct else " + 0 * xindex")
        value = self.emit(f"{value}.to({TL_DTYPES[node.dtype]})")
        operation = "tl.atomic_add" if data.accumulate else "tl.store"
        self.scope.lines.append(f"{operation}(out_ptr0 + {text}, {value}, xmask)")
        source = self._finish(name)
        source.tuning = "fixed"  # (atomic adds: a block's size changes which updates collide)
        if os.environ.get("TRITON_INTERPRET") == "1":
            # Triton's interpreter applies a block's atomic adds to one address once (numpy's
            # fancy-index +=), and a block's colliding stores last-wins: one update per program
            source.XBLOCK, source.num_warps = 1, 1
        return source

    def _combine_head(self, split: int, xranges: list) -> None:
        """A combining kernel's start: one persistent block over the `split` partial results of
        each output (rows of the workspace [split, xnumel])."""
        self.rnumel = sympy.Integer(split)
        self.persistent = True
        self.xnumel = _numel(xranges)
        self.kernel_scope = self.scope = _Scope(None)
        self.ops = TritonOps(self)
        index_type = "tl.int64" if self.int64 else "tl.int32"
        head = [f"xoffset = tl.program_id(0).to({index_type}) * XBLOCK",
                f"xindex = xoffset + tl.arange(0, XBLOCK)[:, None].to({index_type})", "xmask = xindex < xnumel",
                f"rindex = tl.arange(0, RBLOCK)[None, :].to({index_type})", "rmask = rindex < rnumel"]
        self.xvars = _unflatten("x", "xindex", xranges, head, self)
        self.kernel_scope.lines += head

    def generate_combine(self, name: str, kind: str, acc_torch: torch.dtype, split: int, xranges: list) -> TritonSource:
        """A split reduction's second pass: each output's `split` partial results (a workspace
        [split, xnumel], the kernel's input) reduced and stored as the node stores its value."""
        (node,) = self.nodes
        self._combine_head(split, xranges)
        self.inputs.append("workspace")
        self.dims = ("x", "r")
        partial = self.emit("tl.load(in_ptr0 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        reduce = _Reducer(self, "any" if kind == "any" else "all" if kind == "all" else kind, TL_DTYPES[acc_torch],
                          acc_torch)
        result = reduce.whole(partial)[kind]
        self.dims = ("x",)
        if node.dtype != acc_torch:
            result = self.emit(f"{result}.to({TL_DTYPES[node.dtype]})", node.dtype) if node.dtype != torch.bool \
                else self.emit(f"({result} != 0)", torch.bool)
        self.store(node, self._node_index(node, []), result)
        source = self._finish(name)
        source.XBLOCK, source.RBLOCK = max(1, min(64, 4096 // next_power_of_2(split))), next_power_of_2(split)
        source.tuning = "fixed"
        return source

    def generate_welford_combine(self, name: str, acc_torch: torch.dtype, split: int, xranges: list, rnumel: int,
                                 rchunk: int) -> TritonSource:
        """A split Welford's second pass: the chunks' means and m2s (workspaces [split, xnumel],
        inputs 0 and 1) combined exactly (Chan et al.: each chunk weighted by its count, known
        from its position), and both results stored."""
        mean_node, m2_node = self.nodes
        self._combine_head(split, xranges)
        self.inputs += ["workspace_mean", "workspace_m2"]
        self.dims = ("x", "r")
        acc = TL_DTYPES[acc_torch]
        means = self.emit("tl.load(in_ptr0 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        m2s = self.emit("tl.load(in_ptr1 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        counts = self.emit(f"tl.minimum(tl.maximum({rnumel} - rindex * {rchunk}, 0), {rchunk}).to({acc})", acc_torch)
        valid = self.emit(f"xmask & rmask & ({counts} > 0)", torch.bool)
        total = self.emit(f"tl.sum(tl.where({valid}, {counts} * {means}, 0), 1)[:, None]", acc_torch)
        # eager's Welford: an infinity meeting another value makes the mean NaN (inf - inf)
        infinite = self.emit(f"tl.max(tl.where({valid}, (tl.abs({means}) == float('inf')).to(tl.int8), 0), 1)"
                             f"[:, None]", torch.int8)
        mean = self.emit(f"tl.where(({infinite} != 0) & ({rnumel} > 1), float('nan'), "
                         f"{_exact_quotient(total, str(rnumel), acc_torch)})", acc_torch)
        deviation = self.emit(f"tl.where({valid}, {means} - {mean}, 0)", acc_torch)
        m2 = self.emit(f"tl.sum(tl.where({valid}, {m2s} + {counts} * {deviation} * {deviation}, 0), 1)[:, None]",
                       acc_torch)
        self.dims = ("x",)
        for node, result in ((mean_node, mean), (m2_node, m2)):
            if node.dtype != acc_torch:
                result = self.emit(f"{result}.to({TL_DTYPES[node.dtype]})", node.dtype)
            self.store(node, self._node_index(node, []), result)
        source = self._finish(name)
        source.XBLOCK, source.RBLOCK = max(1, min(64, 4096 // next_power_of_2(split))), next_power_of_2(split)
        source.tuning = "fixed"
        return source

    def _rvars_for(self, ranges: list) -> list:
        """Index variables over `ranges` from rindex, defined in the current scope (once per
        scope and ranges: equal ranges share variables, so their values match in registers)."""
        key = (self.scope.serial, tuple(ranges))
        if key not in self._rvars:
            lines: list[str] = []
            self._rvars[key] = _unflatten(f"r{len(self._rvars)}_", "rindex", ranges, lines, self)
            self.scope.lines += lines
        return self._rvars[key]

    def _loop(self, group: LoopGroup, body: Callable[[], None]) -> None:
        if self.persistent:
            body()
            return
        outer_scope = self.scope
        self.scope = _Scope(outer_scope)
        self.scope.lines += ["rindex = roffset + rbase", "rmask = rindex < rnumel"]
        try:
            body()
        finally:
            loop, self.scope = self.scope, outer_scope
        outer_scope.lines.append("for roffset in range(rstart, rend, RBLOCK):" if self.split else
                                 "for roffset in range(0, rnumel, RBLOCK):")
        outer_scope.lines += ["    " + line for line in loop.lines]

    def _node_index(self, node: ComputedBuffer, inner_vars: list) -> list:
        available = list(self.xvars) + list(inner_vars)
        return [sympy.Integer(0) if size == 1 else available.pop(0) for size in node.data.ranges]

    def _pointwise(self, group: LoopGroup) -> None:
        inner_vars = self._rvars_for(list(group.inner)) if group.inner else []
        for node in group.nodes:
            self.position = self.nodes.index(node)
            index = self._node_index(node, inner_vars)
            value = node.data.inner_fn(self.ops, index)
            self.store(node, index, value)

    def _reduction(self, group: LoopGroup) -> None:
        self._reductions([group])

    def _reductions(self, groups: list[LoopGroup], prologue: LoopGroup | None = None) -> None:
        """Reductions over the same rows in one pass (one loop: each element loaded once for
        all of them), after the pointwise nodes of `prologue` (over the same rows) in that loop."""
        states = []
        for group in groups:
            node = group.nodes[0]
            if node.name in self.emitted:  # a Welford partner, stored with its mate
                continue
            data: Reduction = node.data
            kind = data.spec.reduction_type
            acc_torch = torch.bool if kind in ("any", "all") else \
                torch.float32 if data.spec.src_dtype in _LOW_PRECISION else data.spec.src_dtype
            states.append({"node": node, "kind": kind, "acc": acc_torch, "index": self._node_index(node, []),
                           "reduce": _Reducer(self, kind, TL_DTYPES[acc_torch], acc_torch)})
        if not states:
            if prologue is not None:
                self._loop(prologue, lambda: self._pointwise(prologue))
            return
        outer_scope = self.scope

        def body():
            if prologue is not None:
                self._pointwise(prologue)
                self.position = self.nodes.index(states[0]["node"])
            for state in states:
                ranges = list(state["node"].data.spec.reduction_ranges)
                available = list(self._rvars_for(squeeze(ranges)))
                rindex = [sympy.Integer(0) if size == 1 else available.pop(0) for size in ranges]
                value = state["node"].data.inner_fn(self.ops, state["index"], rindex)
                if self.persistent:
                    state["results"] = state["reduce"].whole(value)
                else:
                    state["reduce"].update(value)

        if not self.persistent:
            for state in states:
                state["reduce"].init(outer_scope)
        self._loop(groups[0], body)
        for state in states:
            self._store_reduced(state)

    def _store_reduced(self, state: dict) -> None:
        node, kind, acc_torch = state["node"], state["kind"], state["acc"]
        results = state["results"] if self.persistent else state["reduce"].finish()
        for result in results.values():
            self.value_dtypes[result] = torch.bool if kind in ("any", "all") else \
                torch.int64 if kind in ("argmax", "argmin") else acc_torch
        self.dims = ("x",)  # results: one per row
        members = [node]
        if kind in ("welford_mean", "welford_m2") and node.data.partner:
            members = [n for n in self.nodes if n.name in node.data.partner and n.name not in self.emitted]
        for member in members:
            result = results[member.data.spec.reduction_type] if kind.startswith("welford") else results[kind]
            if self.split:  # this chunk's partial result, in the accumulator's dtype
                slot = len(self.partials)
                self.partials.append((member, kind, acc_torch))
                self.scope.lines.append(f"tl.store(ws_ptr{slot} + tl.program_id(1) * xnumel + xindex, {result}, xmask)")
                self.emitted.add(member.name)
                continue
            if member.dtype != acc_torch:
                result = self.emit(f"{result}.to({TL_DTYPES[member.dtype]})", member.dtype) \
                    if member.dtype != torch.bool else self.emit(f"({result} != 0)", torch.bool)
            self.store(member, self._node_index(member, []), result)

    def _finish(self, name: str) -> TritonSource:
        symbols = sorted(self.size_symbols | {s.name for e in (self.xnumel, self.rnumel or 0)
                                              for s in sympy.sympify(e).free_symbols if is_size_symbol(s)})
        outputs = [] if self.split else [f"out_ptr{k}" for k in range(len(self.outputs))]
        parameters = [f"in_ptr{k}" for k in range(len(self.inputs))] + outputs + \
            [f"ws_ptr{k}" for k in range(len(self.partials))] + ["xnumel"] + \
            (["rnumel"] if self.rnumel is not None else []) + symbols + \
            (["oob_ptr"] if self.index_checks else []) + ["XBLOCK: tl.constexpr"] + \
            (["RBLOCK: tl.constexpr"] if self.rnumel is not None else []) + \
            (["RCHUNK: tl.constexpr"] if self.split else [])
        lines = [f"# {node.name}: {provenance(node)}" for node in self.nodes]
        lines += ["@triton.jit", f"def {name}({', '.join(parameters)}):"]
        lines += ["    " + line for line in self.kernel_scope.lines]
        columns = self.loads_along["x"] > 0 and self.loads_along["r"] == 0
        xblock, rblock, warps = _launch(self.xnumel, self.rnumel, self.persistent, columns)
        self.columns = columns
        tuning = "flat" if self.rnumel is None else ("columns" if columns else "rows") + \
            ("_persistent" if self.persistent else "")
        return TritonSource(name, "\n".join(lines) + "\n", list(self.inputs),
                            [] if self.split else list(self.outputs), symbols,
                            self.xnumel, self.rnumel, xblock, rblock, warps, list(self.index_checks), tuning=tuning,
                            elided=sorted(self.internal))


# One block reduced along r, for the reductions that combine elementwise
_BLOCK_REDUCE = {"sum": "tl.sum({0}, 1)[:, None]", "max": "tl.reduce({0}, 1, _ember_max)[:, None]",
                 "min": "tl.reduce({0}, 1, _ember_min)[:, None]", "prod": "tl.reduce({0}, 1, _ember_mul)[:, None]",
                 "any": "(tl.max({0}, 1)[:, None] != 0)", "all": "(tl.min({0}, 1)[:, None] != 0)"}


class _Reducer:
    """One reduction's code: whole (persistent: the row is one block) or init/update/finish
    (looped: [XBLOCK, RBLOCK] accumulators, reduced after the loop)."""

    def __init__(self, kernel: TritonKernel, kind: str, acc: str, acc_torch: torch.dtype) -> None:
        self.kernel, self.kind, self.acc, self.acc_torch = kernel, kind, acc, acc_torch
        floating = acc_torch.is_floating_point
        info = None if floating or acc_torch == torch.bool else torch.iinfo(acc_torch)
        lowest = '-float("inf")' if floating else str(info.min) if info else "0"
        highest = 'float("inf")' if floating else str(info.max) if info else "1"
        self.identity = {"sum": "0", "prod": "1", "max": lowest, "argmax": lowest, "min": highest,
                         "argmin": highest, "any": "0", "all": "1", "welford_mean": "0", "welford_m2": "0"}[kind]

    def _across(self, block: str) -> str:
        """A [XBLOCK, RBLOCK] block (masked lanes at the identity) reduced along r: [XBLOCK, 1]."""
        reduced = self.kernel.emit(_BLOCK_REDUCE[self.kind].format(block))
        if self.kind == "sum" and self.acc_torch.is_floating_point:
            # eager's sum starts from +0.0, so a sum of -0.0s is +0.0; tl.sum's tree of -0.0s (or
            # of one element, RBLOCK 1) is -0.0, and its sign shows through atan2 and division
            # (fuzz lowp 708927 on an H200: atan2(-0.0, gelu(sum)) gave -pi, eager -0.0)
            reduced = self.kernel.emit(f"({reduced} + 0.0)")
        return reduced

    def _input(self, value: str) -> str:
        kernel = self.kernel
        if self.kind in ("any", "all"):
            return kernel.emit(f"({value} != 0).to(tl.int8)")
        return kernel.emit(f"{value}.to({self.acc})")

    def whole(self, value: str) -> dict[str, str]:
        kernel, kind = self.kernel, self.kind
        value = self._input(value)
        masked = kernel.emit(f"tl.where(xmask & rmask, {value}, {self.identity})")
        if kind in _BLOCK_REDUCE:
            return {kind: self._across(masked)}
        if kind in ("argmax", "argmin"):
            positions = kernel.emit(f"tl.broadcast_to(rindex, {masked}.shape)")
            pair = kernel.emit(f"tl.reduce(({masked}, {positions}), 1, _ember_{kind})")
            return {kind: kernel.emit(f"{pair}[1][:, None]")}
        # welford: passes over registers (as exact as Welford's, and cheaper).  Eager's
        # Welford makes the mean NaN once an infinity meets another value (inf - inf): so here.
        # The sum's mean is refined by the mean of the deviations from it: a GPU thread adds
        # its elements in order, so 8 equal values sum to 8x only up to rounding and their
        # variance came out 1e-3, not 0 (fuzz stats 702024 on an H200); refined, the mean of
        # equal values is the value (Welford's running mean is), as exact elsewhere or more.
        total = kernel.emit(f"tl.sum({masked}, 1)[:, None]")
        infinite = kernel.emit(f"tl.max(tl.where(xmask & rmask, (tl.abs({value}) == float('inf')).to(tl.int8), 0), 1)"
                               f"[:, None]")
        first = kernel.emit(f"tl.where(({infinite} != 0) & (rnumel > 1), float('nan'), "
                            f"{_exact_quotient(total, 'rnumel', self.acc_torch)})")
        shift = kernel.emit(f"tl.sum(tl.where(xmask & rmask, {value} - {first}, 0), 1)[:, None]")
        refined = kernel.emit(f"({first} + {_exact_quotient(shift, 'rnumel', self.acc_torch)})")
        # (an overflowing sum's inf mean stays: inf - inf would make it NaN)
        mean = kernel.emit(f"tl.where({refined} == {refined}, {refined}, {first})")
        centered = kernel.emit(f"tl.where(xmask & rmask, {value} - {mean}, 0)")
        m2 = kernel.emit(f"tl.sum({centered} * {centered}, 1)[:, None]")
        return {"welford_mean": mean, "welford_m2": m2}

    def init(self, scope: _Scope) -> None:
        kernel = self.kernel
        kernel._temps += 1
        self.name = f"acc{kernel._temps}"
        full = f"tl.full([XBLOCK, RBLOCK], {self.identity}, {self.acc if self.kind not in ('any', 'all') else 'tl.int8'})"
        if self.kind.startswith("welford"):
            scope.lines += [f"{self.name}_mean = {full}", f"{self.name}_m2 = {full}", f"{self.name}_n = {full}"]
        else:
            scope.lines.append(f"{self.name} = {full}")
            if self.kind in ("argmax", "argmin"):
                scope.lines.append(f"{self.name}_index = tl.zeros([XBLOCK, RBLOCK], tl.int64)")

    def update(self, value: str) -> None:
        kernel, kind, acc = self.kernel, self.kind, self.name
        value = self._input(value)
        lines = kernel.scope.lines
        mask = "xmask & rmask"
        if kind == "sum":
            lines.append(f"{acc} = {acc} + tl.where({mask}, {value}, 0)")
        elif kind in ("max", "min", "prod", "any", "all"):
            combine = {"max": "_ember_max", "min": "_ember_min", "prod": "_ember_mul", "any": "tl.maximum",
                       "all": "tl.minimum"}[kind]
            lines.append(f"{acc} = tl.where({mask}, {combine}({acc}, {value}), {acc})")
        elif kind in ("argmax", "argmin"):
            lines.append(f"{acc}_next, {acc}_index_next = _ember_{kind}({acc}, {acc}_index, {value}, "
                         f"tl.broadcast_to(rindex, {acc}.shape).to(tl.int64))")
            lines.append(f"{acc} = tl.where({mask}, {acc}_next, {acc})")
            lines.append(f"{acc}_index = tl.where({mask}, {acc}_index_next, {acc}_index)")
        else:  # Welford, one lane per element of the block
            lines += [f"{acc}_n_next = {acc}_n + 1", f"{acc}_delta = {value} - {acc}_mean",
                      f"{acc}_mean_next = {acc}_mean + {acc}_delta / {acc}_n_next",
                      f"{acc}_m2 = tl.where({mask}, {acc}_m2 + {acc}_delta * ({value} - {acc}_mean_next), {acc}_m2)",
                      f"{acc}_mean = tl.where({mask}, {acc}_mean_next, {acc}_mean)",
                      f"{acc}_n = tl.where({mask}, {acc}_n_next, {acc}_n)"]

    def finish(self) -> dict[str, str]:
        kernel, kind, acc = self.kernel, self.kind, self.name
        if kind in _BLOCK_REDUCE:
            return {kind: self._across(acc)}
        if kind in ("argmax", "argmin"):
            pair = kernel.emit(f"tl.reduce(({acc}, {acc}_index), 1, _ember_{kind})")
            return {kind: kernel.emit(f"{pair}[1][:, None]")}
        triple = kernel.emit(f"tl.reduce(({acc}_mean, {acc}_m2, {acc}_n), 1, _ember_welford_combine)")
        return {"welford_mean": kernel.emit(f"{triple}[0][:, None]"), "welford_m2": kernel.emit(f"{triple}[1][:, None]")}


def _group_inner(group: LoopGroup) -> list:
    return squeeze(group.nodes[0].data.spec.reduction_ranges) if group.reduction else list(group.inner)


def _numel(ranges) -> sympy.Expr:
    total = sympy.Integer(1)
    for size in ranges:
        total = total * size
    return total


def _unflatten(prefix: str, flat: str, ranges: list, lines: list[str], kernel: TritonKernel) -> list:
    """Variables prefix0.. over `ranges` (row-major) from the flat index `flat`, defined in `lines`
    (over ranges holding a 0 there is no element: every variable is 0)."""
    variables = [sympy.Symbol(f"{prefix}{k}", integer=True, nonnegative=True) for k in range(len(ranges))]
    if any(sympy.sympify(size).is_zero for size in ranges):
        lines += [f"{var.name} = 0 * {flat}" for var in variables]
        return variables
    stride = sympy.Integer(1)
    definitions = []
    for position in range(len(ranges) - 1, -1, -1):
        var, size = variables[position], ranges[position]
        kernel.bounds[var] = sympy.sympify(size) - 1
        part = flat if stride == 1 else f"({flat} // {kernel.tex(stride)})"
        definitions.append(f"{var.name} = {part}" + ("" if position == 0 else f" % {kernel.tex(size)}"))
        stride = stride * size
    lines += reversed(definitions)
    return variables


def _shared_passes(groups: list[LoopGroup], persistent: bool) -> list[list[LoopGroup]]:
    """The kernel's loop groups, with neighbouring reductions over the same rows that do not read
    each other's results joined into one run (one pass over the rows: a layer norm's weight and
    bias gradients read the same inputs once).  Persistent kernels keep one group per run: their
    values stay in registers anyway."""
    from ..lowering.analysis import record

    runs: list[list[LoopGroup]] = []
    for group in groups:
        last = runs[-1] if runs else None
        if not persistent and last is not None and group.reduction and last[0].reduction and \
                len(group.nodes) == 1 and _plain_reduction(group.nodes[0]) and \
                all(_plain_reduction(g.nodes[0]) for g in last) and \
                list(group.nodes[0].data.spec.reduction_ranges) == list(last[0].nodes[0].data.spec.reduction_ranges):
            reads = {name for name, _ in record(group.nodes[0].data).loads}
            if not reads & {g.nodes[0].name for g in last}:
                last.append(group)
                continue
        runs.append([group])
    return runs


def _same_rows(pointwise: LoopGroup, reduction: LoopGroup) -> bool:
    """Does a pointwise group walk the rows exactly as a reduction group reduces them (same
    inner ranges, hence the same r variables)?"""
    return reduction.reduction and list(pointwise.inner) == squeeze(
        list(reduction.nodes[0].data.spec.reduction_ranges))


def _plain_reduction(node: ComputedBuffer) -> bool:
    return isinstance(node.data, Reduction) and node.data.spec.reduction_type in _BLOCK_REDUCE


def _store_order(node: ComputedBuffer, xranges: list) -> list | None:
    """The dimensions of a pointwise kernel's range from largest to smallest stride of its first
    output, when that is not their logical order (an output laid out transposed); None otherwise."""
    from ..lowering.ir import Layout

    layout, ranges = store_layout(node), list(node.data.ranges)
    if not isinstance(layout, Layout) or len(layout.stride) != len(ranges):
        return None
    strides = [sympy.sympify(stride) for stride, size in zip(layout.stride, ranges) if size != 1]
    if len(strides) != len(xranges) or not all(stride.is_number for stride in strides):
        return None
    order = sorted(range(len(strides)), key=lambda k: -int(strides[k]))
    return order if order != list(range(len(strides))) else None


# Defaults measured on an H100 (ViT-B and BERT-base training, 2026-11-24, 35 tuned kernels):
# persistent rows of 768 (RBLOCK 1024) ran fastest one row per block with 4 warps in 22 of 23
# kernels (the old 4 rows with 8 warps: 10-35% slower); pointwise kernels over 2^24 elements or
# more ran best or within 3% at XBLOCK 2048 with 8 warps (1024 with 4: up to 20% slower).
LARGE_FLAT = 1 << 24


def _launch(xnumel, rnumel, persistent: bool, columns: bool = False) -> tuple[int, int | None, int]:
    """Block sizes and warps before autotuning (triton_tune.py may change them).
    `columns`: the loads walk memory along x, not along r (a bias gradient's sum over rows):
    a block spans several outputs, so that neighbouring threads read neighbouring elements."""
    xnumel = sympy.sympify(xnumel)
    xcap = next_power_of_2(int(xnumel)) if xnumel.is_number else 1 << 20
    if rnumel is not None and columns:
        if persistent:
            rblock = next_power_of_2(max(int(rnumel), 1))
            xblock = max(1, min(32, xcap, 4096 // rblock))
            return xblock, rblock, 8 if xblock * rblock >= 4096 else 4
        # Looped: 64 outputs (128-256 contiguous bytes a row) by 32 rows; the rows are split into
        # chunks (_split_count) so that enough programs stream at once.
        return max(1, min(64 if xcap >= 256 else 32, xcap)), 32, 4
    if rnumel is None:
        if xnumel.is_number and int(xnumel) >= LARGE_FLAT:
            return 2048, None, 8
        block = max(16, min(1024, xcap))
        return block, None, 4 if block >= 512 else 2 if block >= 128 else 1
    if persistent:
        rblock = next_power_of_2(max(int(rnumel), 1))
        if rblock >= 1024:  # one row per block
            return 1, rblock, 4 if rblock <= 1024 else 8
        xblock = max(1, min(64, 4096 // rblock, xcap))
        return xblock, rblock, 8 if xblock * rblock >= 4096 else 4
    return 1, 2048, 8


def triton_kernels(kernel: Kernel, buffer_dtypes: dict[str, torch.dtype], offsets: dict | None = None,
                   int64: bool = False, maybe_empty: frozenset = frozenset(),
                   internal: frozenset = frozenset()) -> list[TritonSource]:
    """A scheduled kernel as Triton kernels, split where a node cannot share registers with the
    nodes before it; named kernel3, kernel3_1, ...  `internal`: values that no other step reads
    (the scheduler's); those of a pointwise Triton kernel read only in it, where it holds them
    in registers, are not stored."""
    from ..lowering.ir import Scatter

    if any(isinstance(node.data, Scatter) for node in kernel.nodes):  # (a kernel of its own)
        return [TritonKernel(list(kernel.nodes), [], buffer_dtypes, offsets, int64, maybe_empty).generate_scatter(
            kernel.name if phase == "base" else f"{kernel.name}_1", phase) for phase in ("base", "update")]
    if not all(isinstance(node.data, (Pointwise, Reduction)) for node in kernel.nodes):
        raise NotImplementedError("a Triton kernel of other loops")
    readers: dict[str, set[str]] = {}
    if internal:
        for node in kernel.nodes:
            for read, _ in record(node.data).loads:
                readers.setdefault(read, set()).add(node.name)

    def make(nodes: list, kept_here: frozenset = frozenset()) -> TritonKernel:
        return TritonKernel(nodes, kernel.outer, buffer_dtypes, offsets, int64, maybe_empty, kept_here)

    def generate(nodes: list, name: str) -> list[TritonSource]:
        names = {node.name for node in nodes}
        # (pointwise kernels only: reductions may be split or cut, regenerating their nodes)
        pointwise = not any(isinstance(node.data, Reduction) for node in nodes)
        kept_here = {n for n in names & internal if readers.get(n, set()) <= names} if pointwise else set()
        try:
            while True:
                first = make(nodes, frozenset(kept_here))
                try:
                    source = first.generate(name)
                    break
                except _Stored as stored:
                    kept_here.discard(stored.name)
        except _Split as split:
            if split.position == 0:
                raise NotImplementedError(f"a Triton kernel cannot start with {nodes[0].name}: {split}") from None
            head = generate(nodes[:split.position], name)
            return head + generate(nodes[split.position:], f"{kernel.name}_{len(head)}")
        chunks = _split_count(first, source)
        if chunks:
            return _split_reduction(make, nodes, name, source, chunks)
        cut = _cut_for_split(make, nodes, name) if source.rnumel is not None and not first.persistent else None
        if cut is not None:
            head = generate(nodes[:cut], name)
            return head + generate(nodes[cut:], f"{kernel.name}_{len(head)}")
        if not pointwise:
            kept_here = {n for n in names & internal if readers.get(n, set()) <= names}
            return [_with_reductions_kept(make, nodes, name, source, kept_here)]
        return [source]

    return _renumbered(generate(list(kernel.nodes), kernel.name), kernel.name)


# Split reductions: rows this long, over too few outputs to fill the GPU, are reduced in chunks
# by a grid of programs (outputs x chunks), then the chunks' partial results by a second kernel.
SPLIT_MIN_RNUMEL = 4096
SPLIT_PROGRAMS = 264  # about two programs per streaming multiprocessor of an H100
SPLIT_COLUMN_PROGRAMS = 2048  # a column sum's programs (split into row chunks)
SPLIT_MAX_CHUNKS = 256


def _split_count(kernel: TritonKernel, source: TritonSource) -> int:
    """How many chunks to reduce the rows in (0: no split)."""
    if source.rnumel is None or kernel.persistent or kernel.index_checks:
        return 0
    rnumel, xnumel = sympy.sympify(source.rnumel), sympy.sympify(source.xnumel)
    if not (rnumel.is_number and xnumel.is_number) or int(rnumel) < SPLIT_MIN_RNUMEL:
        return 0
    names = {node.name for node in kernel.nodes}
    if not all(isinstance(node.data, Reduction) and (node.data.spec.reduction_type in _BLOCK_REDUCE or _paired_welford(
            node, names)) for node in kernel.nodes):
        return 0
    from ..lowering.analysis import reads

    if any(reads(node) & names for node in kernel.nodes):
        return 0  # (a reduction of another's result, as softmax's sum of its max: a chunk lacks it)
    programs = -(-int(xnumel) // source.XBLOCK)
    if source.tuning == "columns":
        # A column sum streams rows of XBLOCK outputs: about 2048 programs in all kept an H100's
        # memory busy (a bias gradient of [12608, 3072]: 81 us in 2 chunks, 44 us in 32;
        # scratch sweep of XBLOCK, RBLOCK, warps and chunks over eight shapes, 2026-11-24).
        if programs >= SPLIT_COLUMN_PROGRAMS // 2:
            return 0
        chunks = min(SPLIT_MAX_CHUNKS, -(-SPLIT_COLUMN_PROGRAMS // programs), int(rnumel) // 64)
        return chunks if chunks >= 2 else 0
    if programs >= SPLIT_PROGRAMS // 2:
        return 0
    return max(2, min(64, SPLIT_PROGRAMS // programs, int(rnumel) // 1024))


def _paired_welford(node, names: set) -> bool:
    """A Welford mean or m2 whose mate is in the same kernel (their chunks combine together)."""
    return node.data.spec.reduction_type in ("welford_mean", "welford_m2") and node.data.partner is not None and \
        set(node.data.partner) <= names


def _cut_for_split(make, nodes: list, name: str) -> int | None:
    """Where to cut a kernel that does not split as a whole so that a run of its reductions can:
    the pointwise nodes around them (a bias gradient's cast, batch norm's running statistics,
    the product between two batch norms' backward sums) go to kernels of their own.  None: no
    run of reductions would split."""
    kinds = [isinstance(node.data, Reduction) for node in nodes]
    start = 0
    while start < len(nodes):
        if not kinds[start]:
            start += 1
            continue
        end = start
        while end < len(nodes) and kinds[end]:
            end += 1
        if (start, end) != (0, len(nodes)):
            run = make(nodes[start:end])
            try:
                splits = _split_count(run, run.generate(name))
            except _Split:
                splits = 0
            if splits:
                return start if start > 0 else end
        start = end
    return None


def _with_reductions_kept(make, nodes: list, name: str, source: TritonSource, kept: set) -> TritonSource:
    """A whole reduction kernel (neither split nor cut) made again with `kept`, the values only it
    reads, held in registers, reductions' results among them (a batch norm's mean and variance
    feeding its epilogue, a layer norm's statistics at inference: each a buffer the wrapper
    allocated, ~6 us of host time on an H100 machine, and a store); a value read where the
    kernel holds none of it is stored after all."""
    kept = set(kept)
    while kept:
        try:
            return make(nodes, frozenset(kept)).generate(name)
        except _Stored as stored:
            kept.discard(stored.name)
    return source


def _split_reduction(make, nodes: list, name: str, source: TritonSource, chunks: int) -> list[TritonSource]:
    """The first pass (each program reduces one chunk of its outputs' rows into a workspace),
    then one combining kernel per reduction."""
    kernel = make(nodes)
    kernel.split = chunks
    stage = kernel.generate(name)
    rblock = source.RBLOCK
    stage.XBLOCK, stage.RBLOCK, stage.num_warps = source.XBLOCK, rblock, source.num_warps
    per_chunk = -(-int(source.rnumel) // chunks)
    if source.tuning == "columns" and per_chunk >= 1024:
        stage.num_warps = 8  # (long chunks of few columns: batch norm's statistics over channels)
    stage.constexprs = {"RCHUNK": -(-per_chunk // rblock) * rblock}
    stage.grid_y = chunks
    xnumel = int(sympy.sympify(source.xnumel))
    stage.workspaces = [(f"{name}_ws{k}", chunks * xnumel, acc) for k, (_, _, acc) in enumerate(kernel.partials)]
    sources = [stage]
    slots = {node.name: k for k, (node, _, _) in enumerate(kernel.partials)}
    for k, (node, kind, acc) in enumerate(kernel.partials):
        if not kind.startswith("welford"):
            combine = make([node]).generate_combine(f"{name}_c{k}", kind, acc, chunks, kernel.outer)
            combine.inputs = [stage.workspaces[k][0]]
        elif node.data.spec.reduction_type == "welford_mean":  # (the pair's one combining kernel)
            m2 = next(n for n, _, _ in kernel.partials if n.name in node.data.partner and n is not node)
            combine = make([node, m2]).generate_welford_combine(
                f"{name}_c{k}", acc, chunks, kernel.outer, int(source.rnumel), stage.constexprs["RCHUNK"])
            combine.inputs = [stage.workspaces[k][0], stage.workspaces[slots[m2.name]][0]]
        else:
            continue
        sources.append(combine)
    return sources


def _renumbered(sources: list[TritonSource], base: str) -> list[TritonSource]:
    """kernel3, kernel3_1, kernel3_2, ... in order (nested splits name them out of order)."""
    for position, source in enumerate(sources):
        name = base if position == 0 else f"{base}_{position}"
        if source.name != name:
            source.source = source.source.replace(f"def {source.name}(", f"def {name}(", 1)
            source.name = name
    return sources


def kernel_file_text(source: str) -> str:
    return ("import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n"
            + PRELUDE + "\n\n" + source)


_LOADED: dict[str, Callable] = {}  # canonical kernel text -> its @triton.jit function, per process


def canonical_kernel(source: str, name: str) -> tuple[str, str]:
    """(canonical name, text): the kernel's function named by a hash of its code, without the
    provenance comments.  Kernels that compute the same thing (a layer's kernels, repeated in every
    layer) then share one Triton function: it compiles once, and a profile shows one name."""
    code = source[source.index("@triton.jit"):]
    unnamed = kernel_file_text(code.replace(f"def {name}(", "def _(", 1))  # (the prelude counts)
    digest = hashlib.sha256(unnamed.encode()).hexdigest()[:16]
    kind = "red" if "RBLOCK: tl.constexpr" in code else "poi"
    canonical = f"ember_{kind}_{digest}"
    return canonical, source.replace(f"def {name}(", f"def {canonical}(", 1)


def load_kernel(source: str, name: str) -> Callable:
    """The @triton.jit function of the kernel `name` in `source`, imported from a file in ember's
    cache (Triton reads a kernel's source from its file; each text is written once).  Named by its
    code (canonical_kernel): one function per distinct kernel in this process."""
    from .cpp_build import cache_dir

    canonical, source = canonical_kernel(source, name)
    if canonical in _LOADED:
        return _LOADED[canonical]
    text = kernel_file_text(source)
    folder = os.path.join(cache_dir(), "triton")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{canonical}.py")
    if not os.path.exists(path):
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w") as handle:
            handle.write(text)
        os.replace(partial, path)  # (atomic: a concurrent process writes the same text)
    spec = importlib.util.spec_from_file_location(f"ember_triton_{canonical}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, canonical)
    function.ember_path = path
    _LOADED[canonical] = function
    return function
