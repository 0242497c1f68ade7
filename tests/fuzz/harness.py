"""Running one fuzz program eagerly, through ember (twice) and in float64, and classifying it.

Classes:
  ok           ember agrees with eager on everything checked
  wrong        ember returned something else (the first differing check names what)
  crash        ember raised where eager did not (exception type and first line recorded)
  eager_error  eager raised and so did ember (whether the exception types match is recorded)
  eager_wrong  eager's own kernel is wrong where ember is right: eager agrees with ember once that
               kernel gets inputs it handles (a known torch bug, named in the detail)
  flaky_eager  two eager runs disagree (the program is nondeterministic: not ember's fault)
  ill_conditioned  values differ, in a program with a sum that is mostly rounding error
               (conditioning.py: any order of additions is as right as eager's)

Checked, in order: output count, each output's shape, dtype, requires_grad, NaN positions and
values; each input after the call (dtype, shape, values: in-place mutation); which outputs share
storage with inputs or each other; gradients of every input that requires grad, after a backward
with a seeded random grad_output per float output. The second call of the compiled function (on
fresh inputs, same cache entry) is checked the same way, to catch stale or uninitialised memory.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
import traceback
import warnings

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .compare import Mismatch, compare_tensor
from .conditioning import ConditionWatch
from .program import Program
from .resize import GROWTH, grown

VERSION_COUNTER_ERROR = "modified by an inplace operation"
# Eager autograd's refusals of a write through a view that a functionalized graph does not have
# (torch.compile does not raise them either): a backward that runs instead is no error.
EAGER_ONLY_BACKWARD_ERRORS = (VERSION_COUNTER_ERROR,
                              "its base or another view of its base has been modified inplace")
# Eager's own internal errors (no contract a compiler must keep): torch 2.11's CUDA batch_norm
# backward with a weight but no bias, or a bias but no weight, fails "tensor does not have a device"
# (fuzz conv and stats on an H200).
# The same backward on CUDA with running statistics but no weight returns a gradient of shape [0]
# that autograd rejects ("returned an invalid gradient at index 2").
# Eager's autograd refusing, in the forward, a write into an output of an op returning several
# views (unbind, split) while grad is recorded, even a write of no element (fuzz inplace 12605):
# a safety rule of its view tracking, which a functionalized graph (torch.compile's too) has not.
EAGER_ONLY_FORWARD_ERRORS = ("This view is the output of a function that returns multiple views",)
EAGER_INTERNAL_ERRORS = ("tensor does not have a device", "NativeBatchNormBackward0 returned an invalid gradient")
CLASSES = ("ok", "wrong", "crash", "eager_error", "eager_wrong", "flaky_eager", "ill_conditioned", "timeout",
           "worker_died")


@dataclasses.dataclass
class Execution:
    error: BaseException | None = None
    error_stage: str | None = None       # forward | backward
    error_trace: str = ""
    outputs: list = dataclasses.field(default_factory=list)
    output_grad_flags: list = dataclasses.field(default_factory=list)
    inputs_after: list = dataclasses.field(default_factory=list)
    aliases: list = dataclasses.field(default_factory=list)
    grads: list = dataclasses.field(default_factory=list)
    ill_conditioned: bool = False        # (reference run) a sum that is mostly rounding error
    racy: bool = False                   # eager's GPU kernels wrote one place from several threads


@dataclasses.dataclass
class Outcome:
    seed: int
    mode: str
    backend: str
    cls: str
    check: str | None = None
    where: str | None = None
    detail: str = ""
    exception: str | None = None         # "TypeName: first line"
    type_match: bool | None = None
    ops: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    trace: str = ""

    def signature(self) -> str:
        if self.cls == "crash":
            return f"crash | {normalize_message(self.exception or '')}"
        if self.cls == "wrong":
            return f"wrong | {self.check}"
        return self.cls


def normalize_message(message: str) -> str:
    """An exception line with its numbers, names of values and paths blurred, for grouping."""
    message = re.sub(r"/\S+", "<path>", message)
    message = re.sub(r"\b[vi]\d+\b", "<v>", message)
    message = re.sub(r"0x[0-9a-f]+", "<addr>", message)
    message = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", message)
    return message[:160]


def first_line(error: BaseException) -> str:
    """'Type: first line' of an exception, and the first compiler error where it quotes one."""
    text = str(error).strip().splitlines()
    line = f"{type(error).__name__}: {text[0] if text else ''}"
    compiler_errors = [item.split(" error: ", 1)[1] for item in text if " error: " in item]
    if compiler_errors:
        line = f"{type(error).__name__}: g++ error: {compiler_errors[0]}"
    return line[:300]


# ---- running ---------------------------------------------------------------------------------

def load(program: Program) -> dict:
    namespace = {"__name__": f"fuzz_program_{program.seed}"}
    exec(compile(program.source(), f"<fuzz {program.mode} {program.seed}>", "exec"), namespace)
    return namespace


def reference_inputs(inputs: list, leaves: list) -> tuple[list, list]:
    """The same inputs with every floating tensor as float64 (grad leaves kept leaves)."""
    new_inputs, new_leaves = [], []
    for tensor, leaf in zip(inputs, leaves):
        if not tensor.dtype.is_floating_point:
            new_inputs.append(tensor.clone())
            new_leaves.append(None)
            continue
        if leaf is None:
            new_inputs.append(tensor.detach().to(torch.float64))
            new_leaves.append(None)
        elif leaf is tensor:
            new_leaf = tensor.detach().to(torch.float64).requires_grad_()
            new_inputs.append(new_leaf)
            new_leaves.append(new_leaf)
        else:
            new_leaf = leaf.detach().to(torch.float64).requires_grad_()
            new_inputs.append(new_leaf.clone())
            new_leaves.append(new_leaf)
    return new_inputs, new_leaves


_LOWER_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


class RoundedCasts(TorchDispatchMode):
    """The float64 reference run: arithmetic stays in float64 after an explicit conversion too.

    The reference's inputs are float64, so an op on what eager holds as a float16 input runs in
    float64 there.  A conversion inside the program (`x.half()`, `.to(torch.float32)`,
    `F.softmax(x, dtype=torch.float32)`, `ones_like(x, dtype=torch.bfloat16)`) made the rest of
    the reference low precision again, with eager's own rounding: a float16 layer_norm of a
    constant row is eager's float32 rounding residue (127 * 31.622776 + -4016.0923 with an FMA
    = 2.86e-05, times the weight), not 0, so the reference agreed with eager's noise and ember's
    exact 0 was called wrong; or it mixed dtypes where eager's did not (a float32 `.float()`
    value index_put with a float64 input value) and the reference was lost.  Here such an op
    runs with float64 in place of the dtype it names and its result is rounded to that dtype
    (overflowing as eager's does) but kept in float64.  View ops (`view(dtype)` reinterprets
    bits) and in-place ops run as they are.  So does a constant the program makes
    (`torch.tensor(100.0, dtype=torch.float32)`, index_put's values): float64 holding the
    value its dtype holds (index_put of float32 values into a float64 input raised, and the
    reference was lost), and so does a float the program computes from integers or bools alone
    (promoted to the default dtype)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.lift_fresh.default:
            result = func(*args, **kwargs)
            return result.to(torch.float64) if result.dtype in _LOWER_FLOATS else result
        leaves = pytree.tree_leaves((args, kwargs))
        named = [v for v in leaves if isinstance(v, torch.dtype) and v in _LOWER_FLOATS]
        if func.is_view or func._schema.is_mutable:
            return func(*args, **kwargs)
        if not named:
            result = func(*args, **kwargs)
            if any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in leaves):
                return result
            # Floats made from integers and bools in the default dtype (`torch.div(bool_tensor,
            # 1e-3, rounding_mode='trunc')`): the values eager's float32 holds, kept in float64, as
            # for constants (lowp 16953: a float32 one met float64 weights in a layer_norm, which
            # raised, and the reference was lost)
            return pytree.tree_map_only(
                torch.Tensor, lambda t: t.to(torch.float64) if t.dtype in _LOWER_FLOATS else t, result)
        requested = named[0]

        def wide(value):
            return torch.float64 if isinstance(value, torch.dtype) and value in _LOWER_FLOATS else value

        args, kwargs = pytree.tree_map(wide, (args, kwargs))
        result = func(*args, **kwargs)
        return pytree.tree_map_only(
            torch.Tensor, lambda t: t.to(requested).to(torch.float64) if t.dtype == torch.float64 else t, result)


