"""CUDA graphs around a compiled graph's wrapper (`mode="reduce-overhead"`,
`ember.config.cudagraphs`): the wrapper's kernel launches and extern calls recorded once, then
replayed with one launch.  For small batches, where launching costs more than computing.

    call 1       runs the wrapper as it is (compiles kernels, warms cuBLAS)
    call 2       records it: the inputs as given (parameters keep their memory), a warm-up run on
                 a side stream, then capture into a private memory pool
    later calls  the same input addresses: replay.  An input at a new address (a fresh batch
                 each call) is copied into a buffer of the graph from then on (recorded again
                 once).  Outputs are copies: the next replay overwrites the graph's own.

Graphs are not used (the wrapper runs as it is, the reason logged on the fallbacks channel) when
an input is on the CPU, the graph draws random numbers (a replay would repeat them), it checks
indices through host memory, an output is (a view of) an input or of another output, capturing
fails (a host sync in the wrapper), or inputs keep moving (more than MAX_RECORDINGS recordings).

Status (2026-11-24): written and tested on the CPU side only (settings, CPU graphs untouched);
its GPU tests (tests/runtime/test_cudagraphs.py) and benchmarks/gpu_cudagraphs.py have not run
on a GPU yet.
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import logs

log_fallbacks = logs.get("fallbacks")

MAX_RECORDINGS = 4
_POOL = None


def _pool():
    global _POOL
    if _POOL is None:
        _POOL = torch.cuda.graph_pool_handle()
    return _POOL


def why_not_graphs(gm: torch.fx.GraphModule, wrapper_source: str) -> str | None:
    """A reason this compiled graph cannot be replayed as a CUDA graph (None: it can)."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and \
                torch.Tag.nondeterministic_seeded in target.tags:
            return f"it draws random numbers ({target}): a replay would repeat them"
    if "index_flags" in wrapper_source:
        return "its index checks report through host memory"
    return None


