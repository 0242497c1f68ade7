"""Would eager's kernel accept an op for these dtypes?  (Also: in-place overlap checks.)

Fake tensors check shapes but not dtypes (a softmax of int32 fakes traces; eager's kernel
raises).  The answer comes from running the op on real tensors once per signature (op, dtypes,
ranks, other arguments): one-element tensors (values 1, then with integer tensors 0), and if
those raise, tensors of the real shapes where small enough (an op may need consistent sizes).

On a GPU, integer signatures are tried on the CPU: made-up integers may index out of range, a
device-side assert that ends the CUDA context there.  Tensors on several devices are first
checked the way fake tensors check devices (eager's rule), which host tries would not see.
Only when every try raises does eager reject the op: a wrong "rejects" is safe (the op stays
one ATen call), a wrong "accepts" is not.  Random ops run with the random state restored.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

from ..sizes import expr, hint

aten = torch.ops.aten
_ACCEPTS: dict = {}
# Tensors of the real shapes are made only up to this many elements in all (a compile must not
# allocate a vocabulary-sized logits tensor to learn that eager takes float32).
_REAL_SHAPES_LIMIT = 1 << 22


def _signature(value) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, value.dim(), str(value.device))
    return value


def _is_integer(tensor: torch.Tensor) -> bool:
    return not (tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool)


def _real(value, shape_of, integer_fill, on_host: bool = False):
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        # a size argument (slice_backward's input_sizes): its value in the trace, unguarded
        hint = value.node.hint
        return value if hint is None else type(hint)(hint)
    if not isinstance(value, torch.Tensor):
        return value
    fill = integer_fill if _is_integer(value) else 1
    return torch.full(shape_of(value), fill, dtype=value.dtype, device="cpu" if on_host else value.device)


def _tried_on_host(func, tensors: list) -> bool:
    """Integer tensors on a GPU are tried on the CPU (module doc), where the op has a host kernel
    at all (cuDNN's have not: those are tried where they live)."""
    if not any(_is_integer(t) for t in tensors) or all(t.device.type == "cpu" for t in tensors):
        return False
    name = func.name() if hasattr(func, "name") else ""
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
               for key in ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd")) if name else False


@contextlib.contextmanager
def real_run(func, tensors: list, on_host: bool = False):
    """The scope an op runs in on real stand-ins for `tensors`: below every mode, without grad, and
    for a random op with the random state of the devices it draws on restored."""
    seeded = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
    cuda = [] if on_host else sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})
    with _disable_current_modes(), torch.no_grad(), torch.random.fork_rng(devices=cuda, enabled=seeded):
        yield


def _tiny_shape(tensor: torch.Tensor) -> list[int]:
    return [1] * tensor.dim()


def _static_shape(tensor: torch.Tensor) -> list[int] | None:
    """The tensor's sizes: symbolic ones at the trace's values (their hints, read without a
    guard); None for a data-dependent size (no real tensor to make)."""
    sizes = [hint(size) for size in tensor.shape]
    return None if None in sizes else sizes


def eager_accepts(func, args: tuple, kwargs: dict) -> bool:
    """Does eager run `func` on tensors with the dtypes of `args`/`kwargs` (fakes or real)?"""
    try:
        key = (func, repr(pytree.tree_map(_signature, (args, kwargs))))
    except Exception:
        return True
    cached = _ACCEPTS.get(key)
    if cached is not None:
        return cached
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if len({t.device for t in tensors}) > 1 and not _devices_accepted(func, args, kwargs):
        _ACCEPTS[key] = False
        return False
    fills = (1, 0) if any(_is_integer(t) for t in tensors) else (1,)
    on_host = _tried_on_host(func, tensors)
    attempts = [(_tiny_shape, fill) for fill in fills]
    shapes = [_static_shape(t) for t in tensors]
    if all(shape is not None for shape in shapes) and sum(math.prod(shape) for shape in shapes) <= _REAL_SHAPES_LIMIT:
        attempts += [(_static_shape, fill) for fill in fills]
    with real_run(func, tensors, on_host):
        accepted = any(_runs_on(func, args, kwargs, shape_of, fill, on_host) for shape_of, fill in attempts)
    if not accepted and len(attempts) == len(fills):
        return True  # could not try the real shapes: assume eager runs it (not remembered: a
        # later call with real shapes must still try them)
    _ACCEPTS[key] = accepted
    return accepted


def _runs_on(func, args: tuple, kwargs: dict, shape_of, integer_fill, on_host: bool) -> bool:
    """Does `func` run on real tensors of `shape_of` each fake (integers filled with `integer_fill`)?"""
    try:
        real_args, real_kwargs = pytree.tree_map(lambda v: _real(v, shape_of, integer_fill, on_host), (args, kwargs))
        if on_host:
            real_kwargs = {k: ("cpu" if k == "device" and v is not None else v) for k, v in real_kwargs.items()}
        func(*real_args, **real_kwargs)
    except Exception:  # noqa: BLE001 - any refusal counts; the next try may still run
        return False
    return True