def _storage(tensor: torch.Tensor):
    try:
        if tensor.numel() == 0:
            return None
        return tensor.untyped_storage().data_ptr() or None
    except Exception:  # noqa: BLE001 - tensors without storage (none expected)
        return None


def grad_outputs(seed: int, outputs: list, dtypes: list) -> list:
    """A seeded random grad_output per output (None where the output takes no gradient)."""
    result = []
    for index, (output, dtype) in enumerate(zip(outputs, dtypes)):
        if not (isinstance(output, torch.Tensor) and output.requires_grad and output.dtype.is_floating_point):
            result.append(None)
            continue
        generator = torch.Generator().manual_seed(seed * 31 + index)
        grad = torch.randn(tuple(output.shape), generator=generator).to(dtype or output.dtype)
        result.append(grad.to(output.dtype).to(output.device))
    return result


def execute(function, namespace: dict, seed: int, *, reference: bool = False, grad_dtypes: list | None = None,
            watch_conditioning: bool = False, resized: int = 0, backward_context=None) -> Execution:
    """One run of `function` on the program's inputs (`resized`: every size of 2 or more grown
    by that much, resize.py; `backward_context`: what the backward runs under, e.g. compiled
    autograd)."""
    run = Execution()
    torch.manual_seed(seed)
    inputs, leaves = namespace["make_inputs"]()
    if resized:
        inputs, leaves = grown(inputs, leaves, resized)
    if reference:
        inputs, leaves = reference_inputs(inputs, leaves)
    # The ill-conditioning watch (conditioning.py) sees the forward and the backward; it runs in
    # the eager run too, since the reference run may stop early.
    watch = ConditionWatch() if reference or watch_conditioning else None
    try:
        if reference:
            with RoundedCasts(), watch:
                result = function(*inputs)
        elif watch is not None:
            with watch:
                result = function(*inputs)
        else:
            result = function(*inputs)
    except Exception as error:  # noqa: BLE001 - any exception is a result to compare
        run.error, run.error_stage, run.error_trace = error, "forward", traceback.format_exc(limit=-8)
        return run
    run.ill_conditioned = watch is not None and watch.ill_conditioned
    run.racy = watch is not None and watch.racy
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    run.outputs = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outputs]
    run.output_grad_flags = [bool(getattr(o, "requires_grad", False)) for o in outputs]
    run.inputs_after = [x.detach().clone() for x in inputs]
    input_storages = [_storage(x) for x in inputs]
    output_storages = [_storage(o) if isinstance(o, torch.Tensor) else None for o in outputs]
    for index, storage in enumerate(output_storages):
        shares_inputs = tuple(i for i, s in enumerate(input_storages) if storage is not None and s == storage)
        shares_outputs = tuple(j for j, s in enumerate(output_storages)
                               if j != index and storage is not None and s == storage)
        run.aliases.append((shares_inputs, shares_outputs))
    if any(leaf is not None for leaf in leaves):
        dtypes = grad_dtypes or [getattr(o, "dtype", None) for o in outputs]
        grads = grad_outputs(seed, outputs, dtypes)
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None]
        try:
            if pairs:
                with watch if watch is not None else contextlib.nullcontext(), \
                        backward_context() if backward_context is not None else contextlib.nullcontext():
                    torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
                run.ill_conditioned = watch is not None and watch.ill_conditioned
                run.racy = watch is not None and watch.racy
        except Exception as error:  # noqa: BLE001
            run.error, run.error_stage, run.error_trace = error, "backward", traceback.format_exc(limit=-8)
            return run
        run.grads = [leaf.grad.detach().clone() if leaf is not None and leaf.grad is not None else None
                     for leaf in leaves]
    return run


