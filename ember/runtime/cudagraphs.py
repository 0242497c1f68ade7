"""CUDA graphs around a compiled graph's wrapper (`mode="reduce-overhead"`,
`ember.config.cudagraphs`): the wrapper's launches and extern calls recorded once, then replayed
with one launch.  Call 1 runs the wrapper as it is (compiles kernels, warms cuBLAS); call 2
records it (a warm-up on a side stream, then capture into a private pool); later calls with the
same input addresses replay, and an input at a new address is copied into a buffer of the graph
from then on (recorded again once).

A replay overwrites the graph's outputs.  A recording hands out its outputs themselves (fresh
tensor objects over its memory) and replays only while no one holds them (the storages' use
counts say); when the last results are still held (`y = model(x)` in a loop) a second such
recording takes the call, and when both are held a third whose results are copies.  Recordings
that hand out their outputs have a memory pool each; the copying one shares ember's.  Outputs
larger than DIRECT_BYTES are always copied.

Graphs are not used (the reason logged on the fallbacks channel) when an input is on the CPU, the
graph draws random numbers, it checks indices through host memory, an output is (a view of) an
input or of another output, capturing fails, or inputs keep moving (MAX_RECORDINGS).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from .. import logs

log_fallbacks = logs.get("fallbacks")

MAX_RECORDINGS = 4


@functools.lru_cache(maxsize=None)
def _pool():
    """The memory pool recordings whose results are copies share (made at first use)."""
    return torch.cuda.graph_pool_handle()


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


class _Recording:
    """One captured graph: its input buffers, outputs and per-call input check, its `results` (for a
    `direct` recording aliases of its outputs, else copies) and whether it may replay now (`free`)."""

    def __init__(self, graph, static_inputs: list, outputs, replayable: Callable, direct: bool) -> None:
        self.graph, self.static_inputs, self.outputs = graph, static_inputs, outputs
        self.replayable = replayable
        self.direct = direct
        self.free, self.results = _direct_protocol(outputs) if direct else (lambda: True, lambda: _copies(outputs))


class CudaGraphRunner:
    """Calls `call` (a compiled graph's wrapper) through a recorded CUDA graph; see the module."""

    def __init__(self, call: Callable, name: str = "graph", static: bool = False) -> None:
        self.call = call
        self.name = name
        # static: no symbolic sizes, so callers (guards, the AOT layer's key) hand it inputs of the
        # metadata it was compiled for; a replay checks only their addresses
        self.static = static
        self.disabled: str | None = None
        self.calls = 0
        self.recordings = 0  # graphs captured, all generations
        self.generations = 0  # times the inputs moved (every recording captured again)
        self.live: list[_Recording] = []  # this generation's recordings, tried in order
        self.copied: set[int] = set()  # inputs copied into the graph's buffers
        self.signature: list = []
        self.direct_allowed = False  # (decided at the first call, from the outputs' size)

    @property
    def graph(self):
        return self.live[0].graph if self.live else None

    def __call__(self, *args):
        for recording in self.live:  # (the common case first: a recording that may replay)
            if recording.replayable(args) and recording.free():
                for index in self.copied:
                    recording.static_inputs[index].copy_(args[index])
                recording.graph.replay()
                return recording.results()
        self.calls += 1
        if self.disabled is not None:
            return self.call(*args)
        if self.calls == 1:
            outputs = self.call(*args)
            self.direct_allowed = _direct_allowed(outputs)
            return outputs
        return self._record_and_replay(args)

    def _record_and_replay(self, args):
        reason = _unsupported_inputs(args)
        if reason is not None:
            return self._disable(reason, args)
        if self.live and not self.live[0].replayable(args):  # inputs moved or changed: a new generation
            self.copied |= {i for i, (arg, (_, pointer)) in enumerate(zip(args, self.signature))
                            if isinstance(arg, torch.Tensor) and arg.data_ptr() != pointer}
            self.live = []
        if not self.live:
            if self.generations >= MAX_RECORDINGS:
                return self._disable(f"inputs changed address or metadata {self.generations} times", args)
            self.generations += 1
        # Every live recording's outputs are held: another recording, direct while there are fewer
        # than DIRECT_RECORDINGS, then one whose results are copies (always free: the last one).
        direct = self.direct_allowed and sum(r.direct for r in self.live) < DIRECT_RECORDINGS
        try:
            recording = self._record(args, direct)
        except Exception as error:  # noqa: BLE001 - a wrapper that cannot be captured runs as it is
            torch.cuda.synchronize()
            return self._disable(f"capturing it failed ({type(error).__name__}: {str(error)[:200]})", args)
        if isinstance(recording, str):
            return self._disable(recording, args)
        self.live.append(recording)
        for index in self.copied:
            recording.static_inputs[index].copy_(args[index])
        recording.graph.replay()
        return recording.results()

    # -- recording -------------------------------------------------------------------------------
    def _record(self, args, direct: bool):
        static_inputs = [torch.empty_strided(arg.size(), arg.stride(), dtype=arg.dtype, device=arg.device)
                         .copy_(arg) if index in self.copied else arg for index, arg in enumerate(args)]
        signature = [_meta(arg) for arg in static_inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # (warm-up on a side stream, as torch asks before a capture)
            self.call(*static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # A direct recording's outputs reach the caller: its own pool, so that no other graph's
        # replay writes where they live (graphs sharing a pool reuse each other's freed memory).
        with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle() if direct else _pool()):
            outputs = self.call(*static_inputs)
        self.recordings += 1
        reason = _aliasing(outputs, static_inputs)
        if reason is not None:
            return reason
        if not self.live:
            self.signature = signature
        return _Recording(graph, static_inputs, outputs, _input_check(signature, self.copied, self.static), direct)

    def _disable(self, reason: str, args):
        self.disabled = reason
        self.live = []
        log_fallbacks.debug("CUDA graphs off for %s: %s; its wrapper runs as it is", self.name, reason)
        return self.call(*args)


# Recordings per generation whose results are the graph's own outputs (two: the last call's
# results are usually still bound while the next call runs), and the largest outputs (bytes in
# all) handed out that way: each such recording has a memory pool of its own.
DIRECT_RECORDINGS = 2
DIRECT_BYTES = 64 << 20


def _flat(outputs) -> list:
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def _direct_allowed(outputs) -> bool:
    tensors = [value for value in _flat(outputs) if isinstance(value, torch.Tensor)]
    return hasattr(torch._C, "_storage_Use_Count") and \
        sum(t.untyped_storage().nbytes() for t in tensors) <= DIRECT_BYTES


def _direct_protocol(outputs) -> tuple[Callable, Callable]:
    """(free, results) of a recording whose results alias its outputs.  free: no one else holds an
    output's storage (its use count is the recording's) and its memory did not move (a caller's
    resize_).  results: a fresh tensor per output over the graph's memory (detached)."""
    namespace = {"use_count": torch._C._storage_Use_Count, "Tensor": torch.Tensor}
    checks, parts = [], []
    for index, value in enumerate(_flat(outputs)):
        namespace[f"o{index}"] = value
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()._cdata
            # (the count with only this recording's tensor alive: the storage's Python object adds one)
            checks.append(f"use_count({storage}) == {torch._C._storage_Use_Count(storage)} and "
                          f"o{index}.data_ptr() == {value.data_ptr()}")
            parts.append(f"o{index}.detach()")
        else:
            parts.append(f"o{index}")
    if isinstance(outputs, (list, tuple)):  # (the wrapper's results: a tuple, or a list)
        namespace["kind"] = type(outputs)
        made = f"kind(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"
    else:
        made = parts[0]
    source = (f"def free():\n    return {' and '.join(checks) or 'True'}\n"
              f"def results():\n    return {made}\n")
    exec(compile(source, "<ember cuda graph results>", "exec"), namespace)
    return namespace["free"], namespace["results"]


def _meta(value) -> tuple:
    """(what a recording depends on, the data pointer) of one input."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.dtype, value.device), value.data_ptr()
    return (type(value), value), None


def _input_check(signature: list, copied: set, static: bool = False) -> Callable:
    """A function of the call's inputs: the recorded metadata (not checked for a `static` graph),
    and every input not copied in at its recorded address?  One expression, written out: it runs
    at every call (a loop over a batch-1 MLP's 13 inputs cost about as much as the replay)."""
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
    produced = _storages(_flat(outputs))
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
