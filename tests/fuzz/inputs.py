"""Input tensors of a fuzz program: what each one is (InputSpec) and how it is built, as source text.

Every input is built by plain torch code inside the program's `make_inputs()` (rendered here), so
a printed program is a self-contained repro. Each input draws its values from its own seeded
generator (`gen(seed)`), so dropping or changing one input never changes the values of another
(the minimizer relies on that).

An input's `shape` is its logical shape; `layout` says how it is made from a contiguous base:
  contiguous   the base itself
  permuted     a base with permuted sizes, permuted back (transpose/permute of a contiguous tensor)
  strided      a base twice as long in one dim, sliced with step 2 (x[:, ::2])
  offset       a base one or two longer in one dim, sliced from 1 or 2 (x[1:]: storage offset)
  expanded     a base with size 1 in some dims (or fewer leading dims), expanded (stride 0)
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
DTYPE_NAMES = {
    torch.float32: "torch.float32", torch.float64: "torch.float64", torch.float16: "torch.float16",
    torch.bfloat16: "torch.bfloat16", torch.int64: "torch.int64", torch.int32: "torch.int32",
    torch.int16: "torch.int16", torch.int8: "torch.int8", torch.uint8: "torch.uint8", torch.bool: "torch.bool",
}
# Full value range of the narrow integer types: arithmetic on them wraps around.
NARROW_INT_RANGES = {torch.int8: (-128, 128), torch.uint8: (0, 256), torch.int16: (-32768, 32768)}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES[dtype]


def format_scalar(value: Any) -> str:
    """Python source for a scalar: float('nan'), -0.0, 1e+30, True, 7."""
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    value = float(value)
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)


def special_values(dtype: torch.dtype) -> dict[str, Any]:
    """Named special values of a dtype: the corners programs should be checked at."""
    if dtype in FLOAT_DTYPES:
        info = torch.finfo(dtype)
        return {"zero": 0.0, "negzero": -0.0, "inf": math.inf, "-inf": -math.inf, "nan": math.nan,
                "large": float(info.max) / 2, "-large": -float(info.max) / 2, "tiny": float(info.tiny),
                "subnormal": float(info.tiny) / 8, "half": 0.5, "-half": -0.5, "2.5": 2.5, "one": 1.0,
                "-one": -1.0, "three": 3.0}
    if dtype == torch.bool:
        return {"true": True, "false": False}
    info = torch.iinfo(dtype)
    return {"zero": 0, "one": 1, "-one": -1 if info.min < 0 else 1, "min": info.min, "max": info.max,
            "min+1": info.min + 1, "max-1": info.max - 1, "two": 2}


@dataclasses.dataclass
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    seed: int
    layout: str = "contiguous"
    layout_arg: tuple = ()
    # normal | integral (small whole numbers, as floats too) | wide (integers over a wide range)
    # | positive | literal (values given in `literal`) | index (int64 in [0, index_high))
    values: str = "normal"
    scale: float = 1.0
    special: tuple = ()          # ((flat position in the base, value), ...)
    grad: str = ""               # "" | "leaf" | "nonleaf" (a clone of a leaf that requires grad)
    literal: Any = None          # nested list, for values == "literal"
    index_high: int = 0          # values == "index": entries in [0, index_high)
    unique_dim: int | None = None  # values == "index": entries distinct along this dim

    @property
    def is_index(self) -> bool:
        return self.values == "index"

    def base_shape(self) -> tuple[int, ...]:
        shape = list(self.shape)
        if self.layout == "permuted":
            permutation = self.layout_arg
            return tuple(shape[permutation[i]] for i in range(len(shape)))
        if self.layout == "strided":
            dim, extra = self.layout_arg
            shape[dim] = 2 * shape[dim] - (1 if extra and shape[dim] > 0 else 0)
            return tuple(shape)
        if self.layout == "offset":
            dim, start = self.layout_arg
            shape[dim] += start
            return tuple(shape)
        if self.layout == "expanded":
            lead, dims = self.layout_arg
            return tuple(1 if i in dims else size for i, size in enumerate(shape))[lead:]
        return tuple(shape)

    def numel(self) -> int:
        return math.prod(self.base_shape())


def _shape_text(shape) -> str:
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(size) for size in shape) + ")"


def _layout_suffix(spec: InputSpec) -> str:
    rank = len(spec.shape)
    if spec.layout == "permuted":
        permutation = spec.layout_arg
        inverse = [permutation.index(i) for i in range(rank)]
        swapped = [i for i in range(rank) if inverse[i] != i]
        if rank == 2:
            return ".t()"
        if len(swapped) == 2:
            return f".transpose({swapped[0]}, {swapped[1]})"
        return ".permute(" + ", ".join(map(str, inverse)) + ")"
    if spec.layout == "strided":
        dim, _ = spec.layout_arg
        return "[" + ":, " * dim + "::2]"
    if spec.layout == "offset":
        dim, start = spec.layout_arg
        return "[" + ":, " * dim + f"{start}:]"
    if spec.layout == "expanded":
        return f".expand{_shape_text(spec.shape)}" if spec.shape else ".expand(())"
    return ""


def _literal_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_literal_text(item) for item in value) + "]"
    return format_scalar(value)


def _base_text(spec: InputSpec) -> str:
    """A contiguous tensor of the base shape, dtype and value distribution."""
    shape = spec.base_shape()
    size = _shape_text(shape)
    generator = f"generator=gen({spec.seed})"
    dtype = spec.dtype
    if spec.values == "literal":
        return f"torch.tensor({_literal_text(spec.literal)}, dtype={dtype_name(dtype)})"
    if spec.values == "index":
        if spec.unique_dim is not None:
            # Distinct entries along unique_dim: a random permutation of range(index_high) per row,
            # cut to the wanted length (scatter and index_put must not write one place twice).
            full = list(shape)
            full[spec.unique_dim] = spec.index_high
            keep = "[" + ":, " * spec.unique_dim + f":{shape[spec.unique_dim]}]"
            return f"torch.rand({_shape_text(tuple(full))}, {generator}).argsort(dim={spec.unique_dim}){keep}.contiguous()"
        return f"torch.randint(0, {spec.index_high}, {size}, {generator})"
    if dtype == torch.bool:
        return f"(torch.rand({size}, {generator}) < 0.5)"
    if dtype in INT_DTYPES:
        if spec.values == "wide":
            low, high = NARROW_INT_RANGES.get(dtype, (-2 ** 31, 2 ** 31) if dtype == torch.int32 else (-2 ** 40, 2 ** 40))
        elif spec.values == "positive":
            low, high = 1, 10
        else:
            low, high = (0, 10) if dtype == torch.uint8 else (-8, 9)
        return f"torch.randint({low}, {high}, {size}, {generator}, dtype={dtype_name(dtype)})"
    if spec.values == "integral":
        text = f"torch.randint(-6, 7, {size}, {generator})"
    elif spec.values == "positive":
        text = f"(torch.rand({size}, {generator}) + 0.1)"
    else:
        text = f"torch.randn({size}, {generator})"
    if spec.scale != 1.0:
        text = f"({text} * {format_scalar(spec.scale)})"
    return f"{text}.to({dtype_name(dtype)})"


def render_input(spec: InputSpec) -> tuple[list[str], str]:
    """(lines building the input inside make_inputs, the name of its grad leaf or 'None')."""
    name = spec.name
    base = f"{_base_text(spec)}.to(DEVICE)"
    suffix = _layout_suffix(spec)
    lines = []
    if spec.special:
        positions = [str(position) for position, _ in spec.special]
        values = [format_scalar(value) for _, value in spec.special]
        lines.append(f"{name} = {base}")
        lines.append(f"{name}.view(-1)[[{', '.join(positions)}]] = torch.tensor([{', '.join(values)}], "
                     f"dtype={dtype_name(spec.dtype)}).to(DEVICE)")
        base = name
    if spec.grad == "leaf":
        lines.append(f"{name} = {base}{suffix}.requires_grad_()")
        return lines, name
    if spec.grad == "nonleaf":
        lines.append(f"{name}_leaf = {base}{suffix}.requires_grad_()")
        lines.append(f"{name} = {name}_leaf.clone()  # not a leaf: in-place ops on it are allowed")
        return lines, f"{name}_leaf"
    if suffix or base != name:
        lines.append(f"{name} = {base}{suffix}")
    return lines, "None"


def render_make_inputs(specs: list[InputSpec]) -> str:
    lines = ["def make_inputs():", '    """The inputs, and the leaf whose .grad belongs to each (or None)."""']
    leaves = []
    for spec in specs:
        body, leaf = render_input(spec)
        lines.extend("    " + line for line in body)
        leaves.append(leaf)
    names = ", ".join(spec.name for spec in specs)
    lines.append(f"    return [{names}], [{', '.join(leaves)}]")
    return "\n".join(lines)


def literal_of(tensor: torch.Tensor) -> Any:
    """The values of a (small) tensor as a nested list that format_scalar can print exactly."""
    data = tensor.detach()
    if data.dtype in (torch.float16, torch.bfloat16, torch.float32):
        data = data.to(torch.float64)
    return data.tolist()