# ---- comparing -------------------------------------------------------------------------------

FLOAT_PRECISION_ORDER = (torch.bfloat16, torch.float16, torch.float32, torch.float64)


def noise_dtype(program: Program) -> torch.dtype | None:
    """The least precise float dtype among the program's inputs and intermediates."""
    try:
        namespace = program.run_statements()
    except Exception:  # noqa: BLE001 - a program whose last statement raises
        namespace = program.run_statements(len(program.statements) - 1)
    dtypes = {value.dtype for value in namespace.values() if isinstance(value, torch.Tensor)}
    return next((dtype for dtype in FLOAT_PRECISION_ORDER if dtype in dtypes), None)


def compare_runs(program: Program, got: Execution, expected: Execution, reference: Execution | None,
                 label: str = "ember") -> Mismatch | None:
    names = program.outputs
    noise = noise_dtype(program)
    flags = program.flags()
    any_fragile = any(fragile for _, fragile in flags.values())
    if len(got.outputs) != len(expected.outputs):
        return Mismatch("output_count", "outputs", f"eager {len(expected.outputs)}, {label} {len(got.outputs)}")
    usable_reference = reference is not None and reference.error is None
    for index, (c, e) in enumerate(zip(got.outputs, expected.outputs)):
        name = names[index] if index < len(names) else f"#{index}"
        where = f"output {index} ({name})"
        if not isinstance(c, torch.Tensor) or not isinstance(e, torch.Tensor):
            if type(c) is not type(e) or c != e:
                return Mismatch("output_type", where, f"eager {e!r:.80}, {label} {c!r:.80}")
            continue
        r = reference.outputs[index] if usable_reference and index < len(reference.outputs) else None
        fragile = flags.get(name, (True, True))[1]
        c_requires = got.output_grad_flags[index]
        e_requires = expected.output_grad_flags[index]
        if c_requires != e_requires:
            return Mismatch("requires_grad", where, f"eager requires_grad={e_requires}, {label} {c_requires}")
        mismatch = compare_tensor(c, e, r, where=where, fragile=fragile, noise_dtype=noise,
                                  check_requires_grad=False)
        if mismatch:
            return mismatch
    for index, (c, e) in enumerate(zip(got.inputs_after, expected.inputs_after)):
        name = program.inputs[index].name
        r = reference.inputs_after[index] if usable_reference else None
        mismatch = compare_tensor(c, e, r, where=f"input {name} after the call",
                                  fragile=flags.get(name, (True, True))[1], noise_dtype=noise,
                                  check_requires_grad=False)
        if mismatch:
            mismatch.check = f"mutation_{mismatch.check}"
            return mismatch
    for index, (c_alias, e_alias) in enumerate(zip(got.aliases, expected.aliases)):
        if c_alias != e_alias:
            where = f"output {index} ({names[index] if index < len(names) else index})"
            return Mismatch("aliasing", where, f"eager shares storage with (inputs, outputs) {e_alias}, "
                            f"{label} {c_alias}")
    if len(got.grads) != len(expected.grads):
        return Mismatch("grad_presence", "grads", f"eager {len(expected.grads)} grads, {label} {len(got.grads)}")
    for index, (c, e) in enumerate(zip(got.grads, expected.grads)):
        where = f"grad of {program.inputs[index].name}"
        if (c is None) != (e is None):
            return Mismatch("grad_presence", where, f"eager {'None' if e is None else 'a tensor'}, "
                            f"{label} {'None' if c is None else 'a tensor'}")
        if c is None:
            continue
        r = reference.grads[index] if usable_reference and index < len(reference.grads) else None
        mismatch = compare_tensor(c, e, r, where=where, fragile=any_fragile, noise_dtype=noise,
                                  check_requires_grad=False)
        if mismatch:
            mismatch.check = f"grad_{mismatch.check}"
            return mismatch
    return None


