"""C++'s spellings of ember's ops (`CPP_OPS`, the Triton generator's `TRITON_OPS` counterpart),
the preamble of helpers every kernel includes, C types and literals, the CSE block, and the ops
handler that writes C++ (CppKernel, kernel.py, drives it)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import sympy
import torch

from ..kernel import COMMON_OPS, named_calls


if TYPE_CHECKING:
    from .kernel import CppKernel


CTYPES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "ember_half", torch.bfloat16: "ember_bf16", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}

# ops method -> C++ expression template over the operands {0}, {1}, ...
CPP_OPS: dict[str, str] = {
    **COMMON_OPS,
    **named_calls("std::", "abs exp expm1 exp2 log log1p log2 log10 sqrt sin cos tan sinh cosh tanh asin acos atan "
                  "asinh acosh atanh erf erfc floor ceil trunc isnan isinf signbit", "atan2 fmod"),
    **named_calls("ember_", "relu sign bitwise_not", "maximum minimum pow remainder floordiv"),
    "truediv": "({0} / {1})", "rsqrt": "(1 / std::sqrt({0}))", "sigmoid": "(1 / (1 + std::exp(-{0})))",
    "round": "std::nearbyint({0})", "reciprocal": "(1 / {0})", "logical_not": "(!{0})",
    "truncdiv": "std::trunc({0} / {1})",
    "logical_and": "({0} && {1})", "logical_or": "({0} || {1})", "logical_xor": "(bool({0}) != bool({1}))",
    "where": "({0} ? {1} : {2})",
}

PARALLEL_THRESHOLD = 8192  # elements; below this a kernel runs on one thread
WELFORD_LANES = 16  # independent Welford accumulators per reduction (one vector of floats)

PREAMBLE = r"""
#include <cmath>
#include <cstdint>
#include <limits>
#include <algorithm>
#include <type_traits>
#include <omp.h>
// float16 and bfloat16 are storage types: they convert to float for arithmetic (the lowerings
// compute in float32) and round to nearest even when a float is stored into them.
typedef _Float16 ember_half;
struct ember_bf16 {
    uint16_t bits;
    ember_bf16() = default;
    ember_bf16(float value) {
        uint32_t word;
        __builtin_memcpy(&word, &value, 4);
        if ((word & 0x7fffffffu) > 0x7f800000u) { bits = uint16_t((word >> 16) | 0x40u); return; }  // quiet NaN
        word += 0x7fffu + ((word >> 16) & 1u);
        bits = uint16_t(word >> 16);
    }
    operator float() const {
        uint32_t word = uint32_t(bits) << 16;
        float value;
        __builtin_memcpy(&value, &word, 4);
        return value;
    }
};
template <typename T> static inline T ember_relu(T a) { return a < T(0) ? T(0) : a; }
// NaN wins; between equal values the first stays, as in eager (min(0.0, -0.0) is 0.0, and the
// sign of a zero shows through atan2 and division: test_min_max_of_equal_values_keep_the_first_as_eager).
template <typename T> static inline T ember_maximum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (b > a ? b : a)); }
template <typename T> static inline T ember_minimum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (b < a ? b : a)); }
// ATen's sign: NaN gives 0 (both comparisons are false).
template <typename T> static inline T ember_sign(T a) { return T((T(0) < a) - (a < T(0))); }
static inline bool ember_bitwise_not(bool a) { return !a; }
template <typename T> static inline T ember_bitwise_not(T a) { return ~a; }
// Integer powers by squaring in unsigned arithmetic (wraps as eager does); a negative exponent
// gives 0 except for bases 1 and -1, as in ATen.
template <typename T, typename U> static inline T ember_pow(T a, U b) {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<U>) {
        if constexpr (std::is_signed_v<U>) {
            if (b < 0) {
                if (a == 1) return T(1);
                if constexpr (std::is_signed_v<T>) { if (a == -1) return (b & 1) ? T(-1) : T(1); }
                return T(0);
            }
        }
        using W = std::make_unsigned_t<std::conditional_t<(sizeof(T) < sizeof(int)), int, T>>;
        W result = 1, base = static_cast<W>(a);
        for (auto e = b; e != 0; e /= 2) {
            if (e & 1) result *= base;
            base *= base;
        }
        return static_cast<T>(result);
    } else {
        return std::pow(a, b);
    }
}
// Python's (and ATen's) floor division of floats: from fmod, so that inf // x is NaN and
// results just below an integer are not rounded up by the division.
template <typename T> static inline T ember_floordiv(T a, T b) {
    if (b == T(0)) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T floored = std::floor(div);
    return (div - floored > T(0.5)) ? floored + T(1) : floored;
}
#pragma omp declare reduction(ember_max_float : float : omp_out = ember_maximum(omp_out, omp_in)) \
    initializer(omp_priv = -std::numeric_limits<float>::infinity())
