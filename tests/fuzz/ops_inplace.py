"""In-place op builders, on intermediates and on inputs, directly or through a view:
add_/mul_/copy_/clamp_/..., `t += r`, slice assignment `t[1:] = r`, index_put_/index_add_/scatter_.
Operands of another dtype exercise in-place type promotion (allowed when the result casts back)."""
from __future__ import annotations

from .ops_common import float_to_int_defined, need
from .ops_index import index_add_parts, index_put_parts, scatter_parts
from .ops_pointwise import portable_bound
from .ops_shape import slice_text
from .oppool import op

# name: (template over {t} and {r}, takes an operand, rounds)
METHODS = {
    "add_": ("{t}.add_({r})", True, True), "sub_": ("{t}.sub_({r})", True, True),
    "mul_": ("{t}.mul_({r})", True, True), "div_": ("{t}.div_({r})", True, True),
    "copy_": ("{t}.copy_({r})", True, False), "clamp_": ("{t}.clamp_({r})", True, False),
    "clamp_min_": ("{t}.clamp_min_({r})", True, False), "fill_": ("{t}.fill_({r})", True, False),
    "masked_fill_": ("{t}.masked_fill_({t} > 0, {r})", True, False), "zero_": ("{t}.zero_()", False, False),
    "relu_": ("{t}.relu_()", False, False), "neg_": ("{t}.neg_()", False, False),
    "abs_": ("{t}.abs_()", False, False), "exp_": ("{t}.exp_()", False, True),
    "sigmoid_": ("{t}.sigmoid_()", False, True), "pow_": ("{t}.pow_(2)", False, True),
    "iadd": ("{t} += {r}", True, True), "imul": ("{t} *= {r}", True, True), "isub": ("{t} -= {r}", True, True),
}
# These need a plain name or subscription on the left of `op=`.
AUGMENTED = {"iadd", "imul", "isub"}


def _target(builder, allow_call: bool):
    """(target expression, name of the tensor written): the value itself or a view of it."""
    name = need(builder.pick())
    tensor = builder.tensor(name)
    if tensor.dim() == 0 or builder.chance(0.6):
        return name, name
    views = ["slice", "slice", "index0"] + (["t", "view_flat"] if allow_call else [])
    kind = builder.choice(views)
    if kind == "slice":
        return f"{name}[{slice_text(builder, tensor.shape)}]", name
    if kind == "index0":
        return f"{name}[{builder.rng.randrange(tensor.shape[0]) if tensor.shape[0] else 0}]", name
    if kind == "t" and tensor.dim() == 2:
        return f"{name}.t()", name
    return f"{name}.view(-1)", name


def _shape_of(builder, expression: str):
    try:
        return tuple(eval(f"({expression}).shape", builder.namespace))
    except Exception:  # noqa: BLE001 - a view that eager refuses: skip the op
        return None


def _operand(builder, shape, target_tensor) -> str:
    """A Python scalar or a tensor broadcasting into `shape` (any dtype: promotion is the point)."""
    if builder.chance(0.4):
        return builder.scalar(target_tensor)
    other = builder.pick_broadcastable(shape, into=True)
    return other if other is not None else builder.scalar(target_tensor)


@op("inplace", 10)
def inplace_method(builder):
    name = builder.choice(METHODS)
    template, takes_operand, rounds = METHODS[name]
    target, written = _target(builder, allow_call=name not in AUGMENTED)
    shape = _shape_of(builder, target)
    if shape is None:
        return None
    target_tensor = builder.tensor(written)
    operand = _operand(builder, shape, target_tensor) if takes_operand else ""
    if name == "copy_" and operand in builder.namespace and not float_to_int_defined(
            builder.namespace[operand], target_tensor.dtype):
        return None
    if name in ("clamp_", "clamp_min_", "fill_", "masked_fill_") and operand in builder.namespace:
        operand = builder.scalar(target_tensor) if name != "clamp_" else f"min={operand}"
    if name in ("clamp_", "clamp_min_"):
        operand = portable_bound(operand)
    text = template.format(t=target, r=operand)
    return builder.emit_inplace(text, name, written, rounds=rounds)


@op("inplace", 5)
def slice_assign(builder):
    name = need(builder.pick(lambda t: t.dim() >= 1))
    tensor = builder.tensor(name)
    index = slice_text(builder, tensor.shape)
    shape = _shape_of(builder, f"{name}[{index}]")
    if shape is None:
        return None
    if builder.chance(0.4):
        value = builder.scalar(tensor)
    else:
        value = builder.pick_broadcastable(shape, into=True) or builder.new_input(shape, tensor.dtype, grad_ok=False)
        if not float_to_int_defined(builder.tensor(value), tensor.dtype):
            return None
    augmented = builder.choice(["=", "=", "=", "+="])
    return builder.emit_inplace(f"{name}[{index}] {augmented} {value}", "setitem", name)


@op("inplace", 4)
def index_inplace(builder):
    name = need(builder.pick(lambda t: t.dim() >= 1 and all(t.shape)))
    form = builder.weighted({"index_put_": 2, "setitem_index": 2, "index_add_": 2, "scatter_": 2, "scatter_add_": 2})
    if form in ("index_put_", "setitem_index"):
        index, values, accumulate = index_put_parts(builder, name)
        if form == "setitem_index" and not accumulate:
            return builder.emit_inplace(f"{name}[{index}] = {values}", "setitem_index", name, rounds=False)
        return builder.emit_inplace(f"{name}.index_put_(({index},), {values}, accumulate={accumulate})",
                                    "index_put_", name, rounds=accumulate)
    if form == "index_add_":
        dim, index, source, alpha = index_add_parts(builder, name)
        return builder.emit_inplace(f"{name}.index_add_({dim}, {index}, {source}{alpha})", "index_add_", name)
    dim, index, source = scatter_parts(builder, name, unique=form == "scatter_")
    return builder.emit_inplace(f"{name}.{form}({dim}, {index}, {source})", form, name,
                                rounds=form == "scatter_add_")

