"""View and joining op builders: permute/transpose/reshape/view/flatten/(un)squeeze/expand/narrow,
slicing with steps, select, unbind/split/chunk, movedim; cat and stack."""
from __future__ import annotations

import math

from .ops_common import need, ranked
from .oppool import op


def _factor(builder, count: int) -> list[int]:
    factors, rest, prime = [], count, 2
    while rest > 1 and prime * prime <= rest:
        while rest % prime == 0:
            factors.append(prime)
            rest //= prime
        prime += 1
    if rest > 1:
        factors.append(rest)
    return factors


def shape_with_numel(builder, count: int, rank: int) -> list[int]:
    """A random shape of `rank` dims with `count` elements."""
    if rank == 0:
        return []
    if count == 0:
        shape = [builder.choice([1, 2, 3]) for _ in range(rank)]
        shape[builder.rng.randrange(rank)] = 0
        return shape
    shape = [1] * rank
    for factor in _factor(builder, count):
        shape[builder.rng.randrange(rank)] *= factor
    return shape


def slice_text(builder, shape) -> str:
    """An index expression over `shape`: slices with starts/stops/steps, integers, None, `...`."""
    parts = []
    for size in shape:
        kind = builder.weighted({"all": 4, "start": 2, "stop": 1, "range": 2, "step": 2, "int": 2, "neg": 1})
        if kind == "all":
            parts.append(":")
        elif kind == "start":
            parts.append(f"{builder.rng.randint(0, max(size - 1, 0))}:")
        elif kind == "stop":
            parts.append(f":{builder.choice([-1, max(size - 1, 0), size])}")
        elif kind == "range":
            start = builder.rng.randint(0, max(size - 1, 0))
            parts.append(f"{start}:{builder.rng.randint(start, size)}")
        elif kind == "step":
            parts.append(builder.choice(["::2", "1::2", "::3", "1::3"]))
        elif kind == "int":
            parts.append(str(builder.rng.randrange(size)) if size else "0")
        else:
            parts.append("-1")
        if len(parts) >= builder.rng.randint(1, 4):
            break
    if builder.chance(0.15):
        parts.insert(builder.rng.randrange(len(parts) + 1), "None")
    if builder.chance(0.15) and len(parts) < len(shape):
        parts.insert(0, "...")
    while parts and parts[-1] == ":" and len(parts) > 1:
        parts.pop()
    return ", ".join(parts)


@op("view", 3)
def permute(builder):
    x = need(builder.pick(ranked(2)))
    tensor = builder.tensor(x)
    rank = tensor.dim()
    form = builder.weighted({"permute": 3, "transpose": 3, "t": 1 if rank == 2 else 0, "mT": 1, "movedim": 1})
    if form == "permute":
        order = list(range(rank))
        builder.rng.shuffle(order)
        text = builder.choice([f"{x}.permute({', '.join(map(str, order))})", f"torch.permute({x}, {tuple(order)})"])
    elif form == "transpose":
        first, second = builder.rng.sample(range(rank), 2)
        text = builder.choice([f"{x}.transpose({first}, {second - rank})", f"torch.transpose({x}, {first}, {second})"])
    elif form == "t":
        text = builder.choice([f"{x}.t()", f"{x}.T"])
    elif form == "mT":
        text = f"{x}.mT"
    else:
        text = f"{x}.movedim({builder.rng.randrange(rank)}, {builder.rng.randrange(rank)})"
    return builder.emit(text, form, rounds=False, view_of=x)


@op("view", 3)
def reshape(builder):
    x = need(builder.pick())
    tensor = builder.tensor(x)
    rank = builder.rng.randint(0 if tensor.numel() == 1 else 1, 4)
    shape = shape_with_numel(builder, tensor.numel(), rank)
    if shape and tensor.numel() and builder.chance(0.3):
        shape[builder.rng.randrange(len(shape))] = -1
    method = builder.weighted({"reshape": 3, "view": 2})
    if tensor.dim() and tensor.shape[0] and builder.chance(0.15):
        text = f"{x}.{method}({x}.shape[0], -1)"
    else:
        text = f"{x}.{method}({', '.join(map(str, shape))})" if shape else f"{x}.{method}(())"
    return builder.emit(text, method, rounds=False, view_of=x)


@op("view", 2)
def flatten(builder):
    x = need(builder.pick())
    tensor = builder.tensor(x)
    if tensor.dim() >= 2 and builder.chance(0.6):
        start = builder.rng.randrange(tensor.dim() - 1)
        text = f"{x}.flatten({start}, {builder.rng.randint(start + 1, tensor.dim() - 1)})"
    else:
        text = builder.choice([f"{x}.flatten()", f"torch.flatten({x})", f"{x}.ravel()"])
    return builder.emit(text, "flatten", rounds=False, view_of=x)


@op("view", 3)
def squeeze_unsqueeze(builder):
    x = need(builder.pick())
    tensor = builder.tensor(x)
    if tensor.dim() < 4 and builder.chance(0.55):
        dim = builder.rng.randint(-tensor.dim() - 1, tensor.dim())
        return builder.emit(builder.choice([f"{x}.unsqueeze({dim})", f"torch.unsqueeze({x}, {dim})", f"{x}[None]"]),
                            "unsqueeze", rounds=False, view_of=x)
    ones = [i for i, size in enumerate(tensor.shape) if size == 1]
    if ones and builder.chance(0.6):
        text = f"{x}.squeeze({builder.choice(ones)})"
    else:
        text = f"{x}.squeeze()"
    return builder.emit(text, "squeeze", rounds=False, view_of=x)


