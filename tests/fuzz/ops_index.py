"""Indexing op builders: gather, index_select, x[idx] (tensors, lists, masks), embedding,
index_put, index_add, scatter, scatter_add, scatter_reduce (out of place; in-place ones are in
ops_inplace.py). Index tensors are program inputs (int64, seeded), rarely with an out-of-range
entry (mode.oob_index_prob) so that eager raises and ember must raise too."""
from __future__ import annotations

import torch

from .ops_common import is_bool, is_float, need, ranked
from .oppool import op


@op("index", 3)
def gather(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    size = tensor.shape[dim]
    if size == 0:
        return None
    shape = [builder.rng.randint(1, max(s, 1)) if i != dim % tensor.dim() else builder.rng.randint(1, size + 2)
             for i, s in enumerate(tensor.shape)]
    index = builder.index_input(shape, size)
    text = builder.choice([f"torch.gather({x}, {dim}, {index})", f"{x}.gather({dim}, {index})",
                           f"torch.take_along_dim({x}, {index}, dim={dim})"])
    return builder.emit(text, "gather", rounds=False)


@op("index", 3)
def index_select(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    size = tensor.shape[dim]
    if size == 0:
        return None
    length = builder.rng.randint(1, size + 2)
    if builder.chance(0.4):
        entries = [builder.rng.randrange(size) for _ in range(length)]
        if builder.chance(builder.mode.oob_index_prob):
            entries[-1] = size
            builder.intentional_error = True
        return builder.emit(f"{x}.index_select({dim}, torch.tensor({entries}))", "index_select", rounds=False)
    index = builder.index_input((length,), size)
    return builder.emit(f"torch.index_select({x}, {dim}, {index})", "index_select", rounds=False)


@op("index", 4)
def advanced_index(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    size = tensor.shape[0]
    form = builder.weighted({"tensor": 3, "list": 2, "second_dim": 2, "two": 1, "mask": 2})
    if form == "mask":
        mask = builder.pick(lambda t: is_bool(t) and 1 <= t.dim() <= tensor.dim()
                            and tuple(t.shape) == tuple(tensor.shape[:t.dim()]))
        mask = mask or f"{x} > 0"
        return builder.emit(f"{x}[{mask}]", "mask_index", rounds=False)
    if size == 0:
        return None
    if form == "list":
        entries = [builder.rng.randrange(-size, size) for _ in range(builder.rng.randint(1, 4))]
        if builder.chance(builder.mode.oob_index_prob):
            entries[0] = size
            builder.intentional_error = True
        return builder.emit(f"{x}[{entries}]", "index", rounds=False)
    index_shape = tuple(builder.rng.randint(1, 4) for _ in range(builder.rng.randint(1, 2)))
    if form == "second_dim" and tensor.dim() >= 2 and tensor.shape[1]:
        index = builder.index_input(index_shape, tensor.shape[1], negative_ok=True)
        return builder.emit(f"{x}[:, {index}]", "index", rounds=False)
    index = builder.index_input(index_shape, size, negative_ok=True)
    if form == "two" and tensor.dim() >= 2 and tensor.shape[1]:
        other = builder.index_input(index_shape[-1:], tensor.shape[1], negative_ok=True)
        return builder.emit(f"{x}[{index}, {other}]", "index", rounds=False)
    return builder.emit(f"{x}[{index}]", "index", rounds=False)


@op("index", 2)
def embedding(builder):
    weight = builder.pick(lambda t: t.dim() == 2 and is_float(t) and t.shape[0] > 0)
    if weight is None or builder.chance(0.3):
        dtype = builder.weighted({torch.float32: 5, torch.float16: 1, torch.float64: 1})
        weight = builder.new_input((builder.choice([3, 5, 10, 31]), builder.choice([1, 4, 7, 16])), dtype)
    rows = builder.tensor(weight).shape[0]
    index_shape = tuple(builder.rng.randint(1, 5) for _ in range(builder.rng.randint(1, 2)))
    index = builder.index_input(index_shape, rows)
    padding = f", padding_idx={builder.rng.randrange(rows)}" if builder.chance(0.2) else ""
    return builder.emit(f"F.embedding({index}, {weight}{padding})", "embedding", rounds=False)


def _values_for(builder, shape, dtype) -> str:
    """A tensor of exactly this shape and dtype: a value at hand, or a new input."""
    found = builder.pick(lambda t: tuple(t.shape) == tuple(shape) and t.dtype == dtype)
    if found is not None and builder.chance(0.6):
        return found
    return builder.new_input(tuple(shape), dtype)


def index_put_parts(builder, x: str):
    """(index name, values source, accumulate) for x.index_put((index,), values, accumulate)."""
    tensor = builder.tensor(x)
    size = tensor.shape[0]
    accumulate = builder.chance(0.4)
    length = builder.rng.randint(1, size if not accumulate else size + 3)
    if accumulate:
        index = builder.index_input((length,), size)
    else:
        index = builder.index_input((length,), size, unique_dim=0)   # one write per place
    if builder.chance(0.3):
        values = f"torch.tensor({builder.scalar(tensor)}, dtype={tensor.dtype})"
    else:
        values = _values_for(builder, (length,) + tuple(tensor.shape[1:]), tensor.dtype)
    return index, values, accumulate


@op("scatter", 3)
def index_put(builder):
    x = need(builder.pick(lambda t: t.dim() >= 1 and t.shape[0] > 0))
    index, values, accumulate = index_put_parts(builder, x)
    return builder.emit(f"{x}.index_put(({index},), {values}, accumulate={accumulate})", "index_put",
                        rounds=accumulate)


def index_add_parts(builder, x: str):
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    size = tensor.shape[dim]
    length = builder.rng.randint(1, size + 2)
    index = builder.index_input((length,), size)
    shape = list(tensor.shape)
    shape[dim] = length
    source = _values_for(builder, shape, tensor.dtype)
    alpha = builder.choice(["", "", ", alpha=2", ", alpha=-1"])
    return dim, index, source, alpha


@op("scatter", 2)
def index_add(builder):
    x = need(builder.pick(lambda t: t.dim() >= 1 and all(t.shape)))
    dim, index, source, alpha = index_add_parts(builder, x)
    return builder.emit(f"{x}.index_add({dim}, {index}, {source}{alpha})", "index_add")


def scatter_parts(builder, x: str, unique: bool):
    """(dim, index name, source or scalar) for x.scatter*(dim, index, source)."""
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    dim_positive = dim % tensor.dim()
    size = tensor.shape[dim]
    shape = [builder.rng.randint(1, s) for s in tensor.shape]
    if not unique:
        shape[dim_positive] = builder.rng.randint(1, size + 2)
    index = builder.index_input(shape, size, unique_dim=dim_positive if unique else None)
    if unique and builder.chance(0.3):
        return dim, index, builder.scalar(tensor)
    source_shape = [s + (1 if builder.chance(0.2) else 0) for s in shape]
    return dim, index, _values_for(builder, source_shape, tensor.dtype)


@op("scatter", 3)
def scatter(builder):
    x = need(builder.pick(lambda t: t.dim() >= 1 and all(t.shape)))
    form = builder.weighted({"scatter": 3, "scatter_add": 3, "scatter_reduce": 2})
    dim, index, source = scatter_parts(builder, x, unique=form == "scatter")
    if form == "scatter":
        return builder.emit(f"{x}.scatter({dim}, {index}, {source})", "scatter", rounds=False)
    if form == "scatter_add" or not source.isidentifier():
        return builder.emit(f"{x}.scatter_add({dim}, {index}, {source})", "scatter_add")
    reduce = builder.choice(["sum", "prod", "mean", "amax", "amin"])
    include_self = builder.choice(["True", "False"])
    return builder.emit(f"{x}.scatter_reduce({dim}, {index}, {source}, {reduce!r}, include_self={include_self})",
                        f"scatter_reduce_{reduce}")

