"""Drawing a program's inputs: shapes (related so broadcasting ops apply), dtypes, layouts, values."""
from __future__ import annotations

import math

import torch

from . import modes as modes_module
from .inputs import FLOAT_DTYPES, INT_DTYPES, InputSpec, special_values

MAX_INPUT_NUMEL = 4096
FLOAT_SCALES = {1.0: 70, 3.0: 10, 0.01: 5, 100.0: 10, 1000.0: 5}
LOWP_SCALES = {1.0: 40, 10.0: 15, 100.0: 20, 300.0: 15, 1000.0: 10}


def draw_size(builder) -> int:
    mode = builder.mode
    if builder.chance(mode.zero_size_prob):
        return 0
    if builder.chance(mode.rare_size_prob):
        return builder.choice(mode.rare_sizes)
    return builder.rng.choices(mode.sizes, weights=mode.size_weights)[0]


def draw_shape(builder, rank: int | None = None) -> tuple[int, ...]:
    if rank is None:
        rank = builder.rng.choices(range(5), weights=builder.mode.rank_weights)[0]
    for _ in range(20):
        shape = tuple(draw_size(builder) for _ in range(rank))
        if math.prod(shape) <= MAX_INPUT_NUMEL:
            return shape
    return tuple(min(size, 3) for size in shape)


def related_shape(builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: equal, a suffix, or with some sizes set to 1."""
    kind = builder.weighted({"same": 5, "suffix": 2, "ones": 2, "prefix_one": 1, "free": 2})
    if kind == "same" or not shape:
        return shape if kind != "free" else draw_shape(builder)
    if kind == "suffix":
        return shape[builder.rng.randrange(len(shape) + 1):]
    if kind == "ones":
        return tuple(1 if builder.chance(0.4) else size for size in shape)
    if kind == "prefix_one":
        return (1,) + shape if len(shape) < 4 else shape
    return draw_shape(builder)


def _draw_layout(builder, shape, spec: InputSpec, layout: str | None) -> None:
    rank = len(shape)
    weights = modes_module.layout_weights(builder.mode)
    if layout is None:
        layout = builder.weighted(weights)
    if rank == 0 or (layout == "permuted" and rank < 2):
        return
    if layout == "permuted":
        permutation = list(range(rank))
        while permutation == list(range(rank)):
            builder.rng.shuffle(permutation)
        spec.layout, spec.layout_arg = "permuted", tuple(permutation)
    elif layout == "strided":
        spec.layout, spec.layout_arg = "strided", (builder.rng.randrange(rank), builder.chance(0.3))
    elif layout == "offset":
        dim = 0 if builder.chance(0.7) else builder.rng.randrange(rank)
        spec.layout, spec.layout_arg = "offset", (dim, builder.choice([1, 1, 2]))
    elif layout == "expanded":
        dims = tuple(i for i, size in enumerate(shape) if size != 1 and builder.chance(0.5))
        lead = builder.rng.randrange(rank) if builder.chance(0.3) else 0
        dims = tuple(i for i in dims if i >= lead)
        if not dims and not lead:
            return
        spec.layout, spec.layout_arg = "expanded", (lead, dims)
    if spec.numel() > 4 * MAX_INPUT_NUMEL:
        spec.layout, spec.layout_arg = "contiguous", ()


def _draw_values(builder, spec: InputSpec) -> None:
    mode = builder.mode
    dtype = spec.dtype
    if dtype in FLOAT_DTYPES:
        spec.values = builder.weighted({"normal": 75, "integral": 12, "positive": 8})
        scales = LOWP_SCALES if mode.name == "lowp" and dtype in (torch.float16, torch.bfloat16) else FLOAT_SCALES
        if spec.values != "integral":
            spec.scale = builder.weighted(scales)
    elif dtype in INT_DTYPES:
        spec.values = "wide" if builder.chance(mode.wide_int_prob) else builder.weighted({"normal": 8, "positive": 2})
    numel = spec.numel()
    if numel and dtype != torch.bool and builder.chance(mode.special_prob):
        table = special_values(dtype)
        count = min(numel, builder.rng.randint(1, 3))
        positions = sorted(builder.rng.sample(range(numel), count))
        spec.special = tuple((position, table[builder.choice(table)]) for position in positions)


def draw_input_spec(builder, shape, dtype, *, grad_ok: bool = True, layout: str | None = None) -> InputSpec:
    spec = InputSpec(name=builder.input_name(), shape=tuple(shape), dtype=dtype, seed=builder.input_seed())
    _draw_layout(builder, tuple(shape), spec, layout)
    _draw_values(builder, spec)
    if grad_ok and dtype in FLOAT_DTYPES and builder.chance(builder.mode.grad_prob):
        spec.grad = "nonleaf" if builder.chance(builder.mode.nonleaf_prob) else "leaf"
    return spec


def draw_dtype(builder) -> torch.dtype:
    return builder.weighted(modes_module.dtype_weights(builder.mode))


def draw_program_inputs(builder) -> None:
    low, high = builder.mode.n_inputs
    count = builder.rng.randint(low, high)
    first_shape = draw_shape(builder)
    first_dtype = draw_dtype(builder)
    for index in range(count):
        if index == 0:
            shape, dtype = first_shape, first_dtype
        else:
            shape = related_shape(builder, first_shape) if builder.chance(0.75) else draw_shape(builder)
            dtype = first_dtype if builder.chance(0.5) else draw_dtype(builder)
        builder.add_input(draw_input_spec(builder, shape, dtype))