class CudaGraphRunner:
    """Calls `call` (a compiled graph's wrapper) through a recorded CUDA graph; see the module."""

    def __init__(self, call: Callable, name: str = "graph", static: bool = False) -> None:
        self.call = call
        self.name = name
        # static: the graph has no symbolic sizes, so its callers (capture's guards, or the AOT
        # layer's key) hand it inputs of the metadata it was compiled for; a replay then only
        # needs the addresses checked
        self.static = static
        self.disabled: str | None = None
        self.calls = 0
        self.recordings = 0
        self.graph = None
        self.copied: set[int] = set()  # inputs copied into the graph's buffers
        self.static_inputs: list = []
        self.static_outputs = None
        self.signature: list = []

    def __call__(self, *args):
        self.calls += 1
        if self.disabled is not None or self.calls == 1:
            return self.call(*args)
        if self.graph is not None and self._replayable(args):  # (the common case, checked first)
            for index in self.copied:
                self.static_inputs[index].copy_(args[index])
            self.graph.replay()
            return _copies(self.static_outputs)
        reason = _unsupported_inputs(args)
        if reason is not None:
            return self._disable(reason, args)
        if self.graph is None or not self._replayable(args):
            if self.graph is not None:
                self.copied |= {i for i, (arg, (_, pointer)) in enumerate(zip(args, self.signature))
                                if isinstance(arg, torch.Tensor) and arg.data_ptr() != pointer}
            if self.recordings >= MAX_RECORDINGS:
                return self._disable(f"inputs changed address or metadata {self.recordings} times", args)
            try:
                reason = self._record(args)
            except Exception as error:  # noqa: BLE001 - a wrapper that cannot be captured runs as it is
                torch.cuda.synchronize()
                reason = f"capturing it failed ({type(error).__name__}: {str(error)[:200]})"
            if reason is not None:
                return self._disable(reason, args)
        for index in self.copied:
            self.static_inputs[index].copy_(args[index])
        self.graph.replay()
        return _copies(self.static_outputs)

    # -- recording -------------------------------------------------------------------------------
    def _record(self, args) -> str | None:
        self.static_inputs = [torch.empty_strided(arg.size(), arg.stride(), dtype=arg.dtype, device=arg.device)
                              .copy_(arg) if index in self.copied else arg for index, arg in enumerate(args)]
        self.signature = [_meta(arg) for arg in self.static_inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # (warm-up on a side stream, as torch asks before a capture)
            self.call(*self.static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=_pool()):
            outputs = self.call(*self.static_inputs)
        self.recordings += 1
        reason = _aliasing(outputs, self.static_inputs)
        if reason is not None:
            return reason
        self.graph, self.static_outputs = graph, outputs
        self._replayable = _input_check(self.signature, self.copied, self.static)
        return None

    def _replayable(self, args) -> bool:  # (before a recording: nothing replays)
        return False

    def _disable(self, reason: str, args):
        self.disabled = reason
        self.graph = self.static_outputs = None
        self.static_inputs = []
        log_fallbacks.debug("CUDA graphs off for %s: %s; its wrapper runs as it is", self.name, reason)
        return self.call(*args)


def _meta(value) -> tuple:
    """(what a recording depends on, the data pointer) of one input."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.dtype, value.device), value.data_ptr()
    return (type(value), value), None


def _input_check(signature: list, copied: set, static: bool = False) -> Callable:
    """A function of the call's inputs: do they have the recorded metadata (a CPU tensor differs
    in device; not checked for a `static` graph, whose callers pin it), and is every input not
    copied in at its recorded address?  Written out as one expression per input: it runs at
    every call, where a loop over a batch-1 MLP's 13 inputs cost about as much as the replay."""
    namespace: dict = {"Tensor": torch.Tensor}
    terms = [f"len(args) == {len(signature)}"]
    for index, (meta, pointer) in enumerate(signature):
        if len(meta) == 4 and isinstance(meta[0], tuple):  # a tensor
            shape, stride, dtype, device = meta
            namespace[f"dtype{index}"] = dtype
            device_index = -1 if device.type != "cuda" else \
                device.index if device.index is not None else torch.cuda.current_device()
            if static:
                if index not in copied:
                    terms.append(f"args[{index}].data_ptr() == {pointer}")
                continue
            term = (f"(a := args[{index}]).dtype is dtype{index} and a.get_device() == {device_index} and "
                    f"a.shape == {shape!r} and a.stride() == {stride!r}")
            if index not in copied:
                term += f" and a.data_ptr() == {pointer}"
            terms.append(f"(isinstance(args[{index}], Tensor) and {term})")
        else:
            namespace[f"value{index}"] = meta
            terms.append(f"((type(args[{index}]), args[{index}]) == value{index})")
    source = "def replayable(args):\n    return (" + "\n            and ".join(terms) + ")\n"
    exec(compile(source, "<ember cuda graph input check>", "exec"), namespace)
    return namespace["replayable"]


def _unsupported_inputs(args) -> str | None:
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type != "cuda":
            return f"an input lives on {arg.device}"
    return None


def _storages(values) -> list:
    return [value.untyped_storage().data_ptr() for value in values if isinstance(value, torch.Tensor)]


def _aliasing(outputs, inputs) -> str | None:
    flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    produced = _storages(flat)
    if len(set(produced)) != len(produced):
        return "two outputs share memory"
    if set(produced) & set(_storages(inputs)):
        return "an output is (a view of) an input"
    return None


def _copies(outputs):
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(_copy(output) for output in outputs)
    return _copy(outputs)


def _copy(value):
    """A copy with the same storage offset and strides (the AOT runtime re-makes views of
    outputs from them); the graph's own output is overwritten by the next replay."""
    if not isinstance(value, torch.Tensor):
        return value
    storage = value.untyped_storage()
    if value.storage_offset() == 0 and value.is_contiguous() and \
            storage.nbytes() == value.numel() * value.element_size():
        return value.clone()  # (the whole storage, contiguous: one allocation and one copy)
    raw = torch.empty(0, dtype=torch.uint8, device=value.device).set_(storage)
    fresh = torch.empty(storage.nbytes(), dtype=torch.uint8, device=value.device).copy_(raw)
    return torch.empty(0, dtype=value.dtype, device=value.device).set_(
        fresh.untyped_storage(), value.storage_offset(), value.size(), value.stride())