# ---- classifying -----------------------------------------------------------------------------

def _eager_runs(program: Program, namespace: dict):
    function = namespace["program"]
    eager = execute(function, namespace, program.seed, watch_conditioning=True)
    try:
        again = execute(function, namespace, program.seed)
        dtypes = [getattr(o, "dtype", None) for o in eager.outputs]
        reference = execute(function, namespace, program.seed, reference=True, grad_dtypes=dtypes)
    except Exception as error:  # noqa: BLE001
        # a fault of eager's own kernel surfaces at the next CUDA call, here the next run's first
        # (index 704133: embedding's backward over an (8, 0) table, an illegal memory access)
        if namespace.get("DEVICE", "cpu") == "cpu":
            raise
        again, reference = Execution(), Execution()
        again.error = reference.error = error
        again.error_stage = reference.error_stage = "forward"
    return eager, again, reference


_LEAF_WRITE = "a leaf Variable that requires grad is being used in an in-place operation"


class _FreshViewGradFns(torch.overrides.TorchFunctionMode):
    """Reads every tensor argument's grad_fn before each call, as printing the tensor would: a
    view made before its base needed grad is then a view with a grad_fn, not a leaf."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for value in torch.utils._pytree.tree_leaves((args, kwargs or {})):
            if isinstance(value, torch.Tensor):
                value.grad_fn  # noqa: B018 - the read is the point
        return func(*args, **(kwargs or {}))


class _DenseBatchNormBackward(TorchDispatchMode):
    """Eager's CPU batch_norm backward with every tensor argument made contiguous (the same
    values).  torch's kernel misreads some strided arguments (torch 2.13, float64 too): an input
    whose strides pass `is_contiguous(channels_last)` only by its size-1 dims ([1, 3, 1, 2] at
    (6, 1, 1, 3) with a contiguous grad_output: conv 14899, 0.00214 where the formula gives
    0.00168), an input [5, 100, 5, 1] at (500, 1, 100, 1) (every channel one bias gradient:
    conv 11091), and a strided weight wherever it takes its channels-last kernel (`w[::2]` read
    as storage[0:3]: conv 12961)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.native_batch_norm_backward.default and args[1].device.type == "cpu":
            args = tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in args)
        return func(*args, **(kwargs or {}))


