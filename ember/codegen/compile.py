"""ember's code generator, as one list of named steps: ATen graph in, a Python callable out.

    lower      GraphLowering: ATen nodes -> loop-level IR (lowering/)
    schedule   dead code, fusion into kernels, buffer lifetimes (scheduling/)
    kernels    source for each fused kernel, by the device's backend (codegen/devices.py):
               C++ for CPUs (cpp.py), Triton for CUDA GPUs (triton.py)
    build      g++ -> shared libraries, cached and compiled in parallel (cpp_build.py); Triton
               kernels loaded from ember's cache folder (triton_backend.py)
    wrapper    the Python `call` that allocates, calls and frees (codegen/wrapper.py)

Every step's product can be dumped: EMBER_LOGS=ir prints the IR, EMBER_LOGS=schedule the
kernels and extern calls in order, EMBER_LOGS=output_code the C++ kernels and the wrapper; each
line names the ATen node it came from and the user's source line.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

import torch

from .. import config as ember_config
from .. import logs
from ..lowering.bias_epilogue import use_bias_epilogues
from ..errors import GraphNotSupported
from ..lowering.graph import GraphLowering
from ..lowering.printer import ir_text
from ..lowering.symbolic import ShapesNotSupported  # noqa: F401  (raised by compile_graph; callers catch it here)
from ..lowering.symbolic import bounds_scope
from ..runtime.autocast import as_traced
from ..scheduling.input_writes import input_writes
from ..scheduling.scheduler import Kernel, Scheduler, schedule_text
from .cpp_build import KernelCompileError
from .devices import BACKENDS, backend_name, kernel_backend, missing_for
from .wrapper import WrapperCodegen

log_code = logs.get("output_code")
log_ir = logs.get("ir")
log_schedule = logs.get("schedule")
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


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> CompiledGraph:
    return start_graph(gm, example_inputs)()


def start_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[[], CompiledGraph]:
    """compile_graph in two halves: this one lowers, schedules, writes the kernels and hands
    their compiles to the backend (Triton's workers go on in the background); calling what it
    returns waits for them, tunes and writes the wrapper."""
    with bounds_scope() as bounds:  # what this graph's size symbols allow, kept apart from other graphs'
        timings: dict[str, float] = {}

        def timed(name, function, *args):
            started = time.perf_counter()
            result = function(*args)
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
            return result

        graph = timed("lower", _lower, gm)
        if log_ir.isEnabledFor(logging.DEBUG):
            log_ir.debug("%s", ir_text(graph))
        scheduler = timed("schedule", _schedule, graph)
        graph.input_writes = input_writes(gm, scheduler)
        if log_schedule.isEnabledFor(logging.DEBUG):
            log_schedule.debug("%s", schedule_text(scheduler))
        backend = kernel_backend(_device_type(gm))
        sources = timed("kernels", _kernel_sources, backend, graph, scheduler)
        start_build = getattr(backend, "start_build", None)
        started = timed("build", start_build, sources) if start_build else timed("build", backend.build, sources)

    def finish() -> CompiledGraph:
        with bounds_scope(bounds):
            functions = timed("build", backend.finish_build, started) if start_build else started
            return _finish_graph(gm, graph, scheduler, backend, sources, functions, timings, timed)

    return finish


def _finish_graph(gm, graph, scheduler, backend, sources, functions, timings, timed) -> CompiledGraph:
    wrapper_source, call = timed("wrapper", _wrapper, backend, graph, scheduler, sources, functions)
    kernels = {name: kernel.source for name, kernel in sources.items()}
    if log_code.isEnabledFor(logging.DEBUG):
        log_code.debug("kernels:\n%s\nwrapper:\n%s", "\n\n".join(kernels.values()), wrapper_source)
    log_perf.debug("compiled a graph of %d nodes into %d steps in %.2f s (%s)", len(gm.graph.nodes),
                   len(scheduler.steps), sum(timings.values()),
                   ", ".join(f"{stage} {seconds:.2f}" for stage, seconds in timings.items()))
    if graph.fallback_counts and log_fallbacks.isEnabledFor(logging.DEBUG):
        log_fallbacks.debug("ATen fallbacks in this graph: %s", dict(graph.fallback_counts))
    return CompiledGraph(call, kernels, wrapper_source, dict(graph.fallback_counts), timings,
                         ir=lambda: ir_text(graph), schedule=lambda: schedule_text(scheduler), launchers=functions)


def _lower(gm: torch.fx.GraphModule) -> GraphLowering:
    if use_bias_epilogues(gm.graph):
        gm.recompile()
    graph = GraphLowering(gm)
    placeholders = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    graph.run(*placeholders)
    return graph


def _schedule(graph: GraphLowering) -> Scheduler:
    scheduler = Scheduler(graph)
    scheduler.eliminate_dead_code()
    scheduler.fuse()
    return scheduler


def _kernel_sources(backend, graph: GraphLowering, scheduler: Scheduler) -> dict:
    dtypes = {buffer.name: buffer.dtype for buffer in [*graph.inputs, *scheduler.kept] if buffer.dtype is not None}
    dtypes.update({name: tensor.dtype for name, tensor in graph.constants.items()})  # tensors the graph holds
    return backend.sources(graph, scheduler, dtypes)


def _wrapper(backend, graph, scheduler, sources, functions):
    codegen = WrapperCodegen(graph, scheduler.steps, scheduler.last_uses(), sources, backend)
    source = codegen.generate(functions)
    namespace = dict(codegen.namespace)
    exec(compile(source, "<ember wrapper>", "exec"), namespace)
    return source, namespace["call"]


def prepare(example_inputs: list) -> None:
    """Before a graph on a GPU is traced: Triton's compile workers start (they import Triton's
    compiler while the graph is traced and lowered, instead of after)."""
    if any(isinstance(value, torch.Tensor) and value.device.type == "cuda" for value in example_inputs) \
            and backend_name("cuda") == "triton" and not missing_for("cuda"):
        from .triton_pool import prewarm

        prewarm()


def ember_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A fw/bw compiler for AotCompiled: C++ for CPU graphs, Triton for CUDA graphs; graphs on
    other devices, or on several, run as they are."""
    return _compile(gm, example_inputs, started=None)


