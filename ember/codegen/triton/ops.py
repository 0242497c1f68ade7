"""Triton's spellings of ember's ops (`TRITON_OPS`, the C++ `CPP_OPS` counterpart) and the ops
handler that writes them, with literals, index expressions, the prelude of helper functions, the
kernel's source record (TritonSource) and loading a kernel's source."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
from typing import TYPE_CHECKING, Callable

import sympy
import torch

from ...lowering.symbolic import is_size_symbol
from ..kernel import COMMON_OPS, cache_dir, named_calls

if TYPE_CHECKING:
    from .kernel import TritonKernel

TRITON_OPS: dict[str, str] = {
    **COMMON_OPS,
    # (division and square root rounded as IEEE (and eager) round them: Triton's `/` and
    # tl.sqrt are approximate on a GPU, and x / x then truncates to 0)
    "truediv": "tl.div_rn({0}, {1})",
    **named_calls("tl.", "abs exp exp2 log log2 rsqrt sin cos erf sigmoid floor ceil"),
    "sqrt": "tl.sqrt_rn({0})", "relu": "tl.where({0} < 0, 0, {0})", "reciprocal": "tl.div_rn(1.0, {0})",
    "isnan": "({0} != {0})",
    "logical_not": "({0} == 0)",
    # NaN wins; between equal values the first stays (the sign of a zero shows), as in eager
    "maximum": "tl.where(({0} != {0}) | (({1} == {1}) & ({1} <= {0})), {0}, {1})",
    "minimum": "tl.where(({0} != {0}) | (({1} == {1}) & ({1} >= {0})), {0}, {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) != ({1} != 0))",
    "where": "tl.where({0}, {1}, {2})",
    # (not where(x > 0, 1, where(x < 0, -1, 0)): Triton 3.6 on an H200 gave +1 for negative
    # bfloat16 values there, once fused with a log_softmax; test_sign_of_negative_low_precision_values_fused_into_a_log_softmax)
    "sign": "(({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype))",
    "isinf": "(tl.abs({0}) == float('inf'))",
    # CUDA's libdevice (not in Triton's interpreter: kernels using these run on a GPU only)
    **named_calls("libdevice.", "tanh expm1 log1p log10 tan sinh cosh asin acos atan asinh acosh atanh erfc",
                  "pow atan2 fmod"),
    "round": "libdevice.nearbyint({0})", "signbit": "(libdevice.signbit({0}) != 0)",
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
    """total / count, rounded once: Triton's `/` on float32 is the GPU's approximate division (8
    equal values' mean came out 1 ulp off: test_variance_of_equal_values_is_exactly_zero)."""
    if dtype == torch.float32:
        return f"tl.div_rn({total}, tl.full([1, 1], {count}, tl.float32))"
    return f"({total} / {count})"


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def on_pointer(pointer: str, index) -> tuple[str, sympy.Expr]:
    """(pointer text, index) with the index's constant term moved onto the pointer:
    `(in_ptr0 + 45) + (r0_2 + 9 * r0_1)`.  Triton 3.6 miscompiles a block of addresses
    `45 + r % 9 + 9 * ((r // 9) % 5)` with 4 or more warps (the loads read from element 0, as if
    the constant were not there): pinned by test_an_amax_over_an_expanded_view_at_an_offset_reads_the_view."""
    index = sympy.sympify(index)
    constant, rest = index.as_coeff_Add()
    if constant == 0 or not rest.free_symbols or not constant.is_Integer:
        return pointer, index
    sign = "-" if constant < 0 else "+"
    return f"({pointer} {sign} {abs(int(constant))})", rest


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
    # scratch tensors for this kernel and its followers, passed after the outputs: (name, numel, dtype)
    workspaces: list = dataclasses.field(default_factory=list)
    constexprs: dict = dataclasses.field(default_factory=dict)  # more constexpr arguments (RCHUNK)
    pointer_dtypes: list | None = None  # on a GPU: the tensors' dtypes, for compiling ahead of the call
    pointer_numels: list | None = None  # elements each pointer reaches (None: not known statically)
    # the block sizes its code allows (tune.py): "flat", "rows" / "columns" (looped reductions),
    # "rows_persistent" / "columns_persistent" (RBLOCK holds the row), "fixed" (as generated)
    tuning: str = "fixed"
    elided: list = dataclasses.field(default_factory=list)  # values of the kernel never stored
    # the first read of a kernel-mate's value not served from registers (reading node's position,
    # the value, whether it was to stay in registers): the source is incomplete (gpu_partition.py)
    unheld: tuple | None = None


class TritonOps:
    """The ops handler that writes Triton."""

    def __init__(self, kernel: "TritonKernel") -> None:
        self.kernel = kernel

    def load(self, name: str, index) -> str:
        kernel = self.kernel
        index = kernel.simplified(index)
        if name in kernel.own:  # a kernel-mate's value: from registers, else reported
            value = kernel.scope.find("stored", (name, kernel.tex(index)))
            if value is None:
                return kernel.not_held(name)
            return value
        kernel.note_contiguity(index)
        pointer, offset = on_pointer(kernel.input_pointer(name), index - kernel.offsets.get(name, 0))
        address, mask = kernel.address(offset, everywhere=name in kernel.maybe_empty)
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
        return self.kernel.checked_index(value, size, site, wrap_negative)

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
            # (the interpreter checks against the CPU's); atan2 of it showed (test_relu_of_negative_zero_keeps_eagers_sign)
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


def kernel_file_text(source: str) -> str:
    return ("import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n"
            + PRELUDE + "\n\n" + source)


_LOADED: dict[str, Callable] = {}  # canonical kernel text -> its @triton.jit function, per process


def canonical_kernel(source: str, name: str) -> tuple[str, str]:
    """(canonical name, text): the kernel's function named by a hash of its code, without the
    provenance comments, so that kernels computing the same thing (every layer's) compile once."""
    code = source[source.index("@triton.jit"):]
    unnamed = kernel_file_text(code.replace(f"def {name}(", "def _(", 1))  # (the prelude counts)
    digest = hashlib.sha256(unnamed.encode()).hexdigest()[:16]
    kind = "red" if "RBLOCK: tl.constexpr" in code else "poi"
    canonical = f"ember_{kind}_{digest}"
    return canonical, source.replace(f"def {name}(", f"def {canonical}(", 1)


def load_kernel(source: str, name: str) -> Callable:
    """The @triton.jit function of the kernel `name` in `source`, imported from a file in ember's
    cache (Triton reads a kernel's source from its file), one per distinct kernel (canonical_kernel)."""
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
