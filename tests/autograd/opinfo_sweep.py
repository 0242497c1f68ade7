"""Running one OpInfo entry through ember's AOT autograd (shared by the test and the regenerator).

For each op: the first float32 sample; tensors among input/args/kwargs (including inside
lists) become the traced function's inputs, everything else is closed over.  Forward outputs
are compared with eager; for ops that support autograd, gradients of a fixed random
projection of the outputs are compared too.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils import _pytree as pytree

from ember.autograd import aot_function
from ember.decomp import core_decompositions

RTOL, ATOL = 1e-4, 1e-5
# float16/bfloat16 results: a rounding or two apart (ember computes in float32 and rounds once)
LOW_PRECISION_TOLERANCE = {torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}
# Ops whose outputs are uninitialized memory: only metadata is compared.
UNINITIALIZED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted", "resize_"}


def _unseeded_random_ops():
    """OpInfo wraps random ops in wrapper_set_seed(42), which seeds at trace time; the sweep seeds
    both runs itself instead (with 42), so the wrapper becomes a plain call."""
    import torch.testing._internal.common_methods_invocations as invocations

    invocations.wrapper_set_seed = lambda op, *args, **kwargs: op(*args, **kwargs)


_unseeded_random_ops()


# Where and in what dtype samples are made (the CUDA sweep of issue 10 sets "cuda" and bfloat16).
DEVICE = ["cpu"]
DTYPE = [torch.float32]


def first_sample(op, requires_grad: bool):
    if op.name.startswith("jiterator_"):
        # Its Python wrapper compiles and launches a CUDA kernel itself, outside the dispatcher:
        # traced by aot_function, the fake inputs' (null) pointers reach the GPU and the CUDA
        # context dies.  Under ember.compile the call is a graph break and runs eagerly.
        raise NotApplicable("launches its kernel outside the dispatcher")
    if DTYPE[0] not in op.supported_dtypes(DEVICE[0]):
        raise NotApplicable(f"no {DTYPE[0]} on {DEVICE[0]}")
    samples = op.sample_inputs(DEVICE[0], DTYPE[0], requires_grad=requires_grad)
    return next(iter(samples))


def _call(op, sample_input, args, kwargs):
    return op.op(sample_input, *args, **kwargs)


def _split(sample):
    structure = (sample.input, list(sample.args), dict(sample.kwargs))
    leaves, spec = pytree.tree_flatten(structure)
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    return leaves, spec, positions


def _rebuild(leaves, spec, positions, tensors):
    leaves = list(leaves)
    for position, tensor in zip(positions, tensors):
        leaves[position] = tensor
    return pytree.tree_unflatten(leaves, spec)


def _tensors(value):
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _compare(got, want, what: str, metadata_only: bool = False) -> None:
    got_leaves = pytree.tree_leaves(got)
    want_leaves = pytree.tree_leaves(want)
    if len(got_leaves) != len(want_leaves):
        raise AssertionError(f"{what}: {len(got_leaves)} outputs, eager gives {len(want_leaves)}")
    for a, b in zip(got_leaves, want_leaves):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise AssertionError(f"{what}: got {type(a).__name__}, eager gives a tensor")
            if metadata_only:
                if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device):
                    raise AssertionError(f"{what}: {a.shape} {a.dtype} vs eager {b.shape} {b.dtype}")
                continue
            exact = b.dtype.itemsize == 1 and b.dtype.is_floating_point
            rtol, atol = LOW_PRECISION_TOLERANCE.get(b.dtype, (RTOL, ATOL))
            torch.testing.assert_close(a, b, rtol=0 if exact else rtol, atol=0 if exact else atol,
                                       equal_nan=True, msg=lambda m: f"{what}: {m}")
        elif a != b and not (isinstance(a, float) and a != a and b != b):
            raise AssertionError(f"{what}: {a!r} vs eager {b!r}")


COMPILERS = {"aot_eager": None, "ember": None}  # fw/bw compiler per backend (None: run graphs as they are)
FALLBACKS: list[str] = []  # ATen fallbacks seen by the ember backend during one op


def _ember_compiler(gm, example_inputs):
    from ember.codegen.compile import CompiledGraph, ember_compiler

    compiled = ember_compiler(gm, example_inputs)
    if isinstance(compiled, CompiledGraph):
        FALLBACKS.extend(compiled.fallbacks)
    return compiled


COMPILERS["ember"] = _ember_compiler
BACKEND = ["aot_eager"]


def _aot(fn):
    compiler = COMPILERS[BACKEND[0]]
    return aot_function(fn, compiler, compiler, decompositions=core_decompositions())


def run_forward(op) -> None:
    sample = first_sample(op, requires_grad=False)
    leaves, spec, positions = _split(sample)
    tensors = [leaves[p] for p in positions]

    def fn(*inputs):
        sample_input, args, kwargs = _rebuild(leaves, spec, positions, inputs)
        return _call(op, sample_input, args, kwargs)

    torch.manual_seed(42)  # OpInfo wraps random ops in wrapper_set_seed(42)
    try:
        want = fn(*[t.clone() for t in tensors])
    except Exception as error:
        raise NotApplicable(f"eager raises {type(error).__name__}") from error
    compiled = _aot(fn)
    torch.manual_seed(42)  # OpInfo wraps random ops in wrapper_set_seed(42)
    got = compiled(*[t.clone() for t in tensors])
    _compare(got, want, "forward", metadata_only=op.name in UNINITIALIZED)


def run_backward(op) -> None:
    sample = first_sample(op, requires_grad=True)
    leaves, spec, positions = _split(sample)
    tensors = [leaves[p] for p in positions]
    differentiable = [t for t in tensors if t.requires_grad]
    if not differentiable:
        raise NotApplicable("no input requires grad")

    def fn(*inputs):
        sample_input, args, kwargs = _rebuild(leaves, spec, positions, inputs)
        return _call(op, sample_input, args, kwargs)

    def loss_and_grads(function):
        inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
        torch.manual_seed(42)  # OpInfo wraps random ops in wrapper_set_seed(42)
        out = function(*inputs)
        outs = [o for o in _tensors(out) if o.requires_grad and o.dtype.is_floating_point]
        if not outs:
            raise NotApplicable("no differentiable output")
        generator = torch.Generator().manual_seed(1)
        total = sum((o * torch.randn(o.shape, generator=generator, dtype=o.dtype).to(o.device)).sum() for o in outs)
        wrt = [i for i in inputs if i.requires_grad]
        grads = torch.autograd.grad(total, wrt, allow_unused=True)
        return out, grads

    try:
        want_out, want_grads = loss_and_grads(fn)
    except NotApplicable:
        raise
    except Exception as error:
        raise NotApplicable(f"eager raises {type(error).__name__}") from error
    compiled = _aot(fn)
    got_out, got_grads = loss_and_grads(compiled)
    _compare(got_out, want_out, "forward (grad mode)", metadata_only=op.name in UNINITIALIZED)
    for index, (got, want) in enumerate(zip(got_grads, want_grads)):
        if want is None and got is None:
            continue
        if want is None or got is None:
            if (got if got is not None else want).abs().sum() == 0:
                continue
            raise AssertionError(f"grad {index}: {'None' if got is None else 'a tensor'} vs eager")
        _compare(got, want, f"grad {index}")


class NotApplicable(Exception):
    pass


def check(op, kind: str, backend: str = "aot_eager") -> str | None:
    """None when the op passes; otherwise a one-line reason."""
    BACKEND[0] = backend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _check(op, kind)


def _check(op, kind: str) -> str | None:
    try:
        if kind == "forward":
            run_forward(op)
        else:
            if not op.supports_autograd:
                return None
            run_backward(op)
    except NotApplicable:
        return None
    except StopIteration:
        return None
    except Exception as error:  # the reason is recorded in the expected-failures list
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"{type(error).__name__}: {message}"[:160]
    return None


def outcome(op, kind: str, backend: str) -> str:
    """"pass", "n/a" (eager raises, no sample in this dtype, nothing differentiable), or the
    failure's one-line reason."""
    BACKEND[0] = backend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if kind == "forward":
                run_forward(op)
            elif not op.supports_autograd:
                return "n/a"
            else:
                run_backward(op)
        except (NotApplicable, StopIteration):
            return "n/a"
        except Exception as error:  # noqa: BLE001 - a failure is a row of the report
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            return f"{type(error).__name__}: {message}"[:160]
    return "pass"