def _eager_under_mode_agrees(mode, program: Program, namespace: dict, got: Execution, call: int,
                             growth: dict) -> bool:
    """Does eager (and its float64 reference) run under `mode()` agree with `got`?"""
    def under_mode(*args):
        with mode():
            return namespace["program"](*args)

    def backward_context():
        return mode()

    resized = growth.get(call, 0)
    again = execute(under_mode, namespace, program.seed, watch_conditioning=True, resized=resized,
                    backward_context=backward_context)
    if again.error is not None:
        return False
    dtypes = [getattr(o, "dtype", None) for o in again.outputs]
    reference = execute(under_mode, namespace, program.seed, reference=True, grad_dtypes=dtypes, resized=resized,
                        backward_context=backward_context)
    with mode():  # (the comparison runs the program's statements for their dtypes)
        return compare_runs(program, got, again, reference) is None


def _eager_error_in_unused_code(program: Program, got: Execution, call: int, growth: dict) -> bool:
    """Does eager without the statements the outputs do not use run, and agree with `got`?"""
    live = program.live_only()
    if len(live.statements) == len(program.statements):
        return False
    namespace = load(live)
    pruned = execute(namespace["program"], namespace, program.seed, watch_conditioning=True,
                     resized=growth.get(call, 0))
    if pruned.error is not None:
        return False
    dtypes = [getattr(o, "dtype", None) for o in pruned.outputs]
    reference = execute(namespace["program"], namespace, program.seed, reference=True, grad_dtypes=dtypes,
                        resized=growth.get(call, 0))
    return compare_runs(live, got, pruned, reference) is None