#pragma omp declare reduction(ember_min_float : float : omp_out = ember_minimum(omp_out, omp_in)) \
    initializer(omp_priv = std::numeric_limits<float>::infinity())
#pragma omp declare reduction(ember_max_double : double : omp_out = ember_maximum(omp_out, omp_in)) \
    initializer(omp_priv = -std::numeric_limits<double>::infinity())
#pragma omp declare reduction(ember_min_double : double : omp_out = ember_minimum(omp_out, omp_in)) \
    initializer(omp_priv = std::numeric_limits<double>::infinity())
template <typename T> static inline void ember_welford_combine(T& mean, T& m2, T& n, T bmean, T bm2, T bn) {
    if (bn == 0) return;
    if (n == 0) { mean = bmean; m2 = bm2; n = bn; return; }  // (delta * delta * 0 is NaN if delta * delta overflows)
    T total = n + bn, delta = bmean - mean, share = bn / total;
    mean += delta * share;
    m2 += bm2 + delta * delta * n * share;
    n = total;
}
template <typename T> static inline T ember_remainder(T a, T b) {
    T r = std::fmod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
"""


def ctype(dtype: torch.dtype) -> str:
    return CTYPES[dtype]


# float16 and bfloat16 are storage types only: loaded into float, computed in float, rounded to
# their own precision where the IR converts to them, converted back when stored.
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def value_ctype(dtype: torch.dtype) -> str:
    """The C++ type of a computed value of `dtype` (what temporaries hold)."""
    return "float" if dtype in _LOW_PRECISION else CTYPES[dtype]


def cast_value(expr: str, dtype: torch.dtype) -> str:
    """`expr` converted to a value of `dtype` (float16/bfloat16: rounded to their precision, kept as floats)."""
    cast = f"static_cast<{ctype(dtype)}>({expr})"
    return f"static_cast<float>({cast})" if dtype in _LOW_PRECISION else cast


def literal(value: Any, dtype: torch.dtype) -> str:
    if dtype in _LOW_PRECISION:
        rounded = torch.tensor(value, dtype=torch.float32).to(dtype).item()
        return literal(float(rounded), torch.float32)
    kind = ctype(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        value = float(value)
        if math.isnan(value):
            return f"std::numeric_limits<{kind}>::quiet_NaN()"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"{sign}std::numeric_limits<{kind}>::infinity()"
        return f"static_cast<{kind}>({value!r})"
    if isinstance(value, float):
        # As ATen converts it (inf, NaN and out-of-range floats have no C++ value to cast to).
        value = torch.tensor(value, dtype=torch.float64).to(dtype).item()
    value = int(value)
    if value == -2**63:  # the literal 9223372036854775808L itself does not fit in int64_t
        return f"static_cast<{kind}>(-9223372036854775807L - 1)"
    return f"static_cast<{kind}>({value}L)"


class CppOps:
    """The ops handler that writes C++."""

    def __init__(self, kernel: "CppKernel") -> None:
        self.kernel = kernel

    def _emit(self, expr: str) -> str:
        return self.kernel.emit(expr)

    def load(self, name: str, index) -> str:
        index_text = self.kernel.index(index)
        cached = self.kernel.scope.find("stored", (name, index_text))
        if cached is not None:
            return cached
        pointer = self.kernel.input_pointer(name)
        if self.kernel.buffer_dtypes.get(name) in _LOW_PRECISION:
            return self._emit(f"static_cast<float>({pointer}[{index_text}])")
        return self._emit(f"{pointer}[{index_text}]")

    def constant(self, value, dtype) -> str:
        return literal(value, dtype)

    def index_expr(self, expr, dtype) -> str:
        value = self._emit(f"static_cast<int64_t>({self.kernel.index(expr)})")
        return self._emit(cast_value(value, dtype))  # (an integer: no float -> int here)

    def to_dtype(self, value: str, dtype) -> str:
        if dtype != torch.bool and not dtype.is_floating_point:
            self.kernel.converts_to_integer = True
        return self._emit(cast_value(value, dtype))

    def indirect_indexing(self, value: str, size, site: str = "", wrap_negative: bool = True) -> sympy.Symbol:
        return self.kernel.checked_index(value, size, site, wrap_negative)

    def masked(self, mask: str, body: Callable, other, dtype) -> str:
        kernel = self.kernel
        name = kernel.new_temp()
        kernel.scope.lines.append(f"{value_ctype(dtype)} {name} = {literal(other, dtype)};")
        kernel.scope.lines.append(f"if ({mask}) {{")
        kernel.push_block()
        value = body()
        kernel.scope.lines.append(f"{name} = {value};")
        kernel.pop_block()
        kernel.scope.lines.append("}")
        return name

    def __getattr__(self, name: str):
        template = CPP_OPS.get(name)
        if template is None:
            raise NotImplementedError(f"no C++ spelling for ops.{name}")

        def operation(*args):
            return self._emit(template.format(*args))

        return operation
