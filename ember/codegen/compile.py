"""A graph's compile as named steps (steps.py): ATen graph in, a Python callable out.

    cpu_scalars    CPU scalar tensors a GPU graph reads get one copy to the device (FX rewrite)
    supported      graphs ember's kernels do not take (several devices, sparse, data-dependent
                   sizes) run as ATen calls
    bias_epilogue  a linear's bias add folded into the matmul; lower: ATen -> loop IR (lowering/)
    schedule       dead code, fusion into kernels, buffer lifetimes (scheduling/)
    kernels        C++ for CPUs (cpp/kernel.py), Triton for CUDA GPUs (triton/kernel.py)
    build, load    g++ (cpp/build.py) or Triton's compile workers (triton/backend.py)
    wrapper        the Python `call` that allocates, calls and frees (codegen/wrapper.py)
    cudagraphs     the call replayed as a CUDA graph (ember.config.cudagraphs)

Each step's product dumps under its own EMBER_LOGS name (lower also under ir, kernels and wrapper
under output_code).  The backend's whole list, from the captured graph on, is pipeline.py's.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable

import torch
from torch.utils import _pytree as pytree

from .. import config as ember_config
from .. import logs
from ..lowering.bias_epilogue import use_bias_epilogues
from ..errors import GraphNotSupported
from ..lowering.analysis import reads
from ..lowering.graph import GraphLowering
from ..lowering.ir import ComputedBuffer
from ..lowering.printer import ir_text
from ..lowering.symbolic import ShapesNotSupported  # noqa: F401  (raised by compile_graph; callers catch it here)
from ..lowering.symbolic import bounds_scope
from ..runtime.autocast import as_traced
from ..scheduling.input_writes import input_writes
from ..scheduling.scheduler import Scheduler, schedule_text
from ..steps import Step, Work, fx_text, run_steps, verify_fx
from .kernel import KernelCompileError
from .devices import BACKENDS, KernelBackend, backend_name, kernel_backend, missing_for
from .wrapper import WrapperCodegen

log_fallbacks = logs.get("fallbacks")
log_perf = logs.get("perf")


@dataclasses.dataclass
class CompiledGraph:
    call: Callable
    kernels: dict[str, str]  # kernel name -> its source (C++ or Triton)
    wrapper: str
    fallbacks: dict[str, int]
    timings: dict[str, float]
    ir: Callable[[], str] = lambda: ""  # the loop-level IR as readable text (printed on demand)
    schedule: Callable[[], str] = lambda: ""  # the fused kernels and extern calls, in order
    launchers: dict = dataclasses.field(default_factory=dict)  # kernel name -> what the backend built

    def __call__(self, *args):
        return self.call(*args)

    @property
    def plain_call(self) -> Callable:
        """What __call__ calls (callers on a hot path call it directly)."""
        return self.call


@dataclasses.dataclass
class GraphWork(Work):
    """One graph's compile, step by step (steps.py): what each step made."""
    gm: torch.fx.GraphModule | None = None
    example_inputs: list = dataclasses.field(default_factory=list)
    lowering: GraphLowering | None = None
    scheduler: Scheduler | None = None
    backend: KernelBackend | None = None
    sources: dict = dataclasses.field(default_factory=dict)
    built: object = None       # what the backend's build began (or built)
    functions: dict = dataclasses.field(default_factory=dict)
    result: Callable | None = None  # a CompiledGraph, or what runs instead (ATen calls)
    changed: bool = False  # did the last rewrite change the graph (its dump only then)
    cuda_graph: bool = False  # is the call replayed as a CUDA graph


def _cpu_scalars(work: GraphWork) -> None:
    work.changed = _copy_cpu_scalars_to_device(work.gm)


def _supported(work: GraphWork) -> None:
    """Graphs ember's kernels do not take run as ATen calls (the reason in the fallbacks log)."""
    reason = _unsupported(work.gm)
    if reason is not None:
        log_fallbacks.debug("%s", reason)
        work.result, work.done = as_traced(work.gm.forward), True


