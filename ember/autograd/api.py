"""aot_function, aot_module, and the `aot_eager` backend.

    compiled = ember.aot_function(fn, fw_compiler, bw_compiler=None,
                                  partition_fn=ember.autograd.partition_min_cut,
                                  decompositions=ember.decomp.core_decompositions())

On a call, the inputs' metadata (shape, stride, dtype, device, requires_grad) picks a cache
entry; a miss traces the joint graph, partitions it, compiles forward (now) and backward (at
the first .backward()), and wraps them in an autograd.Function.  A compiler is any callable
`(gm, example_inputs) -> callable`, like a capture backend.
"""
from __future__ import annotations

import collections
import logging
from typing import Callable

import torch
from torch.utils import _pytree as pytree

from .. import config as ember_config
from .. import logs
from ..capture.runtime import counters
from ..capture.shapes import StaticShapesNeeded
from ..decomp import core_decompositions
from ..eager.check import overlaps_itself
from ..errors import InputShapeMismatch
from ..runtime.autocast import as_traced
from ..sizes import has_symbols, symbolic_dims
from ..steps import run_steps
from .aot_steps import AOT_STEPS, CapturedWork, JointWork
from .joint import JointSpec
from .partition import Partition, partition_min_cut
from .runtime import CompiledPair, make_autograd_function, make_inference_function
from .symbolic import input_guards

log_graph = logs.get("graph_code")
log_fallbacks = logs.get("fallbacks")
log_perf = logs.get("perf")