def start_compile(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[[], Callable] | None:
    """ember_compiler in two halves, for a graph whose kernels compile in the background (Triton
    graphs of fixed sizes): this call hands the kernels to the compile workers, calling what it
    returns finishes.  The AOT layer starts a training step's backward this way while its
    forward's kernels compile.  None: the graph would not compile in the background."""
    if any(_symbolic(value) for value in example_inputs):
        return None
    _copy_cpu_scalars_to_device(gm)
    devices = _device_types(gm)
    if len(devices) != 1 or missing_for(next(iter(devices))) or \
            backend_name(next(iter(devices))) not in BACKENDS or \
            not hasattr(kernel_backend(next(iter(devices))), "start_build"):
        return None
    started = []
    result = _compile(gm, example_inputs, started=started)
    if not started:
        return lambda: result  # (it ran as it is, or compiled whole)
    return started[0]


ember_compiler.start = start_compile


def _compile(gm: torch.fx.GraphModule, example_inputs: list, started: list | None):
    """ember_compiler's body; with `started` (a list), a graph that compiles is only begun: the
    function that finishes it is appended there and None returned."""
    _copy_cpu_scalars_to_device(gm)
    devices = _device_types(gm)
    if len(devices) > 1:
        cpu = [f"{node.name} = {node.target}" for node in gm.graph.nodes
               if any(isinstance(v, torch.Tensor) and v.device.type == "cpu" for v in _tensor_values(node))]
        log_fallbacks.debug("graph with tensors on %s: running it as ATen calls (on the CPU: %s)",
                            ", ".join(sorted(devices)), "; ".join(cpu[:4]))
        return as_traced(gm.forward)
    missing = missing_for(next(iter(devices), "cpu"))
    if missing:
        return as_traced(gm.forward)
    layouts = _non_strided_layouts(gm)
    if layouts:
        log_fallbacks.debug("graph with %s tensors: ember's kernels read strided memory only; running it as "
                            "ATen calls", ", ".join(sorted(layouts)))
        return as_traced(gm.forward)
    if _has_unbacked_symbols(gm):
        log_fallbacks.debug("graph with data-dependent sizes: running it as is")
        return as_traced(gm.forward)
    scalars = _symbolic_scalar_inputs(gm)
    if scalars:
        # A float computed from sizes (2.0 / (s0 - 1.0), saved by a forward for its backward):
        # ember's kernels take integer sizes only.  A backward is compiled when it first runs,
        # where no caller could compile it another way: it runs as ATen calls, which read the
        # value at call time.
        log_fallbacks.debug("graph with symbolic scalar inputs (%s): running it as is", ", ".join(scalars))
        return as_traced(gm.forward)
    def with_graphs(graph: CompiledGraph) -> CompiledGraph:
        if ember_config.cudagraphs and devices == {"cuda"}:
            from ..runtime.cudagraphs import CudaGraphRunner, why_not_graphs

            reason = why_not_graphs(gm, graph.wrapper)
            if reason is None:
                graph.call = CudaGraphRunner(graph.call, static=not any(_symbolic(value) for value in example_inputs))
            else:
                log_fallbacks.debug("CUDA graphs off for this graph: %s", reason)
        return graph

    # Symbolic sizes (backed symbols) compile once into kernels that take the sizes as arguments;
    # what cannot raises ShapesNotSupported, which the AOT layer turns into per-shape compiles.
    # A kernel the system compiler rejects at every optimization level (cpp_build.py tries lower
    # ones; g++ 12 stopped with an internal compiler error on one: issue 32) must not fail the
    # user's call: its graph runs as ATen calls.
    try:
        if started is None:
            return with_graphs(compile_graph(gm, example_inputs))
        finish = start_graph(gm, example_inputs)
    except GraphNotSupported as reason:
        log_fallbacks.debug("graph not compiled (%s): running it as ATen calls", reason)
        return as_traced(gm.forward)
    except KernelCompileError as error:
        return _kernels_not_built(gm, error)

    def finished() -> Callable:
        try:
            return with_graphs(finish())
        except GraphNotSupported as reason:
            log_fallbacks.debug("graph not compiled (%s): running it as ATen calls", reason)
            return as_traced(gm.forward)
        except KernelCompileError as error:
            return _kernels_not_built(gm, error)

    started.append(finished)
    return None


def _kernels_not_built(gm: torch.fx.GraphModule, error: Exception) -> Callable:
    log_fallbacks.debug("graph not compiled (a kernel did not build: %s): running it as ATen calls",
                        str(error).splitlines()[0])
    return as_traced(gm.forward)


def _symbolic(value) -> bool:
    if isinstance(value, torch.Tensor):
        return any(isinstance(n, torch.SymInt) for n in (*value.shape, *value.stride()))
    return isinstance(value, (torch.SymInt, torch.SymFloat))


def _tensor_values(node: torch.fx.Node) -> list:
    from torch.utils import _pytree as pytree

    return [value for value in pytree.tree_leaves(node.meta.get("val")) if isinstance(value, torch.Tensor)]


def _device_types(gm: torch.fx.GraphModule) -> set[str]:
    """The devices the graph computes on (CPU scalars that only a copy to the device reads
    do not count: `_copy_cpu_scalars_to_device`)."""
    devices = set()
    for node in gm.graph.nodes:
        if node.meta.get("ember_copied_to_device"):
            continue
        devices |= {value.device.type for value in _tensor_values(node)}
    return devices


def _copy_cpu_scalars_to_device(gm: torch.fx.GraphModule) -> None:
    """Eager lets a CPU scalar tensor (an input or a constant of no dims) meet tensors on a GPU;
    kernels on the GPU cannot read CPU memory: each such value gets one copy to the device (an
    ATen call), which its users computing on the device read instead.  Not a tensor of one
    element with dims (`torch.tensor([0])`: eager's index_select refuses it with a CUDA input,
    fuzz 20122), nor a user computing on the CPU (indexing a CPU tensor with it: 20461)."""
    nodes = list(gm.graph.nodes)
    values = {node: _tensor_values(node) for node in nodes}
    targets = {v.device for vs in values.values() for v in vs if v.device.type != "cpu"}
    if len(targets) != 1:
        return
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
    from torch.utils import _pytree as pytree

    return {str(value.layout).replace("torch.", "") for node in gm.graph.nodes
            for value in pytree.tree_leaves(node.meta.get("val"))
            if isinstance(value, torch.Tensor) and value.layout != torch.strided}


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
    from torch.utils import _pytree as pytree

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