def _devices_accepted(func, args: tuple, kwargs: dict) -> bool:
    """Does eager take this mix of devices?  Asked of fake tensors of the same ranks (only a
    device mismatch counts as no: sizes made up here may not fit the op)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=False)
    with _disable_current_modes():
        with mode:
            fakes = pytree.tree_map(lambda v: _real(v, _tiny_shape, 1), (args, kwargs))
            try:
                func(*fakes[0], **fakes[1])
            except Exception as error:  # noqa: BLE001 - any other complaint is about the made-up sizes
                return not _device_mismatch(error)
    return True


def _device_mismatch(error: Exception) -> bool:
    """Fake tensors' device complaint: FakeTensorDeviceMismatchError (torch 2.13: "found at
    least two devices"), a RuntimeError before it (2.11: "found two different devices")."""
    mismatch = getattr(torch._subclasses.fake_tensor, "FakeTensorDeviceMismatchError", ())
    return isinstance(error, mismatch) or any(words in str(error) for words in ("found two different devices",
                                                                                 "found at least two devices"))


def node_eager_accepts(node: torch.fx.Node) -> bool:
    """eager_accepts for a graph node, from its arguments' recorded values."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return True

    args, kwargs = pytree.tree_map(lambda arg: arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg,
                                   (tuple(node.args), dict(node.kwargs)))
    return eager_accepts(node.target, args, kwargs)


# Reductions whose kernels also refuse some dtypes (argmin of bool); pointwise ops carry a tag.
_DTYPE_CHECKED = {aten.argmax.default, aten.argmin.default, aten.sum.dim_IntList, aten.sum.default,
                  aten.prod.default, aten.prod.dim_int, aten.amax.default, aten.amin.default, aten.mean.dim,
                  aten.mean.default, aten.cumsum.default,
                  # a scalar that the dtype cannot hold (int16 from 2**31) raises in eager
                  aten.scalar_tensor.default, aten.full.default, aten.full_like.default, aten.new_full.default,
                  aten.fill.Scalar, aten.masked_fill.Scalar}
_REJECTS: dict = {}


def _size_hint(value):
    """A SymInt at its value in the example inputs (2 where it has none), without a guard."""
    if isinstance(value, torch.SymInt):
        return int(value.node.hint) if value.node.hint is not None else 2
    return value


def eager_rejects_dtypes(node: torch.fx.Node) -> bool:
    """Would eager's kernel refuse this op's dtypes (bitwise ops on floats, negation of bools,
    abs of bools, ...)?  Answered by running it on one-element tensors of the same dtypes and
    ranks (values 1: no division by zero), once per signature.  Lowering asks it of each node it
    has a rule for: a rejected one stays an ATen call, which raises as eager does."""
    target = node.target
    if not (torch.Tag.pointwise in getattr(target, "tags", ()) or target in _DTYPE_CHECKED):
        return False

    def per_arg(of_tensor):
        """An argument as `of_tensor` of its node's fake tensor, else as its value (SymInts at hints)."""
        def convert(value):
            fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else value
            return of_tensor(fake) if isinstance(value, torch.fx.Node) and isinstance(fake, torch.Tensor) \
                else _size_hint(fake)

        return convert

    signature = per_arg(lambda fake: (fake.dtype, fake.dim(), fake.device.type))  # (the key)
    tiny = per_arg(lambda fake: torch.ones([1] * fake.dim(), dtype=fake.dtype, device=fake.device))

    args = node.args
    if target is aten.full.default:
        args = ([1] * len(args[0]),) + tuple(args[1:])
    try:
        key = (target, repr(pytree.tree_map(signature, (args, dict(node.kwargs)))))
    except Exception:
        return False
    if key not in _REJECTS:
        # (tensors made only for a new signature: for every check they cost ViT-B 0.5 s of cold start)
        try:
            tiny_args, tiny_kwargs = pytree.tree_map(tiny, args), pytree.tree_map(tiny, dict(node.kwargs))
        except Exception:
            return False
        try:
            target(*tiny_args, **tiny_kwargs)
            _REJECTS[key] = False
        except Exception:
            _REJECTS[key] = True
    return _REJECTS[key]


_OVERLAP_WORDS = "refer to a single memory location"


def overlaps_itself(tensor: torch.Tensor) -> bool:
    """Do elements of the tensor share memory (a stride 0 over a dim of more than one)?"""
    return any(stride == 0 and size > 1 for size, stride in zip(tensor.shape, tensor.stride()))