def _identity_compiler(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    return as_traced(gm.forward)


def _key(flat_args: list) -> tuple:
    return (torch.is_grad_enabled(), tuple(
        (tuple(arg.shape), tuple(arg.stride()), arg.storage_offset(), arg.dtype, arg.device, arg.requires_grad,
         arg.is_leaf) if isinstance(arg, torch.Tensor) else (type(arg), arg) for arg in flat_args))


def _symbolic_key(flat_args: list, symbolic: dict | None = None) -> tuple:
    """What a graph traced with symbolic sizes still assumes of its inputs beyond its guards
    (of a number captured as a symbol, at a position in `symbolic`, its type)."""
    return (torch.is_grad_enabled(), tuple(
        (arg.dim(), arg.dtype, arg.device, arg.requires_grad, arg.is_leaf) if isinstance(arg, torch.Tensor) else
        type(arg) if symbolic and index in symbolic and type(arg) in (int, float) else (type(arg), arg)
        for index, arg in enumerate(flat_args)))


# Symbolic entries per key before the sizes are compiled one by one: a second one covers
# inputs whose sizes relate otherwise (two sizes equal at the first trace, different later).
SYMBOLIC_ENTRIES = 2


class ShapesSpecialized(Exception):
    """A graph traced with symbolic sizes that ember compiles per concrete shape instead."""


class AotCompiled:
    """The compiled entries of one function (one per input-metadata key).  With `dynamic_dims`
    (input position -> dims whose sizes are symbols) a graph is compiled once for every size its
    guards allow; where that fails, each shape gets its own entry (the `fallbacks` log says why)."""

    def __init__(self, fn: Callable, fw_compiler: Callable, bw_compiler: Callable | None,
                 partition_fn: Callable, decompositions: dict | None, guarded_inputs: bool = False,
                 dynamic_dims: dict[int, tuple[int, ...]] | None = None, steps: tuple = AOT_STEPS) -> None:
        self.fn = fn
        self.steps = steps  # the joint ones run per input signature (steps.py)
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.partition_fn = partition_fn
        self.decompositions = decompositions
        self.entries: dict[tuple, Callable] = {}
        # Behind ember's capture, guards already pin every input's metadata: only grad mode varies.
        self.guarded_inputs = guarded_inputs
        self.last_partition: Partition | None = None
        self.last_joint: torch.fx.GraphModule | None = None
        self.dynamic_dims = dynamic_dims or {}
        # symbolic key -> [(guard over the inputs, runner)]; keys whose sizes compile one by one
        self.symbolic_entries: dict[tuple, list[tuple[Callable, Callable]]] = {}
        self.specialized: set[tuple] = set()

    def __call__(self, *args):
        flat_args = list(args)
        if self.dynamic_dims:
            runner = self._symbolic_runner(flat_args)
            if runner is not None:
                try:
                    return runner(*flat_args)
                except InputShapeMismatch as error:
                    # The compiled wrapper checks its inputs before any kernel runs: nothing was
                    # done, and these sizes compile one by one from now on.
                    self.specialized.add(_symbolic_key(flat_args, self.dynamic_dims))
                    log_fallbacks.warning("ember: inputs outside the sizes a graph was compiled for (%s); "
                                          "compiling per shape from now on", error)
        key = torch.is_grad_enabled() if self.guarded_inputs else _key(flat_args)
        runner = self.entries.get(key)
        if runner is None:
            _count_compile()
            runner = self.compile(flat_args)
            self.entries[key] = runner
        return runner(*flat_args)

    def _symbolic_runner(self, flat_args: list) -> Callable | None:
        """The entry compiled with symbolic sizes whose guards hold for these inputs (compiled
        now if there is none yet); None where this key's sizes compile one by one."""
        key = _symbolic_key(flat_args, self.dynamic_dims)
        if key in self.specialized:
            return None
        entries = self.symbolic_entries.setdefault(key, [])
        for guard, runner in entries:
            if guard(flat_args):
                return runner
        if len(entries) >= SYMBOLIC_ENTRIES:
            self.specialized.add(key)
            log_fallbacks.warning("ember: %d graphs with symbolic sizes did not cover these inputs' sizes; "
                                  "compiling per shape from now on", len(entries))
            return None
        _count_compile()
        try:
            guard, runner = self.compile(flat_args, symbolic=True)
        except ShapesSpecialized as reason:
            self.specialized.add(key)
            log_fallbacks.warning("ember: compiling per shape, not with symbolic sizes: %s", reason)
            return None
        entries.append((guard, runner))
        return runner

    def compile(self, flat_args: list, symbolic: bool = False):
        """A runner for these inputs; with `symbolic`, (guard, runner) for every input the guard
        accepts, or ShapesSpecialized."""
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in flat_args)
        if symbolic:
            return self._compile_symbolic(flat_args, needs_grad)
        work = self._work(flat_args, needs_grad, None)
        try:
            after_trace = run_steps(self.steps, "joint", work, pause_after="trace_joint")
        except Exception as error:
            if not isinstance(self.fn, torch.fx.GraphModule):
                raise  # aot_function's caller learns what it cannot trace (TracingError names op and line)
            # A captured graph can always run as it is (an error eager would raise is raised there).
            # (torch.fx's interpreter appends a pointer to torch's log tool, which ember does not write)
            reason = "\n".join(line for line in str(error).splitlines() if not line.startswith("Use tlparse"))
            log_fallbacks.warning("ember: AOT tracing failed (%s: %s); running the captured graph eagerly",
                                  type(error).__name__, reason.rstrip())
            return self.fn.forward
        log_perf.debug("AOT: traced the %s graph (%d nodes) in %.2f s", "joint" if needs_grad else "inference",
                       len(work.joint.graph.nodes), work.timings.get("trace_joint", 0.0))
        return self._compile_traced(work, after_trace)

    def _work(self, flat_args: list, needs_grad: bool, dynamic_dims: dict | None) -> JointWork:
        return JointWork(fn=self.fn, flat_args=flat_args, decompositions=self.decompositions, needs_grad=needs_grad,
                         dynamic_dims=dynamic_dims, partition_fn=self.partition_fn)

    def _compile_symbolic(self, flat_args: list, needs_grad: bool):
        dims = {i: d for i, d in self.dynamic_dims.items()  # (and numbers captured as symbols: d == ())
                if i < len(flat_args) and
                (isinstance(flat_args[i], torch.Tensor) or type(flat_args[i]) in (int, float))}
        work = self._work(flat_args, needs_grad, dims)
        try:
            after_trace = run_steps(self.steps, "joint", work, pause_after="trace_joint")
        except Exception as error:  # noqa: BLE001 - the per-shape path traces it again (or says why not)
            raise ShapesSpecialized(f"tracing with symbolic sizes failed ({type(error).__name__}: {error})") from None
        spec = work.spec
        reason = _symbolic_unsupported(spec)
        if reason:
            raise ShapesSpecialized(reason)
        try:
            runner = self._compile_traced(work, after_trace)
        except Exception as error:  # noqa: BLE001
            if type(error).__name__ != "ShapesNotSupported":
                raise
            raise ShapesSpecialized(str(error)) from None
        # The guards also hold what compiling the graphs assumed (a partitioner's size checks).
        positions = [i for i in dims if dims[i] or not isinstance(flat_args[i], torch.Tensor)]
        try:
            guard, text = input_guards(spec.shape_env, spec.input_fakes, positions)
        except StaticShapesNeeded as need:
            raise ShapesSpecialized(need.reason) from None
        if log_graph.isEnabledFor(logging.DEBUG):
            log_graph.debug("graph with symbolic sizes, for inputs where %s", " and ".join(text) or "always")
        return guard, runner

    def _compile_traced(self, work: JointWork, start: int) -> Callable:
        """The joint steps after the trace (CSE, the partition), then the graphs' compilers."""
        run_steps(self.steps, "joint", work, start=start)
        joint, spec, flat_args, partition = work.joint, work.spec, work.flat_args, work.partition
        self.last_joint = joint
        if spec.outputs_sharing_inputs and isinstance(self.fn, torch.fx.GraphModule):
            # Eager returns them as views of an input, which the runtime cannot re-make (the fallbacks
            # log says why): a copy would not see later writes to the input (tests/autograd/test_aot_regressions.py)
            log_fallbacks.warning("ember: output(s) %s share an input's memory in eager and cannot be re-made as "
                                  "views; running the captured graph eagerly", spec.outputs_sharing_inputs)
            return self.fn.forward
        if not spec.diff_outputs:
            _offer_input_writes(joint, spec, flat_args)
            forward = self.fw_compiler(joint, flat_args)
            self.last_partition = Partition(joint, None, [], 0, spec.num_fw_outputs)
            return self._unless_aliased(make_inference_function(spec, forward), spec, flat_args)
        self.last_partition = partition
        log_perf.debug("AOT: partitioned in %.2f s (%d forward, %d backward nodes, %d saved)",
                       work.timings.get("partition", 0.0), len(partition.forward.graph.nodes),
                       len(partition.backward.graph.nodes), len(partition.saved))
        _offer_input_writes(partition.forward, spec, flat_args)
        forward, begun = self._compile_forward_begin_backward(partition, spec, flat_args)
        pair = CompiledPair(spec, forward, partition.backward, self.bw_compiler, len(partition.saved),
                            partition.saved_bytes, begun=begun)
        return self._unless_aliased(make_autograd_function(pair), spec, flat_args)

    def _compile_forward_begin_backward(self, partition: Partition, spec: JointSpec, flat_args: list):
        """(the compiled forward, the backward begun or None).  A compiler that compiles in two
        halves (`compiler.start`: Triton's worker processes) begins the backward, for the traced
        layouts, while the forward's kernels compile: a training step's two compiles overlap."""
        start_forward = getattr(self.fw_compiler, "start", None)
        start_backward = getattr(self.bw_compiler, "start", None)
        finish_forward = None
        if ember_config._config.begin_backward and start_forward is not None and start_backward is not None and \
                spec.shape_env is None:
            finish_forward = start_forward(partition.forward, flat_args)
        if finish_forward is None:
            return self.fw_compiler(partition.forward, flat_args), None
        begun = None
        try:
            inputs = [node.meta.get("val") for node in partition.backward.graph.nodes if node.op == "placeholder"]
            begun = start_backward(partition.backward, inputs)
        except Exception as error:  # noqa: BLE001 - compiled at its first call, as without this
            log_perf.debug("backward not begun with the forward (%s: %s)", type(error).__name__, error)
        return finish_forward(), begun

    def _unless_aliased(self, runner: Callable, spec: JointSpec, flat_args: list) -> Callable:
        """The graph treats its inputs as separate memory: a call where an input it writes shares
        memory with another (a tensor and its view, across a graph break) runs the function as it is."""
        if not spec.mutated_inputs:
            return runner
        mutated = list(spec.mutated_inputs)
        fallback = self.fn.forward if isinstance(self.fn, torch.fx.GraphModule) else self.fn
        if any(overlaps_itself(flat_args[index]) for index in mutated):
            # An expanded input (stride 0) written in place: eager writes the shared element, the
            # graph's new value cannot be copied back into it.
            log_fallbacks.warning("ember: an input written in place has elements sharing memory "
                                  "(expanded); running the captured graph eagerly")
            return fallback
        # Parameters never alias the buffers and activations a graph writes: left out of the check.
        others = [i for i, a in enumerate(flat_args) if isinstance(a, torch.Tensor)
                  and not isinstance(a, torch.nn.Parameter)]

        def run(*args):
            if _writes_alias(args, mutated, others):
                log_fallbacks.debug("ember: an input written in place shares memory with another input; "
                                    "running the graph as it is for this call")
                return fallback(*args)
            return runner(*args)

        return run