def classify(program: Program, backend: str, namespace: dict, eager: Execution, eager_again: Execution,
             reference: Execution) -> Outcome:
    import ember
    outcome = Outcome(seed=program.seed, mode=program.mode, backend=backend, cls="ok", ops=program.ops())
    if eager.error is None and eager_again.error is None and compare_runs(program, eager_again, eager, reference):
        outcome.cls = "flaky_eager"
        outcome.detail = compare_runs(program, eager_again, eager, reference).describe()
        return outcome
    dtypes = [getattr(o, "dtype", None) for o in eager.outputs]
    # "ember_dynamic": the ember backend with every size symbolic (dynamic=True).
    base, dynamic = (backend[:-len("_dynamic")], True) if backend.endswith("_dynamic") else (backend, None)
    # "ember_ca": the ember backend, its backwards under compiled autograd (compiled by ember)
    base, autograd = (base[:-len("_ca")], True) if base.endswith("_ca") else (base, False)
    base = base.replace("_triton", "")  # (the kernel backend is chosen by run_program)
    compiled = ember.compile(namespace["program"], backend=base, dynamic=dynamic)
    backward_context = None
    if autograd:
        compiler = ember.compile(backend=base)
        backward_context = lambda: ember.compiled_autograd.enable(compiler)  # noqa: E731
    # a dynamic compile is called a third time at other sizes (resize.py), against eager there;
    # under compiled autograd a fourth, at yet other sizes (its backward graph over symbolic
    # sizes, made at the third, runs there)
    calls = (1, 2, 3, 4) if autograd else (1, 2, 3) if dynamic else (1, 2)
    growth = {3: GROWTH, 4: 2 * GROWTH}
    for call in calls:
        unused_code_error = None  # eager's error in code the outputs do not use (resized call)
        if call >= 3:
            semantics = namespace
            eager = execute(namespace["program"], namespace, program.seed, watch_conditioning=True,
                            resized=growth[call])
            if eager.error is not None and eager.error_stage == "forward":
                if outcome.cls == "eager_error":
                    break  # (eager refused the original sizes too: nothing new to compare)
                # At other sizes a statement whose result nothing uses may raise (a shape that no
                # longer fits); a compiler drops such code, as torch.compile does: eager without it
                live = load(program.live_only())
                pruned = execute(live["program"], live, program.seed, watch_conditioning=True, resized=growth[call])
                if pruned.error is None:
                    semantics, eager, unused_code_error = live, pruned, eager.error
            dtypes = [getattr(o, "dtype", None) for o in eager.outputs]
            reference = execute(semantics["program"], semantics, program.seed, reference=True, grad_dtypes=dtypes,
                                resized=growth[call])
        got = execute(compiled, namespace, program.seed, grad_dtypes=dtypes, resized=growth.get(call, 0),
                      backward_context=backward_context)
        prefix = {1: "", 2: "call2_", 3: "resized_", 4: "resized2_"}[call]
        if eager.error is not None and eager.error_stage == "forward":
            if got.error is None and "not implemented for" in str(eager.error):
                # eager has no kernel for this dtype on this device (addmm_cuda for Long); ember's
                # decomposition computes it, as torch.compile's may
                outcome.cls, outcome.type_match = "eager_error", False
                outcome.detail = f"eager: {first_line(eager.error)}; ember computed it"
                continue
            if got.error is None and any(text in str(eager.error) for text in EAGER_ONLY_FORWARD_ERRORS):
                outcome.cls, outcome.type_match = "eager_error", False
                outcome.detail = f"eager's autograd refused: {first_line(eager.error)}; ember's graph ran"
                continue
            if got.error is None and _LEAF_WRITE in str(eager.error) and \
                    _eager_under_mode_agrees(_FreshViewGradFns, program, namespace, got, call, growth):
                # eager's in-place check called a view a leaf: a view taken before its base needed
                # grad gets its grad_fn only when something reads it (inplace 13752: `v1 =
                # v0.narrow(...)`, then `v0.scatter_(..., b)`, then `v1[0:] = b`); read first, eager
                # runs the program and agrees with ember
                outcome.cls, outcome.type_match = "eager_error", False
                outcome.detail = f"eager's autograd (a view's grad_fn not yet made): {first_line(eager.error)}"
                continue
            if got.error is None and _eager_error_in_unused_code(program, got, call, growth):
                # eager raised in a statement nothing kept uses (the GPU's where refuses 65536 as
                # float16 where the CPU, on which the program was made, does not; lowp 702008):
                # a compiler drops that code, as torch.compile does, and the rest is eager's
                outcome.cls, outcome.type_match = "eager_error", False
                outcome.detail = f"eager (in code the outputs do not use): {first_line(eager.error)}; ember dropped it"
                continue
            if got.error is None or got.error_stage != "forward":
                outcome.cls, outcome.check = "wrong", prefix + "no_exception"
                outcome.detail = f"eager raised {first_line(eager.error)}; ember returned normally"
                return outcome
            outcome.cls = "eager_error"
            outcome.exception = first_line(got.error)
            outcome.type_match = isinstance(got.error, type(eager.error))
            outcome.detail = f"eager: {first_line(eager.error)}"
            continue
        if got.error is not None and unused_code_error is not None and got.error_stage == "forward":
            # ember traced the unused code too and raised its error (as torch.compile would)
            outcome.cls, outcome.exception = "eager_error", first_line(got.error)
            outcome.type_match = isinstance(got.error, type(unused_code_error))
            outcome.detail = f"eager (in code the outputs do not use): {first_line(unused_code_error)}"
            continue
        if got.error is not None:
            if eager.error is not None and eager.error_stage == got.error_stage:
                outcome.cls = "eager_error"
                outcome.exception = first_line(got.error)
                outcome.type_match = isinstance(got.error, type(eager.error))
                outcome.detail = f"eager ({eager.error_stage}): {first_line(eager.error)}"
                continue
            outcome.cls, outcome.check = "crash", f"{prefix}{got.error_stage}"
            outcome.exception = first_line(got.error)
            outcome.trace = got.error_trace
            return outcome
        if eager.error is not None and any(text in str(eager.error) for text in
                                           EAGER_ONLY_BACKWARD_ERRORS + EAGER_INTERNAL_ERRORS):
            # Eager's autograd refuses a saved tensor that was later written in place, or a write
            # through a view it cannot rebase; a compiled (functionalized) graph saved the value
            # before the write and has no views to rebase, as torch.compile's.
            outcome.cls, outcome.type_match = "eager_error", False
            outcome.detail = f"eager backward raised {first_line(eager.error)}; ember's backward ran"
            continue
        if eager.error is not None:   # eager raised in backward, ember did not
            outcome.cls, outcome.check = "wrong", prefix + "backward_no_exception"
            outcome.detail = f"eager backward raised {first_line(eager.error)}; ember's did not"
            return outcome
        mismatch = compare_runs(program, got, eager, reference)
        # (a shape too: a size that depends on data, as a boolean mask's count of such values)
        if mismatch and mismatch.check in ("values", "nan_positions", "grad_values", "grad_nan_positions",
                                           "mutation_values", "shape") and \
                (reference.ill_conditioned or eager.ill_conditioned):
            # A sum that is mostly rounding error (conditioning.py): no order of additions is wrong.
            outcome.cls, outcome.check = "ill_conditioned", prefix + mismatch.check
            outcome.where, outcome.detail = mismatch.where, mismatch.detail
            return outcome
        if mismatch and (eager.racy or reference.racy):
            # eager wrote places of a view whose elements share them from several GPU threads:
            # its own runs differ (one eager run against another here may or may not show it)
            outcome.cls, outcome.check = "flaky_eager", prefix + mismatch.check
            outcome.where = mismatch.where
            outcome.detail = f"eager's GPU kernels write a place several elements share, racing: {mismatch.detail}"
            return outcome
        if mismatch and mismatch.check.startswith("grad") and "batch_norm" in program.source() and \
                _eager_under_mode_agrees(_DenseBatchNormBackward, program, namespace, got, call, growth):
            outcome.cls = "eager_wrong"
            outcome.detail = ("eager's CPU batch_norm backward misread an input's strides "
                              f"({mismatch.check}); with its input made contiguous eager agrees")
            continue
        if mismatch:
            outcome.cls, outcome.check = "wrong", prefix + mismatch.check
            outcome.where, outcome.detail = mismatch.where, mismatch.detail
            return outcome
    return outcome