def elements_share_memory(tensor: torch.Tensor) -> bool:
    """Do two of the tensor's elements sit at one place (any overlapping geometry, as
    as_strided((3, 4, 2), (3, 2, 3)) makes)?  Symbolic geometries: not known, so False."""
    dims = [(size, stride) for size, stride in zip(tensor.shape, tensor.stride()) if size != 1]
    if any(not isinstance(n, int) for pair in dims for n in pair) or any(size == 0 for size, _ in dims):
        return False
    if any(stride == 0 for _, stride in dims):
        return True
    reach = 0
    for size, stride in sorted(dims, key=lambda pair: abs(pair[1])):
        if abs(stride) <= reach:
            break
        reach += (size - 1) * abs(stride)
    else:
        return False  # each stride steps past everything the smaller ones reach: distinct
    if math.prod(size for size, _ in dims) > 1 << 16:
        return True  # (too many to enumerate: assume they may)
    with _disable_current_modes():  # (real integers: under the tracer's fakes unique() has no size)
        positions = torch.zeros((), dtype=torch.int64)
        for size, stride in dims:
            positions = (positions.unsqueeze(-1) + torch.arange(size) * stride).flatten()
        return positions.unique().numel() != positions.numel()


def eager_overlap_error(func, args: tuple, kwargs: dict, written: list) -> str | None:
    """Why an in-place op that reads memory it writes cannot be traced, or None.

    Eager refuses some such writes (`x[1:].add_(x[:-1])`, a write into an expanded tensor), which
    fakes do not check; others it runs with a result that depends on the order of its reads and
    writes, which a functional graph does not reproduce.  When a written tensor shares a storage
    with another argument or overlaps itself, the op runs once on real tensors laid out the same
    way: eager's refusal comes back, or the order dependence where written elements are read (but
    for an elementwise op reading the very view it writes, `x.add_(x)`)."""
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    storages = {id(t): storage_key(t) for t in tensors}
    written_keys = {storages[id(t)] for t in written}
    shared = sum(storages[id(t)] in written_keys for t in tensors) > len(written)
    if not shared and not any(overlaps_itself(t) for t in written):
        return None
    pointwise = torch.Tag.pointwise in getattr(func, "tags", ()) or func is aten.copy_.default
    if pointwise and not any(overlaps_itself(t) for t in written) and all(
            other is target or storages[id(other)] != storages[id(target)] or _same_view_without_guards(other, target)
            for target in written for other in tensors):
        return None  # each element is read where it is written (`v[:3] *= 2` at symbolic sizes too)
    if any(t._has_symbolic_sizes_strides for t in tensors):
        # (no real tensors to try at symbolic sizes: the trace fails, and a graph captured with
        # dynamic sizes compiles this call per shape, where eager's check runs)
        return "a write into memory the op also reads, with symbolic sizes"
    real_storages: dict = {}
    real: dict = {}
    host = _tried_on_host(func, tensors)  # (made-up integers on a GPU could index out of range)
    with _disable_current_modes(), torch.no_grad():
        try:
            for tensor in tensors:
                key = storages[id(tensor)]
                nbytes = tensor.untyped_storage().nbytes()
                if nbytes > 4 * _REAL_SHAPES_LIMIT:
                    return None
                if key not in real_storages:
                    real_storages[key] = torch.zeros(nbytes, dtype=torch.uint8,
                                                     device="cpu" if host else tensor.device).untyped_storage()
                real[id(tensor)] = torch.empty(0, dtype=tensor.dtype, device="cpu" if host else tensor.device).set_(
                    real_storages[key], tensor.storage_offset(), tensor.shape, tensor.stride())
            real_args, real_kwargs = pytree.tree_map(
                lambda v: real[id(v)] if isinstance(v, torch.Tensor) else v, (args, kwargs))
        except Exception:  # noqa: BLE001 - no real stand-ins: no check
            return None
        try:
            func(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001
            message = str(error)
            return message.splitlines()[0] if _OVERLAP_WORDS in message else None
        # Eager accepted: where a written tensor overlaps memory the op also reads, other than as
        # the same view of an elementwise op (copy_ counts as one), the result depends on the order
        # (`b[::2].index_add_(0, i, b)` reads b's elements after writing some).
        for target in written:
            for other in tensors:
                if other is target or storages[id(other)] != storages[id(target)]:
                    continue
                if pointwise and _same_view_without_guards(other, target):
                    continue
                if _overlap(real[id(target)], real[id(other)]):
                    return "it reads memory it writes in place (eager's result depends on the order)"
    return None


def _same_view_without_guards(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same sizes, strides and offset, as expressions (symbolic ones are not evaluated)."""
    def same(x, y):
        return len(x) == len(y) and all(str(expr(p)) == str(expr(q)) for p, q in zip(x, y))

    return same(a.shape, b.shape) and same(a.stride(), b.stride()) and \
        str(expr(a.storage_offset())) == str(expr(b.storage_offset()))


def _overlap(written: torch.Tensor, read: torch.Tensor) -> bool:
    """Do two real views of one storage share an element?  (Marks one, looks through the other.)"""
    read.zero_()
    written.fill_(1)
    return bool((read != 0).any())


def storage_key(tensor: torch.Tensor) -> int:
    """One key per storage (fakes of one base share it); a tensor without storage: its id."""
    try:
        return tensor.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - no storage
        return id(tensor)