def _unsupported(gm: torch.fx.GraphModule) -> str | None:
    devices = _device_types(gm)
    if len(devices) > 1:
        cpu = [f"{node.name} = {node.target}" for node in gm.graph.nodes
               if any(isinstance(v, torch.Tensor) and v.device.type == "cpu" for v in _tensor_values(node))]
        return (f"graph with tensors on {', '.join(sorted(devices))}: running it as ATen calls (on the CPU: "
                f"{'; '.join(cpu[:4])})")
    missing = missing_for(next(iter(devices), "cpu"))
    if missing:
        return f"graph not compiled ({missing}): running it as ATen calls"
    layouts = _non_strided_layouts(gm)
    if layouts:
        return (f"graph with {', '.join(sorted(layouts))} tensors: ember's kernels read strided memory only; "
                f"running it as ATen calls")
    if _has_unbacked_symbols(gm):
        return "graph with data-dependent sizes: running it as is"
    scalars = _symbolic_scalar_inputs(gm)
    if scalars:
        # (a float computed from sizes, 2.0 / (s0 - 1.0), saved by a forward for its backward:
        # kernels take integer sizes only, and ATen calls read the value at call time)
        return f"graph with symbolic scalar inputs ({', '.join(scalars)}): running it as is"
    return None


def _bias_epilogue(work: GraphWork) -> None:
    work.changed = bool(use_bias_epilogues(work.gm.graph))
    if work.changed:
        work.gm.recompile()


def _lower(work: GraphWork) -> None:
    work.lowering = GraphLowering(work.gm)
    work.lowering.run(*[node.meta.get("val") for node in work.gm.graph.nodes if node.op == "placeholder"])


def _schedule(work: GraphWork) -> None:
    scheduler = Scheduler(work.lowering)
    scheduler.eliminate_dead_code()
    scheduler.fuse()
    work.scheduler = scheduler
    work.lowering.input_writes = input_writes(work.gm, scheduler)


def _kernels(work: GraphWork) -> None:
    graph, scheduler = work.lowering, work.scheduler
    work.backend = kernel_backend(_device_type(work.gm))
    dtypes = {buffer.name: buffer.dtype for buffer in [*graph.inputs, *scheduler.kept] if buffer.dtype is not None}
    dtypes.update({name: tensor.dtype for name, tensor in graph.constants.items()})  # tensors the graph holds
    work.sources = work.backend.sources(graph, scheduler, dtypes)


def _build(work: GraphWork) -> None:
    """Hands the kernels to the backend's build (Triton's workers go on in the background)."""
    work.built = work.backend.start_build(work.sources)


def _load(work: GraphWork) -> None:
    """Waits for the build: the kernels' callables."""
    work.functions = work.backend.finish_build(work.built)


def _wrapper(work: GraphWork) -> None:
    gm, graph, scheduler = work.gm, work.lowering, work.scheduler
    codegen = WrapperCodegen(graph, scheduler.steps, scheduler.last_uses(), work.sources, work.backend)
    source = codegen.generate(work.functions)
    namespace = dict(codegen.namespace)
    exec(compile(source, "<ember wrapper>", "exec"), namespace)
    kernels = {name: kernel.source for name, kernel in work.sources.items()}
    log_perf.debug("compiled a graph of %d nodes into %d steps in %.2f s (%s)", len(gm.graph.nodes),
                   len(scheduler.steps), sum(work.timings.values()),
                   ", ".join(f"{stage} {seconds:.2f}" for stage, seconds in work.timings.items()))
    if graph.fallback_counts and log_fallbacks.isEnabledFor(logging.DEBUG):
        log_fallbacks.debug("ATen fallbacks in this graph: %s", dict(graph.fallback_counts))
    work.result = CompiledGraph(namespace["call"], kernels, source, dict(graph.fallback_counts), work.timings,
                                ir=lambda: ir_text(graph), schedule=lambda: schedule_text(scheduler),
                                launchers=work.functions)