@op("view", 2)
def expand(builder):
    x = need(builder.pick(ranked(0, 3)))
    tensor = builder.tensor(x)
    shape = [builder.choice([2, 3, 5]) if size == 1 and builder.chance(0.7) else size for size in tensor.shape]
    lead = [builder.choice([2, 3])] if builder.chance(0.4) or shape == list(tensor.shape) else []
    spelled = [str(size) if size != old or builder.chance(0.5) else "-1" for size, old in zip(shape, tensor.shape)]
    target = lead + shape
    if math.prod(target) > 20000:
        return None
    other = builder.pick(lambda t: list(t.shape) == target, exclude=(x,))
    if other is not None and builder.chance(0.3):
        return builder.emit(f"{x}.expand_as({other})", "expand", rounds=False, view_of=x)
    return builder.emit(f"{x}.expand({', '.join(map(str, lead + spelled)) or '()'})", "expand", rounds=False,
                        view_of=x)


@op("view", 4)
def slicing(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    form = builder.weighted({"slice": 5, "narrow": 2, "select": 2})
    if form == "slice":
        text = f"{x}[{slice_text(builder, tensor.shape)}]"
    elif form == "narrow":
        dim = builder.dim(tensor)
        size = tensor.shape[dim]
        start = builder.rng.randint(0, size)
        text = f"{x}.narrow({dim}, {start}, {builder.rng.randint(0, size - start)})"
    else:
        dim = builder.dim(tensor)
        size = tensor.shape[dim]
        index = builder.rng.randrange(size) if size else 0
        text = f"{x}.select({dim}, {index - size if builder.chance(0.3) else index})"
    return builder.emit(text, form, rounds=False, view_of=x)


@op("view", 2)
def split(builder):
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    dim = builder.dim(tensor)
    size = tensor.shape[dim]
    form = builder.weighted({"unbind": 2, "split": 3, "chunk": 2, "split_sizes": 1})
    if form == "unbind":
        expression = builder.choice([f"{x}.unbind({dim})", f"torch.unbind({x}, {dim})"])
    elif form == "split":
        expression = f"{x}.split({builder.rng.randint(1, max(size, 1))}, {dim})"
    elif form == "chunk":
        expression = f"{x}.chunk({builder.rng.randint(1, 4)}, {dim})"
    else:
        first = builder.rng.randint(0, size)
        expression = f"torch.split({x}, [{first}, {size - first}], dim={dim})"
    count = builder.length_of(expression)
    if count == 0:
        return None
    if 2 <= count <= 4 and builder.chance(0.6):
        return builder.emit(expression, form, count=count, rounds=False, view_of=x)
    return builder.emit(f"{expression}[{builder.rng.randrange(-count, count)}]", form, rounds=False, view_of=x)


@op("strided", 3)
def strided_view(builder):
    """diagonal (with an offset), unfold, as_strided: views whose strides (or, for as_strided,
    values) come from how the input is laid out in memory."""
    x = need(builder.pick(ranked(1)))
    tensor = builder.tensor(x)
    form = builder.weighted({"diagonal": 3 if tensor.dim() >= 2 else 0, "unfold": 3, "as_strided": 3})
    if form == "diagonal":
        first, second = builder.rng.sample(range(tensor.dim()), 2)
        offset = builder.rng.randint(-tensor.shape[first], tensor.shape[second])
        text = builder.choice([f"torch.diagonal({x}, {offset}, {first}, {second - tensor.dim()})",
                               f"{x}.diagonal(offset={offset}, dim1={first}, dim2={second})"])
    elif form == "unfold":
        dim = builder.dim(tensor)
        size = builder.rng.randint(1, max(tensor.shape[dim], 1)) if tensor.shape[dim] else 0
        text = f"{x}.unfold({dim}, {size}, {builder.rng.randint(1, 3)})"
    else:
        # inside the storage eager gave x (its layout is eager's, so the values are defined)
        total = tensor.untyped_storage().nbytes() // tensor.element_size()
        if total == 0:
            return None
        rank = builder.rng.randint(1, 3)
        sizes = [builder.choice([1, 2, 3, 4, 5]) for _ in range(rank)]
        strides = [builder.choice([0, 1, 1, 2, 3, 5]) for _ in range(rank)]
        extent = sum((n - 1) * st for n, st in zip(sizes, strides))
        if extent >= total:
            return None
        if builder.chance(0.5):
            start = builder.rng.randint(0, total - 1 - extent)
            text = f"{x}.as_strided({tuple(sizes)}, {tuple(strides)}, {start})"
        elif tensor.storage_offset() + extent < total:
            text = f"torch.as_strided({x}, {tuple(sizes)}, {tuple(strides)})"
        else:
            return None
    return builder.emit(text, form, rounds=False, view_of=x)


@op("join", 3)
def cat_stack(builder):
    x = need(builder.pick())
    tensor = builder.tensor(x)
    if builder.chance(0.5) and tensor.dim():
        dim = builder.dim(tensor)
        def fits(t):
            return t.dim() == tensor.dim() and all(a == b for i, (a, b) in enumerate(zip(t.shape, tensor.shape))
                                                   if i != dim % tensor.dim())
        others = [builder.pick(fits) or x for _ in range(builder.rng.randint(1, 2))]
        brackets = builder.choice(["[]", "()"])
        items = ", ".join([x] + others)
        return builder.emit(f"torch.cat({brackets[0]}{items}{brackets[1]}, {builder.choice([str(dim), f'dim={dim}'])})",
                            "cat", rounds=False)
    others = [builder.pick(lambda t: t.shape == tensor.shape) or x for _ in range(builder.rng.randint(1, 2))]
    dim = builder.rng.randint(-tensor.dim() - 1, tensor.dim())
    return builder.emit(f"torch.stack([{', '.join([x] + others)}], {dim})", "stack", rounds=False)