def _device_failure(namespace: dict, *runs) -> str | None:
    """A device-side assert in eager's kernels (reported late, at a later call): the reason."""
    if namespace.get("DEVICE", "cpu") == "cpu":
        return None
    for run in runs:
        if run.error is not None and ("device-side assert" in str(run.error) or
                                      "illegal memory access" in str(run.error)):
            return first_line(run.error)
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").item()
    except Exception as error:  # noqa: BLE001 - the context is gone: this worker is replaced
        return first_line(error)
    return None


def run_program(program: Program, backends=("ember",), raise_capture_errors: bool = True) -> list[Outcome]:
    # float32 convolutions in float32 on both sides: cuDNN may use TF32 by default, and which
    # algorithm does depends on the layout (ember's channels-last ones did, eager's did not: 1e-4
    # differences in fuzz conv on an H200 that say nothing of either).  Through flags(), which
    # also holds where torch's test utilities froze the global flags (the suite's OpInfo tests).
    cudnn = torch.backends.cudnn
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                     allow_tf32=False):
        return _run_program(program, backends, raise_capture_errors)


def _run_program(program: Program, backends, raise_capture_errors: bool) -> list[Outcome]:
    import ember
    namespace = load(program)
    outcomes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if namespace.get("DEVICE", "cpu") != "cpu":
            # On a GPU, eager's bounds checks are device-side asserts that end the process's CUDA
            # context: a program eager refuses on the CPU is not run there.
            namespace["DEVICE"] = "cpu"
            dry = execute(namespace["program"], namespace, program.seed)
            namespace["DEVICE"] = load(program)["DEVICE"]
            if dry.error is not None:
                return [Outcome(seed=program.seed, mode=program.mode, backend=backend, cls="eager_error",
                                ops=program.ops(), detail=f"not run on {namespace['DEVICE']}: eager raises on the "
                                f"CPU ({first_line(dry.error)})") for backend in backends]
        eager, eager_again, reference = _eager_runs(program, namespace)
        failed = _device_failure(namespace, eager, eager_again, reference)
        if failed:  # eager's own kernels asserted on the device (the CPU accepted the program)
            return [Outcome(seed=program.seed, mode=program.mode, backend=backend, cls="eager_error",
                            ops=program.ops(), detail=f"eager failed on {namespace['DEVICE']}: {failed}")
                    for backend in backends]
        for backend in backends:
            begin = time.perf_counter()
            try:
                # A lowering that crashes is a bug to fix, not an ATen fallback to hide behind.
                # "ember_triton": Triton kernels (Triton's interpreter on CPU tensors) for CPU graphs
                kernels = "triton" if "_triton" in backend else "cpp"
                if kernels == "triton" and os.environ.get("TRITON_INTERPRET") == "1":
                    from tests.triton_rounding import round_like_the_gpu

                    round_like_the_gpu()  # (the interpreter truncates to bfloat16; a GPU rounds)
                # mode "conv": channels-last convolutions on the CPU too (by default only on CUDA)
                layout = "cpu,cuda" if program.mode == "conv" else ember.config.channels_last_convolutions
                with ember.config.patch(raise_capture_errors=raise_capture_errors, raise_lowering_errors=True,
                                        cpu_kernels=kernels, channels_last_convolutions=layout):
                    outcome = classify(program, backend, namespace, eager, eager_again, reference)
            except Exception as error:  # noqa: BLE001 - a failure of the harness around ember
                outcome = Outcome(seed=program.seed, mode=program.mode, backend=backend, cls="crash",
                                  check="harness", exception=first_line(error), ops=program.ops(),
                                  trace=traceback.format_exc(limit=-8))
            finally:
                ember.reset()
            outcome.seconds = round(time.perf_counter() - begin, 3)
            outcomes.append(outcome)
    return outcomes