def _cudagraphs(work: GraphWork) -> None:
    graph = work.result
    if not (ember_config.cudagraphs and _device_types(work.gm) == {"cuda"}):
        return
    from ..runtime.cudagraphs import CudaGraphRunner, why_not_graphs

    reason = why_not_graphs(work.gm, graph.wrapper)
    if reason is None:
        graph.call = CudaGraphRunner(graph.call, static=not any(_symbolic(value) for value in work.example_inputs))
        work.cuda_graph = True
    else:
        log_fallbacks.debug("CUDA graphs off for this graph: %s", reason)


def _verify_lowering(work: GraphWork) -> None:
    """Every buffer the loop IR reads is defined before it: an input, a constant, an earlier buffer."""
    graph = work.lowering
    defined = {buffer.name for buffer in graph.inputs} | set(graph.constants)
    for buffer in graph.buffers:
        if isinstance(buffer, ComputedBuffer):
            undefined = reads(buffer) - defined
            if undefined:
                raise AssertionError(f"{buffer.name} reads {sorted(undefined)} before they are defined")
        defined.add(buffer.name)


def _verify_schedule(work: GraphWork) -> None:
    problems = work.scheduler.undefined_reads()
    if problems:
        raise AssertionError("schedule out of order: " + "; ".join(problems[:5]))


CPU_SCALARS = Step("cpu_scalars", "graph", _cpu_scalars, dump=lambda w: fx_text(w.gm) if w.changed else None,
                   verify=lambda w: verify_fx(w.gm))
SUPPORTED = Step("supported", "graph", _supported,
                 dump=lambda w: f"compiled by ember's kernels (on {', '.join(sorted(_device_types(w.gm))) or 'cpu'})")
BIAS_EPILOGUE = Step("bias_epilogue", "graph", _bias_epilogue, dump=lambda w: fx_text(w.gm) if w.changed else None,
                     verify=lambda w: w.gm.graph.lint())
LOWER = Step("lower", "graph", _lower, dump=lambda w: ir_text(w.lowering), verify=_verify_lowering, also_logs=("ir",))
SCHEDULE = Step("schedule", "graph", _schedule, dump=lambda w: schedule_text(w.scheduler), verify=_verify_schedule)
KERNELS = Step("kernels", "graph", _kernels, also_logs=("output_code",),
               dump=lambda w: "kernels:\n" + "\n\n".join(kernel.source for kernel in w.sources.values()))
BUILD = Step("build", "graph", _build,
             dump=lambda w: f"{len(w.sources)} kernel(s) handed to the {w.backend.name} build: {', '.join(w.sources)}")
LOAD = Step("load", "graph", _load, dump=lambda w: f"{len(w.functions)} kernel(s) loaded")
WRAPPER = Step("wrapper", "graph", _wrapper, dump=lambda w: "wrapper:\n" + w.result.wrapper, also_logs=("output_code",))
CUDAGRAPHS = Step("cudagraphs", "graph", _cudagraphs,
                  dump=lambda w: "replayed as a CUDA graph" if w.cuda_graph else "no CUDA graph (mode='reduce-overhead' on CUDA)")

# A graph's compile on its own (ember_compiler below; the backend's list is pipeline.py's).
GRAPH_STEPS = (CPU_SCALARS, SUPPORTED, BIAS_EPILOGUE, LOWER, SCHEDULE, KERNELS, BUILD, LOAD, WRAPPER, CUDAGRAPHS)


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> CompiledGraph:
    """The graph's kernels and wrapper (no checks of what it holds, no CUDA graphs)."""
    work = GraphWork(gm=gm, example_inputs=list(example_inputs))
    with bounds_scope():  # what this graph's size symbols allow, kept apart from other graphs'
        run_steps(GRAPH_STEPS[2:-1], "graph", work)  # (bias epilogue to wrapper)
    return work.result


def prepare(example_inputs: list) -> None:
    """Before a graph on a GPU is traced: Triton's compile workers start (they import Triton's
    compiler while the graph is traced and lowered, instead of after)."""
    if any(isinstance(value, torch.Tensor) and value.device.type == "cuda" for value in example_inputs) \
            and backend_name("cuda") == "triton" and not missing_for("cuda"):
        from .triton.pool import prewarm

        prewarm()