def _offer_input_writes(gm: torch.fx.GraphModule, spec: JointSpec, flat_args: list) -> None:
    """Tells the compiler (graph meta "ember_input_writes": output position -> input position) which
    outputs are new values of inputs that need no gradient, which it may write in place instead of
    the runtime copying them back (batch norm's running statistics); it then returns the input."""
    writes = {spec.num_fw_outputs + k: index for k, index in enumerate(spec.mutated_inputs)
              if not spec.mutation_is_differentiable(k) and isinstance(flat_args[index], torch.Tensor)
              and not flat_args[index].requires_grad}
    if writes:
        gm.meta["ember_input_writes"] = writes


def _count_compile() -> None:
    counters["stats"]["backend_compiles"] += 1


def _symbolic_unsupported(spec: JointSpec) -> str:
    """Why the runtime cannot take a graph traced with symbolic sizes ('' if it can)."""
    if spec.outputs_sharing_inputs:
        return "an output shares an input's memory and cannot be re-made as a view with symbolic sizes"
    for alias in spec.output_aliases.values():
        fields = (alias.size, alias.stride, alias.offset, alias.source_size, alias.source_stride,
                  pytree.tree_leaves(alias.chain or ()))
        if any(has_symbols(value) for value in pytree.tree_leaves(fields)):
            return "an output is a view whose sizes are symbolic"
    return ""


