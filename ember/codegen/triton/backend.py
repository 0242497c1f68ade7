"""The GPU kernel backend: Triton kernels (kernel.py), loaded from ember's cache folder and
compiled when the graph is built; the wrapper passes tensors, sizes and a grid, kernel by kernel
(one scheduled kernel may become several, run in order):

    kernel0[(cdiv(xnumel, XBLOCK),)](arg0, buf1, 8192, 768, XBLOCK=4, RBLOCK=1024, num_warps=8)
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import weakref
from typing import Callable

import sympy

from ... import config as ember_config
from ... import logs
from ...errors import GraphNotSupported
from ...lowering.indexing import python_size
from ...lowering.ir import ComputedBuffer, Layout, product
from ...scheduling.scheduler import Kernel
from . import tune as triton_tune
from ..kernel import KernelCompileError
from .ops import TritonSource, load_kernel
from .split import triton_kernels

log_fallbacks = logs.get("fallbacks")
log_perf = logs.get("perf")

INT32_LIMIT = 2**31 - 2**16  # larger offsets (with a block's overhang) index in int64


@dataclasses.dataclass
class TritonStep:
    """The Triton kernels of one scheduled kernel."""

    kernels: list[TritonSource]

    @property
    def size_args(self) -> list[str]:
        return sorted({name for kernel in self.kernels for name in kernel.size_args})

    @property
    def source(self) -> str:
        return "\n\n".join(kernel.source for kernel in self.kernels)

    @property
    def elided(self) -> set[str]:
        """Values its kernels keep in registers: no buffer is allocated for them."""
        return {name for kernel in self.kernels for name in kernel.elided}


class TritonLauncher:
    """Launches one kernel with its block sizes.  On a GPU the kernel is compiled when the graph is
    built (`precompile`, in threads) for arguments as the wrapper passes them (tensors 16-byte
    aligned, the graph's sizes): such a call goes straight to the compiled kernel's launcher, any
    other through Triton's JIT.  A kernel Triton cannot compile raises KernelCompileError."""

    def __init__(self, function, source: TritonSource, pointer_dtypes: list | None = None) -> None:
        self.function = function
        self.constexprs = {"XBLOCK": source.XBLOCK, **({"RBLOCK": source.RBLOCK} if source.RBLOCK else {}),
                           **source.constexprs}
        self.num_warps = source.num_warps
        self.path = getattr(function, "ember_path", "?")
        # the arguments: pointers, then sizes, then the index flags' pointer
        self.pointer_dtypes = pointer_dtypes  # (None: not precompiled)
        self.sizes = triton_tune.static_sizes(source)
        self.flags = bool(source.index_checks)
        self.compiled = None
        self.pending = None
        self.reported = False

    def precompile(self) -> None:
        """Starts compiling for the wrapper's arguments (inside triton's AsyncCompileMode)."""
        if self.pointer_dtypes is None or self.sizes is None:
            return
        import torch
        from triton.runtime.jit import MockTensor

        arguments = [MockTensor(dtype) for dtype in self.pointer_dtypes] + list(self.sizes) + \
            ([MockTensor(torch.int32)] if self.flags else [])
        with _compile_errors(self.path):
            self.pending = self.function.warmup(*arguments, grid=(1,), **self.constexprs, num_warps=self.num_warps,
                                                **COMPILE_OPTIONS)

    def finish_precompile(self) -> None:
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        with _compile_errors(self.path):
            kernel = pending.result() if hasattr(pending, "result") else pending
        kernel._init_handles()  # (loads the module onto the device now, not at the first call)
        import torch

        self.device = torch.cuda.current_device()
        self.compiled = kernel
        self.tail = tuple(self.constexprs.values())
        self.stream = _raw_stream()
        self.launch, self.head = _launch_entry(kernel)
        self.pointers = len(self.pointer_dtypes)
        self.after_sizes = self.pointers + len(self.sizes)

    def __call__(self, grid, *args):
        if self.compiled is not None and ember_config._config.triton_direct_launch and not _launch_hooks() and \
                args[self.pointers:self.after_sizes] == self.sizes and _aligned_as_declared(args, self.pointer_dtypes) \
                and (not self.flags or args[-1].data_ptr() % 16 == 0):
            self.launch(grid[0], grid[1] if len(grid) > 1 else 1, 1, self.stream(self.device), *self.head, *args,
                        *self.tail)
            return
        if self.compiled is not None and not self.reported:
            self.reported = True
            _log_mismatch(self, args)
        with _compile_errors(self.path):
            self.function[grid](*args, **self.constexprs, num_warps=self.num_warps, **COMPILE_OPTIONS)


# No fused multiply-adds the program did not ask for (eager rounds a*b before `- c`: `v = x * x;
# v - v` came out 1e24, not 0), nor subnormals flushed to zero inside libdevice (eager keeps them).
COMPILE_OPTIONS = {"enable_fp_fusion": False, "enable_reflect_ftz": False}


def _launch_entry(kernel) -> tuple[Callable, tuple]:
    """(callable, the arguments between the stream and the kernel's own) for launching a compiled
    kernel: Triton's C launcher itself where it needs no scratch memory (a Python frame less per
    launch), else `kernel.run`."""
    runner = kernel.run
    launch = getattr(runner, "launch", None)
    fields = ("launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size")
    if launch is not None and all(hasattr(runner, f) for f in fields) and \
            not runner.global_scratch_size and not runner.profile_scratch_size:
        return launch, (kernel.function, runner.launch_cooperative_grid, runner.launch_pdl, None, None,
                        kernel.packed_metadata, None, None, None)
    return runner, (kernel.function, kernel.packed_metadata, None, None, None)


_RUNTIME_KNOBS = None


def _launch_hooks() -> bool:
    """Is a launch hook set (a profiler's): then launches go through Triton, which calls it."""
    global _RUNTIME_KNOBS
    if _RUNTIME_KNOBS is None:
        from triton import knobs

        _RUNTIME_KNOBS = knobs.runtime
    return _hooked(_RUNTIME_KNOBS.launch_enter_hook) or _hooked(_RUNTIME_KNOBS.launch_exit_hook)


def _aligned_as_declared(args: tuple, dtypes: list) -> bool:
    """Tensors of the declared dtypes, and every pointer 16-byte aligned (as compiled)."""
    for arg, dtype in zip(args, dtypes):
        if arg.dtype is not dtype or arg.data_ptr() % 16:
            return False
    return True


def _log_mismatch(launcher: "TritonLauncher", args: tuple) -> None:
    """Says once why a precompiled kernel took Triton's JIT path (another dtype than declared points
    at a lowering that mis-declares a buffer)."""
    if not log_fallbacks.isEnabledFor(10):
        return
    found = [f"argument {k}: {arg.dtype} where {dtype} was declared" for k, (arg, dtype)
             in enumerate(zip(args, launcher.pointer_dtypes)) if arg.dtype is not dtype]
    found += [f"argument {k} at an address not 16-byte aligned" for k, arg in enumerate(args)
              if hasattr(arg, "data_ptr") and arg.data_ptr() % 16]
    log_fallbacks.debug("Triton kernel %s launched through the JIT: %s", launcher.path,
                        "; ".join(found) or "sizes or launch hooks differ")


def direct_launches(*inputs) -> bool:
    """May a graph call launch its kernels directly: no launch hook set (a profiler's; those
    launches go through Triton, which calls it), and these inputs 16-byte aligned as compiled."""
    if not ember_config._config.triton_direct_launch or _launch_hooks():
        return False
    for tensor in inputs:
        if tensor.data_ptr() % 16:
            return False
    return True


def _raw_stream():
    import torch

    return getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
        (lambda device: torch.cuda.current_stream(device).cuda_stream)


def _hooked(hook) -> bool:
    """Is a launch hook set (a HookChain with calls, or, in older Triton, a callable)?"""
    return bool(hook.calls) if hasattr(hook, "calls") else hook is not None


@contextlib.contextmanager
def _compile_errors(path: str):
    """Turns Triton's CompilationError into KernelCompileError naming the kernel's file."""
    try:
        yield
    except Exception as error:
        from triton.compiler.errors import CompilationError

        if isinstance(error, CompilationError):
            raise KernelCompileError(f"ember: Triton could not compile a generated kernel; its source is "
                                     f"{path}:\n{error}") from error
        raise


COMPILE_THREADS = min(16, os.cpu_count() or 1)


class DeviceIndexFlags:
    """Where a graph's kernels report out-of-range indices (reading row 0 instead): one int32 per
    check site, on the device.  After the kernels the wrapper calls `check`: on the CPU (Triton's
    interpreter) the verdict comes at once; on CUDA the flags are copied to pinned memory without
    waiting, and an earlier call's copy is read once the GPU made it (a waiting check drained the
    queue after every graph: 4.5 ms a BERT training step), so the IndexError surfaces a call
    later, as eager's device-side asserts do.  `wait=True` (ember.check_index_errors()) waits."""

    def __init__(self) -> None:
        self.sites: list[tuple[str, str]] = []  # (kernel, site) per flag
        self.tensor = None
        self.host = None  # (CUDA) pinned copy of the flags, and the event that marks it done
        self.event = None
        self.pending = False
        LIVE_FLAGS.add(self)

    def add(self, kernel: str, sites: list[str]) -> int:
        self.sites += [("", "")] * (-len(self.sites) % 4)  # (each kernel's flags 16-byte aligned)
        offset = len(self.sites)
        self.sites += [(kernel, site) for site in sites]
        return offset

    CAPACITY = 1024  # sites per graph

    def view(self, offset: int, device):
        import torch

        if len(self.sites) > self.CAPACITY:
            raise GraphNotSupported(f"more than {self.CAPACITY} bounds-checked indexing sites")
        if self.tensor is None:
            self.tensor = torch.zeros(self.CAPACITY, dtype=torch.int32, device=device)
        return self.tensor[offset:]

    def check(self, wait: bool = False) -> None:
        if self.tensor is None:
            return
        if self.tensor.device.type != "cuda":
            if bool(self.tensor.any()):
                self._raise(self.tensor[:len(self.sites)].tolist())
            return
        import torch

        self._look(wait)
        if wait:
            return
        if self.host is None:
            self.host = torch.zeros(len(self.sites), dtype=torch.int32, pin_memory=True)
            self.event = torch.cuda.Event()
        self.host.copy_(self.tensor[:len(self.sites)], non_blocking=True)
        self.event.record()
        self.pending = True

    def _look(self, wait: bool) -> None:
        """Raises if the last copy, once the GPU made it, shows a flag."""
        if wait and self.host is None:
            fired = self.tensor[:len(self.sites)].tolist()
            if any(fired):
                self._raise(fired)
            return
        if not self.pending or not (wait or self.event.query()):
            return
        if wait:
            self.event.synchronize()
        self.pending = False
        fired = self.host.tolist()
        if any(fired):
            self.host.zero_()
            self._raise(fired)

    def _raise(self, fired: list) -> None:
        from ..wrapper import IndexOutOfBounds

        if self.event is not None:  # (copies still on their way would report this error again)
            self.event.synchronize()
            self.host.zero_()
            self.pending = False
        self.tensor.zero_()
        violated = [f"{site} (generated {kernel})" for (kernel, site), flag in zip(self.sites, fired) if flag]
        raise IndexOutOfBounds(f"ember: index out of bounds in {'; '.join(violated)}: an index tensor holds a "
                               f"value outside [-size, size) of the dimension it indexes")


LIVE_FLAGS = weakref.WeakSet()  # every graph's flags, for check_index_errors


def check_index_errors() -> None:
    """Waits for the GPU and raises IndexError if a compiled graph read an index out of range
    (on CUDA such errors otherwise surface at a later call of that graph)."""
    for flags in list(LIVE_FLAGS):
        flags.check(wait=True)


class TritonBackend:
    background_builds = True  # start_build hands the compiles to worker processes (pool.py)
    name = "triton"

    def sources(self, graph, scheduler, dtypes: dict) -> dict[str, TritonStep]:
        offsets = _planned_offsets(graph)
        int64 = _needs_int64(graph)
        empty = _maybe_empty(graph)
        try:
            internal = frozenset(scheduler.internal_values()) if ember_config._config.triton_elide_stores else frozenset()
            steps = {step.name: TritonStep(triton_kernels(step, dtypes, offsets, int64, empty, internal))
                     for step in scheduler.steps if isinstance(step, Kernel)}
        except NotImplementedError as reason:  # (the graph runs as ATen calls)
            raise GraphNotSupported(f"no Triton kernel for it yet: {reason}") from reason
        extents = _extents(graph, scheduler)
        for step in steps.values():
            workspaces = [name for kernel in step.kernels for name, _, _ in kernel.workspaces]
            if len(set(workspaces)) != len(workspaces):  # (each names its kernels' pointer dtypes)
                raise GraphNotSupported(f"two split reductions name one workspace: {sorted(workspaces)}")
            known = {**dtypes, **{name: dtype for kernel in step.kernels for name, _, dtype in kernel.workspaces}}
            for kernel in step.kernels:
                kernel.pointer_dtypes = [known[name] for name in [*kernel.inputs, *kernel.outputs]] + \
                    [known[workspace[0]] for workspace in kernel.workspaces]
                kernel.pointer_numels = [extents.get(name) for name in [*kernel.inputs, *kernel.outputs]] + \
                    [int(numel) if isinstance(numel, int) or sympy.sympify(numel).is_number else None
                     for _, numel, _ in kernel.workspaces]
        return steps

    def start_build(self, sources: dict[str, TritonStep]) -> tuple:
        """The launchers made and their compiles handed to the workers, which go on while the
        caller does (lowers the next graph); `finish_build` waits for them, compiles in this
        process what they did not, and tunes: kernels worth tuning compile each launch candidate
        too and keep the fastest (tune.py); kernels of the same code and sizes are timed once."""
        device_name = _device_name(sources)
        launchers, trials, followers, extra = {}, {}, [], []
        wanted: dict = {}  # key -> [(name, position, launches, function) of its first kernel, its count]
        for name, step in sources.items():
            launchers[name] = []
            for position, kernel in enumerate(step.kernels):
                function = load_kernel(kernel.source, kernel.name)
                launches = triton_tune.candidates(kernel) if device_name and triton_tune.worth_tuning(kernel) else []
                key = triton_tune.key(kernel, device_name) if len(launches) > 1 else None
                known = triton_tune.recorded(key, launches) if key else None
                if known is not None:
                    triton_tune.apply(kernel, known)
                    key = None
                launchers[name].append(TritonLauncher(function, kernel, kernel.pointer_dtypes))
                if key in wanted:
                    followers.append((name, position, key))
                    wanted[key][1] += 1
                elif key is not None:
                    wanted[key] = [(name, position, launches, function), 1]
        # Each candidate is one more compile: the graph's most promising kernels only (kinds that
        # gained most first, then bytes moved over all their uses), the rest keep their defaults
        for key in triton_tune.most_promising(wanted, sources):
            (name, position, launches, function), _ = wanted[key]
            kernel = sources[name].kernels[position]
            variants = [kernel] + [triton_tune.variant(kernel, launch) for launch in launches[1:]]
            group = [launchers[name][position]] + [TritonLauncher(function, source, kernel.pointer_dtypes)
                                                   for source in variants[1:]]
            trials[key] = (name, position, launches, variants, group)
            extra += group[1:]
        followers = [(name, position, key) for name, position, key in followers if key in trials]
        every = [launcher for group in launchers.values() for launcher in group] + extra
        return sources, launchers, trials, followers, every, _start_precompile(every)

    def finish_build(self, started_build: tuple) -> dict[str, list[Callable]]:
        sources, launchers, trials, followers, every, handed_over = started_build
        _finish_precompile(every, handed_over)
        chosen, started, gains = {}, time.perf_counter(), {}
        for key, (name, position, launches, variants, group) in trials.items():
            times = triton_tune.measure(group, variants, sources[name])
            best = triton_tune.fastest(times)
            kind = gains.setdefault(sources[name].kernels[position].tuning, [0, 0, 0.0, 0.0])
            kind[0], kind[1], kind[2], kind[3] = kind[0] + 1, kind[1] + (best != 0), kind[2] + times[0], \
                kind[3] + times[best]
            chosen[key] = (launches[best], group[best])
            triton_tune.apply(sources[name].kernels[position], launches[best])
            launchers[name][position] = group[best]
            triton_tune.report(sources[name].kernels[position], key, launches, times, best)
        for name, position, key in followers:
            triton_tune.apply(sources[name].kernels[position], chosen[key][0])
            launchers[name][position] = chosen[key][1]
        if trials:
            log_perf.debug("autotune: %d kernels timed in %.2f s; per kind, kernels / changed / us at the "
                           "defaults -> as chosen (one launch of each): %s", len(trials), time.perf_counter() - started,
                           ", ".join(f"{kind} {n} / {changed} / {before:.0f} -> {after:.0f}"
                                     for kind, (n, changed, before, after) in sorted(gains.items())))
        return launchers

    def call_lines(self, wrapper, step: Kernel, kernel: TritonStep, launchers: list, own: set[str]) -> list[str]:
        lines = []
        device = step.nodes[0].layout.device
        pooled: dict[str, str] = {}  # a split reduction's workspace -> the call's scratch tensor it uses
        for source, launcher in zip(kernel.kernels, launchers):
            xnumel = sympy.sympify(source.xnumel)
            if xnumel.is_number and int(xnumel) == 0:
                continue
            for slot, (name, numel, dtype) in enumerate(source.workspaces):
                pooled[name] = _workspace(wrapper, slot, int(numel), dtype, device)
                own.add(name)
            function = wrapper.ref(launcher, source.name)
            sizes = [python_size(source.xnumel)] + ([python_size(source.rnumel)] if source.rnumel is not None else [])
            arguments = [pooled.get(name, name) for name in
                         [*source.inputs, *source.outputs, *[w[0] for w in source.workspaces]]] + \
                [*sizes, *source.size_args]
            if source.index_checks:
                flags = wrapper.namespace.setdefault("index_flags", DeviceIndexFlags())
                offset = flags.add(source.name, source.index_checks)
                arguments.append(wrapper.ref(flags.view(offset, step.nodes[0].layout.device), "flags"))
            if xnumel.is_number:
                grid = f"({-(-int(xnumel) // source.XBLOCK)},"
            else:
                grid = f"((({python_size(xnumel)}) + {source.XBLOCK - 1}) // {source.XBLOCK},"
            grid += f" {source.grid_y})" if source.grid_y != 1 else ")"
            checked = f"{function}({grid}, {', '.join(arguments)})"
            direct = self._direct_call(wrapper, launcher, source, arguments, own)
            lines += [f"if {direct[0]}: {direct[1]}", f"else: {checked}"] if direct else [checked]
        return lines

    def _direct_call(self, wrapper, launcher: "TritonLauncher", source: TritonSource, arguments: list,
                     own: set[str]) -> tuple[str, str] | None:
        """(condition, call) launching the precompiled kernel through Triton's C launcher, where what
        `TritonLauncher.__call__` checks is known now (static sizes; dtypes and alignment of buffers
        the wrapper allocates, and constants); graph inputs are checked once per call (`direct`)."""
        if not ember_config._config.triton_direct_launch or launcher.compiled is None or launcher.sizes is None or source.size_args:
            return None
        sizes = [source.xnumel] + ([source.rnumel] if source.rnumel is not None else [])
        if tuple(int(sympy.sympify(size)) for size in sizes) != launcher.sizes:
            return None
        inputs = {buffer.name for buffer in wrapper.graph.inputs}
        conditions = ["direct"]
        pointers = [*source.inputs, *source.outputs]
        for name, dtype in zip(pointers, launcher.pointer_dtypes):
            if name in wrapper.graph.input_writes:  # (stored into an input: checked as the input)
                wrapper.direct_inputs.add(wrapper.graph.input_writes[name])
                continue
            if name in own:
                continue
            if name in inputs:
                wrapper.direct_inputs.add(name)
            elif name in wrapper.graph.constants:
                tensor = wrapper.graph.constants[name]
                if tensor.dtype is not dtype or tensor.data_ptr() % 16:
                    return None
            else:  # an extern op's result
                conditions.append(f"{name}.data_ptr() % 16 == 0 and {name}.dtype is {wrapper.ref(dtype, 'dtype')}")
        device = launcher.device
        wrapper.direct_streams.add(device)
        run, head, tail = (wrapper.ref(launcher.launch, f"{source.name}_run"), wrapper.ref(launcher.head, "head"),
                           wrapper.ref(launcher.tail, "tail"))
        x, y = -(-launcher.sizes[0] // source.XBLOCK), source.grid_y
        call = f"{run}({x}, {y}, 1, stream{device}, *{head}, {', '.join(arguments)}, *{tail})"
        return " and ".join(conditions), call

    def initial_lines(self, wrapper) -> list[str]:
        """Before the first kernel: the scratch tensors, whether kernels launch directly this call, and
        each device's current stream."""
        scratch = [f"{name} = torch.empty({numel}, dtype={dtype}, device={wrapper.device(device)})"
                   for (_, dtype, device), (name, numel) in wrapper.workspaces.items()]
        if not wrapper.direct_streams:
            return scratch
        wrapper.namespace["direct_launches"] = direct_launches
        wrapper.namespace["raw_stream"] = _raw_stream()
        inputs = sorted(wrapper.direct_inputs)
        return [f"direct = direct_launches({''.join(name + ', ' for name in inputs)})",
                *(f"stream{device} = raw_stream({device})" for device in sorted(wrapper.direct_streams)), *scratch]

    def final_lines(self, wrapper) -> list[str]:
        """After the last kernel: the index checks' verdict."""
        return ["index_flags.check()"] if "index_flags" in wrapper.namespace else []


def _workspace(wrapper, slot: int, numel: int, dtype, device) -> str:
    """The call's scratch tensor for a split reduction's `slot`-th workspace: one per (slot, dtype,
    device), as large as its largest use (kernels run in order on one stream, and a workspace is
    read only by its combining kernels, before the next split reduction writes it)."""
    pools = wrapper.workspaces
    key = (slot, dtype, device)
    name, size = pools.get(key, (f"workspace{len(pools)}", 0))
    pools[key] = (name, max(size, numel))
    return name


def _device_name(sources: dict[str, TritonStep]) -> str | None:
    """The GPU the kernels run on, by name (autotuning's records are per GPU); None: none is timed."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "interpreter" if triton_tune.ON_INTERPRETER else None
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def _start_precompile(launchers: list[TritonLauncher]):
    """The kernels handed to the compile workers: (start time, their batch); None: nothing compiles."""
    if os.environ.get("TRITON_INTERPRET") == "1" or not any(launcher.pointer_dtypes for launcher in launchers):
        return None
    from . import pool as triton_pool

    return time.perf_counter(), triton_pool.start_in_workers(launchers)


def _finish_precompile(launchers: list[TritonLauncher], handed: tuple | None) -> None:
    """Waits for the workers (into Triton's cache), then compiles each kernel here in threads."""
    if handed is None:
        return
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime._async_compile import AsyncCompileMode

    from . import pool as triton_pool

    started, batch = handed
    triton_pool.finish_in_workers(batch)
    handed_over = time.perf_counter()
    with triton_pool.CacheCounter() as counts:
        with ThreadPoolExecutor(COMPILE_THREADS) as pool, AsyncCompileMode(pool, ignore_errors=True):
            for launcher in launchers:
                launcher.precompile()
        for launcher in launchers:
            launcher.finish_precompile()
    triton_pool.last_counts.clear()
    finished = time.perf_counter()
    triton_pool.last_counts.update(hits=counts.hits, misses=counts.misses, kernels=len(launchers),
                                   workers_s=handed_over - started, parent_s=finished - handed_over)
    log_perf.debug("Triton kernels: %d launchers, %d compiles found in the cache, %d compiled here; %.1f s in "
                   "the workers, %.1f s in this process", len(launchers), counts.hits, counts.misses,
                   handed_over - started, finished - handed_over)


def _extent(layout: Layout) -> sympy.Expr:
    """Elements a pointer to this layout reaches, its offset included."""
    return sympy.sympify(layout.offset + sum(((size - 1) * abs(stride) for size, stride in
                                              zip(layout.size, layout.stride)), sympy.Integer(0)) + 1)


def _extents(graph, scheduler) -> dict:
    """Elements each buffer's pointer reaches, where the sizes are known: the scratch tensors
    autotuning runs kernels on are this large."""
    extents = {}
    for buffer in [*graph.inputs, *graph.buffers, *scheduler.kept]:
        layout = getattr(buffer, "layout", None)
        if not isinstance(layout, Layout):
            continue
        extent = _extent(layout)
        if extent.is_number and all(sympy.sympify(size).is_number for size in layout.size):
            extents[buffer.name] = 0 if any(int(size) == 0 for size in layout.size) else int(extent)
    for name, tensor in graph.constants.items():
        extents[name] = tensor.storage_offset() + sum((size - 1) * abs(stride) for size, stride in
                                                      zip(tensor.shape, tensor.stride())) + 1
    return extents


def _laid_out(graph) -> list:
    """The graph's inputs and buffers that have a Layout."""
    return [buffer for buffer in [*graph.inputs, *graph.buffers] if isinstance(getattr(buffer, "layout", None), Layout)]


def _planned_offsets(graph) -> dict:
    """Storage offsets the graph planned for memory ember did not allocate (inputs, extern
    results); a kernel indexes those tensors from their data pointer, so it subtracts them."""
    return {buffer.name: buffer.layout.offset for buffer in _laid_out(graph)
            if not isinstance(buffer, ComputedBuffer) and buffer.layout.offset != 0}


def _maybe_empty(graph) -> frozenset:
    """Buffers whose size may be 0 (their loads are masked in every dimension of the kernel)."""
    return frozenset(buffer.name for buffer in _laid_out(graph) if product(buffer.layout.size).is_zero is not False)


def _needs_int64(graph) -> bool:
    """Does some buffer reach past what int32 indices address (or may it, with symbolic sizes)?"""
    extents = [_extent(buffer.layout) for buffer in _laid_out(graph)]
    return any(not extent.is_number or int(extent) >= INT32_LIMIT for extent in extents)