def graph_compiler(steps=GRAPH_STEPS) -> Callable:
    """A fw/bw compiler for AotCompiled running the "graph" ones of `steps`: C++ for CPU graphs,
    Triton for CUDA graphs; graphs on other devices, or on several, run as they are.  Its
    `start` compiles in two halves (below)."""

    def compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return _compile(gm, example_inputs, None, steps)

    def start(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[[], Callable] | None:
        """The compile in two halves, for a graph whose kernels compile in the background (Triton
        graphs of fixed sizes): this call runs the steps up to the build, which hands the kernels
        to the compile workers; calling what it returns finishes.  The AOT layer starts a
        training step's backward this way while its forward's kernels compile.  None: the graph
        would not compile in the background."""
        if any(_symbolic(value) for value in example_inputs):
            return None
        _copy_cpu_scalars_to_device(gm)
        devices = _device_types(gm)
        device = next(iter(devices), None)
        if len(devices) != 1 or missing_for(device) or backend_name(device) not in BACKENDS or \
                not kernel_backend(device).background_builds:
            return None
        started = []
        result = _compile(gm, example_inputs, started, steps)
        if not started:
            return lambda: result  # (it ran as it is, or compiled whole)
        return started[0]

    compiler.start = start
    return compiler


def _compile(gm: torch.fx.GraphModule, example_inputs: list, started: list | None, steps):
    """The graph steps; with `started` (a list), a graph that compiles is only begun: the
    function that finishes it is appended there and None returned.  Symbolic sizes compile once
    into kernels that take them as arguments (what cannot raises ShapesNotSupported: the AOT
    layer compiles per shape).  A graph lowering refuses, or with a kernel its compiler rejects
    at every optimization level (cpp/build.py), runs as ATen calls."""
    work = GraphWork(gm=gm, example_inputs=list(example_inputs))

    def run(start: int, pause_after: str | None, bounds=None):
        try:
            with bounds_scope(bounds) as scope:
                return run_steps(steps, "graph", work, start=start, pause_after=pause_after), scope
        except (GraphNotSupported, KernelCompileError) as error:
            reason = error if isinstance(error, GraphNotSupported) else \
                f"a kernel did not build: {str(error).splitlines()[0]}"
            log_fallbacks.debug("graph not compiled (%s): running it as ATen calls", reason)
            work.result, work.done = as_traced(gm.forward), True
        return len(steps), bounds

    index, bounds = run(0, "build" if started is not None else None)
    if started is None or work.done or index >= len(steps):
        return work.result

    def finished() -> Callable:
        run(index, None, bounds)
        return work.result

    started.append(finished)
    return None


ember_compiler = graph_compiler()


def _symbolic(value) -> bool:
    if isinstance(value, torch.Tensor):
        return any(isinstance(n, torch.SymInt) for n in (*value.shape, *value.stride()))
    return isinstance(value, (torch.SymInt, torch.SymFloat))


def _tensor_values(node: torch.fx.Node) -> list:
    return [value for value in pytree.tree_leaves(node.meta.get("val")) if isinstance(value, torch.Tensor)]


def _device_types(gm: torch.fx.GraphModule) -> set[str]:
    """The devices the graph computes on (CPU scalars that only a copy to the device reads
    do not count: `_copy_cpu_scalars_to_device`)."""
    return {value.device.type for node in gm.graph.nodes if not node.meta.get("ember_copied_to_device")
            for value in _tensor_values(node)}


def _copy_cpu_scalars_to_device(gm: torch.fx.GraphModule) -> bool:
    """Eager lets a CPU scalar tensor (an input or a constant of no dims) meet tensors on a GPU,
    whose kernels cannot read CPU memory: each such value gets one copy to the device, which its
    users computing on the device read instead (not a one-element tensor with dims, which eager's
    index_select refuses with a CUDA input, nor a user computing on the CPU)."""
    nodes = list(gm.graph.nodes)
    values = {node: _tensor_values(node) for node in nodes}
    targets = {v.device for vs in values.values() for v in vs if v.device.type != "cpu"}
    if len(targets) != 1:
        return False
    (device,) = targets
    changed = False
    for node in nodes:
        if node.op not in ("placeholder", "get_attr") or node.meta.get("ember_copied_to_device"):
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dim() != 0:
            continue
        on_device = [user for user in node.users if _computes_on(user, device)]
        if not on_device:
            continue
        fake_mode = getattr(value, "fake_mode", None)
        if fake_mode is None:
            continue
        with gm.graph.inserting_after(node):
            copy = gm.graph.call_function(torch.ops.aten._to_copy.default, (node,), {"device": device})
        with fake_mode:
            copy.meta["val"] = torch.ops.aten._to_copy.default(value, device=device)
        copy.meta["stack_trace"] = node.meta.get("stack_trace")
        for user in on_device:
            user.replace_input_with(node, copy)
        node.meta["ember_copied_to_device"] = True
        changed = True
    if changed:
        gm.recompile()
    return changed


def _computes_on(node: torch.fx.Node, device: torch.device) -> bool:
    """Are the node's results on `device`?  (Not the output node: what it returns stays as is.)"""
    values = _tensor_values(node) if node.op == "call_function" else []
    return bool(values) and all(value.device == device for value in values)


def _device_type(gm: torch.fx.GraphModule) -> str:
    _copy_cpu_scalars_to_device(gm)
    devices = _device_types(gm)
    if len(devices) > 1:
        raise GraphNotSupported(f"tensors on {', '.join(sorted(devices))}")
    return next(iter(devices), "cpu")


def _non_strided_layouts(gm: torch.fx.GraphModule) -> set[str]:
    """Layouts of values in the graph that are not plain strided memory (sparse COO/CSR, ...)."""
    return {str(value.layout).replace("torch.", "") for node in gm.graph.nodes for value in _tensor_values(node)
            if value.layout != torch.strided}


def _symbolic_scalar_inputs(gm: torch.fx.GraphModule) -> list[str]:
    """Placeholders whose values are SymFloats or SymBools (not tensors, not integer sizes)."""
    return [node.name for node in gm.graph.nodes if node.op == "placeholder"
            and (isinstance(node.meta.get("val"), (torch.SymFloat, torch.SymBool)) or _unsized_int(node.meta.get("val")))]


def _unsized_int(value) -> bool:
    """A SymInt input that may be below 1 (a Python int captured as a symbol, capture/scalars.py):
    not a size ember's kernels can take."""
    if not isinstance(value, torch.SymInt):
        return False
    expr, shape_env = value.node.expr, value.node.shape_env
    ranges = getattr(shape_env, "var_to_range", {})
    return any(symbol not in ranges or not ranges[symbol].lower >= 1 for symbol in expr.free_symbols)


def _has_unbacked_symbols(gm: torch.fx.GraphModule) -> bool:
    """Does some value's size depend on data (nonzero, item: unbacked symbols u0, u1, ...)?

    Also where the trace fixed that size to a number (a later `reshape(1, 3)` of `c[c > 0]`
    makes the ShapeEnv replace u0 by 3): the size is still the data's, and a kernel compiled for
    3 would read 3 of however many there are where eager raises (fuzz ember_dynamic 73631)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in gm.graph.nodes:
        for value in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, torch.Tensor)) and \
                    free_unbacked_symbols(value):
                return True
            if isinstance(value, torch.Tensor) and any(_unbacked_before_replacement(s) for s in value.shape):
                return True
    return False


def _unbacked_before_replacement(size) -> bool:
    if not isinstance(size, torch.SymInt):
        return False
    raw = getattr(size.node, "_expr", size.node.expr)  # (the expression before ShapeEnv replacements)
    return any(symbol.name.startswith(("u", "zuf")) for symbol in getattr(raw, "free_symbols", ()))