def _writes_alias(args, mutated: list[int], others: list[int]) -> bool:
    """Does an input written in place share its storage with another input (of `others`)?"""
    owners = collections.Counter(args[i].untyped_storage().data_ptr() for i in others)
    checked = set(others)
    for index in mutated:
        pointer = args[index].untyped_storage().data_ptr()
        if pointer and owners[pointer] > (index in checked):  # (empty tensors have no memory: 0)
            return True
    return False


def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                 partition_fn: Callable = partition_min_cut, decompositions: dict | None = None) -> Callable:
    """Trace forward and backward of `fn` ahead of time; returns a callable with eager semantics."""
    if not callable(fn):
        raise TypeError(f"ember.aot_function expects a callable, got {type(fn).__name__}")
    compiled = AotCompiled(fn, fw_compiler or _identity_compiler, bw_compiler, partition_fn, decompositions)

    def run(*args, **kwargs):
        if kwargs:
            raise TypeError("ember.aot_function: pass inputs positionally (keyword arguments are not traced)")
        return compiled(*args)

    run.aot = compiled
    return run


def aot_module(module: torch.nn.Module, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
               partition_fn: Callable = partition_min_cut, decompositions: dict | None = None) -> torch.nn.Module:
    """A module whose forward (parameters and buffers as graph inputs) runs through aot_function."""
    return AotModule(module, fw_compiler, bw_compiler, partition_fn, decompositions)


class AotModule(torch.nn.Module):
    def __init__(self, module, fw_compiler, bw_compiler, partition_fn, decompositions) -> None:
        super().__init__()
        self.orig_module = module
        self._names = names = [name for name, _ in module.named_parameters()] + \
            [name for name, _ in module.named_buffers()]

        def functional_forward(*flat):
            state = dict(zip(names, flat[:len(names)]))
            return torch.nn.utils.stateless.functional_call(module, state, flat[len(names):])

        self._compiled = aot_function(functional_forward, fw_compiler, bw_compiler, partition_fn, decompositions)

    def forward(self, *args):
        state = {**dict(self.orig_module.named_parameters()), **dict(self.orig_module.named_buffers())}
        return self._compiled(*[state[name] for name in self._names], *args)


def aot_backend(fw_compiler: Callable, bw_compiler: Callable | None = None, steps: tuple = AOT_STEPS) -> Callable:
    """A capture backend: ember's AOT autograd (min-cut, core decompositions), then these compilers;
    of `steps` (steps.py), the "captured" ones run now, the "joint" ones per input signature."""

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        run_steps(steps, "captured", CapturedWork(gm=gm, example_inputs=list(example_inputs)))

        # A graph captured with dynamic sizes is traced with the same sizes symbolic; otherwise
        # capture's guards pin every input's metadata.
        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        dynamic_dims = {i: symbolic_dims(node.meta.get("example_value")) for i, node in enumerate(placeholders)}
        dynamic_dims = {i: dims for i, dims in dynamic_dims.items() if dims}
        # Python numbers captured as symbols (capture/scalars.py): symbols of the trace too
        dynamic_dims.update({i: () for i, node in enumerate(placeholders)
                             if isinstance(node.meta.get("example_value"), (torch.SymInt, torch.SymFloat))})
        compiled = AotCompiled(gm, fw_compiler, bw_compiler or fw_compiler, partition_min_cut,
                               core_decompositions(), guarded_inputs=not dynamic_dims, dynamic_dims=dynamic_dims,
                               steps=steps)

        compiled.aot = compiled  # (called directly: one Python frame less per call)
        return compiled

    return backend


# The `aot_eager` backend: ember's AOT autograd, then the graphs run as they are.
aot_eager_backend = aot_backend(_identity_compiler)
